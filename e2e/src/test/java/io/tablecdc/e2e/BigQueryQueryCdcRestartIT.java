package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.TableId;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The query CDC source killed at chosen steps, in a Connect worker of its own JVM, against the emulator, Kafka, the
 * stage sink, ClickHouse and the catalog. Steps are chosen deterministically: a trigger in the catalog refuses the
 * source's sync record (the catalog mirror of a batch) while everything else goes on.
 */
class BigQueryQueryCdcRestartIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATASET = "bqrestart_it";
    private static final String CATALOG = "bqrestart_catalog";
    private static final Duration WAIT = Duration.ofSeconds(90);
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
        catalogUrl = stack.postgres().createDatabase(CATALOG);
        checks = new CdcChecks(stack, CATALOG);
    }

    /**
     * Issue 16, lost rows 1: the worker dies after Kafka acknowledged a batch and the sink loaded it, but before the
     * source recorded the batch in the catalog and before Connect flushed the batch's offset. The next task must send
     * its first batch under an id the sink has not loaded yet; an id reused there is taken as "already loaded" by the
     * sink and its rows (here the rows written while the worker was down) never reach ClickHouse, while the source's
     * cursor moves past them.
     */
    @Test
    void aBatchLoadedButNotRecordedBeforeTheKillIsNeverFollowedByTheSameId() throws Exception {
        String flow = "bqr-ids";
        TableId table = createTable("ids");
        insert(table, 1, 5);
        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                "bqr-ids-" + System.nanoTime(), stack.pluginPath());
        workerProps.put("session.timeout.ms", "6000");
        workerProps.put("heartbeat.interval.ms", "1500");
        workerProps.put("scheduled.rebalance.max.delay.ms", "2000");
        // the first worker never flushes source offsets: the kill comes before any flush
        Map<String, String> noFlush = new LinkedHashMap<>(workerProps);
        noFlush.put("offset.flush.interval.ms", "600000");
        ConnectWorker worker = ConnectWorker.startProcess(noFlush, StackPaths.workDir("bqr-ids-0"), WAIT);
        try {
            Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, "bqr-ids");
            sink.put("topics.regex", "bqrids\\..*");
            sink.put("stage.local.dir", StackPaths.workDir("bqr-ids-local").toString());
            sink.put("normalize.backoff.initial.ms", "300");
            sink.put("normalize.backoff.max.ms", "1000");
            sink.put("consumer.override.metadata.max.age.ms", "1000");
            sink.put("consumer.override.session.timeout.ms", "6000");
            sink.put("consumer.override.heartbeat.interval.ms", "1500");
            worker.rest().putConfig(flow + "-sink", sink);
            worker.rest().awaitRunning(flow + "-sink", 1, WAIT);
            // the sink migrated the catalog: from now on the source's sync record of this flow is refused
            awaitCatalogTables();
            catalog("CREATE OR REPLACE FUNCTION bqr_hold_sync() RETURNS trigger LANGUAGE plpgsql AS"
                    + " $$ BEGIN RAISE EXCEPTION 'the test holds the sync record'; END $$");
            catalog("CREATE TRIGGER bqr_hold_sync BEFORE UPDATE ON cdc_table_replication_state FOR EACH ROW"
                    + " WHEN (NEW.flow_name = '" + flow + "' AND NEW.synced_batch_id > OLD.synced_batch_id)"
                    + " EXECUTE FUNCTION bqr_hold_sync()");
            worker.rest().putConfig(flow, SourceConfigs.queryCdc(stack, catalogUrl, DATASET, "ids:ts:id", 1, "bqrids"));
            worker.rest().awaitRunning(flow, 1, WAIT);

            // the snapshot reaches ClickHouse and the sink records it as normalized; the source could not record it
            checks.awaitRows("SELECT count() AS n FROM " + chTable(table) + " FINAL", r -> r.get(0).getLong("n") == 5, WAIT);
            CdcChecks.State loaded = checks.awaitState(flow, name(table), s -> s.normalizedBatchId() > 0, WAIT);
            assertEquals(0, loaded.syncedBatchId(), "the trigger held the source's sync record");
            worker.kill();

            insert(table, 6, 3);
            catalog("DROP TRIGGER bqr_hold_sync ON cdc_table_replication_state");
            worker = ConnectWorker.startProcess(workerProps, StackPaths.workDir("bqr-ids-1"), WAIT);
            worker.rest().awaitRunning(flow, 1, WAIT);
            worker.rest().awaitRunning(flow + "-sink", 1, WAIT);
            // the new task reads the table again and records its batch; the sink loads it
            CdcChecks.State after = checks.awaitState(flow, name(table),
                    s -> s.syncedBatchId() > 0 && s.normalizedBatchId() >= s.syncedBatchId() && checksNoStages(flow), WAIT);
            assertEquals(8, checks.countFinal(chTable(table)),
                    "every row in ClickHouse once the batch after the restart is loaded; catalog " + after);
            assertTrue(after.syncedBatchId() > loaded.normalizedBatchId(), "a new batch id after the kill: " + after);
            worker.rest().delete(flow);
            worker.rest().delete(flow + "-sink");
        } finally {
            try {
                catalog("DROP TRIGGER IF EXISTS bqr_hold_sync ON cdc_table_replication_state");
            } finally {
                worker.close();
            }
        }
    }

    /**
     * Issue 16: the initial snapshot is read in chunks (windows of max.query.window.ms), each committed on its own.
     * The worker dies after Connect flushed the offset of the second chunk (its catalog record is held by a trigger):
     * the next task continues with the third chunk instead of reading the table again from the start.
     */
    @Test
    void aSnapshotStoppedMidWayContinuesFromItsLastChunk() throws Exception {
        String flow = "bqr-chunks";
        TableId table = createTable("chunks");
        Instant day0 = Instant.now().minus(Duration.ofDays(4)).truncatedTo(ChronoUnit.SECONDS);
        List<Map<String, Object>> rows = new ArrayList<>();
        for (long id = 1; id <= 9; id++) {
            // three rows a day, three days: one chunk of a day each
            Instant ts = day0.plus(Duration.ofDays((id - 1) / 3)).plusSeconds(id);
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("id", id);
            row.put("val", "v" + id);
            row.put("ts", ts.toString());
            rows.add(row);
        }
        CdcChecks.insert(bigQuery, table, rows);
        Instant secondChunkEnd = day0.plus(Duration.ofDays(1)).plusSeconds(6);
        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                "bqr-chunks-" + System.nanoTime(), stack.pluginPath());
        workerProps.put("session.timeout.ms", "6000");
        workerProps.put("heartbeat.interval.ms", "1500");
        workerProps.put("scheduled.rebalance.max.delay.ms", "2000");
        ConnectWorker worker = ConnectWorker.startProcess(workerProps, StackPaths.workDir("bqr-chunks-0"), WAIT);
        try {
            Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, "bqr-chunks");
            sink.put("topics.regex", "bqrchunks\\..*");
            sink.put("stage.local.dir", StackPaths.workDir("bqr-chunks-local").toString());
            sink.put("normalize.backoff.initial.ms", "300");
            sink.put("normalize.backoff.max.ms", "1000");
            sink.put("consumer.override.metadata.max.age.ms", "1000");
            worker.rest().putConfig(flow + "-sink", sink);
            worker.rest().awaitRunning(flow + "-sink", 1, WAIT);
            awaitCatalogTables();
            // the second chunk's catalog record is refused: the task stops there, its offset flushed by Connect
            catalog("CREATE OR REPLACE FUNCTION bqr_hold_sync() RETURNS trigger LANGUAGE plpgsql AS"
                    + " $$ BEGIN RAISE EXCEPTION 'the test holds the sync record'; END $$");
            catalog("CREATE TRIGGER bqr_hold_chunks BEFORE UPDATE ON cdc_table_replication_state FOR EACH ROW"
                    + " WHEN (NEW.flow_name = '" + flow + "' AND NEW.synced_batch_id > OLD.synced_batch_id"
                    + " AND OLD.synced_batch_id > 0) EXECUTE FUNCTION bqr_hold_sync()");
            worker.rest().putConfig(flow, SourceConfigs.queryCdc(stack, catalogUrl, DATASET, "chunks:ts:id", 1, "bqrchunks"));
            worker.rest().awaitRunning(flow, 1, WAIT);
            CdcChecks.State first = checks.awaitState(flow, name(table), s -> s.syncedBatchId() > 0, WAIT);
            assertEquals(3, first.syncedRows(), "the first chunk: one day, three rows; " + first);
            awaitOffsetCursor(worker, flow, secondChunkEnd);
            worker.kill();

            catalog("DROP TRIGGER bqr_hold_chunks ON cdc_table_replication_state");
            worker = ConnectWorker.startProcess(workerProps, StackPaths.workDir("bqr-chunks-1"), WAIT);
            worker.rest().awaitRunning(flow, 1, WAIT);
            checks.awaitRows("SELECT count() AS n FROM " + chTable(table) + " FINAL", r -> r.get(0).getLong("n") == 9, WAIT);
            CdcChecks.State done = checks.awaitState(flow, name(table),
                    s -> s.cursor().equals(day0.plus(Duration.ofDays(2)).plusSeconds(9).toString().replace("Z", ".000000000Z")), WAIT);
            // chunks 1 and 3 were recorded; the restarted task never read rows 1-6 again
            assertEquals(6, done.syncedRows(), "rows recorded by the two tasks: " + done);
            worker.rest().delete(flow);
            worker.rest().delete(flow + "-sink");
        } finally {
            try {
                catalog("DROP TRIGGER IF EXISTS bqr_hold_chunks ON cdc_table_replication_state");
            } finally {
                worker.close();
            }
        }
    }

    private static void awaitOffsetCursor(ConnectWorker worker, String flow, Instant cursor) throws Exception {
        String expected = cursor.toString().replace("Z", ".000000000Z");
        long deadline = System.nanoTime() + WAIT.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            for (var entry : worker.rest().offsets(flow).path("offsets")) {
                last = entry.path("offset").toString();
                if (expected.equals(entry.path("offset").path("cursor").asText())) {
                    return;
                }
            }
            Thread.sleep(300);
        }
        throw new AssertionError("the offset never reached " + expected + "; last " + last);
    }

    // ------------------------------------------------------------------------------------------ helpers

    private static boolean checksNoStages(String flow) {
        try {
            return checks.stagedBatches(flow) == 0;
        } catch (Exception e) {
            return false;
        }
    }

    private static void awaitCatalogTables() throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (true) {
            try (Connection c = stack.postgres().connect(CATALOG); Statement s = c.createStatement();
                 var rs = s.executeQuery("SELECT to_regclass('cdc_table_replication_state') IS NOT NULL")) {
                if (rs.next() && rs.getBoolean(1)) {
                    return;
                }
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("the sink never migrated the catalog " + CATALOG);
            }
            Thread.sleep(200);
        }
    }

    private static void catalog(String sql) throws Exception {
        try (Connection c = stack.postgres().connect(CATALOG); Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }

    private static TableId createTable(String table) {
        return BigQueryFixture.idValTsTable(bigQuery, TableId.of(project, DATASET, table));
    }

    /** Rows {@code first .. first + count - 1}, each stamped {@code BASE + id} seconds. */
    private static void insert(TableId table, long first, int count) {
        List<Map<String, Object>> rows = new ArrayList<>();
        for (long id = first; id < first + count; id++) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("id", id);
            row.put("val", "v" + id);
            row.put("ts", BASE.plusSeconds(id).toString());
            rows.add(row);
        }
        CdcChecks.insert(bigQuery, table, rows);
    }

    private static String name(TableId id) {
        return project + "." + DATASET + "." + id.getTable();
    }

    private static String chTable(TableId id) {
        return name(id).replaceAll("[^A-Za-z0-9_]", "_");
    }
}
