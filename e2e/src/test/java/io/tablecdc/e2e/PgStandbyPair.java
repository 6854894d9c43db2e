package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
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
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import io.tablecdc.e2e.stack.StackPaths;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;

/**
 * A PostgreSQL 17 primary and a hot standby of it, for the failover tests: the standby is built from a base backup
 * taken with {@code pg_backup_start}/{@code pg_backup_stop}, streams through a physical slot, and synchronizes the
 * primary's failover slots ({@code sync_replication_slots=on}); the primary holds logical changes back until the
 * standby has their WAL ({@code synchronized_standby_slots}). Both listen on 127.0.0.1 as user {@code postgres}
 * without a password. {@link #close} stops whatever still runs.
 */
final class PgStandbyPair implements AutoCloseable {
    private static final String PHYSICAL_SLOT = "pair_standby";

    /** The settings both servers share; a hot standby needs at least the primary's limits. */
    private static final Map<String, String> SETTINGS = new LinkedHashMap<>();

    static {
        SETTINGS.put("listen_addresses", "127.0.0.1");
        SETTINGS.put("wal_level", "logical");
        SETTINGS.put("max_replication_slots", "40");
        SETTINGS.put("max_wal_senders", "40");
        SETTINGS.put("max_connections", "150");
        SETTINGS.put("hot_standby", "on");
        SETTINGS.put("fsync", "off");
    }

    private final EmbeddedPostgres primary;
    private final int primaryPort;
    private final int standbyPort;
    private final Path bin;
    private final Path standbyData;
    private final Path log;
    private boolean primaryRunning = true;
    private boolean standbyRunning;
    private volatile boolean promoted;

    private PgStandbyPair(EmbeddedPostgres primary, int standbyPort, Path bin, Path standbyData, Path log) {
        this.primary = primary;
        this.primaryPort = primary.getPort();
        this.standbyPort = standbyPort;
        this.bin = bin;
        this.standbyData = standbyData;
        this.log = log;
    }

    /**
     * Starts the primary in {@code workDir} (under the build's target), creates {@code database} on it (the standby's
     * slot sync worker connects to it), and starts the standby once it is in recovery and accepting connections.
     */
    static PgStandbyPair start(String workDir, String database) throws Exception {
        Path work = StackPaths.workDir(workDir);
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
        PgStandbyPair pair = new PgStandbyPair(primary, StackPaths.freePort(), binDirectory(primaryData), standbyData, log);
        try {
            pair.sqlOnPrimary("postgres", "CREATE DATABASE " + database,
                    "SELECT pg_create_physical_replication_slot('" + PHYSICAL_SLOT + "', true)",
                    // logical changes reach a flow only once the standby has their WAL
                    "ALTER SYSTEM SET synchronized_standby_slots = '" + PHYSICAL_SLOT + "'",
                    "SELECT pg_reload_conf()");
            baseBackup(pair.primaryPort, primaryData, standbyData);
            StringBuilder conf = new StringBuilder("\n# standby of the failover tests\n");
            SETTINGS.forEach((k, v) -> conf.append(k).append(" = '").append(v).append("'\n"));
            conf.append("port = ").append(pair.standbyPort).append('\n')
                    .append("primary_conninfo = 'host=127.0.0.1 port=").append(pair.primaryPort)
                    .append(" user=postgres dbname=").append(database).append(" application_name=pair_standby'\n")
                    .append("primary_slot_name = '").append(PHYSICAL_SLOT).append("'\n")
                    .append("hot_standby_feedback = on\n")
                    .append("sync_replication_slots = on\n")
                    .append("synchronized_standby_slots = ''\n");
            Files.writeString(standbyData.resolve("postgresql.auto.conf"), conf, StandardCharsets.UTF_8,
                    StandardOpenOption.APPEND);
            Files.writeString(standbyData.resolve("standby.signal"), "");
            Process start = pair.pgCtl("-D", standbyData.toString(), "-w", "-t", "120", "start");
            assertTrue(start.waitFor(150, TimeUnit.SECONDS) && start.exitValue() == 0, "the standby did not start; see " + log);
            pair.standbyRunning = true;
            awaitTrue(() -> {
                try (Connection c = DriverManager.getConnection(url(pair.standbyPort, database), "postgres", "")) {
                    return "true".equals(query(c, "SELECT CAST(pg_is_in_recovery() AS text)"));
                } catch (SQLException e) {
                    return false;
                }
            }, Duration.ofSeconds(60), "the standby never accepted connections");
            return pair;
        } catch (Exception | AssertionError e) {
            pair.close();
            throw e;
        }
    }

