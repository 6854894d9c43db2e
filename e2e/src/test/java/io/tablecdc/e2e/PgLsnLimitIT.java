package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * A flow on a cluster whose WAL position is just below 2^63 bytes and then crosses it: versions, the catalog's LSNs
 * and the slot's confirmed position must keep their order where a signed 64-bit LSN would turn negative.
 *
 * <p>Moving a cluster's WAL position there takes {@code pg_resetwal}, which the embedded PostgreSQL 17 binaries of the
 * stack do not have; this test runs its own PostgreSQL 15 cluster from Debian's {@code postgresql-15} package
 * ({@code /usr/lib/postgresql/15/bin}, or the package downloaded with {@code apt-get download} and unpacked into
 * {@code .cache/debian} when it is not installed).
 */
class PgLsnLimitIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "lsn_source";
    /** The WAL segment file the cluster is reset to: LSN 7FFFFFFF/FF000000, 16 MiB below 2^63. */
    private static final String RESET_SEGMENT = "000000017FFFFFFF000000FF";
    private static final BigInteger TWO_TO_63 = BigInteger.ONE.shiftLeft(63);

    private static String url(int port, String database) {
        return "jdbc:postgresql://127.0.0.1:" + port + "/" + database;
    }

    @Test
    void aFlowKeepsEveryChangeInOrderAcrossLsn2To63() throws Exception {
        Path bin = postgres15();
        Path work = StackPaths.workDir("lsn-limit-postgres");
        Path data = work.resolve("data");
        Path log = work.resolve("postgres.log");
        run(bin, log, "initdb", "-D", data.toString(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync");
        run(bin, log, "pg_resetwal", "-l", RESET_SEGMENT, "-D", data.toString());
        int port = StackPaths.freePort();
        Files.writeString(data.resolve("postgresql.auto.conf"), "port = " + port + "\n"
                + "listen_addresses = '127.0.0.1'\n"
                + "unix_socket_directories = '" + work + "'\n"
                + "wal_level = logical\nmax_replication_slots = 10\nmax_wal_senders = 10\nfsync = off\n",
                StandardCharsets.UTF_8);
        run(bin, log, "pg_ctl", "-D", data.toString(), "-l", log.toString(), "-w", "-t", "120", "start");
        String catalogUrl = stack.postgres().createDatabase("lsn_catalog");
        Client clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl())
                .setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                .compressServerResponse(false).build();
        ConnectRestClient rest = stack.connect().rest();
        String flow = "lsn-flow";
        try {
            try (Connection c = DriverManager.getConnection(url(port, "postgres"), "postgres", "");
                 Statement s = c.createStatement()) {
                s.execute("CREATE DATABASE " + DATABASE);
            }
            PgChecks pg = new PgChecks(stack, () -> DriverManager.getConnection(url(port, DATABASE), "postgres", ""),
                    catalogUrl, clickhouse);
            pg.sql("CREATE SCHEMA lsn",
                    "CREATE TABLE lsn.t (id int PRIMARY KEY, v text NOT NULL)",
                    "INSERT INTO lsn.t SELECT g, 'copied ' || g FROM generate_series(1, 200) g",
                    "CREATE PUBLICATION lsn_pub FOR TABLE lsn.t");
            assertTrue(lsnAtLeast(pg, "7FFFFFFF/FF000000") && !lsnAtLeast(pg, "80000000/0"),
                    "the cluster starts just below 2^63: " + currentLsn(pg));
            Map<String, String[]> tables = Map.of("lsn.t", new String[] {"id::text || '|' || v",
                "concat(toString(id), '|', v)"});

            Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "lsn_pub", "lsn");
            source.put("database.host", "127.0.0.1");
            source.put("database.port", Integer.toString(port));
            source.put("database.user", "postgres");
            source.put("database.password", "");
            source.put("table.sync.copy", "all");
            Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, "lsn-stage");
            sink.put("topics.regex", "lsn\\..*");
            sink.put("consumer.override.metadata.max.age.ms", "1000");
            rest.putConfig("lsn-sink", sink);
            rest.putConfig(flow, source);
            rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
            pg.awaitTable(flow, "lsn.t", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));

            // below 2^63: streamed inserts and an update
            pg.sql("INSERT INTO lsn.t SELECT g, 'below ' || g FROM generate_series(201, 210) g",
                    "UPDATE lsn.t SET v = 'updated below' WHERE id = 1");
            assertTrue(!lsnAtLeast(pg, "80000000/0"), "still below 2^63: " + currentLsn(pg));
            pg.awaitEqual(tables, Duration.ofSeconds(120));

            // across it: the next segment starts at 80000000/00000000
            pg.sql("SELECT pg_switch_wal()");
            pg.sql("UPDATE lsn.t SET v = 'updated above' WHERE id = 1",
                    "DELETE FROM lsn.t WHERE id = 2",
                    "INSERT INTO lsn.t SELECT g, 'above ' || g FROM generate_series(211, 220) g");
            pg.transaction("UPDATE lsn.t SET v = 'twice above, first' WHERE id = 3",
                    "UPDATE lsn.t SET v = 'twice above, second' WHERE id = 3");
            assertTrue(lsnAtLeast(pg, "80000000/0"), "the changes are past 2^63: " + currentLsn(pg));
            pg.awaitEqual(tables, Duration.ofSeconds(120));

            List<GenericRecord> rows = clickhouse.queryAll("SELECT toString(max(_tablecdc_version)) AS top,"
                    + " toString(min(_tablecdc_version)) AS low FROM lsn_t");
            BigInteger top = new BigInteger(rows.get(0).getString("top"));
            BigInteger low = new BigInteger(rows.get(0).getString("low"));
            assertTrue(top.compareTo(low) > 0, "versions above 2^63 sort after those below: " + low + " .. " + top);
            assertTrue(top.shiftRight(48).compareTo(TWO_TO_63) >= 0,
                    "the newest version carries the commit LSN past 2^63: " + top.toString(16));
            Map<String, String> state = pg.table(flow, "lsn.t");
            assertEquals(null, state.get("last_error"), "the table has no error: " + state);
            // the slot is confirmed after Connect flushed the offsets of what Kafka acknowledged (every second here)
            PgChecks.awaitTrue(() -> {
                try (Connection c = pg.source(); Statement s = c.createStatement();
                     ResultSet rs = s.executeQuery("SELECT count(*) FILTER (WHERE confirmed_flush_lsn >= '80000000/0'),"
                             + " count(*) FROM pg_replication_slots WHERE slot_type = 'logical' AND NOT temporary")) {
                    return rs.next() && rs.getLong(2) == 1 && rs.getLong(1) == 1;
                }
            }, Duration.ofSeconds(60), "the flow's slot confirmed past 2^63");
        } finally {
            rest.delete(flow);
            rest.delete("lsn-sink");
            run(bin, log, "pg_ctl", "-D", data.toString(), "-m", "fast", "-w", "stop");
        }
    }

    private static String currentLsn(PgChecks pg) throws SQLException {
        try (Connection c = pg.source(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT pg_current_wal_lsn()::text")) {
            rs.next();
            return rs.getString(1);
        }
    }

    private static boolean lsnAtLeast(PgChecks pg, String lsn) throws SQLException {
        try (Connection c = pg.source(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT pg_current_wal_lsn() >= '" + lsn + "'::pg_lsn")) {
            rs.next();
            return rs.getBoolean(1);
        }
    }

    /** Runs a PostgreSQL program; as root in a user namespace, since PostgreSQL refuses to run as root. */
    private static void run(Path bin, Path log, String program, String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        if ("root".equals(System.getProperty("user.name"))) {
            command.addAll(List.of("unshare", "-U"));
        }
        command.add(bin.resolve(program).toString());
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
        assertTrue(p.waitFor(180, TimeUnit.SECONDS) && p.exitValue() == 0, program + " failed; see " + log);
    }

    /** The bin folder of PostgreSQL 15 with pg_resetwal: installed, or Debian's package unpacked under .cache. */
    private static Path postgres15() throws IOException, InterruptedException {
        Path installed = Path.of("/usr/lib/postgresql/15/bin");
        if (Files.isExecutable(installed.resolve("pg_resetwal")) && Files.isExecutable(installed.resolve("postgres"))) {
            return installed;
        }
        Path cache = StackPaths.projectRoot().resolve(".cache").resolve("debian").resolve("postgresql-15");
        Path unpacked = cache.resolve("root").resolve("usr/lib/postgresql/15/bin");
        if (!Files.isExecutable(unpacked.resolve("pg_resetwal"))) {
            Files.createDirectories(cache);
            Path log = cache.resolve("download.log");
            Process download = new ProcessBuilder("apt-get", "download", "postgresql-15").directory(cache.toFile())
                    .redirectErrorStream(true).redirectOutput(log.toFile()).start();
            assertTrue(download.waitFor(300, TimeUnit.SECONDS) && download.exitValue() == 0,
                    "apt-get download postgresql-15 failed; see " + log);
            Path deb;
            try (var files = Files.list(cache)) {
                deb = files.filter(f -> f.getFileName().toString().endsWith(".deb")).findFirst().orElseThrow();
            }
            Process unpack = new ProcessBuilder("dpkg-deb", "-x", deb.toString(), cache.resolve("root").toString())
                    .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
            assertTrue(unpack.waitFor(300, TimeUnit.SECONDS) && unpack.exitValue() == 0, "dpkg-deb -x failed; see " + log);
        }
        return unpacked;
    }
}
