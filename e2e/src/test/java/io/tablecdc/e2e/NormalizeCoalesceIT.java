package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.math.BigDecimal;
import java.net.URI;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.common.utils.internals.Sanitizer;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.e2e.faults.FaultProxy;
import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * Batches of a table that wait for the sink together (here: staged while ClickHouse refused connections, as after an
 * outage or when a source commits faster than one load per batch) are loaded in one {@code INSERT}: a batch that starts
 * with a truncate and a batch of a new value schema each begin a new load, and a table without a key loads every batch
 * alone. ClickHouse {@code FINAL} ends with every row once, with its last value; the sink's per-table metrics count the
 * loads.
 */
class NormalizeCoalesceIT {
    private static final LocalStack stack = LocalStack.get();
    private static final MBeanServer jmx = ManagementFactory.getPlatformMBeanServer();
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA).field("amount", Decimal.builder(2).build()).build();
    /** The value schema from batch {@link #WIDER_FROM} on: a column added at the source. */
    private static final Schema WIDER = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA).field("amount", Decimal.builder(2).build())
            .field("note", Schema.OPTIONAL_STRING_SCHEMA).build();
    private static final int LAST_BATCH = 41;
    private static final int TRUNCATE_AT = 20;
    private static final int WIDER_FROM = 30;
    private static final int ROWS_PER_BATCH = 10;

    @Test
    void batchesThatWaitedTogetherLoadInOneInsertAndFinalHoldsEveryRowOnce() throws Exception {
        String database = "coalesce_catalog";
        String catalogUrl = stack.postgres().createDatabase(database);
        String flow = "flow-coalesce";
        String keyed = "coalesce.keyed";
        String keyless = "coalesce.keyless";
        String keyedTopic = "coalesce.keyed";
        String keylessTopic = "coalesce.keyless";
        String connector = "sink-coalesce";
        URI clickhouseUri = URI.create(stack.clickhouse().httpUrl());
        Map<Long, String> expected = new TreeMap<>();
        Map<Long, String> expectedNotes = new TreeMap<>();
        try (FaultProxy proxy = FaultProxy.start("coalesce-clickhouse", clickhouseUri.getHost(), clickhouseUri.getPort());
             Client clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl())
                     .setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                     .compressServerResponse(false).build();
             RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(keyedTopic).topic(keylessTopic)) {
            Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "coalesce");
            config.put("topics", keyedTopic + "," + keylessTopic);
            config.put("clickhouse.url", "http://127.0.0.1:" + proxy.port());
            // the 40 batches that wait must not pause the partitions
            config.put("normalize.buffer.batches", "100");
            config.put("normalize.backoff.initial.ms", "300");
            config.put("normalize.backoff.max.ms", "1000");
            stack.connect().rest().putConfig(connector, config);
            stack.connect().rest().awaitRunning(connector, 1, Duration.ofSeconds(90));

            produceKeyed(producer, flow, keyed, keyedTopic, 1, expected, expectedNotes);
            produceKeyless(producer, flow, keyless, keylessTopic, 1);
            awaitCatalog(database, flow, keyed, 1, 0);
            awaitCatalog(database, flow, keyless, 1, 0);

            proxy.refuse();
            for (int batch = 2; batch <= LAST_BATCH; batch++) {
                produceKeyed(producer, flow, keyed, keyedTopic, batch, expected, expectedNotes);
                produceKeyless(producer, flow, keyless, keylessTopic, batch);
            }
            // every batch staged while no load can succeed: they wait together
            awaitCatalog(database, flow, keyed, 1, LAST_BATCH - 1);
            awaitCatalog(database, flow, keyless, 1, LAST_BATCH - 1);
            // a run of the keyed table's loop that read the stage rows before the last was staged and reached ClickHouse
            // after the outage would load what it read, and the rest in a load of its own: let such a run fail first (its
            // failure counted after every batch was staged); the next run reads every stage row
            long errors = errorCount(database, flow, keyed);
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (errorCount(database, flow, keyed) <= errors) {
                assertTrue(System.nanoTime() < deadline, "the keyed table's normalize failed again during the outage");
                Thread.sleep(100);
            }
            proxy.pass();
            awaitCatalog(database, flow, keyed, LAST_BATCH, 0);
            awaitCatalog(database, flow, keyless, LAST_BATCH, 0);

            List<GenericRecord> rows = clickhouse.queryAll("SELECT id, customer, ifNull(note, '-') AS note"
                    + " FROM coalesce_keyed FINAL WHERE _tablecdc_is_deleted = 0 ORDER BY id");
            Map<Long, String> actual = new TreeMap<>();
            Map<Long, String> actualNotes = new TreeMap<>();
            for (GenericRecord row : rows) {
                actual.put(row.getLong("id"), row.getString("customer"));
                actualNotes.put(row.getLong("id"), row.getString("note"));
            }
            assertEquals(rows.size(), actual.size(), "rows of the keyed table (FINAL) with the same id");
            assertEquals(expected, actual, "the keyed table (FINAL, without deletes)");
            SinkFaultIT.assertOneImagePerKeyAndVersion(clickhouse, "coalesce_keyed", "id", "customer, amount, note", "");
            assertEquals(expectedNotes, actualNotes, "the added column's values");
            GenericRecord keylessRows = clickhouse.queryAll("SELECT count() AS n, uniqExact(id) AS ids FROM coalesce_keyless").get(0);
            assertEquals((long) LAST_BATCH * ROWS_PER_BATCH, keylessRows.getLong("n"), "rows of the table without a key, each once");
            assertEquals((long) LAST_BATCH * ROWS_PER_BATCH, keylessRows.getLong("ids"));

            // batch 1; 2 to 19; 20 (its truncate) to 29; 30 (the added column) to 41
            Map<String, Object> keyedMetrics = metrics(connector, flow, keyed);
            assertEquals(4.0, keyedMetrics.get("normalize-loads-total"), keyedMetrics.toString());
            assertEquals((double) LAST_BATCH, keyedMetrics.get("batches-normalized-total"), keyedMetrics.toString());
            Map<String, Object> keylessMetrics = metrics(connector, flow, keyless);
            assertEquals((double) LAST_BATCH, keylessMetrics.get("normalize-loads-total"), keylessMetrics.toString());
            assertTrue(proxy.accepted() > 0, "ClickHouse was reached through the proxy");
        } finally {
            stack.connect().rest().delete(connector);
        }
    }

    /**
     * Batches whose rows share versions (a BigQuery table without a watermark column stages every row at version 0):
     * among rows of one key and one version ReplacingMergeTree keeps the last inserted, and one INSERT of several files
     * has no order, so such batches are not loaded together. Here batches 2 to 12 rewrite the same rows at the same
     * version while ClickHouse refuses connections; each is loaded on its own, and {@code FINAL} holds the last batch's
     * values.
     */
    @Test
    void batchesWithEqualVersionsAreLoadedOneAfterAnotherNotInOneInsert() throws Exception {
        String database = "coalesce_equal_catalog";
        String catalogUrl = stack.postgres().createDatabase(database);
        String flow = "flow-coalesce-equal";
        String table = "coalesce.equal";
        String topic = "coalesce.equal";
        String connector = "sink-coalesce-equal";
        int lastBatch = 12;
        URI clickhouseUri = URI.create(stack.clickhouse().httpUrl());
        try (FaultProxy proxy = FaultProxy.start("coalesce-equal-clickhouse", clickhouseUri.getHost(), clickhouseUri.getPort());
             Client clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl())
                     .setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                     .compressServerResponse(false).build();
             RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "coalesce-equal");
            config.put("topics", topic);
            config.put("clickhouse.url", "http://127.0.0.1:" + proxy.port());
            config.put("normalize.buffer.batches", "100");
            config.put("normalize.backoff.initial.ms", "300");
            config.put("normalize.backoff.max.ms", "1000");
            stack.connect().rest().putConfig(connector, config);
            stack.connect().rest().awaitRunning(connector, 1, Duration.ofSeconds(90));

            produceEqualVersions(producer, flow, table, topic, 1);
            awaitCatalog(database, flow, table, 1, 0);
            proxy.refuse();
            for (int batch = 2; batch <= lastBatch; batch++) {
                produceEqualVersions(producer, flow, table, topic, batch);
            }
            awaitCatalog(database, flow, table, 1, lastBatch - 1);
            // as above: a run that read the stage rows before the last one was staged fails first
            long errors = errorCount(database, flow, table);
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (errorCount(database, flow, table) <= errors) {
                assertTrue(System.nanoTime() < deadline, "the table's normalize failed again during the outage");
                Thread.sleep(100);
            }
            proxy.pass();
            awaitCatalog(database, flow, table, lastBatch, 0);

            Map<Long, String> actual = new TreeMap<>();
            for (GenericRecord row : clickhouse.queryAll("SELECT id, customer FROM coalesce_equal FINAL ORDER BY id")) {
                actual.put(row.getLong("id"), row.getString("customer"));
            }
            Map<Long, String> expected = new TreeMap<>();
            for (long id = 1; id <= ROWS_PER_BATCH; id++) {
                expected.put(id, "c" + id + "-b" + lastBatch);
            }
            Map<String, Object> tableMetrics = metrics(connector, flow, table);
            assertEquals(expected, actual, "the last batch's values (FINAL); metrics " + tableMetrics);
            assertEquals((double) lastBatch, tableMetrics.get("normalize-loads-total"), "one load per batch: " + tableMetrics);
        } finally {
            stack.connect().rest().delete(connector);
        }
    }

    /** Batch {@code batch} of the equal-versions table: rows 1 to 10, each at version 7, valued after the batch. */
    private static void produceEqualVersions(RecordProducer producer, String flow, String table, String topic, int batch)
            throws Exception {
        for (int i = 0; i < ROWS_PER_BATCH; i++) {
            long id = i + 1;
            producer.send(topic, new Struct(KEY).put("id", id), new Struct(VALUE).put("id", id).put("customer", "c" + id + "-b" + batch)
                    .put("amount", new BigDecimal(id).movePointLeft(2)),
                    Headers.of(flow, table, batch == 1 ? "c" : "u", 7, batch, i == ROWS_PER_BATCH - 1));
        }
        producer.flush();
    }

    /**
     * Batch {@code batch} of the keyed table: rows {@code (batch-1)*5+1} to {@code +10} (half of them the previous
     * batch's, updated), the first of them deleted again at the batch's end; batch {@link #TRUNCATE_AT} starts with a
     * truncate, and from {@link #WIDER_FROM} on the rows carry the added column.
     */
    private static void produceKeyed(RecordProducer producer, String flow, String table, String topic, int batch,
                                     Map<Long, String> expected, Map<Long, String> notes) throws Exception {
        long version = (long) batch * 100;
        if (batch == TRUNCATE_AT) {
            Map<String, String> truncate = Headers.of(flow, table, "t", version++, batch, false);
            truncate.put("tablecdc.replay.id", "replay-" + batch);
            producer.send(topic, null, null, truncate);
            expected.clear();
            notes.clear();
        }
        Schema schema = batch >= WIDER_FROM ? WIDER : VALUE;
        for (int i = 0; i < ROWS_PER_BATCH; i++) {
            long id = (long) (batch - 1) * ROWS_PER_BATCH / 2 + i + 1;
            String customer = "c" + id + "-b" + batch;
            Struct value = new Struct(schema).put("id", id).put("customer", customer)
                    .put("amount", new BigDecimal(id).movePointLeft(2));
            if (schema == WIDER) {
                value.put("note", "n" + batch);
            }
            producer.send(topic, new Struct(KEY).put("id", id), value,
                    Headers.of(flow, table, expected.containsKey(id) ? "u" : "c", version++, batch, false));
            expected.put(id, customer);
            notes.put(id, schema == WIDER ? "n" + batch : "-");
        }
        long deleted = (long) (batch - 1) * ROWS_PER_BATCH / 2 + 1;
        producer.send(topic, new Struct(KEY).put("id", deleted), null, Headers.of(flow, table, "d", version, batch, true));
        expected.remove(deleted);
        notes.remove(deleted);
        producer.flush();
    }

    /** Batch {@code batch} of the table without a key: ten new rows. */
    private static void produceKeyless(RecordProducer producer, String flow, String table, String topic, int batch) throws Exception {
        for (int i = 0; i < ROWS_PER_BATCH; i++) {
            long id = (long) (batch - 1) * ROWS_PER_BATCH + i + 1;
            producer.send(topic, null, new Struct(VALUE).put("id", id).put("customer", "k" + id)
                    .put("amount", new BigDecimal(id).movePointLeft(2)),
                    Headers.of(flow, table, "c", (long) batch * 100 + i, batch, i == ROWS_PER_BATCH - 1));
        }
        producer.flush();
    }

    /** Waits until the table's normalized batch id is {@code normalized} with {@code staged} stage rows waiting. */
    private static void awaitCatalog(String database, String flow, String table, long normalized, long staged) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
        long n = -1;
        long s = -1;
        while (System.nanoTime() < deadline) {
            n = SinkFaultIT.normalizedBatch(database, flow, table);
            s = SinkFaultIT.stagedBatches(database, flow, table);
            if (n == normalized && s == staged) {
                return;
            }
            Thread.sleep(200);
        }
        throw new AssertionError("table " + table + ": normalized batch " + n + " with " + s + " stage rows; waited for "
                + normalized + " with " + staged);
    }

    /** The table's failed attempts in the catalog ({@code error_count}). */
    private static long errorCount(String database, String flow, String table) throws Exception {
        try (java.sql.Connection c = stack.postgres().connect(database);
             java.sql.PreparedStatement ps = c.prepareStatement("SELECT coalesce(max(error_count), 0) FROM"
                     + " cdc_table_replication_state WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (java.sql.ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getLong(1) : 0;
            }
        }
    }

    /** The attributes of the table's MBean in the sink task ({@code kafka.connect:type=plugins,connector=…}). */
    private static Map<String, Object> metrics(String connector, String flow, String table) throws Exception {
        Set<ObjectName> names = jmx.queryNames(new ObjectName("kafka.connect:type=plugins,connector="
                + Sanitizer.jmxSanitize(connector) + ",flow=" + Sanitizer.jmxSanitize(flow) + ",table="
                + Sanitizer.jmxSanitize(table) + ",*"), null);
        assertEquals(1, names.size(), "one MBean of table " + table + ": " + names);
        ObjectName name = names.iterator().next();
        Map<String, Object> values = new LinkedHashMap<>();
        for (var attribute : jmx.getMBeanInfo(name).getAttributes()) {
            values.put(attribute.getName(), jmx.getAttribute(name, attribute.getName()));
        }
        return values;
    }
}
