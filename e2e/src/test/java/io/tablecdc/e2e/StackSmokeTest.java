package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.postgresql.PGConnection;
import org.postgresql.PGProperty;
import org.postgresql.replication.PGReplicationStream;

import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalPostgres;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/** Proves that the Kafka broker, the Connect worker and Postgres of the local stack are real and usable. */
class StackSmokeTest {
    private final LocalStack stack = LocalStack.get();

    @Test
    void brokerStoresAndServesARecord() throws Exception {
        String bootstrap = stack.kafka().bootstrapServers();
        String topic = "smoke-" + System.nanoTime();
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        }
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(Map.of("bootstrap.servers", bootstrap),
                new StringSerializer(), new StringSerializer())) {
            producer.send(new ProducerRecord<>(topic, "k1", "hello tablecdc")).get(30, TimeUnit.SECONDS);
        }
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", "smoke-" + System.nanoTime());
        props.put("auto.offset.reset", "earliest");
        List<ConsumerRecord<String, String>> seen = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (seen.isEmpty() && System.nanoTime() < deadline) {
                consumer.poll(Duration.ofMillis(200)).forEach(seen::add);
            }
        }
        assertEquals(1, seen.size(), "records consumed from " + topic);
        assertEquals("k1", seen.get(0).key());
        assertEquals("hello tablecdc", seen.get(0).value());
    }

    @Test
    void workerLoadsTheThreeTablecdcPluginsFromTheUnzippedArchives() throws Exception {
        List<String> plugins = stack.connect().rest().connectorPlugins();
        assertTrue(plugins.contains("io.tablecdc.bigquery.BigQueryQueryCdcSourceConnector"), plugins.toString());
        assertTrue(plugins.contains("io.tablecdc.pg.PgPipelineSourceConnector"), plugins.toString());
        assertTrue(plugins.contains("io.tablecdc.clickhouse.ClickHouseStageSinkConnector"), plugins.toString());
        // the classes come from the plugin path, not from this test's class path
        assertThrowsClassNotFound("io.tablecdc.pg.PgPipelineSourceConnector");
    }

    @Test
    void workerRunsAsItsOwnProcessAndCanBeKilled() throws Exception {
        Map<String, String> props = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                "smoke-process-" + System.nanoTime(), stack.pluginPath());
        ConnectWorker worker = ConnectWorker.startProcess(props, StackPaths.workDir("worker-process"), Duration.ofSeconds(90));
        try {
            assertTrue(worker.rest().connectorPlugins().contains("io.tablecdc.clickhouse.ClickHouseStageSinkConnector"));
            worker.kill();
            assertFalse(worker.alive(), "the worker process survived SIGKILL");
        } finally {
            worker.close();
        }
    }

    @Test
    void postgresStreamsAnInsertThroughALogicalSlot() throws Exception {
        LocalPostgres pg = stack.postgres();
        String url = pg.createDatabase("smoke_replication");
        try (Connection c = DriverManager.getConnection(url, pg.user(), pg.password()); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE IF NOT EXISTS items (id bigint PRIMARY KEY, name text)");
            s.execute("DROP PUBLICATION IF EXISTS smoke_pub");
            s.execute("CREATE PUBLICATION smoke_pub FOR TABLE items");
            s.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'smoke_slot'");
            s.execute("SELECT pg_create_logical_replication_slot('smoke_slot', 'pgoutput')");
            s.execute("INSERT INTO items VALUES (42, 'replicated row')");
        }
        Properties props = new Properties();
        PGProperty.USER.set(props, pg.user());
        PGProperty.PASSWORD.set(props, pg.password());
        PGProperty.REPLICATION.set(props, "database");
        PGProperty.ASSUME_MIN_SERVER_VERSION.set(props, "10");
        PGProperty.PREFER_QUERY_MODE.set(props, "simple");
        try (Connection replication = DriverManager.getConnection(url, props)) {
            PGReplicationStream stream = replication.unwrap(PGConnection.class).getReplicationAPI()
                    .replicationStream().logical()
                    .withSlotName("smoke_slot")
                    .withSlotOption("proto_version", "1")
                    .withSlotOption("publication_names", "smoke_pub")
                    .start();
            String insertedName = null;
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (insertedName == null && System.nanoTime() < deadline) {
                ByteBuffer message = stream.readPending();
                if (message == null) {
                    Thread.sleep(20);
                    continue;
                }
                byte[] bytes = new byte[message.remaining()];
                message.get(bytes);
                // pgoutput: an 'I' message carries the new tuple with text-format values
                if (bytes[0] == 'I') {
                    String raw = new String(bytes, StandardCharsets.UTF_8);
                    insertedName = raw.contains("replicated row") ? "replicated row" : raw;
                }
            }
            stream.close();
            assertEquals("replicated row", insertedName);
        }
    }

    private static void assertThrowsClassNotFound(String className) {
        try {
            Class.forName(className);
            throw new AssertionError(className + " is on the test class path; the worker must load it from plugin.path");
        } catch (ClassNotFoundException expected) {
            // loaded only through the worker's plugin isolation
        }
    }
}
