package io.tablecdc.catalog;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Arrays;
import java.util.Objects;
import java.util.function.Supplier;
import javax.sql.DataSource;

import org.flywaydb.core.Flyway;
import org.flywaydb.core.api.FlywayException;
import org.flywaydb.core.api.MigrationInfo;
import org.flywaydb.core.api.MigrationInfoService;
import org.flywaydb.core.api.MigrationState;
import org.flywaydb.core.api.output.MigrateResult;

/**
 * Applies the catalog's migrations ({@code classpath:io/tablecdc/catalog/migration}) to a
 * {@link DataSource}, and checks that a catalog's schema is one this release can use.
 *
 * <p>Migrations run in the connection's current schema (set it with {@code currentSchema=} in the JDBC
 * URL to keep the catalog apart). Their history is kept in {@value #HISTORY_TABLE}, so the catalog can
 * share a database with other Flyway users. A database that already holds unrelated tables is accepted.
 * Concurrent starts are safe: {@link #migrate} holds a Postgres advisory lock on its own connection while
 * it runs, so the data source needs room for two connections besides Flyway's (an unpooled one is best).
 */
public final class CatalogMigrations {

    /** Flyway's history table for the catalog. */
    public static final String HISTORY_TABLE = "cdc_catalog_schema_history";

    /** Where the migration scripts live on the classpath. */
    public static final String LOCATION = "classpath:io/tablecdc/catalog/migration";

    private static final String KNOWN_VERSION = "15";

    /** "tablecdc" in ASCII: the advisory lock key that serialises migrations of one database. */
    private static final long MIGRATION_LOCK_KEY = 0x7461626C65636463L;

    /** How long a start waits for another session's migration lock (operations.md). */
    static final long MIGRATION_LOCK_WAIT_MS = 30_000L;

    private CatalogMigrations() {
    }

    /** What {@link #migrate(DataSource)} did. Versions are {@code "0"} for an empty catalog. */
    public record Outcome(String versionBefore, String versionAfter, int migrationsApplied) {
    }

    /**
     * Applies every pending migration, after checking that the catalog's schema is not newer than
     * this release knows. May be called again at any time, also after a crash: a second call finds
     * nothing pending and changes nothing.
     *
     * @throws CatalogSchemaException if the schema is newer than {@link #knownVersion()} or a migration
     *         fails
     */
    public static Outcome migrate(DataSource dataSource) {
        Flyway flyway = flyway(dataSource);
        return serialized(dataSource, () -> {
            String before = refuseNewer(info(flyway));
            MigrateResult result;
            try {
                result = flyway.migrate();
            } catch (FlywayException e) {
                throw new CatalogSchemaException("applying the catalog migrations failed at schema version "
                        + before + ": " + e.getMessage(), e);
            }
            return new Outcome(before, version(info(flyway).current()), result.migrationsExecuted);
        });
    }

    /**
     * Runs {@code work} while holding a session advisory lock of the catalog's database. Flyway locks only
     * once its history table exists, so two connectors starting on an empty catalog would otherwise
     * both try to create it, and one would fail.
     */
    private static <T> T serialized(DataSource dataSource, Supplier<T> work) {
        try (Connection lock = dataSource.getConnection()) {
            lock(lock, MIGRATION_LOCK_WAIT_MS);
            try {
                return work.get();
            } finally {
                try (PreparedStatement ps = lock.prepareStatement("SELECT pg_advisory_unlock(?)")) {
                    ps.setLong(1, MIGRATION_LOCK_KEY);
                    ps.execute();
                }
            }
        } catch (SQLException e) {
            throw new CatalogSchemaException("cannot lock the catalog for migrating: " + e.getMessage(), e);
        }
    }

    /**
     * Takes the migration lock on {@code c}, trying for at most {@code waitMs}: a session of a host that died while it
     * migrated keeps the lock until the server notices (the catalog's sessions ask the server to probe them, which
     * takes about a minute; a session opened by something else may keep it for hours), and a start must not wait for
     * that without a bound.
     *
     * @throws SQLException with SQLSTATE 55P03 (lock not available), naming the session that holds the lock and how
     *         to end it, when the wait is over
     */
    static void lock(Connection c, long waitMs) throws SQLException {
        long deadline = System.nanoTime() + waitMs * 1_000_000L;
        long pause = 50;
        while (true) {
            try (PreparedStatement ps = c.prepareStatement("SELECT pg_try_advisory_lock(?)")) {
                ps.setLong(1, MIGRATION_LOCK_KEY);
                try (ResultSet rs = ps.executeQuery()) {
                    if (rs.next() && rs.getBoolean(1)) {
                        return;
                    }
                }
            }
            if (System.nanoTime() >= deadline) {
                throw new SQLException("the catalog's migration lock (advisory lock " + MIGRATION_LOCK_KEY
                        + ") was still held by another session after " + waitMs / 1000 + " s: " + holder(c)
                        + ". Another connector may be migrating the catalog (start again later); if that session's"
                        + " host is gone, end it with SELECT pg_terminate_backend(<pid>) on the catalog database",
                        "55P03");
            }
            try {
                Thread.sleep(pause);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new SQLException("interrupted while waiting for the catalog's migration lock", "57014", e);
            }
            pause = Math.min(1_000, pause * 2);
        }
    }

