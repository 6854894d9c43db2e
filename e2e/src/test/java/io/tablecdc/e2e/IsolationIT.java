package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.query.GenericRecord;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.QueryJobConfiguration;
import com.google.cloud.bigquery.TableId;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.flows.StatusScript;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Per-table isolation end to end: BigQuery emulator → query CDC source → Kafka → stage sink → ClickHouse, both
 * connectors deployed over the Connect REST API from their Hub archives. One table breaking (at the source or at the
 * destination), backing up, being removed, or the worker being killed under it never costs another table a row or its
 * cadence. Each test has its own flow, tables and topics; all share the catalog database {@value #CATALOG}.
 */
class IsolationIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATASET = "iso_it";
    private static final String CATALOG = "iso_catalog";
    private static final Duration WAIT = Duration.ofSeconds(90);

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
        catalogUrl = stack.postgres().createDatabase(CATALOG);
        checks = new CdcChecks(stack, CATALOG);
    }

    // ------------------------------------------------------------------------------------------ scenario 1

    /**
     * Three tables flowing; {@code src} loses its watermark column, {@code dst}'s ClickHouse table starts refusing
     * inserts. {@code ok} keeps arriving batch after batch; {@code dst} shows its error in the catalog and in
     * {@code tablecdc-status}, one warning for the whole episode, and heals by itself once ClickHouse accepts its rows
     * again, with every row; {@code src}'s task alone fails, naming the table and the column (in the task's status, the
     * catalog and {@code tablecdc-status}), and after the column is back a restart of that one task continues it and
     * clears the error.
     */
    @Test
    void oneTablesFailureAtTheSourceOrTheDestinationLeavesTheOthersFlowing() throws Exception {
        String flow = "iso-fail";
        TableId ok = createTable("fail_ok");
        TableId src = createTable("fail_src");
        TableId dst = createTable("fail_dst");
        Writer w = new Writer();
        for (TableId t : List.of(ok, src, dst)) {
            w.insert(t, 1);
        }
        ConnectRestClient rest = stack.connect().rest();
        try (CdcChecks.LogCapture logs = new CdcChecks.LogCapture()) {
            rest.putConfig(flow + "-sink", sinkConfig("isof\\..*", "iso-fail"));
            rest.putConfig(flow, SourceConfigs.queryCdc(stack, catalogUrl, DATASET,
                    "fail_ok:ts:id, fail_src:ts:id, fail_dst:ts:id", 3, "isof"));
            rest.awaitRunning(flow, 3, WAIT);
            for (TableId t : List.of(ok, src, dst)) {
                awaitExactly(t, w);
            }

            // break both
            checks.execute("ALTER TABLE " + chTable(dst) + " ADD CONSTRAINT iso_refuses CHECK id < 0");
            bigQuery.query(QueryJobConfiguration.of("ALTER TABLE `" + project + "." + DATASET + ".fail_src` DROP COLUMN ts"));
            w.insert(dst, 2);
            JsonNode failed = rest.awaitStatus(flow, IsolationIT::anyTaskFailed, WAIT);
            String trace = traces(failed);
            assertTrue(trace.contains("table " + name(src) + " has no watermark column ts"), trace);
            assertEquals(List.of("FAILED", "RUNNING", "RUNNING"), sortedTaskStates(failed), failed.toString());

            CdcChecks.State srcBroken = checks.awaitState(flow, name(src), s -> s.lastError() != null, WAIT);
            assertEquals("poll: table " + name(src) + " has no watermark column ts", srcBroken.lastError());
            CdcChecks.State dstBroken = checks.awaitState(flow, name(dst), s -> s.lastError() != null, WAIT);
            assertTrue(dstBroken.lastError().contains("iso_refuses"), dstBroken.lastError());

            // ok keeps its cadence: three more batches, each in ClickHouse before the next is written
            long okNormalizedBefore = checks.state(flow, name(ok)).normalizedBatchId();
            for (int round = 0; round < 3; round++) {
                w.insert(ok, 1);
                awaitExactly(ok, w);
                w.insert(dst, 1);
            }
            assertTrue(checks.state(flow, name(ok)).normalizedBatchId() >= okNormalizedBefore + 3);
            CdcChecks.State dstStill = checks.state(flow, name(dst));
            assertNotNull(dstStill.lastError(), "dst is still refused");
            assertTrue(dstStill.errorCount() >= 2, "dst was retried: " + dstStill);
            assertEquals(1, countRows(dst), "dst's refused batches are not in ClickHouse");

            // the status command shows it
            JsonNode status = statusJson(flow);
            JsonNode dstLine = tableLine(status, name(dst));
            assertTrue(dstLine.path("last_error").asText().contains("iso_refuses"), dstLine.toString());
            assertTrue(tableLine(status, name(src)).path("last_error").asText().contains("has no watermark column ts"), status.toString());
            assertTrue(tableLine(status, name(ok)).path("last_error").isNull(), status.toString());
            String text = StatusScript.run(stack, catalogUrl, "--flow", flow);
            assertTrue(text.lines().anyMatch(l -> l.contains(name(dst)) && l.contains("errors")), text);

            // one warning for the episode, however many retries
            String episode = "normalize of flow " + flow + ", table " + name(dst);
            assertEquals(1, logs.count("WARN", episode, "failed"), "warnings of the dst episode");

            // fix the destination: dst heals at its next retry, without a restart, with every row
            checks.execute("ALTER TABLE " + chTable(dst) + " DROP CONSTRAINT iso_refuses");
            awaitExactly(dst, w);
            checks.awaitState(flow, name(dst), s -> s.lastError() == null, WAIT);
            logs.await(1, "INFO", WAIT, episode, "recovered");
            assertEquals(1, logs.count("WARN", episode, "failed"), "warnings of the dst episode");
            assertEquals(1, logs.count("INFO", episode, "recovered"), "recoveries of the dst episode");

            // fix the source: the column is back, the failed task (only it) is restarted, new rows flow
            bigQuery.query(QueryJobConfiguration.of("ALTER TABLE `" + project + "." + DATASET + ".fail_src` ADD COLUMN ts TIMESTAMP"));
            w.insert(src, 2);
            rest.restart(flow, true, true);
            rest.awaitRunning(flow, 3, WAIT);
            awaitExactly(src, w);
            w.insert(ok, 1);
            awaitExactly(ok, w);
            checks.awaitState(flow, name(src), s -> s.lastError() == null, WAIT);
            assertNull(tableLine(statusJson(flow), name(src)).path("last_error").textValue());
        } finally {
            rest.delete(flow);
            rest.delete(flow + "-sink");
        }
    }

    // ------------------------------------------------------------------------------------------ scenario 2

    /**
     * {@code slow}'s normalize fails, so its unnormalized batches reach {@code normalize.buffer.batches}: its source
     * pauses ({@code paused_reason}, no attempt recorded: no BigQuery query) while its siblings keep polling, staging
     * and normalizing. When ClickHouse takes its rows again, it resumes by itself and catches up with every row.
     */
    @Test
    void backPressurePausesOnlyTheTableWhoseNormalizeIsBehind() throws Exception {
        String flow = "iso-bp";
        TableId slow = createTable("bp_slow");
        TableId a = createTable("bp_a");
        TableId b = createTable("bp_b");
        Writer w = new Writer();
        for (TableId t : List.of(slow, a, b)) {
            w.insert(t, 1);
        }
        ConnectRestClient rest = stack.connect().rest();
        try {
            rest.putConfig(flow + "-sink", sinkConfig("isob\\..*", "iso-bp"));
            Map<String, String> source = SourceConfigs.queryCdc(stack, catalogUrl, DATASET, "bp_slow:ts:id, bp_a:ts:id, bp_b:ts:id", 3, "isob");
            source.put("normalize.buffer.batches", "3");
            rest.putConfig(flow, source);
            rest.awaitRunning(flow, 3, WAIT);
            for (TableId t : List.of(slow, a, b)) {
                awaitExactly(t, w);
            }
            checks.execute("ALTER TABLE " + chTable(slow) + " ADD CONSTRAINT iso_slow CHECK id < 0");

            // slow gets a batch per poll until its buffer is full
            CdcChecks.State paused = null;
            for (int i = 0; i < 10 && paused == null; i++) {
                long synced = checks.state(flow, name(slow)).syncedBatchId();
                w.insert(slow, 1);
                CdcChecks.State s = checks.awaitState(flow, name(slow),
                        st -> st.syncedBatchId() > synced || "normalize_buffer_full".equals(st.pausedReason()), WAIT);
                if ("normalize_buffer_full".equals(s.pausedReason())) {
                    paused = s;
                }
            }
            assertNotNull(paused, "slow never paused");
            CdcChecks.State pausedAt = checks.awaitState(flow, name(slow), st -> "normalize_buffer_full".equals(st.pausedReason()), WAIT);
            assertTrue(pausedAt.syncedBatchId() - pausedAt.normalizedBatchId() >= 3, pausedAt.toString());

            // while paused: slow polls nothing (no attempt recorded, nothing synced); a and b go on
            w.insert(slow, 3);
            CdcChecks.State aBefore = checks.state(flow, name(a));
            for (int round = 0; round < 3; round++) {
                w.insert(a, 2);
                w.insert(b, 1);
                awaitExactly(a, w);
                awaitExactly(b, w);
            }
            CdcChecks.State stillPaused = checks.state(flow, name(slow));
            assertEquals("normalize_buffer_full", stillPaused.pausedReason());
            assertEquals(pausedAt.syncedBatchId(), stillPaused.syncedBatchId(), "a paused table syncs no batch");
            assertEquals(pausedAt.lastAttemptAt(), stillPaused.lastAttemptAt(), "a paused table sends BigQuery no query");
            CdcChecks.State aAfter = checks.state(flow, name(a));
            assertTrue(aAfter.normalizedBatchId() >= aBefore.normalizedBatchId() + 3, aBefore + " -> " + aAfter);
            assertNull(aAfter.pausedReason());
            assertNull(checks.state(flow, name(b)).pausedReason());

            // normalize recovers: slow resumes by itself and catches up with every row
            checks.execute("ALTER TABLE " + chTable(slow) + " DROP CONSTRAINT iso_slow");
            awaitExactly(slow, w);
            CdcChecks.State resumed = checks.awaitState(flow, name(slow), st -> st.pausedReason() == null
                    && st.syncedBatchId() > pausedAt.syncedBatchId(), WAIT);
            assertTrue(resumed.lastAttemptAt().isAfter(pausedAt.lastAttemptAt()));
            assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), sortedTaskStates(rest.status(flow)));
        } finally {
            rest.delete(flow);
            rest.delete(flow + "-sink");
        }
    }

    // ------------------------------------------------------------------------------------------ scenario 3

    /**
     * Rows are written to three tables all along. The connector is stopped (KIP-875; a plain pause lets the removed
     * table's old task write its catalog row back, see docs/isolation.md), one table is removed from its config, and
     * it is resumed: the other two continue with every row exactly once after FINAL, the removed table's catalog row is
     * pruned, and adding it back starts it cleanly from where it was, with the rows written meanwhile.
     */
    @Test
    void pausingRemovingATableAndResumingKeepsTheOthersWhole() throws Exception {
        String flow = "iso-rm";
        TableId keep1 = createTable("rm_keep1");
        TableId keep2 = createTable("rm_keep2");
        TableId gone = createTable("rm_gone");
        List<TableId> all = List.of(keep1, keep2, gone);
        Writer w = new Writer();
        ConnectRestClient rest = stack.connect().rest();
        String tablesAll = "rm_keep1:ts:id, rm_keep2:ts:id, rm_gone:ts:id";
        try (Background writer = w.background(all, 250)) {
            rest.putConfig(flow + "-sink", sinkConfig("isor\\..*", "iso-rm"));
            rest.putConfig(flow, withLag(SourceConfigs.queryCdc(stack, catalogUrl, DATASET, tablesAll, 3, "isor"), "3000"));
            rest.awaitRunning(flow, 3, WAIT);
            for (TableId t : all) {
                checks.awaitRows("SELECT count() AS n FROM " + chTable(t) + " FINAL", r -> r.get(0).getLong("n") >= 3, WAIT);
            }

            // stopped, not only paused: a paused connector's tasks are resumed with their old configs for a moment
            // when it is resumed, and the removed table's old task writes its catalog row again right after the
            // connector pruned it (docs/isolation.md); a stopped connector has no tasks until it is resumed
            rest.stop(flow);
            rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText()), WAIT);
            // what the table synced is loaded before it is removed, so that the connector's start below prunes its
            // catalog row (a removed table with batches not loaded yet is kept until a later start: BigQueryTakeoverIT)
            checks.awaitState(flow, name(gone), s -> s.syncedBatchId() > 0 && s.normalizedBatchId() >= s.syncedBatchId(), WAIT);
            awaitNoStages(flow, name(gone));
            rest.putConfig(flow, withLag(SourceConfigs.queryCdc(stack, catalogUrl, DATASET, "rm_keep1:ts:id, rm_keep2:ts:id", 3, "isor"), "3000"));
            rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText()), WAIT);
            rest.resume(flow);
            rest.awaitRunning(flow, 2, WAIT);
            checks.awaitState(flow, name(gone), s -> !s.exists(), WAIT);
            assertTrue(checks.state(flow, name(keep1)).exists());
            Thread.sleep(3_000);
            writer.stop();
            for (TableId t : List.of(keep1, keep2)) {
                awaitExactly(t, w);
            }
            assertFalse(checks.state(flow, name(gone)).exists(), "the removed table's catalog row stays pruned");

            // back again: it continues from its offset and reads what was written while it was out
            w.insert(gone, 2);
            rest.putConfig(flow, withLag(SourceConfigs.queryCdc(stack, catalogUrl, DATASET, tablesAll, 3, "isor"), "3000"));
            rest.awaitRunning(flow, 3, WAIT);
            awaitExactly(gone, w);
            CdcChecks.State back = checks.awaitState(flow, name(gone), s -> s.exists() && s.syncedBatchId() > 0, WAIT);
            assertNull(back.lastError());
            for (TableId t : List.of(keep1, keep2)) {
                awaitExactly(t, w);
            }
        } finally {
            rest.delete(flow);
            rest.delete(flow + "-sink");
        }
    }

    // ------------------------------------------------------------------------------------------ scenario 4

    /**
     * Source and sink run in a Connect worker of their own JVM, killed with SIGKILL three times while rows are written:
     * right after a poll started, while batches are staged but not normalized, and at a random moment while batches
     * are being normalized. Each time a new worker process takes over. Afterwards every source row is in ClickHouse,
     * with its last value, exactly once after FINAL.
     */
    @Test
    void killingTheWorkerAtAnyPointLosesAndDoublesNoRow() throws Exception {
        String flow = "iso-crash";
        TableId c1 = createTable("crash_1");
        TableId c2 = createTable("crash_2");
        List<TableId> tables = List.of(c1, c2);
        Writer w = new Writer();
        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                "iso-crash-" + System.nanoTime(), stack.pluginPath());
        // the worker group notices a dead member sooner than the 10 s default
        workerProps.put("session.timeout.ms", "6000");
        workerProps.put("heartbeat.interval.ms", "1500");
        workerProps.put("scheduled.rebalance.max.delay.ms", "2000");
        Random random = new Random(42);
        int generation = 0;
        ConnectWorker worker = ConnectWorker.startProcess(workerProps, StackPaths.workDir("iso-crash-" + generation), WAIT);
        try (Background writer = w.backgroundWithUpdates(tables, 200, 300)) {
            Map<String, String> sink = sinkConfig("isoc\\..*", "iso-crash");
            sink.put("consumer.override.session.timeout.ms", "6000");
            sink.put("consumer.override.heartbeat.interval.ms", "1500");
            worker.rest().putConfig(flow + "-sink", sink);
            Map<String, String> source = SourceConfigs.queryCdc(stack, catalogUrl, DATASET, "crash_1:ts:id, crash_2:ts:id", 2, "isoc");
            // the one-second lag of every test: inserts slower than that (up to 3 s seen while worker JVMs start) lose
            // nothing here, since each table's rows are written one after the other, so no later-stamped row of the
            // table is visible before a slow one is
            source.put("safety.lag.ms", "1000");
            worker.rest().putConfig(flow, source);
            worker.rest().awaitRunning(flow, 2, WAIT);
            worker.rest().awaitRunning(flow + "-sink", 1, WAIT);
            for (TableId t : tables) {
                checks.awaitRows("SELECT count() AS n FROM " + chTable(t) + " FINAL", r -> r.get(0).getLong("n") >= 3, WAIT);
            }

            List<String> kills = new ArrayList<>();
            for (String point : List.of("poll", "staged", "normalize")) {
                switch (point) {
                    case "poll" -> {
                        // the moment a poll records its attempt: the query is running or its rows are on the way
                        Instant last = checks.state(flow, name(c1)).lastAttemptAt();
                        checks.awaitState(flow, name(c1), s -> s.lastAttemptAt() != null && !s.lastAttemptAt().equals(last), WAIT);
                    }
                    case "staged" -> {
                        // normalize refused for a while: batches are staged, offsets committed past them, not loaded
                        checks.execute("ALTER TABLE " + chTable(c2) + " ADD CONSTRAINT iso_hold CHECK id < 0");
                        awaitStaged(flow, 2);
                        Thread.sleep(1_500); // offsets flush every second
                    }
                    case "normalize" -> {
                        // batches are staged; normalize is let go and the worker dies somewhere inside it
                        awaitStaged(flow, 2);
                        checks.execute("ALTER TABLE " + chTable(c2) + " DROP CONSTRAINT iso_hold");
                        Thread.sleep(random.nextInt(400));
                    }
                    default -> throw new IllegalStateException(point);
                }
                long staged = checks.stagedBatches(flow);
                worker.kill();
                kills.add(point + " (" + staged + " staged batches)");
                generation++;
                worker = ConnectWorker.startProcess(workerProps, StackPaths.workDir("iso-crash-" + generation), WAIT);
                worker.rest().awaitRunning(flow, 2, WAIT);
                worker.rest().awaitRunning(flow + "-sink", 1, WAIT);
                // the new worker carries on before it is killed again
                long before = checks.countFinal(chTable(c1));
                checks.awaitRows("SELECT count() AS n FROM " + chTable(c1) + " FINAL", r -> r.get(0).getLong("n") > before, WAIT);
            }
            System.out.println("worker killed at: " + kills + "; longest insertAll " + w.maxInsertMs.get() + " ms");
            writer.stop();
            for (TableId t : tables) {
                awaitExactly(t, w);
            }
            // a window read again after a kill is a new batch with the same rows: it may still be on its way
            awaitNoStages(flow, null);
            worker.rest().delete(flow);
            worker.rest().delete(flow + "-sink");
        } finally {
            worker.close();
        }
    }

    // ------------------------------------------------------------------------------------------ helpers

    private static Map<String, String> sinkConfig(String topicsRegex, String stagePrefix) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, stagePrefix);
        config.put("topics.regex", topicsRegex);
        config.put("stage.local.dir", StackPaths.workDir(stagePrefix + "-local").toString());
        config.put("normalize.backoff.initial.ms", "300");
        config.put("normalize.backoff.max.ms", "1000");
        config.put("consumer.override.metadata.max.age.ms", "1000");
        return config;
    }

    private static TableId createTable(String table) {
        return BigQueryFixture.idValTsTable(bigQuery, TableId.of(project, DATASET, table));
    }

    private static String name(TableId id) {
        return project + "." + DATASET + "." + id.getTable();
    }

    private static String chTable(TableId id) {
        return name(id).replaceAll("[^A-Za-z0-9_]", "_");
    }

    /** What was written to each table: id → val, the last write of an id wins. */
    /**
     * A writer runs while this flow does: a row is stamped before its insert, so an insert slower than the safety
     * lag could be passed by the cursor unseen (by design of query CDC); a 3 s lag keeps a loaded machine clear of it.
     */
    private static Map<String, String> withLag(Map<String, String> config, String lagMs) {
        config.put("safety.lag.ms", lagMs);
        return config;
    }

    private static final class Writer {
        private final Map<String, ConcurrentSkipListMap<Long, String>> written = new java.util.concurrent.ConcurrentHashMap<>();
        private final AtomicLong sequence = new AtomicLong();

        /** The longest insertAll: a row whose insert outlasts safety.lag.ms may be passed by the cursor unseen. */
        private final AtomicLong maxInsertMs = new AtomicLong();
        private final Map<String, AtomicLong> lastIds = new java.util.concurrent.ConcurrentHashMap<>();

        /** Each row's last watermark, per table: a new version of a row is stamped after it. */
        private final Map<String, Map<Long, Instant>> stamps = new java.util.concurrent.ConcurrentHashMap<>();

        /** {@code rows} new rows, stamped now (the safety lag holds them back for a second). */
        void insert(TableId table, int rows) {
            AtomicLong lastId = lastIds.computeIfAbsent(table.getTable(), t -> new AtomicLong());
            List<Map<String, Object>> batch = new ArrayList<>();
            Map<Long, String> values = new TreeMap<>();
            Instant now = Instant.now().truncatedTo(ChronoUnit.MICROS);
            for (int i = 0; i < rows; i++) {
                long id = lastId.incrementAndGet();
                String val = "v" + sequence.incrementAndGet();
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("id", id);
                row.put("val", val);
                row.put("ts", now.plus(i, ChronoUnit.MICROS).toString());
                batch.add(row);
                values.put(id, val);
                stamps.computeIfAbsent(table.getTable(), t -> new java.util.concurrent.ConcurrentHashMap<>())
                        .put(id, now.plus(i, ChronoUnit.MICROS));
            }
            long started = System.nanoTime();
            CdcChecks.insert(bigQuery, table, batch);
            maxInsertMs.accumulateAndGet((System.nanoTime() - started) / 1_000_000, Math::max);
            written.computeIfAbsent(table.getTable(), t -> new ConcurrentSkipListMap<>()).putAll(values);
        }

        Map<Long, String> rows(TableId table) {
            return new TreeMap<>(written.getOrDefault(table.getTable(), new ConcurrentSkipListMap<>()));
        }

        /**
         * A new version of a row written before (a random id of the table): the same id again, with a new value and a
         * later watermark, which query CDC reads as an update. Its watermark is stamped {@code lateMs} before its
         * insert, as a transaction that commits after its rows were stamped, and after the row's previous version.
         */
        void update(TableId table, long lateMs, java.util.Random random) {
            ConcurrentSkipListMap<Long, String> rows = written.get(table.getTable());
            if (rows == null || rows.isEmpty()) {
                return;
            }
            long last = lastIds.get(table.getTable()).get();
            long id = 1 + (long) random.nextInt((int) Math.max(1, last));
            String val = "u" + sequence.incrementAndGet();
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("id", id);
            row.put("val", val);
            // a late stamp, though never at or before the row's previous version: an update stamped before the insert
            // it updates (the id written just now, whose insert took less than lateMs) would be the older version, and
            // ClickHouse rightly keeps the insert
            Instant ts = Instant.now().minusMillis(lateMs).truncatedTo(ChronoUnit.MICROS);
            Instant previous = stamps.get(table.getTable()).get(id);
            if (previous != null && !ts.isAfter(previous)) {
                ts = previous.plus(1, ChronoUnit.MICROS);
            }
            stamps.get(table.getTable()).put(id, ts);
            row.put("ts", ts.toString());
            long started = System.nanoTime();
            CdcChecks.insert(bigQuery, table, List.of(row));
            maxInsertMs.accumulateAndGet((System.nanoTime() - started) / 1_000_000, Math::max);
            rows.put(id, val);
        }

        /** Inserts one row into each table every {@code periodMs} until stopped. */
        Background background(List<TableId> tables, long periodMs) {
            return new Background("iso-writer", () -> {
                for (TableId t : tables) {
                    insert(t, 1);
                }
            }, periodMs);
        }

        /**
         * As {@link #background(List, long)}, and besides each new row an update of an earlier one, stamped
         * {@code lateMs} before it is written (each table's watermarks still rise: one writer, one row after the
         * other).
         */
        Background backgroundWithUpdates(List<TableId> tables, long periodMs, long lateMs) {
            java.util.Random random = new java.util.Random(7);
            return new Background("iso-writer", () -> {
                for (TableId t : tables) {
                    insert(t, 1);
                    update(t, lateMs, random);
                }
            }, periodMs);
        }
    }

    /** ClickHouse holds exactly the rows written to {@code table}, each once after FINAL, with its last value. */
    private static void awaitExactly(TableId table, Writer w) throws InterruptedException {
        Map<Long, String> expected = w.rows(table);
        String sql = "SELECT id, val, count() OVER (PARTITION BY id) AS copies FROM " + chTable(table) + " FINAL ORDER BY id";
        List<GenericRecord> rows;
        try {
            rows = checks.awaitRows(sql, r -> r.size() == expected.size() && sameRows(r, expected), WAIT);
        } catch (AssertionError e) {
            Map<Long, String> actual = new TreeMap<>();
            checks.clickhouse().queryAll("SELECT id, val FROM " + chTable(table) + " FINAL")
                    .forEach(r -> actual.put(r.getLong("id"), r.getString("val")));
            List<String> differences = new ArrayList<>();
            expected.forEach((id, val) -> {
                if (!val.equals(actual.get(id))) {
                    differences.add(id + ": expected " + val + ", found " + actual.get(id));
                }
            });
            actual.keySet().stream().filter(id -> !expected.containsKey(id)).forEach(id -> differences.add(id + ": not written"));
            throw new AssertionError(table.getTable() + ": " + expected.size() + " rows written, " + actual.size()
                    + " in ClickHouse; differences " + differences + "; longest insertAll " + w.maxInsertMs.get() + " ms", e);
        }
        for (GenericRecord row : rows) {
            assertEquals(1, row.getLong("copies"), "copies of " + table.getTable() + " row " + row.getLong("id"));
        }
        // without FINAL: a row may arrive twice (a window read again after a kill), but never as two different rows
        // at one (key, version), which FINAL would collapse to either of them
        List<GenericRecord> conflicts = checks.clickhouse().queryAll("SELECT id, toString(_tablecdc_version) AS v,"
                + " uniqExact(val) AS vals, count() AS n FROM " + chTable(table) + " GROUP BY id, v HAVING vals > 1");
        List<String> found = new ArrayList<>();
        conflicts.forEach(r -> found.add(r.getLong("id") + "@" + r.getString("v") + " (" + r.getLong("n") + " rows)"));
        assertEquals(List.of(), found, table.getTable() + ": (id, version) pairs holding different rows");
        // and the newest version of each id is the value written last
        List<GenericRecord> newest = checks.clickhouse().queryAll("SELECT id, argMax(val, _tablecdc_version) AS val,"
                + " uniqExact(_tablecdc_version) AS versions FROM " + chTable(table) + " GROUP BY id ORDER BY id");
        long updated = 0;
        for (GenericRecord r : newest) {
            assertEquals(expected.get(r.getLong("id")), r.getString("val"), "newest version of row " + r.getLong("id"));
            updated += r.getLong("versions") > 1 ? 1 : 0;
        }
        System.out.println(table.getTable() + ": " + expected.size() + " ids, " + updated + " of them with several versions");
    }

    private static boolean sameRows(List<GenericRecord> rows, Map<Long, String> expected) {
        for (GenericRecord row : rows) {
            if (!expected.getOrDefault(row.getLong("id"), "").equals(row.getString("val"))) {
                return false;
            }
        }
        return true;
    }

    private static long countRows(TableId table) {
        return checks.countFinal(chTable(table));
    }

    private static void awaitStaged(String flow, long batches) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (checks.stagedBatches(flow) < batches) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("fewer than " + batches + " batches of " + flow + " were ever staged");
            }
            Thread.sleep(100);
        }
    }

    /** Waits until the flow (or one table of it) has no stage row left; says which are left if that never happens. */
    private static void awaitNoStages(String flow, String table) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!checks.stages(flow, table).isEmpty()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("stage rows left: " + checks.stages(flow, table));
            }
            Thread.sleep(200);
        }
    }

    private static boolean anyTaskFailed(JsonNode status) {
        for (JsonNode task : status.path("tasks")) {
            if ("FAILED".equals(task.path("state").asText())) {
                return true;
            }
        }
        return false;
    }

    private static List<String> sortedTaskStates(JsonNode status) {
        List<String> states = new ArrayList<>();
        status.path("tasks").forEach(t -> states.add(t.path("state").asText()));
        states.sort(null);
        return states;
    }

    private static String traces(JsonNode status) {
        StringBuilder sb = new StringBuilder();
        status.path("tasks").forEach(t -> sb.append(t.path("trace").asText()));
        return sb.toString();
    }

    private static JsonNode statusJson(String flow) throws Exception {
        String output = StatusScript.run(stack, catalogUrl, "--flow", flow, "--json");
        assertNotNull(output, "the sink archive has bin/tablecdc-status");
        return new ObjectMapper().readTree(output);
    }

    private static JsonNode tableLine(JsonNode status, String table) {
        for (JsonNode flow : status.path("flows")) {
            for (JsonNode t : flow.path("tables")) {
                if (table.equals(t.path("table").asText())) {
                    return t;
                }
            }
        }
        throw new AssertionError("no line for " + table + " in " + status);
    }
}
