package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Predicate;

import javax.management.MBeanAttributeInfo;
import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.common.utils.internals.Sanitizer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.faults.HttpFaultProxy;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The per-table metrics of the BigQuery query CDC source and the stage sink, read the way an operator reads them:
 * as MBeans of the in-process Connect worker on this JVM's platform MBean server
 * ({@code kafka.connect:type=plugins,connector=…,task=…,flow=…,table=…}), while real rows flow from the BigQuery
 * emulator into ClickHouse.
 */
class MetricsIT {
    private static final LocalStack stack = LocalStack.get();
    private static final MBeanServer jmx = ManagementFactory.getPlatformMBeanServer();
    private static final long MIB = 1L << 20;
    /** The emulator's {@code "totalBytesProcessed": "0"} in a job's statistics. */
    private static final java.util.regex.Pattern BYTES_PROCESSED = java.util.regex.Pattern.compile("\"totalBytesProcessed\"\\s*:\\s*\"0\"");
    private static final String DATASET = "metrics_it";
    private static final Duration WAIT = Duration.ofSeconds(120);
    /** Rows are stamped in the past, so that the safety lag never holds them back. */
    private static final Instant BASE = Instant.now().minus(Duration.ofHours(1)).truncatedTo(ChronoUnit.SECONDS);

    private static BigQuery bigQuery;
    private static String project;
    private static String catalogUrl;
    private static CdcChecks checks;

    @BeforeAll
    static void start() throws Exception {
        bigQuery = stack.bigquery().client();
        project = stack.bigquery().projectId();
        if (bigQuery.getDataset(DATASET) == null) {
            bigQuery.create(DatasetInfo.of(DATASET));
        }
        catalogUrl = stack.postgres().createDatabase("metrics_catalog");
        checks = new CdcChecks(stack, "metrics_catalog");
        stack.connect();
    }

