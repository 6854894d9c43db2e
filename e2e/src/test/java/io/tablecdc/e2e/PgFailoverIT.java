package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
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

import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.faults.FaultProxy;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;

/**
 * A failover of the source with {@code slot.failover=true} on PostgreSQL 17: a primary and a standby (a base backup
 * taken with {@code pg_backup_start}/{@code pg_backup_stop}, physical streaming through a physical slot,
 * {@code sync_replication_slots=on}), a flow streaming from the primary, the standby promoted and the primary shut
 * down, the flow pointed at the new primary: it resumes on the new timeline from the synchronized slot and ClickHouse
 * equals Postgres, rows written around the promotion included.
 */
class PgFailoverIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String SOURCE = "io.tablecdc.pg.PgPipelineSourceConnector";
    private static final String DATABASE = "fo_source";
    private static final String PHYSICAL_SLOT = "fo_standby";

    private static String url(int port, String database) {
        return "jdbc:postgresql://127.0.0.1:" + port + "/" + database;
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

    private static void sql(int port, String database, String... statements) throws SQLException {
        try (Connection c = DriverManager.getConnection(url(port, database), "postgres", "");
             Statement s = c.createStatement()) {
            for (String statement : statements) {
                s.execute(statement);
            }
        }
    }

    /** The settings both servers share; a hot standby needs at least the primary's limits. */
    private static final Map<String, String> SETTINGS = new LinkedHashMap<>();

    static {
        SETTINGS.put("listen_addresses", "127.0.0.1");
        SETTINGS.put("wal_level", "logical");
        SETTINGS.put("max_replication_slots", "20");
        SETTINGS.put("max_wal_senders", "20");
        SETTINGS.put("max_connections", "100");
        SETTINGS.put("hot_standby", "on");
        SETTINGS.put("fsync", "off");
    }

    /**
     * The directory of the running primary's binaries: zonky extracts them once per JVM (not necessarily under this
     * test's directory), and the server writes its own command line into {@code postmaster.opts}.
     */
    private static Path binDirectory(Path primaryData) throws IOException {
        String opts = Files.readString(primaryData.resolve("postmaster.opts"), StandardCharsets.UTF_8).trim();
        String postgres = opts.startsWith("\"") ? opts.substring(1, opts.indexOf('"', 1)) : opts.split("\\s+")[0];
        return Path.of(postgres).getParent();
    }

    /**
     * Copies the primary's data directory inside pg_backup_start/stop: files that change meanwhile are made
     * consistent by the WAL the standby replays from the backup's start (kept by its physical slot).
     */
    private static void baseBackup(int primaryPort, Path primaryData, Path standbyData) throws Exception {
        try (Connection c = DriverManager.getConnection(url(primaryPort, "postgres"), "postgres", "")) {
            query(c, "SELECT CAST(pg_backup_start('tablecdc failover test', true) AS text)");
            Files.walkFileTree(primaryData, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) throws IOException {
                    Path target = standbyData.resolve(primaryData.relativize(dir).toString());
                    Files.createDirectories(target);
                    String name = primaryData.relativize(dir).toString();
                    // WAL comes by streaming; the primary's slots are not the standby's
                    if (name.equals("pg_wal") || name.equals("pg_replslot") || name.equals("pg_stat_tmp")) {
                        if (name.equals("pg_wal")) {
                            Files.createDirectories(target.resolve("archive_status"));
                        }
                        return FileVisitResult.SKIP_SUBTREE;
                    }
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                    String name = file.getFileName().toString();
                    if (name.equals("postmaster.pid") || name.equals("postmaster.opts")) {
                        return FileVisitResult.CONTINUE;
                    }
                    try {
                        Files.copy(file, standbyData.resolve(primaryData.relativize(file).toString()),
                                StandardCopyOption.REPLACE_EXISTING);
                    } catch (NoSuchFileException e) {
                        // a file removed while copying; the WAL replay does not need it
                    }
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFileFailed(Path file, IOException e) {
                    return FileVisitResult.CONTINUE;
                }
            });
            String label = query(c, "SELECT labelfile FROM pg_backup_stop(true)");
            Files.writeString(standbyData.resolve("backup_label"), label, StandardCharsets.UTF_8);
        }
        Files.setPosixFilePermissions(standbyData, PosixFilePermissions.fromString("rwx------"));
    }

    private static Process pgCtl(Path bin, Path log, String... args) throws IOException {
        List<String> command = new ArrayList<>();
        if ("root".equals(System.getProperty("user.name"))) {
            // pg_ctl refuses root; as zonky does for the primary, run it in a user namespace, as an unprivileged user
            command.addAll(List.of("unshare", "-U"));
        }
        command.add(bin.resolve("pg_ctl").toString());
        command.addAll(List.of(args));
        return new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
    }

    @Test
    void aPromotedStandbyResumesTheFlowFromItsFailoverSlot() throws Exception {
        failover(false);
    }

    /**
     * Issue 35 item 1: the standby promoted while the flow runs, behind an address that follows the primary (a proxy
     * retargeted to the standby), with no connector restart. The apply task accepts the new timeline on its reconnect;
     * it used to skip the failover recovery there (only a start ran it), so the table handed over at a marker past the
     * switch point stayed at it and its changes on the new timeline before the marker were dropped.
     */
    @Test
    void aStandbyPromotedWhileTheFlowRunsGetsTheFailoverRecovery() throws Exception {
        failover(true);
    }

    private void failover(boolean whileRunning) throws Exception {
        String catalogUrl = stack.postgres().createDatabase(whileRunning ? "fo_running_catalog" : "fo_catalog");
        Client clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl())
                .setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                .compressServerResponse(false).build();
        Path work = StackPaths.workDir(whileRunning ? "failover-running-postgres" : "failover-postgres");
        Path primaryData = work.resolve("primary");
        Path standbyData = work.resolve("standby");
        Path log = work.resolve("postgres.log");
        EmbeddedPostgres.Builder builder = EmbeddedPostgres.builder()
                .setOverrideWorkingDirectory(work.resolve("binaries").toFile())
                .setDataDirectory(primaryData)
                .setCleanDataDirectory(true)
                .setPort(StackPaths.freePort())
                .setPGStartupWait(Duration.ofSeconds(60))
                .setOutputRedirector(ProcessBuilder.Redirect.appendTo(log.toFile()))
                .setErrorRedirector(ProcessBuilder.Redirect.appendTo(log.toFile()));
        SETTINGS.forEach(builder::setServerConfig);
        EmbeddedPostgres primary = builder.start();
        int primaryPort = primary.getPort();
        int standbyPort = StackPaths.freePort();
        Path bin = binDirectory(primaryData);
        boolean standbyStarted = false;
        boolean primaryClosed = false;
        String flow = whileRunning ? "fo-running-flow" : "fo-flow";
        ConnectRestClient rest = stack.connect().rest();
        FaultProxy address = whileRunning ? FaultProxy.start("fo-primary", "127.0.0.1", primaryPort) : null;
        try {
            sql(primaryPort, "postgres", "CREATE DATABASE " + DATABASE,
                    "SELECT pg_create_physical_replication_slot('" + PHYSICAL_SLOT + "', true)",
                    // logical changes reach the flow only once the standby has their WAL
                    "ALTER SYSTEM SET synchronized_standby_slots = '" + PHYSICAL_SLOT + "'",
                    "SELECT pg_reload_conf()");
            sql(primaryPort, DATABASE, "CREATE SCHEMA fo",
                    "CREATE TABLE fo.t (id int PRIMARY KEY, v int NOT NULL)",
                    "INSERT INTO fo.t SELECT g, 0 FROM generate_series(1, 1000) g",
                    "CREATE TABLE fo.u (id int PRIMARY KEY, v int NOT NULL)",
                    "INSERT INTO fo.u SELECT g, 0 FROM generate_series(1, 1000) g",
                    "CREATE PUBLICATION fo_pub FOR TABLE fo.t, fo.u");

            baseBackup(primaryPort, primaryData, standbyData);
            StringBuilder conf = new StringBuilder("\n# standby of the failover test\n");
            SETTINGS.forEach((k, v) -> conf.append(k).append(" = '").append(v).append("'\n"));
            conf.append("port = ").append(standbyPort).append('\n')
                    .append("primary_conninfo = 'host=127.0.0.1 port=").append(primaryPort)
                    .append(" user=postgres dbname=").append(DATABASE).append(" application_name=fo_standby'\n")
                    .append("primary_slot_name = '").append(PHYSICAL_SLOT).append("'\n")
                    .append("hot_standby_feedback = on\n")
                    .append("sync_replication_slots = on\n")
                    .append("synchronized_standby_slots = ''\n");
            Files.writeString(standbyData.resolve("postgresql.auto.conf"), conf, StandardCharsets.UTF_8,
                    StandardOpenOption.APPEND);
            Files.writeString(standbyData.resolve("standby.signal"), "");
            Process start = pgCtl(bin, log, "-D", standbyData.toString(), "-w", "-t", "120", "start");
            assertTrue(start.waitFor(150, TimeUnit.SECONDS) && start.exitValue() == 0, "the standby did not start; see " + log);
            standbyStarted = true;
            awaitTrue(() -> {
                try (Connection c = DriverManager.getConnection(url(standbyPort, DATABASE), "postgres", "")) {
                    return "true".equals(query(c, "SELECT CAST(pg_is_in_recovery() AS text)"));
                } catch (SQLException e) {
                    return false;
                }
            }, Duration.ofSeconds(60), "the standby never accepted connections");

            PgChecks onPrimary = new PgChecks(stack, () -> DriverManager.getConnection(url(primaryPort, DATABASE),
                    "postgres", ""), catalogUrl, clickhouse);
            PgChecks onStandby = new PgChecks(stack, () -> DriverManager.getConnection(url(standbyPort, DATABASE),
                    "postgres", ""), catalogUrl, clickhouse);
            Map<String, String[]> tables = Map.of("fo.t", new String[] {"id::text || '|' || v::text",
                "concat(toString(id), '|', toString(v))"}, "fo.u", new String[] {"id::text || '|' || v::text",
                "concat(toString(id), '|', toString(v))"});
            Map<String, String> source = new HashMap<>();
            source.put("connector.class", SOURCE);
            source.put("tasks.max", "2");
            source.put("database.host", "127.0.0.1");
            source.put("database.port", Integer.toString(whileRunning ? address.port() : primaryPort));
            source.put("database.dbname", DATABASE);
            source.put("database.user", "postgres");
            source.put("database.password", "");
            source.put("database.sslmode", "disable");
            source.put("publication.name", "fo_pub");
            source.put("slot.prefix", "fo");
            source.put("slot.failover", "true");
            source.put("table.sync.copy", "all");
            source.put("topic.prefix", "fo");
            source.put("heartbeat.interval.ms", "500");
            source.put("topic.creation.default.partitions", "1");
            source.put("topic.creation.default.replication.factor", "1");
            source.put("catalog.jdbc.url", catalogUrl);
            source.put("catalog.user", stack.postgres().user());
            source.put("catalog.password", stack.postgres().password());
            Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, "fo-stage");
            sink.put("topics.regex", "fo\\..*");
            sink.put("normalize.backoff.initial.ms", "500");
            sink.put("normalize.backoff.max.ms", "2000");
            // the flow's topics appear after the sink subscribed
            sink.put("consumer.override.metadata.max.age.ms", "1000");
            rest.putConfig("fo-sink", sink);
            rest.putConfig(flow, source);
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            onPrimary.awaitTable(flow, "fo.t", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            onPrimary.awaitTable(flow, "fo.u", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            onPrimary.sql("UPDATE fo.t SET v = 1 WHERE id <= 500", "INSERT INTO fo.t SELECT g, 1 FROM generate_series(1001, 1500) g");
            onPrimary.awaitEqual(tables, Duration.ofSeconds(120));

            String slot;
            try (Connection c = onPrimary.catalog()) {
                slot = query(c, "SELECT source_slot FROM cdc_flow WHERE flow_name = ?", flow);
            }
            // the standby's slot sync worker copies the failover slot once the primary's slot has moved past the
            // standby's own horizon; changes keep it moving
            int round = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (true) {
                String synced;
                try (Connection c = onStandby.source()) {
                    synced = query(c, "SELECT CAST(synced AND NOT temporary AS text) FROM pg_replication_slots"
                            + " WHERE slot_name = ?", slot);
                }
                if ("true".equals(synced)) {
                    break;
                }
                assertTrue(System.nanoTime() < deadline, "the standby never synchronized slot " + slot + " (" + synced + ")");
                onPrimary.sql("UPDATE fo.t SET v = v + 1 WHERE id = " + (++round % 1500 + 1));
                Thread.sleep(1_000);
            }
            // rows written after the sync, some perhaps not yet read by the flow when the primary goes
            onPrimary.sql("INSERT INTO fo.t SELECT g, 2 FROM generate_series(1501, 1700) g", "DELETE FROM fo.t WHERE id % 50 = 0");
            String primaryEnd;
            try (Connection c = onPrimary.source()) {
                primaryEnd = query(c, "SELECT CAST(pg_current_wal_lsn() AS text)");
            }
            awaitTrue(() -> {
                try (Connection c = onStandby.source()) {
                    return "true".equals(query(c, "SELECT CAST(pg_last_wal_replay_lsn() >= CAST(? AS pg_lsn) AS text)",
                            primaryEnd));
                }
            }, Duration.ofSeconds(60), "the standby never replayed the primary's WAL");

            // a handover the standby never receives: the standby stops receiving WAL (its switch point S will be
            // here), then fo.u changes on the primary alone and is copied again; the copy's temporary slot is not a
            // failover slot, so it reads past S and hands fo.u over at a marker m > S
            onStandby.sql("ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_reload_conf()");
            awaitTrue(() -> {
                try (Connection c = onStandby.source()) {
                    return "0".equals(query(c, "SELECT CAST(count(*) AS text) FROM pg_stat_wal_receiver"));
                }
            }, Duration.ofSeconds(60), "the standby kept receiving WAL");
            String received;
            try (Connection c = onStandby.source()) {
                received = query(c, "SELECT CAST(pg_last_wal_receive_lsn() AS text)");
            }
            onPrimary.sql("INSERT INTO fo.u SELECT g, 9 FROM generate_series(1001, 3000) g", "DELETE FROM fo.u WHERE id <= 100");
            try (Connection c = onPrimary.catalog()) {
                // what tablecdc-reset-table does: the table is copied again at once
                query(c, "UPDATE cdc_table_replication_state SET phase = 'errored', phase_lsn = NULL,"
                        + " next_retry_at = now(), last_error = 'copied again by the test' WHERE flow_name = ?"
                        + " AND source_table_identifier = 'fo.u' RETURNING phase", flow);
            }
            Map<String, String> handedOver = onPrimary.awaitTable(flow, "fo.u", row -> "catchup".equals(row.get("phase")),
                    Duration.ofSeconds(120));
            try (Connection c = onPrimary.source()) {
                assertEquals("true", query(c, "SELECT CAST(CAST(? AS pg_lsn) > CAST(? AS pg_lsn) AS text)",
                        handedOver.get("phase_lsn"), received), "the handover " + handedOver + " lies past " + received);
            }
            String attemptBefore = handedOver.get("copy_attempt");

            if (whileRunning) {
                // the primary dies under the running flow; its address follows the promoted standby
                primary.close();
                primaryClosed = true;
                onStandby.sql("SELECT pg_promote(true, 60)");
                address.retarget("127.0.0.1", standbyPort);
            } else {
                rest.stop(flow);
                rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText()),
                        Duration.ofSeconds(60));
                primary.close();
                primaryClosed = true;
                onStandby.sql("SELECT pg_promote(true, 60)");
            }
            onStandby.sql("INSERT INTO fo.t SELECT g, 3 FROM generate_series(1701, 1800) g", "UPDATE fo.t SET v = 4 WHERE id <= 10");
            // changes of fo.u on the new timeline, committed between S and m: the old handover would drop them
            onStandby.sql("INSERT INTO fo.u SELECT g, 5 FROM generate_series(5001, 5100) g", "UPDATE fo.u SET v = 6 WHERE id <= 200");

            if (!whileRunning) {
                Map<String, String> moved = new HashMap<>(source);
                moved.put("database.port", Integer.toString(standbyPort));
                rest.putConfig(flow, moved);
                rest.resume(flow);
            }
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            onStandby.awaitEqual(tables, Duration.ofSeconds(180));
            Map<String, String> recopied = onStandby.table(flow, "fo.u");
            assertTrue(Integer.parseInt(recopied.get("copy_attempt")) > Integer.parseInt(attemptBefore),
                    "fo.u was copied again on the new timeline: " + recopied);
            try (Connection c = onStandby.catalog()) {
                assertEquals("2", query(c, "SELECT CAST(source_timeline AS text) FROM cdc_flow WHERE flow_name = ?", flow),
                        "the flow now records the new timeline");
                assertEquals(slot, query(c, "SELECT source_slot FROM cdc_flow WHERE flow_name = ?", flow),
                        "the same (synchronized) slot");
            }
            System.out.printf("pg failover%s: flow resumed on timeline 2 of the promoted standby from failover slot %s;"
                    + " ClickHouse equals Postgres%n", whileRunning ? " while running" : "", slot);
            rest.delete(flow);
            rest.delete("fo-sink");
        } finally {
            if (address != null) {
                address.close();
            }
            if (standbyStarted) {
                Process stop = pgCtl(bin, log, "-D", standbyData.toString(), "-m", "fast", "-w", "stop");
                stop.waitFor(60, TimeUnit.SECONDS);
            }
            if (!primaryClosed) {
                primary.close();
            }
        }
    }
}
