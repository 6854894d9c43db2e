package io.tablecdc.e2e.stack;

import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;

/**
 * PostgreSQL 17 with {@code wal_level=logical} on 127.0.0.1 (zonky embedded binaries), used both as a
 * replication source and as the catalog database; or an external server named by {@code TABLECDC_PG_URL}
 * (with {@code TABLECDC_PG_USER} and {@code TABLECDC_PG_PASSWORD}).
 */
public final class LocalPostgres implements AutoCloseable {
    public static final String ENV_URL = "TABLECDC_PG_URL";
    public static final String ENV_USER = "TABLECDC_PG_USER";
    public static final String ENV_PASSWORD = "TABLECDC_PG_PASSWORD";
    private static final Logger log = LoggerFactory.getLogger(LocalPostgres.class);

    private final EmbeddedPostgres server;
    private final String host;
    private final int port;
    private final String adminUrl;
    private final String user;
    private final String password;

    private LocalPostgres(EmbeddedPostgres server, String host, int port, String adminUrl, String user, String password) {
        this.server = server;
        this.host = host;
        this.port = port;
        this.adminUrl = adminUrl;
        this.user = user;
        this.password = password;
    }

    public static LocalPostgres start(Path workDir) throws Exception {
        String external = StackPaths.env(ENV_URL);
        if (external != null) {
            java.net.URI uri = java.net.URI.create(external.substring("jdbc:".length()));
            log.info("using the external Postgres at {}", external);
            return new LocalPostgres(null, uri.getHost(), uri.getPort() < 0 ? 5432 : uri.getPort(), external,
                    StackPaths.env(ENV_USER) == null ? "postgres" : StackPaths.env(ENV_USER),
                    StackPaths.env(ENV_PASSWORD) == null ? "" : StackPaths.env(ENV_PASSWORD));
        }
        long started = System.nanoTime();
        int port = StackPaths.freePort();
        EmbeddedPostgres server = EmbeddedPostgres.builder()
                .setOverrideWorkingDirectory(workDir.resolve("binaries").toFile())
                .setDataDirectory(workDir.resolve("data"))
                .setCleanDataDirectory(true)
                .setPort(port)
                .setPGStartupWait(Duration.ofSeconds(60))
                .setServerConfig("listen_addresses", "127.0.0.1")
                .setServerConfig("hba_file", requirePasswords(workDir).toString())
                .setServerConfig("wal_level", "logical")
                .setServerConfig("max_replication_slots", "40")
                .setServerConfig("max_wal_senders", "40")
                .setServerConfig("max_connections", "200")
                .setServerConfig("fsync", "off")
                .setServerConfig("synchronous_commit", "off")
                .setOutputRedirector(java.lang.ProcessBuilder.Redirect.appendTo(workDir.resolve("postgres.log").toFile()))
                .setErrorRedirector(java.lang.ProcessBuilder.Redirect.appendTo(workDir.resolve("postgres.log").toFile()))
                .start();
        String url = "jdbc:postgresql://127.0.0.1:" + server.getPort() + "/postgres";
        log.info("Postgres up at {} in {} ms", url, (System.nanoTime() - started) / 1_000_000);
        return new LocalPostgres(server, "127.0.0.1", server.getPort(), url, "postgres", "");
    }

    /**
     * Makes the server check passwords as a deployed one does: every role but the {@code postgres} superuser (which the
     * harness uses, with no password) logs in over TCP with its password (scram-sha-256), so a wrong password is
     * refused with SQLSTATE 28P01.
     */
    private static Path requirePasswords(Path workDir) throws java.io.IOException {
        java.nio.file.Files.createDirectories(workDir);
        Path hba = workDir.resolve("pg_hba.conf");
        java.nio.file.Files.writeString(hba, String.join("\n",
                "# written by the tablecdc test stack (LocalPostgres)",
                "local all all trust",
                "host all postgres 127.0.0.1/32 trust",
                "host replication postgres 127.0.0.1/32 trust",
                "host all all 127.0.0.1/32 scram-sha-256",
                "host replication all 127.0.0.1/32 scram-sha-256", ""));
        return hba.toAbsolutePath();
    }

    /** Creates a database (if missing) and returns its JDBC URL; tests keep apart by database. */
    public String createDatabase(String name) throws SQLException {
        if (!name.matches("[a-z_][a-z0-9_]*")) {
            throw new IllegalArgumentException("database names in tests are plain lower-case identifiers: " + name);
        }
        try (Connection c = DriverManager.getConnection(adminUrl, user, password);
             PreparedStatement exists = c.prepareStatement("SELECT 1 FROM pg_database WHERE datname = ?")) {
            exists.setString(1, name);
            try (var rs = exists.executeQuery()) {
                if (rs.next()) {
                    return jdbcUrl(name);
                }
            }
            try (Statement s = c.createStatement()) {
                // CREATE DATABASE takes no parameters; the name was checked to be a plain identifier above
                s.execute("CREATE DATABASE \"" + name + "\"");
            }
        }
        return jdbcUrl(name);
    }

    public String jdbcUrl(String database) {
        return "jdbc:postgresql://" + host + ":" + port + "/" + database;
    }

    public String adminUrl() {
        return adminUrl;
    }

    public String host() {
        return host;
    }

    public int port() {
        return port;
    }

    public String user() {
        return user;
    }

    public String password() {
        return password;
    }

    public Connection connect(String database) throws SQLException {
        return DriverManager.getConnection(jdbcUrl(database), user, password);
    }

    @Override
    public void close() throws Exception {
        if (server != null) {
            server.close();
        }
    }
}
