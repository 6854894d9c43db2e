package io.tablecdc.catalog;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.File;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class CatalogMigrationsTest {

    private static EmbeddedPostgres postgres;
    private static final AtomicInteger databases = new AtomicInteger();

    @BeforeAll
    static void startPostgres() throws Exception {
        File dir = new File("target/embedded-pg/" + CatalogMigrationsTest.class.getSimpleName());
        postgres = EmbeddedPostgres.builder()
                .setOverrideWorkingDirectory(dir)
                .setDataDirectory(new File(dir, "data"))
                .setCleanDataDirectory(true)
                .start();
    }

    @AfterAll
    static void stopPostgres() throws Exception {
        if (postgres != null) {
            postgres.close();
        }
    }

    /** A fresh, empty database on the shared server, so every test starts from nothing. */
    private static DataSource emptyDatabase() throws SQLException {
        String name = "catalog_" + databases.incrementAndGet();
        try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE " + name);
        }
        return postgres.getDatabase("postgres", name);
    }

    private static List<String> columns(DataSource ds, String table) throws SQLException {
        List<String> columns = new ArrayList<>();
        try (Connection c = ds.getConnection(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT column_name FROM information_schema.columns WHERE table_name = '"
                     + table + "' ORDER BY ordinal_position")) {
            while (rs.next()) {
                columns.add(rs.getString(1));
            }
        }
        return columns;
    }

    private static String schemaFingerprint(DataSource ds) throws SQLException {
        StringBuilder sb = new StringBuilder();
        try (Connection c = ds.getConnection(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT table_name, column_name, data_type, is_nullable, column_default"
                     + " FROM information_schema.columns WHERE table_schema = 'public'"
                     + " ORDER BY table_name, ordinal_position")) {
            while (rs.next()) {
                for (int i = 1; i <= 5; i++) {
                    sb.append(rs.getString(i)).append('|');
                }
                sb.append('\n');
            }
        }
        return sb.toString();
    }

    @Test
    void migratesAnEmptyDatabaseAndIsANoOpTheSecondTime() throws Exception {
        DataSource ds = emptyDatabase();

        CatalogMigrations.Outcome first = CatalogMigrations.migrate(ds);
        assertEquals("0", first.versionBefore());
        assertEquals(CatalogMigrations.knownVersion(), first.versionAfter());
        assertTrue(first.migrationsApplied() >= 1);
        assertTrue(columns(ds, "cdc_flow").containsAll(List.of("flow_name", "source_kind",
                "source_system_identifier", "source_timeline", "source_slot", "source_publication",
                "destination_identity", "config_hash", "created_at", "updated_at")));
        assertTrue(columns(ds, "cdc_table_replication_state").containsAll(List.of("flow_name",
                "source_table_identifier", "cursor_text", "last_attempt_at", "last_synced_at", "last_normalized_at",
                "synced_batch_id", "normalized_batch_id", "phase", "phase_lsn", "copy_attempt", "paused_reason",
                "paused_at", "last_error", "last_error_at", "error_count", "next_retry_at", "inserts_count",
                "updates_count", "deletes_count", "first_row_received_at", "first_row_commit_time", "updated_at",
                "copy_lease_owner", "copy_lease_until", "copy_rows_done", "copy_rows_total", "reserved_batch_id", "copy_failures", "clamped_values_count")));
        assertEquals(List.of("flow_name", "source_table_identifier", "batch_id", "avro_files", "rows", "inserts",
                "updates", "deletes", "created_at", "truncate_before", "clamped_values"), columns(ds, "cdc_table_avro_stage"));
        String schemaAfterFirst = schemaFingerprint(ds);

        CatalogMigrations.Outcome second = CatalogMigrations.migrate(ds);
        assertEquals(0, second.migrationsApplied());
        assertEquals(first.versionAfter(), second.versionBefore());
        assertEquals(first.versionAfter(), second.versionAfter());
        assertEquals(schemaAfterFirst, schemaFingerprint(ds));
        assertEquals(CatalogMigrations.knownVersion(), CatalogMigrations.verify(ds));
    }

    /** How many migration scripts there are (versions may have gaps). */
    private int scriptCount() throws Exception {
        URI location = getClass().getClassLoader().getResource("io/tablecdc/catalog/migration").toURI();
        try (Stream<Path> scripts = Files.list(Path.of(location))) {
            return (int) scripts.map(p -> p.getFileName().toString()).filter(n -> n.matches("V\\d+__.+\\.sql")).count();
        }
    }

    @Test
    void knownVersionIsTheHighestScript() throws Exception {
        URI location = getClass().getClassLoader().getResource("io/tablecdc/catalog/migration").toURI();
        int highest;
        try (Stream<Path> scripts = Files.list(Path.of(location))) {
            highest = scripts.map(p -> p.getFileName().toString())
                    .filter(n -> n.matches("V\\d+__.+\\.sql"))
                    .mapToInt(n -> Integer.parseInt(n.substring(1, n.indexOf("__"))))
                    .max().orElseThrow();
        }
        assertEquals(String.valueOf(highest), CatalogMigrations.knownVersion());
        DataSource ds = emptyDatabase();
        assertEquals(String.valueOf(highest), CatalogMigrations.migrate(ds).versionAfter());
        assertEquals(String.valueOf(highest), CatalogMigrations.currentVersion(ds));
    }

    @Test
    void refusesASchemaNewerThanItKnowsNamingBothVersions() throws Exception {
        DataSource ds = emptyDatabase();
        CatalogMigrations.migrate(ds);
        // what a later release would leave behind: one more applied migration this release has no script for
        String future = Integer.toString(Integer.parseInt(CatalogMigrations.knownVersion()) + 1);
        try (Connection c = ds.getConnection(); Statement s = c.createStatement()) {
            s.execute("INSERT INTO " + CatalogMigrations.HISTORY_TABLE
                    + " (installed_rank, version, description, type, script, checksum, installed_by, execution_time,"
                    + " success) VALUES (100, '" + future + "', 'future', 'SQL', 'V" + future + "__future.sql', 1, 'test', 1, true)");
        }

        CatalogSchemaException migrate = assertThrows(CatalogSchemaException.class, () -> CatalogMigrations.migrate(ds));
        assertTrue(migrate.getMessage().contains("version " + future), migrate.getMessage());
        assertTrue(migrate.getMessage().contains("version " + CatalogMigrations.knownVersion()), migrate.getMessage());

        CatalogSchemaException verify = assertThrows(CatalogSchemaException.class, () -> CatalogMigrations.verify(ds));
        assertTrue(verify.getMessage().contains("version " + future), verify.getMessage());
    }

    @Test
    void verifyRefusesAnUnmigratedCatalogWithoutChangingIt() throws Exception {
        DataSource ds = emptyDatabase();
        CatalogSchemaException e = assertThrows(CatalogSchemaException.class, () -> CatalogMigrations.verify(ds));
        assertTrue(e.getMessage().contains("version 0"), e.getMessage());
        assertTrue(e.getMessage().contains("catalog.migrate=true"), e.getMessage());
        assertEquals(List.of(), columns(ds, "cdc_table_replication_state"));
    }

    @Test
    void migratesADatabaseThatAlreadyHoldsOtherTables() throws Exception {
        DataSource ds = emptyDatabase();
        try (Connection c = ds.getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE someone_elses (id int)");
        }
        CatalogMigrations.Outcome outcome = CatalogMigrations.migrate(ds);
        assertEquals(CatalogMigrations.knownVersion(), outcome.versionAfter());
        assertEquals(List.of("id"), columns(ds, "someone_elses"));
        assertEquals(0, CatalogMigrations.migrate(ds).migrationsApplied());
    }

    @Test
    void theCommandMigratesThenChecks() throws Exception {
        String name = "catalog_cli";
        try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE " + name);
        }
        java.util.Map<String, String> env = java.util.Map.of("TABLECDC_CATALOG_JDBC_URL",
                postgres.getJdbcUrl("postgres", name), "TABLECDC_CATALOG_PASSWORD", "unused");
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
        java.io.PrintStream o = new java.io.PrintStream(out, true, java.nio.charset.StandardCharsets.UTF_8);
        java.io.PrintStream e = new java.io.PrintStream(err, true, java.nio.charset.StandardCharsets.UTF_8);

        assertEquals(1, MigrateCommand.run(new String[] {"--check"}, env, o, e), "nothing applied yet");
        assertTrue(err.toString(java.nio.charset.StandardCharsets.UTF_8).contains("version 0"));
        assertEquals(0, MigrateCommand.run(new String[0], env, o, e));
        assertTrue(out.toString(java.nio.charset.StandardCharsets.UTF_8).contains("version 0 -> " + CatalogMigrations.knownVersion()
                        + " (" + scriptCount() + " migrations applied)"),
                out.toString(java.nio.charset.StandardCharsets.UTF_8));
        assertEquals(0, MigrateCommand.run(new String[] {"--check"}, env, o, e));
        assertEquals(2, MigrateCommand.run(new String[] {"--url", "jdbc:mysql://x/y"}, java.util.Map.of(), o, e));
    }

    @Test
    void concurrentStartsMigrateOnce() throws Exception {
        DataSource ds = emptyDatabase();
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(2);
        try {
            java.util.concurrent.CyclicBarrier start = new java.util.concurrent.CyclicBarrier(2);
            List<java.util.concurrent.Future<CatalogMigrations.Outcome>> runs = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                runs.add(pool.submit(() -> {
                    start.await();
                    return CatalogMigrations.migrate(ds);
                }));
            }
            int applied = 0;
            for (java.util.concurrent.Future<CatalogMigrations.Outcome> run : runs) {
                applied += run.get().migrationsApplied();
                assertEquals(CatalogMigrations.knownVersion(), run.get().versionAfter());
            }
            assertEquals(scriptCount(), applied, "each migration ran once");
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void migratesIntoTheSchemaNamedByCurrentSchema() throws Exception {
        String name = "catalog_schema";
        try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE " + name);
        }
        try (Connection c = postgres.getDatabase("postgres", name).getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE SCHEMA tablecdc");
        }
        DataSource ds = postgres.getDatabase("postgres", name, java.util.Map.of("currentSchema", "tablecdc"));
        CatalogMigrations.migrate(ds);
        try (Connection c = ds.getConnection(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT table_schema FROM information_schema.tables"
                     + " WHERE table_name = 'cdc_table_replication_state'")) {
            assertTrue(rs.next());
            assertEquals("tablecdc", rs.getString(1));
            assertTrue(!rs.next(), "only in the tablecdc schema");
        }
        assertEquals(CatalogMigrations.knownVersion(), CatalogMigrations.verify(ds));
    }
}
