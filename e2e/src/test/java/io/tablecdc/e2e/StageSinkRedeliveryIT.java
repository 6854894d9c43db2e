package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;

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
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Kafka Connect delivers the whole collection of a {@code put()} again after a {@code RetriableException} thrown
 * part-way through it. Here the catalog refuses, once, the registration of a table that appears in the middle of a
 * collection (a trigger of this test's own raises SQLSTATE 57P03, "cannot connect now", on the first insert of that
 * table's row): the records before it in the same collection were already taken and must not be taken again.
 */
class StageSinkRedeliveryIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DB = "sink_redeliver_catalog";
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA).build();
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

    private static Struct key(long id) {
        return new Struct(KEY).put("id", id);
    }

    private static Struct row(long id) {
        return new Struct(VALUE).put("id", id).put("customer", "c" + id);
    }

    @Test
    void aCatalogOutageInTheMiddleOfAPutNeitherDoublesNorShortensABatch() throws Exception {
        String flow = "flow-redeliver";
        String topic = "sinkredeliver.mixed";
        try (Connection c = stack.postgres().connect(DB); Statement s = c.createStatement()) {
            s.execute("CREATE SEQUENCE redeliver_fail");
            s.execute("CREATE FUNCTION redeliver_fail_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                    + " IF NEW.source_table_identifier = 'redeliver.b' AND nextval('redeliver_fail') = 1 THEN"
                    + "   RAISE EXCEPTION 'the catalog is starting up (test)' USING ERRCODE = '57P03';"
                    + " END IF; RETURN NEW; END $$");
            s.execute("CREATE TRIGGER redeliver_fail_once BEFORE INSERT ON cdc_table_replication_state"
                    + " FOR EACH ROW EXECUTE FUNCTION redeliver_fail_once()");
        }
        // table a cannot be loaded until this test drops this table: its complete batch stays staged meanwhile
        clickhouse.execute("CREATE TABLE redeliver_a (id Int64, customer Int64, _tablecdc_version UInt64, _tablecdc_is_deleted UInt8)"
                + " ENGINE = ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted) ORDER BY id").get().close();
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            // put 1 (max.poll.records=3): the first three rows of a's batch 1
            producer.send(topic, key(1), row(1), Headers.of(flow, "redeliver.a", "c", 1, 1, false));
            producer.send(topic, key(2), row(2), Headers.of(flow, "redeliver.a", "c", 2, 1, false));
            producer.send(topic, key(3), row(3), Headers.of(flow, "redeliver.a", "c", 3, 1, false));
            // put 2: a's batch 1 closes, c's batch 1 opens, then b's registration fails: the collection comes again
            producer.send(topic, key(4), row(4), Headers.of(flow, "redeliver.a", "c", 4, 1, true));
            producer.send(topic, key(1), row(1), Headers.of(flow, "redeliver.c", "c", 1, 1, false));
            producer.send(topic, key(1), row(1), Headers.of(flow, "redeliver.b", "c", 1, 1, false));
            // put 3
            producer.send(topic, key(2), row(2), Headers.of(flow, "redeliver.c", "c", 2, 1, true));
            producer.send(topic, key(2), row(2), Headers.of(flow, "redeliver.b", "c", 2, 1, true));
        }
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "redeliver");
        config.put("topics", topic);
        config.put("stage.local.dir", StackPaths.workDir("sink-redeliver-local").toString());
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "1000");
        config.put("consumer.override.max.poll.records", "3");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-redeliver", config);
        rest.awaitRunning("sink-redeliver", 1, Duration.ofSeconds(60));

        awaitCatalog(flow, "redeliver.b", "normalized_batch_id::text", "1", Duration.ofSeconds(60));
        awaitCatalog(flow, "redeliver.c", "normalized_batch_id::text", "1", Duration.ofSeconds(60));
        assertTrue(failuresInjected() >= 1, "the catalog never refused table b's registration");
        clickhouse.execute("DROP TABLE redeliver_a").get().close();
        awaitCatalog(flow, "redeliver.a", "normalized_batch_id::text", "1", Duration.ofSeconds(60));

        assertEquals("4", catalogValue(flow, "redeliver.a", "inserts_count::text"), "rows counted for a's batch 1");
        assertEquals("2", catalogValue(flow, "redeliver.c", "inserts_count::text"), "rows counted for c's batch 1");
        assertEquals("2", catalogValue(flow, "redeliver.b", "inserts_count::text"), "rows counted for b's batch 1");
        assertEquals(4, count("SELECT count() AS n FROM redeliver_a FINAL"), "rows of a");
        assertEquals(2, count("SELECT count() AS n FROM redeliver_c FINAL"), "rows of c");
        assertEquals(2, count("SELECT count() AS n FROM redeliver_b FINAL"), "rows of b");
        assertEquals(java.util.List.of("RUNNING", "RUNNING"), rest.states("sink-redeliver"));
        rest.delete("sink-redeliver");
    }

    /**
     * Records of another producer (no tablecdc headers): the sink cuts their batches itself. Two batches wait staged
     * (their table cannot be loaded yet) when the task restarts; the batch cut after the restart must get a new id,
     * not the id of a batch still waiting.
     */
    @Test
    void batchIdsCutForOtherProducersAfterARestartDoNotReplaceStagedBatches() throws Exception {
        String connector = "sink-foreign";
        String topic = "sinkredeliver.foreign";
        clickhouse.execute("CREATE TABLE sinkredeliver_foreign (id Int64, customer Int64, _tablecdc_version UInt64, _tablecdc_is_deleted UInt8)"
                + " ENGINE = ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted) ORDER BY id").get().close();
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            for (long id = 1; id <= 4; id++) {
                producer.send(topic, key(id), row(id), Map.of());
            }
        }
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "foreign");
        config.put("topics", topic);
        config.put("batch.max.rows", "2");
        config.put("batch.max.ms", "600000");
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "1000");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(connector, config);
        rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
        awaitStaged(connector, topic, "count(*)", "2", Duration.ofSeconds(60));

        // the task stops (committing the offsets of both staged batches) and starts again
        rest.restart(connector, true, false);
        rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers())) {
            for (long id = 5; id <= 6; id++) {
                producer.send(topic, key(id), row(id), Map.of());
            }
        }
        awaitStaged(connector, topic, "count(*)::text || '/' || coalesce(sum(rows), 0)::text", "3/6", Duration.ofSeconds(60));
        clickhouse.execute("DROP TABLE sinkredeliver_foreign").get().close();
        awaitCatalog(connector, topic, "inserts_count::text", "6", Duration.ofSeconds(60));
        assertEquals(6, count("SELECT count() AS n FROM sinkredeliver_foreign FINAL"), "rows loaded");
        rest.delete(connector);
    }

    private static void awaitStaged(String flow, String table, String expression, String expected, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            try (Connection c = stack.postgres().connect(DB);
                 PreparedStatement ps = c.prepareStatement("SELECT " + expression + " FROM cdc_table_avro_stage"
                         + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    last = rs.getString(1);
                }
            }
            if (expected.equals(last)) {
                return;
            }
            Thread.sleep(300);
        }
        throw new AssertionError("stage rows of " + flow + "/" + table + ": " + expression + " never became '" + expected
                + "'; last '" + last + "'");
    }

    private static long count(String sql) {
        return clickhouse.queryAll(sql).get(0).getLong("n");
    }

    private static long failuresInjected() throws Exception {
        try (Connection c = stack.postgres().connect(DB); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM redeliver_fail")) {
            rs.next();
            return rs.getLong(1);
        }
    }

    private static String catalogValue(String flow, String table, String column) throws Exception {
        try (Connection c = stack.postgres().connect(DB);
             PreparedStatement ps = c.prepareStatement("SELECT " + column + " FROM cdc_table_replication_state"
                     + " WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : "(no row)";
            }
        }
    }

    private static void awaitCatalog(String flow, String table, String column, String expected, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            last = catalogValue(flow, table, column);
            if (expected.equals(last)) {
                return;
            }
            Thread.sleep(300);
        }
        throw new AssertionError(column + " of " + flow + "/" + table + " never became '" + expected + "'; last '" + last + "'");
    }
}
