package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.common.TablecdcTypes;
import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The ClickHouse stage sink deployed through the Connect REST API from its Hub archive, fed with records as
 * tablecdc sources write them, staging into the object store and normalizing into the ClickHouse engine.
 */
class StageSinkIT {
    private static final LocalStack stack = LocalStack.get();
    private static final Schema KEY = SchemaBuilder.struct().name("orders_key").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("orders_value")
            .field("id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA)
            .field("amount", Decimal.builder(2).optional().build())
            .field("placed_at", TablecdcTypes.microTimestamp().optional().build())
            .build();
    private static String catalogUrl;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase("sink_catalog");
        clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                .compressServerResponse(false).build();
    }

    private static Map<String, String> sinkConfig(String topicsRegex) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "stage");
        config.put("topics.regex", topicsRegex);
        config.put("stage.local.dir", StackPaths.workDir("sink-local").toString());
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "2000");
        return config;
    }

    private static Struct key(long id) {
        return new Struct(KEY).put("id", id);
    }

    private static Struct order(long id, String customer, String amount, long placedAtMicros) {
        return new Struct(VALUE).put("id", id).put("customer", customer)
                .put("amount", amount == null ? null : new BigDecimal(amount)).put("placed_at", placedAtMicros);
    }

    @Test
    void batchesOfTablecdcRecordsEndUpInReplacingMergeTreeWithUpdatesAndDeletesApplied() throws Exception {
        String topic = "sinkit.pull.orders";
        String table = "sinkit.orders";
        String flow = "flow-pull";
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, key(1), order(1, "ada", "10.50", 1_700_000_000_123_456L), Headers.of(flow, table, "r", 1, 1, false));
            producer.send(topic, key(2), order(2, "grace", "-0.01", -1L), Headers.of(flow, table, "r", 1, 1, false));
            producer.send(topic, key(3), order(3, "東京 🚀", null, 0L), Headers.of(flow, table, "r", 1, 1, true));
        }
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-pull", sinkConfig("sinkit\\.pull\\..*"));
        rest.awaitRunning("sink-pull", 1, Duration.ofSeconds(60));

        awaitRows("SELECT id, customer, toString(amount) AS amount, toString(placed_at) AS placed_at FROM sinkit_orders_current ORDER BY id",
                rows -> rows.size() == 3, Duration.ofSeconds(60));
        List<GenericRecord> rows = clickhouse.queryAll("SELECT id, customer, toString(amount) AS amount, toString(placed_at) AS placed_at"
                + " FROM sinkit_orders_current ORDER BY id");
        assertEquals("ada", rows.get(0).getString("customer"));
        assertEquals("10.5", rows.get(0).getString("amount"));
        assertEquals("2023-11-14 22:13:20.123456", rows.get(0).getString("placed_at"));
        assertEquals("-0.01", rows.get(1).getString("amount"));
        assertEquals("1969-12-31 23:59:59.999999", rows.get(1).getString("placed_at"));
        assertEquals("東京 🚀", rows.get(2).getString("customer"));

        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers())) {
            producer.send(topic, key(1), order(1, "ada lovelace", "11.00", 1_700_000_000_999_999L), Headers.of(flow, table, "u", 5, 2, false));
            producer.send(topic, key(2), null, Headers.of(flow, table, "d", 6, 2, false));
            producer.send(topic, key(4), order(4, "", "0.00", 7L), Headers.of(flow, table, "c", 7, 2, true));
            // a later batch carrying an older version of row 1 (a change that committed earlier) must not win
            producer.send(topic, key(1), order(1, "stale ada", "1.00", 1L), Headers.of(flow, table, "u", 4, 3, true));
        }
        awaitCatalog(flow, table, "normalized_batch_id::text", "3", Duration.ofSeconds(60));
        List<GenericRecord> after = clickhouse.queryAll("SELECT id, customer FROM sinkit_orders_current ORDER BY id");
        assertEquals("[[1, ada lovelace], [3, 東京 🚀], [4, ]]", describe(after));
        // the stage row goes after the normalized id is raised (and after the files): wait for that last step
        awaitNoStagedBatches(flow, table, Duration.ofSeconds(30));

        try (Connection c = stack.postgres().connect("sink_catalog");
             PreparedStatement ps = c.prepareStatement("SELECT normalized_batch_id, inserts_count, updates_count, deletes_count,"
                     + " (SELECT count(*) FROM cdc_table_avro_stage s WHERE s.flow_name = r.flow_name"
                     + "   AND s.source_table_identifier = r.source_table_identifier) AS stages"
                     + " FROM cdc_table_replication_state r WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                assertTrue(rs.next(), "no catalog row for " + table);
                assertEquals(3, rs.getLong("normalized_batch_id"));
                assertEquals(4, rs.getLong("inserts_count"));
                assertEquals(2, rs.getLong("updates_count"));
                assertEquals(1, rs.getLong("deletes_count"));
                assertEquals(0, rs.getLong("stages"), "stage rows left after normalize");
            }
        }
        var listing = stack.objectStore().newClient().listObjectsV2(b -> b.bucket(stack.objectStore().bucket()).prefix("stage/flow-pull"));
        assertEquals(0, listing.keyCount(), "stage files left after normalize: " + listing.contents());
    }

    @Test
    void pushModeFromAFileStageTakesRecordsOfOtherProducersAsUpsertsAndSendsBadOnesToTheDeadLetterQueue() throws Exception {
        String topic = "sinkit.push.events";
        Schema eventKey = SchemaBuilder.struct().name("event_key").field("id", Schema.INT32_SCHEMA).build();
        Schema event = SchemaBuilder.struct().name("event").field("id", Schema.INT32_SCHEMA)
                .field("kind", Schema.STRING_SCHEMA).field("score", Schema.OPTIONAL_FLOAT64_SCHEMA).build();
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, new Struct(eventKey).put("id", 1), new Struct(event).put("id", 1).put("kind", "open").put("score", 1.5), Map.of());
            producer.send(topic, new Struct(eventKey).put("id", 2), new Struct(event).put("id", 2).put("kind", "open"), Map.of());
            // a value without a STRUCT schema cannot become a row: it must go to the dead letter queue, alone
            producer.sendRaw(topic, null, "{\"schema\":{\"type\":\"string\",\"optional\":false},\"payload\":\"oops\"}"
                    .getBytes(java.nio.charset.StandardCharsets.UTF_8));
            producer.send(topic, new Struct(eventKey).put("id", 1), new Struct(event).put("id", 1).put("kind", "closed").put("score", 2.0), Map.of());
        }
        Map<String, String> config = sinkConfig("sinkit\\.push\\..*");
        config.put("normalize.mode", "push");
        config.put("stage.uri", StackPaths.workDir("sink-file-stage").toUri().toString());
        config.put("batch.max.ms", "500");
        config.put("errors.tolerance", "all");
        config.put("errors.deadletterqueue.topic.name", "sinkit.dlq");
        config.put("errors.deadletterqueue.topic.replication.factor", "1");
        config.put("errors.deadletterqueue.context.headers.enable", "true");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-push", config);
        rest.awaitRunning("sink-push", 1, Duration.ofSeconds(60));

        awaitRows("SELECT id, kind FROM sinkit_push_events FINAL ORDER BY id",
                r -> r.size() == 2 && r.get(0).getString("kind").equals("closed") && r.get(1).getString("kind").equals("open"),
                Duration.ofSeconds(60));

        List<String> errors = deadLetters("sinkit.dlq");
        assertEquals(1, errors.size(), "records in the dead letter queue: " + errors);
        assertTrue(errors.get(0).contains("sinkit.push.events") && errors.get(0).contains("STRUCT"), errors.get(0));
    }

    /**
     * {@code gs://} goes through GCS's S3-compatible XML API with HMAC keys, and ClickHouse reads it with
     * {@code gcs()}. No GCS server or emulator can run here, so S3Mock stands in for the XML API: this
     * proves the sink's gs:// wiring and ClickHouse's gcs() reads, not Google's service itself.
     */
    @Test
    void gsStageGoesThroughTheXmlApiAndClickHouseReadsItWithGcs() throws Exception {
        String topic = "sinkit.gcs.orders";
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, key(7), order(7, "via gcs", "7.00", 7L), Headers.of("flow-gcs", "gcs.orders", "c", 1, 1, true));
        }
        Map<String, String> config = sinkConfig("sinkit\\.gcs\\..*");
        config.put("stage.uri", "gs://" + stack.objectStore().bucket() + "/gcs-stage");
        config.put("stage.gcs.endpoint", stack.objectStore().endpoint());
        config.put("stage.gcs.hmac.access.id", stack.objectStore().accessKey());
        config.put("stage.gcs.hmac.secret", stack.objectStore().secretKey());
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-gcs", config);
        rest.awaitRunning("sink-gcs", 1, Duration.ofSeconds(60));
        awaitRows("SELECT id, customer FROM gcs_orders_current", r -> r.size() == 1 && r.get(0).getString("customer").equals("via gcs"),
                Duration.ofSeconds(60));
        var listing = stack.objectStore().newClient().listObjectsV2(b -> b.bucket(stack.objectStore().bucket()).prefix("gcs-stage/"));
        assertEquals(0, listing.keyCount(), "stage files left after normalize: " + listing.contents());
    }

    @Test
    void validateReportsEachProblemOnItsField() throws Exception {
        ConnectRestClient rest = stack.connect().rest();
        String sink = "io.tablecdc.clickhouse.ClickHouseStageSinkConnector";
        Map<String, String> good = sinkConfig("sinkit\\.validate\\..*");
        good.put("name", "sink-validate");
        assertEquals(List.of(), ConnectRestClient.validationErrors(rest.validate(sink, good)));

        Map<String, String> badStage = new java.util.HashMap<>(good);
        badStage.put("stage.uri", "ftp://host/dir");
        List<String> errors = ConnectRestClient.validationErrors(rest.validate(sink, badStage));
        assertTrue(errors.size() == 1 && errors.get(0).startsWith("stage.uri: "), errors.toString());

        Map<String, String> unreachable = new java.util.HashMap<>(good);
        unreachable.put("clickhouse.url", "http://127.0.0.1:1");
        unreachable.put("catalog.password", "wrong-secret-value");
        unreachable.put("catalog.jdbc.url", catalogUrl.replace("/sink_catalog", "/no_such_database"));
        errors = ConnectRestClient.validationErrors(rest.validate(sink, unreachable));
        assertTrue(errors.stream().anyMatch(e -> e.startsWith("clickhouse.url: ")), errors.toString());
        assertTrue(errors.stream().anyMatch(e -> e.startsWith("catalog.jdbc.url: ")), errors.toString());
        assertTrue(errors.stream().noneMatch(e -> e.contains("wrong-secret-value")), errors.toString());
    }

    @Test
    void aNewOptionalColumnIsAddedToTheTableAndItsCurrentView() throws Exception {
        String topic = "sinkit.evo.items";
        Schema v1 = SchemaBuilder.struct().name("item").field("id", Schema.INT64_SCHEMA).field("name", Schema.STRING_SCHEMA).build();
        Schema v2 = SchemaBuilder.struct().name("item").field("id", Schema.INT64_SCHEMA).field("name", Schema.STRING_SCHEMA)
                .field("color", Schema.OPTIONAL_STRING_SCHEMA).build();
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, key(1), new Struct(v1).put("id", 1L).put("name", "a"), Headers.of("flow-evo", "evo.items", "c", 1, 1, true));
            producer.send(topic, key(2), new Struct(v2).put("id", 2L).put("name", "b").put("color", "red"),
                    Headers.of("flow-evo", "evo.items", "c", 2, 2, true));
        }
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-evo", sinkConfig("sinkit\\.evo\\..*"));
        rest.awaitRunning("sink-evo", 1, Duration.ofSeconds(60));
        List<GenericRecord> rows = awaitRows("SELECT id, name, color FROM evo_items_current ORDER BY id",
                r -> r.size() == 2, Duration.ofSeconds(60));
        assertEquals("[[1, a, null], [2, b, red]]", describe(rows));
    }

    @Test
    void oneTablesNormalizeFailureDoesNotHoldBackAnotherAndHealsWithoutARestart() throws Exception {
        String flow = "flow-iso";
        String brokenTopic = "sinkit.iso.broken";
        String healthyTopic = "sinkit.iso.healthy";
        // the broken table exists with a column type the records cannot fill
        clickhouse.execute("CREATE TABLE iso_broken (id Int64, customer Int64, amount Nullable(Decimal(38, 2)),"
                + " placed_at Nullable(DateTime64(6, 'UTC')), _tablecdc_version UInt64, _tablecdc_is_deleted UInt8)"
                + " ENGINE = ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted) ORDER BY id").get().close();
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(brokenTopic).topic(healthyTopic)) {
            producer.send(brokenTopic, key(1), order(1, "x", "1.00", 1L), Headers.of(flow, "iso.broken", "c", 1, 1, true));
            producer.send(healthyTopic, key(1), order(1, "y", "2.00", 1L), Headers.of(flow, "iso.healthy", "c", 1, 1, true));
        }
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-iso", sinkConfig("sinkit\\.iso\\..*"));
        rest.awaitRunning("sink-iso", 1, Duration.ofSeconds(60));

        awaitRows("SELECT id FROM iso_healthy_current", r -> r.size() == 1, Duration.ofSeconds(60));
        String error = awaitCatalogError(flow, "iso.broken", Duration.ofSeconds(60));
        assertTrue(error.contains("customer") && error.contains("Int64"), error);

        // the healthy table keeps flowing while the broken one retries
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers())) {
            producer.send(healthyTopic, key(2), order(2, "z", "3.00", 2L), Headers.of(flow, "iso.healthy", "c", 2, 2, true));
        }
        awaitRows("SELECT id FROM iso_healthy_current", r -> r.size() == 2, Duration.ofSeconds(60));
        assertEquals("[]", describe(clickhouse.queryAll("SELECT id FROM iso_broken")));

        // fixing the destination heals the table on its next retry, without a restart and without losing the row
        clickhouse.execute("DROP TABLE iso_broken").get().close();
        awaitRows("SELECT id, customer FROM iso_broken_current", r -> r.size() == 1 && r.get(0).getString("customer").equals("x"),
                Duration.ofSeconds(60));
        assertEquals(List.of("RUNNING", "RUNNING"), rest.states("sink-iso"));
    }

    @Test
    void aTableAtItsNormalizeBufferPausesOnlyItsOwnPartitionsAndCatchesUpWhenNormalizeRecovers() throws Exception {
        String flow = "flow-bp";
        String stuckTopic = "sinkit.bp.stuck";
        String freeTopic = "sinkit.bp.free";
        clickhouse.execute("CREATE TABLE bp_stuck (id Int64, customer Int64, _tablecdc_version UInt64, _tablecdc_is_deleted UInt8)"
                + " ENGINE = ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted) ORDER BY id").get().close();
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(stuckTopic).topic(freeTopic)) {
            for (int batch = 1; batch <= 4; batch++) {
                producer.send(stuckTopic, key(batch), order(batch, "s" + batch, "1.00", batch), Headers.of(flow, "bp.stuck", "c", batch, batch, true));
                producer.send(freeTopic, key(batch), order(batch, "f" + batch, "1.00", batch), Headers.of(flow, "bp.free", "c", batch, batch, true));
            }
        }
        Map<String, String> config = sinkConfig("sinkit\\.bp\\..*");
        config.put("normalize.buffer.batches", "2");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-bp", config);
        rest.awaitRunning("sink-bp", 1, Duration.ofSeconds(60));

        // the free table goes all the way while the stuck one stops consuming at its buffer
        awaitRows("SELECT id FROM bp_free_current", r -> r.size() == 4, Duration.ofSeconds(60));
        awaitCatalog(flow, "bp.stuck", "paused_reason", "sink_normalize_buffer_full", Duration.ofSeconds(60));
        Thread.sleep(2000);
        assertTrue(stagedBatches(flow, "bp.stuck") <= 2, "staged batches of the paused table: " + stagedBatches(flow, "bp.stuck"));

        clickhouse.execute("DROP TABLE bp_stuck").get().close();
        awaitRows("SELECT id FROM bp_stuck_current", r -> r.size() == 4, Duration.ofSeconds(60));
        awaitCatalog(flow, "bp.stuck", "coalesce(paused_reason, '')", "", Duration.ofSeconds(30));
        // a batch's stage row is deleted after its rows are visible: await it, do not sample it
        awaitCatalog(flow, "bp.stuck", "(SELECT count(*) FROM cdc_table_avro_stage a WHERE a.flow_name = cdc_table_replication_state.flow_name"
                + " AND a.source_table_identifier = cdc_table_replication_state.source_table_identifier)::text", "0", Duration.ofSeconds(30));
    }

    /**
     * A Postgres TRUNCATE arrives as a batch of its own (one record: null key and value, {@code op=t}) or as
     * the first record of a batch whose rows follow it. Each empties table A at its place in batch order:
     * rows of earlier batches go, rows of later batches (and of the same batch after it) stay. Table B of the
     * same flow is untouched; table C's first batch truncates a table that does not exist yet. A truncate
     * after rows of its batch cannot be ordered against them: it goes to the dead letter queue, named.
     */
    @Test
    void truncateRecordsEmptyTheFinalTableAtTheirPlaceInBatchOrder() throws Exception {
        String flow = "flow-trunc";
        String topicA = "sinkit.trunc.a";
        String topicB = "sinkit.trunc.b";
        String topicC = "sinkit.trunc.c";
        String a = "trunc.a";
        String b = "trunc.b";
        String c = "trunc.c";
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topicA).topic(topicB).topic(topicC)) {
            producer.send(topicA, key(1), order(1, "a1", "1.00", 1L), Headers.of(flow, a, "r", 1, 1, false));
            producer.send(topicA, key(2), order(2, "a2", "2.00", 1L), Headers.of(flow, a, "r", 1, 1, false));
            producer.send(topicA, key(3), order(3, "a3", "3.00", 1L), Headers.of(flow, a, "r", 1, 1, true));
            producer.send(topicB, key(1), order(1, "b1", "1.00", 1L), Headers.of(flow, b, "r", 1, 1, false));
            producer.send(topicB, key(2), order(2, "b2", "2.00", 1L), Headers.of(flow, b, "r", 1, 1, true));
            producer.send(topicA, key(2), order(2, "a2 updated", "2.50", 2L), Headers.of(flow, a, "u", 2, 2, false));
            producer.send(topicA, key(4), order(4, "a4", "4.00", 2L), Headers.of(flow, a, "c", 2, 2, true));
            producer.send(topicA, null, null, truncate(flow, a, 3, 3));
            producer.send(topicB, key(3), order(3, "b3", "3.00", 2L), Headers.of(flow, b, "c", 2, 2, true));
            // after the truncate: key 1 inserted again, key 2 too (its earlier row is gone, not merely older)
            producer.send(topicA, key(1), order(1, "a1 again", "1.10", 4L), Headers.of(flow, a, "c", 4, 4, false));
            producer.send(topicA, key(5), order(5, "a5", "5.00", 4L), Headers.of(flow, a, "c", 4, 4, false));
            producer.send(topicA, key(2), order(2, "a2 again", "2.20", 5L), Headers.of(flow, a, "c", 5, 4, true));
            producer.send(topicC, null, null, truncate(flow, c, 1, 1));
            producer.send(topicC, key(1), order(1, "c1", "1.00", 2L), Headers.of(flow, c, "c", 2, 2, true));
        }
        Map<String, String> config = sinkConfig("sinkit\\.trunc\\..*");
        config.put("errors.tolerance", "all");
        config.put("errors.deadletterqueue.topic.name", "sinkit.dlq.trunc");
        config.put("errors.deadletterqueue.topic.replication.factor", "1");
        config.put("errors.deadletterqueue.context.headers.enable", "true");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-trunc", config);
        rest.awaitRunning("sink-trunc", 1, Duration.ofSeconds(60));

        awaitCatalog(flow, a, "normalized_batch_id::text", "4", Duration.ofSeconds(60));
        awaitCatalog(flow, b, "normalized_batch_id::text", "2", Duration.ofSeconds(60));
        awaitCatalog(flow, c, "normalized_batch_id::text", "2", Duration.ofSeconds(60));
        assertEquals("[[1, a1 again, 4], [2, a2 again, 5], [5, a5, 4]]",
                describe(clickhouse.queryAll("SELECT id, customer, _tablecdc_version FROM trunc_a FINAL ORDER BY id")));
        assertEquals("[[1, c1]]", describe(clickhouse.queryAll("SELECT id, customer FROM trunc_c FINAL ORDER BY id")));

        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers())) {
            // a truncate followed by rows in the same batch: the rows stay, everything before goes
            producer.send(topicA, null, null, truncate(flow, a, 6, 5, false));
            producer.send(topicA, key(6), order(6, "a6", "6.00", 6L), Headers.of(flow, a, "c", 6, 5, false));
            producer.send(topicA, key(1), order(1, "a1 third", "1.20", 7L), Headers.of(flow, a, "c", 7, 5, true));
            // a truncate after a row of its batch: the row is staged, the truncate is refused
            producer.send(topicA, key(7), order(7, "a7", "7.00", 8L), Headers.of(flow, a, "c", 8, 6, false));
            producer.send(topicA, null, null, truncate(flow, a, 9, 6));
            producer.send(topicB, key(4), order(4, "b4", "4.00", 3L), Headers.of(flow, b, "c", 3, 3, true));
        }
        awaitCatalog(flow, a, "normalized_batch_id::text", "6", Duration.ofSeconds(60));
        awaitNoStagedBatches(flow, a, Duration.ofSeconds(30));
        awaitCatalog(flow, b, "normalized_batch_id::text", "3", Duration.ofSeconds(60));
        assertEquals("[[1, a1 third, 7], [6, a6, 6], [7, a7, 8]]",
                describe(clickhouse.queryAll("SELECT id, customer, _tablecdc_version FROM trunc_a FINAL ORDER BY id")));
        assertEquals("[[1, b1], [2, b2], [3, b3], [4, b4]]",
                describe(clickhouse.queryAll("SELECT id, customer FROM trunc_b FINAL ORDER BY id")));
        assertEquals(0, stagedBatches(flow, a), "stage rows of table A left, the truncate-only batch's included");

        List<String> errors = deadLetters("sinkit.dlq.trunc");
        assertEquals(1, errors.size(), "records in the dead letter queue: " + errors);
        assertTrue(errors.get(0).contains("sink-trunc") && errors.get(0).contains("table " + a + ", batch 6")
                && errors.get(0).contains("truncate record after rows"), errors.get(0));
        assertEquals(List.of("RUNNING", "RUNNING"), rest.states("sink-trunc"));
    }

    /**
     * A truncate batch whose normalize fails after the truncate and its first file (the second file, of a
     * newer value schema, does not fit the table) is run again from the truncate once the table is fixed:
     * the first file's rows must be loaded again, not skipped as a repeat of the load the second truncate
     * undid, and the row from before the truncate must stay gone.
     */
    @Test
    void aTruncateBatchThatFailedHalfwayIsRunAgainFromItsTruncate() throws Exception {
        String flow = "flow-trunc-retry";
        String topic = "sinkit.truncretry.items";
        String table = "truncretry.items";
        Schema v1 = SchemaBuilder.struct().name("item").field("id", Schema.INT64_SCHEMA).field("name", Schema.STRING_SCHEMA).build();
        Schema v2 = SchemaBuilder.struct().name("item").field("id", Schema.INT64_SCHEMA).field("name", Schema.STRING_SCHEMA)
                .field("extra", Schema.OPTIONAL_STRING_SCHEMA).build();
        clickhouse.execute("CREATE TABLE truncretry_items (id Int64, name String, extra Int64, _tablecdc_version UInt64,"
                + " _tablecdc_is_deleted UInt8) ENGINE = ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted) ORDER BY id"
                + " SETTINGS non_replicated_deduplication_window = 1000").get().close();
        clickhouse.execute("INSERT INTO truncretry_items VALUES (100, 'before the truncate', 0, 1, 0)").get().close();
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, null, null, truncate(flow, table, 2, 1, false));
            producer.send(topic, key(1), new Struct(v1).put("id", 1L).put("name", "one"), Headers.of(flow, table, "c", 3, 1, false));
            producer.send(topic, key(2), new Struct(v2).put("id", 2L).put("name", "two").put("extra", "x"),
                    Headers.of(flow, table, "c", 4, 1, true));
        }
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-trunc-retry", sinkConfig("sinkit\\.truncretry\\..*"));
        rest.awaitRunning("sink-trunc-retry", 1, Duration.ofSeconds(60));

        String error = awaitCatalogError(flow, table, Duration.ofSeconds(60));
        assertTrue(error.contains("extra") && error.contains("Int64"), error);
        // a second failed attempt: it truncated and loaded the first file again
        awaitCatalog(flow, table, "(error_count >= 2)::text", "true", Duration.ofSeconds(60));
        clickhouse.execute("ALTER TABLE truncretry_items MODIFY COLUMN extra Nullable(String)").get().close();

        awaitCatalog(flow, table, "normalized_batch_id::text", "1", Duration.ofSeconds(60));
        assertEquals("[[1, one, null], [2, two, x]]",
                describe(clickhouse.queryAll("SELECT id, name, extra FROM truncretry_items FINAL ORDER BY id")));
    }

    /** The headers of a truncate record as the Postgres source sends it: the last (only) record of its batch. */
    private static Map<String, String> truncate(String flow, String table, long version, long batch) {
        return truncate(flow, table, version, batch, true);
    }

    private static Map<String, String> truncate(String flow, String table, long version, long batch, boolean last) {
        Map<String, String> headers = Headers.of(flow, table, "t", version, batch, last);
        headers.put("tablecdc.replay.id", "replay-" + batch);
        return headers;
    }

    /** The error messages of the records in a dead letter queue, read once it has any (or after 30 s). */
    private static List<String> deadLetters(String topic) {
        java.util.Properties props = new java.util.Properties();
        props.put("bootstrap.servers", stack.kafka().bootstrapServers());
        props.put("group.id", "dlq-reader-" + System.nanoTime());
        props.put("auto.offset.reset", "earliest");
        List<String> errors = new ArrayList<>();
        try (var consumer = new org.apache.kafka.clients.consumer.KafkaConsumer<byte[], byte[]>(props,
                new org.apache.kafka.common.serialization.ByteArrayDeserializer(), new org.apache.kafka.common.serialization.ByteArrayDeserializer())) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            boolean seen = false;
            while (System.nanoTime() < deadline) {
                var records = consumer.poll(Duration.ofMillis(300));
                for (var record : records) {
                    var header = record.headers().lastHeader("__connect.errors.exception.message");
                    errors.add(header == null ? "(no message)" : new String(header.value(), java.nio.charset.StandardCharsets.UTF_8));
                }
                if (seen && records.isEmpty()) {
                    break; // one empty poll after the first records: nothing else is on its way
                }
                seen = !errors.isEmpty();
            }
        }
        return errors;
    }

    private static void awaitNoStagedBatches(String flow, String table, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (stagedBatches(flow, table) > 0 && System.nanoTime() < deadline) {
            Thread.sleep(200);
        }
    }

    private static long stagedBatches(String flow, String table) throws Exception {
        try (Connection c = stack.postgres().connect("sink_catalog");
             PreparedStatement ps = c.prepareStatement("SELECT count(*) FROM cdc_table_avro_stage WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    /** Waits until the catalog row's {@code column} (an SQL expression of this test's own) equals {@code expected}. */
    private static void awaitCatalog(String flow, String table, String column, String expected, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            try (Connection c = stack.postgres().connect("sink_catalog");
                 PreparedStatement ps = c.prepareStatement("SELECT " + column + " FROM cdc_table_replication_state"
                         + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                try (ResultSet rs = ps.executeQuery()) {
                    last = rs.next() ? rs.getString(1) : "(no row)";
                    if (expected.equals(last)) {
                        return;
                    }
                }
            }
            Thread.sleep(300);
        }
        throw new AssertionError(column + " of " + flow + "/" + table + " never became '" + expected + "'; last '" + last + "'");
    }

    private static String awaitCatalogError(String flow, String table, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            try (Connection c = stack.postgres().connect("sink_catalog");
                 PreparedStatement ps = c.prepareStatement("SELECT last_error FROM cdc_table_replication_state"
                         + " WHERE flow_name = ? AND source_table_identifier = ? AND last_error IS NOT NULL")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                try (ResultSet rs = ps.executeQuery()) {
                    if (rs.next()) {
                        return rs.getString(1);
                    }
                }
            }
            Thread.sleep(300);
        }
        throw new AssertionError("no error recorded in the catalog for " + flow + "/" + table);
    }

    private static List<GenericRecord> awaitRows(String sql, java.util.function.Predicate<List<GenericRecord>> done, Duration timeout)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        List<GenericRecord> rows = new ArrayList<>();
        String lastError = null;
        while (System.nanoTime() < deadline) {
            try {
                rows = clickhouse.queryAll(sql);
                if (done.test(rows)) {
                    return rows;
                }
            } catch (RuntimeException e) {
                lastError = e.getMessage();
            }
            Thread.sleep(300);
        }
        throw new AssertionError("ClickHouse never answered as expected: " + sql + "; last rows " + describe(rows)
                + (lastError == null ? "" : "; last error " + lastError));
    }

    private static String describe(List<GenericRecord> rows) {
        List<String> out = new ArrayList<>();
        for (GenericRecord row : rows) {
            List<Object> values = new ArrayList<>();
            for (int i = 1; i <= row.getSchema().getColumns().size(); i++) {
                values.add(row.getObject(i));
            }
            out.add(values.toString());
        }
        return out.toString();
    }

}
