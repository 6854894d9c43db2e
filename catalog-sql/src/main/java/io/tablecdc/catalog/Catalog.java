package io.tablecdc.catalog;

import static io.tablecdc.catalog.CatalogDb.causeText;
import static io.tablecdc.catalog.CatalogDb.causedByOutage;
import static io.tablecdc.catalog.CatalogDb.isRefusal;
import static io.tablecdc.catalog.Sql.truncate;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.tablecdc.catalog.CatalogConfig.CatalogSettings;
import java.sql.Connection;
import java.sql.SQLException;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;
import org.slf4j.LoggerFactory;

/**
 * The catalog client: the connection pool, and the catalog's operations by concern, each a class of its own over one
 * {@link CatalogDb} core (connections, transactions, errors) and {@link Sql} (bind-and-execute):
 * {@link #progress()} a table's row, cursor, synced and normalized batch ids, pause and error episode;
 * {@link #phases()} a Postgres pipeline table's phases and publication membership; {@link #copies()} the copy tasks'
 * claims, leases and fenced writes; {@link #batchIds()} batch id reservations; {@link #stages()} staged and
 * quarantined batches; {@link #sink()} the sink's topic, destination and normalize lease; {@link #flows()} flow
 * identity, main slot and pruning. The operator commands ({@code tablecdc-status} and the commands on one table) run
 * the same classes' operations on their own connection.
 *
 * <p>Every write is idempotent unless its javadoc says otherwise: calling it again with the same arguments, for
 * instance after a crash, leaves the catalog as the first call left it. Timestamps passed in ({@code at},
 * {@code nextRetryAt}) are the caller's; leases use the catalog's clock so that every worker agrees on when a lease
 * expires.
 *
 * <p>Failures: {@link CatalogUnavailableException} (retriable) when the catalog cannot be reached,
 * {@link CatalogException} otherwise. Both name the operation, the flow and the table, and never carry connection
 * settings. All SQL uses bound parameters; only table and column names are literal.
 *
 * <p>Thread-safe: a task may share one instance between its threads.
 */
public final class Catalog implements AutoCloseable {

    private final AutoCloseable pool;
    private final TableProgress progress;
    private final PgPhases phases;
    private final CopyLeases copies;
    private final BatchIdReservations batchIds;
    private final Stages stages;
    private final SinkLeases sink;
    private final Flows flows;

    /**
     * Wraps an existing data source (the caller owns it; {@link #close()} leaves it open). Applies no
     * migrations.
     */
    public Catalog(DataSource dataSource) {
        this(dataSource, null);
    }

    private Catalog(DataSource dataSource, AutoCloseable pool) {
        CatalogDb db = new CatalogDb(dataSource);
        this.pool = pool;
        this.progress = new TableProgress(db);
        this.phases = new PgPhases(db);
        this.copies = new CopyLeases(db);
        this.batchIds = new BatchIdReservations(db);
        this.stages = new Stages(db);
        this.sink = new SinkLeases(db);
        this.flows = new Flows(db);
    }

    /**
     * Opens a pool on the catalog and, with {@code catalog.migrate=true}, applies pending migrations;
     * otherwise checks that the schema is the one this release needs. Connectors call it from
     * {@code start()}. May be called again after a crash (migrations are applied once).
     *
     * @param settings   from {@link CatalogConfig#settings}
     * @param clientName who opens it (connector or task name), shown in {@code pg_stat_activity}
     * @throws CatalogUnavailableException if the catalog cannot be reached (retrying may help)
     * @throws CatalogException if it refuses the connection (wrong password, unknown user or database),
     *         or its schema is newer than this release knows, or older while migrations are off (naming
     *         both versions)
     */
    public static Catalog open(CatalogSettings settings, String clientName) {
        String user = settings.user() == null || settings.user().isEmpty() ? null : settings.user();
        String password = settings.password() == null ? null : settings.password().value();

        // first one plain connection: it fails fast and tells a refusal from an outage; migrations use it
        // too, with their own unpooled connections (with a pool of one they would wait for themselves)
        PGSimpleDataSource direct = new PGSimpleDataSource();
        try {
            direct.setUrl(settings.jdbcUrl());
        } catch (IllegalArgumentException e) {
            throw new CatalogException("catalog.jdbc.url is not a valid PostgreSQL JDBC URL");
        }
        if (user != null) {
            direct.setUser(user);
        }
        if (password != null) {
            direct.setPassword(password);
        }
        direct.setConnectTimeout((int) Math.max(1, settings.connectionTimeoutMs() / 1000));
        direct.setApplicationName(truncate("tablecdc " + clientName, 63));
        try (Connection probe = direct.getConnection()) {
            probe.isValid(1);
        } catch (SQLException e) {
            String advice = " (check catalog.jdbc.url, catalog.user and catalog.password): " + causeText(e);
            if (isRefusal(e)) {
                throw new CatalogException("the catalog refused the connection when " + clientName + " started"
                        + advice, e);
            }
            throw new CatalogUnavailableException("catalog unreachable when " + clientName + " started" + advice, e);
        }
        try {
            if (settings.migrate()) {
                CatalogMigrations.migrate(direct);
            } else {
                CatalogMigrations.verify(direct);
            }
        } catch (CatalogSchemaException e) {
            if (causedByOutage(e)) {
                // the catalog went away between the probe and the check: an outage, retried like one
                throw new CatalogUnavailableException("catalog unreachable when " + clientName + " started (during its"
                        + " schema check): " + causeText(e), e);
            }
            throw new CatalogException("catalog schema check failed when " + clientName + " started: "
                    + e.getMessage(), e);
        }

        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(settings.jdbcUrl());
        if (user != null) {
            config.setUsername(user);
        }
        if (password != null) {
            config.setPassword(password);
        }
        config.setMaximumPoolSize(settings.poolSize());
        config.setMinimumIdle(0);
        config.setConnectionTimeout(settings.connectionTimeoutMs());
        // the probe above checked the catalog; from here on an outage is a retriable error per operation
        config.setInitializationFailTimeout(-1);
        config.setPoolName("tablecdc-catalog-" + clientName);
        config.addDataSourceProperty("ApplicationName", truncate("tablecdc " + clientName, 63));
        HikariDataSource pool = new HikariDataSource(config);
        return new Catalog(pool, pool);
    }

    /** Closes the pool if this catalog opened it. */
    @Override
    public void close() {
        if (pool == null) {
            return;
        }
        try {
            pool.close();
        } catch (Exception e) {
            // the pool is being dropped anyway: a failed close must not keep the next one from opening
            LoggerFactory.getLogger(Catalog.class).debug("closing the catalog's connection pool failed: {}", e.toString());
        }
    }

    /** A table's progress: row, cursor, synced and normalized batch ids, pause, error episode. */
    public TableProgress progress() {
        return progress;
    }

    /** A Postgres pipeline table's phases and publication membership. */
    public PgPhases phases() {
        return phases;
    }

    /** Copy claims, leases and fenced writes of the Postgres pipeline's copy tasks. */
    public CopyLeases copies() {
        return copies;
    }

    /** Batch id reservations. */
    public BatchIdReservations batchIds() {
        return batchIds;
    }

    /** The sink's staged batches. */
    public Stages stages() {
        return stages;
    }

    /** The sink's topic, destination and normalize lease of a table. */
    public SinkLeases sink() {
        return sink;
    }

    /** Flows: identity, main slot, pruning. */
    public Flows flows() {
        return flows;
    }
}
