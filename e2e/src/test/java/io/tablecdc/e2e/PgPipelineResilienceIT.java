package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.fasterxml.jackson.databind.JsonNode;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.StatusScript;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;

/**
 * The Postgres pipeline when something around it goes wrong, end to end through the Connect REST API: every refusal
 * at start (another cluster, another timeline, another publication, a slot without its catalog state, a catalog
 * state without its slot) names what changed and what to do and changes nothing; a slot the server invalidated is
 * refused by default and, with {@code invalidated.slot.behavior=recreate}, replaced with every table copied again
 * until ClickHouse equals Postgres; a table whose copy keeps failing ends {@code errored} after its retries while
 * the others copy and stream, and a manual reset copies it once its cause is fixed.
 *
 * <p>Besides the stack's Postgres, a second PostgreSQL 17 cluster of this class's own: another system identifier
 * for the refusal, and a server whose {@code max_slot_wal_keep_size} may be lowered to invalidate a slot.
 */
class PgPipelineResilienceIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String SOURCE = SourceConfigs.PG_PIPELINE;
    private static final String DATABASE = "resil_source";
    private static final String OTHER_DATABASE = "resil_other";

    private static EmbeddedPostgres other;
    private static String catalogUrl;
    private static Client clickhouse;
    private static PgChecks pg;
    private static PgChecks otherPg;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("resil_catalog");
        clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
        Path work = StackPaths.workDir("resil-postgres");
        other = EmbeddedPostgres.builder()
                .setOverrideWorkingDirectory(work.resolve("binaries").toFile())
                .setDataDirectory(work.resolve("data"))
                .setCleanDataDirectory(true)
                .setPort(StackPaths.freePort())
                .setPGStartupWait(Duration.ofSeconds(60))
                .setServerConfig("listen_addresses", "127.0.0.1")
                .setServerConfig("wal_level", "logical")
                .setServerConfig("max_replication_slots", "20")
                .setServerConfig("max_wal_senders", "20")
                .setServerConfig("fsync", "off")
                .setOutputRedirector(ProcessBuilder.Redirect.appendTo(work.resolve("postgres.log").toFile()))
                .setErrorRedirector(ProcessBuilder.Redirect.appendTo(work.resolve("postgres.log").toFile()))
                .start();
        try (Connection c = DriverManager.getConnection(otherUrl("postgres"), "postgres", "");
             Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE " + OTHER_DATABASE);
        }
        otherPg = new PgChecks(stack, () -> DriverManager.getConnection(otherUrl(OTHER_DATABASE), "postgres", ""),
                catalogUrl, clickhouse);
    }

    @AfterAll
    static void stop() throws Exception {
        if (other != null) {
            other.close();
        }
    }

    private static String otherUrl(String database) {
        return "jdbc:postgresql://127.0.0.1:" + other.getPort() + "/" + database;
    }

    private static Map<String, String> sourceConfig(String prefix, String publication) {
        Map<String, String> config = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, prefix);
        config.put("batch.rows", "500");
        return config;
    }

    private static Map<String, String> onOtherCluster(Map<String, String> config) {
        Map<String, String> moved = new HashMap<>(config);
        moved.put("database.host", "127.0.0.1");
        moved.put("database.port", Integer.toString(other.getPort()));
        moved.put("database.dbname", OTHER_DATABASE);
        moved.put("database.user", "postgres");
        moved.put("database.password", "");
        return moved;
    }

    private static Map<String, String> sinkConfig(String prefix) {
        Map<String, String> config = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);
        return config;
    }

    // ------------------------------------------------------------------ what "changes nothing" compares

    private static String query(Connection c, String sql, String... params) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) {
                ps.setString(i + 1, params[i]);
            }
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : null;
            }
        }
    }

    private static void update(Connection c, String sql, String... params) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) {
                ps.setString(i + 1, params[i]);
            }
            ps.execute();
        }
    }

    private static final String SLOTS = "SELECT json_agg(json_build_array(slot_name, plugin, confirmed_flush_lsn,"
            + " restart_lsn, wal_status) ORDER BY slot_name)::text FROM pg_replication_slots"
            + " WHERE left(slot_name, length(?)) = ?";

    /** The flow's catalog rows and the slots named with {@code prefix} on both clusters, as text. */
    private static String snapshot(String flow, String prefix) throws SQLException {
        StringBuilder out = new StringBuilder();
        try (Connection c = pg.catalog()) {
            // without the apply task's ownership: every start of it takes the flow's next apply epoch before it may
            // refuse (so that an earlier apply task still running is fenced), which touches the row's updated_at too
            out.append("flow: ").append(query(c, "SELECT (to_jsonb(f) - 'apply_epoch' - 'apply_owner' - 'updated_at')::text"
                    + " FROM cdc_flow f WHERE flow_name = ?", flow));
            out.append("\ntables: ").append(query(c, "SELECT json_agg(s ORDER BY source_table_identifier)::text"
                    + " FROM cdc_table_replication_state s WHERE flow_name = ?", flow));
        }
        try (Connection c = pg.source()) {
            out.append("\nslots: ").append(query(c, SLOTS, prefix, prefix));
        }
        try (Connection c = otherPg.source()) {
            out.append("\nother cluster slots: ").append(query(c, SLOTS, prefix, prefix));
        }
        return out.toString();
    }

    private static String flowSlot(String flow) throws SQLException {
        try (Connection c = pg.catalog()) {
            return query(c, "SELECT source_slot FROM cdc_flow WHERE flow_name = ?", flow);
        }
    }

    private static void stopFlow(ConnectRestClient rest, String flow, PgChecks source, String prefix) throws Exception {
        rest.stop(flow);
        rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText()), Duration.ofSeconds(60));
        // the stopped tasks' walsenders let go of the slots
        awaitTrue(() -> {
            try (Connection c = source.source()) {
                return "0".equals(query(c, "SELECT count(*)::text FROM pg_replication_slots WHERE active"
                        + " AND left(slot_name, length(?)) = ?", prefix, prefix));
            }
        }, Duration.ofSeconds(60), "the flow's slots stayed active after the stop");
    }

    /**
     * With the flow stopped and the situation prepared: start it with {@code config}, expect the connector or a task
     * to fail with every one of {@code expected} in its trace, and the snapshot unchanged. Returns the trace.
     */
    private static String refused(ConnectRestClient rest, String flow, String prefix, Map<String, String> config,
                                  String... expected) throws Exception {
        String before = snapshot(flow, prefix);
        rest.putConfig(flow, config);
        rest.resume(flow);
        JsonNode status = rest.awaitStatus(flow, s -> {
            String text = s.toString();
            for (String e : expected) {
                if (!text.contains(e)) {
                    return false;
                }
            }
            return true;
        }, Duration.ofSeconds(90));
        String trace = status.path("connector").path("trace").asText() + status.path("tasks").path(0).path("trace").asText();
        // the refusal is final: a second look finds the same state
        Thread.sleep(1_000);
        assertEquals(before, snapshot(flow, prefix), "a refusal changes nothing");
        String message = trace.lines().filter(l -> l.contains("refuses to")).findFirst().orElse(trace);
        System.out.printf("pg resilience: refused as expected: %s%n", message);
        return message;
    }

    private static void restore(ConnectRestClient rest, String flow, String prefix, Map<String, String> config)
            throws Exception {
        stopFlow(rest, flow, pg, prefix);
        rest.putConfig(flow, config);
        rest.resume(flow);
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
    }

    /**
     * Each refusal at start, from a flow that has streamed: its message names what changed and what to do, and
     * neither the catalog rows nor any slot change.
     */
    @Test
    void refusesToResumeAgainstAnotherSourceOrState() throws Exception {
        pg.sql("DROP PUBLICATION IF EXISTS rf_pub",
                "DROP PUBLICATION IF EXISTS rf_pub2",
                "DROP SCHEMA IF EXISTS rf CASCADE",
                "CREATE SCHEMA rf",
                "CREATE TABLE rf.a (id int PRIMARY KEY, v text)",
                "CREATE PUBLICATION rf_pub FOR TABLE rf.a",
                "CREATE PUBLICATION rf_pub2 FOR TABLE rf.a");
        // the other cluster has the same database objects, so that only its identity differs
        otherPg.sql("CREATE SCHEMA rf",
                "CREATE TABLE rf.a (id int PRIMARY KEY, v text)",
                "CREATE PUBLICATION rf_pub FOR TABLE rf.a");
        String flow = "rf-flow";
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> config = sourceConfig("rf", "rf_pub");
        rest.putConfig(flow, config);
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        pg.awaitTable(flow, "rf.a", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(60));
        pg.sql("INSERT INTO rf.a SELECT g, 'v' || g FROM generate_series(1, 100) g");
        awaitTrue(() -> rest.offsets(flow).toString().contains("\"slot\""), Duration.ofSeconds(60),
                "the flow's position never reached Connect's offsets");
        String slot = flowSlot(flow);

        // another publication
        stopFlow(rest, flow, pg, "rf");
        Map<String, String> otherPublication = new HashMap<>(config);
        otherPublication.put("publication.name", "rf_pub2");
        refused(rest, flow, "rf", otherPublication, "publication.name is 'rf_pub2'",
                "but the flow was created for publication 'rf_pub'", "Set publication.name back to 'rf_pub'");
        restore(rest, flow, "rf", config);

        // another cluster (same database objects, another system identifier)
        stopFlow(rest, flow, pg, "rf");
        refused(rest, flow, "rf", onOtherCluster(config), "is the cluster with system identifier",
                "Point database.host and database.port back at that cluster");
        restore(rest, flow, "rf", config);

        // another timeline, as a promotion or a restore leaves it, without failover slots
        stopFlow(rest, flow, pg, "rf");
        try (Connection c = pg.catalog()) {
            update(c, "UPDATE cdc_flow SET source_timeline = source_timeline + 1 WHERE flow_name = ?", flow);
        }
        refused(rest, flow, "rf", config, "but the flow last streamed on timeline 2", "slot.failover is false",
                "Start a new flow");
        try (Connection c = pg.catalog()) {
            update(c, "UPDATE cdc_flow SET source_timeline = source_timeline - 1 WHERE flow_name = ?", flow);
        }
        restore(rest, flow, "rf", config);

        // a slot without its state: the catalog lost the flow (wiped, or another catalog) while the slot and
        // Connect's offsets remain
        stopFlow(rest, flow, pg, "rf");
        try (Connection c = pg.catalog()) {
            update(c, "DROP TABLE IF EXISTS rf_keep_state");
            update(c, "DROP TABLE IF EXISTS rf_keep_flow");
            update(c, "CREATE TABLE rf_keep_state AS SELECT * FROM cdc_table_replication_state WHERE flow_name = ?", flow);
            update(c, "CREATE TABLE rf_keep_flow AS SELECT * FROM cdc_flow WHERE flow_name = ?", flow);
            update(c, "DELETE FROM cdc_table_replication_state WHERE flow_name = ?", flow);
            update(c, "DELETE FROM cdc_flow WHERE flow_name = ?", flow);
        }
        refused(rest, flow, "rf", config, "records no slot for this flow in cdc_flow", "but its slot " + slot + " exists",
                "Point catalog.jdbc.url back at the flow's catalog", "pg_drop_replication_slot('" + slot + "')");
        stopFlow(rest, flow, pg, "rf");
        try (Connection c = pg.catalog()) {
            update(c, "INSERT INTO cdc_flow SELECT * FROM rf_keep_flow");
            update(c, "INSERT INTO cdc_table_replication_state SELECT * FROM rf_keep_state");
            update(c, "DROP TABLE rf_keep_state");
            update(c, "DROP TABLE rf_keep_flow");
        }
        restore(rest, flow, "rf", config);
        pg.sql("INSERT INTO rf.a SELECT g, 'v' || g FROM generate_series(101, 110) g");

        // a state without its slot: the slot was dropped while the flow has offsets and streaming tables
        stopFlow(rest, flow, pg, "rf");
        pg.sql("SELECT pg_drop_replication_slot('" + slot + "')");
        refused(rest, flow, "rf", config, "its replication slot " + slot + " (cdc_flow.source_slot) does not exist",
                "Connect holds its position", "start a new flow");
        rest.delete(flow);
    }

    private static String slotState(PgChecks source, String slot, String column) throws SQLException {
        try (Connection c = source.source()) {
            // the column name is one of this class's constants
            return query(c, "SELECT " + column + "::text FROM pg_replication_slots WHERE slot_name = ?", slot);
        }
    }

    /**
     * A slot the server invalidates while the connector is stopped (a small max_slot_wal_keep_size and WAL written
     * meanwhile): refused by default with the advice; with invalidated.slot.behavior=recreate a new (failover) slot
     * replaces it, every table is copied again and ClickHouse equals Postgres, rows deleted during the stop included.
     */
    @Test
    void anInvalidatedSlotIsRefusedOrRecreated() throws Exception {
        otherPg.sql("DROP PUBLICATION IF EXISTS inv_pub",
                "DROP SCHEMA IF EXISTS inv CASCADE",
                "CREATE SCHEMA inv",
                "CREATE TABLE inv.a (id int PRIMARY KEY, v int NOT NULL, note text)",
                "INSERT INTO inv.a SELECT g, g % 31, 'n' || g FROM generate_series(1, 5000) g",
                "CREATE TABLE inv.b (id int PRIMARY KEY, s text NOT NULL)",
                "INSERT INTO inv.b SELECT g, 's' || g FROM generate_series(1, 2000) g",
                "CREATE TABLE inv.filler (id int, pad text)",
                "CREATE PUBLICATION inv_pub FOR TABLE inv.a, inv.b");
        Map<String, String[]> tables = new LinkedHashMap<>();
        tables.put("inv.a", new String[] {"id::text || '|' || v::text || '|' || coalesce(note, '-')",
                "concat(toString(id), '|', toString(v), '|', ifNull(note, '-'))"});
        tables.put("inv.b", new String[] {"id::text || '|' || s", "concat(toString(id), '|', s)"});
        String flow = "inv-flow";
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> config = onOtherCluster(sourceConfig("inv", "inv_pub"));
        config.put("tasks.max", "2");
        config.put("table.sync.copy", "all");
        config.put("slot.failover", "true");
        Map<String, String> recreate = new HashMap<>(config);
        recreate.put("invalidated.slot.behavior", "recreate");
        Map<String, String> notCopied = new HashMap<>(recreate);
        notCopied.put("table.sync.copy", "none");
        String refusedConfig = String.join("; ", ConnectRestClient.validationErrors(rest.validate(SOURCE, notCopied)));
        assertTrue(refusedConfig.contains("invalidated.slot.behavior=recreate copies every table again"), refusedConfig);

        rest.putConfig("inv-sink", sinkConfig("inv"));
        rest.putConfig(flow, config);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        for (String table : tables.keySet()) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        otherPg.sql("UPDATE inv.a SET v = v + 1 WHERE id <= 100", "INSERT INTO inv.b VALUES (5001, 'streamed')");
        otherPg.awaitEqual(tables, Duration.ofSeconds(120));
        String lost = flowSlot(flow);
        assertEquals("true", slotState(otherPg, lost, "failover"), "slot.failover=true creates a failover slot");

        stopFlow(rest, flow, otherPg, "inv");
        // what the flow misses while stopped: only a copy brings it back once the slot is gone
        otherPg.sql("DELETE FROM inv.a WHERE id % 10 = 0",
                "UPDATE inv.b SET s = 'during the stop' WHERE id % 7 = 0",
                "INSERT INTO inv.a SELECT g, 1, 'during the stop' FROM generate_series(10001, 10500) g",
                "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'",
                "SELECT pg_reload_conf()");
        int rounds = 0;
        while (!"lost".equals(slotState(otherPg, lost, "wal_status"))) {
            assertTrue(++rounds <= 20, "the slot was never invalidated: " + slotState(otherPg, lost, "wal_status"));
            otherPg.sql("INSERT INTO inv.filler SELECT g, repeat(md5(g::text), 16) FROM generate_series(1, 20000) g",
                    "SELECT pg_switch_wal()",
                    "CHECKPOINT");
        }
        otherPg.sql("ALTER SYSTEM RESET max_slot_wal_keep_size", "SELECT pg_reload_conf()");
        System.out.printf("pg resilience: slot %s lost after %d rounds of 20000 filler rows%n", lost, rounds);

        String message = refused(rest, flow, "inv", config, "its replication slot " + lost,
                "was invalidated by the server", "raise max_slot_wal_keep_size", "invalidated.slot.behavior=recreate");
        assertTrue(message.contains("ALTER SYSTEM SET max_slot_wal_keep_size"), message);

        stopFlow(rest, flow, otherPg, "inv");
        rest.putConfig(flow, recreate);
        rest.resume(flow);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        awaitTrue(() -> !lost.equals(flowSlot(flow)), Duration.ofSeconds(60), "the slot was never replaced");
        String fresh = flowSlot(flow);
        for (String table : tables.keySet()) {
            Map<String, String> row = pg.awaitTable(flow, table, r -> "ready".equals(r.get("phase")), Duration.ofSeconds(120));
            assertEquals("1", row.get("copy_attempt"), table + " was copied again once: " + row);
        }
        otherPg.sql("UPDATE inv.a SET v = v + 1 WHERE id <= 50", "INSERT INTO inv.b VALUES (5002, 'after')");
        otherPg.awaitEqual(tables, Duration.ofSeconds(180));
        assertEquals("true", slotState(otherPg, fresh, "failover"), "the new slot is a failover slot too");
        assertEquals(null, slotState(otherPg, lost, "wal_status"), "the lost slot was dropped");
        System.out.printf("pg resilience: slot %s recreated as %s; both tables copied again; ClickHouse equals"
                + " Postgres%n", lost, fresh);
        rest.delete(flow);
        rest.delete("inv-sink");
    }

    /**
     * One table's copy keeps failing (a key value the converter cannot represent: a numeric key of 'NaN' becomes null): it
     * ends errored after max.table.retries with its reason and a hint, while the other tables are copied and stream;
     * once the value is fixed, the documented reset copies it.
     */
    @Test
    void aTableWhoseCopyFailsEndsErroredWhileTheOthersStream() throws Exception {
        pg.sql("DROP PUBLICATION IF EXISTS rsc_pub",
                "DROP SCHEMA IF EXISTS rsc CASCADE",
                "CREATE SCHEMA rsc",
                "CREATE TABLE rsc.good (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO rsc.good SELECT g, 'g' || g FROM generate_series(1, 3000) g",
                "CREATE TABLE rsc.other (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO rsc.other SELECT g, 'o' || g FROM generate_series(1, 1000) g",
                "CREATE TABLE rsc.bad (d numeric(10, 0) PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO rsc.bad VALUES (20240101, 'fine'), ('NaN', 'rejected')",
                "CREATE PUBLICATION rsc_pub FOR TABLE rsc.good, rsc.other, rsc.bad");
        Map<String, String[]> healthy = new LinkedHashMap<>();
        healthy.put("rsc.good", new String[] {"id::text || '|' || v", "concat(toString(id), '|', v)"});
        healthy.put("rsc.other", new String[] {"id::text || '|' || v", "concat(toString(id), '|', v)"});
        String flow = "rsc-flow";
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> config = sourceConfig("rsc", "rsc_pub");
        config.put("tasks.max", "3");
        config.put("table.sync.copy", "all");
        config.put("max.table.retries", "1");
        config.put("table.retry.delay.ms", "500");
        rest.putConfig("rsc-sink", sinkConfig("rsc"));
        rest.putConfig(flow, config);
        rest.awaitRunning(flow, 3, Duration.ofSeconds(90));

        Map<String, String> bad = pg.awaitTable(flow, "rsc.bad", row -> "errored".equals(row.get("phase"))
                && "2".equals(row.get("copy_attempt")), Duration.ofSeconds(120));
        String error = bad.get("last_error");
        assertTrue(error.startsWith("copy attempt 2 failed: "), error);
        assertTrue(error.contains("key column d is null"), error);
        assertTrue(error.contains("no retries left (max.table.retries=1)") && error.contains("tablecdc-reset-table"), error);
        for (String table : healthy.keySet()) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        pg.sql("INSERT INTO rsc.good VALUES (5000, 'streamed')", "UPDATE rsc.other SET v = 'streamed' WHERE id <= 10",
                "INSERT INTO rsc.bad VALUES (20240102, 'skipped while errored')");
        pg.awaitEqual(healthy, Duration.ofSeconds(120));
        Thread.sleep(1_500);
        Map<String, String> still = pg.table(flow, "rsc.bad");
        assertEquals("errored", still.get("phase"), "no retry after the last one: " + still);
        assertEquals("2", still.get("copy_attempt"), still.toString());
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING", "RUNNING"), rest.states(flow),
                "one table's failure fails no task");
        System.out.printf("pg resilience: rsc.bad errored after 2 attempts (%s) while two tables copied and stream%n",
                error);

        // the manual retry: fix the value, reset the table; it is copied from scratch
        pg.sql("UPDATE rsc.bad SET d = 20300101 WHERE d = 'NaN'");
        String reset = StatusScript.resetTable(stack, catalogUrl, flow, "rsc.bad");
        assertTrue(reset.contains("errored -> errored (reset)"), reset);
        pg.awaitTable(flow, "rsc.bad", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        Map<String, String[]> all = new LinkedHashMap<>(healthy);
        all.put("rsc.bad", new String[] {"d::text || '|' || v", "concat(toString(d), '|', v)"});
        pg.sql("INSERT INTO rsc.bad VALUES (20240103, 'after the reset')");
        pg.awaitEqual(all, Duration.ofSeconds(120));
        assertFalse(pg.table(flow, "rsc.bad").get("phase").equals("errored"));
        assertNotEquals(null, pg.table(flow, "rsc.good").get("phase_lsn"));
        rest.delete(flow);
        rest.delete("rsc-sink");
    }
}
