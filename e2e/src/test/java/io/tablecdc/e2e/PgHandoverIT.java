package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.faults.Fault;
import io.tablecdc.e2e.faults.FaultInjector;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;

/**
 * The handover of a copied table to the apply task at its boundaries, end to end through the Connect REST API into
 * ClickHouse, against a PostgreSQL 17 cluster of this class's own (nothing else writes WAL there, so a commit the
 * test places right after the copy's handover marker is the very next WAL record).
 */
class PgHandoverIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "handover_source";
    private static final String ROWS = "id::text || '|' || v";
    private static final String CH_ROWS = "concat(toString(id), '|', v)";

    private static EmbeddedPostgres source;
    private static String catalogUrl;
    private static Client clickhouse;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase("handover_catalog");
        clickhouse = stack.clickhouse().client();
        Path work = StackPaths.workDir("handover-postgres");
        source = EmbeddedPostgres.builder()
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
                .setServerConfig("autovacuum", "off")
                .setOutputRedirector(ProcessBuilder.Redirect.appendTo(work.resolve("postgres.log").toFile()))
                .setErrorRedirector(ProcessBuilder.Redirect.appendTo(work.resolve("postgres.log").toFile()))
                .start();
        try (Connection c = DriverManager.getConnection(url("postgres"), "postgres", "");
             Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE " + DATABASE);
        }
        pg = new PgChecks(stack, PgHandoverIT::connect, catalogUrl, clickhouse);
    }

    @AfterAll
    static void stop() throws Exception {
        if (source != null) {
            source.close();
        }
    }

    private static String url(String database) {
        return "jdbc:postgresql://127.0.0.1:" + source.getPort() + "/" + database;
    }

    private static Connection connect() throws SQLException {
        return DriverManager.getConnection(url(DATABASE), "postgres", "");
    }

    private static Map<String, String> sourceConfig(String prefix, String publication) {
        Map<String, String> config = new HashMap<>(SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication,
                prefix));
        config.put("database.host", "127.0.0.1");
        config.put("database.port", Integer.toString(source.getPort()));
        config.put("database.user", "postgres");
        config.put("database.password", "");
        config.put("tasks.max", "2");
        config.put("table.sync.copy", "all");
        config.put("batch.rows", "1000");
        return config;
    }

    private static Map<String, String> sinkConfig(String prefix) {
        Map<String, String> config = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);
        return config;
    }

    private static String one(Connection c, String sql, String... params) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) {
                ps.setString(i + 1, params[i]);
            }
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : null;
            }
        }
    }

    /**
     * A transaction on the table, open while the copy catches up, commits right after the copy's handover marker: its
     * commit record starts where the marker's record ends, so its commit LSN equals the marker's LSN m. The copy stops
     * at the marker and does not send it; the apply task, holding the table from m until the copy's records are all in
     * Kafka, must keep it (cut-off: committed at or after m).
     *
     * <p>Each step is placed, not hoped for: (1) the copy task is held before its handover by a lock on its table's
     * catalog row (every copy records its acknowledged batches there before it writes the marker) while the
     * transaction inserts its row; (2) the transaction then waits in the server until the copy's control connection
     * has run {@code pg_logical_emit_message} and commits at once; (3) the copy's move to {@code catchup} waits on an
     * advisory lock the test holds (a statement trigger of this test in the catalog database) until a later
     * transaction on a streamed neighbour table is recorded as synced, which proves the apply task has read the
     * boundary transaction while it held the table.
     */
    @Test
    void aTransactionCommittedRightAfterTheMarkerIsStreamedByTheApplyTask() throws Exception {
        String flow = "handover-flow";
        String sink = "handover-sink";
        String table = "ho.boundary";
        pg.sql("CREATE SCHEMA ho",
                "CREATE TABLE ho.boundary (id int PRIMARY KEY, v text NOT NULL)",
                // enough rows that the copy is still busy when the test sees its slot
                "INSERT INTO ho.boundary SELECT g, 'r' || g FROM generate_series(1, 20000) g",
                "CREATE TABLE ho.probe (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE PUBLICATION ho_pub FOR TABLE ho.boundary, ho.probe");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(sink, sinkConfig("handover"));
        Map<String, String> config = sourceConfig("handover", "ho_pub");
        config.put("table.sync.copy", "only:ho.boundary");
        try (Connection watcher = connect(); Connection catalog = pg.catalog(); Connection gate = pg.catalog();
             Connection txn = connect()) {
            try (Statement s = gate.createStatement()) {
                s.execute("SELECT pg_advisory_lock(731001)");
            }
            rest.putConfig(flow, config);
            // the copy task has claimed the table once its (temporary) copy slot exists
            long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
            while (one(watcher, "SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE 'handover\\_copy\\_%'")
                    == null) {
                assertTrue(System.nanoTime() < deadline, "no copy slot appeared");
                Thread.sleep(2);
            }
            // (1) hold the copy before its handover: it cannot record its batches while this lock is held
            catalog.setAutoCommit(false);
            assertEquals("copying", one(catalog, "SELECT phase FROM cdc_table_replication_state WHERE flow_name = ?"
                    + " AND source_table_identifier = ? FOR UPDATE", flow, table));
            String emitted = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tablecdc " + flow
                    + " copy' AND query LIKE '%pg_logical_emit_message%'";
            assertEquals("0", one(watcher, emitted), "the copy wrote its marker before the test held it");
            try (Statement s = catalog.createStatement()) {
                // (3) the copy's move to catchup waits while the test holds the advisory lock (no row is locked yet
                // when a statement trigger runs, so the apply task's own writes never wait)
                s.execute("CREATE FUNCTION handover_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                        + " IF current_query() LIKE '%SET phase = ''catchup''%' THEN"
                        + " PERFORM pg_advisory_lock_shared(731001); PERFORM pg_advisory_unlock_shared(731001);"
                        + " END IF; RETURN NULL; END $$");
                s.execute("CREATE TRIGGER handover_gate BEFORE UPDATE ON cdc_table_replication_state"
                        + " FOR EACH STATEMENT EXECUTE FUNCTION handover_gate()");
            }
            txn.setAutoCommit(false);
            try (Statement s = txn.createStatement()) {
                s.execute("INSERT INTO ho.boundary VALUES (100001, 'committed right after the marker')");
            }
            catalog.commit();
            // (2) wait in the server for the marker, then commit: the commit record is the next WAL record
            try (Statement s = txn.createStatement()) {
                s.execute("DO $$ DECLARE until timestamptz := clock_timestamp() + interval '120 s'; BEGIN LOOP"
                        + " PERFORM pg_stat_clear_snapshot();"
                        + " EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'tablecdc "
                        + flow + " copy' AND state = 'idle' AND query LIKE '%pg_logical_emit_message%');"
                        + " IF clock_timestamp() > until THEN RAISE EXCEPTION 'no handover marker'; END IF;"
                        + " PERFORM pg_sleep(0.0002); END LOOP; END $$");
            }
            txn.commit();
            // the apply task met the marker and holds the table (the copy waits at its move to catchup) ...
            Map<String, String> held = pg.awaitTable(flow, table, row -> "copying".equals(row.get("phase"))
                    && row.get("phase_lsn") != null, Duration.ofSeconds(60));
            // ... and has read the boundary transaction: a later one of the neighbour table is synced
            pg.sql("INSERT INTO ho.probe VALUES (1, 'after the boundary')");
            pg.awaitTable(flow, "ho.probe", row -> Long.parseLong(row.get("synced_batch_id")) > 0, Duration.ofSeconds(60));
            assertEquals("copying", pg.table(flow, table).get("phase"));
            try (Statement s = gate.createStatement()) {
                s.execute("SELECT pg_advisory_unlock(731001)");
            }
            Map<String, String> state = pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")),
                    Duration.ofSeconds(90));
            assertEquals(held.get("phase_lsn"), state.get("phase_lsn"));
            pg.awaitEqual(Map.of(table, new String[] {ROWS, CH_ROWS}, "ho.probe", new String[] {ROWS, CH_ROWS}),
                    Duration.ofSeconds(60));
            // the scenario really was the boundary: the row's commit LSN (its version's high part) is the marker's
            String version = clickhouse.queryAll("SELECT toString(_tablecdc_version) AS v FROM ho_boundary FINAL"
                    + " WHERE id = 100001").get(0).getString("v");
            assertEquals(state.get("phase_lsn"), lsn(new BigInteger(version).shiftRight(48)),
                    "the transaction's commit LSN is the marker's");
        } finally {
            rest.delete(flow);
            rest.delete(sink);
        }
    }

    /**
     * The detach of a streamed table splits its transactions at the detach marker m exactly as a handover does, with
     * the sides swapped: the apply task keeps what committed before m, the table's private slot what committed at or
     * after it. Three transactions of the table are placed around the marker while its private slot exists: one
     * committed before the marker is written, one that commits right after it (its commit record starts where the
     * marker's record ends, so its commit LSN is m), and one that began before the marker and commits after it. The
     * detach is held at two points by Byteman in the worker process that runs the flow: once its slot is made and
     * before its marker, then once the marker is written (its connection stays idle with the marker's statement, which
     * the boundary transaction waits for in the server). ClickHouse refuses the table's rows until then, so it is
     * detached; once ClickHouse takes them again it rejoins, and ClickHouse equals Postgres: no transaction was lost by
     * both sides. The row committed at m carries m as its commit LSN.
     */
    @Test
    void aDetachMarkerSplitsTheTransactionsAroundItAsTheCutOffSays() throws Exception {
        String flow = "detach-boundary-flow";
        String sink = "detach-boundary-sink";
        String table = "db.stuck";
        pg.sql("CREATE SCHEMA db",
                "CREATE TABLE db.stuck (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE TABLE db.probe (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE PUBLICATION db_pub FOR TABLE db.stuck, db.probe");
        Fault beforeMarker = Fault.at("detach-slot-made", "io.tablecdc.pg.Detacher", "detach",
                "AT INVOKE emitHandover").hang(8_000);
        Fault afterMarker = Fault.at("detach-marker-written", "io.tablecdc.pg.Detacher", "detach",
                "AFTER INVOKE emitHandover").hang(8_000);
        FaultInjector injector = FaultInjector.of(StackPaths.workDir("detach-boundary/faults"), beforeMarker, afterMarker);
        Map<String, String> config = sourceConfig("detachb", "db_pub");
        config.put("table.sync.copy", "none");
        config.put("tasks.max", "1");
        config.put("max.unnormalized.batches", "2");
        config.put("detach.after.ms", "1000");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(sink, sinkConfig("detachb"));
        ConnectWorker worker = ConnectWorker.startProcess(ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                "detach-boundary-" + System.nanoTime(), stack.pluginPath()), StackPaths.workDir("detach-boundary/worker"),
                Duration.ofSeconds(120), injector.jvmArgs(ConnectWorker.TEST_JVM_ARGS.toArray(String[]::new)));
        try (Connection before = connect(); Connection exact = connect(); Connection spanning = connect()) {
            worker.rest().putConfig(flow, config);
            worker.rest().awaitRunning(flow, 1, Duration.ofSeconds(90));
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(90));
            pg.sql("INSERT INTO db.stuck VALUES (1, 'loaded')");
            awaitTrue(() -> clickhouse.queryAll("SELECT count() AS n FROM system.tables WHERE database = currentDatabase()"
                    + " AND name = 'db_stuck'").get(0).getLong("n") == 1
                    && clickhouse.queryAll("SELECT count() AS n FROM db_stuck").get(0).getLong("n") == 1,
                    Duration.ofSeconds(90), "db.stuck's first row never reached ClickHouse");
            clickhouse.execute("ALTER TABLE db_stuck ADD CONSTRAINT refuse CHECK id < 0").get().close();
            // three batches ClickHouse refuses: past max.unnormalized.batches, none loaded for detach.after.ms
            pg.batchEach(flow, table, "INSERT INTO db.stuck VALUES (2, 'refused')",
                    "INSERT INTO db.stuck VALUES (3, 'refused')", "INSERT INTO db.stuck VALUES (4, 'refused')");
            // (1) the private slot exists and is consistent; the marker is not written yet
            injector.awaitFired(beforeMarker, Duration.ofSeconds(90));
            before.setAutoCommit(false);
            exact.setAutoCommit(false);
            spanning.setAutoCommit(false);
            try (Statement s = before.createStatement()) {
                s.execute("INSERT INTO db.stuck VALUES (10, 'committed before the marker')");
            }
            before.commit();
            try (Statement s = exact.createStatement()) {
                s.execute("INSERT INTO db.stuck VALUES (11, 'committed right after the marker')");
            }
            try (Statement s = spanning.createStatement()) {
                s.execute("INSERT INTO db.stuck VALUES (12, 'begun before the marker')");
            }
            // (2) wait in the server for the marker, then commit: the commit record is the next WAL record
            try (Statement s = exact.createStatement()) {
                s.execute("DO $$ DECLARE until timestamptz := clock_timestamp() + interval '60 s'; BEGIN LOOP"
                        + " PERFORM pg_stat_clear_snapshot();"
                        + " EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'tablecdc "
                        + flow + " detach' AND state = 'idle' AND query LIKE '%pg_logical_emit_message%');"
                        + " IF clock_timestamp() > until THEN RAISE EXCEPTION 'no detach marker'; END IF;"
                        + " PERFORM pg_sleep(0.0002); END LOOP; END $$");
            }
            exact.commit();
            try (Statement s = spanning.createStatement()) {
                s.execute("INSERT INTO db.stuck VALUES (13, 'committed after the marker')");
            }
            spanning.commit();
            pg.sql("INSERT INTO db.probe VALUES (1, 'after the marker')");
            Map<String, String> lagging = pg.awaitTable(flow, table, row -> "lagging".equals(row.get("phase")),
                    Duration.ofSeconds(90));
            String marker = lagging.get("detach_lsn");
            assertEquals(marker, lagging.get("phase_lsn"));
            clickhouse.execute("ALTER TABLE db_stuck DROP CONSTRAINT refuse").get().close();
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")) && row.get("detach_slot") == null,
                    Duration.ofSeconds(120));
            pg.sql("INSERT INTO db.stuck VALUES (20, 'after the rejoin')");
            pg.awaitEqual(Map.of(table, new String[] {ROWS, CH_ROWS}, "db.probe", new String[] {ROWS, CH_ROWS}),
                    Duration.ofSeconds(90));
            Map<Integer, BigInteger> commitLsns = new HashMap<>();
            for (var row : clickhouse.queryAll("SELECT id, toString(_tablecdc_version) AS v FROM db_stuck FINAL"
                    + " WHERE id BETWEEN 10 AND 13")) {
                commitLsns.put(row.getInteger("id"), new BigInteger(row.getString("v")).shiftRight(48));
            }
            BigInteger m = new BigInteger(1, lsnBytes(marker));
            assertTrue(commitLsns.get(10).compareTo(m) < 0, "committed before the marker: " + commitLsns);
            assertEquals(marker, lsn(commitLsns.get(11)), "the boundary transaction's commit LSN is the marker's");
            assertTrue(commitLsns.get(12).compareTo(m) > 0 && commitLsns.get(12).equals(commitLsns.get(13)),
                    "the spanning transaction committed after the marker: " + commitLsns);
        } finally {
            worker.close();
            rest.delete(sink);
        }
    }

    private static byte[] lsnBytes(String lsn) {
        String[] parts = lsn.split("/");
        long value = (Long.parseLong(parts[0], 16) << 32) | Long.parseLong(parts[1], 16);
        return java.nio.ByteBuffer.allocate(8).putLong(value).array();
    }

    /**
     * Copying existing rows is the default, and works with Connect's default of one task: a flow configured with
     * neither {@code table.sync.copy} nor {@code tasks.max} copies every table (its one task applies and copies in
     * turn) while a writer changes them, hands each over and streams; ClickHouse equals Postgres.
     */
    @Test
    void aFlowWithOneTaskCopiesEveryTableByDefault() throws Exception {
        String flow = "onetask-flow";
        String sink = "onetask-sink";
        pg.sql("CREATE SCHEMA one",
                "CREATE TABLE one.a (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE TABLE one.b (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO one.a SELECT g, 'a' || g FROM generate_series(1, 3000) g",
                "INSERT INTO one.b SELECT g, 'b' || g FROM generate_series(1, 2000) g",
                "CREATE PUBLICATION one_pub FOR TABLE one.a, one.b");
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> config = sourceConfig("onetask", "one_pub");
        config.remove("table.sync.copy");
        config.remove("tasks.max");
        config.put("name", flow);
        assertEquals(java.util.List.of(), ConnectRestClient.validationErrors(rest.validate(SourceConfigs.PG_PIPELINE,
                config)));
        rest.putConfig(sink, sinkConfig("onetask"));
        try {
            rest.putConfig(flow, config);
            rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
            for (int i = 1; i <= 20; i++) {
                pg.transaction("UPDATE one.a SET v = 'u" + i + "' WHERE id = " + (i * 97),
                        "DELETE FROM one.b WHERE id = " + (i * 53),
                        "INSERT INTO one.a VALUES (" + (10_000 + i) + ", 'n" + i + "')");
            }
            for (String table : java.util.List.of("one.a", "one.b")) {
                Map<String, String> row = pg.awaitTable(flow, table, r -> "ready".equals(r.get("phase")),
                        Duration.ofSeconds(120));
                assertEquals("1", row.get("copy_attempt"), table + " copied once: " + row);
            }
            pg.sql("UPDATE one.b SET v = 'after' WHERE id = 1");
            pg.awaitEqual(Map.of("one.a", new String[] {ROWS, CH_ROWS}, "one.b", new String[] {ROWS, CH_ROWS}),
                    Duration.ofSeconds(90));
        } finally {
            rest.delete(flow);
            rest.delete(sink);
        }
    }

    /**
     * A table {@code table.sync.copy} excludes is never claimed by a copy task, also after an operator reset
     * ({@code tablecdc-reset-table} makes it errored with a retry time): the apply task streams it again from where
     * the flow is, and its copy attempts stay 0.
     */
    @Test
    void aResetTableThatIsNotCopiedStreamsAgainWithoutACopyTask() throws Exception {
        String flow = "reset-flow";
        String sink = "reset-sink";
        pg.sql("CREATE SCHEMA rs",
                "CREATE TABLE rs.a (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE TABLE rs.b (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO rs.a SELECT g, 'a' || g FROM generate_series(1, 100) g",
                "CREATE PUBLICATION rs_pub FOR TABLE rs.a, rs.b");
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> config = sourceConfig("reset", "rs_pub");
        config.put("table.sync.copy", "except:rs.b");
        rest.putConfig(sink, sinkConfig("reset"));
        try {
            rest.putConfig(flow, config);
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            pg.awaitTable(flow, "rs.a", r -> "ready".equals(r.get("phase")), Duration.ofSeconds(120));
            pg.awaitTable(flow, "rs.b", r -> "ready".equals(r.get("phase")), Duration.ofSeconds(60));
            pg.sql("INSERT INTO rs.b VALUES (1, 'before the reset')");
            pg.awaitEqual(Map.of("rs.b", new String[] {ROWS, CH_ROWS}), Duration.ofSeconds(60));
            try (Connection c = pg.catalog(); Statement s = c.createStatement()) {
                // what tablecdc-reset-table writes
                s.execute("UPDATE cdc_table_replication_state SET phase = 'errored', phase_lsn = NULL,"
                        + " last_error = 'reset by an operator', last_error_at = now(), next_retry_at = now()"
                        + " WHERE flow_name = '" + flow + "' AND source_table_identifier = 'rs.b'");
            }
            Map<String, String> again = pg.awaitTable(flow, "rs.b", r -> "ready".equals(r.get("phase")),
                    Duration.ofSeconds(60));
            assertEquals("0", again.get("copy_attempt"), "never claimed by a copy task: " + again);
            pg.sql("INSERT INTO rs.b VALUES (2, 'after the reset')");
            pg.awaitEqual(Map.of("rs.a", new String[] {ROWS, CH_ROWS}, "rs.b", new String[] {ROWS, CH_ROWS}),
                    Duration.ofSeconds(60));
            assertEquals("0", pg.table(flow, "rs.b").get("copy_attempt"));
        } finally {
            rest.delete(flow);
            rest.delete(sink);
        }
    }

    private static String lsn(BigInteger value) {
        long v = value.longValueExact();
        return Long.toHexString(v >>> 32).toUpperCase() + "/" + Long.toHexString(v & 0xFFFFFFFFL).toUpperCase();
    }
}
