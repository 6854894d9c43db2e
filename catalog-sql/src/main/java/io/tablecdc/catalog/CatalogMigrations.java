package io.tablecdc.catalog;

import java.sql.Connection;
import java.sql.PreparedStatement;
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

    private static final String KNOWN_VERSION = "10";

    /** "tablecdc" in ASCII: the advisory lock key that serialises migrations of one database. */
    private static final long MIGRATION_LOCK_KEY = 0x7461626C65636463L;

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
            try (PreparedStatement ps = lock.prepareStatement("SELECT pg_advisory_lock(?)")) {
                ps.setLong(1, MIGRATION_LOCK_KEY);
                ps.execute();
            }
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
