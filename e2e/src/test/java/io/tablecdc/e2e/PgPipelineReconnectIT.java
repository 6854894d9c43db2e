package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.fasterxml.jackson.databind.JsonNode;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;

/**
 * The Postgres pipeline while its source goes away and comes back, end to end: a PostgreSQL restart while the flow
 * streams (rows written before, right after the restart and after the task reconnected all arrive, none twice); the
 * resume-safety checks on every reconnect (another cluster behind the same address after an outage is refused like at
 * start); the flow's slot invalidated or dropped while the connector runs (the same treatment as at start); table,
 * database and publication names that are not valid topic names or need quoting.
 *
 * <p>The source is a PostgreSQL 17 cluster of this class's own, stopped and started with {@code pg_ctl} at known
 * moments; the catalog stays on the stack's Postgres.
 */
class PgPipelineReconnectIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String SOURCE = "io.tablecdc.pg.PgPipelineSourceConnector";
    private static final String DATABASE = "rc_source";

    private static Path work;
    private static Path data;
    private static Path log;
    private static Path bin;
    private static String serverOptions;
    private static int port;
    private static EmbeddedPostgres server;
    private static String catalogUrl;
    private static Client clickhouse;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase("rc_catalog");
        clickhouse = stack.clickhouse().client();
        work = StackPaths.workDir("reconnect-postgres");
        data = work.resolve("data");
        log = work.resolve("postgres.log");
        port = StackPaths.freePort();
        server = cluster(work.resolve("binaries"), data, port);
        String opts = Files.readString(data.resolve("postmaster.opts"), StandardCharsets.UTF_8).trim();
        String postgres = opts.startsWith("\"") ? opts.substring(1, opts.indexOf('"', 1)) : opts.split("\\s+")[0];
        bin = Path.of(postgres).getParent();
        // what zonky passed on the command line (port, settings), for pg_ctl start
        serverOptions = opts.substring(opts.indexOf(postgres) + postgres.length() + (opts.startsWith("\"") ? 1 : 0)).trim();
        sql("postgres", "CREATE DATABASE " + DATABASE);
        pg = new PgChecks(stack, () -> DriverManager.getConnection(url(DATABASE), "postgres", ""), catalogUrl, clickhouse);
    }

    private static EmbeddedPostgres cluster(Path binaries, Path dataDir, int onPort) throws IOException {
        return EmbeddedPostgres.builder()
                .setOverrideWorkingDirectory(binaries.toFile())
                .setDataDirectory(dataDir)
                .setCleanDataDirectory(true)
                .setPort(onPort)
                .setPGStartupWait(Duration.ofSeconds(60))
                .setServerConfig("listen_addresses", "127.0.0.1")
                .setServerConfig("wal_level", "logical")
                .setServerConfig("max_replication_slots", "20")
                .setServerConfig("max_wal_senders", "20")
                .setServerConfig("fsync", "off")
                .setOutputRedirector(ProcessBuilder.Redirect.appendTo(log.toFile()))
                .setErrorRedirector(ProcessBuilder.Redirect.appendTo(log.toFile()))
                .start();
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) {
            if (!running()) {
                startServer();
            }
            server.close();
        }
    }

    private static String url(String database) {
        return "jdbc:postgresql://127.0.0.1:" + port + "/" + database;
    }

    private static void sql(String database, String... statements) throws SQLException {
        try (Connection c = DriverManager.getConnection(url(database), "postgres", "");
             Statement s = c.createStatement()) {
            for (String statement : statements) {
                s.execute(statement);
            }
        }
    }

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

    private static int pgCtl(String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        if ("root".equals(System.getProperty("user.name"))) {
            // pg_ctl refuses root; as zonky does, run it in a user namespace, as an unprivileged user
            command.addAll(List.of("unshare", "-U"));
        }
        command.add(bin.resolve("pg_ctl").toString());
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
        assertTrue(p.waitFor(150, TimeUnit.SECONDS), "pg_ctl " + args[args.length - 1] + " hangs; see " + log);
        return p.exitValue();
    }

    private static void stopServer() throws Exception {
        assertEquals(0, pgCtl("-D", data.toString(), "-m", "fast", "-w", "-t", "120", "stop"),
                "pg_ctl stop failed; see " + log);
    }

    private static void startServer() throws Exception {
        assertEquals(0, pgCtl("-D", data.toString(), "-o", serverOptions, "-w", "-t", "120", "-l", log.toString(),
                "start"), "pg_ctl start failed; see " + log);
    }

    private static boolean running() {
        try (Connection c = DriverManager.getConnection(url("postgres"), "postgres", "")) {
            return c.isValid(5);
        } catch (SQLException e) {
            return false;
        }
    }

    private static Map<String, String> sourceConfig(String prefix, String publication) {
        Map<String, String> source = new HashMap<>();
        source.put("connector.class", SOURCE);
        source.put("tasks.max", "1");
        source.put("database.host", "127.0.0.1");
        source.put("database.port", Integer.toString(port));
        source.put("database.dbname", DATABASE);
        source.put("database.user", "postgres");
        source.put("database.password", "");
        source.put("database.sslmode", "disable");
        source.put("publication.name", publication);
        source.put("slot.prefix", prefix);
        source.put("topic.prefix", prefix);
        source.put("batch.rows", "500");
        source.put("heartbeat.interval.ms", "500");
        source.put("topic.creation.default.partitions", "1");
        source.put("topic.creation.default.replication.factor", "1");
        source.put("catalog.jdbc.url", catalogUrl);
        source.put("catalog.user", stack.postgres().user());
        source.put("catalog.password", stack.postgres().password());
        return source;
    }

    private static Map<String, String> sinkConfig(String prefix) {
        Map<String, String> config = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);
        return config;
    }

    /** The first 8 hex digits of {@code text}'s SHA-256, as the connector names a slot's private slots. */
    private static String sha256Hex8(String text) throws Exception {
        return java.util.HexFormat.of().formatHex(java.security.MessageDigest.getInstance("SHA-256")
                .digest(text.getBytes(StandardCharsets.UTF_8)), 0, 4);
    }

    private static String flowSlot(String flow) throws SQLException {
        try (Connection c = pg.catalog()) {
            return query(c, "SELECT source_slot FROM cdc_flow WHERE flow_name = ?", flow);
        }
    }

    private static boolean slotActive(String slot) throws SQLException {
        try (Connection c = pg.source()) {
            return "true".equals(query(c, "SELECT active::text FROM pg_replication_slots WHERE slot_name = ?", slot));
        }
    }

    /** Rows of a table in ClickHouse, FINAL and without it: every row once, and how many versions were loaded. */
    private static long clickHouseCount(String table, boolean fin) {
        String name = table.replaceAll("[^A-Za-z0-9_]", "_");
        return clickhouse.queryAll("SELECT count() AS n FROM " + name + (fin ? " FINAL WHERE _tablecdc_is_deleted = 0" : ""))
                .get(0).getLong("n");
    }

    /**
     * PostgreSQL stops (fast shutdown) while the flow streams and starts again: the apply task reconnects both its
     * connections, checks the source again, and carries on from the end of the last transaction it handed to Connect.
     * One table is REPLICA IDENTITY FULL, so its key is looked up over the task's SQL connection after the reconnect,
     * and the check for tables added to the publication runs over that connection too.
     */
    @Test
    void aPostgresRestartWhileTheFlowStreamsLosesNothing() throws Exception {
        sql(DATABASE, "DROP PUBLICATION IF EXISTS rs_pub",
                "DROP SCHEMA IF EXISTS rs CASCADE",
                "CREATE SCHEMA rs",
                "CREATE TABLE rs.plain (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE TABLE rs.ident (id int PRIMARY KEY, v int NOT NULL)",
                "ALTER TABLE rs.ident REPLICA IDENTITY FULL",
                "CREATE PUBLICATION rs_pub FOR TABLE rs.plain, rs.ident");
        Map<String, String[]> tables = new LinkedHashMap<>();
        tables.put("rs.plain", new String[] {"id::text || '|' || v", "concat(toString(id), '|', v)"});
        tables.put("rs.ident", new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        String flow = "rs-flow";
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("rs-sink", sinkConfig("rs"));
        rest.putConfig(flow, sourceConfig("rs", "rs_pub"));
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        pg.awaitTable(flow, "rs.plain", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(60));
        pg.awaitTable(flow, "rs.ident", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(60));
        String slot = flowSlot(flow);

        // before
        pg.sql("INSERT INTO rs.plain SELECT g, 'before' FROM generate_series(1, 1000) g",
                "INSERT INTO rs.ident SELECT g, 0 FROM generate_series(1, 1000) g");
        pg.awaitEqual(tables, Duration.ofSeconds(120));

        stopServer();
        // the task meets the outage: its stream breaks, its reconnects are refused for a while
        Thread.sleep(3_000);
        startServer();
        // during: written as soon as the server is back, before the task has necessarily reconnected
        pg.sql("INSERT INTO rs.plain SELECT g, 'during' FROM generate_series(1001, 2000) g",
                "INSERT INTO rs.ident SELECT g, 1 FROM generate_series(1001, 2000) g",
                "UPDATE rs.ident SET v = v + 10 WHERE id <= 300",
                "DELETE FROM rs.plain WHERE id % 10 = 0");
        awaitTrue(() -> slotActive(slot), Duration.ofSeconds(90), "the apply task never reconnected to slot " + slot);
        // after
        pg.sql("INSERT INTO rs.plain SELECT g, 'after' FROM generate_series(2001, 3000) g",
                "UPDATE rs.ident SET v = v + 100 WHERE id % 7 = 0",
                "DELETE FROM rs.ident WHERE id % 13 = 0");
        pg.awaitEqual(tables, Duration.ofSeconds(120));
        assertEquals(List.of("RUNNING", "RUNNING"), rest.states(flow), "the restart fails no task");
        for (String table : tables.keySet()) {
            long rows;
            try (Connection c = pg.source(); Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery("SELECT count(*) FROM " + table)) {
                rs.next();
                rows = rs.getLong(1);
            }
            assertEquals(rows, clickHouseCount(table, true), table + ": every row once");
        }
        System.out.printf("pg reconnect: PostgreSQL restarted under the flow; rows before, during and after the"
                + " restart arrived (%d and %d rows loaded for %d and %d rows)%n",
                clickHouseCount("rs.plain", false), clickHouseCount("rs.ident", false),
                clickHouseCount("rs.plain", true), clickHouseCount("rs.ident", true));
        rest.delete(flow);
        rest.delete("rs-sink");
    }

    /**
     * During an outage another cluster (another system identifier) appears behind the flow's address: the apply task's
     * reconnect runs the resume-safety checks of a start and fails with the same refusal, instead of streaming from it
     * or retrying forever.
     */
    @Test
    void anotherClusterBehindTheAddressAfterAnOutageIsRefused() throws Exception {
        sql(DATABASE, "DROP PUBLICATION IF EXISTS ro_pub",
                "DROP SCHEMA IF EXISTS ro CASCADE",
                "CREATE SCHEMA ro",
                "CREATE TABLE ro.t (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE PUBLICATION ro_pub FOR TABLE ro.t");
        String flow = "ro-flow";
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(flow, sourceConfig("ro", "ro_pub"));
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        pg.awaitTable(flow, "ro.t", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(60));
        pg.sql("INSERT INTO ro.t SELECT g, 'v' FROM generate_series(1, 100) g");
        String slot = flowSlot(flow);
        awaitTrue(() -> rest.offsets(flow).toString().contains("\"slot\""), Duration.ofSeconds(60),
                "the flow's position never reached Connect's offsets");

        stopServer();
        Path otherWork = StackPaths.workDir("reconnect-postgres-other");
        EmbeddedPostgres other = cluster(otherWork.resolve("binaries"), otherWork.resolve("data"), port);
        try {
            // the same database objects, so that only the cluster's identity differs
            sql("postgres", "CREATE DATABASE " + DATABASE);
            sql(DATABASE, "CREATE SCHEMA ro", "CREATE TABLE ro.t (id int PRIMARY KEY, v text NOT NULL)",
                    "CREATE PUBLICATION ro_pub FOR TABLE ro.t");
            JsonNode status = rest.awaitStatus(flow, s -> s.path("tasks").path(0).path("trace").asText()
                    .contains("is the cluster with system identifier"), Duration.ofSeconds(120));
            String trace = status.path("tasks").path(0).path("trace").asText();
            assertEquals("FAILED", status.path("tasks").path(0).path("state").asText());
            assertTrue(trace.contains("Point database.host and database.port back at that cluster"), trace);
            try (Connection c = DriverManager.getConnection(url(DATABASE), "postgres", "")) {
                assertEquals("0", query(c, "SELECT count(*)::text FROM pg_replication_slots"),
                        "nothing was created on the other cluster");
            }
            System.out.printf("pg reconnect: another cluster after an outage refused: %s%n",
                    trace.lines().filter(l -> l.contains("refuses to")).findFirst().orElse(trace));
        } finally {
            other.close();
        }
        startServer();
        // the original cluster back: a restart of the failed task resumes from its slot
        rest.restart(flow, true, true);
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        awaitTrue(() -> slotActive(slot), Duration.ofSeconds(60), "the flow did not resume from slot " + slot);
        rest.delete(flow);
    }

    private static String slotState(String slot, String column) throws SQLException {
        try (Connection c = pg.source()) {
            // the column name is one of this class's constants
            return query(c, "SELECT " + column + "::text FROM pg_replication_slots WHERE slot_name = ?", slot);
        }
    }

    /**
     * Makes the server invalidate {@code slot} while its walsender streams: a transaction that wrote and stays open
     * keeps the slot's restart_lsn where it is, max_slot_wal_keep_size is 1MB, and WAL is written and checkpointed
     * until the checkpointer terminates the walsender and marks the slot lost.
     */
    private static int invalidate(String slot) throws Exception {
        int rounds = 0;
        try (Connection pin = pg.source()) {
            pin.setAutoCommit(false);
            try (Statement s = pin.createStatement()) {
                s.execute("INSERT INTO iv.filler VALUES (0, 'holds the slot back')");
            }
            pg.sql("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'", "SELECT pg_reload_conf()");
            while (!"lost".equals(slotState(slot, "wal_status"))) {
                assertTrue(++rounds <= 30, "the slot was never invalidated: " + slotState(slot, "wal_status"));
                pg.sql("INSERT INTO iv.filler SELECT g, repeat(md5(g::text), 16) FROM generate_series(1, 20000) g",
                        "SELECT pg_switch_wal()",
                        "CHECKPOINT");
            }
            pin.rollback();
        } finally {
            pg.sql("ALTER SYSTEM RESET max_slot_wal_keep_size", "SELECT pg_reload_conf()");
        }
        return rounds;
    }

    /**
     * The server invalidates the flow's slot while the connector runs: with the default
     * invalidated.slot.behavior=reject the apply task fails with the advice (instead of retrying forever); with
     * recreate it replaces the slot without a restart, every table is copied again, and ClickHouse equals Postgres,
     * rows changed while the slot was being lost included.
     */
    @Test
    void aSlotInvalidatedWhileTheFlowRunsIsRefusedOrRecreated() throws Exception {
        sql(DATABASE, "DROP PUBLICATION IF EXISTS iv_pub",
                "DROP SCHEMA IF EXISTS iv CASCADE",
                "CREATE SCHEMA iv",
                "CREATE TABLE iv.a (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO iv.a SELECT g, 0 FROM generate_series(1, 3000) g",
                "CREATE TABLE iv.b (id int PRIMARY KEY, s text NOT NULL)",
                "INSERT INTO iv.b SELECT g, 's' || g FROM generate_series(1, 1000) g",
                "CREATE TABLE iv.filler (id int, pad text)",
                "CREATE PUBLICATION iv_pub FOR TABLE iv.a, iv.b");
        Map<String, String[]> tables = new LinkedHashMap<>();
        tables.put("iv.a", new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        tables.put("iv.b", new String[] {"id::text || '|' || s", "concat(toString(id), '|', s)"});
        String flow = "iv-flow";
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> config = sourceConfig("iv", "iv_pub");
        config.put("tasks.max", "2");
        config.put("table.sync.copy", "all");
        rest.putConfig("iv-sink", sinkConfig("iv"));
        rest.putConfig(flow, config);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        for (String table : tables.keySet()) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        pg.sql("UPDATE iv.a SET v = 1 WHERE id <= 100");
        pg.awaitEqual(tables, Duration.ofSeconds(120));

        // reject (the default): the task fails with the advice
        String first = flowSlot(flow);
        int rounds = invalidate(first);
        JsonNode status = rest.awaitStatus(flow, s -> s.path("tasks").path(0).path("trace").asText()
                .contains("was invalidated by the server"), Duration.ofSeconds(120));
        String trace = status.path("tasks").path(0).path("trace").asText();
        assertEquals("FAILED", status.path("tasks").path(0).path("state").asText());
        assertTrue(trace.contains("its replication slot " + first) && trace.contains("invalidated.slot.behavior=recreate")
                && trace.contains("max_slot_wal_keep_size"), trace);
        assertEquals(first, flowSlot(flow), "a refusal changes nothing");
        System.out.printf("pg reconnect: slot %s invalidated while running (%d rounds): refused%n", first, rounds);

        // a table detached from the lost slot (issue 35 item 8): its private slot, named after the lost slot, must not
        // outlive it; the replacement clears the table's detach and the slot checks look only at the new slot's
        String privateSlot = "iv_detach_" + sha256Hex8(first) + "_0fe56a";
        pg.sql("SELECT pg_create_logical_replication_slot('" + privateSlot + "', 'pgoutput')");
        try (Connection c = pg.catalog(); PreparedStatement ps = c.prepareStatement("UPDATE cdc_table_replication_state"
                + " SET detach_slot = ?, detach_lsn = '0/1', detached_at = now() WHERE flow_name = ?"
                + " AND source_table_identifier = 'iv.b' AND phase = 'ready'")) {
            ps.setString(1, privateSlot);
            ps.setString(2, flow);
            assertEquals(1, ps.executeUpdate());
        }

        // recreate: the start replaces the lost slot (as documented for a stopped flow) ...
        Map<String, String> recreate = new HashMap<>(config);
        recreate.put("invalidated.slot.behavior", "recreate");
        rest.putConfig(flow, recreate);
        rest.restart(flow, true, true);
        awaitTrue(() -> !first.equals(flowSlot(flow)), Duration.ofSeconds(90), "the slot was never replaced");
        String second = flowSlot(flow);
        for (String table : tables.keySet()) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        pg.sql("UPDATE iv.a SET v = 2 WHERE id <= 50");
        pg.awaitEqual(tables, Duration.ofSeconds(120));
        awaitTrue(() -> slotActive(second), Duration.ofSeconds(60), "the flow does not stream from " + second);
        assertEquals(null, slotState(privateSlot, "wal_status"), "the private slot of the lost slot was dropped");

        // ... and a slot lost while the task runs is replaced by the running task
        pg.sql("DELETE FROM iv.a WHERE id % 10 = 0", "UPDATE iv.b SET s = 'while lost' WHERE id % 7 = 0");
        rounds = invalidate(second);
        awaitTrue(() -> !second.equals(flowSlot(flow)), Duration.ofSeconds(90), "the running task never replaced " + second);
        String third = flowSlot(flow);
        for (String table : tables.keySet()) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        pg.sql("INSERT INTO iv.b VALUES (5000, 'after')", "UPDATE iv.a SET v = 3 WHERE id <= 20");
        pg.awaitEqual(tables, Duration.ofSeconds(180));
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), rest.states(flow), "no task failed");
        assertEquals(null, slotState(second, "wal_status"), "the lost slot was dropped");
        System.out.printf("pg reconnect: slot %s invalidated while running (%d rounds): replaced by %s, both tables"
                + " copied again; ClickHouse equals Postgres%n", second, rounds, third);
        rest.delete(flow);
        rest.delete("iv-sink");
    }

    /**
     * The flow's slot is dropped while the connector runs (its walsender terminated, the slot dropped before the task
     * reconnects): the task fails with the refusal of a slot that is gone, instead of retrying forever.
     */
    @Test
    void aSlotDroppedWhileTheFlowRunsIsRefused() throws Exception {
        sql(DATABASE, "DROP PUBLICATION IF EXISTS dr_pub",
                "DROP SCHEMA IF EXISTS dr CASCADE",
                "CREATE SCHEMA dr",
                "CREATE TABLE dr.t (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE PUBLICATION dr_pub FOR TABLE dr.t");
        String flow = "dr-flow";
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(flow, sourceConfig("dr", "dr_pub"));
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        pg.awaitTable(flow, "dr.t", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(60));
        pg.sql("INSERT INTO dr.t SELECT g, 'v' FROM generate_series(1, 100) g");
        String slot = flowSlot(flow);
        awaitTrue(() -> slotActive(slot), Duration.ofSeconds(60), "the flow never streamed from " + slot);
        int attempts = 0;
        while (slotState(slot, "slot_name") != null) {
            assertTrue(++attempts <= 200, "slot " + slot + " could not be dropped");
            try (Connection c = pg.source(); Statement s = c.createStatement()) {
                s.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '"
                        + slot + "' AND active_pid IS NOT NULL");
                s.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '"
                        + slot + "' AND NOT active");
            } catch (SQLException e) {
                // the walsender had not let go yet
            }
            Thread.sleep(50);
        }
        JsonNode status = rest.awaitStatus(flow, s -> s.path("tasks").path(0).path("trace").asText()
                .contains("does not exist"), Duration.ofSeconds(120));
        String trace = status.path("tasks").path(0).path("trace").asText();
        assertEquals("FAILED", status.path("tasks").path(0).path("state").asText());
        assertTrue(trace.contains("its replication slot " + slot + " (cdc_flow.source_slot) does not exist")
                && trace.contains("the apply task was streaming from it"), trace);
        System.out.printf("pg reconnect: slot dropped while running: %s%n",
                trace.lines().filter(l -> l.contains("refuses to")).findFirst().orElse(trace));
        rest.delete(flow);
    }

    /**
     * Table names that are not Kafka topic names (a space, quotes, a semicolon, a non-ASCII letter) in a database
     * whose name has a space and a non-ASCII letter, under a publication whose name has a quote: validate() accepts the
     * flow, the tables are copied and stream to their mapped topics, and ClickHouse (named after the tables, not the
     * topics) equals Postgres. Two tables whose topics Kafka would take for one are reported by validate().
     */
    @Test
    void tablesWhoseNamesAreNotTopicNamesStream() throws Exception {
        String database = "tn db?ü&x";
        sql("postgres", "DROP DATABASE IF EXISTS \"" + database + "\"", "CREATE DATABASE \"" + database + "\"");
        String dbUrl = "jdbc:postgresql://127.0.0.1:" + port + "/" + URLEncoder.encode(database, StandardCharsets.UTF_8);
        PgChecks tn = new PgChecks(stack, () -> DriverManager.getConnection(dbUrl, "postgres", ""), catalogUrl, clickhouse);
        List<String> names = List.of("my table", "it's \"quoted\"", "semi;colon", "bücher");
        List<String> statements = new ArrayList<>(List.of("CREATE SCHEMA tn"));
        for (String name : names) {
            String table = "tn." + quoteIdent(name);
            statements.add("CREATE TABLE " + table + " (id int PRIMARY KEY, v text NOT NULL)");
            statements.add("INSERT INTO " + table + " SELECT g, 'copied' FROM generate_series(1, 300) g");
        }
        statements.add("CREATE TABLE tn.\"x.y\" (id int PRIMARY KEY)");
        statements.add("CREATE TABLE tn.x_y (id int PRIMARY KEY)");
        statements.add("CREATE PUBLICATION \"tn's pub\" FOR TABLE " + String.join(", ",
                names.stream().map(n -> "tn." + quoteIdent(n)).toList()));
        statements.add("CREATE PUBLICATION tn_clash FOR TABLE tn.\"x.y\", tn.x_y");
        tn.sql(statements.toArray(new String[0]));

        String flow = "tn-flow";
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> config = sourceConfig("tn", "tn's pub");
        config.put("database.dbname", database);
        config.put("tasks.max", "2");
        config.put("table.sync.copy", "all");

        rest.putConfig("tn-sink", sinkConfig("tn"));
        rest.putConfig(flow, config);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        for (String name : names) {
            tn.awaitTable(flow, "tn." + name, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        for (String name : names) {
            String table = "tn." + quoteIdent(name);
            tn.sql("INSERT INTO " + table + " SELECT g, 'streamed' FROM generate_series(301, 400) g",
                    "UPDATE " + table + " SET v = 'updated' WHERE id <= 10", "DELETE FROM " + table + " WHERE id % 9 = 0");
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        Map<String, String> last = new HashMap<>();
        for (String name : names) {
            String clickHouseTable = ("tn." + name).replaceAll("[^A-Za-z0-9_]", "_");
            while (true) {
                List<String> expected = tn.postgresRows("tn." + quoteIdent(name), "id::text || '|' || v");
                List<String> actual = new ArrayList<>();
                try {
                    clickhouse.queryAll("SELECT concat(toString(id), '|', v) AS r FROM " + clickHouseTable
                            + " FINAL WHERE _tablecdc_is_deleted = 0").forEach(r -> actual.add(r.getString("r")));
                } catch (RuntimeException e) {
                    last.put(name, e.getMessage());
                }
                expected.sort(null);
                actual.sort(null);
                if (expected.equals(actual)) {
                    break;
                }
                last.put(name, expected.size() + " rows in Postgres, " + actual.size() + " in ClickHouse " + clickHouseTable);
                assertTrue(System.nanoTime() < deadline, "ClickHouse never equalled Postgres: " + last);
                Thread.sleep(500);
            }
        }
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), rest.states(flow));
        Map<String, String> named = new HashMap<>(config);
        named.put("name", flow);
        assertEquals(List.of(), ConnectRestClient.validationErrors(rest.validate(SOURCE, named)));
        Map<String, String> clash = new HashMap<>(named);
        clash.put("publication.name", "tn_clash");
        String clashErrors = String.join("; ", ConnectRestClient.validationErrors(rest.validate(SOURCE, clash)));
        assertTrue(clashErrors.contains("tn.x.y (topic tn.tn.x.y) and tn.x_y (topic tn.tn.x_y)")
                && clashErrors.contains("would write to the same Kafka topic"), clashErrors);
        System.out.printf("pg reconnect: %d tables named %s in database '%s', publication \"tn's pub\": copied and"
                + " streamed; ClickHouse equals Postgres%n", names.size(), names, database);
        rest.delete(flow);
        rest.delete("tn-sink");
    }

    private static String quoteIdent(String name) {
        return "\"" + name.replace("\"", "\"\"") + "\"";
    }

    private static String walsender(String slot, String column) throws SQLException {
        try (Connection c = pg.source()) {
            // the column name is one of this class's constants
            return query(c, "SELECT r." + column + "::text FROM pg_replication_slots s JOIN pg_stat_replication r"
                    + " ON r.pid = s.active_pid WHERE s.slot_name = ?", slot);
        }
    }

    /**
     * A table is held (its copy task wrote the handover marker, the apply task met it, and the copy task's move to
     * catchup is blocked at a known step: a trigger in the catalog waits on an advisory lock the test holds) while a
     * transaction of ~40 MB changes it. With hold.max.bytes=1MB the apply task stops reading in the middle of that
     * transaction (the server's walsender has not got past it), and although it reads nothing for 12 s with
     * wal_sender_timeout=3s the server keeps its connection (the same walsender throughout). Once the copy task hands
     * the table over, everything arrives.
     */
    @Test
    void heldChangesPauseReadingInsideATransactionAndKeepTheConnection() throws Exception {
        sql(DATABASE, "DROP PUBLICATION IF EXISTS hl_pub",
                "DROP SCHEMA IF EXISTS hl CASCADE",
                "CREATE SCHEMA hl",
                "CREATE TABLE hl.t (id int PRIMARY KEY, v int NOT NULL, pad text NOT NULL)",
                "INSERT INTO hl.t SELECT g, 0, 'copied' FROM generate_series(1, 2000) g",
                "CREATE TABLE hl.other (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE PUBLICATION hl_pub FOR TABLE hl.other");
        Map<String, String[]> tables = new LinkedHashMap<>();
        tables.put("hl.t", new String[] {"id::text || '|' || v::text || '|' || pad",
            "concat(toString(id), '|', toString(v), '|', pad)"});
        tables.put("hl.other", new String[] {"id::text || '|' || v", "concat(toString(id), '|', v)"});
        String flow = "hl-flow";
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> config = sourceConfig("hl", "hl_pub");
        config.put("tasks.max", "2");
        config.put("table.sync.copy", "only:hl.t");
        config.put("hold.max.bytes", "1048576");
        rest.putConfig("hl-sink", sinkConfig("hl"));
        rest.putConfig(flow, config);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        pg.awaitTable(flow, "hl.other", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(60));
        String slot = flowSlot(flow);
        try (Connection catalog = pg.catalog(); Statement s = catalog.createStatement()) {
            // the copy task's move of hl.t to catchup waits for the lock this session holds; a statement trigger, so
            // that it waits before the row is locked (the apply task records the marker on that row meanwhile)
            s.execute("CREATE OR REPLACE FUNCTION hl_block_catchup() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                    + " IF current_query() LIKE '%SET phase = ''catchup''%' THEN PERFORM pg_advisory_xact_lock(4242);"
                    + " END IF; RETURN NULL; END $$");
            s.execute("DROP TRIGGER IF EXISTS hl_block_catchup ON cdc_table_replication_state");
            s.execute("CREATE TRIGGER hl_block_catchup BEFORE UPDATE ON cdc_table_replication_state"
                    + " FOR EACH STATEMENT EXECUTE FUNCTION hl_block_catchup()");
            s.execute("SELECT pg_advisory_lock(4242)");
            pg.sql("ALTER SYSTEM SET wal_sender_timeout = '3s'", "SELECT pg_reload_conf()");
            try {
                pg.sql("ALTER PUBLICATION hl_pub ADD TABLE hl.t");
                // the apply task met the copy's marker: hl.t is held
                pg.awaitTable(flow, "hl.t", row -> "copying".equals(row.get("phase")) && row.get("phase_lsn") != null,
                        Duration.ofSeconds(120));
                awaitTrue(() -> walsender(slot, "pid") != null, Duration.ofSeconds(30), "no walsender for " + slot);
                String pid = walsender(slot, "pid");
                pg.sql("INSERT INTO hl.t SELECT g, 1, repeat('p', 200) FROM generate_series(10001, 160000) g");
                String bigEnd;
                try (Connection c = pg.source()) {
                    // the insert position: past the transaction's commit record (the write position may lag it)
                    bigEnd = query(c, "SELECT CAST(pg_current_wal_insert_lsn() AS text)");
                }
                pg.sql("INSERT INTO hl.other SELECT g, 'after the big one' FROM generate_series(1, 100) g");
                for (int i = 0; i < 24; i++) {
                    Thread.sleep(500);
                    String seen;
                    try (Connection c = pg.source()) {
                        seen = query(c, "SELECT concat_ws(' ', sent_lsn, a.wait_event, r.state) FROM pg_stat_replication r"
                                + " JOIN pg_stat_activity a USING (pid) WHERE r.pid = CAST(? AS int)", pid);
                    }
                    Map<String, String> row = pg.table(flow, "hl.t");
                    System.out.printf("pg reconnect: hold check %d: walsender %s, hl.t %s/%s, end %s%n", i, seen,
                            row.get("phase"), row.get("phase_lsn"), bigEnd);
                    assertEquals("copying", row.get("phase"), "the copy task is blocked before its handover");
                    assertEquals(pid, walsender(slot, "pid"), "the server kept the flow's connection");
                    try (Connection c = pg.source()) {
                        assertEquals("true", query(c, "SELECT CAST(sent_lsn < CAST(? AS pg_lsn) AS text)"
                                + " FROM pg_stat_replication WHERE pid = CAST(? AS int)", bigEnd, pid),
                                "reading paused inside the big transaction (its end is " + bigEnd + "): " + seen);
                    }
                }
                System.out.printf("pg reconnect: held table: reading paused inside a transaction ending at %s for 12 s"
                        + " (wal_sender_timeout 3s), walsender %s kept%n", bigEnd, pid);
            } finally {
                s.execute("SELECT pg_advisory_unlock(4242)");
                s.execute("DROP TRIGGER IF EXISTS hl_block_catchup ON cdc_table_replication_state");
                pg.sql("ALTER SYSTEM RESET wal_sender_timeout", "SELECT pg_reload_conf()");
            }
        }
        pg.awaitTable(flow, "hl.t", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        pg.sql("UPDATE hl.t SET v = 2 WHERE id <= 100");
        pg.awaitEqual(tables, Duration.ofSeconds(180));
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), rest.states(flow));
        rest.delete(flow);
        rest.delete("hl-sink");
    }
}
