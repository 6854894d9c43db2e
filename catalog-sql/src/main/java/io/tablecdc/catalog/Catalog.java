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
import java.util.Objects;
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

    /** Longest a catalog statement may run, waits for locks included ({@code statement_timeout}). */
    static final int STATEMENT_TIMEOUT_MS = 30_000;

    /** Longest a catalog statement waits for a row or table lock ({@code lock_timeout}). */
    static final int LOCK_TIMEOUT_MS = 10_000;

    /**
     * Longest the client waits for a byte on an open catalog connection: above {@link #STATEMENT_TIMEOUT_MS}, so that
     * a statement the server ends is reported as such; it ends the wait of a connection that stopped answering (a
     * black hole, a frozen host), which no server-side timeout can.
     */
    static final int SOCKET_TIMEOUT_S = 45;

    private final AutoCloseable pool;
    private final CatalogDb db;
    private final TableProgress progress;
    private final PgPhases phases;
    private final CopyLeases copies;
    private final BatchIdReservations batchIds;
    private final Stages stages;
    private final SinkLeases sink;
    private final Flows flows;
    private final SourceOwners owners;

    /**
     * Wraps an existing data source (the caller owns it; {@link #close()} leaves it open). Applies no
     * migrations.
     */
    public Catalog(DataSource dataSource) {
        this(dataSource, null);
    }

    private Catalog(DataSource dataSource, AutoCloseable pool) {
        CatalogDb db = new CatalogDb(dataSource);
        this.db = db;
        this.pool = pool;
        this.progress = new TableProgress(db);
        this.phases = new PgPhases(db);
        this.copies = new CopyLeases(db);
        this.batchIds = new BatchIdReservations(db);
        this.stages = new Stages(db);
        this.sink = new SinkLeases(db);
        this.flows = new Flows(db);
        this.owners = new SourceOwners(db);
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
        PGSimpleDataSource direct = dataSource(settings, clientName, user, password);
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
            if (lockNotAvailable(e)) {
                throw new CatalogUnavailableException("catalog busy when " + clientName + " started, will retry: "
                        + causeText(e.getCause()), e);
            }
            if (causedByOutage(e)) {
                // the catalog went away between the probe and the check: an outage, retried like one
                throw new CatalogUnavailableException("catalog unreachable when " + clientName + " started (during its"
                        + " schema check): " + causeText(e), e);
            }
            throw new CatalogException("catalog schema check failed when " + clientName + " started: "
                    + e.getMessage(), e);
        }

        HikariConfig config = new HikariConfig();
        // the pool's connections are made like the probe's, with the same bounds and session settings
        config.setDataSource(dataSource(settings, clientName, user, password));
        config.setMaximumPoolSize(settings.poolSize());
        config.setMinimumIdle(0);
        config.setConnectionTimeout(settings.connectionTimeoutMs());
        // the probe above checked the catalog; from here on an outage is a retriable error per operation
        config.setInitializationFailTimeout(-1);
        config.setPoolName("tablecdc-catalog-" + clientName);
        HikariDataSource pool = new HikariDataSource(config);
        return new Catalog(pool, pool);
    }

    private static boolean lockNotAvailable(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLException sql && "55P03".equals(sql.getSQLState())) {
                return true;
            }
        }
        return false;
    }

    /**
     * An unpooled data source on the catalog whose every connection is bounded: to connect
     * ({@code catalog.connection.timeout.ms}), to wait for a byte ({@link #SOCKET_TIMEOUT_S}), on the server for a
     * statement and a lock ({@link #sessionOptions}).
     */
    private static PGSimpleDataSource dataSource(CatalogSettings settings, String clientName, String user,
                                                 String password) {
        PGSimpleDataSource ds = new PGSimpleDataSource();
        try {
            ds.setUrl(settings.jdbcUrl());
        } catch (IllegalArgumentException e) {
            throw new CatalogException("catalog.jdbc.url is not a valid PostgreSQL JDBC URL");
        }
        if (user != null) {
            ds.setUser(user);
        }
        if (password != null) {
            ds.setPassword(password);
        }
        int connectS = (int) Math.max(1, (settings.connectionTimeoutMs() + 999) / 1000);
        ds.setConnectTimeout(connectS);
        ds.setLoginTimeout(connectS);
        ds.setSocketTimeout(SOCKET_TIMEOUT_S);
        ds.setTcpKeepAlive(true);
        ds.setOptions(sessionOptions(ds.getOptions()));
        ds.setApplicationName(truncate("tablecdc " + clientName, 63));
        return ds;
    }

    /**
     * The server settings of every catalog session, after the URL's own {@code options}: statements and lock waits
     * are bounded, and the server probes the client's TCP connection so that a session whose host died (with its
     * locks, the migration lock too) ends within about a minute instead of the OS default of hours. A session left
     * idle inside a transaction (its client froze mid-transaction) is ended after a minute and its locks released.
     */
    static String sessionOptions(String urlOptions) {
        String ours = "-c statement_timeout=" + STATEMENT_TIMEOUT_MS + " -c lock_timeout=" + LOCK_TIMEOUT_MS
                + " -c idle_in_transaction_session_timeout=60000"
                + " -c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3";
        // the URL's own come last: an operator can raise a bound there (options=-c statement_timeout=...)
        return urlOptions == null || urlOptions.isBlank() ? ours : ours + " " + urlOptions;
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

    /**
     * Takes a Postgres pipeline flow for its apply task, which starts streaming: the flow's apply epoch
     * ({@code cdc_flow.apply_epoch}) goes up by one, which fences every earlier apply task, and from now on every write
     * of this client about the flow or its tables (phases, synced batches, batch id reservations, detaches, publication
     * membership, the flow's row) carries the new epoch in its own statement and changes nothing once another apply task
     * has taken a higher one. Every operation of this client then ends with a check of the epoch, so a refused write,
     * or a read after the take, throws {@link ApplyTakenOverException}: the task stops. The flow's row must exist
     * ({@link Flows#registerFlow}). Called again (a start tried again), it takes a newer epoch.
     *
     * @param owner who takes it (worker and task), recorded in {@code cdc_flow.apply_owner}
     * @return the epoch taken
     */
    public long takeApply(String flow, String owner) {
        Objects.requireNonNull(owner, "owner");
        long epoch = flows.takeApply(flow, owner).orElseThrow(() -> new CatalogException("flow " + flow
                + ": no cdc_flow row to take for the apply task"));
        db.fence(new ApplyFence(flow, epoch));
        return epoch;
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

    /** Which query CDC task owns a table, and the writes fenced by it. */
    public SourceOwners owners() {
        return owners;
    }

    /** Flows: identity, main slot, pruning. */
    public Flows flows() {
        return flows;
    }
}
