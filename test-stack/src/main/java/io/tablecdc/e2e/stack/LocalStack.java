package io.tablecdc.e2e.stack;

import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Map;

import org.apache.kafka.common.utils.internals.Exit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.e2e.bigquery.LocalBigQuery;
import io.tablecdc.e2e.clickhouse.LocalClickHouse;
import io.tablecdc.e2e.objectstore.LocalObjectStore;

/**
 * The local stack of one JVM: every component starts on first use, once, on 127.0.0.1, and stops when the
 * JVM exits (in reverse order). Tests share it and keep apart by flow, table, database and topic names;
 * a fresh stack per test would cost seconds each. Each component can be replaced by an external service
 * through its environment variable (see docs/test-stack.md).
 */
public final class LocalStack {
    private static final Logger log = LoggerFactory.getLogger(LocalStack.class);
    private static LocalStack instance;

    private final Deque<AutoCloseable> started = new ArrayDeque<>();
    private LocalKafka kafka;
    private LocalPostgres postgres;
    private ConnectWorker connect;
    private LocalClickHouse clickhouse;
    private LocalObjectStore objectStore;
    private LocalBigQuery bigquery;
    private LocalSchemaRegistry schemaRegistry;
    private ConnectWorker registryConnect;
    private Path pluginPath;

    private LocalStack() {
        // Kafka and Connect call System.exit when they fail; inside a test JVM that would deadlock the
        // shutdown hooks (or end the tests), so an in-process component may only log its exit
        Exit.setExitProcedure((code, message) -> log.warn("an in-process Kafka component asked to exit ({}): {}", code, message));
        Exit.setHaltProcedure((code, message) -> log.warn("an in-process Kafka component asked to halt ({}): {}", code, message));
        Runtime.getRuntime().addShutdownHook(new Thread(this::stopAll, "tablecdc-stack-shutdown"));
    }

    public static synchronized LocalStack get() {
        if (instance == null) {
            instance = new LocalStack();
        }
        return instance;
    }

    public synchronized LocalKafka kafka() {
        if (kafka == null) {
            kafka = track(unchecked(() -> LocalKafka.start(StackPaths.workDir("kafka"))));
        }
        return kafka;
    }

    public synchronized LocalPostgres postgres() {
        if (postgres == null) {
            postgres = track(unchecked(() -> LocalPostgres.start(StackPaths.workDir("postgres"))));
        }
        return postgres;
    }

    /** The ClickHouse engine behind its HTTP test front (or the server named by TABLECDC_CLICKHOUSE_URL). */
    public synchronized LocalClickHouse clickhouse() {
        if (clickhouse == null) {
            clickhouse = track(LocalClickHouse.start(StackPaths.workDir("clickhouse")));
        }
        return clickhouse;
    }

    /** The S3-compatible object store with the {@code tablecdc} bucket (or the one named by TABLECDC_S3_ENDPOINT). */
    public synchronized LocalObjectStore objectStore() {
        if (objectStore == null) {
            objectStore = track(LocalObjectStore.start(StackPaths.workDir("objectstore")));
        }
        return objectStore;
    }

    /** The BigQuery emulator (or the endpoint named by TABLECDC_BIGQUERY_ENDPOINT). */
    public synchronized LocalBigQuery bigquery() {
        if (bigquery == null) {
            bigquery = track(LocalBigQuery.start(StackPaths.workDir("bigquery")));
        }
        return bigquery;
    }

    /** The unzipped Hub archives, shared by every worker this stack starts. */
    public synchronized Path pluginPath() {
        if (pluginPath == null) {
            pluginPath = unchecked(() -> PluginArchives.unzipInto(StackPaths.workDir("plugins")));
        }
        return pluginPath;
    }

    /** The stack's shared in-process Connect worker (or the external one named by TABLECDC_CONNECT_URL). */
    public synchronized ConnectWorker connect() {
        if (connect == null) {
            ConnectWorker external = ConnectWorker.external();
            connect = external != null ? external : track(ConnectWorker.startInProcess(
                    ConnectWorker.workerProperties(kafka().bootstrapServers(), "tablecdc-connect", pluginPath())));
        }
        return connect;
    }

    /** The schema registry with Apicurio's Avro converter (or the registry named by TABLECDC_SCHEMA_REGISTRY_URL). */
    public synchronized LocalSchemaRegistry schemaRegistry() {
        if (schemaRegistry == null) {
            schemaRegistry = track(unchecked(() -> LocalSchemaRegistry.start(StackPaths.workDir("schema-registry"))));
        }
        return schemaRegistry;
    }

    /**
     * A second in-process Connect worker (its own cluster, on the stack's broker) whose {@code plugin.path} holds the
     * connector archives and the schema registry's converter, so that the shared worker loads exactly what it always
     * does. It is started here even when TABLECDC_CONNECT_URL names an external worker, as the crash tests start theirs.
     */
    public synchronized ConnectWorker connectWithSchemaRegistry() {
        if (registryConnect == null) {
            Map<String, String> props = ConnectWorker.workerProperties(kafka().bootstrapServers(),
                    "tablecdc-connect-registry", pluginPath());
            props.put("plugin.path", pluginPath().toAbsolutePath() + ","
                    + schemaRegistry().converterPluginPath().toAbsolutePath());
            registryConnect = track(ConnectWorker.startInProcess(props));
        }
        return registryConnect;
    }

    /** Registers something this stack must stop at exit. */
    public synchronized <T extends AutoCloseable> T track(T component) {
        started.push(component);
        return component;
    }

    /** How long stopping the whole stack may take: a forked test JVM is killed 30 s after its exit began. */
    private static final java.time.Duration STOP_BUDGET = java.time.Duration.ofSeconds(24);
    /** The longest one component may take to stop before the next is stopped regardless (at least 2 s each). */
    private static final java.time.Duration STOP_EACH = java.time.Duration.ofSeconds(10);

    /**
     * Stops what was started, newest first, each on a thread of its own and for a bounded time: a component that does
     * not stop in time (an in-process Connect worker whose web server waits for a thread, say) is left to the JVM's
     * exit and logged, and the rest (the Postgres server, the emulator's and the registry's processes) are still
     * stopped, rather than the whole JVM being killed with them still running.
     */
    private synchronized void stopAll() {
        long deadline = System.nanoTime() + STOP_BUDGET.toNanos();
        while (!started.isEmpty()) {
            AutoCloseable component = started.pop();
            String name = component.getClass().getSimpleName();
            long begin = System.nanoTime();
            Thread stopping = Thread.ofPlatform().daemon().name("tablecdc-stack-stop-" + name).start(() -> {
                try {
                    component.close();
                    log.info("stopped {} in {} ms", name, (System.nanoTime() - begin) / 1_000_000);
                } catch (Exception e) {
                    log.warn("stopping {} failed: {}", name, e.toString());
                }
            });
            long wait = Math.max(2_000_000_000L, Math.min(STOP_EACH.toNanos(), deadline - begin));
            try {
                stopping.join(java.time.Duration.ofNanos(wait));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (stopping.isAlive()) {
                log.warn("{} did not stop within {} ms; stopping the rest of the stack", name, wait / 1_000_000);
            }
        }
    }

    /** A step that may throw anything checked. */
    @FunctionalInterface
    public interface Step<T> {
        T run() throws Exception;
    }

    static <T> T unchecked(Step<T> step) {
        try {
            return step.run();
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException("starting a stack component failed: " + e, e);
        }
    }
}