    /**
     * One flow of two tables; the sink reads only one of them. The read table's rows, batches and ids move in step on
     * both sides and its lags settle; the other table's batches are never normalized, so its source pauses.
     */
    @Test
    void rowsBatchesIdsAndLagMoveOnBothSidesAndAHeldTableShowsPaused() throws Exception {
        TableId orders = createTable("m_orders");
        TableId held = createTable("m_held");
        insertRows(orders, 1, 12);
        insertRows(held, 1, 1);
        String flow = "metrics-flow";
        String sink = "metrics-sink";
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(sink, sinkConfig("metricsa\\..*\\.m_orders", "metrics-a"));
        Map<String, String> source = SourceConfigs.queryCdc(stack, catalogUrl, DATASET, "m_orders:updated_at:id, m_held:updated_at:id",
                2, "metricsa");
        // ids are reserved in the catalog from 1: the third unnormalized batch pauses the table
        source.put("normalize.buffer.batches", "3");
        // the emulator reports 0 bytes processed for every query job: a proxy in front of it (a hand-written rewrite of
        // that one field of its answers, nothing else) says each job processed one MiB, so that the bytes a table's
        // queries processed can be seen to add up
        HttpFaultProxy bigQueryProxy = HttpFaultProxy.start("metrics-bigquery", stack.bigquery().endpoint());
        bigQueryProxy.answers((request, body) -> request.contains("/jobs")
                ? BYTES_PROCESSED.matcher(new String(body, java.nio.charset.StandardCharsets.UTF_8))
                        .replaceAll("\"totalBytesProcessed\": \"" + MIB + "\"").getBytes(java.nio.charset.StandardCharsets.UTF_8)
                : body);
        source.put("bigquery.endpoint", bigQueryProxy.url());
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        rest.awaitRunning(sink, 1, Duration.ofSeconds(90));

        String ordersName = fullName("m_orders");
        String heldName = fullName("m_held");
        Map<String, Object> src = await(flow, flow, ordersName, m -> num(m, "rows-synced-total") == 12, "12 rows synced");
        assertTrue(num(src, "batches-synced-total") >= 1, src.toString());
        long syncedId = (long) num(src, "synced-batch-id");
        assertTrue(syncedId >= 1, src.toString());
        Map<String, Object> snk = await(sink, flow, ordersName,
                m -> num(m, "normalized-batch-id") == syncedId && num(m, "rows-normalized-total") == 12, "batch normalized");
        assertEquals(12.0, num(snk, "rows-staged-total"), snk.toString());
        assertEquals((double) syncedId, num(snk, "staged-batch-id"), snk.toString());
        assertEquals(0.0, num(snk, "batches-waiting"), snk.toString());
        assertEquals(0.0, num(snk, "lag-seconds"), "nothing waits for normalize: " + snk);
        assertEquals(0.0, num(snk, "in-error"), snk.toString());
        assertEquals(0.0, num(snk, "paused"), snk.toString());
        // the rows are an hour old, but every window after them was read and found empty: the source is not behind
        src = await(flow, flow, ordersName, m -> num(m, "lag-seconds") < 600, "an idle table's lag settles below the hour");
        assertEquals(0.0, num(src, "paused"), src.toString());
        assertEquals("", src.get("paused-reason"), src.toString());
        assertEquals(0.0, num(src, "in-error"), src.toString());
        assertEquals(0.0, num(src, "error-episodes-total"), src.toString());
        // every window and snapshot query of the table counts what BigQuery said it processed, one MiB each here
        double bytes = num(src, "bytes-processed-total");
        assertTrue(bytes >= MIB && bytes % MIB == 0, "bytes processed: " + src);
        assertEquals(12, checks.awaitRows("SELECT count() AS n FROM " + clickHouseTable("m_orders") + "_current",
                r -> !r.isEmpty() && r.get(0).getLong("n") == 12, WAIT).get(0).getLong("n"));

        // three more rows: both sides count them, and the normalized id catches the synced id again
        insertRows(orders, 13, 15);
        src = await(flow, flow, ordersName, m -> num(m, "rows-synced-total") == 15, "15 rows synced");
        assertTrue(num(src, "bytes-processed-total") > bytes, "the new window's query counted: " + src);
        long nextId = (long) num(src, "synced-batch-id");
        assertTrue(nextId > syncedId, src.toString());
        snk = await(sink, flow, ordersName, m -> num(m, "normalized-batch-id") == nextId, "the new batch normalized");
        assertEquals(15.0, num(snk, "rows-staged-total"), snk.toString());
        assertEquals(15.0, num(snk, "rows-normalized-total"), snk.toString());

        // the held table: its snapshot batch (1), two more (2, 3), then its source pauses for the normalize buffer
        await(flow, flow, heldName, m -> num(m, "synced-batch-id") == 1, "held snapshot synced");
        insertRows(held, 2, 2);
        await(flow, flow, heldName, m -> num(m, "synced-batch-id") == 2, "held second batch synced");
        insertRows(held, 3, 3);
        Map<String, Object> paused = await(flow, flow, heldName, m -> num(m, "paused") == 1, "held table paused");
        assertEquals("normalize_buffer_full", paused.get("paused-reason"));
        // the task sets the metric a moment before it records the pause in the catalog: awaited, not sampled
        assertEquals("normalize_buffer_full", checks.awaitState(flow, heldName,
                s -> "normalize_buffer_full".equals(s.pausedReason()), WAIT).pausedReason(), "the catalog says the same");
        assertEquals(0.0, num(await(flow, flow, ordersName, m -> true, "orders"), "paused"), "its neighbour is not paused");
        assertTrue(names(sink, flow, heldName).isEmpty(), "the sink never saw the held table");

        // the connectors go, and their tables' MBeans with them
        rest.delete(flow);
        rest.delete(sink);
        bigQueryProxy.close();
        awaitGone(flow);
        awaitGone(sink);
    }

