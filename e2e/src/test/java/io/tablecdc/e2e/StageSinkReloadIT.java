package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.e2e.faults.FaultProxy;
import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.StatusScript;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The procedures "Reload one table into ClickHouse" and "A batch ClickHouse refuses" of docs/operations.md, step by step,
 * as an operator runs them.
 */
class StageSinkReloadIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DB = "sink_reload_catalog";
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA).build();
    private static String catalogUrl;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase(DB);
        clickhouse = stack.clickhouse().client();
    }

    private static Struct key(long id) {
        return new Struct(KEY).put("id", id);
    }

    private static Struct row(long id, String customer) {
        return new Struct(VALUE).put("id", id).put("customer", customer);
    }

    @Test
    void theDocumentedReloadLoadsTheTableAgainFromKafka() throws Exception {
        String flow = "flow-reload";
        String table = "reload.t";
        String topic = "sinkreload.t";
        String connector = "sink-reload";
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, key(1), row(1, "a"), Headers.of(flow, table, "c", 1, 1, false));
            producer.send(topic, key(2), row(2, "b"), Headers.of(flow, table, "c", 2, 1, true));
            producer.send(topic, key(1), row(1, "a2"), Headers.of(flow, table, "u", 3, 2, false));
            producer.send(topic, key(3), row(3, "c"), Headers.of(flow, table, "c", 4, 2, true));
        }
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "reload");
        config.put("topics", topic);
        config.put("stage.local.dir", StackPaths.workDir("sink-reload-local").toString());
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(connector, config);
        rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
        awaitCatalog(flow, table, "normalized_batch_id::text", "2", Duration.ofSeconds(60));
        String expected = "[1=a2, 2=b, 3=c]";
        assertEquals(expected, rows());

        // 1. stop the sink
        rest.stop(connector);
        rest.awaitStatus(connector, s -> "STOPPED".equals(s.path("connector").path("state").asText())
                && s.path("tasks").isEmpty(), Duration.ofSeconds(60));
        // 2. empty the ClickHouse table
        clickhouse.execute("TRUNCATE TABLE reload_t").get().close();
        // 3. reset where the sink stands in the table
        String output = StatusScript.runTool(stack, "tablecdc-connect-clickhouse-stage-sink-*", "tablecdc-reload-table", catalogUrl,
                "--flow", flow, "--table", table);
        assertTrue(output != null && output.contains("normalized batch id 2 -> 0"), String.valueOf(output));
        // 4. rewind the sink's offsets of the table's topic
        rest.alterOffsets(connector, List.of(Map.of("partition", Map.of("kafka_topic", topic, "kafka_partition", 0),
                "offset", Map.of("kafka_offset", 0))));
        // 5. resume
        rest.resume(connector);
        rest.awaitRunning(connector, 1, Duration.ofSeconds(60));

        awaitCatalog(flow, table, "normalized_batch_id::text || '/' || inserts_count::text || '/' || updates_count::text",
                "2/3/1", Duration.ofSeconds(60));
        assertEquals(expected, rows(), "rows after the reload");
        rest.delete(connector);
    }

    /**
     * The procedure "A batch ClickHouse refuses" of docs/operations.md: a ClickHouse table with a constraint that row 2
     * violates refuses batch 2 on every retry, and batch 3 waits behind it; with the sink stopped, the batch is
     * quarantined (a second run of the command by mistake leaves batch 3 alone), the sink resumed, and batch 3 loads
     * while batch 2's stage file stays in the store.
     */
    @Test
    void aBatchClickHouseRefusesIsQuarantinedAndTheBatchesAfterItLoad() throws Exception {
        String flow = "flow-quarantine";
        String table = "quarantine.t";
        String topic = "sinkquarantine.t";
        String connector = "sink-quarantine";
        clickhouse.execute("DROP TABLE IF EXISTS quarantine_t").get().close();
        clickhouse.execute("CREATE TABLE quarantine_t (id Int64, customer String, _tablecdc_version UInt128,"
                + " _tablecdc_is_deleted UInt8, CONSTRAINT not_two CHECK id != 2)"
                + " ENGINE = ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted) ORDER BY id").get().close();
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, key(1), row(1, "a"), Headers.of(flow, table, "c", 1, 1, true));
            producer.send(topic, key(2), row(2, "refused"), Headers.of(flow, table, "c", 2, 2, true));
            producer.send(topic, key(3), row(3, "c"), Headers.of(flow, table, "c", 3, 3, true));
        }
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "quarantine");
        config.put("topics", topic);
        config.put("stage.local.dir", StackPaths.workDir("sink-quarantine-local").toString());
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "1000");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(connector, config);
        rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
        awaitCatalog(flow, table, "normalized_batch_id::text || '/' || (last_error LIKE '%not_two%')::text", "1/true",
                Duration.ofSeconds(60));
        Thread.sleep(2000);
        awaitCatalog(flow, table, "normalized_batch_id::text", "1", Duration.ofSeconds(5));

        rest.stop(connector);
        rest.awaitStatus(connector, s -> "STOPPED".equals(s.path("connector").path("state").asText())
                && s.path("tasks").isEmpty(), Duration.ofSeconds(60));
        String output = StatusScript.runTool(stack, "tablecdc-connect-clickhouse-stage-sink-*", "tablecdc-quarantine-batch",
                catalogUrl, "--flow", flow, "--table", table);
        assertTrue(output != null && output.contains("batch 2 (1 rows, 1 stage file) set aside"), String.valueOf(output));
        // run again by mistake: batch 3 is good and must not be set aside as well
        String again = StatusScript.runTool(stack, "tablecdc-connect-clickhouse-stage-sink-*", "tablecdc-quarantine-batch",
                catalogUrl, "--flow", flow, "--table", table);
        assertTrue(again != null && again.contains("has no batch that ClickHouse refuses") && !again.contains("set aside in"),
                String.valueOf(again));
        String status = StatusScript.runTool(stack, "tablecdc-connect-clickhouse-stage-sink-*", "tablecdc-status", catalogUrl,
                "--flow", flow);
        assertTrue(status != null && status.contains("quarantine.t: batch 2 (1 rows) quarantined")
                && status.contains("not_two"), String.valueOf(status));
        rest.resume(connector);
        rest.awaitRunning(connector, 1, Duration.ofSeconds(60));

        awaitCatalog(flow, table, "normalized_batch_id::text || '/' || coalesce(last_error, '-')", "3/-", Duration.ofSeconds(60));
        List<String> loaded = new ArrayList<>();
        for (GenericRecord r : clickhouse.queryAll("SELECT id, customer FROM quarantine_t FINAL ORDER BY id")) {
            loaded.add(r.getLong("id") + "=" + r.getString("customer"));
        }
        assertEquals("[1=a, 3=c]", loaded.toString());
        String file;
        try (Connection c = stack.postgres().connect(DB);
             PreparedStatement ps = c.prepareStatement("SELECT avro_files->0->>'uri' FROM cdc_table_quarantined_batch"
                     + " WHERE flow_name = ? AND source_table_identifier = ? AND batch_id = 2")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                assertTrue(rs.next(), "batch 2 is in cdc_table_quarantined_batch");
                file = rs.getString(1);
            }
        }
        String bucket = stack.objectStore().bucket();
        assertTrue(file != null && file.startsWith("s3://" + bucket + "/"), "a stage file: " + file);
        try (software.amazon.awssdk.services.s3.S3Client s3 = stack.objectStore().newClient()) {
            String objectKey = file.substring(("s3://" + bucket + "/").length());
            assertTrue(s3.headObject(b -> b.bucket(bucket).key(objectKey)).contentLength() > 0,
                    "the quarantined batch's stage file stays in the store: " + file);
        }
        rest.delete(connector);
    }

    /**
     * A transient error is not a refusal: with ClickHouse unreachable (a proxy in front of it refuses connections) batch 2
     * fails to load and the table's last error is the sink's normalize error; the command without --batch must set
     * nothing aside (batch 2 is good) and say why, and batch 2 loads once ClickHouse is back.
     */
    @Test
    void withClickHouseUnreachableTheCommandSetsNoBatchAside() throws Exception {
        String flow = "flow-unreachable";
        String table = "unreachable.t";
        String topic = "sinkunreachable.t";
        String connector = "sink-unreachable";
        java.net.URI clickhouseUri = java.net.URI.create(stack.clickhouse().httpUrl());
        try (FaultProxy proxy = FaultProxy.start("quarantine-unreachable", clickhouseUri.getHost(), clickhouseUri.getPort())) {
            Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "unreachable");
            config.put("topics", topic);
            config.put("stage.local.dir", StackPaths.workDir("sink-unreachable-local").toString());
            config.put("normalize.backoff.initial.ms", "500");
            config.put("normalize.backoff.max.ms", "1000");
            config.put("clickhouse.url", "http://127.0.0.1:" + proxy.port());
            ConnectRestClient rest = stack.connect().rest();
            rest.putConfig(connector, config);
            rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
                producer.send(topic, key(1), row(1, "a"), Headers.of(flow, table, "c", 1, 1, true));
            }
            awaitCatalog(flow, table, "normalized_batch_id::text", "1", Duration.ofSeconds(60));

            proxy.refuse();
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
                producer.send(topic, key(2), row(2, "b"), Headers.of(flow, table, "c", 2, 2, true));
            }
            // batch 2 staged, its load failed at least twice on the outage
            awaitCatalog(flow, table, "normalized_batch_id::text || '/' || (last_error LIKE 'normalize: %')::text"
                    + " || '/' || (error_count >= 2)::text", "1/true/true", Duration.ofSeconds(60));
            rest.stop(connector);
            rest.awaitStatus(connector, s -> "STOPPED".equals(s.path("connector").path("state").asText())
                && s.path("tasks").isEmpty(), Duration.ofSeconds(60));

            String output = StatusScript.runTool(stack, "tablecdc-connect-clickhouse-stage-sink-*", "tablecdc-quarantine-batch",
                    catalogUrl, "--flow", flow, "--table", table);
            assertTrue(output != null && !output.contains("set aside in")
                    && output.contains("flow " + flow + ", table " + table + " has no batch that ClickHouse refuses")
                    && output.contains("its last error is not ClickHouse refusing a batch's data"), String.valueOf(output));
            assertEquals("[]", quarantined(flow, table), "nothing set aside");
            assertEquals("[2]", staged(flow, table), "batch 2 still waits to be loaded");

            proxy.pass();
            rest.resume(connector);
            rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
            awaitCatalog(flow, table, "normalized_batch_id::text || '/' || coalesce(last_error, '-')", "2/-", Duration.ofSeconds(60));
            assertEquals("[1=a, 2=b]", rowsOf("unreachable_t"));
            rest.delete(connector);
        }
    }

    /**
     * Batches 2, 3 and 4 wait together (ClickHouse was unreachable while they were staged) and are loaded in one INSERT,
     * which ClickHouse refuses for a constraint that row 3 violates. The sink loads them one at a time next and records
     * batch 3 as refused; the command without --batch sets aside exactly batch 3 (not batch 2, the first staged), and
     * batch 4 loads after it.
     */
    @Test
    void aRefusedLoadOfSeveralBatchesSetsAsideTheBatchClickHouseRefuses() throws Exception {
        String flow = "flow-refusedgroup";
        String table = "refusedgroup.t";
        String topic = "sinkrefusedgroup.t";
        String connector = "sink-refusedgroup";
        clickhouse.execute("DROP TABLE IF EXISTS refusedgroup_t").get().close();
        clickhouse.execute("CREATE TABLE refusedgroup_t (id Int64, customer String, _tablecdc_version UInt128,"
                + " _tablecdc_is_deleted UInt8, CONSTRAINT not_three CHECK id != 3)"
                + " ENGINE = ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted) ORDER BY id").get().close();
        java.net.URI clickhouseUri = java.net.URI.create(stack.clickhouse().httpUrl());
        try (FaultProxy proxy = FaultProxy.start("quarantine-refusedgroup", clickhouseUri.getHost(), clickhouseUri.getPort())) {
            Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "refusedgroup");
            config.put("topics", topic);
            config.put("stage.local.dir", StackPaths.workDir("sink-refusedgroup-local").toString());
            config.put("normalize.backoff.initial.ms", "500");
            config.put("normalize.backoff.max.ms", "1000");
            config.put("clickhouse.url", "http://127.0.0.1:" + proxy.port());
            ConnectRestClient rest = stack.connect().rest();
            rest.putConfig(connector, config);
            rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
                producer.send(topic, key(1), row(1, "a"), Headers.of(flow, table, "c", 1, 1, true));
            }
            awaitCatalog(flow, table, "normalized_batch_id::text", "1", Duration.ofSeconds(60));

            proxy.refuse();
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
                producer.send(topic, key(2), row(2, "b"), Headers.of(flow, table, "c", 2, 2, true));
                producer.send(topic, key(3), row(3, "refused"), Headers.of(flow, table, "c", 3, 3, true));
                producer.send(topic, key(4), row(4, "d"), Headers.of(flow, table, "c", 4, 4, true));
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (!"[2, 3, 4]".equals(staged(flow, table)) && System.nanoTime() < deadline) {
                Thread.sleep(200);
            }
            assertEquals("[2, 3, 4]", staged(flow, table), "batches 2 to 4 wait together");
            proxy.pass();
            // ClickHouse refused the data at least three times in a row: the loads that follow change nothing any more
            awaitCatalog(flow, table, "(last_error LIKE '%not_three%')::text || '/' || (error_count >= 3)::text",
                    "true/true", Duration.ofSeconds(60));
            rest.stop(connector);
            rest.awaitStatus(connector, s -> "STOPPED".equals(s.path("connector").path("state").asText())
                && s.path("tasks").isEmpty(), Duration.ofSeconds(60));

            String output = StatusScript.runTool(stack, "tablecdc-connect-clickhouse-stage-sink-*", "tablecdc-quarantine-batch",
                    catalogUrl, "--flow", flow, "--table", table);
            assertTrue(output != null && output.contains("flow " + flow + ", table " + table + ": batch 3 (1 rows, 1 stage file)"
                    + " set aside"), String.valueOf(output));
            assertEquals("[3]", quarantined(flow, table), "exactly batch 3 set aside");
            rest.resume(connector);
            rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
            awaitCatalog(flow, table, "normalized_batch_id::text || '/' || coalesce(last_error, '-')", "4/-", Duration.ofSeconds(60));
            assertEquals("[1=a, 2=b, 4=d]", rowsOf("refusedgroup_t"));
            assertEquals("[3]", quarantined(flow, table));
            rest.delete(connector);
        }
    }

    private static String quarantined(String flow, String table) throws Exception {
        return batchIds("cdc_table_quarantined_batch", flow, table);
    }

    private static String staged(String flow, String table) throws Exception {
        return batchIds("cdc_table_avro_stage", flow, table);
    }

    private static String batchIds(String catalogTable, String flow, String table) throws Exception {
        List<Long> ids = new ArrayList<>();
        try (Connection c = stack.postgres().connect(DB);
             PreparedStatement ps = c.prepareStatement("SELECT batch_id FROM \"" + catalogTable + "\""
                     + " WHERE flow_name = ? AND source_table_identifier = ? ORDER BY batch_id")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    ids.add(rs.getLong(1));
                }
            }
        }
        return ids.toString();
    }

    private static String rowsOf(String clickHouseTable) {
        List<String> out = new ArrayList<>();
        for (GenericRecord r : clickhouse.queryAll("SELECT id, customer FROM \"" + clickHouseTable + "\" FINAL ORDER BY id")) {
            out.add(r.getLong("id") + "=" + r.getString("customer"));
        }
        return out.toString();
    }

    private static String rows() {
        List<String> out = new ArrayList<>();
        for (GenericRecord r : clickhouse.queryAll("SELECT id, customer FROM reload_t FINAL ORDER BY id")) {
            out.add(r.getLong("id") + "=" + r.getString("customer"));
        }
        return out.toString();
    }

    private static void awaitCatalog(String flow, String table, String expression, String expected, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            try (Connection c = stack.postgres().connect(DB);
                 PreparedStatement ps = c.prepareStatement("SELECT " + expression + " FROM cdc_table_replication_state"
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
