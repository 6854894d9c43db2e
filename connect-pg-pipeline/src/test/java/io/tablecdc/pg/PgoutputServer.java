package io.tablecdc.pg;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;
import java.util.TimeZone;
import java.util.function.Predicate;

import org.postgresql.PGConnection;
import org.postgresql.PGProperty;
import org.postgresql.replication.PGReplicationStream;

import io.tablecdc.pg.wire.Lsn;
import io.tablecdc.pg.wire.PgOutputParser;
import io.tablecdc.pg.wire.PgOutputMessage;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;

/**
 * A real PostgreSQL 17 ({@code wal_level=logical}, zonky embedded binaries) with its data under
 * {@code target/}, and the capture of a pgoutput stream through pgjdbc's replication API: the raw bytes of
 * every message next to what {@link PgOutputParser} makes of them.
 */
final class PgoutputServer implements AutoCloseable {
    static final String DATABASE = "postgres";

    private final EmbeddedPostgres server;
    private final String url;

    private PgoutputServer(EmbeddedPostgres server) {
        this.server = server;
        this.url = "jdbc:postgresql://127.0.0.1:" + server.getPort() + "/" + DATABASE;
    }

    static PgoutputServer start(String name) throws IOException {
        Path work = Path.of("target", name).toAbsolutePath();
        Files.createDirectories(work);
        EmbeddedPostgres server = EmbeddedPostgres.builder()
                .setOverrideWorkingDirectory(work.resolve("binaries").toFile())
                .setDataDirectory(work.resolve("data"))
                .setCleanDataDirectory(true)
                .setPort(freePort())
                .setPGStartupWait(Duration.ofSeconds(60))
                .setServerConfig("listen_addresses", "127.0.0.1")
                .setServerConfig("wal_level", "logical")
                .setServerConfig("max_replication_slots", "10")
                .setServerConfig("max_wal_senders", "10")
                .setServerConfig("fsync", "off")
                .setOutputRedirector(ProcessBuilder.Redirect.appendTo(work.resolve("postgres.log").toFile()))
                .setErrorRedirector(ProcessBuilder.Redirect.appendTo(work.resolve("postgres.log").toFile()))
                .start();
        return new PgoutputServer(server);
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }

    int port() {
        return server.getPort();
    }

    Connection connect() throws SQLException {
        return DriverManager.getConnection(url, "postgres", "");
    }

    /** Runs each statement on its own (autocommit: one transaction per statement unless it is BEGIN…COMMIT). */
    void execute(String... statements) throws SQLException {
        try (Connection c = connect(); Statement s = c.createStatement()) {
            for (String sql : statements) {
                s.execute(sql);
            }
        }
    }

    /** One message of a captured stream: its bytes, where the stream said it was, and the decoded message. */
    record Captured(byte[] bytes, Lsn receivedAt, PgOutputMessage message) {
        String hex() {
            return HexFormat.of().formatHex(bytes);
        }
    }

    /**
     * Creates the logical slot {@code slot}, runs {@code changes}, then reads the slot's pgoutput stream
     * (proto_version 1, messages on) until a non-transactional end marker emitted after the changes, and
     * drops the slot. {@code sessionZone} is the JVM zone while connecting: pgjdbc sends it as the
     * session's TimeZone, which is the offset timestamptz text values carry.
     */
    List<Captured> capture(String slot, String publication, String sessionZone, SqlWork changes) throws Exception {
        execute("SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
        try {
            changes.run(this);
            execute("SELECT pg_logical_emit_message(false, 'capture_end', '" + slot + "')");
            return read(slot, publication, sessionZone, m -> m instanceof PgOutputMessage.LogicalMessage lm
                    && lm.prefix().equals("capture_end") && lm.contentText().equals(slot));
        } finally {
            execute("SELECT pg_drop_replication_slot('" + slot + "')");
        }
    }

    private List<Captured> read(String slot, String publication, String sessionZone, Predicate<PgOutputMessage> last) throws Exception {
        Properties props = new Properties();
        PGProperty.USER.set(props, "postgres");
        PGProperty.PASSWORD.set(props, "");
        PGProperty.REPLICATION.set(props, "database");
        PGProperty.ASSUME_MIN_SERVER_VERSION.set(props, "10");
        PGProperty.PREFER_QUERY_MODE.set(props, "simple");
        TimeZone jvmZone = TimeZone.getDefault();
        Connection replication;
        try {
            TimeZone.setDefault(TimeZone.getTimeZone(sessionZone));
            replication = DriverManager.getConnection(url, props);
        } finally {
            TimeZone.setDefault(jvmZone);
        }
        List<Captured> captured = new ArrayList<>();
        try (replication) {
            PGReplicationStream stream = replication.unwrap(PGConnection.class).getReplicationAPI()
                    .replicationStream().logical()
                    .withSlotName(slot)
                    .withSlotOption("proto_version", "1")
                    .withSlotOption("publication_names", publication)
                    .withSlotOption("messages", "true")
                    .start();
            try {
                long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
                while (System.nanoTime() < deadline) {
                    ByteBuffer payload = stream.readPending();
                    if (payload == null) {
                        Thread.sleep(10);
                        continue;
                    }
                    byte[] bytes = new byte[payload.remaining()];
                    payload.duplicate().get(bytes);
                    PgOutputMessage message = PgOutputParser.parse(payload);
                    captured.add(new Captured(bytes, Lsn.of(stream.getLastReceiveLSN().asLong()), message));
                    if (last.test(message)) {
                        return captured;
                    }
                }
                throw new AssertionError("no end marker on slot " + slot + " within 60 s; captured " + captured.size() + " messages");
            } finally {
                stream.close();
            }
        }
    }

    /** Work against the server between slot creation and capture. */
    @FunctionalInterface
    interface SqlWork {
        void run(PgoutputServer server) throws Exception;
    }

    @Override
    public void close() throws IOException {
        server.close();
    }
}