    /**
     * A Postgres flow with one task, which applies and copies: the copied table keeps one MBean through its copy and
     * after it, and both the copied and the streamed rows count on it.
     */
    @Test
    void aPostgresTableCopiedAndStreamedByOneTaskKeepsItsMetrics() throws Exception {
        String database = "metrics_pg";
        stack.postgres().createDatabase(database);
        PgChecks pg = new PgChecks(stack, database, catalogUrl, null);
        pg.sql("DROP PUBLICATION IF EXISTS metrics_pub", "DROP TABLE IF EXISTS public.m_pg",
                "CREATE TABLE public.m_pg (id bigint PRIMARY KEY, customer text)",
                "INSERT INTO public.m_pg SELECT g, 'c' || g FROM generate_series(1, 500) g",
                "CREATE PUBLICATION metrics_pub FOR TABLE public.m_pg");
        String flow = "metrics-pg";
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, database, "metrics_pub", "metricspg");
        source.put("table.sync.copy", "all");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        pg.awaitTable(flow, "public.m_pg", row -> "ready".equals(row.get("phase")), WAIT);
        // the copy's 500 rows count on the table's one MBean (the copy half counted them into metrics of its own,
        // whose gauges the worker refused, or whose removal at the copy's end took the apply half's with them)
        double before = num(await(flow, flow, "public.m_pg", m -> num(m, "rows-synced-total") >= 500,
                "the copied rows counted on the table's MBean"), "rows-synced-total");
        pg.sql("INSERT INTO public.m_pg SELECT g, 'c' || g FROM generate_series(501, 505) g");
        Map<String, Object> after = await(flow, flow, "public.m_pg", m -> num(m, "rows-synced-total") >= before + 5,
                "the 5 streamed rows counted");
        assertEquals(0.0, num(after, "in-error"), after.toString());
        rest.delete(flow);
        awaitGone(flow);
    }

    /**
     * A table whose ClickHouse table has an incompatible column: the sink's normalize error episode and, with a
     * buffer of one batch, its back-pressure show in the table's MBean; dropping the bad table heals both.
     */
    @Test
    void aNormalizeErrorEpisodeAndTheSinksBackPressureShowAndClear() throws Exception {
        TableId broken = createTable("m_broken");
        // customer is a STRING in BigQuery: an Int64 column here refuses the load
        checks.execute("DROP VIEW IF EXISTS " + clickHouseTable("m_broken") + "_current");
        checks.execute("DROP TABLE IF EXISTS " + clickHouseTable("m_broken"));
        checks.execute("CREATE TABLE " + clickHouseTable("m_broken") + " (id Int64, customer Int64) ENGINE = MergeTree ORDER BY id");
        insertRows(broken, 1, 1);
        String flow = "metrics-err";
        String sink = "metrics-err-sink";
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> sinkConfig = sinkConfig("metricsb\\..*", "metrics-b");
        sinkConfig.put("normalize.buffer.batches", "1");
        rest.putConfig(sink, sinkConfig);
        rest.putConfig(flow, SourceConfigs.queryCdc(stack, catalogUrl, DATASET, "m_broken:updated_at:id", 1, "metricsb"));
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        String name = fullName("m_broken");

        Map<String, Object> failing = await(sink, flow, name, m -> num(m, "in-error") == 1, "normalize failing");
        assertEquals(1.0, num(failing, "error-episodes-total"), failing.toString());
        assertEquals(1.0, num(failing, "rows-staged-total"), failing.toString());
        assertEquals(1.0, num(failing, "batches-waiting"), failing.toString());
        assertEquals(0.0, num(failing, "rows-normalized-total"), failing.toString());
        // retries fail again and again (backoff 0.5 s to 2 s): still one episode
        Thread.sleep(3_000);
        Map<String, Object> stillFailing = await(sink, flow, name, m -> true, "still failing");
        assertEquals(1.0, num(stillFailing, "in-error"), stillFailing.toString());
        assertEquals(1.0, num(stillFailing, "error-episodes-total"), stillFailing.toString());
        assertTrue(num(stillFailing, "lag-seconds") > 0, "a batch waits: " + stillFailing);

        // a second batch finds the buffer (one batch) full: the sink holds the table
        Map<String, Object> src = await(flow, flow, name, m -> num(m, "synced-batch-id") >= 1, "first batch synced");
        insertRows(broken, 2, 2);
        await(flow, flow, name, m -> num(m, "synced-batch-id") > num(src, "synced-batch-id"), "second batch synced");
        Map<String, Object> held = await(sink, flow, name, m -> num(m, "paused") == 1, "the sink pauses the table");
        assertEquals("sink_normalize_buffer_full", held.get("paused-reason"));

        // the cause goes: the next retry creates the table, loads both batches and resumes the table
        checks.execute("DROP TABLE " + clickHouseTable("m_broken"));
        Map<String, Object> healed = await(sink, flow, name,
                m -> num(m, "in-error") == 0 && num(m, "paused") == 0 && num(m, "rows-normalized-total") == 2, "healed");
        assertEquals(1.0, num(healed, "error-episodes-total"), healed.toString());
        assertEquals("", healed.get("paused-reason"));
        Map<String, Object> sourceSide = await(flow, flow, name, m -> true, "source");
        await(sink, flow, name, m -> num(m, "normalized-batch-id") == num(sourceSide, "synced-batch-id"), "caught up");
        assertEquals(2, checks.awaitRows("SELECT count() AS n FROM " + clickHouseTable("m_broken") + "_current",
                r -> !r.isEmpty() && r.get(0).getLong("n") == 2, WAIT).get(0).getLong("n"));
        rest.delete(flow);
        rest.delete(sink);
        awaitGone(flow);
        awaitGone(sink);
    }

    // ------------------------------------------------------------------------------------------ MBeans

    /** The MBeans of {@code table} of {@code flow} published by {@code connector}'s tasks. */
    private static Set<ObjectName> names(String connector, String flow, String table) throws Exception {
        return jmx.queryNames(new ObjectName("kafka.connect:type=plugins,connector=" + Sanitizer.jmxSanitize(connector)
                + ",flow=" + Sanitizer.jmxSanitize(flow) + ",table=" + Sanitizer.jmxSanitize(table) + ",*"), null);
    }

    /** Every attribute of the table's one MBean, or null while there is none. */
    private static Map<String, Object> read(String connector, String flow, String table) throws Exception {
        Set<ObjectName> names = names(connector, flow, table);
        if (names.isEmpty()) {
            return null;
        }
        assertEquals(1, names.size(), "one MBean per table: " + names);
        ObjectName name = names.iterator().next();
        Map<String, Object> values = new TreeMap<>();
        for (MBeanAttributeInfo attribute : jmx.getMBeanInfo(name).getAttributes()) {
            values.put(attribute.getName(), jmx.getAttribute(name, attribute.getName()));
        }
        return values;
    }

    private static Map<String, Object> await(String connector, String flow, String table, Predicate<Map<String, Object>> done,
                                             String what) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        Map<String, Object> last = null;
        while (System.nanoTime() < deadline) {
            last = read(connector, flow, table);
            if (last != null && done.test(last)) {
                return last;
            }
            Thread.sleep(200);
        }
        fail(what + ": not reached within " + WAIT + " by " + connector + "'s MBean of " + table + ": " + last);
        return null;
    }

    private static void awaitGone(String connector) throws Exception {
        ObjectName pattern = new ObjectName("kafka.connect:type=plugins,connector=" + Sanitizer.jmxSanitize(connector) + ",*");
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!jmx.queryNames(pattern, null).isEmpty()) {
            if (System.nanoTime() > deadline) {
                fail("MBeans of deleted connector " + connector + " remain: " + jmx.queryNames(pattern, null));
            }
            Thread.sleep(200);
        }
    }

    private static double num(Map<String, Object> values, String attribute) {
        Object value = values.get(attribute);
        if (!(value instanceof Number number)) {
            throw new AssertionError("attribute " + attribute + " is " + value + " in " + values);
        }
        return number.doubleValue();
    }

    // ------------------------------------------------------------------------------------------ tables and configs

    private static Map<String, String> sinkConfig(String topicsRegex, String stagePrefix) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, stagePrefix);
        config.put("topics.regex", topicsRegex);
        config.put("stage.local.dir", StackPaths.workDir(stagePrefix + "-local").toString());
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "2000");
        // the sources create their topics after the sink subscribed: see new topics within a second
        config.put("consumer.override.metadata.max.age.ms", "1000");
        return config;
    }

    private static TableId createTable(String name) {
        TableId id = TableId.of(project, DATASET, name);
        bigQuery.delete(id);
        bigQuery.create(TableInfo.of(id, StandardTableDefinition.of(Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("customer", StandardSQLTypeName.STRING),
                Field.of("updated_at", StandardSQLTypeName.TIMESTAMP)))));
        return id;
    }

    /** Rows {@code from..to}, row i stamped i microseconds after {@link #BASE}. */
    private static void insertRows(TableId table, int from, int to) {
        List<Map<String, Object>> rows = new java.util.ArrayList<>();
        for (int i = from; i <= to; i++) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("id", i);
            row.put("customer", "c" + i);
            row.put("updated_at", BASE.plus(i, ChronoUnit.MICROS).toString());
            rows.add(row);
        }
        CdcChecks.insert(bigQuery, table, rows);
    }

    private static String fullName(String table) {
        return project + "." + DATASET + "." + table;
    }

    private static String clickHouseTable(String table) {
        return fullName(table).replaceAll("[^A-Za-z0-9_]", "_");
    }
}