    int primaryPort() {
        return primaryPort;
    }

    int standbyPort() {
        return standbyPort;
    }

    /** The port of whichever server is the primary now: the standby's once {@link #promote} returned. */
    int currentPrimaryPort() {
        return promoted ? standbyPort : primaryPort;
    }

    /** Waits until the standby replayed the primary's WAL up to where it ends now. */
    void awaitStandbyCaughtUp(String database, Duration timeout) throws Exception {
        String end;
        try (Connection c = connect(primaryPort, database)) {
            end = query(c, "SELECT CAST(pg_current_wal_lsn() AS text)");
        }
        awaitTrue(() -> {
            try (Connection c = connect(standbyPort, database)) {
                return "true".equals(query(c, "SELECT CAST(pg_last_wal_replay_lsn() >= CAST(? AS pg_lsn) AS text)", end));
            }
        }, timeout, "the standby never replayed the primary's WAL up to " + end);
    }

    /** The server log of both. */
    Path log() {
        return log;
    }

    static String url(int port, String database) {
        return "jdbc:postgresql://127.0.0.1:" + port + "/" + database;
    }

    static Connection connect(int port, String database) throws SQLException {
        return DriverManager.getConnection(url(port, database), "postgres", "");
    }

    /** The first column of the first row as text, or null. */
    static String query(Connection c, String sql, String... params) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) {
                ps.setString(i + 1, params[i]);
            }
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : null;
            }
        }
    }

    void sqlOnPrimary(String database, String... statements) throws SQLException {
        try (Connection c = connect(primaryPort, database); Statement s = c.createStatement()) {
            for (String statement : statements) {
                s.execute(statement);
            }
        }
    }

    /** Whether the standby holds a synchronized, persistent copy of the failover slot {@code slot}. */
    boolean slotSynced(String database, String slot) throws SQLException {
        try (Connection c = connect(standbyPort, database)) {
            return "true".equals(query(c, "SELECT CAST(synced AND NOT temporary AS text) FROM pg_replication_slots"
                    + " WHERE slot_name = ?", slot));
        }
    }

    /** Stops the primary the fast way: its walsenders send what they have, so the standby receives all WAL. */
    void stopPrimary() {
        if (primaryRunning) {
            primaryRunning = false;
            try {
                primary.close();
            } catch (IOException e) {
                throw new IllegalStateException("stopping the primary failed; see " + log, e);
            }
        }
    }

    /**
     * Kills the primary ({@code pg_ctl stop -m immediate}: no shutdown checkpoint, no last WAL sent), as a host that
     * dies does: what the standby had not received is not on the new timeline.
     */
    void killPrimary() throws Exception {
        if (primaryRunning) {
            Process stop = pgCtl("-D", primaryDataDirectory().toString(), "-m", "immediate", "-w", "stop");
            assertTrue(stop.waitFor(60, TimeUnit.SECONDS) && stop.exitValue() == 0, "the primary did not stop; see " + log);
            primaryRunning = false;
        }
    }

    /** Promotes the standby and waits until it takes writes. */
    void promote(String database) throws SQLException {
        try (Connection c = connect(standbyPort, database); Statement s = c.createStatement()) {
            s.execute("SELECT pg_promote(true, 60)");
        }
        promoted = true;
    }

    private Path primaryDataDirectory() {
        return standbyData.resolveSibling("primary");
    }

    @Override
    public void close() {
        if (standbyRunning) {
            standbyRunning = false;
            try {
                Process stop = pgCtl("-D", standbyData.toString(), "-m", "fast", "-w", "stop");
                stop.waitFor(60, TimeUnit.SECONDS);
            } catch (IOException e) {
                System.out.println("stopping the standby failed: " + e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (primaryRunning) {
            stopPrimary();
        }
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
        try (Connection c = connect(primaryPort, "postgres")) {
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

    private Process pgCtl(String... args) throws IOException {
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
}
