package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

import com.clickhouse.client.api.Client;

import io.tablecdc.catalog.CatalogMigrations;
import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.StatusScript;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * A table without a key is a plain MergeTree: nothing collapses a row loaded twice, so a batch must be loaded exactly
 * once even when the sink dies after the insert and before the catalog records it, and the batch is then delivered
 * again before it is normalized. The death is stood in for by the catalog refusing (a trigger of this test's own) to
 * raise the table's normalized batch id until the test lets it; the batch is delivered again because its source sends
 * it again, as a source does after a restart: the copy is dropped, the staged batch kept and its load repeated, with
 * the same deduplication token.
 *
 * <p>Records of other producers (no tablecdc headers) get batches the sink cuts itself, under ids it reserves anew,
 * and their versions are Kafka offsets: a replay of records staged before is dropped rather than staged under new
 * batch ids, and a topic whose offsets went back (recreated) stops its table rather than load rows that would lose to
 * the old ones.
 */
class StageSinkKeylessIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DB = "sink_keyless_catalog";
    private static final Schema VALUE = SchemaBuilder.struct().name("event").field("id", Schema.INT64_SCHEMA)
            .field("kind", Schema.STRING_SCHEMA).build();
    /** A condition on a table's catalog row: no stage row of it waits to be loaded. */
    private static final String NOTHING_STAGED = "NOT EXISTS (SELECT 1 FROM cdc_table_avro_stage a"
            + " WHERE a.flow_name = cdc_table_replication_state.flow_name"
            + " AND a.source_table_identifier = cdc_table_replication_state.source_table_identifier)";
    private static String catalogUrl;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase(DB);
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setUrl(catalogUrl);
        ds.setUser(stack.postgres().user());
        ds.setPassword(stack.postgres().password());
        CatalogMigrations.migrate(ds);
        clickhouse = stack.clickhouse().client();
    }

    private static void sendBatch(String topic, String flow, String table) throws Exception {
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, null, new Struct(VALUE).put("id", 1L).put("kind", "open"), Headers.of(flow, table, "c", 1, 1, false));
            producer.send(topic, null, new Struct(VALUE).put("id", 2L).put("kind", "close"), Headers.of(flow, table, "c", 2, 1, true));
        }
    }

    @Test
    void aKeylessBatchLoadedBeforeACrashAndDeliveredAgainIsLoadedOnce() throws Exception {
        String flow = "flow-keyless";
        String table = "keyless.events";
        String topic = "sinkkeyless.events";
        try (Connection c = stack.postgres().connect(DB); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE block_normalize (x int)");
            s.execute("INSERT INTO block_normalize VALUES (1)");
            s.execute("CREATE FUNCTION block_normalize() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                    + " IF NEW.source_table_identifier = 'keyless.events' AND NEW.normalized_batch_id > OLD.normalized_batch_id"
                    + "   AND EXISTS (SELECT 1 FROM block_normalize) THEN"
                    + "   RAISE EXCEPTION 'the catalog refuses to record the load (test)' USING ERRCODE = '57P03';"
                    + " END IF; RETURN NEW; END $$");
            s.execute("CREATE TRIGGER block_normalize BEFORE UPDATE ON cdc_table_replication_state"
                    + " FOR EACH ROW EXECUTE FUNCTION block_normalize()");
        }
        sendBatch(topic, flow, table);
        Map<String, String> config = sinkConfig("keyless", topic);
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-keyless", config);
        rest.awaitRunning("sink-keyless", 1, Duration.ofSeconds(60));

        // loaded, but not recorded as loaded
        awaitCount("SELECT count() AS n FROM keyless_events", 2, Duration.ofSeconds(60));
        awaitCatalog(flow, table, "last_error LIKE '%refuses to record the load%'", "true", Duration.ofSeconds(30));
        String firstFiles = stageFiles(flow, table);

        // the source sends the batch again (as after a restart before its offsets were committed): the copy is
        // consumed and dropped, the staged batch is kept, and its load is repeated with the same deduplication token
        sendBatch(topic, flow, table);
        awaitCommittedOffset("connect-sink-keyless", new TopicPartition(topic, 0), 4, Duration.ofSeconds(60));
        assertEquals(firstFiles, stageFiles(flow, table), "the staged batch is kept, not replaced by its copy");

        try (Connection c = stack.postgres().connect(DB); Statement s = c.createStatement()) {
            s.execute("DELETE FROM block_normalize");
        }
        awaitCatalog(flow, table, "normalized_batch_id::text", "1", Duration.ofSeconds(60));
        assertEquals(2, count("SELECT count() AS n FROM keyless_events"), "raw rows of the keyless table");
        assertEquals(2, count("SELECT count() AS n FROM keyless_events_current"), "rows through the _current view");
        assertEquals("MergeTree", clickhouse.queryAll("SELECT engine FROM system.tables WHERE database = currentDatabase()"
                + " AND name = 'keyless_events'").get(0).getString("engine"));
        rest.delete("sink-keyless");
    }

    /**
     * Issue 46 item 3: the sink's offsets are set back into a batch staged and loaded before (as after a worker killed
     * before its offset commit, or an offset reset), so the records come again and a batch cut by size now spans the
     * old boundary of a batch cut by time. The records staged before are dropped as replays: the keyless table (plain
     * MergeTree) holds each row once.
     */
    @Test
    void recordsOfAnotherProducerReplayedIntoAKeylessTableAreLoadedOnce() throws Exception {
        String connector = "sink-keyless-replay";
        String topic = "sinkkeyless.replay";
        ConnectRestClient rest = stack.connect().rest();
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            for (long id = 1; id <= 4; id++) {
                producer.send(topic, null, new Struct(VALUE).put("id", id).put("kind", "e" + id), Map.of());
            }
            Map<String, String> config = sinkConfig("keyless-replay", topic);
            // offsets 0-2 are cut by size, offset 3 by time
            config.put("batch.max.rows", "3");
            config.put("batch.max.ms", "1500");
            rest.putConfig(connector, config);
            rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
            awaitCommittedOffset("connect-" + connector, new TopicPartition(topic, 0), 4, Duration.ofSeconds(60));
            awaitCatalog(connector, topic, "normalized_batch_id > 0 AND " + NOTHING_STAGED, "true",
                    Duration.ofSeconds(60));
            assertEquals(4, count("SELECT count() AS n FROM sinkkeyless_replay"), "rows before the replay");

            // the offsets go back into the first batch: offsets 1-3 come again (a size-cut batch of three across the
            // old boundary), then two new records
            stop(rest, connector);
            rest.alterOffsets(connector, List.of(Map.of("partition", Map.of("kafka_topic", topic, "kafka_partition", 0),
                    "offset", Map.of("kafka_offset", 1))));
            rest.resume(connector);
            rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
            for (long id = 5; id <= 6; id++) {
                producer.send(topic, null, new Struct(VALUE).put("id", id).put("kind", "e" + id), Map.of());
            }
            awaitCommittedOffset("connect-" + connector, new TopicPartition(topic, 0), 6, Duration.ofSeconds(60));
            awaitCatalog(connector, topic, "inserts_count >= 6 AND " + NOTHING_STAGED, "true",
                    Duration.ofSeconds(60));
            assertEquals("6/6", clickhouse.queryAll("SELECT toString(count()) || '/' || toString(uniqExact(id)) AS n"
                    + " FROM sinkkeyless_replay").get(0).getString("n"), "rows/distinct ids after the replay");
        } finally {
            rest.delete(connector);
        }
    }

    /**
     * Issue 46 item 5: the topic of another producer is deleted and created again (as the sink's own refusal of a
     * topic with several partitions tells operators to do), so its offsets start over below those staged, and its
     * rows, versioned by offset, would lose to the old ones under {@code FINAL}. The sink stops the table with an
     * error naming the topic and the offsets; the documented reload then loads the new topic.
     */
    @Test
    void aRecreatedTopicOfAnotherProducerStopsItsTableUntilReloaded() throws Exception {
        String connector = "sink-keyless-recreated";
        String topic = "sinkkeyless.recreated";
        Schema keySchema = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
        ConnectRestClient rest = stack.connect().rest();
        try {
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
                for (String kind : List.of("a", "b", "c")) {
                    producer.send(topic, new Struct(keySchema).put("id", 9L), new Struct(VALUE).put("id", 9L).put("kind", kind), Map.of());
                }
                producer.send(topic, new Struct(keySchema).put("id", 1L), new Struct(VALUE).put("id", 1L).put("kind", "old"), Map.of());
            }
            Map<String, String> config = sinkConfig("keyless-recreated", topic);
            config.put("batch.max.rows", "2");
            rest.putConfig(connector, config);
            rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
            awaitCatalog(connector, topic, "inserts_count::text", "4", Duration.ofSeconds(60));
            assertEquals("1=old,9=c", rows("sinkkeyless_recreated FINAL"));

            stop(rest, connector);
            recreateTopic(topic);
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers())) {
                producer.send(topic, new Struct(keySchema).put("id", 1L), new Struct(VALUE).put("id", 1L).put("kind", "new"), Map.of());
            }
            rest.resume(connector);
            rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
            awaitCatalog(connector, topic, "coalesce(last_error LIKE '%the offsets of topic " + topic + " partition 0 went back:"
                    + " its record at offset 0%reached offset 3%tablecdc-reload-table --flow " + connector + " --table " + topic
                    + "%', false)::text", "true", Duration.ofSeconds(60));
            assertEquals(0, count("SELECT count() AS n FROM sinkkeyless_recreated WHERE kind = 'new'"),
                    "rows of the new topic loaded under old versions");
            assertEquals("1=old,9=c", rows("sinkkeyless_recreated FINAL"));
            assertEquals(List.of("RUNNING", "RUNNING"), rest.states(connector));

            // the documented reload: stop, empty the table, forget where the sink stood, rewind, resume
            stop(rest, connector);
            clickhouse.execute("TRUNCATE TABLE sinkkeyless_recreated").get().close();
            String output = StatusScript.runTool(stack, "tablecdc-connect-clickhouse-stage-sink-*", "tablecdc-reload-table",
                    catalogUrl, "--flow", connector, "--table", topic);
            assertTrue(output != null && output.contains("normalized batch id 2 -> 0"), String.valueOf(output));
            rest.alterOffsets(connector, List.of(Map.of("partition", Map.of("kafka_topic", topic, "kafka_partition", 0),
                    "offset", Map.of("kafka_offset", 0))));
            rest.resume(connector);
            rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
            awaitCatalog(connector, topic, "inserts_count::text", "1", Duration.ofSeconds(60));
            assertEquals("1=new", rows("sinkkeyless_recreated FINAL"));
        } finally {
            rest.delete(connector);
        }
    }

    /** A stage sink of {@code topic}, its files under stage prefix {@code name}, retrying its loads within a second. */
    private static Map<String, String> sinkConfig(String name, String topic) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, name);
        config.put("topics", topic);
        config.put("stage.local.dir", StackPaths.workDir("sink-" + name + "-local").toString());
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "1000");
        return config;
    }

    private static void stop(ConnectRestClient rest, String connector) throws InterruptedException {
        rest.stop(connector);
        rest.awaitStatus(connector, st -> "STOPPED".equals(st.path("connector").path("state").asText()), Duration.ofSeconds(60));
    }

    /** Deletes {@code topic} and creates it again with one partition, once Kafka has let go of the old one. */
    private static void recreateTopic(String topic) throws Exception {
        try (Admin a = Admin.create(Map.<String, Object>of("bootstrap.servers", stack.kafka().bootstrapServers()))) {
            a.deleteTopics(List.of(topic)).all().get();
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (true) {
                try {
                    a.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
                    return;
                } catch (java.util.concurrent.ExecutionException e) {
                    if (!(e.getCause() instanceof org.apache.kafka.common.errors.TopicExistsException)
                            || System.nanoTime() > deadline) {
                        throw e;
                    }
                    Thread.sleep(300);
                }
            }
        }
    }

    /** The rows of {@code from} as {@code id=kind}, by id. */
    private static String rows(String from) {
        return String.join(",", clickhouse.queryAll("SELECT id, kind FROM " + from + " ORDER BY id").stream()
                .map(r -> r.getLong("id") + "=" + r.getString("kind")).toList());
    }

    private static void awaitCommittedOffset(String group, TopicPartition tp, long expected, Duration timeout) throws Exception {
        Properties admin = new Properties();
        admin.put("bootstrap.servers", stack.kafka().bootstrapServers());
        try (Admin a = Admin.create(admin)) {
            long deadline = System.nanoTime() + timeout.toNanos();
            Long committed = null;
            while (System.nanoTime() < deadline) {
                OffsetAndMetadata o = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().get(tp);
                committed = o == null ? null : o.offset();
                if (committed != null && committed == expected) {
                    return;
                }
                Thread.sleep(300);
            }
            assertEquals(Long.valueOf(expected), committed, "committed offset of " + tp);
        }
    }

    private static long count(String sql) {
        return clickhouse.queryAll(sql).get(0).getLong("n");
    }

    private static void awaitCount(String sql, long expected, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            try {
                long n = count(sql);
                if (n == expected) {
                    return;
                }
                last = Long.toString(n);
            } catch (RuntimeException e) {
                last = e.getMessage();
            }
            Thread.sleep(300);
        }
        throw new AssertionError(sql + " never gave " + expected + "; last " + last);
    }

    private static String stageFiles(String flow, String table) throws Exception {
        try (Connection c = stack.postgres().connect(DB);
             PreparedStatement ps = c.prepareStatement("SELECT coalesce(string_agg(avro_files::text, ','), '') FROM cdc_table_avro_stage"
                     + " WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getString(1);
            }
        }
    }

    private static void awaitCatalog(String flow, String table, String expression, String expected, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            try (Connection c = stack.postgres().connect(DB);
                 PreparedStatement ps = c.prepareStatement("SELECT (" + expression + ")::text FROM cdc_table_replication_state"
                         + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                try (ResultSet rs = ps.executeQuery()) {
                    last = rs.next() ? rs.getString(1) : "(no row)";
                }
            }
            if (expected.equals(last)) {
                return;
            }
            Thread.sleep(300);
        }
        throw new AssertionError(expression + " of " + flow + "/" + table + " never became '" + expected + "'; last '" + last + "'");
    }
}
