package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static io.tablecdc.e2e.PgDetachFaultIT.DATABASE;
import static io.tablecdc.e2e.PgDetachFaultIT.catalogUrl;
import static io.tablecdc.e2e.PgDetachFaultIT.clickhouse;
import static io.tablecdc.e2e.PgDetachFaultIT.detachSlotPrefix;
import static io.tablecdc.e2e.PgDetachFaultIT.detachingSource;
import static io.tablecdc.e2e.PgDetachFaultIT.heal;
import static io.tablecdc.e2e.PgDetachFaultIT.pg;
import static io.tablecdc.e2e.PgDetachFaultIT.privateSlots;
import static io.tablecdc.e2e.PgDetachFaultIT.stack;
import static io.tablecdc.e2e.PgDetachFaultIT.stall;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

import io.tablecdc.e2e.flows.SinkConfigs;

/**
 * The edges of detaching a streamed table from the flow's shared slot, on {@link PgDetachFaultIT}'s databases and
 * helpers: a private slot past its WAL bound, a detached table leaving the publication, a marker an old apply instance
 * records while a start undoes the detach, a detach left half done while the task runs, and a rejoin whose private slot
 * is held by a host that stopped answering. (Split from {@link PgDetachFaultIT}, whose worker kills take as long, so
 * that the two run side by side in the suite's forks.)
 */
class PgDetachEdgesIT {
    /** Rows of an (id, v) table as Postgres and ClickHouse print them, for {@link PgChecks#awaitEqual}. */
    private static final String[] ROWS = {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"};

    /**
     * Creates {@code schema} anew with tables {@code stuck} (ids 1 to {@code stuckRows}) and {@code other} (ids
     * {@code otherFrom} to {@code otherTo}), every {@code v} 0, runs {@code more}, and publishes both tables as
     * {@code <schema>_pub}.
     *
     * @return both tables with {@link #ROWS}
     */
    private static Map<String, String[]> stuckAndOther(String schema, int stuckRows, int otherFrom, int otherTo,
                                                       String... more) throws Exception {
        String stuck = schema + ".stuck";
        String other = schema + ".other";
        List<String> statements = new java.util.ArrayList<>(List.of("DROP PUBLICATION IF EXISTS " + schema + "_pub",
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + stuck + " (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + stuck + " SELECT g, 0 FROM generate_series(1, " + stuckRows + ") g",
                "CREATE TABLE " + other + " (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + other + " SELECT g, 0 FROM generate_series(" + otherFrom + ", " + otherTo + ") g"));
        statements.addAll(List.of(more));
        statements.add("CREATE PUBLICATION " + schema + "_pub FOR TABLE " + stuck + ", " + other);
        pg.sql(statements.toArray(String[]::new));
        Map<String, String[]> tables = new LinkedHashMap<>();
        tables.put(stuck, ROWS);
        tables.put(other, ROWS);
        return tables;
    }

    @BeforeAll
    static void start() throws Exception {
        PgDetachFaultIT.start();
    }

    @AfterAll
    static void stop() {
        PgDetachFaultIT.stop();
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
        Map<String, String[]> tables = stuckAndOther(schema, 300, 100, 150,
                "CREATE TABLE " + schema + ".filler (id int PRIMARY KEY, pad text NOT NULL)");
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
        stuckAndOther(schema, 100, 1, 10);
        String rows = ROWS[0];
        String chRows = ROWS[1];
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
        Map<String, String[]> tables = stuckAndOther(schema, 100, 1, 10);
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
        Map<String, String[]> tables = stuckAndOther(schema, 100, 100, 110);
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
}
