package io.tablecdc.e2e.stack;

import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A Kafka Connect worker in distributed mode whose {@code plugin.path} holds the unzipped Hub archives.
 * It runs in this JVM ({@link #startInProcess}) or as a separate JVM ({@link #startProcess}) that crash
 * tests can {@link #kill()} with SIGKILL. Several workers with the same {@code groupId} form one cluster.
 * An external worker is used instead when {@code TABLECDC_CONNECT_URL} is set.
 */
public final class ConnectWorker implements AutoCloseable {
    public static final String ENV_URL = "TABLECDC_CONNECT_URL";
    private static final Logger log = LoggerFactory.getLogger(ConnectWorker.class);

    private final URI restUrl;
    private final Connect<?> inProcess;
    private final Process process;

    private ConnectWorker(URI restUrl, Connect<?> inProcess, Process process) {
        this.restUrl = restUrl;
        this.inProcess = inProcess;
        this.process = process;
    }

    /** The worker properties for one member of the Connect cluster {@code groupId}. */
    public static Map<String, String> workerProperties(String bootstrapServers, String groupId, Path pluginPath) {
        Map<String, String> props = new HashMap<>();
        props.put("bootstrap.servers", bootstrapServers);
        props.put("group.id", groupId);
        props.put("config.storage.topic", groupId + "-configs");
        props.put("offset.storage.topic", groupId + "-offsets");
        props.put("status.storage.topic", groupId + "-status");
        props.put("config.storage.replication.factor", "1");
        props.put("offset.storage.replication.factor", "1");
        props.put("offset.storage.partitions", "5");
        props.put("status.storage.replication.factor", "1");
        props.put("status.storage.partitions", "1");
        props.put("key.converter", "org.apache.kafka.connect.json.JsonConverter");
        props.put("value.converter", "org.apache.kafka.connect.json.JsonConverter");
        props.put("key.converter.schemas.enable", "true");
        props.put("value.converter.schemas.enable", "true");
        props.put("plugin.path", pluginPath.toAbsolutePath().toString());
        props.put("plugin.discovery", "service_load");
        props.put("listeners", "http://127.0.0.1:0");
        props.put("rest.advertised.host.name", "127.0.0.1");
        props.put("offset.flush.interval.ms", "1000");
        // a killed worker leaves the group once it missed its heartbeats this long (default 10 s; 6 s is the broker's
        // least), and its tasks move to the survivors this long after (default 5 minutes): a test that kills a worker
        // waits for both, and dozens of tests do
        props.put("session.timeout.ms", "6000");
        props.put("heartbeat.interval.ms", "1500");
        props.put("scheduled.rebalance.max.delay.ms", "1000");
        props.put("task.shutdown.graceful.timeout.ms", "10000");
        props.put("connector.client.config.override.policy", "All");
        return props;
    }

    /**
     * {@code props} for a worker with exactly-once source support ({@code exactly.once.source.support=enabled},
     * KIP-618): source tasks write their records and offsets in Kafka transactions, and the worker's internal topics
     * are read with {@code read_committed}. Every worker of a cluster needs it. The broker needs the transaction
     * state log ({@link LocalKafka} sets its replication factor and min ISR to 1).
     */
    public static Map<String, String> exactlyOnce(Map<String, String> props) {
        Map<String, String> eos = new HashMap<>(props);
        eos.put("exactly.once.source.support", "enabled");
        return eos;
    }

    public static ConnectWorker external() {
        String url = StackPaths.env(ENV_URL);
        return url == null ? null : new ConnectWorker(URI.create(url), null, null);
    }

    /**
     * An in-process worker is stopped by whoever started it ({@link LocalStack}'s exit hook stops it before the broker).
     * Connect's own exit hook would run at the same time as the stack's: {@code Connect.stop()} from the second caller
     * returns at once, the stack then stopped the broker under the still-stopping herder, and the herder's last status
     * write waited for the broker until the test JVM was killed 30 s later.
     */
    private static void withoutConnectExitHook() {
        org.apache.kafka.common.utils.internals.Exit.setShutdownHookAdder((name, runnable) -> {
            if (!"connect-shutdown-hook".equals(name)) {
                Runtime.getRuntime().addShutdownHook(new Thread(runnable, name));
            }
        });
    }

    public static ConnectWorker startInProcess(Map<String, String> props) {
        long started = System.nanoTime();
        withoutConnectExitHook();
        Connect<?> connect = new ConnectDistributed().startConnect(new HashMap<>(props));
        URI url = connect.rest().serverUrl();
        log.info("Connect worker up at {} in {} ms", url, (System.nanoTime() - started) / 1_000_000);
        return new ConnectWorker(url, connect, null);
    }

    /**
     * The JVM options of a test's worker process: a 768 MiB heap, the client compiler only and the serial collector.
     * A test worker lives for seconds to minutes on a machine whose cores the suite keeps busy; the optimizing
     * compiler's threads took a third to three fifths of such a JVM's processor time, and their code is never hot long
     * enough to pay that back. Benchmarks pass options of their own (they measure the worker as deployed).
     */
    public static final List<String> TEST_JVM_ARGS = List.of("-Xmx768m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC");
    private static final List<String> DEFAULT_JVM_ARGS = TEST_JVM_ARGS;

    /** Starts the worker as its own JVM on this JVM's class path; its log goes to {@code workDir/worker.log}. */
    public static ConnectWorker startProcess(Map<String, String> props, Path workDir, Duration timeout)
            throws IOException, InterruptedException {
        return startProcess(props, workDir, timeout, Map.of(), DEFAULT_JVM_ARGS);
    }

    /**
     * As {@link #startProcess(Map, Path, Duration)}, with {@code environment} added to the process's environment
     * (what a worker's {@code ${env:…}} config provider resolves).
     */
    public static ConnectWorker startProcess(Map<String, String> props, Path workDir, Duration timeout,
                                             Map<String, String> environment) throws IOException, InterruptedException {
        return startProcess(props, workDir, timeout, environment, DEFAULT_JVM_ARGS);
    }

    /**
     * Starts the worker as its own JVM with {@code jvmArgs} (heap size, flight recorder, logging) instead of the
     * default heap; benchmarks use it to give the worker a known heap and to measure its CPU and memory apart.
     */
    public static ConnectWorker startProcess(Map<String, String> props, Path workDir, Duration timeout, List<String> jvmArgs)
            throws IOException, InterruptedException {
        return startProcess(props, workDir, timeout, Map.of(), jvmArgs);
    }

    private static ConnectWorker startProcess(Map<String, String> props, Path workDir, Duration timeout,
                                              Map<String, String> environment, List<String> jvmArgs)
            throws IOException, InterruptedException {
        Files.createDirectories(workDir);
        Path propsFile = workDir.resolve("worker.properties");
        Path urlFile = workDir.resolve("rest.url");
        Files.deleteIfExists(urlFile);
        Properties properties = new Properties();
        properties.putAll(props);
        try (OutputStream out = Files.newOutputStream(propsFile)) {
            properties.store(out, "tablecdc test worker");
        }
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(jvmArgs);
        command.add("--enable-native-access=ALL-UNNAMED");
        command.add("-cp");
        command.add(workerClassPath());
        command.add(ConnectWorkerMain.class.getName());
        command.add(propsFile.toString());
        command.add(urlFile.toString());
        ProcessBuilder builder = new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(workDir.resolve("worker.log").toFile()));
        builder.environment().putAll(environment);
        long started = System.nanoTime();
        Process process = builder.start();
        long deadline = started + timeout.toNanos();
        while (!Files.exists(urlFile) || Files.size(urlFile) == 0) {
            if (!process.isAlive()) {
                throw new IllegalStateException("the Connect worker process exited with " + process.exitValue()
                        + "; see " + workDir.resolve("worker.log"));
            }
            if (System.nanoTime() > deadline) {
                process.destroyForcibly();
                throw new IllegalStateException("the Connect worker process did not start within " + timeout
                        + "; see " + workDir.resolve("worker.log"));
            }
            Thread.sleep(100);
        }
        URI url = URI.create(Files.readString(urlFile).trim());
        log.info("Connect worker process {} up at {} in {} ms", process.pid(), url, (System.nanoTime() - started) / 1_000_000);
        return new ConnectWorker(url, null, process);
    }

    /**
     * This JVM's class path without tablecdc's own jars from a Maven repository: a worker loads the connectors only
     * from plugin.path, and a repository shared by several builds may hold a different version of them (whose catalog
     * migrations Flyway would then find through the parent class loader). The entry holding the worker's main class
     * (this module's classes or jar, which may come from a repository too) stays.
     */
    static String workerClassPath() {
        Path own = ownClassPathEntry();
        StringBuilder cp = new StringBuilder();
        for (String entry : System.getProperty("java.class.path").split(java.io.File.pathSeparator)) {
            String normalized = entry.replace('\\', '/');
            boolean isOwn = own != null && !entry.isEmpty() && Path.of(entry).toAbsolutePath().normalize().equals(own);
            // the fault agent's jar is put on the boot class path by -javaagent when a test asks for it
            if (!isOwn && (normalized.contains("/io/tablecdc/") || normalized.contains("/org/jboss/byteman/"))) {
                continue;
            }
            cp.append(cp.isEmpty() ? "" : java.io.File.pathSeparator).append(entry);
        }
        return cp.toString();
    }

    /** The class path entry (folder or jar) this class was loaded from, or null when it cannot be told. */
    private static Path ownClassPathEntry() {
        try {
            java.security.CodeSource source = ConnectWorkerMain.class.getProtectionDomain().getCodeSource();
            return source == null ? null : Path.of(source.getLocation().toURI()).toAbsolutePath().normalize();
        } catch (java.net.URISyntaxException | RuntimeException e) {
            return null;
        }
    }

    public URI restUrl() {
        return restUrl;
    }

    public ConnectRestClient rest() {
        return new ConnectRestClient(restUrl);
    }

    /** SIGKILL for a worker process: no shutdown hooks, no offset flush, no graceful task stop. */
    public void kill() throws InterruptedException {
        if (process == null) {
            throw new IllegalStateException("only a worker started with startProcess can be killed");
        }
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
    }

    /**
     * SIGSTOP for a worker process: it stops in the middle of whatever it does, holding its connections open (a long GC
     * pause, a frozen VM). Past the group's session timeout its tasks are given to the other workers; {@link #thaw}
     * lets it run on, believing for a while that it still owns them.
     */
    public void freeze() throws java.io.IOException, InterruptedException {
        signal("STOP");
    }

    /** SIGCONT for a worker process {@link #freeze frozen} before. */
    public void thaw() throws java.io.IOException, InterruptedException {
        signal("CONT");
    }

    private void signal(String name) throws java.io.IOException, InterruptedException {
        if (process == null || !process.isAlive()) {
            throw new IllegalStateException("only a running worker started with startProcess can be sent SIG" + name);
        }
        Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).inheritIO().start();
        if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
            throw new IllegalStateException("kill -" + name + " " + process.pid() + " failed");
        }
    }

    /** The worker's process id, or empty for an in-process or external worker. */
    public java.util.OptionalLong pid() {
        return process == null ? java.util.OptionalLong.empty() : java.util.OptionalLong.of(process.pid());
    }

    public boolean alive() {
        return process == null || process.isAlive();
    }

    @Override
    public void close() throws InterruptedException {
        if (inProcess != null) {
            inProcess.stop();
            inProcess.awaitStop();
        }
        if (process != null && process.isAlive()) {
            process.destroy();
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        }
    }
}
