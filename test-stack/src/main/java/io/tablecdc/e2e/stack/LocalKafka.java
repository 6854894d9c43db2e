package io.tablecdc.e2e.stack;

import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.metadata.storage.Formatter;
import org.apache.kafka.server.common.MetadataVersion;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.e2e.faults.FaultProxy;
import kafka.server.KafkaConfig;
import kafka.server.KafkaRaftServer;

/**
 * A single-node KRaft Kafka broker (broker and controller in one process) on 127.0.0.1, or an external
 * cluster named by {@code TABLECDC_KAFKA_BOOTSTRAP}. The local broker has a second listener behind a {@link FaultProxy}
 * ({@link #proxiedBootstrapServers}): it advertises the proxy's address, so clients that bootstrap through it reach the
 * broker only through the proxy, and a test can take Kafka away from them (a black hole, a hang) while the broker and
 * everyone else's connections stay.
 */
public final class LocalKafka implements AutoCloseable {
    public static final String ENV_BOOTSTRAP = "TABLECDC_KAFKA_BOOTSTRAP";
    private static final Logger log = LoggerFactory.getLogger(LocalKafka.class);

    private final String bootstrapServers;
    private final KafkaConfig config;
    private final FaultProxy proxy;
    private KafkaRaftServer server;

    private LocalKafka(String bootstrapServers, KafkaConfig config, KafkaRaftServer server, FaultProxy proxy) {
        this.bootstrapServers = bootstrapServers;
        this.config = config;
        this.server = server;
        this.proxy = proxy;
    }

    public static LocalKafka start(Path workDir) throws Exception {
        String external = StackPaths.env(ENV_BOOTSTRAP);
        if (external != null) {
            log.info("using the external Kafka cluster at {}", external);
            return new LocalKafka(external, null, null, null);
        }
        long started = System.nanoTime();
        int brokerPort = StackPaths.freePort();
        int controllerPort = StackPaths.freePort();
        int proxiedPort = StackPaths.freePort();
        FaultProxy proxy = FaultProxy.start("kafka", "127.0.0.1", proxiedPort);
        String logDir = workDir.resolve("kraft").toString();

        Map<String, String> props = new HashMap<>();
        props.put("process.roles", "broker,controller");
        props.put("node.id", "1");
        props.put("controller.quorum.voters", "1@127.0.0.1:" + controllerPort);
        props.put("controller.listener.names", "CONTROLLER");
        props.put("listeners", "PLAINTEXT://127.0.0.1:" + brokerPort + ",CONTROLLER://127.0.0.1:" + controllerPort
                + ",PROXIED://127.0.0.1:" + proxiedPort);
        props.put("advertised.listeners", "PLAINTEXT://127.0.0.1:" + brokerPort + ",PROXIED://127.0.0.1:" + proxy.port());
        props.put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,PROXIED:PLAINTEXT");
        props.put("inter.broker.listener.name", "PLAINTEXT");
        props.put("log.dirs", logDir);
        props.put("num.partitions", "1");
        props.put("offsets.topic.replication.factor", "1");
        props.put("offsets.topic.num.partitions", "5");
        props.put("transaction.state.log.replication.factor", "1");
        props.put("transaction.state.log.min.isr", "1");
        props.put("share.coordinator.state.topic.replication.factor", "1");
        props.put("share.coordinator.state.topic.min.isr", "1");
        props.put("group.initial.rebalance.delay.ms", "0");
        props.put("auto.create.topics.enable", "false");
        // the cleaner's default 128 MiB dedupe buffer would dominate the heap of a test JVM
        props.put("log.cleaner.dedupe.buffer.size", "2097152");
        props.put("log.cleaner.threads", "1");
        props.put("num.network.threads", "2");
        props.put("num.io.threads", "2");

        String clusterId = Uuid.randomUuid().toString();
        new Formatter()
                .setPrintStream(new java.io.PrintStream(java.io.OutputStream.nullOutputStream()))
                .setClusterId(clusterId)
                .setNodeId(1)
                .setControllerListenerName("CONTROLLER")
                .setMetadataLogDirectory(logDir)
                .setDirectories(java.util.List.of(logDir))
                .setReleaseVersion(MetadataVersion.LATEST_PRODUCTION)
                .run();

        Properties properties = new Properties();
        properties.putAll(props);
        KafkaConfig config = new KafkaConfig(properties, false);
        KafkaRaftServer server = new KafkaRaftServer(config, Time.SYSTEM);
        server.startup();
        String bootstrap = "127.0.0.1:" + brokerPort;
        log.info("Kafka broker up at {} in {} ms", bootstrap, (System.nanoTime() - started) / 1_000_000);
        return new LocalKafka(bootstrap, config, server, proxy);
    }

    /**
     * Stops the broker as a crash would look to its clients (connections gone, nothing answers on its port), leaves
     * it down for {@code down}, and starts it again on the same port and log directory: a broker restart.
     */
    public synchronized void restart(Duration down) throws InterruptedException {
        if (server == null) {
            throw new IllegalStateException("the Kafka cluster at " + bootstrapServers + " is not this stack's to restart");
        }
        log.info("Kafka broker at {}: stopping for {} ms", bootstrapServers, down.toMillis());
        server.shutdown();
        server.awaitShutdown();
        server = null;
        try {
            Thread.sleep(down.toMillis());
        } finally {
            KafkaRaftServer again = new KafkaRaftServer(config, Time.SYSTEM);
            again.startup();
            server = again;
            log.info("Kafka broker at {}: started again", bootstrapServers);
        }
    }

    public String bootstrapServers() {
        return bootstrapServers;
    }

    /**
     * The broker's address behind its proxy ({@link #proxy}): a client bootstrapped here is told the proxy's address for
     * the broker too, so all its connections pass the proxy. Not for an external cluster.
     */
    public String proxiedBootstrapServers() {
        return "127.0.0.1:" + proxy().port();
    }

    /** The proxy in front of the broker's second listener ({@link #proxiedBootstrapServers}). */
    public FaultProxy proxy() {
        if (proxy == null) {
            throw new IllegalStateException("the Kafka cluster at " + bootstrapServers + " is external: it has no proxy");
        }
        return proxy;
    }

    public synchronized boolean external() {
        return config == null;
    }

    @Override
    public synchronized void close() {
        if (server != null) {
            server.shutdown();
            server.awaitShutdown();
        }
        if (proxy != null) {
            try {
                proxy.close();
            } catch (java.io.IOException e) {
                log.debug("closing the Kafka proxy failed: {}", e.toString());
            }
        }
    }
}
