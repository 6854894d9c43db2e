package io.tablecdc.catalog;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tablecdc.catalog.CatalogConfig.CatalogSettings;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.File;
import java.net.ServerSocket;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.apache.kafka.common.config.types.Password;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The catalog client against a real Postgres. Each test uses its own flow names. */
class CatalogTest {

    private static final Instant T0 = Instant.parse("2026-01-01T00:00:00Z");

    private static EmbeddedPostgres postgres;
    private static Catalog catalog;
    private static DataSource raw;

    @BeforeAll
    static void start() throws Exception {
        File dir = new File("target/embedded-pg/" + CatalogTest.class.getSimpleName());
        postgres = EmbeddedPostgres.builder()
                .setOverrideWorkingDirectory(dir)
                .setDataDirectory(new File(dir, "data"))
                .setCleanDataDirectory(true)
                .start();
        try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE catalog");
            s.execute("ALTER USER postgres PASSWORD 's3cret-pw'");
        }
        catalog = Catalog.open(settings("catalog", true), "CatalogTest");
        raw = postgres.getDatabase("postgres", "catalog");
    }

    @AfterAll
    static void stop() throws Exception {
        if (catalog != null) {
            catalog.close();
        }
        if (postgres != null) {
            postgres.close();
        }
    }

    private static CatalogSettings settings(String database, boolean migrate) {
        return settings(database, migrate, 4);
    }

    private static CatalogSettings settings(String database, boolean migrate, int poolSize) {
        return new CatalogSettings(postgres.getJdbcUrl("postgres", database), "postgres",
                new Password("s3cret-pw"), migrate, poolSize, 5_000);
    }

    private static Instant t(int seconds) {
        return T0.plusSeconds(seconds);
    }

    /** Every catalog row of a flow, all columns, as text: the state an operation leaves behind. */
    private static String snapshot(String flow) throws SQLException {
        StringBuilder sb = new StringBuilder();
        try (Connection c = raw.getConnection()) {
        for (String query : List.of(
                "SELECT * FROM cdc_flow WHERE flow_name = ?",
                "SELECT * FROM cdc_table_replication_state WHERE flow_name = ? ORDER BY source_table_identifier",
                "SELECT * FROM cdc_table_avro_stage WHERE flow_name = ? ORDER BY source_table_identifier, batch_id")) {
            try (PreparedStatement ps = c.prepareStatement(query)) {
                ps.setString(1, flow);
                try (ResultSet rs = ps.executeQuery()) {
                    int columns = rs.getMetaData().getColumnCount();
                    while (rs.next()) {
                        for (int i = 1; i <= columns; i++) {
                            sb.append(rs.getMetaData().getColumnName(i)).append('=').append(rs.getString(i)).append(' ');
                        }
                        sb.append('\n');
                    }
                }
            }
            sb.append("--\n");
        }
        }
        return sb.toString();
    }

    private static TableState table(String flow, String table) {
        return catalog.progress().getTable(flow, table).orElseThrow();
    }

    private record Step(String name, Consumer<Catalog> op, boolean changes, boolean repeat) {
        Step(String name, Consumer<Catalog> op, boolean changes) {
            this(name, op, changes, true);
        }
    }

    /**
     * A statement of a catalog transaction fails in a way that makes the pool close the connection (SQLSTATE class 57,
     * here from a trigger): the caller must get that failure, as an outage to retry, not the pool's "Connection is
     * closed" from resetting the closed connection afterwards, which hid the cause and read as a broken catalog.
     */
    @Test
    void aTransactionWhoseConnectionThePoolClosesReportsTheFailureNotTheClosedConnection() throws Exception {
        String flow = "closed-f";
        String table = "s.closed";
        catalog.progress().initTable(flow, table);
        catalog.stages().upsertStage(flow, table, new Stage(1, List.of(new StageFile("file:///closed/1.avro", 1, 8)), 1,
                new RowCounts(1, 0, 0)));
        try (Connection c = raw.getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE FUNCTION closed_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                    + " IF NEW.source_table_identifier = 's.closed' AND NEW.normalized_batch_id > OLD.normalized_batch_id THEN"
                    + "   RAISE EXCEPTION 'the catalog refuses to record this load (test)' USING ERRCODE = '57P03';"
                    + " END IF; RETURN NEW; END $$");
            s.execute("CREATE TRIGGER closed_refuse BEFORE UPDATE ON cdc_table_replication_state FOR EACH ROW"
                    + " EXECUTE FUNCTION closed_refuse()");
        }
        try {
            RuntimeException e = assertThrows(RuntimeException.class, () -> catalog.stages().recordLoaded(flow, table,
                    catalog.stages().listStages(flow, table), new RowCounts(1, 0, 0), T0));
            assertTrue(e instanceof CatalogUnavailableException, e.toString());
            assertTrue(e.getMessage().contains("refuses to record this load"), e.getMessage());
        } finally {
            try (Connection c = raw.getConnection(); Statement s = c.createStatement()) {
                s.execute("DROP TRIGGER closed_refuse ON cdc_table_replication_state");
                s.execute("DROP FUNCTION closed_refuse()");
            }
        }
        assertEquals(0, catalog.progress().getTable(flow, table).orElseThrow().normalizedBatchId());
    }

    @Test
    void everyOperationCalledTwiceWithTheSameArgumentsLeavesTheSameState() throws Exception {
        String f = "idempotent";
        String q = "ds.orders";
        String p = "public.items";
        Stage stage = new Stage(1, List.of(new StageFile("file:///s/1-a.avro", 6, 600),
                new StageFile("file:///s/1-b.avro", 4, 400)), 10, new RowCounts(7, 2, 1));
        Stage restaged = new Stage(1, List.of(new StageFile("file:///s/1-c.avro", 10, 900)), 10,
                new RowCounts(7, 2, 1));
        Stage truncateOnly = new Stage(2, List.of(), 0, RowCounts.ZERO, true);
        List<Step> steps = List.of(
                new Step("registerFlow", c -> c.flows().registerFlow(f, new FlowIdentity("pg_pipeline", "7001", 1L,
                        "tablecdc_abc", "pub", null), "hash-1"), true),
                new Step("registerFlow (destination learnt)", c -> c.flows().registerFlow(f, new FlowIdentity(null, null,
                        null, null, null, "clickhouse:default"), null), true),
                new Step("initTable", c -> c.progress().initTable(f, q), true),
                new Step("recordAttempt", c -> c.progress().recordAttempt(f, q, t(1)), true),
                new Step("recordSync", c -> c.progress().recordSync(f, q,
                        new SyncedBatch("2026-01-01T00:00:01.000000001Z", 1, 10, t(1), t(0)), t(2)), true),
                new Step("recordSync (cursor only)", c -> c.progress().recordSync(f, q,
                        SyncedBatch.cursorOnly("2026-01-01T00:00:03.000000000Z", 1), t(3)), true),
                new Step("upsertStage", c -> c.stages().upsertStage(f, q, stage), true),
                new Step("upsertStage (replace)", c -> c.stages().upsertStage(f, q, restaged), true),
                new Step("upsertStage (truncate only)", c -> c.stages().upsertStage(f, q, truncateOnly), true),
                new Step("recordSinkTopic", c -> c.sink().recordSinkTopic(f, q, "sink-a", "topic.orders"), true),
                new Step("setPause", c -> c.progress().setPause(f, q, "normalize_buffer_full", t(4)), true),
                new Step("clearPause", c -> c.progress().clearPause(f, q), true),
                new Step("setPause (a copy's)", c -> c.progress().setPause(f, q, "normalize_buffer_full", t(4)), true),
                new Step("clearPause (its own reason)", c -> c.progress().clearPause(f, q, "normalize_buffer_full"), true),
                new Step("recordError", c -> c.progress().recordError(f, q, "boom", t(5), t(10)), true),
                new Step("recordError (again later)", c -> c.progress().recordError(f, q, "boom 2", t(6), t(16)), true),
                new Step("clearError", c -> c.progress().clearError(f, q), true),
                new Step("recordNormalize", c -> c.progress().recordNormalize(f, q, 1, new RowCounts(7, 2, 1), t(7)), true),
                new Step("deleteStage", c -> c.stages().deleteStage(f, q, 1), true),
                new Step("recordLoaded", c -> c.stages().recordLoaded(f, q, List.of(truncateOnly), RowCounts.ZERO, t(8)),
                        true),
                new Step("deleteStage (the files loaded)", c -> c.stages().deleteStage(f, q, 2, truncateOnly.files()), true),
                new Step("initTable (pending)", c -> c.progress().initTable(f, p, Phase.PENDING), true),
                new Step("markReady (from pending)", c -> c.phases().markReady(f, p, "0/16B3748"), true),
                new Step("setPending", c -> c.phases().setPending(f, p), true),
                new Step("claimCopy (once: each call claims another table)",
                        c -> c.copies().claimCopy(f, "task-1", Duration.ofMinutes(5)), true, false),
                new Step("markCatchup", c -> c.phases().markCatchup(f, p, "task-1", "0/200"), true),
                new Step("markCaughtUpReady", c -> c.phases().markCaughtUpReady(f, "0/300"), true),
                new Step("markErrored", c -> c.phases().markErrored(f, p, null, "decode failed", t(8), t(9)), true),
                new Step("replaceSlot", c -> c.flows().replaceSlot(f, "tablecdc_abc", "tablecdc_def"), true),
                new Step("getTable", c -> c.progress().getTable(f, q), false),
                new Step("listTables", c -> c.progress().listTables(f), false),
                new Step("listStages", c -> c.stages().listStages(f, q), false),
                new Step("markCaughtUpReady (none in catchup)", c -> c.phases().markCaughtUpReady(f, "FFFFFFFF/FFFFFFFF"),
                        false),
                new Step("pruneTables", c -> c.flows().pruneTables(f, List.of(q)), true));

        for (Step step : steps) {
            String before = snapshot(f);
            step.op().accept(catalog);
            String once = snapshot(f);
            if (step.changes()) {
                assertNotEquals(before, once, step.name() + " should change the catalog the first time");
            }
            if (!step.repeat()) {
                continue;
            }
            step.op().accept(catalog);
            assertEquals(once, snapshot(f), step.name() + " called twice left another state than once");
        }
    }

    @Test
    void aSideClosesOnlyItsOwnErrorEpisode() {
        String f = "episodes";
        catalog.progress().initTable(f, "t");
        catalog.progress().recordError(f, "t", "normalize: ClickHouse refused", t(1), t(2));
        assertFalse(catalog.progress().clearError(f, "t", "poll:"), "the source must not end the sink's episode");
        assertEquals("normalize: ClickHouse refused", table(f, "t").lastError());
        assertTrue(catalog.progress().clearError(f, "t", "normalize:"));
        assertNull(table(f, "t").lastError());
    }

    /**
     * A batch's refusal names the batch only while it is the table's last error: any later error (an outage, a source's
     * poll error) and the end of the episode leave no batch named.
     */
    @Test
    void aRefusalNamesItsBatchOnlyWhileItIsTheLastError() throws Exception {
        String f = "refusals";
        catalog.progress().initTable(f, "t");
        assertNull(refusedBatch(f, "t"));
        catalog.progress().recordError(f, "t", "normalize: ClickHouse refused batch 7: Code: 469.", t(1), t(2), 7L);
        assertEquals(7L, refusedBatch(f, "t"));
        catalog.progress().recordError(f, "t", "normalize: ClickHouse refused batch 7: Code: 469.", t(1), t(2), 7L);
        assertEquals(7L, refusedBatch(f, "t"), "a repeat changes nothing");
        catalog.progress().recordError(f, "t", "normalize: Connection refused", t(3), t(4));
        assertNull(refusedBatch(f, "t"), "a later error that is no refusal");
        catalog.progress().recordError(f, "t", "normalize: ClickHouse refused batch 7: Code: 469.", t(5), t(6), 7L);
        assertEquals(7L, refusedBatch(f, "t"));
        catalog.progress().recordError(f, "t", "poll: BigQuery unreachable", t(7), t(8));
        assertNull(refusedBatch(f, "t"), "the source's error replaced it");
        catalog.progress().recordError(f, "t", "normalize: ClickHouse refused batch 7: Code: 469.", t(9), t(10), 7L);
        assertTrue(catalog.progress().clearError(f, "t", "normalize:"));
        assertNull(refusedBatch(f, "t"), "the episode ended");
        catalog.progress().recordError(f, "t", "normalize: ClickHouse refused batch 7: Code: 469.", t(11), t(12), 7L);
        try (Connection c = raw.getConnection(); Statement s = c.createStatement()) {
            // an error written by another path (a Postgres table's copy error) moves last_error_at without the refusal
            s.execute("UPDATE cdc_table_replication_state SET last_error = 'copy: failed', last_error_at = last_error_at"
                    + " + interval '1 second' WHERE flow_name = 'refusals'");
        }
        assertNull(refusedBatch(f, "t"), "another writer's error");
    }

    private Long refusedBatch(String flow, String table) throws Exception {
        try (Connection c = raw.getConnection()) {
            return SinkLeases.lockForOperator(c, flow, table).orElseThrow().refusedBatchId();
        }
    }

    /**
     * A Postgres table that is {@code errored} owns its error and its retry time: the sink's error episode on the
     * same row (ClickHouse refusing its loads) neither replaces them nor clears them. Before, a table that had left
     * the publication got the sink's retry time, and a copy task claimed it again (randomized run, seed 8604); and a
     * failed copy waiting for its retry lost its retry time when the sink's episode ended.
     */
    @Test
    void theSinksErrorEpisodeLeavesAnErroredPostgresTablesErrorAndRetryAsTheyAre() {
        String f = "errored-sink";
        Instant later = Instant.now().plusSeconds(60);
        // left the publication: errored for good, no retry
        catalog.progress().initTable(f, "s.left", Phase.PENDING);
        assertTrue(catalog.phases().markLeft(f, "s.left", "left publication p: no longer replicated"));
        TableState left = table(f, "s.left");
        assertFalse(catalog.progress().recordError(f, "s.left", "normalize: ClickHouse refused", later, later.plusSeconds(1)));
        assertEquals(left, table(f, "s.left"));
        assertTrue(catalog.copies().claimCopy(f, "task-1", Duration.ofMinutes(5)).isEmpty(), "a table that left is never copied");
        assertFalse(catalog.progress().clearError(f, "s.left", "normalize:"));
        assertEquals(left, table(f, "s.left"));
        // a failed copy waiting for its retry
        catalog.progress().initTable(f, "s.failed", Phase.PENDING);
        assertTrue(catalog.phases().markErrored(f, "s.failed", null, "copy attempt 1 failed: boom", Instant.now(),
                Instant.now().plusSeconds(3600)));
        TableState failed = table(f, "s.failed");
        assertFalse(catalog.progress().recordError(f, "s.failed", "normalize: ClickHouse refused", later, later.plusSeconds(1)));
        assertFalse(catalog.progress().clearError(f, "s.failed", "normalize:"));
        assertEquals(failed, table(f, "s.failed"));
        assertNotNull(failed.nextRetryAt());
        // a table in another phase records the sink's error as before
        catalog.progress().initTable(f, "s.ready", Phase.PENDING);
        assertTrue(catalog.progress().recordError(f, "s.ready", "normalize: ClickHouse refused", later, later.plusSeconds(1)));
        assertEquals("normalize: ClickHouse refused", table(f, "s.ready").lastError());
    }

    @Test
    void tablesWithStagesFindsOnlyTheSinksOwnTopicsWithBatchesWaiting() {
        String f = "sinktopics";
        for (String t : List.of("a", "b", "c")) {
            catalog.progress().initTable(f, t);
        }
        catalog.sink().recordSinkTopic(f, "a", "sink-1", "t.a");
        catalog.sink().recordSinkTopic(f, "b", "sink-1", "t.b");
        catalog.sink().recordSinkTopic(f, "c", "sink-2", "t.c");
        Stage stage = new Stage(1, List.of(new StageFile("file:///x.avro", 1, 10)), 1, new RowCounts(1, 0, 0));
        catalog.stages().upsertStage(f, "a", stage);
        catalog.stages().upsertStage(f, "c", stage);
        List<String[]> found = catalog.stages().tablesWithStages("sink-1", List.of("t.a", "t.b", "t.c"));
        assertEquals(1, found.size());
        assertEquals(List.of(f, "a", "t.a"), List.of(found.get(0)));
        assertTrue(catalog.stages().tablesWithStages("sink-1", List.of("t.b")).isEmpty());
    }

    @Test
    void reservedBatchIdsAreNeverHandedOutTwiceAndStayAboveWhatWasSyncedOrStaged() {
        String f = "reserve";
        catalog.progress().initTable(f, "s.t", Phase.PENDING);
        catalog.progress().recordSync(f, "s.t", new SyncedBatch("0/10", 7, 1, t(1), t(0)), t(2));
        assertEquals(8, catalog.batchIds().reserveBatchIds(f, "s.t", 10));
        // another task (or this one after a crash) gets the next block, never the same ids
        assertEquals(18, catalog.batchIds().reserveBatchIds(f, "s.t", 5));
        // a batch the sink staged beyond every reservation (ids from before reservations existed) is stepped over
        catalog.stages().upsertStage(f, "s.t", new Stage(40, List.of(), 0, new RowCounts(0, 0, 0), true, null));
        assertEquals(41, catalog.batchIds().reserveBatchIds(f, "s.t", 1));
        assertThrows(CatalogException.class, () -> catalog.batchIds().reserveBatchIds(f, "no.such", 1));
    }

    @Test
    void initTableNeverOverwritesProgress() {
        String f = "init";
        assertTrue(catalog.progress().initTable(f, "ds.t", Phase.PENDING));
        catalog.progress().recordSync(f, "ds.t", new SyncedBatch("c5", 5, 50, t(1), t(0)), t(2));
        catalog.phases().markReady(f, "ds.t", "0/10");
        TableState before = table(f, "ds.t");

        assertFalse(catalog.progress().initTable(f, "ds.t", Phase.PENDING));
        assertFalse(catalog.progress().initTable(f, "ds.t"));
        assertEquals(before, table(f, "ds.t"));
        assertEquals(5, before.syncedBatchId());
        assertEquals("c5", before.cursor());
        assertEquals(Phase.READY, before.phase());
    }

    @Test
    void syncAddsRowsOnlyWhenTheBatchAdvancesAndIgnoresStaleBatches() {
        String f = "sync";
        String tb = "ds.t";
        catalog.progress().recordSync(f, tb, new SyncedBatch("c1", 1, 10, t(1), t(0)), t(2));
        catalog.progress().recordSync(f, tb, new SyncedBatch("c2", 2, 5, t(3), t(2)), t(4));
        TableState s = table(f, tb);
        assertEquals(2, s.syncedBatchId());
        assertEquals(15, s.syncedRows());
        assertEquals("c2", s.cursor());
        assertEquals(t(1), s.firstRowReceivedAt(), "the oldest unnormalized row is batch 1's");
        assertEquals(t(0), s.firstRowCommitTime());

        // a late acknowledgement of batch 1 must not rewind the cursor or count again
        assertFalse(catalog.progress().recordSync(f, tb, new SyncedBatch("c1", 1, 10, t(1), t(0)), t(5)));
        assertEquals(s, table(f, tb));

        // an empty window walked forward: cursor moves, id and rows stay
        assertTrue(catalog.progress().recordSync(f, tb, SyncedBatch.cursorOnly("c3", 2), t(6)));
        TableState moved = table(f, tb);
        assertEquals("c3", moved.cursor());
        assertEquals(2, moved.syncedBatchId());
        assertEquals(15, moved.syncedRows());
        assertEquals(t(6), moved.lastSyncedAt());
    }

    @Test
    void normalizeAddsCountsOnlyWhenTheIdAdvances() {
        String f = "normalize";
        String tb = "ds.t";
        catalog.progress().recordSync(f, tb, new SyncedBatch("c3", 3, 30, t(1), t(0)), t(2));

        assertTrue(catalog.progress().recordNormalize(f, tb, 2, new RowCounts(10, 5, 1), t(3)));
        TableState partly = table(f, tb);
        assertEquals(2, partly.normalizedBatchId());
        assertEquals(new RowCounts(10, 5, 1), partly.normalizedCounts());
        assertEquals(t(1), partly.firstRowReceivedAt(), "batch 3 is still waiting");
        assertEquals(1, partly.unnormalizedBatches());

        assertFalse(catalog.progress().recordNormalize(f, tb, 2, new RowCounts(10, 5, 1), t(4)), "repeat");
        assertFalse(catalog.progress().recordNormalize(f, tb, 1, new RowCounts(3, 0, 0), t(5)), "stale");
        assertEquals(partly, table(f, tb));

        assertTrue(catalog.progress().recordNormalize(f, tb, 3, new RowCounts(4, 0, 0, 3), t(6)));
        TableState done = table(f, tb);
        assertEquals(new RowCounts(14, 5, 1, 3), done.normalizedCounts(), "values stored at ClickHouse's range edge add up too");
        assertNull(done.firstRowReceivedAt(), "nothing left to normalize");
        assertNull(done.firstRowCommitTime());
        assertEquals(t(6), done.lastNormalizedAt());
        assertEquals(0, done.unnormalizedBatches());
    }

    @Test
    void aBatchNormalizedBeforeItsSyncIsRecordedLeavesNoLag() {
        String f = "sink-first";
        String tb = "ds.t";
        catalog.progress().recordSync(f, tb, new SyncedBatch("c1", 1, 1, t(1), t(0)), t(2));
        catalog.progress().recordNormalize(f, tb, 1, new RowCounts(1, 0, 0), t(3));
        // the sink loaded batch 2 before the source's acknowledgement for it arrived
        catalog.progress().recordNormalize(f, tb, 2, new RowCounts(2, 0, 0), t(4));
        catalog.progress().recordSync(f, tb, new SyncedBatch("c2", 2, 2, t(3), t(2)), t(5));
        TableState s = table(f, tb);
        assertEquals(2, s.syncedBatchId());
        assertEquals(2, s.normalizedBatchId());
        assertNull(s.firstRowReceivedAt(), "nothing is waiting to be normalized");
        assertNull(s.firstRowCommitTime());
        assertEquals(3, s.syncedRows());
    }

    @Test
    void stagedOffsetsOfSelfCutBatchesRiseWithTheirStageRowsAndOutliveThem() throws SQLException {
        String f = "sink-offsets";
        String tb = "topic.t";
        catalog.progress().initTable(f, tb);
        Stage one = new Stage(1, List.of(new StageFile("s3://b/o/1-0.avro", 3, 30)), 3, new RowCounts(3, 0, 0));
        assertTrue(catalog.stages().upsertStage(f, tb, one, List.of(new StagedOffsets("topic.t", 0, 2, 1_000))));
        // an answer lost: the same call again finds its own row
        assertTrue(catalog.stages().upsertStage(f, tb, one, List.of(new StagedOffsets("topic.t", 0, 2, 1_000))));
        assertEquals(List.of(new StagedOffsets("topic.t", 0, 2, 1_000)), catalog.stages().stagedOffsets(f, tb));
        // a batch of records all staged before (cut elsewhere by another task): not stored
        Stage replay = new Stage(2, List.of(new StageFile("s3://b/o/2-0.avro", 2, 20)), 2, new RowCounts(2, 0, 0));
        assertFalse(catalog.stages().upsertStage(f, tb, replay, List.of(new StagedOffsets("topic.t", 0, 2, 900))));
        assertEquals(Optional.empty(), catalog.stages().getStage(f, tb, 2));
        // one reaching past them is stored, and raises them (never lowers the timestamp)
        Stage three = new Stage(3, List.of(new StageFile("s3://b/o/3-0.avro", 2, 20)), 2, new RowCounts(2, 0, 0));
        assertTrue(catalog.stages().upsertStage(f, tb, three, List.of(new StagedOffsets("topic.t", 0, 4, 800))));
        assertEquals(List.of(new StagedOffsets("topic.t", 0, 4, 1_000)), catalog.stages().stagedOffsets(f, tb));
        // kept after the batches are loaded and their stage rows deleted
        assertTrue(catalog.stages().deleteStage(f, tb, 1));
        assertTrue(catalog.stages().deleteStage(f, tb, 3));
        assertEquals(List.of(new StagedOffsets("topic.t", 0, 4, 1_000)), catalog.stages().stagedOffsets(f, tb));
        assertEquals(List.of(), catalog.stages().stagedOffsets(f, "other.t"));
        // tablecdc-reload-table forgets them with the stage rows
        try (Connection c = raw.getConnection()) {
            Stages.dropStages(c, f, tb);
        }
        assertEquals(List.of(), catalog.stages().stagedOffsets(f, tb));
    }

    @Test
    void stagesRoundTripInOrderAndAreNotStoredForNormalizedBatches() {
        String f = "stages";
        String tb = "ds.t";
        Stage one = new Stage(1, List.of(new StageFile("s3://b/t/1-0.avro", 2, 20),
                new StageFile("s3://b/t/1-1.avro", 1, 10)), 3, new RowCounts(1, 1, 1, 4));
        // a batch that is only a truncate: no file, stored all the same so that it is normalized in order
        Stage two = new Stage(2, List.of(), 0, RowCounts.ZERO, true);
        Stage three = new Stage(3, List.of(new StageFile("s3://b/t/3-0.avro", 5, 50)), 5, new RowCounts(5, 0, 0));
        assertTrue(catalog.stages().upsertStage(f, tb, three));
        assertTrue(catalog.stages().upsertStage(f, tb, one));
        assertTrue(catalog.stages().upsertStage(f, tb, two));

        List<Stage> all = catalog.stages().listStages(f, tb);
        assertEquals(List.of(1L, 2L, 3L), all.stream().map(Stage::batchId).toList());
        Stage read = all.get(0);
        assertEquals(one.files(), read.files());
        assertEquals(one.counts(), read.counts());
        assertEquals(3, read.rows());
        assertTrue(all.get(1).files().isEmpty());
        assertFalse(all.get(0).truncateBefore());
        assertTrue(all.get(1).truncateBefore());
        assertFalse(all.get(2).truncateBefore());
        // restaging a batch replaces its truncate flag with the manifest (the batch's first record decides it)
        Stage threeAfterTruncate = new Stage(3, three.files(), 5, three.counts(), true);
        assertTrue(catalog.stages().upsertStage(f, tb, threeAfterTruncate));
        assertTrue(catalog.stages().getStage(f, tb, 3).orElseThrow().truncateBefore());
        assertEquals(List.of(3L), catalog.stages().listStages(f, tb, 2).stream().map(Stage::batchId).toList());
        assertEquals(three.files(), catalog.stages().getStage(f, tb, 3).orElseThrow().files());
        assertEquals(Optional.empty(), catalog.stages().getStage(f, tb, 4));
        assertEquals(List.of(), catalog.stages().listStages(f, "ds.other"));

        assertTrue(catalog.stages().deleteStage(f, tb, 1));
        assertFalse(catalog.stages().deleteStage(f, tb, 1));
        catalog.progress().recordNormalize(f, tb, 1, one.counts(), t(1));
        // the sink re-read batch 1 after a crash: it is loaded already, so no stage row comes back
        assertFalse(catalog.stages().upsertStage(f, tb, one));
        assertEquals(Optional.empty(), catalog.stages().getStage(f, tb, 1));
    }

    /**
     * A normalize run read batch 1's stage row and loaded its file; before it recorded the load, the sink staged the
     * batch again with more rows under other files (a larger copy delivered again). Recording the load must neither
     * raise the normalized id over the new row nor delete it: the next run loads the new files.
     */
    @Test
    void aStageRowReplacedDuringItsLoadIsNeitherRecordedNorDeletedByThatLoad() {
        String f = "restaged-during-load";
        String tb = "ds.t";
        catalog.progress().initTable(f, tb);
        Stage read = new Stage(1, List.of(new StageFile("s3://b/t/1/a-0.avro", 2, 20)), 2, new RowCounts(2, 0, 0));
        assertTrue(catalog.stages().upsertStage(f, tb, read));
        Stage loaded = catalog.stages().listStages(f, tb).get(0);
        Stage larger = new Stage(1, List.of(new StageFile("s3://b/t/1/b-0.avro", 3, 30),
                new StageFile("s3://b/t/1/b-1.avro", 2, 20)), 5, new RowCounts(5, 0, 0));
        assertTrue(catalog.stages().upsertStage(f, tb, larger));

        recordLoad(f, tb, List.of(loaded));

        assertEquals(larger.files(), catalog.stages().getStage(f, tb, 1).map(Stage::files).orElse(List.of()),
                "the replaced stage row is still there");
        assertEquals(0, table(f, tb).normalizedBatchId(), "the load of the replaced files is not recorded");

        // the next run loads the new files and records that load; a copy staged after the record is not stored (the
        // batch is normalized), also while the loaded row is still there
        Stage reloaded = catalog.stages().listStages(f, tb).get(0);
        assertEquals(0, catalog.stages().recordLoaded(f, tb, List.of(reloaded), reloaded.counts(), t(1)));
        Stage later = new Stage(1, List.of(new StageFile("s3://b/t/1/c-0.avro", 6, 60)), 6, new RowCounts(6, 0, 0));
        assertFalse(catalog.stages().upsertStage(f, tb, later), "a copy staged after the load was recorded is not stored");
        assertEquals(larger.files(), catalog.stages().getStage(f, tb, 1).map(Stage::files).orElse(List.of()));
        assertEquals(0, catalog.stages().recordLoaded(f, tb, List.of(reloaded), reloaded.counts(), t(1)),
                "recorded again after a crash: nothing added");
        assertTrue(catalog.stages().deleteStage(f, tb, 1, reloaded.files()));
        assertEquals(List.of(), catalog.stages().listStages(f, tb));
        assertEquals(1, table(f, tb).normalizedBatchId());
        assertEquals(5, table(f, tb).normalizedCounts().inserts());
    }

    /** What the sink's normalize does once every file of {@code loaded} is loaded (and, once recorded, removed). */
    private static void recordLoad(String f, String tb, List<Stage> loaded) {
        long inserts = loaded.stream().mapToLong(s -> s.counts().inserts()).sum();
        if (catalog.stages().recordLoaded(f, tb, loaded, new RowCounts(inserts, 0, 0), t(1)) == 0) {
            for (Stage stage : loaded) {
                catalog.stages().deleteStage(f, tb, stage.batchId(), stage.files());
            }
        }
    }

    @Test
    void pauseBeginsOnceKeepsItsStartAndEnds() {
        String f = "pause";
        String tb = "ds.t";
        assertTrue(catalog.progress().setPause(f, tb, "normalize_buffer_full", t(1)));
        assertFalse(catalog.progress().setPause(f, tb, "normalize_buffer_full", t(2)), "same pause again");
        assertEquals(t(1), table(f, tb).pausedAt());
        assertTrue(catalog.progress().setPause(f, tb, "manual", t(3)), "another reason is another episode");
        assertEquals("manual", table(f, tb).pausedReason());
        assertEquals(t(3), table(f, tb).pausedAt());
        assertTrue(catalog.progress().clearPause(f, tb));
        assertFalse(catalog.progress().clearPause(f, tb));
        assertNull(table(f, tb).pausedReason());
        assertNull(table(f, tb).pausedAt());
    }

    @Test
    void aWriterEndsOnlyItsOwnPause() {
        String f = "pause-own";
        String tb = "pg.t";
        assertTrue(catalog.progress().setPause(f, tb, "sink_normalize_buffer_full", t(1)));
        assertFalse(catalog.progress().clearPause(f, tb, "normalize_buffer_full"), "another writer's pause stays");
        assertEquals("sink_normalize_buffer_full", table(f, tb).pausedReason());
        assertEquals(t(1), table(f, tb).pausedAt());
        assertTrue(catalog.progress().setPause(f, tb, "normalize_buffer_full", t(2)));
        assertTrue(catalog.progress().clearPause(f, tb, "normalize_buffer_full"));
        assertNull(table(f, tb).pausedReason());
        assertNull(table(f, tb).pausedAt());
        assertFalse(catalog.progress().clearPause(f, tb, "normalize_buffer_full"), "nothing left to end");
        assertFalse(catalog.progress().clearPause(f, "pg.unknown", "normalize_buffer_full"), "no row, nothing to end");
    }

    @Test
    void errorEpisodeOpensCountsAndCloses() {
        String f = "errors";
        String tb = "ds.t";
        assertTrue(catalog.progress().recordError(f, tb, "permission denied", t(1), t(6)), "opens");
        assertFalse(catalog.progress().recordError(f, tb, "permission denied", t(1), t(6)), "repeat");
        assertFalse(catalog.progress().recordError(f, tb, "permission denied", t(7), t(17)), "same episode");
        TableState s = table(f, tb);
        assertEquals(2, s.errorCount());
        assertEquals(t(7), s.lastErrorAt());
        assertEquals(t(17), s.nextRetryAt());
        assertFalse(catalog.progress().recordError(f, tb, "older", t(3), t(4)), "an older error does not rewind");
        assertEquals(s, table(f, tb));

        catalog.progress().recordError(f, tb, "x".repeat(10_000), t(8), null);
        assertEquals(4000, table(f, tb).lastError().length());

        assertTrue(catalog.progress().clearError(f, tb));
        assertFalse(catalog.progress().clearError(f, tb));
        TableState healthy = table(f, tb);
        assertNull(healthy.lastError());
        assertNull(healthy.lastErrorAt());
        assertNull(healthy.nextRetryAt());
        assertEquals(0, healthy.errorCount());
        assertTrue(catalog.progress().recordError(f, tb, "again", t(9), null), "a new episode");
    }

    @Test
    void twoConcurrentCopyClaimsNeverBothWin() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            for (int round = 0; round < 15; round++) {
                String f = "claim-race-" + round;
                catalog.progress().initTable(f, "public.only", Phase.PENDING);
                CyclicBarrier start = new CyclicBarrier(4);
                List<Future<Optional<CopyClaim>>> claims = new ArrayList<>();
                for (int task = 0; task < 4; task++) {
                    String owner = "task-" + task;
                    claims.add(pool.submit(() -> {
                        start.await();
                        return catalog.copies().claimCopy(f, owner, Duration.ofMinutes(5));
                    }));
                }
                int winners = 0;
                for (Future<Optional<CopyClaim>> claim : claims) {
                    if (claim.get().isPresent()) {
                        winners++;
                        assertEquals("public.only", claim.get().get().table());
                        assertEquals(1, claim.get().get().attempt());
                    }
                }
                assertEquals(1, winners, "round " + round);
                assertEquals(Phase.COPYING, table(f, "public.only").phase());
            }

            // three tables, six claimers: every table goes to exactly one of them
            String f = "claim-many";
            for (String t : List.of("public.a", "public.b", "public.c")) {
                catalog.progress().initTable(f, t, Phase.PENDING);
            }
            CyclicBarrier start = new CyclicBarrier(4);
            List<Future<List<String>>> results = new ArrayList<>();
            for (int task = 0; task < 4; task++) {
                String owner = "task-" + task;
                results.add(pool.submit(() -> {
                    start.await();
                    List<String> won = new ArrayList<>();
                    for (int i = 0; i < 2; i++) {
                        catalog.copies().claimCopy(f, owner, Duration.ofMinutes(5)).ifPresent(c -> won.add(c.table()));
                    }
                    return won;
                }));
            }
            List<String> won = new ArrayList<>();
            for (Future<List<String>> r : results) {
                won.addAll(r.get());
            }
            won.sort(null);
            assertEquals(List.of("public.a", "public.b", "public.c"), won);
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void anExpiredLeaseCanBeTakenOverAndTheFormerOwnerLosesTheTable() throws Exception {
        String f = "lease";
        String tb = "public.t";
        catalog.progress().initTable(f, tb, Phase.PENDING);
        CopyClaim first = catalog.copies().claimCopy(f, "task-1", Duration.ofMillis(300)).orElseThrow();
        assertEquals(1, first.attempt());
        assertEquals(Optional.empty(), catalog.copies().claimCopy(f, "task-2", Duration.ofMinutes(5)), "lease still held");
        assertTrue(catalog.copies().renewCopyLease(f, tb, "task-1", Duration.ofMillis(300)));

        Thread.sleep(400);
        CopyClaim second = catalog.copies().claimCopy(f, "task-2", Duration.ofMinutes(5)).orElseThrow();
        assertEquals(tb, second.table());
        assertEquals(2, second.attempt());
        assertEquals("task-2", table(f, tb).copyLeaseOwner());

        assertFalse(catalog.copies().renewCopyLease(f, tb, "task-1", Duration.ofMinutes(5)), "task-1 lost the table");
        assertFalse(catalog.phases().markCatchup(f, tb, "task-1", "0/100"));
        assertFalse(catalog.phases().markErrored(f, tb, "task-1", "late failure", t(1), null));
        assertEquals(Phase.COPYING, table(f, tb).phase());

        assertTrue(catalog.phases().markCatchup(f, tb, "task-2", "0/200"));
        assertTrue(catalog.phases().markCatchup(f, tb, "task-2", "0/200"), "repeat after a crash");
        TableState caughtUp = table(f, tb);
        assertEquals(Phase.CATCHUP, caughtUp.phase());
        assertEquals("0/200", caughtUp.phaseLsn());
        assertNull(caughtUp.copyLeaseOwner());
        assertEquals(Optional.empty(), catalog.copies().claimCopy(f, "task-3", Duration.ofMinutes(5)));
    }

    @Test
    void aDetachedTableLagsAtItsMarkerRejoinsOnceDrainedAndIsHandedBackWithoutItsSlot() {
        String f = "detach";
        for (String tb : List.of("public.a", "public.b", "public.c")) {
            catalog.progress().initTable(f, tb, Phase.PENDING);
            assertTrue(catalog.phases().markReady(f, tb, "0/1"));
        }
        catalog.progress().recordSync(f, "public.a", new SyncedBatch("0/10", 5, 3, t(1), t(0)), t(2));
        assertTrue(catalog.phases().beginDetach(f, "public.a", "tablecdc_detach_x_1", 2));
        assertFalse(catalog.phases().beginDetach(f, "public.a", "tablecdc_detach_x_2", 2), "already being detached");
        assertTrue(catalog.phases().beginDetach(f, "public.b", "tablecdc_detach_x_3", 2));
        assertFalse(catalog.phases().beginDetach(f, "public.c", "tablecdc_detach_x_4", 2), "detach.max.tables reached");
        assertTrue(catalog.phases().abandonDetach(f, "public.b", "tablecdc_detach_x_3"));
        assertEquals(Map.of("public.a", "tablecdc_detach_x_1"), catalog.phases().detachSlots(f));

        assertFalse(catalog.phases().markDetached(f, "public.a", "tablecdc_detach_x_9", "0/20"), "another slot's marker");
        assertTrue(catalog.phases().markDetached(f, "public.a", "tablecdc_detach_x_1", "0/20"));
        assertTrue(catalog.phases().markDetached(f, "public.a", "tablecdc_detach_x_1", "0/20"), "a repeat after a crash");
        assertFalse(catalog.phases().markDetached(f, "public.a", "tablecdc_detach_x_1", "0/30"), "a later marker");
        assertFalse(catalog.phases().abandonDetach(f, "public.a", "tablecdc_detach_x_1"), "its marker was met");
        // lagging only once everything the apply task kept of it (committed before the marker) is acknowledged
        assertEquals(List.of(), catalog.phases().markLagging(f, "0/1F"));
        assertEquals(Phase.READY, table(f, "public.a").phase());
        assertEquals(List.of("public.a"), catalog.phases().markLagging(f, "0/20"));
        assertEquals(List.of(), catalog.phases().markLagging(f, "0/20"));
        TableState lagging = table(f, "public.a");
        assertEquals(Phase.LAGGING, lagging.phase());
        assertEquals("0/20", lagging.phaseLsn());
        assertNotNull(lagging.detachedAt());

        // not claimed while batches wait for normalize; a claim once drained is a rejoin naming the slot and marker
        assertTrue(catalog.copies().claimCopy(f, "task-1", Duration.ofMinutes(1), List.of(), List.of()).isEmpty(),
                "three batches wait for normalize; and the flow copies no table here");
        catalog.progress().recordNormalize(f, "public.a", 5, new RowCounts(3, 0, 0), t(3));
        CopyClaim rejoin = catalog.copies().claimCopy(f, "task-1", Duration.ofMinutes(1), List.of(), List.of())
                .orElseThrow();
        assertEquals("public.a", rejoin.table());
        assertTrue(rejoin.rejoin());
        assertEquals("tablecdc_detach_x_1", rejoin.detachSlot());
        assertEquals("0/20", rejoin.detachLsn());
        // a rejoin given back (its task stopped) is lagging again, then claimed again
        assertTrue(catalog.copies().releaseCopy(f, "public.a", "task-1"));
        assertEquals(Phase.LAGGING, table(f, "public.a").phase());
        assertEquals("0/20", table(f, "public.a").phaseLsn());
        CopyClaim again = catalog.copies().claimCopy(f, "task-2", Duration.ofMinutes(1), List.of(), List.of())
                .orElseThrow();
        assertEquals("tablecdc_detach_x_1", again.detachSlot());
        assertTrue(catalog.copies().markCopyCatchup(f, "public.a", "task-2", again.attempt(), "0/40"));
        TableState handedBack = table(f, "public.a");
        assertEquals(Phase.CATCHUP, handedBack.phase());
        assertNull(handedBack.detachSlot());
        assertNull(handedBack.detachLsn());
        assertNull(handedBack.detachedAt());
        assertEquals(Map.of(), catalog.phases().detachSlots(f));
        assertEquals(List.of("public.a"), catalog.phases().markCaughtUpReady(f, "0/40"));

        // a table copied again from scratch (its slot lost, a reset) keeps no detach
        assertTrue(catalog.phases().beginDetach(f, "public.c", "tablecdc_detach_x_5", 2));
        assertTrue(catalog.phases().markDetached(f, "public.c", "tablecdc_detach_x_5", "0/50"));
        assertTrue(catalog.phases().restartTable(f, "public.c", "its private slot is gone", 0).isPresent());
        assertNull(table(f, "public.c").detachSlot());
        assertNull(table(f, "public.c").detachLsn());
    }

    @Test
    void phasesMoveFromCatchupToReadyByLsnOrder() {
        String f = "phases";
        for (String tb : List.of("public.a", "public.b", "public.c")) {
            catalog.progress().initTable(f, tb, Phase.PENDING);
        }
        Set<String> claimed = new HashSet<>();
        for (int i = 0; i < 3; i++) {
            claimed.add(catalog.copies().claimCopy(f, "task", Duration.ofMinutes(1)).orElseThrow().table());
        }
        assertEquals(Set.of("public.a", "public.b", "public.c"), claimed);
        catalog.phases().markCatchup(f, "public.a", "task", "0/9");
        catalog.phases().markCatchup(f, "public.b", "task", "0/10");
        // LSNs compare as numbers: 0/10 is after 0/A although "0/10" < "0/A" as text
        assertEquals(List.of("public.a"), catalog.phases().markCaughtUpReady(f, "0/A"));
        assertEquals(List.of(), catalog.phases().markCaughtUpReady(f, "0/A"));
        assertEquals(Phase.READY, table(f, "public.a").phase());
        assertEquals("0/9", table(f, "public.a").phaseLsn());
        assertEquals(Phase.CATCHUP, table(f, "public.b").phase());
        assertFalse(catalog.phases().markReady(f, "public.b", "0/11"), "ready only at its own catchup LSN");
        assertTrue(catalog.phases().markReady(f, "public.b", "0/10"));
        assertFalse(catalog.phases().markReady(f, "public.c", "0/10"), "still copying");

        catalog.phases().markErrored(f, "public.c", "task", "copy failed", t(1), Instant.now().minusSeconds(1));
        TableState errored = table(f, "public.c");
        assertEquals(Phase.ERRORED, errored.phase());
        assertEquals(1, errored.errorCount());
        CopyClaim retry = catalog.copies().claimCopy(f, "task-2", Duration.ofMinutes(1)).orElseThrow();
        assertEquals("public.c", retry.table());
        assertEquals(2, retry.attempt());
        catalog.phases().markErrored(f, "public.c", "task-2", "copy failed again", t(2), null);
        assertEquals(Optional.empty(), catalog.copies().claimCopy(f, "task-3", Duration.ofMinutes(1)),
                "no retry time: stays errored");
        assertEquals(2, table(f, "public.c").errorCount());

        assertThrows(IllegalArgumentException.class, () -> catalog.phases().markReady(f, "public.a", "not-an-lsn"));
    }

    @Test
    void pruneRemovesOnlyTheNamedFlowsMissingTables() throws Exception {
        for (String f : List.of("prune-1", "prune-2")) {
            for (String tb : List.of("ds.a", "ds.b", "ds.c")) {
                catalog.progress().initTable(f, tb);
                catalog.stages().upsertStage(f, tb, new Stage(1, List.of(new StageFile("file:///" + f + tb, 1, 1)), 1,
                        new RowCounts(1, 0, 0)));
            }
        }
        String untouched = snapshot("prune-2");

        assertEquals(List.of("ds.b", "ds.c"), catalog.flows().pruneTables("prune-1", List.of("ds.a", "ds.z")));
        assertEquals(List.of("ds.a"), catalog.progress().listTables("prune-1").stream().map(TableState::table).toList());
        assertEquals(1, catalog.stages().listStages("prune-1", "ds.a").size());
        assertEquals(List.of(), catalog.stages().listStages("prune-1", "ds.b"));
        assertEquals(untouched, snapshot("prune-2"));
        assertEquals(List.of(), catalog.flows().pruneTables("prune-1", List.of("ds.a")));
        assertThrows(IllegalArgumentException.class, () -> catalog.flows().pruneTables("prune-1", List.of()));
    }

    /**
     * Issue 46 item 1: a catalog behind Kafka (restored from a backup) would hand out ids batches in Kafka already
     * have; a reservation above a floor (the batch id of the table's offset in Kafka) never does, and never goes below
     * the catalog's own counter either.
     */
    @Test
    void batchIdsAreReservedAboveAFloor() {
        String f = "floor-1";
        catalog.progress().initTable(f, "ds.a", Phase.PENDING);
        assertEquals(1, catalog.batchIds().reserveBatchIds(f, "ds.a", 100));
        assertEquals(5001, catalog.batchIds().reserveBatchIds(f, "ds.a", 100, 5000), "above what Kafka holds");
        assertEquals(5101, catalog.batchIds().reserveBatchIds(f, "ds.a", 100, 20), "above the catalog's own counter");
        assertEquals(5201, catalog.batchIds().reserveBatchIds(f, "ds.a", 100));
    }

    /**
     * Issue 46 item 2: a Postgres table's row deleted by hand comes back from another writer's upsert without a phase;
     * the pipeline makes it pending (only a row without a phase), and the reset tool's restart accepts it, for a
     * Postgres flow only (a query CDC table has no phase and no reset).
     */
    @Test
    void aPostgresRowWithoutAPhaseBecomesPendingAndCanBeReset() throws Exception {
        String f = "nophase-1";
        catalog.flows().registerFlow(f, new FlowIdentity("pg_pipeline", "7311111111111111112", 1L, "tablecdc_nophase",
                "pub", null), "h1");
        catalog.progress().initTable(f, "ds.a", Phase.PENDING);
        catalog.phases().markReady(f, "ds.a", "0/10");
        // deleted by hand, written again by the sink's normalize
        try (Connection c = raw.getConnection(); Statement s = c.createStatement()) {
            s.execute("DELETE FROM cdc_table_replication_state WHERE flow_name = '" + f + "'");
        }
        catalog.progress().recordNormalize(f, "ds.a", 3, new RowCounts(1, 0, 0), Instant.now());
        catalog.progress().recordNormalize(f, "ds.b", 3, new RowCounts(1, 0, 0), Instant.now());
        assertNull(catalog.progress().getTable(f, "ds.a").orElseThrow().phase());
        assertEquals(Optional.of("no phase"), catalog.phases().restartTable(f, "ds.b", "reset", 0));
        assertEquals(Phase.ERRORED, catalog.progress().getTable(f, "ds.b").orElseThrow().phase());
        assertTrue(catalog.phases().pendingIfUnknown(f, "ds.a"));
        assertFalse(catalog.phases().pendingIfUnknown(f, "ds.a"), "only a row without a phase");
        assertFalse(catalog.phases().pendingIfUnknown(f, "ds.b"), "an errored row stays errored");
        assertEquals(Phase.PENDING, catalog.progress().getTable(f, "ds.a").orElseThrow().phase());
        assertTrue(catalog.phases().markReady(f, "ds.a", "0/20"), "a pending row that is not copied becomes ready");
        // a query CDC table: no phase, no reset
        catalog.progress().initTable("bq-nophase", "ds.a");
        assertEquals(Optional.empty(), catalog.phases().restartTable("bq-nophase", "ds.a", "reset", 0));
    }

    @Test
    void aTableThatLeftItsPublicationIsMarkedAloneOrRestartedWithItsEntryRecorded() throws Exception {
        for (String f : List.of("member-1", "member-2")) {
            for (String tb : List.of("ds.a", "ds.b")) {
                catalog.progress().initTable(f, tb, Phase.PENDING);
                catalog.stages().upsertStage(f, tb, new Stage(1, List.of(new StageFile("file:///" + f + tb, 1, 1)), 1,
                        new RowCounts(1, 0, 0)));
            }
        }
        String untouched = snapshot("member-2");
        assertEquals(Map.of(), catalog.phases().publicationMembers("member-1"));
        assertTrue(catalog.phases().setPublicationMember("member-1", "ds.a", "relation 1, table entry 2"));
        assertFalse(catalog.phases().setPublicationMember("member-1", "ds.z", "relation 3, table entry 4"), "no such row");
        assertEquals(Map.of("ds.a", "relation 1, table entry 2"), catalog.phases().publicationMembers("member-1"));

        assertEquals(Optional.of("pending"), catalog.phases().restartTable("member-1", "ds.a", "came back", 10));
        TableState restarted = catalog.progress().getTable("member-1", "ds.a").orElseThrow();
        assertEquals(Phase.ERRORED, restarted.phase());
        assertEquals("came back", restarted.lastError());
        assertTrue(restarted.nextRetryAt().isAfter(Instant.now().plusSeconds(5)), "retried after the delay");
        assertEquals(Optional.empty(), catalog.phases().restartTable("member-1", "ds.z", "came back", 10));

        assertTrue(catalog.phases().markLeft("member-1", "ds.b", "left publication p"));
        assertFalse(catalog.phases().markLeft("member-1", "ds.z", "left publication p"), "no such table");
        TableState left = catalog.progress().getTable("member-1", "ds.b").orElseThrow();
        assertEquals(Phase.ERRORED, left.phase());
        assertEquals("left publication p", left.lastError());
        assertNull(left.nextRetryAt(), "never retried");
        assertEquals(1, catalog.stages().listStages("member-1", "ds.b").size(), "its staged batch stays to be loaded");
        assertTrue(catalog.copies().claimCopy("member-1", "copier", Duration.ofSeconds(30)).isEmpty(),
                "no copy task claims the table that left, nor the restarted one before its delay");
        assertEquals(untouched, snapshot("member-2"));
    }

    @Test
    void identityCheckRefusesAnotherSystemIdentifierOrSlotNamingBothValues() {
        String f = "identity";
        FlowIdentity original = new FlowIdentity("pg_pipeline", "7311111111111111111", 1L, "tablecdc_aaaa",
                "tablecdc_pub", null);
        FlowRecord created = catalog.flows().registerFlow(f, original, "h1");
        assertEquals(original, created.identity());
        assertEquals(created, catalog.flows().registerFlow(f, original, "h1"), "resume with the same identity");

        FlowIdentityMismatchException otherSource = assertThrows(FlowIdentityMismatchException.class,
                () -> catalog.flows().registerFlow(f, new FlowIdentity("pg_pipeline", "7322222222222222222", 1L,
                        "tablecdc_aaaa", "tablecdc_pub", null), "h1"));
        assertTrue(otherSource.getMessage().contains("7311111111111111111"), otherSource.getMessage());
        assertTrue(otherSource.getMessage().contains("7322222222222222222"), otherSource.getMessage());
        assertTrue(otherSource.getMessage().contains("source system identifier"), otherSource.getMessage());

        FlowIdentityMismatchException otherSlot = assertThrows(FlowIdentityMismatchException.class,
                () -> catalog.flows().registerFlow(f, new FlowIdentity("pg_pipeline", "7311111111111111111", 1L,
                        "tablecdc_bbbb", "tablecdc_pub", null), "h1"));
        assertTrue(otherSlot.getMessage().contains("tablecdc_aaaa"), otherSlot.getMessage());
        assertTrue(otherSlot.getMessage().contains("tablecdc_bbbb"), otherSlot.getMessage());

        FlowIdentity newTimeline = new FlowIdentity("pg_pipeline", "7311111111111111111", 2L, "tablecdc_aaaa",
                "tablecdc_pub", null);
        FlowIdentityMismatchException timeline = assertThrows(FlowIdentityMismatchException.class,
                () -> catalog.flows().registerFlow(f, newTimeline, "h1"));
        assertTrue(timeline.getMessage().contains("timeline"), timeline.getMessage());
        assertEquals(2L, catalog.flows().registerFlow(f, newTimeline, "h2", true).identity().timeline(),
                "failover recovery accepts the new timeline");

        // a caller that knows only the destination fills it in; then a different one is refused
        FlowRecord withDestination = catalog.flows().registerFlow(f, new FlowIdentity(null, null, null, null, null,
                "clickhouse://ch:8123/db"), null);
        assertEquals("tablecdc_aaaa", withDestination.identity().slot());
        assertEquals("clickhouse://ch:8123/db", withDestination.identity().destination());
        assertEquals("h2", withDestination.configHash());
        assertThrows(FlowIdentityMismatchException.class, () -> catalog.flows().registerFlow(f,
                new FlowIdentity(null, null, null, null, null, "clickhouse://other:8123/db"), null));
        assertEquals(withDestination, catalog.flows().getFlow(f).orElseThrow(), "a refused resume changes nothing");
        assertTrue(catalog.flows().listFlows().stream().anyMatch(r -> r.flow().equals(f)));
    }

    @Test
    void replacingALostSlotPutsEveryTableBackToPendingAtOnce() {
        String f = "replace-slot";
        catalog.flows().registerFlow(f, new FlowIdentity("pg_pipeline", "7311111111111111111", 1L, "tablecdc_lost",
                "tablecdc_pub", null), null);
        catalog.progress().initTable(f, "s.ready", Phase.PENDING);
        catalog.phases().markReady(f, "s.ready", "0/16B3748");
        catalog.progress().initTable(f, "s.failed", Phase.PENDING);
        catalog.copies().claimCopy(f, "task-1", Duration.ofMinutes(5));
        catalog.phases().markErrored(f, "s.failed", null, "copy attempt 1 failed: x", t(1), null);
        catalog.progress().initTable("other-flow", "s.ready", Phase.PENDING);
        catalog.phases().markReady("other-flow", "s.ready", "0/1");

        assertEquals(List.of("s.failed", "s.ready"), catalog.flows().replaceSlot(f, "tablecdc_lost", "tablecdc_new"));
        assertEquals("tablecdc_new", catalog.flows().getFlow(f).orElseThrow().identity().slot());
        for (String t : List.of("s.ready", "s.failed")) {
            TableState state = table(f, t);
            assertEquals(Phase.PENDING, state.phase(), t);
            assertNull(state.phaseLsn(), t);
            assertEquals(0, state.copyAttempt(), t);
            assertNull(state.lastError(), t);
        }
        assertEquals(Phase.READY, table("other-flow", "s.ready").phase(), "other flows are never touched");
        assertEquals(List.of(), catalog.flows().replaceSlot(f, "tablecdc_lost", "tablecdc_new"), "a repeat changes nothing");
        assertThrows(FlowIdentityMismatchException.class, () -> catalog.flows().replaceSlot(f, "tablecdc_else", "tablecdc_x"));
    }

    @Test
    void anUnreachableCatalogFailsRetriablyNamingTheOperationFlowAndTableButNoSecret() throws Exception {
        int closedPort;
        try (ServerSocket socket = new ServerSocket(0)) {
            closedPort = socket.getLocalPort();
        }
        String url = "jdbc:postgresql://127.0.0.1:" + closedPort + "/catalog";
        org.postgresql.ds.PGSimpleDataSource down = new org.postgresql.ds.PGSimpleDataSource();
        down.setUrl(url);
        down.setUser("postgres");
        down.setPassword("s3cret-pw");
        Catalog unreachable = new Catalog(down);
        CatalogUnavailableException e = assertThrows(CatalogUnavailableException.class,
                () -> unreachable.progress().recordSync("flow-x", "ds.t", SyncedBatch.cursorOnly("c", 0), t(1)));
        assertTrue(e.getMessage().contains("recordSync"), e.getMessage());
        assertTrue(e.getMessage().contains("flow-x"), e.getMessage());
        assertTrue(e.getMessage().contains("ds.t"), e.getMessage());
        assertFalse(e.getMessage().contains("s3cret-pw"), e.getMessage());

        CatalogSettings settings = new CatalogSettings(url, "postgres", new Password("s3cret-pw"), true, 1, 300);
        CatalogUnavailableException atStart = assertThrows(CatalogUnavailableException.class,
                () -> Catalog.open(settings, "connector-x"));
        assertTrue(atStart.getMessage().contains("catalog unreachable"), atStart.getMessage());
        assertFalse(atStart.getMessage().contains("s3cret-pw"), atStart.getMessage());
        assertFalse(settings.toString().contains("s3cret-pw"));

        CatalogException noDatabase = assertThrows(CatalogException.class,
                () -> Catalog.open(settings("no_such_database", true), "connector-w"));
        assertTrue(noDatabase.getMessage().contains("refused the connection"), noDatabase.getMessage());
        assertTrue(noDatabase.getMessage().contains("no_such_database"), noDatabase.getMessage());
    }

    @Test
    void openRefusesASchemaItCannotUse() throws Exception {
        Catalog.open(settings("catalog", false), "connector-verify").close();
        try (Catalog small = Catalog.open(settings("catalog", true, 1), "connector-small-pool")) {
            assertTrue(small.flows().listFlows().size() >= 0, "a pool of one connection still migrates and works");
        }
        try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE unmigrated");
            s.execute("CREATE DATABASE from_the_future");
        }
        CatalogException old = assertThrows(CatalogException.class,
                () -> Catalog.open(settings("unmigrated", false), "connector-y"));
        assertTrue(old.getMessage().contains("version 0"), old.getMessage());
        assertTrue(old.getMessage().contains("catalog.migrate=true"), old.getMessage());

        Catalog.open(settings("from_the_future", true), "connector-z").close();
        try (Connection c = postgres.getDatabase("postgres", "from_the_future").getConnection();
             Statement s = c.createStatement()) {
            s.execute("INSERT INTO cdc_catalog_schema_history (installed_rank, version, description, type, script,"
                    + " checksum, installed_by, execution_time, success)"
                    + " VALUES (99, '42', 'later release', 'SQL', 'V42__later.sql', 0, 'test', 0, true)");
        }
        for (boolean migrate : List.of(true, false)) {
            CatalogException newer = assertThrows(CatalogException.class,
                    () -> Catalog.open(settings("from_the_future", migrate), "connector-z"));
            assertTrue(newer.getMessage().contains("version 42"), newer.getMessage());
            assertTrue(newer.getMessage().contains("version " + io.tablecdc.catalog.CatalogMigrations.knownVersion() + ")"), newer.getMessage());
        }
    }

    // ---------------------------------------------------------------- Postgres copies: filter, fencing, retry budget

    /** A table {@code table.sync.copy} excludes is never claimed by a copy task, whatever its phase. */
    @Test
    void aCopyClaimSkipsTablesTheFlowDoesNotCopy() {
        String f = "claim-filter";
        for (String tb : List.of("s.a", "s.b", "s.c")) {
            catalog.progress().initTable(f, tb, Phase.PENDING);
        }
        assertEquals(Optional.empty(), catalog.copies().claimCopy(f, "task", Duration.ofMinutes(1), List.of("s.z"), List.of()),
                "only:s.z copies none of them");
        assertEquals("s.b", catalog.copies().claimCopy(f, "task", Duration.ofMinutes(1), List.of("s.b"), List.of())
                .orElseThrow().table());
        assertEquals(Optional.empty(), catalog.copies().claimCopy(f, "task", Duration.ofMinutes(1), List.of("s.b"), List.of()));
        assertEquals("s.c", catalog.copies().claimCopy(f, "task", Duration.ofMinutes(1), null, List.of("s.a"))
                .orElseThrow().table(), "except:s.a");
        assertEquals(Optional.empty(), catalog.copies().claimCopy(f, "task", Duration.ofMinutes(1), null, List.of("s.a")));
        assertEquals(Phase.PENDING, table(f, "s.a").phase(), "excluded: left for the apply task");
        assertEquals(0, table(f, "s.a").copyAttempt());
    }

    /**
     * Every write of a copy task is fenced by its claim (owner and claim number) and an unexpired lease: a task whose
     * lease expired can neither reserve batch ids nor record batches, progress or its handover, even before another
     * task claims the table, and not after the new owner's claim either.
     */
    @Test
    void aCopyTaskWhoseLeaseExpiredCannotWriteAnything() throws Exception {
        String f = "fence";
        String tb = "public.t";
        catalog.progress().initTable(f, tb, Phase.PENDING);
        CopyClaim first = catalog.copies().claimCopy(f, "task-1", Duration.ofMillis(300), null, List.of()).orElseThrow();
        assertTrue(catalog.copies().reserveCopyBatchIds(f, tb, "task-1", first.attempt(), 100).isPresent());
        assertTrue(catalog.copies().recordCopySync(f, tb, "task-1", first.attempt(), new SyncedBatch("0/10", 1, 5, t(1), t(0)),
                t(1)));
        assertTrue(catalog.copies().recordCopyProgress(f, tb, "task-1", first.attempt(), 5, 10));
        assertTrue(catalog.copies().renewCopyLease(f, tb, "task-1", first.attempt(), Duration.ofMillis(300)));

        Thread.sleep(400);
        // expired, not claimed again yet: the stalled owner stops all the same
        assertEquals(Optional.empty(), catalog.copies().reserveCopyBatchIds(f, tb, "task-1", first.attempt(), 100));
        assertFalse(catalog.copies().recordCopySync(f, tb, "task-1", first.attempt(), new SyncedBatch("0/20", 2, 5, t(2), t(1)),
                t(2)));
        assertFalse(catalog.copies().recordCopyProgress(f, tb, "task-1", first.attempt(), 10, 10));
        assertFalse(catalog.copies().renewCopyLease(f, tb, "task-1", first.attempt(), Duration.ofMinutes(5)));
        assertFalse(catalog.copies().markCopyCatchup(f, tb, "task-1", first.attempt(), "0/30"));
        TableState stale = table(f, tb);
        assertEquals(1, stale.syncedBatchId());
        assertEquals(100, reserved(f, tb));

        CopyClaim second = catalog.copies().claimCopy(f, "task-2", Duration.ofMinutes(5), null, List.of()).orElseThrow();
        assertEquals(2, second.attempt());
        long firstOfSecond = catalog.copies().reserveCopyBatchIds(f, tb, "task-2", second.attempt(), 100).orElseThrow();
        assertEquals(101, firstOfSecond);
        // the former owner, and a claim number that is not the current one, are refused as well
        assertEquals(Optional.empty(), catalog.copies().reserveCopyBatchIds(f, tb, "task-1", first.attempt(), 100));
        assertEquals(Optional.empty(), catalog.copies().reserveCopyBatchIds(f, tb, "task-2", first.attempt(), 100));
        assertFalse(catalog.copies().recordCopySync(f, tb, "task-1", first.attempt(), new SyncedBatch("0/20", 2, 5, t(2), t(1)),
                t(2)));
        assertFalse(catalog.copies().markCopyFailed(f, tb, "task-1", first.attempt(), "late", t(3), null));
        assertEquals(1, table(f, tb).syncedBatchId());
        assertEquals(200, reserved(f, tb));
        assertTrue(catalog.copies().recordCopySync(f, tb, "task-2", second.attempt(), new SyncedBatch("0/40", 101, 1, t(4), t(3)),
                t(4)));
        assertTrue(catalog.copies().markCopyCatchup(f, tb, "task-2", second.attempt(), "0/50"));
        assertTrue(catalog.copies().markCopyCatchup(f, tb, "task-2", second.attempt(), "0/50"), "repeat after a crash");
        assertEquals(Phase.CATCHUP, table(f, tb).phase());
    }

    private static long reserved(String flow, String table) throws SQLException {
        try (Connection c = raw.getConnection(); PreparedStatement ps = c.prepareStatement("SELECT reserved_batch_id"
                + " FROM cdc_table_replication_state WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    /**
     * The retry budget counts failed attempts only: a copy released by a stopping task or whose lease was taken over
     * does not spend it, and a table that reaches ready starts with a full budget again.
     */
    @Test
    void onlyFailedCopiesSpendTheRetryBudgetAndReadyResetsIt() throws Exception {
        String f = "budget";
        String tb = "public.t";
        catalog.progress().initTable(f, tb, Phase.PENDING);
        CopyClaim c1 = catalog.copies().claimCopy(f, "task-1", Duration.ofMinutes(1), null, List.of()).orElseThrow();
        assertEquals(0, c1.failures());
        assertTrue(catalog.copies().releaseCopy(f, tb, "task-1"), "the task stopped (rebalance)");
        CopyClaim c2 = catalog.copies().claimCopy(f, "task-2", Duration.ofMillis(200), null, List.of()).orElseThrow();
        assertEquals(0, c2.failures(), "a released attempt is not a failure");
        Thread.sleep(300);
        CopyClaim c3 = catalog.copies().claimCopy(f, "task-3", Duration.ofMinutes(1), null, List.of()).orElseThrow();
        assertEquals(0, c3.failures(), "a lost lease is not a failure");
        assertEquals(3, c3.attempt(), "every claim has its own number");
        assertTrue(catalog.copies().markCopyFailed(f, tb, "task-3", c3.attempt(), "bad value", t(1), Instant.now().minusSeconds(1)));
        CopyClaim c4 = catalog.copies().claimCopy(f, "task-3", Duration.ofMinutes(1), null, List.of()).orElseThrow();
        assertEquals(1, c4.failures());
        assertEquals(1, catalog.copies().copyFailures(f, tb));
        assertTrue(catalog.phases().markStreamFailed(f, tb, "unconvertible change", t(2), Instant.now().minusSeconds(1), true));
        assertEquals(2, catalog.copies().copyFailures(f, tb));
        CopyClaim c5 = catalog.copies().claimCopy(f, "task-3", Duration.ofMinutes(1), null, List.of()).orElseThrow();
        assertEquals(2, c5.failures());
        assertTrue(catalog.copies().markCopyCatchup(f, tb, "task-3", c5.attempt(), "0/10"));
        assertEquals(2, catalog.copies().copyFailures(f, tb), "not ready yet");
        assertEquals(List.of(tb), catalog.phases().markCaughtUpReady(f, "0/10"));
        assertEquals(0, catalog.copies().copyFailures(f, tb), "ready: a full budget again");
        assertTrue(catalog.phases().markStreamFailed(f, tb, "not copied", t(3), null, false));
        assertEquals(0, catalog.copies().copyFailures(f, tb), "a failure that is not retried by a copy is not counted");
        assertTrue(catalog.phases().markStreamFailed(f, tb, "copied again", t(4), null, true));
        assertEquals(1, catalog.copies().copyFailures(f, tb));
        catalog.phases().setPending(f, tb);
        assertTrue(catalog.phases().markReady(f, tb, "0/20"));
        assertEquals(0, catalog.copies().copyFailures(f, tb), "ready straight from pending resets it too");
    }

    @Test
    void aTableWithLoadedBatchesIsNotMovedToAnotherDestination() {
        String f = "flow-destination-move";
        catalog.progress().initTable(f, "s.a");
        assertEquals(Optional.empty(), catalog.sink().claimDestination(f, "s.a", "ch:8123/db.a"));
        // nothing loaded yet: the table may still go elsewhere
        assertEquals(Optional.empty(), catalog.sink().claimDestination(f, "s.a", "ch:8123/db.a2"));
        assertTrue(catalog.progress().recordNormalize(f, "s.a", 1, new RowCounts(1, 0, 0), T0));
        assertEquals(Optional.of(new DestinationRefusal.LoadedElsewhere("ch:8123/db.a2", 1)),
                catalog.sink().claimDestination(f, "s.a", "ch:8123/db.a3"));
        assertEquals(Optional.empty(), catalog.sink().claimDestination(f, "s.a", "ch:8123/db.a2"), "its own destination again");
        // another table is refused the destination of this one
        catalog.progress().initTable(f, "s.b");
        assertEquals(Optional.of(new DestinationRefusal.HeldBy("flow " + f + ", table s.a", f)),
                catalog.sink().claimDestination(f, "s.b", "ch:8123/db.a2"));
    }

    /**
     * A destination an earlier release recorded by the server's address ({@code host:port/db.table}) is the same
     * destination as its name by the database's identity, when the sink gives the old name along: the table goes on and
     * its row is rewritten; another table recorded under the old name holds it; without the old name it is elsewhere.
     */
    @Test
    void aDestinationRecordedUnderItsFormerNameIsTakenOverAndRewritten() {
        String f = "flow-destination-former";
        catalog.progress().initTable(f, "s.a");
        assertEquals(Optional.empty(), catalog.sink().claimDestination(f, "s.a", "ch:8123/db.a"));
        assertTrue(catalog.progress().recordNormalize(f, "s.a", 1, new RowCounts(1, 0, 0), T0));
        String byUuid = "db.a in ClickHouse database 6d2e1c0a-0000-4000-8000-000000000001";
        assertEquals(Optional.of(new DestinationRefusal.LoadedElsewhere("ch:8123/db.a", 1)),
                catalog.sink().claimDestination(f, "s.a", byUuid, "alias:8123/db.a"), "reached under another address");
        catalog.progress().initTable(f, "s.b");
        assertEquals(Optional.of(new DestinationRefusal.HeldBy("flow " + f + ", table s.a", f)),
                catalog.sink().claimDestination(f, "s.b", byUuid, "ch:8123/db.a"), "held under its former name");
        assertEquals(Optional.empty(), catalog.sink().claimDestination(f, "s.a", byUuid, "ch:8123/db.a"));
        assertEquals(Optional.empty(), catalog.sink().claimDestination(f, "s.a", byUuid, "alias:8123/db.a"),
                "rewritten: any address of the database from then on");
        assertEquals(Optional.of(new DestinationRefusal.HeldBy("flow " + f + ", table s.a", f)),
                catalog.sink().claimDestination(f, "s.b", byUuid, null));
        assertEquals(Optional.of(new DestinationRefusal.LoadedElsewhere(byUuid, 1)),
                catalog.sink().claimDestination(f, "s.a", "db.a in ClickHouse database 6d2e1c0a-0000-4000-8000-000000000002",
                        "ch:8123/db.a"), "another database of the same name");
    }

    /**
     * One sink at a time holds a table: a second sink's claim is refused while the first one's hold lasts, even before
     * anything was loaded (two sinks started together), and succeeds once that hold was given up or ran out; the
     * operator's lock sees the live hold.
     */
    @Test
    void aSecondSinkIsRefusedATableAnotherSinkHolds() throws SQLException {
        String f = "flow-sink-hold";
        catalog.progress().initTable(f, "s.a");
        Duration hold = Duration.ofMinutes(1);
        assertEquals(Optional.empty(), catalog.sink().claimDestination(f, "s.a", "db.a in A", null, "sink-a", hold));
        Optional<DestinationRefusal> refused = catalog.sink().claimDestination(f, "s.a", "db.a in B", null, "sink-b", hold);
        assertTrue(refused.orElseThrow() instanceof DestinationRefusal.HeldBySink held && held.sink().equals("sink-a")
                && held.destination().equals("db.a in A") && held.until() != null, refused.toString());
        assertFalse(catalog.sink().recordSinkTopic(f, "s.a", "sink-b", "t"), "the refused sink does not record itself");
        assertEquals(Optional.empty(), catalog.sink().claimDestination(f, "s.a", "db.a in A", null, "sink-a", hold),
                "its holder claims it again");
        assertEquals(1, catalog.sink().renewSinkHolds("sink-a", List.of(f), List.of("s.a"), hold));
        assertEquals(0, catalog.sink().renewSinkHolds("sink-b", List.of(f), List.of("s.a"), hold), "not sink-b's");
        try (Connection c = raw.getConnection()) {
            SinkLeases.LockedTable locked = SinkLeases.lockForOperator(c, f, "s.a").orElseThrow();
            assertEquals("sink-a", locked.holdingSink());
            assertNotNull(locked.holdUntil());
        }
        assertEquals(1, catalog.sink().releaseSinkHolds("sink-a", List.of(f), List.of("s.a")));
        try (Connection c = raw.getConnection()) {
            assertNull(SinkLeases.lockForOperator(c, f, "s.a").orElseThrow().holdingSink(), "given up");
        }
        assertEquals(Optional.empty(), catalog.sink().claimDestination(f, "s.a", "db.a in B", null, "sink-b", hold),
                "the hold given up and nothing loaded: the other sink takes the table");
        assertTrue(catalog.progress().recordNormalize(f, "s.a", 1, new RowCounts(1, 0, 0), T0));
        assertEquals(1, catalog.sink().releaseSinkHolds("sink-b", List.of(f), List.of("s.a")));
        assertEquals(Optional.of(new DestinationRefusal.LoadedElsewhere("db.a in B", 1)),
                catalog.sink().claimDestination(f, "s.a", "db.a in A", null, "sink-a", hold), "loaded elsewhere meanwhile");
    }

    // ---------------------------------------------------------------- the apply task's fence

    /** A write of a Postgres pipeline apply task, and the row its table is given first so that the write changes it. */
    private record FencedWrite(String name, String phase, String phaseLsn, String leaseOwner, String detachSlot,
                               String detachLsn, Consumer<Catalog> op) {
    }

    private static List<FencedWrite> applyWrites(String f) {
        String lsn = "0/100";
        return List.of(
                new FencedWrite("setPending", "ready", lsn, null, null, null, c -> c.phases().setPending(f, "s.t")),
                new FencedWrite("pendingIfUnknown", null, null, null, null, null,
                        c -> c.phases().pendingIfUnknown(f, "s.t")),
                new FencedWrite("markHandover", "copying", null, "copy-1", null, null,
                        c -> c.phases().markHandover(f, "s.t", "copy-1", lsn)),
                new FencedWrite("markReady", "pending", null, null, null, null, c -> c.phases().markReady(f, "s.t", lsn)),
                new FencedWrite("markCaughtUpReady", "catchup", lsn, null, null, null,
                        c -> c.phases().markCaughtUpReady(f, "0/200")),
                new FencedWrite("markErrored", "ready", lsn, null, null, null,
                        c -> c.phases().markErrored(f, "s.t", null, "bad value", t(1), null)),
                new FencedWrite("markStreamFailed", "ready", lsn, null, null, null,
                        c -> c.phases().markStreamFailed(f, "s.t", "bad value", t(1), t(2), true)),
                new FencedWrite("beginDetach", "ready", lsn, null, null, null,
                        c -> c.phases().beginDetach(f, "s.t", "slot_d", 4)),
                new FencedWrite("markDetached", "ready", lsn, null, "slot_d", null,
                        c -> c.phases().markDetached(f, "s.t", "slot_d", "0/180")),
                new FencedWrite("markLagging", "ready", lsn, null, "slot_d", "0/180",
                        c -> c.phases().markLagging(f, "0/200")),
                new FencedWrite("abandonDetach", "ready", lsn, null, "slot_d", null,
                        c -> c.phases().abandonDetach(f, "s.t", "slot_d")),
                new FencedWrite("restartDetached", "lagging", "0/180", null, "slot_d", "0/180",
                        c -> c.phases().restartDetached(f, "s.t", "slot_d", "slot lost")),
                new FencedWrite("markDetachLost", "lagging", "0/180", null, "slot_d", "0/180",
                        c -> c.phases().markDetachLost(f, "s.t", "slot_d", "slot lost", t(1))),
                new FencedWrite("setPublicationMember", "ready", lsn, null, null, null,
                        c -> c.phases().setPublicationMember(f, "s.t", "16384/s.t")),
                new FencedWrite("markLeft", "ready", lsn, null, null, null, c -> c.phases().markLeft(f, "s.t", "left")),
                new FencedWrite("restartTable", "ready", lsn, null, null, null,
                        c -> c.phases().restartTable(f, "s.t", "came back", 0)),
                new FencedWrite("initTable", "ready", lsn, null, null, null,
                        c -> c.progress().initTable(f, "s.new", Phase.PENDING)),
                new FencedWrite("recordSync", "ready", lsn, null, null, null,
                        c -> c.progress().recordSync(f, "s.t", new SyncedBatch("0/150", 3, 10, t(1), t(0)), t(2))),
                new FencedWrite("reserveBatchIds", "ready", lsn, null, null, null,
                        c -> c.batchIds().reserveBatchIds(f, "s.t", 5, 0)),
                new FencedWrite("registerFlow (a promotion)", "ready", lsn, null, null, null,
                        c -> c.flows().registerFlow(f, new FlowIdentity("pg_pipeline", "7002", 2L, "slot_main", "pub",
                                null), null, true)),
                new FencedWrite("replaceSlot", "ready", lsn, null, null, null,
                        c -> c.flows().replaceSlot(f, "slot_main", "slot_new")));
    }

    /**
     * Two apply tasks of one flow, the older one (a zombie: cut off from its Connect group, or blocked in a call while
     * the task was started again elsewhere) still writing: once the newer one took the flow, each write of the older one
     * changes nothing and throws {@link ApplyTakenOverException}, while the same write by the newer one changes the row.
     */
    @Test
    void everyWriteOfAnApplyTaskThatLostItsFlowIsRefused() throws Exception {
        try (Catalog old = Catalog.open(settings("catalog", false), "old apply");
             Catalog current = Catalog.open(settings("catalog", false), "new apply")) {
            String f = null;
            for (int i = 0; i < applyWrites("").size(); i++) {
                f = "fence-" + i;
                FencedWrite w = applyWrites(f).get(i);
                catalog.flows().registerFlow(f, new FlowIdentity("pg_pipeline", "7002", 1L, "slot_main", "pub", null),
                        null);
                catalog.progress().initTable(f, "s.t", null);
                try (Connection c = raw.getConnection(); PreparedStatement ps = c.prepareStatement(
                        "UPDATE cdc_table_replication_state SET phase = ?, phase_lsn = ?, copy_lease_owner = ?,"
                                + " copy_lease_until = CASE WHEN ?::text IS NULL THEN NULL ELSE now() + interval '1 hour' END,"
                                + " detach_slot = ?, detach_lsn = ? WHERE flow_name = ?")) {
                    Sql.bind(ps, w.phase(), w.phaseLsn(), w.leaseOwner(), w.leaseOwner(), w.detachSlot(), w.detachLsn(), f);
                    ps.executeUpdate();
                }
                long first = old.takeApply(f, "old");
                long second = current.takeApply(f, "new");
                assertEquals(first + 1, second, w.name());
                String before = snapshot(f);
                ApplyTakenOverException refused = assertThrows(ApplyTakenOverException.class, () -> w.op().accept(old),
                        w.name());
                assertTrue(refused.getMessage().startsWith("flow " + f + ": another apply task took over (epoch " + second
                        + " > " + first + "); this one stops"), refused.getMessage());
                assertEquals(before, snapshot(f), w.name() + " of the old apply task changed the catalog");
                w.op().accept(current);
                assertNotEquals(before, snapshot(f), w.name() + " of the apply task that owns the flow changed nothing");
            }
            // a read tells the old task too, and writers without the fence (copy tasks, the sink) are not refused
            String last = f;
            assertThrows(ApplyTakenOverException.class, () -> old.progress().listTables(last));
            assertTrue(catalog.phases().markReady(last, "s.t", "0/300"));
        }
    }

    /** Waits until a session of {@code application} waits for a lock. */
    private static void awaitLockWait(String application) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (System.nanoTime() < deadline) {
            try (Connection c = raw.getConnection(); PreparedStatement ps = c.prepareStatement("SELECT 1 FROM"
                    + " pg_stat_activity WHERE application_name = ? AND wait_event_type = 'Lock'")) {
                ps.setString(1, application);
                try (ResultSet rs = ps.executeQuery()) {
                    if (rs.next()) {
                        return;
                    }
                }
            }
            Thread.sleep(20);
        }
        throw new AssertionError("no session of " + application + " ever waited for a lock");
    }

    /**
     * The fence holds against a take that comes while an old apply task's write is under way: the take waits for the
     * write's transaction, and a write that waited for a take changes nothing.
     */
    @Test
    void aTakeAndAWriteOfTheFormerOwnerAreOrdered() throws Exception {
        String f = "fence-race";
        catalog.flows().registerFlow(f, new FlowIdentity("pg_pipeline", "7002", 1L, "slot_main", "pub", null), null);
        catalog.progress().initTable(f, "s.t", Phase.PENDING);
        try (Catalog old = Catalog.open(settings("catalog", false), "old apply");
             Catalog current = Catalog.open(settings("catalog", false), "new apply");
             Connection taker = raw.getConnection()) {
            old.takeApply(f, "old");
            // a take under way (its transaction open): the old task's write waits for it, then sees the new epoch
            taker.setAutoCommit(false);
            try (PreparedStatement ps = taker.prepareStatement(
                    "UPDATE cdc_flow SET apply_epoch = apply_epoch + 1 WHERE flow_name = ?")) {
                ps.setString(1, f);
                ps.executeUpdate();
            }
            ExecutorService pool = Executors.newSingleThreadExecutor();
            try {
                Future<Boolean> write = pool.submit(() -> old.phases().markReady(f, "s.t", "0/10"));
                awaitLockWait("tablecdc old apply");
                taker.commit();
                java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
                        () -> write.get(30, java.util.concurrent.TimeUnit.SECONDS));
                assertTrue(e.getCause() instanceof ApplyTakenOverException, e.getCause().toString());
                assertEquals(Phase.PENDING, table(f, "s.t").phase());
            } finally {
                pool.shutdownNow();
            }
            current.takeApply(f, "new");
            assertTrue(current.phases().markReady(f, "s.t", "0/10"));
        }
    }
}
