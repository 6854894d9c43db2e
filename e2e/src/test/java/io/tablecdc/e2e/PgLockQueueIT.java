package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * A DDL that queues behind a copy's lock must not stall the other tables of the flow. A copy holds its table's
 * {@code ACCESS SHARE} lock for as long as it reads; a {@code TRUNCATE} of that table queues for
 * {@code ACCESS EXCLUSIVE} behind it, and every later lock request on the table queues behind the TRUNCATE. The apply
 * task's publication check ({@code pg_publication_tables}, whose function opens every published table) used to be
 * such a request: the apply task blocked in it, and no table streamed until the copy ended. Here the copy is held
 * open for as long as the test needs by its own back-pressure (ClickHouse refuses its rows, so it pauses at
 * {@code max.unnormalized.batches} with its snapshot transaction and lock open), and a neighbour table's single-row
 * inserts must reach ClickHouse while the TRUNCATE still waits.
 */
class PgLockQueueIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "pglq_source";
    private static final int BIG_ROWS = 30_000;
    private static final int LIMIT = 2;

    private static String catalogUrl;
    private static Client clickhouse;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("pglq_catalog");
        clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
    }

    /**
     * Inserts {@code count} rows into {@code table} one by one, about {@code spacingMs} apart, each timed from its
     * commit until ClickHouse shows it (at most 60 s), in milliseconds.
     */
    private static List<Long> freshness(String table, int firstId, int count, long spacingMs) throws Exception {
        List<Long> millis = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            long began = System.nanoTime();
            millis.addAll(pg.freshness(table, firstId + i, 1, "'fresh'"));
            long left = spacingMs - (System.nanoTime() - began) / 1_000_000;
            if (left > 0) {
                Thread.sleep(left);
            }
        }
        return millis;
    }

    /** Whether a statement starting with {@code prefix} waits for a lock in the source database. */
    private static boolean waitsForLock(String prefix) throws SQLException {
        return "true".equals(pg.sourceValue("SELECT CAST(count(*) > 0 AS text) FROM pg_stat_activity WHERE datname ="
                + " current_database() AND wait_event_type = 'Lock' AND strpos(query, ?) = 1", prefix));
    }

    @Test
    void aTruncateQueuedBehindACopyDoesNotStallTheOtherTables() throws Exception {
        pg.sql("DROP PUBLICATION IF EXISTS lq_pub",
                "DROP SCHEMA IF EXISTS lq CASCADE",
                "CREATE SCHEMA lq",
                "CREATE TABLE lq.big (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO lq.big SELECT g, 'b' || g FROM generate_series(1, " + BIG_ROWS + ") g",
                "CREATE TABLE lq.n (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO lq.n SELECT g, 'n' || g FROM generate_series(1, 100) g",
                "CREATE PUBLICATION lq_pub FOR TABLE lq.big, lq.n");
        String flow = "lq-flow";
        String sink = "lq-sink";
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "lq_pub", "lq");
        source.put("tasks.max", "3");
        source.put("table.sync.copy", "all");
        source.put("batch.rows", "2000");
        source.put("max.unnormalized.batches", Integer.toString(LIMIT));
        Map<String, String> sinkConfig = SinkConfigs.stageSink(stack, catalogUrl, "lq-stage");
        sinkConfig.put("topics.regex", "lq\\..*");
        sinkConfig.put("normalize.backoff.initial.ms", "300");
        sinkConfig.put("normalize.backoff.max.ms", "1000");
        sinkConfig.put("consumer.override.metadata.max.age.ms", "1000");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(sink, sinkConfig);
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 3, Duration.ofSeconds(90));

        // ClickHouse refuses lq.big's rows once its first are in: its copy pauses with its transaction (and lock) open
        awaitTrue(() -> pg.chLong("SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 'lq_big'") == 1,
                Duration.ofSeconds(120), "lq.big never reached ClickHouse");
        clickhouse.execute("ALTER TABLE lq_big ADD CONSTRAINT lq_refuse CHECK id < 0").get().close();
        pg.awaitTable(flow, "lq.big", row -> "normalize_buffer_full".equals(row.get("paused_reason")),
                Duration.ofSeconds(120));
        pg.awaitTable(flow, "lq.n", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        assertEquals("copying", pg.table(flow, "lq.big").get("phase"), "the copy of lq.big is paused, not done");
        List<Long> before = freshness("lq.n", 1_000, 10, 0);

        // the TRUNCATE queues behind the copy's ACCESS SHARE lock, and holds every later lock request on lq.big
        Connection ddl = pg.source();
        CompletableFuture<Void> truncate = CompletableFuture.runAsync(() -> {
            try (Statement s = ddl.createStatement()) {
                s.execute("TRUNCATE lq.big");
            } catch (SQLException e) {
                throw new RuntimeException(e);
            }
        });
        try {
            awaitTrue(() -> waitsForLock("TRUNCATE lq.big"), Duration.ofSeconds(30), "the TRUNCATE never queued");
            // spread over more than two publication checks (10 s apart)
            List<Long> during = freshness("lq.n", 2_000, 15, 2_000);
            assertTrue(waitsForLock("TRUNCATE lq.big"), "the neighbour's rows were measured while the TRUNCATE waited");
            assertEquals("copying", pg.table(flow, "lq.big").get("phase"), "the copy of lq.big held its lock throughout");
            System.out.printf("pg lock queue: lq.n insert -> visible before the DDL p50 %d ms p95 %d ms;"
                            + " while a TRUNCATE waits behind the copy p50 %d ms p95 %d ms (%s)%n",
                    PgChecks.percentile(before, 50), PgChecks.percentile(before, 95), PgChecks.percentile(during, 50),
                    PgChecks.percentile(during, 95), during);
        } finally {
            // ClickHouse takes rows again: the copy goes on, ends, and the TRUNCATE runs
            clickhouse.execute("ALTER TABLE lq_big DROP CONSTRAINT lq_refuse").get().close();
        }
        truncate.get(240, java.util.concurrent.TimeUnit.SECONDS);
        ddl.close();
        pg.sql("INSERT INTO lq.big SELECT g, 'after' || g FROM generate_series(1, 50) g",
                "INSERT INTO lq.n VALUES (9999, 'end')");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String table : List.of("lq.big", "lq.n")) {
            tables.put(table, new String[] {"id::text || '|' || v", "concat(toString(id), '|', v)"});
        }
        pg.awaitTable(flow, "lq.big", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(240));
        pg.awaitEqual(tables, Duration.ofSeconds(180));
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING", "RUNNING"), rest.states(flow));
        rest.delete(flow);
        rest.delete(sink);
    }
}
