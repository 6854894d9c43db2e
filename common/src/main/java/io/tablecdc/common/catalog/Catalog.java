package io.tablecdc.common.catalog;

import static io.tablecdc.common.catalog.CatalogDb.causeText;
import static io.tablecdc.common.catalog.CatalogDb.causedByOutage;
import static io.tablecdc.common.catalog.CatalogDb.isRefusal;
import static io.tablecdc.common.catalog.Sql.truncate;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.tablecdc.catalog.CatalogMigrations;
import io.tablecdc.catalog.CatalogSchemaException;
import io.tablecdc.common.Resources;
import io.tablecdc.common.catalog.CatalogConfig.CatalogSettings;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The catalog client: the connection pool, and the catalog's operations by concern, each a class of its own over one
 * {@link CatalogDb} core: {@link TableProgress} (a table's row, cursor, batch ids synced and normalized, pause, error
 * episode), {@link PgPhases} (a Postgres pipeline table's phases and publication membership), {@link CopyLeases} (copy
 * claims, leases and fenced writes), {@link BatchIdReservations}, {@link Stages} (staged and quarantined batches),
 * {@link SinkLeases} (the sink's topic, destination and normalize lease) and {@link Flows} (flow identity, slot,
 * pruning). The operator commands run the same operations on their own connection.
 *
 * <p>The methods below delegate one to one to those classes (whose javadoc describes each), so that the connectors call
 * one object; the fault-injection rules of the end-to-end tests name them here.
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
        Resources.closeQuietly(pool, "the catalog's connection pool");
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

    // ---------------------------------------------------------------- tables: progress (TableProgress)

    /** See {@link TableProgress#initTable(String, String, Phase)}. */
    public boolean initTable(String flow, String table, Phase initialPhase) {
        return progress.initTable(flow, table, initialPhase);
    }

    /** {@link #initTable(String, String, Phase)} without a phase (query CDC). */
    public boolean initTable(String flow, String table) {
        return progress.initTable(flow, table, null);
    }

    /** See {@link TableProgress#recordAttempt(String, String, Instant)}. */
    public void recordAttempt(String flow, String table, Instant at) {
        progress.recordAttempt(flow, table, at);
    }

    /** See {@link TableProgress#recordSync(String, String, SyncedBatch, Instant)}. */
    public boolean recordSync(String flow, String table, SyncedBatch batch, Instant at) {
        return progress.recordSync(flow, table, batch, at);
    }

    /** See {@link TableProgress#recordNormalize(String, String, long, RowCounts, Instant)}. */
    public boolean recordNormalize(String flow, String table, long batchId, RowCounts counts, Instant at) {
        return progress.recordNormalize(flow, table, batchId, counts, at);
    }

    /** See {@link TableProgress#setPause(String, String, String, Instant)}. */
    public boolean setPause(String flow, String table, String reason, Instant at) {
        return progress.setPause(flow, table, reason, at);
    }

    /** See {@link TableProgress#clearPause(String, String)}. */
    public boolean clearPause(String flow, String table) {
        return progress.clearPause(flow, table);
    }

    /** See {@link TableProgress#clearPause(String, String, String)}. */
    public boolean clearPause(String flow, String table, String reason) {
        return progress.clearPause(flow, table, reason);
    }

    /** See {@link TableProgress#recordError(String, String, String, Instant, Instant)}. */
    public boolean recordError(String flow, String table, String error, Instant at, Instant nextRetryAt) {
        return progress.recordError(flow, table, error, at, nextRetryAt);
    }

    /** See {@link TableProgress#clearError(String, String, String)}. */
    public boolean clearError(String flow, String table, String prefix) {
        return progress.clearError(flow, table, prefix);
    }

    /** See {@link TableProgress#clearError(String, String)}. */
    public boolean clearError(String flow, String table) {
        return progress.clearError(flow, table);
    }

    /** See {@link TableProgress#getTable(String, String)}. */
    public Optional<TableState> getTable(String flow, String table) {
        return progress.getTable(flow, table);
    }

    /** See {@link TableProgress#listTables(String)}. */
    public List<TableState> listTables(String flow) {
        return progress.listTables(flow);
    }

    // ---------------------------------------------------------------- Postgres phases (PgPhases)

    /** See {@link PgPhases#setPending(String, String)}. */
    public boolean setPending(String flow, String table) {
        return phases.setPending(flow, table);
    }

    /** See {@link PgPhases#markHandover(String, String, String, String)}. */
    public boolean markHandover(String flow, String table, String owner, String lsn) {
        return phases.markHandover(flow, table, owner, lsn);
    }

    /** See {@link PgPhases#markCatchup(String, String, String, String)}. */
    public boolean markCatchup(String flow, String table, String owner, String lsn) {
        return phases.markCatchup(flow, table, owner, lsn);
    }

    /** See {@link PgPhases#markReady(String, String, String)}. */
    public boolean markReady(String flow, String table, String lsn) {
        return phases.markReady(flow, table, lsn);
    }

    /** See {@link PgPhases#markCaughtUpReady(String, String)}. */
    public List<String> markCaughtUpReady(String flow, String durableLsn) {
        return phases.markCaughtUpReady(flow, durableLsn);
    }

    /** See {@link PgPhases#markErrored(String, String, String, String, Instant, Instant)}. */
    public boolean markErrored(String flow, String table, String owner, String error, Instant at, Instant nextRetryAt) {
        return phases.markErrored(flow, table, owner, error, at, nextRetryAt);
    }

    /** See {@link PgPhases#markStreamFailed(String, String, String, Instant, Instant, boolean)}. */
    public boolean markStreamFailed(String flow, String table, String error, Instant at, Instant nextRetryAt,
                                    boolean counted) {
        return phases.markStreamFailed(flow, table, error, at, nextRetryAt, counted);
    }

    /** See {@link PgPhases#publicationMembers(String)}. */
    public Map<String, String> publicationMembers(String flow) {
        return phases.publicationMembers(flow);
    }

    /** See {@link PgPhases#setPublicationMember(String, String, String)}. */
    public boolean setPublicationMember(String flow, String table, String member) {
        return phases.setPublicationMember(flow, table, member);
    }

    /** See {@link PgPhases#markLeft(String, String, String)}. */
    public boolean markLeft(String flow, String table, String reason) {
        return phases.markLeft(flow, table, reason);
    }

    /** See {@link PgPhases#restartTable(String, String, String, int)}. */
    public Optional<String> restartTable(String flow, String table, String reason, int delaySeconds) {
        return phases.restartTable(flow, table, reason, delaySeconds);
    }

    // ---------------------------------------------------------------- Postgres copies (CopyLeases)

    /** See {@link CopyLeases#claimCopy(String, String, Duration)}. */
    public Optional<CopyClaim> claimCopy(String flow, String owner, Duration lease) {
        return copies.claimCopy(flow, owner, lease);
    }

    /** See {@link CopyLeases#claimCopy(String, String, Duration, Collection, Collection)}. */
    public Optional<CopyClaim> claimCopy(String flow, String owner, Duration lease, Collection<String> only,
                                         Collection<String> except) {
        return copies.claimCopy(flow, owner, lease, only, except);
    }

    /** See {@link CopyLeases#renewCopyLease(String, String, String, Duration)}. */
    public boolean renewCopyLease(String flow, String table, String owner, Duration lease) {
        return copies.renewCopyLease(flow, table, owner, lease);
    }

    /** See {@link CopyLeases#renewCopyLease(String, String, String, int, Duration)}. */
    public boolean renewCopyLease(String flow, String table, String owner, int attempt, Duration lease) {
        return copies.renewCopyLease(flow, table, owner, attempt, lease);
    }

    /** See {@link CopyLeases#releaseCopy(String, String, String)}. */
    public boolean releaseCopy(String flow, String table, String owner) {
        return copies.releaseCopy(flow, table, owner);
    }

    /** See {@link CopyLeases#recordCopyProgress(String, String, String, long, long)}. */
    public boolean recordCopyProgress(String flow, String table, String owner, long done, long total) {
        return copies.recordCopyProgress(flow, table, owner, done, total);
    }

    /** See {@link CopyLeases#recordCopyProgress(String, String, String, int, long, long)}. */
    public boolean recordCopyProgress(String flow, String table, String owner, int attempt, long done, long total) {
        return copies.recordCopyProgress(flow, table, owner, attempt, done, total);
    }

    /** See {@link CopyLeases#reserveCopyBatchIds(String, String, String, int, int)}. */
    public Optional<Long> reserveCopyBatchIds(String flow, String table, String owner, int attempt, int count) {
        return copies.reserveCopyBatchIds(flow, table, owner, attempt, count);
    }

    /** See {@link CopyLeases#recordCopySync(String, String, String, int, SyncedBatch, Instant)}. */
    public boolean recordCopySync(String flow, String table, String owner, int attempt, SyncedBatch batch, Instant at) {
        return copies.recordCopySync(flow, table, owner, attempt, batch, at);
    }

    /** See {@link CopyLeases#markCopyCatchup(String, String, String, int, String)}. */
    public boolean markCopyCatchup(String flow, String table, String owner, int attempt, String lsn) {
        return copies.markCopyCatchup(flow, table, owner, attempt, lsn);
    }

    /** See {@link CopyLeases#markCopyFailed(String, String, String, int, String, Instant, Instant)}. */
    public boolean markCopyFailed(String flow, String table, String owner, int attempt, String error, Instant at,
                                  Instant nextRetryAt) {
        return copies.markCopyFailed(flow, table, owner, attempt, error, at, nextRetryAt);
    }

    /** See {@link CopyLeases#copyFailures(String, String)}. */
    public int copyFailures(String flow, String table) {
        return copies.copyFailures(flow, table);
    }

    // ---------------------------------------------------------------- batch ids (BatchIdReservations)

    /** See {@link BatchIdReservations#reserveBatchIds(String, String, int)}. */
    public long reserveBatchIds(String flow, String table, int count) {
        return batchIds.reserveBatchIds(flow, table, count);
    }

    // ---------------------------------------------------------------- stages (Stages)

    /** See {@link Stages#upsertStage(String, String, Stage)}. */
    public boolean upsertStage(String flow, String table, Stage stage) {
        return stages.upsertStage(flow, table, stage);
    }

    /** See {@link Stages#getStage(String, String, long)}. */
    public Optional<Stage> getStage(String flow, String table, long batchId) {
        return stages.getStage(flow, table, batchId);
    }

    /** See {@link Stages#listStages(String, String, long)}. */
    public List<Stage> listStages(String flow, String table, long afterBatchId) {
        return stages.listStages(flow, table, afterBatchId);
    }

    /** See {@link Stages#listStages(String, String)}. */
    public List<Stage> listStages(String flow, String table) {
        return stages.listStages(flow, table);
    }

    /** See {@link Stages#deleteStage(String, String, long)}. */
    public boolean deleteStage(String flow, String table, long batchId) {
        return stages.deleteStage(flow, table, batchId);
    }

    /** See {@link Stages#tablesWithStages(String, Collection)}. */
    public List<String[]> tablesWithStages(String sinkName, Collection<String> topics) {
        return stages.tablesWithStages(sinkName, topics);
    }

    // ---------------------------------------------------------------- sink (SinkLeases)

    /** See {@link SinkLeases#recordSinkTopic(String, String, String, String)}. */
    public boolean recordSinkTopic(String flow, String table, String sinkName, String topic) {
        return sink.recordSinkTopic(flow, table, sinkName, topic);
    }

    /** See {@link SinkLeases#otherTablesOfSinkTopic(String, String, String, String)}. */
    public List<String> otherTablesOfSinkTopic(String sinkName, String topic, String flow, String table) {
        return sink.otherTablesOfSinkTopic(sinkName, topic, flow, table);
    }

    /** See {@link SinkLeases#claimNormalizeLease(String, String, String, Duration)}. */
    public boolean claimNormalizeLease(String flow, String table, String owner, Duration lease) {
        return sink.claimNormalizeLease(flow, table, owner, lease);
    }

    /** See {@link SinkLeases#renewNormalizeLease(String, String, String, Duration)}. */
    public boolean renewNormalizeLease(String flow, String table, String owner, Duration lease) {
        return sink.renewNormalizeLease(flow, table, owner, lease);
    }

    /** See {@link SinkLeases#releaseNormalizeLease(String, String, String)}. */
    public boolean releaseNormalizeLease(String flow, String table, String owner) {
        return sink.releaseNormalizeLease(flow, table, owner);
    }

    /** See {@link SinkLeases#normalizeLeaseHolder(String, String)}. */
    public Optional<String> normalizeLeaseHolder(String flow, String table) {
        return sink.normalizeLeaseHolder(flow, table);
    }

    /** See {@link SinkLeases#normalizeEpoch(String, String)}. */
    public int normalizeEpoch(String flow, String table) {
        return sink.normalizeEpoch(flow, table);
    }

    /** See {@link SinkLeases#claimDestination(String, String, String)}. */
    public Optional<DestinationRefusal> claimDestination(String flow, String table, String destination) {
        return sink.claimDestination(flow, table, destination);
    }

    // ---------------------------------------------------------------- flows (Flows)

    /** See {@link Flows#registerFlow(String, FlowIdentity, String, boolean)}. */
    public FlowRecord registerFlow(String flow, FlowIdentity identity, String configHash,
                                   boolean acceptTimelineChange) {
        return flows.registerFlow(flow, identity, configHash, acceptTimelineChange);
    }

    /** See {@link Flows#registerFlow(String, FlowIdentity, String)}. */
    public FlowRecord registerFlow(String flow, FlowIdentity identity, String configHash) {
        return flows.registerFlow(flow, identity, configHash);
    }

    /** See {@link Flows#replaceSlot(String, String, String)}. */
    public List<String> replaceSlot(String flow, String oldSlot, String newSlot) {
        return flows.replaceSlot(flow, oldSlot, newSlot);
    }

    /** See {@link Flows#getFlow(String)}. */
    public Optional<FlowRecord> getFlow(String flow) {
        return flows.getFlow(flow);
    }

    /** See {@link Flows#listFlows()}. */
    public List<FlowRecord> listFlows() {
        return flows.listFlows();
    }

    /** See {@link Flows#pruneTables(String, Collection)}. */
    public List<String> pruneTables(String flow, Collection<String> tablesInFlow) {
        return flows.pruneTables(flow, tablesInFlow);
    }
}
