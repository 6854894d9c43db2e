package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.faults.Fault;
import io.tablecdc.e2e.faults.FaultInjector;
import io.tablecdc.e2e.faults.NamedFaults;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * A streamed table whose ClickHouse side refuses its rows is detached from the flow's shared slot and rejoins once
 * ClickHouse takes them again; the Postgres pipeline's worker process dies (Byteman halts it, as SIGKILL would) at a
 * step of that detach or rejoin, while a writer changes the table and a neighbour in the same transactions, and a
 * second worker takes over without faults. Every table ends {@code ready} with no private slot left, and ClickHouse
 * {@code FINAL} equals Postgres row for row. The flow copies nothing and runs one task, which applies and rejoins.
 */
class PgDetachFaultIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "pgdetach_source";

    private static String catalogUrl;
    private static PgChecks pg;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("pgdetach_catalog");
        clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
        // the sources are quiet when these tests compare: a late stale batch must fail them
        pg.holdEqualFor(Duration.ofSeconds(5));
    }

    @AfterAll
    static void stop() {
        if (clickhouse != null) {
            clickhouse.close();
        }
    }

    static Stream<Fault> steps() {
        return Stream.of(
                NamedFaults.pgDetachSlotMadeNoMarker().kill(),
                NamedFaults.pgDetachMarkedNotLagging().kill(),
                NamedFaults.pgRejoinedSlotKept().kill());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("steps")
    void aWorkerKilledWhileATableDetachesOrRejoinsLosesAndDoublesNothing(Fault fault) throws Exception {
        String name = fault.name();
        String schema = "d_" + name.replace('-', '_');
        String publication = schema + "_pub";
        String prefix = "pgdetach-" + name;
        String flow = prefix + "-flow";
        String stuck = schema + ".stuck";
        String chStuck = schema + "_stuck";
        pg.sql("DROP PUBLICATION IF EXISTS " + publication,
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + stuck + " (id int PRIMARY KEY, v int NOT NULL)",
                "CREATE TABLE " + schema + ".other (id int PRIMARY KEY, v int NOT NULL)",
                "CREATE PUBLICATION " + publication + " FOR TABLE " + stuck + ", " + schema + ".other");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String table : List.of(stuck, schema + ".other")) {
            tables.put(table, new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        }
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, prefix);
        source.put("slot.prefix", schema);
        source.put("tasks.max", "1");
        source.put("table.sync.copy", "none");
        source.put("batch.rows", "20");
        // a batch of each table per poll: a healthy table may pass 5 between two loads of the sink, but is never 3 s
        // without one
        source.put("max.unnormalized.batches", "5");
        source.put("detach.after.ms", "3000");
        stack.connect().rest().putConfig(prefix + "-sink", SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix));

        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                prefix + "-" + System.nanoTime(), stack.pluginPath());
        FaultInjector injector = FaultInjector.of(StackPaths.workDir(prefix + "/faults"), fault);
        Path firstDir = StackPaths.workDir(prefix + "/worker-1");
        Path secondDir = StackPaths.workDir(prefix + "/worker-2");
        boolean rejoinStep = name.equals(NamedFaults.pgRejoinedSlotKept().name());
        ConnectWorker first = ConnectWorker.startProcess(workerProps, firstDir, Duration.ofSeconds(120),
                injector.jvmArgs(ConnectWorker.TEST_JVM_ARGS.toArray(String[]::new)));
        TransactionWriter writer = null;
        try {
            first.rest().putConfig(flow, source);
            // the task makes the catalog's tables as it starts
            first.rest().awaitRunning(flow, 1, Duration.ofSeconds(90));
            // the flow copies nothing: it streams from where its slot was made, so the writer starts once both are ready
            for (String table : tables.keySet()) {
                pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            }
            writer = writer(schema);
            // ClickHouse refuses the table's rows once its first ones are in: its batches pile up unloaded
            awaitTrue(() -> pg.chLong("SELECT count() FROM " + chStuck) > 0, Duration.ofSeconds(120),
                    stuck + " never reached ClickHouse");
            clickhouse.execute("ALTER TABLE " + chStuck + " ADD CONSTRAINT refuse CHECK id < 0").get().close();
            if (rejoinStep) {
                pg.awaitTable(flow, stuck, row -> "lagging".equals(row.get("phase")), Duration.ofSeconds(120));
                assertTrue(privateSlots(schema) == 1, "a lagging table has its private slot");
                heal(chStuck);
            }
            injector.awaitFired(fault, Duration.ofSeconds(120));
        } catch (Exception | AssertionError e) {
            if (writer != null) {
                writer.close();
            }
            throw e;
        } finally {
            first.kill();
        }
        heal(chStuck);
        ConnectWorker second = ConnectWorker.startProcess(workerProps, secondDir, Duration.ofSeconds(120));
        try (TransactionWriter running = writer) {
            second.rest().awaitRunning(flow, 1, Duration.ofSeconds(120));
            running.awaitMore(30);
            running.close();
            pg.awaitTable(flow, stuck, row -> "ready".equals(row.get("phase")) && row.get("detach_slot") == null
                    && Long.parseLong(row.get("normalized_batch_id")) >= Long.parseLong(row.get("synced_batch_id")),
                    Duration.ofSeconds(180));
            // the apply task drops a private slot no table holds at its next check (every 10 s)
            awaitTrue(() -> privateSlots(schema) == 0, Duration.ofSeconds(60), "a private slot is left");
            pg.awaitEqual(tables, Duration.ofSeconds(120));
            String firstLog = Files.readString(firstDir.resolve("worker.log"));
            String secondLog = Files.readString(secondDir.resolve("worker.log"));
            assertTrue(firstLog.contains("detaching it from the shared slot"), "the first worker detached a table");
            String expected = switch (name) {
                case "pg-detach-slot-made-no-marker" -> "did not reach its marker before the task stopped; undone";
                case "pg-detach-marked-not-lagging" -> "lagging (the flow's acknowledged position";
                default -> "which no table holds any more";
            };
            assertTrue(secondLog.contains(expected), "the second worker's log says '" + expected + "': see "
                    + secondDir.resolve("worker.log"));
            if (!name.equals(NamedFaults.pgDetachSlotMadeNoMarker().name())) {
                // (a detach undone at the restart leaves nothing to rejoin)
                assertTrue(secondLog.contains("rejoined: handed back") || firstLog.contains("rejoined: handed back"),
                        "the detached table rejoined");
            }
            System.out.printf("pg detach fault %s: %d writer transactions; ClickHouse equals Postgres%n", name,
                    running.written.get());
            second.rest().delete(flow);
        } finally {
            second.close();
        }
        stack.connect().rest().delete(prefix + "-sink");
    }

    /**
     * A detached table's private slot that keeps more WAL than {@code detach.max.retained.wal.bytes} is dropped and the
     * table is copied again from scratch: its changes made while it was detached are in that copy, none is skipped.
     * Here the WAL comes from a table outside the publication; ClickHouse still refuses the table's rows when its new
     * copy is handed over, so the table is detached again with a new private slot, changes there, and rejoins from it
     * once ClickHouse takes its rows.
     */
    @org.junit.jupiter.api.Test
    void aPrivateSlotPastItsWalBoundSendsItsTableToACopyFromScratch() throws Exception {
        String schema = "d_walbound";
        String flow = "pgdetach-walbound-flow";
        String stuck = schema + ".stuck";
        pg.sql("DROP PUBLICATION IF EXISTS d_walbound_pub",
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + stuck + " (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + stuck + " SELECT g, 0 FROM generate_series(1, 300) g",
                "CREATE TABLE " + schema + ".other (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + schema + ".other SELECT g, 0 FROM generate_series(100, 150) g",
                "CREATE TABLE " + schema + ".filler (id int PRIMARY KEY, pad text NOT NULL)",
                "CREATE PUBLICATION d_walbound_pub FOR TABLE " + stuck + ", " + schema + ".other");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String table : List.of(stuck, schema + ".other")) {
            tables.put(table, new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        }
        Map<String, String> source = detachingSource("d_walbound_pub", "pgdetach-walbound", schema);
        source.put("detach.max.retained.wal.bytes", "1048576");
        var rest = stack.connect().rest();
        rest.putConfig("pgdetach-walbound-sink", SinkConfigs.flowSink(stack, catalogUrl, "pgdetach-walbound-stage",
                "pgdetach-walbound"));
        // after the object store started (for the sink's config): its start configures logging anew
        CdcChecks.LogCapture logs = new CdcChecks.LogCapture();
        try {
            rest.putConfig(flow, source);
            // the tasks make the catalog's tables as they start
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            for (String table : tables.keySet()) {
                pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            }
            pg.awaitEqual(tables, Duration.ofSeconds(90));
            stall(flow, stuck, "d_walbound_stuck", "INSERT INTO " + schema + ".other VALUES (%d, %<d)");
            Map<String, String> lagging = pg.awaitTable(flow, stuck, row -> "lagging".equals(row.get("phase")),
                    Duration.ofSeconds(90));
            pg.sql("UPDATE " + stuck + " SET v = v + 100 WHERE id % 3 = 0", "DELETE FROM " + stuck + " WHERE id % 7 = 0",
                    // about 4 MB of WAL the private slot keeps from its marker on
                    "INSERT INTO " + schema + ".filler SELECT g, repeat('x', 100) FROM generate_series(1, 30000) g");
            // the WAL bound's restart shows in the worker's log: the catalog's last_error is transient evidence, as
            // the re-copied table's batches are refused in turn and the sink records that error over it
            logs.await(1, "WARN", Duration.ofSeconds(60), "table " + stuck + ": its private slot " + lagging.get("detach_slot"),
                    "more than detach.max.retained.wal.bytes=1048576; the table is copied again from scratch");
            Map<String, String> recopied = pg.table(flow, stuck);
            assertTrue(recopied.get("detach_slot") == null || !recopied.get("detach_slot").equals(lagging.get("detach_slot")),
                    "the detach is cleared: " + recopied);
            // copied again (the copy's rows are the table's now: 300 at first, 258 after the deletes) into a ClickHouse
            // table that still refuses them: the table is detached once more, with a new private slot
            Map<String, String> again = pg.awaitTable(flow, stuck, row -> "258".equals(row.get("copy_rows_done"))
                    && row.get("detach_slot") != null && !row.get("detach_slot").equals(lagging.get("detach_slot")),
                    Duration.ofSeconds(90));
            // a change its new private slot alone carries
            pg.sql("UPDATE " + stuck + " SET v = v + 7 WHERE id <= 20");
            heal("d_walbound_stuck");
            // it rejoins from that slot (a rejoin is a copy attempt that copies no row)
            pg.awaitTable(flow, stuck, row -> "ready".equals(row.get("phase")) && row.get("detach_slot") == null,
                    Duration.ofSeconds(120));
            // the apply task drops the slot no table holds at its next check (every 10 s)
            awaitTrue(() -> privateSlots(schema) == 0, Duration.ofSeconds(60), "the private slot is dropped");
            pg.sql("UPDATE " + stuck + " SET v = v + 1000 WHERE id = 1");
            pg.awaitEqual(tables, Duration.ofSeconds(90));
            System.out.printf("pg detach wal bound: detached at %s, copied again (%s rows), detached again at %s and"
                    + " rejoined; ClickHouse equals Postgres%n", lagging.get("detach_lsn"), again.get("copy_rows_done"),
                    again.get("detach_lsn"));
        } finally {
            logs.close();
            rest.delete(flow);
            rest.delete("pgdetach-walbound-sink");
        }
    }

    /**
     * A table that leaves the publication while it is detached rejoins before it leaves the flow: its changes from its
     * detach marker up to its removal are in its private slot alone. ClickHouse ends with what the table held when it
     * left (a copy made in the removal's transaction), not with what was written to it afterwards.
     */
    @org.junit.jupiter.api.Test
    void aDetachedTableThatLeavesThePublicationRejoinsBeforeItLeaves() throws Exception {
        String schema = "d_leaving";
        String flow = "pgdetach-leaving-flow";
        String stuck = schema + ".stuck";
        pg.sql("DROP PUBLICATION IF EXISTS d_leaving_pub",
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + stuck + " (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + stuck + " SELECT g, 0 FROM generate_series(1, 100) g",
                "CREATE TABLE " + schema + ".other (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + schema + ".other SELECT g, 0 FROM generate_series(1, 10) g",
                "CREATE PUBLICATION d_leaving_pub FOR TABLE " + stuck + ", " + schema + ".other");
        String rows = "id::text || '|' || v::text";
        String chRows = "concat(toString(id), '|', toString(v))";
        Map<String, String> source = detachingSource("d_leaving_pub", "pgdetach-leaving", schema);
        var rest = stack.connect().rest();
        rest.putConfig("pgdetach-leaving-sink", SinkConfigs.flowSink(stack, catalogUrl, "pgdetach-leaving-stage",
                "pgdetach-leaving"));
        try {
            rest.putConfig(flow, source);
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            pg.awaitTable(flow, stuck, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            pg.awaitEqual(Map.of(stuck, new String[] {rows, chRows}), Duration.ofSeconds(90));
            stall(flow, stuck, "d_leaving_stuck", null);
            pg.awaitTable(flow, stuck, row -> "lagging".equals(row.get("phase")), Duration.ofSeconds(90));
            // changes only the private slot has, then the removal, with a copy of what the table held at that moment
            pg.sql("UPDATE " + stuck + " SET v = v + 100 WHERE id % 3 = 0", "DELETE FROM " + stuck + " WHERE id % 7 = 0");
            pg.transaction("ALTER PUBLICATION d_leaving_pub DROP TABLE " + stuck,
                    "CREATE TABLE " + schema + ".stuck_at_removal AS SELECT * FROM " + stuck);
            pg.sql("UPDATE " + stuck + " SET v = -1", "INSERT INTO " + schema + ".other VALUES (11, 11)");
            heal("d_leaving_stuck");
            pg.awaitTable(flow, stuck, row -> "errored".equals(row.get("phase")) && row.get("last_error") != null
                    && row.get("last_error").startsWith("left publication"), Duration.ofSeconds(120));
            pg.expectAs(stuck, schema + ".stuck_at_removal");
            pg.awaitEqual(Map.of(stuck, new String[] {rows, chRows}, schema + ".other", new String[] {rows, chRows}),
                    Duration.ofSeconds(90));
            awaitTrue(() -> privateSlots(schema) == 0, Duration.ofSeconds(60), "the private slot is dropped");
            System.out.println("pg detach, leaving: the detached table rejoined, then left; ClickHouse holds what it"
                    + " held at its removal");
        } finally {
            rest.delete(flow);
            rest.delete("pgdetach-leaving-sink");
        }
    }

    /**
     * Issue 35 item 3: an apply instance a restart left behind, blocked while recording the detach marker it met,
     * commits it after the new instance read the table as "detach begun, no marker". The new instance's undo is
     * conditional in the catalog (no marker recorded); the private slot must be dropped only when that undo took
     * effect, or the table is {@code ready} with a marker and no slot: its changes since the marker are gone, and it
     * is copied again from scratch. The old instance here is the test's own catalog transaction, holding the marker's
     * update (what {@code markDetached} writes) uncommitted while the flow starts again, and committing it once the new
     * instance's undo waits for it.
     */
    @org.junit.jupiter.api.Test
    void aMarkerRecordedByAnOldInstanceWhileTheStartUndoesItsDetachKeepsThePrivateSlot() throws Exception {
        String schema = "d_undo";
        String flow = "pgdetach-undo-flow";
        String stuck = schema + ".stuck";
        pg.sql("DROP PUBLICATION IF EXISTS d_undo_pub",
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + stuck + " (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + stuck + " SELECT g, 0 FROM generate_series(1, 100) g",
                "CREATE TABLE " + schema + ".other (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + schema + ".other SELECT g, 0 FROM generate_series(1, 10) g",
                "CREATE PUBLICATION d_undo_pub FOR TABLE " + stuck + ", " + schema + ".other");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String table : List.of(stuck, schema + ".other")) {
            tables.put(table, new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        }
        Map<String, String> source = detachingSource("d_undo_pub", "pgdetach-undo", schema);
        var rest = stack.connect().rest();
        rest.putConfig("pgdetach-undo-sink", SinkConfigs.flowSink(stack, catalogUrl, "pgdetach-undo-stage",
                "pgdetach-undo"));
        Connection old = null;
        try {
            rest.putConfig(flow, source);
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            for (String table : tables.keySet()) {
                pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            }
            pg.awaitEqual(tables, Duration.ofSeconds(90));
            rest.stop(flow);
            awaitTrue(() -> rest.states(flow).equals(List.of("STOPPED")), Duration.ofSeconds(60), "never stopped");

            // a detach as its steps 1 to 3 leave it: the private slot recorded, then made, then the marker
            String mainSlot = pg.catalogValue("SELECT source_slot FROM cdc_flow WHERE flow_name = ?", flow);
            String slot = detachSlotPrefix(schema, mainSlot) + "0abc12";
            assertEquals(slot, pg.sourceValue("SELECT slot_name FROM pg_create_logical_replication_slot(?, 'pgoutput')",
                    slot));
            try (Connection c = pg.catalog(); PreparedStatement ps = c.prepareStatement("UPDATE cdc_table_replication_state"
                    + " SET detach_slot = ? WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'ready'"
                    + " AND detach_slot IS NULL")) {
                ps.setString(1, slot);
                ps.setString(2, flow);
                ps.setString(3, stuck);
                assertEquals(1, ps.executeUpdate());
            }
            String marker = pg.sourceValue("SELECT CAST(pg_logical_emit_message(false, 'tablecdc.detach', ?) AS text)",
                    flow + "\n" + stuck + "\n" + slot);
            // changes past the marker: the private slot alone carries them for the stuck table
            pg.sql("UPDATE " + stuck + " SET v = v + 100 WHERE id % 3 = 0", "DELETE FROM " + stuck + " WHERE id % 7 = 0",
                    "INSERT INTO " + schema + ".other VALUES (11, 11)");
            // the old instance met the marker and is about to commit it
            old = pg.catalog();
            old.setAutoCommit(false);
            try (PreparedStatement ps = old.prepareStatement("UPDATE cdc_table_replication_state SET detach_lsn = ?,"
                    + " detached_at = now() WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'ready'"
                    + " AND detach_slot = ? AND detach_lsn IS NULL")) {
                ps.setString(1, marker);
                ps.setString(2, flow);
                ps.setString(3, stuck);
                ps.setString(4, slot);
                assertEquals(1, ps.executeUpdate());
            }
            rest.resume(flow);
            // the new instance's start undoes the detach it reads as unfinished: its undo waits for the old one's row
            awaitTrue(() -> "true".equals(pg.catalogValue("SELECT CAST(count(*) > 0 AS text) FROM pg_stat_activity"
                    + " WHERE datname = current_database() AND wait_event_type = 'Lock' AND strpos(query, ?) > 0",
                    "detach_slot")), Duration.ofSeconds(120), "the start never undid the detach");
            old.commit();
            old.close();
            old = null;
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            Map<String, String> row = pg.awaitTable(flow, stuck, r -> marker.equals(r.get("detach_lsn"))
                    || r.get("detach_slot") == null, Duration.ofSeconds(60));
            assertEquals(slot, pg.sourceValue("SELECT slot_name FROM pg_replication_slots WHERE slot_name = ?", slot),
                    "the private slot holding the table's changes since its marker is kept: " + row);
            // the table rejoins from its private slot, not by a copy from scratch
            Map<String, String> ready = pg.awaitTable(flow, stuck, r -> "ready".equals(r.get("phase"))
                    && r.get("detach_slot") == null, Duration.ofSeconds(120));
            assertTrue(ready.get("last_error") == null || !ready.get("last_error").contains("is gone"), ready.toString());
            pg.sql("UPDATE " + stuck + " SET v = v + 1000 WHERE id = 1");
            pg.awaitEqual(tables, Duration.ofSeconds(90));
            awaitTrue(() -> privateSlots(schema) == 0, Duration.ofSeconds(60), "the private slot is dropped");
            System.out.printf("pg detach undo: marker %s recorded by the old instance during the new one's undo; slot"
                    + " %s kept, the table rejoined from it (%s)%n", marker, slot, ready);
        } finally {
            if (old != null) {
                old.rollback();
                old.close();
            }
            rest.delete(flow);
            rest.delete("pgdetach-undo-sink");
        }
    }

    /**
     * Issue 35 item 7: a detach left half done while the apply task runs (its private slot recorded and made, no
     * marker recorded, its undo failed with a broken connection) used to be undone only at the next start: the table
     * kept a {@code detach.max.tables} place and could not leave the publication, and the slot kept WAL. The apply
     * task's slot checks (every 10 s) undo it now, and the table streams on.
     */
    @org.junit.jupiter.api.Test
    void aDetachLeftHalfDoneWhileTheTaskRunsIsUndoneWithoutARestart() throws Exception {
        String schema = "d_half";
        String flow = "pgdetach-half-flow";
        String stuck = schema + ".stuck";
        pg.sql("DROP PUBLICATION IF EXISTS d_half_pub",
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + stuck + " (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + stuck + " SELECT g, 0 FROM generate_series(1, 100) g",
                "CREATE PUBLICATION d_half_pub FOR TABLE " + stuck);
        Map<String, String[]> tables = Map.of(stuck,
                new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        var rest = stack.connect().rest();
        rest.putConfig("pgdetach-half-sink", SinkConfigs.flowSink(stack, catalogUrl, "pgdetach-half-stage",
                "pgdetach-half"));
        try {
            rest.putConfig(flow, detachingSource("d_half_pub", "pgdetach-half", schema));
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            pg.awaitTable(flow, stuck, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            pg.awaitEqual(tables, Duration.ofSeconds(90));
            String mainSlot = pg.catalogValue("SELECT source_slot FROM cdc_flow WHERE flow_name = ?", flow);
            String slot = detachSlotPrefix(schema, mainSlot) + "0def34";
            pg.sourceValue("SELECT slot_name FROM pg_create_logical_replication_slot(?, 'pgoutput')", slot);
            try (Connection c = pg.catalog(); PreparedStatement ps = c.prepareStatement("UPDATE"
                    + " cdc_table_replication_state SET detach_slot = ? WHERE flow_name = ? AND source_table_identifier = ?"
                    + " AND phase = 'ready' AND detach_slot IS NULL")) {
                ps.setString(1, slot);
                ps.setString(2, flow);
                ps.setString(3, stuck);
                assertEquals(1, ps.executeUpdate());
            }
            pg.sql("UPDATE " + stuck + " SET v = v + 1 WHERE id <= 10");
            awaitTrue(() -> pg.table(flow, stuck).get("detach_slot") == null && privateSlots(schema) == 0,
                    Duration.ofSeconds(60), "the half-done detach was never undone: " + pg.table(flow, stuck));
            pg.sql("UPDATE " + stuck + " SET v = v + 1 WHERE id <= 20");
            pg.awaitEqual(tables, Duration.ofSeconds(90));
            assertEquals("ready", pg.table(flow, stuck).get("phase"));
            assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), rest.states(flow));
            System.out.println("pg detach half done: undone by the running task's slot check; the table streams on");
        } finally {
            rest.delete(flow);
            rest.delete("pgdetach-half-sink");
        }
    }

    /**
     * Issue 35 item 2: the copy task that rejoins a detached table finds its private slot still in use by the
     * walsender of an earlier holder whose host stopped answering (no FIN: the server ends that walsender only after
     * {@code wal_sender_timeout}). The rejoin used to fail at once on "slot is active for PID" (55006), and the table
     * was copied again from scratch instead of streaming its private slot (a table not copied was marked errored and its
     * slot dropped). The earlier holder here is the test's own replication connection on the private slot that never
     * answers; the rejoin must wait it out or end it, and stream the slot.
     */
    @org.junit.jupiter.api.Test
    void aRejoinWhosePrivateSlotIsHeldByAHostThatStoppedAnsweringStreamsTheSlot() throws Exception {
        String schema = "d_busy";
        String flow = "pgdetach-busy-flow";
        String stuck = schema + ".stuck";
        pg.sql("DROP PUBLICATION IF EXISTS d_busy_pub",
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + stuck + " (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + stuck + " SELECT g, 0 FROM generate_series(1, 100) g",
                "CREATE TABLE " + schema + ".other (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + schema + ".other SELECT g, 0 FROM generate_series(100, 110) g",
                "CREATE PUBLICATION d_busy_pub FOR TABLE " + stuck + ", " + schema + ".other");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String table : List.of(stuck, schema + ".other")) {
            tables.put(table, new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        }
        var rest = stack.connect().rest();
        rest.putConfig("pgdetach-busy-sink", SinkConfigs.flowSink(stack, catalogUrl, "pgdetach-busy-stage",
                "pgdetach-busy"));
        Connection holder = null;
        try {
            rest.putConfig(flow, detachingSource("d_busy_pub", "pgdetach-busy", schema));
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            for (String table : tables.keySet()) {
                pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            }
            pg.awaitEqual(tables, Duration.ofSeconds(90));
            // ClickHouse refuses the table's rows; it changes until it is detached
            clickhouse.execute("ALTER TABLE d_busy_stuck ADD CONSTRAINT refuse CHECK id < 0").get().close();
            int[] round = {0};
            awaitTrue(() -> {
                round[0]++;
                pg.sql("UPDATE " + stuck + " SET v = v + 1 WHERE id <= 10",
                        "INSERT INTO " + schema + ".other VALUES (" + (1000 + round[0]) + ", 0)");
                Thread.sleep(300);
                return "lagging".equals(pg.table(flow, stuck).get("phase"));
            }, Duration.ofSeconds(90), "the table was never detached");
            Map<String, String> lagging = pg.table(flow, stuck);
            String slot = lagging.get("detach_slot");
            // changes only the private slot carries
            pg.sql("UPDATE " + stuck + " SET v = v + 100 WHERE id % 3 = 0", "DELETE FROM " + stuck + " WHERE id % 7 = 0");
            // the earlier holder: streams the private slot and never answers again
            java.util.Properties props = new java.util.Properties();
            org.postgresql.PGProperty.USER.set(props, stack.postgres().user());
            org.postgresql.PGProperty.PASSWORD.set(props, stack.postgres().password());
            org.postgresql.PGProperty.REPLICATION.set(props, "database");
            org.postgresql.PGProperty.ASSUME_MIN_SERVER_VERSION.set(props, "10");
            org.postgresql.PGProperty.PREFER_QUERY_MODE.set(props, "simple");
            holder = java.sql.DriverManager.getConnection(stack.postgres().jdbcUrl(DATABASE), props);
            holder.unwrap(org.postgresql.PGConnection.class).getReplicationAPI().replicationStream().logical()
                    .withSlotName(slot)
                    .withSlotOption("proto_version", "1")
                    .withSlotOption("publication_names", "d_busy_pub")
                    .start();
            assertEquals("true", pg.sourceValue("SELECT CAST(active AS text) FROM pg_replication_slots"
                    + " WHERE slot_name = ?", slot), "the private slot is in use by the unanswering holder");
            heal("d_busy_stuck");
            java.util.concurrent.atomic.AtomicReference<String> refused = new java.util.concurrent.atomic.AtomicReference<>();
            awaitTrue(() -> {
                Map<String, String> row = pg.table(flow, stuck);
                if (row.get("last_error") != null && row.get("last_error").contains("is active for PID")) {
                    refused.compareAndSet(null, row.toString());
                }
                return "ready".equals(row.get("phase")) && row.get("detach_slot") == null;
            }, Duration.ofSeconds(180), "the table never rejoined: " + pg.table(flow, stuck));
            assertEquals(null, refused.get(), "the rejoin failed on the busy private slot");
            Map<String, String> ready = pg.table(flow, stuck);
            assertTrue(ready.get("last_error") == null || !ready.get("last_error").contains("from scratch"),
                    "rejoined from the private slot, not copied again: " + ready);
            pg.sql("UPDATE " + stuck + " SET v = v + 1000 WHERE id = 1");
            pg.awaitEqual(tables, Duration.ofSeconds(90));
            awaitTrue(() -> privateSlots(schema) == 0, Duration.ofSeconds(60), "the private slot is dropped");
            System.out.printf("pg detach busy slot: the rejoin waited out / ended the unanswering holder of %s and"
                    + " streamed it (%s)%n", slot, ready);
        } finally {
            if (holder != null) {
                try {
                    holder.close();
                } catch (java.sql.SQLException e) {
                    // ended by the server
                }
            }
            rest.delete(flow);
            rest.delete("pgdetach-busy-sink");
        }
    }

    /** {@code <slot.prefix>_detach_<8 hex of the main slot's SHA-256>_}, as the connector names private slots. */
    private static String detachSlotPrefix(String slotPrefix, String mainSlot) throws Exception {
        byte[] hash = java.security.MessageDigest.getInstance("SHA-256")
                .digest(mainSlot.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        return slotPrefix + "_detach_" + java.util.HexFormat.of().formatHex(hash, 0, 4) + "_";
    }

    /** A flow whose streamed tables detach after 3 unloaded batches and 1 s without a load; two tasks, tables copied. */
    private static Map<String, String> detachingSource(String publication, String prefix, String slotPrefix) {
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, prefix);
        source.put("slot.prefix", slotPrefix);
        source.put("tasks.max", "2");
        source.put("table.sync.copy", "all");
        source.put("max.unnormalized.batches", "3");
        source.put("detach.after.ms", "1000");
        return source;
    }

    /**
     * Makes ClickHouse refuse {@code chTable}'s inserts, then changes {@code stuck} in up to 4 batches of its own
     * (each followed by {@code alongside}, formatted with the batch's number, when given), enough to detach it; it stops
     * early once the table is detached.
     */
    private static void stall(String flow, String stuck, String chTable, String alongside) throws Exception {
        clickhouse.execute("ALTER TABLE " + chTable + " ADD CONSTRAINT refuse CHECK id < 0").get().close();
        for (int i = 1; i <= 4; i++) {
            Map<String, String> row = pg.table(flow, stuck);
            if (row.get("detach_slot") != null) {
                // detached after three batches (max.unnormalized.batches): its later changes go to its private slot
                // and make no batch until it rejoins, so a fourth one is not awaited
                return;
            }
            long before = Long.parseLong(row.get("synced_batch_id"));
            pg.sql("UPDATE " + stuck + " SET v = v + 1 WHERE id <= " + (i * 10));
            pg.awaitTable(flow, stuck, r -> Long.parseLong(r.get("synced_batch_id")) > before
                    || r.get("detach_slot") != null, Duration.ofSeconds(60));
            if (alongside != null) {
                pg.sql(String.format(java.util.Locale.ROOT, alongside, i));
            }
        }
    }

    private static void heal(String chTable) throws Exception {
        clickhouse.execute("ALTER TABLE " + chTable + " DROP CONSTRAINT IF EXISTS refuse").get().close();
    }

    /** The flow's private slots on the source (named {@code <slot.prefix>_detach_…}). */
    private static long privateSlots(String slotPrefix) throws Exception {
        try (Connection c = pg.source(); PreparedStatement ps = c.prepareStatement(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE ?")) {
            ps.setString(1, slotPrefix.replace("_", "\\_") + "\\_detach\\_%");
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }


    /**
     * Changes both tables in every transaction, and each table alone in others, one transaction every few milliseconds,
     * until closed.
     */
    private static TransactionWriter writer(String schema) {
        return new TransactionWriter("pgdetach-writer-" + schema, pg, n -> switch (n % 3) {
            case 0 -> List.of("INSERT INTO " + schema + ".stuck VALUES (" + n + ", " + n + ")",
                    "INSERT INTO " + schema + ".other VALUES (" + n + ", " + n + ")");
            case 1 -> List.of("UPDATE " + schema + ".stuck SET v = v + 1 WHERE id = " + (n - 1),
                    "DELETE FROM " + schema + ".stuck WHERE id = " + Math.max(0, n - 30));
            default -> List.of("UPDATE " + schema + ".other SET v = v + 1 WHERE id = " + (n - 2));
        }, () -> 15);
    }
}