    /** Who holds the migration lock, as far as this session may see it. */
    private static String holder(Connection c) {
        String sql = "SELECT a.pid, a.application_name, a.client_addr::text, a.backend_start, a.state"
                + " FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
                + " WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database"
                + " WHERE datname = current_database())"
                + " AND l.objsubid = 1 AND ((l.classid::bigint << 32) | l.objid::bigint) = ?";
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setLong(1, MIGRATION_LOCK_KEY);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return "its holder is not visible (it may just have released it)";
                }
                return "held by pid " + rs.getInt(1) + " (application '" + rs.getString(2) + "', client "
                        + (rs.getString(3) == null ? "local" : rs.getString(3)) + ", connected since "
                        + rs.getTimestamp(4).toInstant() + ", " + rs.getString(5) + ")";
            }
        } catch (SQLException | RuntimeException e) {
            return "its holder could not be read (" + e.getMessage() + ")";
        }
    }

    /**
     * Checks, without changing anything, that the catalog's schema is exactly the one this release
     * knows (for {@code catalog.migrate=false}). Read-only; may be called any number of times.
     *
     * @return the catalog's schema version
     * @throws CatalogSchemaException if the schema is newer, or older (migrations pending)
     */
    public static String verify(DataSource dataSource) {
        MigrationInfoService info = info(flyway(dataSource));
        String current = refuseNewer(info);
        MigrationInfo[] pending = info.pending();
        if (pending.length > 0) {
            throw new CatalogSchemaException("the catalog's schema is at version " + current
                    + " but this tablecdc release needs version " + knownVersion()
                    + "; set catalog.migrate=true and start again");
        }
        return current;
    }

    /**
     * The catalog's current schema version, {@code "0"} when no migration was applied. Read-only.
     */
    public static String currentVersion(DataSource dataSource) {
        return version(info(flyway(dataSource)).current());
    }

    /**
     * The highest schema version this release's migrations create. A test keeps it equal to the
     * highest {@code V<n>__*.sql} script.
     */
    public static String knownVersion() {
        return KNOWN_VERSION;
    }

    private static String refuseNewer(MigrationInfoService info) {
        String current = version(info.current());
        boolean future = Arrays.stream(info.all())
                .anyMatch(m -> m.getState() == MigrationState.FUTURE_SUCCESS
                        || m.getState() == MigrationState.FUTURE_FAILED);
        if (future) {
            throw new CatalogSchemaException("the catalog's schema is at version " + current
                    + ", newer than this tablecdc release knows (version " + KNOWN_VERSION
                    + "); upgrade the connectors to the release that wrote it, or use another catalog");
        }
        return current;
    }

    private static MigrationInfoService info(Flyway flyway) {
        try {
            return flyway.info();
        } catch (FlywayException e) {
            throw new CatalogSchemaException("cannot read the catalog's schema version: " + e.getMessage(), e);
        }
    }

    private static String version(MigrationInfo info) {
        if (info == null || info.getVersion() == null) {
            return "0";
        }
        return info.getVersion().getVersion();
    }

    private static Flyway flyway(DataSource dataSource) {
        Objects.requireNonNull(dataSource, "dataSource");
        try {
            return Flyway.configure(CatalogMigrations.class.getClassLoader())
                    .dataSource(dataSource)
                    .locations(LOCATION)
                    .table(HISTORY_TABLE)
                    // a database that already holds other tables gets a version-0 baseline, then V1 runs
                    .baselineOnMigrate(true)
                    .baselineVersion("0")
                    .cleanDisabled(true)
                    .failOnMissingLocations(true)
                    .load();
        } catch (FlywayException e) {
            throw new CatalogSchemaException("cannot prepare the catalog migrations: " + e.getMessage(), e);
        }
    }
}
