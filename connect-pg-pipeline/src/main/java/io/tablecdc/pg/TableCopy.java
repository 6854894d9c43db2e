package io.tablecdc.pg;

import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.connect.source.SourceRecord;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyOut;
import org.postgresql.replication.PGReplicationStream;
import org.postgresql.replication.ReplicationSlotInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.common.RecordHeaders.Op;
import io.tablecdc.common.Resources;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CopyClaim;
import io.tablecdc.catalog.TableState;
import io.tablecdc.common.TablePause;
import io.tablecdc.common.metrics.TableMetrics;
import io.tablecdc.pg.config.PgPipelineConfig;
import io.tablecdc.pg.convert.ConversionException;
import io.tablecdc.pg.convert.RelationSchema;
import io.tablecdc.pg.wire.Lsn;
import io.tablecdc.pg.wire.PgOutputParser;
import io.tablecdc.pg.wire.PgOutputMessage;
import io.tablecdc.pg.wire.PgOutputMessage.Begin;
import io.tablecdc.pg.wire.PgOutputMessage.Commit;
import io.tablecdc.pg.wire.PgOutputMessage.Delete;
import io.tablecdc.pg.wire.PgOutputMessage.Insert;
import io.tablecdc.pg.wire.PgOutputMessage.LogicalMessage;
import io.tablecdc.pg.wire.PgOutputMessage.Relation;
import io.tablecdc.pg.wire.PgOutputMessage.Truncate;
import io.tablecdc.pg.wire.PgOutputMessage.Update;

/**
 * One table's copy, catch-up and handover, driven by a copy task's polls.
 *
 * <pre>
 * START ──▶ COPY ──▶ DRAIN_COPY ──▶ CATCHUP ──(own marker received)──▶ DRAIN_FINAL ──▶ catchup(marker) in the catalog
 *   │  temporary slot with an exported snapshot at its consistent point c0
 *   │  COPY … TO STDOUT in that snapshot (a truncate first, then every row at version c0 &lt;&lt; 16)
 *   │  private slot streamed from c0, keeping only this table's changes
 *   └  when caught up: a non-transactional logical message (the handover marker) at LSN m
 * </pre>
 *
 * <h2>The cut-off</h2>
 * The marker is written into the WAL, so every slot's stream delivers it at the same place: after each
 * transaction that committed before {@code m} and before each one that commits after it. This copy sends exactly
 * the table's changes committed before {@code m}; the apply task keeps exactly those committed at or after it ({@code m}
 * is the end of the marker's record, so a commit record written right after the marker starts at {@code m}). When the
 * apply task meets the marker it records it ({@code copying}, {@code phase_lsn = m}) and holds the table's later
 * changes; once every record of this copy is acknowledged and recorded, this copy moves the table to
 * {@code catchup(m)} and the apply task sends what it held, so the table's batches reach its topic in order. No
 * other table waits at any point.
 *
 * <h2>Back-pressure</h2>
 * While the batches this copy sent and the sink has not normalized yet number {@code max.unnormalized.batches}, the
 * COPY step sends nothing more (its transaction, snapshot and open COPY kept). It pauses only where everything sent is
 * whole batches, records {@code paused_reason = normalize_buffer_full}, keeps renewing its lease, and goes on once
 * the sink's normalized batch id has moved far enough. A pause longer than {@code copy.pause.max.ms} gives the
 * attempt up without giving up the claim ({@code RELEASED}): the snapshot's transactions end and the temporary slot is
 * dropped, so nothing holds back the source's VACUUM horizon or WAL for a table whose ClickHouse side stays broken;
 * {@code paused_reason = copy_snapshot_released} says so, and once the sink has loaded every batch this copy sent it
 * starts over from a new snapshot (a truncate first, as any copy). The catch-up never pauses: it sends one batch per source
 * transaction, so held to the sink's pace it could fall behind a busy table for good and never hand it over
 * (PgPipelineCopyIT did, under its writer); and once the marker is written the apply task holds the table's later
 * changes in memory until the handover.
 *
 * <p>Failures: a copy or conversion error marks the table {@code errored} with a retry time (up to
 * {@code max.table.retries}); losing the lease (another task took the table over) abandons the copy silently; a
 * copy task that stops gives the table back to {@code pending}.
 *
 * <p>Why it is long: it is one state machine (the diagram above) whose states share the snapshot, the private slot,
 * the lease and the batches in flight; COPY's text is {@link CopyText}'s, the pause's bookkeeping {@code TablePause}'s.
 */
final class TableCopy {
    private static final Logger log = LoggerFactory.getLogger(TableCopy.class);
    /** Prefix of the handover markers (logical decoding messages). */
    static final String MARKER_PREFIX = "tablecdc.handover";
    private static final long BUDGET_NANOS = TimeUnit.MILLISECONDS.toNanos(500);
    private static final long PROGRESS_LOG_NANOS = TimeUnit.SECONDS.toNanos(10);
    private static final long PROGRESS_CATALOG_NANOS = TimeUnit.SECONDS.toNanos(2);
    private static final long IDLE_BEFORE_MARKER_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
    /** The catalog's {@code paused_reason} of a copy waiting for the sink (the BigQuery source's reason too). */
    static final String PAUSED_REASON = "normalize_buffer_full";
    /** While paused: how often the catalog is read for the normalized batch id. */
    private static final long PAUSE_RECHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

    /** The catalog's {@code paused_reason} of a copy that gave its snapshot up while waiting for the sink. */
    static final String RELEASED_REASON = "copy_snapshot_released";

    /** RELEASED: a copy paused past {@code copy.pause.max.ms} holds nothing on the source until the sink loaded it all. */
    private enum Step { START, COPY, RELEASED, DRAIN_COPY, CATCHUP, DRAIN_FINAL }

    private final PgPipelineConfig config;
    private final String flow;
    private final String owner;
    private final String table;
    private final int attempt;
    /** Failed attempts since the table was last ready, before this one. */
    private final int failures;
    private final Catalog catalog;
    private final TableMetrics.Table metrics;
    /** In one task with the apply task: never sleeps while paused (streamed changes would wait). */
    private final boolean besideApply;
    /** A detached table's rejoin: its private slot and detach marker ({@link Detacher}); null for a copy. */
    private final String detachSlot;
    private final Lsn detachLsn;
    /** Catching the table up from its private slot rather than copying it. */
    private boolean rejoining;
    /** Inside a transaction committed before the detach marker (the apply task sent it): nothing of it is sent. */
    private boolean skipTxn;

    private Step step = Step.START;
    private volatile boolean finished;
    private volatile boolean abandoned;
    /** The copy stopped because the source could not be reached (the table went back to pending, nothing counted). */
    private boolean sourceUnreachable;
    private Connection control;
    private Connection replication;
    private PGReplicationStream stream;
    private final List<Connection> readers = new ArrayList<>();
    private final List<CopyOut> copies = new ArrayList<>();
    private String slotName;
    private Relation relation;
    private RelationSchema schema;
    private volatile ChangeBatcher batcher;
    private ChangeBuilder changeBuilder;
    private Lsn consistentPoint;
    private Lsn catchupTarget;
    private Lsn marker;
    private boolean inTxn;
    private long idleSince;
    private long xid;
    private int ordinal;
    private final List<ChangeBatcher.Synced> unsynced = new ArrayList<>();
    private long rowsSent;
    /** Copies started over because the table was rewritten after their snapshot (not failures). */
    private int restarts;
    private long rowsTotal;
    private final long startedAt = System.nanoTime();
    private long lastLogAt = System.nanoTime();
    private long lastProgressAt;
    private long lastRenewAt = System.nanoTime();
    /** When the last renewal the catalog confirmed was made (nanos), for the lost-lease message. */
    private long lastConfirmedAt = System.nanoTime();
    /** When the last {@link #step} returned (nanos): a long gap before the next one (Connect's send) is logged. */
    private long lastStepEndedAt;
    /** Batch ids this copy handed to Connect that are not known to be normalized yet, oldest first. */
    private final ArrayDeque<Long> unnormalized = new ArrayDeque<>();
    /** The table's normalized batch id as last read from the catalog. */
    private long knownNormalized;
    /**
     * Waiting for normalize; read by {@link #abandon} on the thread that stops the task. A copy faster than the sink
     * pauses and resumes batch by batch: only the first pause and resume in a minute log at info.
     */
    private final TablePause pause = new TablePause(log, Duration.ofMinutes(1));
    private long pauseCheckedAt;
    /** When the current pause began (nanos): past {@code copy.pause.max.ms} the copy releases its snapshot. */
    private long pauseBeganAt;
    /** Copy snapshots this claim gave up while waiting for the sink. */
    private int releases;

    TableCopy(PgPipelineConfig config, String flow, String owner, CopyClaim claim, Catalog catalog,
              TableMetrics metrics, boolean besideApply) {
        this.config = config;
        this.flow = flow;
        this.owner = owner;
        this.table = claim.table();
        this.attempt = claim.attempt();
        this.failures = claim.failures();
        this.catalog = catalog;
        this.metrics = metrics.table(table);
        this.besideApply = besideApply;
        this.detachSlot = claim.detachSlot();
        this.detachLsn = claim.rejoin() ? Lsn.parse(claim.detachLsn()) : null;
    }

    /** The batch id of each table's offset in Kafka: its batch ids are reserved above it too. */
    private java.util.function.ToLongFunction<String> kafkaBatchIds = t -> 0;

    /** Before the first step: batch ids are reserved above the table's offset in Kafka too (see {@link BatchIds}). */
    void batchIdsAbove(java.util.function.ToLongFunction<String> kafka) {
        this.kafkaBatchIds = kafka;
    }

    String table() {
        return table;
    }

    boolean finished() {
        return finished;
    }

    /** The next records of this copy; an empty list while it waits. */
    List<SourceRecord> step() throws InterruptedException {
        List<SourceRecord> out = new ArrayList<>();
        if (finished) {
            return out;
        }
        long began = System.nanoTime();
        if (lastStepEndedAt != 0) {
            warnIfLong(began - lastStepEndedAt, "between two polls of the task (Connect was sending its records)");
        }
        try {
            return stepOnce(out);
        } finally {
            lastStepEndedAt = System.nanoTime();
            warnIfLong(lastStepEndedAt - began, "in one step (" + step + ")");
        }
    }

    /**
     * Logs a pause of the copy longer than half its lease: a pause longer than the lease loses the table (the next
     * renewal is refused and the copy starts over), and this says where the time went.
     */
    private void warnIfLong(long nanos, String where) {
        if (nanos > config.copyLease().toNanos() / 2) {
            log.warn("flow {}, table {}: copy attempt {} spent {} ms {}; a pause longer than copy.lease.ms={} loses the"
                    + " table and starts its copy over", flow, table, attempt, TimeUnit.NANOSECONDS.toMillis(nanos), where,
                    config.copyLease().toMillis());
        }
    }

    private List<SourceRecord> stepOnce(List<SourceRecord> out) throws InterruptedException {
        try {
            if (!renewLease()) {
                return out;
            }
            if ((step == Step.COPY || step == Step.RELEASED) && backPressured()) {
                return out;
            }
            switch (step) {
                case START -> start(out);
                case COPY -> copyRows(out);
                case RELEASED -> startOver();
                case DRAIN_COPY -> drainCopy();
                case CATCHUP -> catchUp(out);
                case DRAIN_FINAL -> handOver();
                default -> throw new IllegalStateException(step.name());
            }
            // fencing: records go to Connect only right after the catalog confirmed (and extended) this claim's lease
            if (!out.isEmpty() && !finished && !fence()) {
                return List.of();
            }
            sent(out);
        } catch (BatchIds.LeaseLostException e) {
            if (!abandoned) {
                lostLease();
            }
            return List.of();
        } catch (SQLException | ConversionException | IllegalArgumentException e) {
            if (abandoned) {
                return List.of();
            }
            if (SourceDatabase.unreachable(e)) {
                // an outage of the source is no fault of the table: it does not count against max.table.retries
                sourceUnreachable = true;
                abandon("the source cannot be reached: " + (e.getMessage() == null ? e.toString() : e.getMessage()));
                return List.of();
            }
            fail(e.getMessage() == null ? e.toString() : e.getMessage());
            return List.of();
        } catch (ClusterChangedException e) {
            // nothing was sent: the table goes back to pending, and the task fails with the refusal
            abandon("the source is another cluster");
            throw e;
        } catch (RuntimeException e) {
            if (abandoned) {
                return List.of();
            }
            // the catalog (or something unexpected) failed: this attempt ends, the lease runs out and a copy task
            // claims the table again
            log.warn("flow {}, table {}: copy attempt {} stopped ({}); the table is copied again once its lease expires",
                    flow, table, attempt, e.toString());
            closeConnections();
            finished = true;
            return List.of();
        }
        return out;
    }

    private void start(List<SourceRecord> out) throws SQLException, InterruptedException {
        // a copy that died while paused left its pause behind
        catalog.progress().clearPause(flow, table, PAUSED_REASON);
        catalog.progress().clearPause(flow, table, RELEASED_REASON);
        String mainSlot = catalog.flows().getFlow(flow).map(f -> f.identity().slot()).orElse(null);
        if (mainSlot == null) {
            // the apply task has not registered the flow's slot yet
            Thread.sleep(200);
            return;
        }
        control = SourceDatabase.connect(config, "tablecdc " + flow + " copy");
        replication = SourceDatabase.connectReplication(config, "tablecdc " + flow + " copy");
        // every copy connects anew (after a restart of the source too): the same cluster as the flow's, or nothing
        checkCluster(SourceDatabase.identify(replication));
        if (detachLsn != null && rejoin(mainSlot)) {
            return;
        }
        byte[] random = new byte[3];
        new SecureRandom().nextBytes(random);
        slotName = copySlotPrefix(config.slotPrefix(), mainSlot) + HexFormat.of().formatHex(random);
        ReplicationSlotInfo slot = replication.unwrap(PGConnection.class).getReplicationAPI().createReplicationSlot()
                .logical().withSlotName(slotName).withOutputPlugin("pgoutput").withTemporaryOption().make();
        consistentPoint = Lsn.of(slot.getConsistentPoint().asLong());
        String snapshot = slot.getSnapshotName();
        if (snapshot == null || !snapshot.matches("[0-9A-Fa-f-]+")) {
            throw new SQLException("slot " + slotName + " exported no usable snapshot (" + snapshot + ")");
        }
        boolean copyRows = config.copies(table);
        int connections = copyRows ? config.copyConnectionsPerTable() : 1;
        for (int i = 0; i < connections; i++) {
            Connection reader = SourceDatabase.connect(config, "tablecdc " + flow + " copy " + table);
            readers.add(reader);
            reader.setAutoCommit(false);
            reader.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
            reader.setReadOnly(true);
            try (Statement s = reader.createStatement()) {
                // SET TRANSACTION SNAPSHOT takes no parameter; the name was checked above
                s.execute("SET TRANSACTION SNAPSHOT '" + snapshot + "'");
            }
        }
        Connection first = readers.get(0);
        relation = SourceDatabase.describe(first, config.publication(), table).orElse(null);
        if (relation == null) {
            throw new IllegalArgumentException("table " + table + " is not in publication " + config.publication()
                    + " any more");
        }
        if (copyRows) {
            for (Connection reader : readers) {
                if (!SourceDatabase.lockUnrewritten(reader, relation)) {
                    // a TRUNCATE or table rewrite committed after the snapshot: it would read an empty table
                    restarts++;
                    log.info("flow {}, table {}: the table was truncated or rewritten after the copy's snapshot at {}; the"
                            + " copy starts over from a new snapshot (restart {})", flow, table, consistentPoint, restarts);
                    closeConnections();
                    step = Step.START;
                    return;
                }
            }
        }
        schema = ChangeBuilder.of(relation, oid -> SourceDatabase.primaryKey(first, oid), config::arrayText);
        batcher = new ChangeBatcher(flow, mainSlot, config.heartbeatTopic(), config.batchRows(), config::topic,
                BatchIds.reservedWhileHolding(catalog, flow, owner, attempt, ApplyTask.BATCH_ID_BLOCK, kafkaBatchIds), consistentPoint)
                .blocks(config.blockBytes()).limit(RecordLimit.of(config.originals()));
        if (!copyRows) {
            closeReaders();
            log.info("flow {}, table {}: not copied (table.sync.copy); catching up from {} and handing over", flow,
                    table, consistentPoint);
            step = Step.DRAIN_COPY;
            return;
        }
        SourceDatabase.Size size = SourceDatabase.size(first, relation.oid());
        rowsTotal = Math.max(0, size.estimatedRows());
        if (size.estimatedRows() < 0) {
            rowsTotal = count(first);
        }
        String columns = String.join(", ", relation.columns().stream().map(c -> quote(c.name())).toList());
        String from = quote(relation.namespace()) + "." + quote(relation.name());
        long pagesPerReader = connections == 1 ? 0 : Math.max(1, (size.pages() + connections - 1) / connections);
        for (int i = 0; i < connections; i++) {
            String where = "";
            if (connections > 1) {
                // page ranges are numbers computed here, not input: COPY takes no parameters
                long lo = i * pagesPerReader;
                where = i == connections - 1 ? " WHERE ctid >= '(" + lo + ",0)'::tid"
                        : " WHERE ctid >= '(" + lo + ",0)'::tid AND ctid < '(" + (lo + pagesPerReader) + ",0)'::tid";
            }
            String sql = "COPY (SELECT " + columns + " FROM " + from + where + ") TO STDOUT";
            copies.add(readers.get(i).unwrap(PGConnection.class).getCopyAPI().copyOut(sql));
        }
        if (!catalog.copies().recordCopyProgress(flow, table, owner, attempt, 0, rowsTotal)) {
            throw new BatchIds.LeaseLostException("copy progress");
        }
        log.info("flow {}, table {}: copy attempt {} started: ~{} rows in the snapshot at {} over {} connection(s)", flow,
                table, attempt, rowsTotal, consistentPoint, connections);
        batcher.beginSnapshot(consistentPoint, Instant.now());
        // a copy replaces whatever an earlier copy or stream left in the destination
        out.addAll(batcher.add(Change.truncate(table, null)));
        step = Step.COPY;
    }

    /**
     * A detached table's rejoin: its changes committed from the detach marker on are streamed from its private slot,
     * then it is handed back to the apply task at a new marker, as after a copy. A private slot that is gone or was
     * invalidated cannot give them: a table this flow copies is copied from scratch instead (this claim goes on as a
     * copy); one it does not copy is marked errored.
     *
     * @return true if the rejoin goes on; false if the claim goes on as a copy
     */
    private boolean rejoin(String mainSlot) throws SQLException {
        Optional<SourceDatabase.Slot> slot = SourceDatabase.slot(control, detachSlot);
        if (slot.isEmpty() || "lost".equals(slot.get().walStatus())) {
            String problem = "private slot " + detachSlot + (slot.isEmpty() ? " is gone" : " was invalidated by the server");
            if (slot.isPresent()) {
                SourceDatabase.dropSlot(control, detachSlot);
            }
            if (config.copies(table)) {
                log.warn("flow {}, table {}: {}; the table is copied again from scratch instead of rejoining", flow,
                        table, problem);
                return false;
            }
            String error = problem + ": its changes since it was detached cannot be streamed; "
                    + ApplyTask.resetHint(config, flow, table);
            catalog.phases().markErrored(flow, table, owner, error, Instant.now(), null);
            log.error("flow {}, table {}: {}", flow, table, error);
            closeConnections();
            finished = true;
            return true;
        }
        // a table that left the publication while detached rejoins all the same: the stream publishes its changes
        // up to its removal, which only its private slot has, and then leaves the flow
        rejoining = true;
        slotName = detachSlot;
        consistentPoint = detachLsn;
        batcher = new ChangeBatcher(flow, mainSlot, config.heartbeatTopic(), config.batchRows(), config::topic,
                BatchIds.reservedWhileHolding(catalog, flow, owner, attempt, ApplyTask.BATCH_ID_BLOCK, kafkaBatchIds), consistentPoint)
                .blocks(config.blockBytes()).limit(RecordLimit.of(config.originals()));
        log.info("flow {}, table {}: rejoining (attempt {}): streaming its changes committed from its detach marker {}"
                + " from private slot {}", flow, table, attempt, detachLsn, detachSlot);
        step = Step.DRAIN_COPY;
        return true;
    }

    private long count(Connection c) throws SQLException {
        try (Statement s = c.createStatement(); java.sql.ResultSet rs = s.executeQuery("SELECT count(*) FROM "
                + quote(relation.namespace()) + "." + quote(relation.name()))) {
            rs.next();
            return rs.getLong(1);
        }
    }

    private void copyRows(List<SourceRecord> out) throws SQLException {
        long deadline = System.nanoTime() + BUDGET_NANOS;
        int columns = relation.columns().size();
        int read = 0;
        while (read < config.batchRows() && System.nanoTime() < deadline && !copies.isEmpty()) {
            for (int i = 0; i < copies.size(); i++) {
                CopyOut copy = copies.get(i);
                byte[] row = copy.readFromCopy();
                if (row == null) {
                    copies.remove(i);
                    i--;
                    continue;
                }
                RelationSchema.Row converted = schema.row(CopyText.parse(row, columns));
                out.addAll(batcher.add(ChangeBuilder.change(schema, Op.SNAPSHOT, converted.value()).withNonFinite(converted.nonFinite())));
                rowsSent++;
                read++;
            }
        }
        if (copies.isEmpty()) {
            out.addAll(batcher.commit(consistentPoint));
            closeReaders();
            rowsTotal = rowsSent;
            if (!catalog.copies().recordCopyProgress(flow, table, owner, attempt, rowsSent, rowsTotal)) {
                throw new BatchIds.LeaseLostException("copy progress");
            }
            log.info("flow {}, table {}: copied {} rows in {} s; catching up", flow, table, rowsSent,
                    TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - startedAt));
            step = Step.DRAIN_COPY;
            return;
        }
        recordSynced();
        progress();
    }

    private void progress() {
        long now = System.nanoTime();
        if (now - lastProgressAt >= PROGRESS_CATALOG_NANOS) {
            lastProgressAt = now;
            if (!catalog.copies().recordCopyProgress(flow, table, owner, attempt, rowsSent, rowsTotal)) {
                throw new BatchIds.LeaseLostException("copy progress");
            }
        }
        if (now - lastLogAt >= PROGRESS_LOG_NANOS) {
            lastLogAt = now;
            long total = Math.max(rowsTotal, rowsSent);
            log.info("flow {}, table {}: copied {} of ~{} rows ({}%)", flow, table, rowsSent, total,
                    total == 0 ? 100 : rowsSent * 100 / total);
        }
    }

    /**
     * Refuses to copy from another cluster than the one the flow was created on (the address now reaches another
     * server): its rows would replace the table's in ClickHouse. The timeline is the apply task's to judge (it
     * accepts a promotion with a failover slot); a copy's slot is temporary and its snapshot its own.
     */
    private void checkCluster(SourceDatabase.SystemIdentity identity) {
        String recorded = catalog.flows().getFlow(flow).map(f -> f.identity().systemIdentifier()).orElse(null);
        if (recorded != null && !recorded.equals(identity.systemIdentifier())) {
            throw new ClusterChangedException(FlowRefusals.otherCluster(flow, config, recorded,
                    identity.systemIdentifier(), catalog.flows().getFlow(flow).map(f -> f.identity().slot()).orElse(null)));
        }
    }

    /** The source is another cluster than the flow's: the copy task fails with the refusal. */
    static final class ClusterChangedException extends org.apache.kafka.connect.errors.ConnectException {
        private static final long serialVersionUID = 1L;

        ClusterChangedException(String message) {
            super(message);
        }
    }

    /**
     * Waits until every record of the copy is acknowledged and recorded, then opens the private stream. A rejoin's
     * private slot still in use (55006, "is active for PID") belongs to an earlier holder of the table, whose lease this
     * claim took over: the walsender of a host that stopped answering lingers until {@code wal_sender_timeout}. It is
     * tried again every second, and after {@value #SLOT_BUSY_GRACE_MS} ms its walsender is terminated (this claim's
     * lease, renewed at every step, says that holder is gone); the copy fails only if the slot stays busy past
     * {@code wal_sender_timeout} plus that grace.
     */
    private void drainCopy() throws SQLException, InterruptedException {
        if (!synced()) {
            Thread.sleep(20);
            return;
        }
        changeBuilder = new ChangeBuilder(oid -> SourceDatabase.primaryKey(control, oid), config::arrayText);
        try {
            if (replication == null || replication.isClosed()) {
                replication = SourceDatabase.connectReplication(config, "tablecdc " + flow + " copy");
            }
            stream = ReplicationStream.start(replication, slotName, config.publication(), consistentPoint);
        } catch (SQLException e) {
            if (!rejoining || !"55006".equals(e.getSQLState())) {
                throw e;
            }
            long now = System.nanoTime();
            if (slotBusySince == 0) {
                slotBusySince = now;
                slotBusyBoundMs = Math.max(SourceDatabase.walSenderTimeoutMs(control), SLOT_BUSY_GRACE_MS)
                        + SLOT_BUSY_GRACE_MS;
                log.info("flow {}, table {}: private slot {} is still in use by an earlier holder of the table ({});"
                        + " tried again every second, its walsender is ended after {} ms", flow, table, slotName,
                        e.getMessage(), SLOT_BUSY_GRACE_MS);
            }
            long busyMs = TimeUnit.NANOSECONDS.toMillis(now - slotBusySince);
            if (busyMs > slotBusyBoundMs) {
                throw e;
            }
            if (busyMs >= SLOT_BUSY_GRACE_MS) {
                List<Integer> ended = SourceDatabase.terminateSlotUser(control, slotName);
                if (!ended.isEmpty()) {
                    log.warn("flow {}, table {}: ended walsender(s) {} of private slot {}, still held {} ms after this"
                            + " copy task took the table's lease over", flow, table, ended, slotName, busyMs);
                }
            }
            Thread.sleep(1000);
            return;
        }
        slotBusySince = 0;
        catchupTarget = SourceDatabase.currentWal(control);
        step = Step.CATCHUP;
    }

    /** How long a rejoin waits for an earlier holder's walsender to leave its private slot before ending it. */
    static final long SLOT_BUSY_GRACE_MS = 10_000;
    /** When a rejoin first found its private slot in use (nanos), or 0. */
    private long slotBusySince;
    /** How long a rejoin may find its private slot in use before the copy fails. */
    private long slotBusyBoundMs;

    private void catchUp(List<SourceRecord> out) throws SQLException, InterruptedException {
        long deadline = System.nanoTime() + BUDGET_NANOS;
        // rows, not records: a block record holds many
        long emittedBefore = batcher.emittedRows();
        while (System.nanoTime() < deadline && batcher.emittedRows() - emittedBefore < config.batchRows()) {
            ByteBuffer buffer = stream.readPending();
            if (buffer == null) {
                if (idleSince == 0) {
                    idleSince = System.nanoTime();
                }
                Lsn received = Lsn.of(stream.getLastReceiveLSN().asLong());
                // past where the server was when the catch-up began, or nothing more to read for a moment: the
                // marker can go (when it goes only decides how long the apply task holds the table, not what is
                // sent: this copy reads on until the marker comes back)
                if (marker == null && !inTxn && (!received.isBefore(catchupTarget)
                        || System.nanoTime() - idleSince > IDLE_BEFORE_MARKER_NANOS)) {
                    marker = SourceDatabase.emitHandover(control, MARKER_PREFIX, markerContent(flow, table, owner));
                    log.info("flow {}, table {}: caught up; handover marker at {}", flow, table, marker);
                }
                if (!out.isEmpty()) {
                    break;
                }
                Thread.sleep(10);
                continue;
            }
            idleSince = 0;
            PgOutputMessage message = PgOutputParser.parse(buffer);
            if (message instanceof LogicalMessage m && !m.transactional() && MARKER_PREFIX.equals(m.prefix())
                    && m.lsn().equals(marker)) {
                step = Step.DRAIN_FINAL;
                return;
            }
            handle(message, out);
        }
        recordSynced();
    }

    private void handle(PgOutputMessage message, List<SourceRecord> out) throws SQLException {
        if (message instanceof Begin begin) {
            inTxn = true;
            xid = begin.xid();
            ordinal = 0;
            // a rejoin's private slot starts before its detach marker: what committed before it the apply task sent
            // (the server skips it already when asked to start at the marker; this holds whatever it does)
            skipTxn = rejoining && begin.finalLsn().isBefore(detachLsn);
            if (!skipTxn) {
                batcher.begin(begin.finalLsn(), begin.commitTime(), Instant.now());
            }
        } else if (message instanceof Commit commit) {
            if (!skipTxn) {
                out.addAll(batcher.commit(commit.endLsn()));
            }
            inTxn = false;
            skipTxn = false;
        } else if (skipTxn) {
            if (message instanceof Relation || message instanceof PgOutputMessage.Type) {
                changeBuilder.accept(message);
            }
        } else if (message instanceof Relation || message instanceof PgOutputMessage.Type) {
            changeBuilder.accept(message);
        } else if (message instanceof Insert || message instanceof Update || message instanceof Delete) {
            ordinal++;
            long oid = message instanceof Insert i ? i.relationOid()
                    : message instanceof Update u ? u.relationOid() : ((Delete) message).relationOid();
            if (changeBuilder.table(oid).equals(table)) {
                out.addAll(batcher.addAll(changeBuilder.changes(message)));
            }
        } else if (message instanceof Truncate truncate) {
            ordinal++;
            for (long oid : truncate.relationOids()) {
                if (changeBuilder.table(oid).equals(table)) {
                    out.addAll(batcher.add(Change.truncate(table, replayId(xid, ordinal, oid))));
                }
            }
        }
    }

    /** Waits for the catch-up's records, then moves the table to {@code catchup(marker)}. */
    private void handOver() throws InterruptedException {
        if (!synced()) {
            Thread.sleep(20);
            return;
        }
        if (catalog.copies().recordCopyProgress(flow, table, owner, attempt, rowsSent, Math.max(rowsTotal, rowsSent))
                && catalog.copies().markCopyCatchup(flow, table, owner, attempt, marker.toString())) {
            metrics.errorEpisodeEnded("copy");
            // an earlier copy task's stop left its unacknowledged records on the table: this copy made up for them
            try {
                catalog.progress().clearError(flow, table, UNACKNOWLEDGED);
            } catch (RuntimeException e) {
                log.debug("flow {}, table {}: cannot clear the error of an earlier copy task's stop ({})", flow, table,
                        e.toString());
            }
            if (rejoining) {
                log.info("flow {}, table {}: rejoined: handed back to the apply task at {} (detached at {}; attempt {},"
                        + " {} s)", flow, table, marker, detachLsn, attempt,
                        TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - startedAt));
                dropPrivateSlot();
                closeConnections();
                finished = true;
                return;
            }
            log.info("flow {}, table {}: handed over to the apply task at {} ({} rows copied, attempt {}, {} s, of"
                    + " which {} s paused for normalize)", flow, table, marker, rowsSent, attempt,
                    TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - startedAt),
                    TimeUnit.NANOSECONDS.toSeconds(pause.pausedNanos()));
        } else {
            log.warn("flow {}, table {}: copy task {} lost the table before its handover; another copy takes over",
                    flow, table, owner);
        }
        closeConnections();
        finished = true;
    }

    /**
     * After a rejoin: the private slot is no longer the table's. Dropped once its walsender has let go of it (the
     * apply task drops a slot no table holds at its next check if this does not).
     */
    private void dropPrivateSlot() throws InterruptedException {
        Resources.closeQuietly(stream, "the rejoin's replication stream");
        Resources.closeQuietly(replication, "the rejoin's replication connection");
        stream = null;
        replication = null;
        for (int i = 0; i < 20; i++) {
            try {
                if (SourceDatabase.dropSlot(control, slotName)) {
                    log.info("flow {}, table {}: dropped its private slot {}", flow, table, slotName);
                    return;
                }
                if (SourceDatabase.slot(control, slotName).isEmpty()) {
                    return;
                }
            } catch (SQLException e) {
                log.info("flow {}, table {}: cannot drop private slot {} ({}); the apply task drops it", flow, table,
                        slotName, e.getMessage());
                return;
            }
            Thread.sleep(100);
        }
        log.info("flow {}, table {}: private slot {} is still in use; the apply task drops it", flow, table, slotName);
    }

    /** Records acknowledged batches in the catalog; true once everything sent is acknowledged and recorded. */
    private boolean synced() {
        recordSynced();
        return batcher.drained() && unsynced.isEmpty();
    }

    /** Records the batches Kafka acknowledged so far (synced id and rows in the catalog, metrics). */
    private void recordSynced() {
        unsynced.addAll(batcher.drainSynced());
        Instant now = Instant.now();
        while (!unsynced.isEmpty()) {
            ChangeBatcher.Synced s = unsynced.get(0);
            if (!catalog.copies().recordCopySync(flow, s.table(), owner, attempt, s.batch(), now)) {
                throw new BatchIds.LeaseLostException("synced batch " + s.batch().batchId());
            }
            metrics.batchSynced(s.batch().batchId(), s.batch().rows());
            unsynced.remove(0);
        }
    }

    void acknowledged(SourceRecord record) {
        ChangeBatcher b = batcher;
        if (b != null) {
            b.acknowledged(record);
        }
    }

    /**
     * True while this copy's batches not yet normalized (sent to Connect, so synced ones and any still on their way to
     * Kafka) number {@code max.unnormalized.batches}: the step sends nothing, so no more than that many are ever
     * synced and not normalized. The catalog is read only when the count known here is at the limit (every half
     * second while paused).
     */
    private boolean backPressured() throws SQLException, InterruptedException {
        // batches Kafka acknowledged meanwhile are recorded while paused too (the catalog's synced id stays true)
        recordSynced();
        // released: the copy starts over only once the sink has loaded every batch it sent (a new attempt gets the
        // whole limit, and the old attempt's batches come before its truncate anyway)
        int limit = step == Step.RELEASED ? 1 : config.maxUnnormalizedBatches();
        forgetNormalized();
        long now = System.nanoTime();
        if (unnormalized.size() >= limit && (!pause.paused() || now - pauseCheckedAt >= PAUSE_RECHECK_NANOS)) {
            pauseCheckedAt = now;
            TableState state = catalog.progress().getTable(flow, table).orElse(null);
            if (state != null) {
                knownNormalized = Math.max(knownNormalized, state.normalizedBatchId());
            }
            forgetNormalized();
            if (unnormalized.size() >= limit) {
                // status shows where the copy waits, not where its last periodic progress write saw it: the rows
                // are written before the pause, so a pause seen in the catalog already has its copy's rows
                if (!pause.paused() && !catalog.copies().recordCopyProgress(flow, table, owner, attempt, rowsSent,
                        Math.max(rowsTotal, rowsSent))) {
                    throw new BatchIds.LeaseLostException("copy progress");
                }
                boolean began = catalog.progress().setPause(flow, table, pausedReason(), Instant.now());
                if (pause.begin()) {
                    pauseBeganAt = now;
                    metrics.paused(PAUSED_REASON);
                    pause.log("flow {}, table {}: {} copied batches wait for normalize"
                            + " (max.unnormalized.batches={}); the copy pauses after {} rows read",
                            flow, table, unnormalized.size(), limit, rowsSent);
                } else if (began) {
                    log.debug("flow {}, table {}: pause recorded again (another writer had cleared it)", flow, table);
                }
                if (abandoned) {
                    // the task stopped while this poll recorded the pause: the stop's clearing may have come first
                    endPause();
                    return true;
                }
            }
        }
        if (!pause.paused()) {
            return false;
        }
        if (unnormalized.size() < limit) {
            resume();
            return false;
        }
        if (step == Step.COPY && now - pauseBeganAt >= config.copyPauseMax().toNanos()) {
            releaseSnapshot(now);
        }
        if (!besideApply) {
            Thread.sleep(50);
        }
        return true;
    }

    /** The pause's reason as the catalog and the metrics show it: the snapshot held, or given up. */
    private String pausedReason() {
        return step == Step.RELEASED ? RELEASED_REASON : PAUSED_REASON;
    }

    /**
     * The pause outlasted {@code copy.pause.max.ms}: the copy gives its snapshot up (its readers' transactions end, the
     * temporary slot goes with its replication connection, the control connection closes) and keeps its claim; no
     * backend of it keeps an xmin while it waits. It starts over once the sink has loaded every batch it sent
     * ({@link #startOver}); the rows read so far are read again from the new snapshot.
     */
    private void releaseSnapshot(long now) {
        long pausedMs = TimeUnit.NANOSECONDS.toMillis(now - pauseBeganAt);
        String released = slotName;
        long rowsRead = rowsSent;
        closeSources();
        step = Step.RELEASED;
        releases++;
        rowsSent = 0;
        if (!catalog.copies().recordCopyProgress(flow, table, owner, attempt, 0, rowsTotal)) {
            throw new BatchIds.LeaseLostException("copy progress");
        }
        catalog.progress().setPause(flow, table, RELEASED_REASON, Instant.now());
        metrics.paused(RELEASED_REASON);
        log.warn("flow {}, table {}: copy attempt {} released its snapshot after {} s paused for the sink"
                + " (copy.pause.max.ms={}): its transactions ended and its temporary slot {} was dropped after {} rows"
                + " read; it starts over from a new snapshot once the sink has loaded the {} batches it sent (release {})",
                flow, table, attempt, pausedMs / 1000, config.copyPauseMax().toMillis(), released, rowsRead,
                unnormalized.size(), releases);
    }

    /**
     * Released, and the sink has loaded every batch the copy sent: once Kafka's acknowledgements of them are recorded
     * (they belong to this attempt's batcher), the copy starts over from a new snapshot.
     */
    private void startOver() throws InterruptedException {
        recordSynced();
        if (batcher != null && batcher.unacknowledged() > 0) {
            if (!besideApply) {
                Thread.sleep(20);
            }
            return;
        }
        log.info("flow {}, table {}: the sink has loaded every batch of the released copy; the copy starts over from a"
                + " new snapshot", flow, table);
        step = Step.START;
    }

    /** Counts the batches of records about to go to Connect (each batch's records come in one step). */
    private void sent(List<SourceRecord> out) {
        for (SourceRecord record : out) {
            if (record.sourceOffset() != null && record.sourceOffset().get(ChangeBatcher.BATCH_KEY) instanceof Number n
                    && (unnormalized.isEmpty() || n.longValue() > unnormalized.peekLast())) {
                unnormalized.addLast(n.longValue());
            }
        }
    }

    private void forgetNormalized() {
        while (!unnormalized.isEmpty() && unnormalized.peekFirst() <= knownNormalized) {
            unnormalized.removeFirst();
        }
    }

    private void resume() {
        long length = pause.end();
        metrics.resumed();
        catalog.progress().clearPause(flow, table, pausedReason());
        if (step == Step.RELEASED) {
            log.info("flow {}, table {}: normalize caught up after {} ms paused (the snapshot released after {} ms)",
                    flow, table, TimeUnit.NANOSECONDS.toMillis(length), config.copyPauseMax().toMillis());
            return;
        }
        pause.log("flow {}, table {}: normalize caught up; the copy goes on after {} ms paused", flow, table,
                TimeUnit.NANOSECONDS.toMillis(length));
    }

    /** The copy ends (handed over, failed, abandoned): a pause it recorded goes with it. */
    private void endPause() {
        if (!pause.abandon()) {
            return;
        }
        metrics.resumed();
        try {
            catalog.progress().clearPause(flow, table, PAUSED_REASON);
            catalog.progress().clearPause(flow, table, RELEASED_REASON);
        } catch (RuntimeException e) {
            log.debug("flow {}, table {}: clearing the copy's pause failed ({}); the next copy clears it", flow, table,
                    e.toString());
        }
    }

    private boolean renewLease() {
        long now = System.nanoTime();
        if (now - lastRenewAt < config.copyLease().toNanos() / 3) {
            return true;
        }
        lastRenewAt = now;
        if (catalog.copies().renewCopyLease(flow, table, owner, attempt, config.copyLease())) {
            lastConfirmedAt = now;
            return true;
        }
        lostLease();
        return false;
    }

    /**
     * Renews the lease before records are handed to Connect: false (and the copy stopped, nothing sent) when this
     * claim no longer holds the table, because its lease expired while this task stalled or another task claimed it.
     */
    private boolean fence() {
        long now = System.nanoTime();
        if (catalog.copies().renewCopyLease(flow, table, owner, attempt, config.copyLease())) {
            lastRenewAt = now;
            lastConfirmedAt = now;
            return true;
        }
        lostLease();
        return false;
    }

    private void lostLease() {
        log.warn("flow {}, table {}: copy task {} no longer holds the table (its lease expired, was taken over, or the"
                + " table left the flow; last renewed {} ms ago, copy.lease.ms={}); this copy stops", flow, table, owner,
                TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lastConfirmedAt), config.copyLease().toMillis());
        abandoned = true;
        closeConnections();
        finished = true;
    }

    private void fail(String reason) {
        Instant now = Instant.now();
        // the retry budget counts failed attempts since the table was last ready (interrupted ones do not count)
        int failed = failures + 1;
        // a failed rejoin is retried as a copy from scratch, which a table not copied cannot have
        boolean retry = failed <= config.maxTableRetries() && (!rejoining || config.copies(table));
        Instant next = retry ? now.plusMillis(config.tableRetryDelayMs()) : null;
        String error = "copy attempt " + attempt + " failed: " + reason
                + (retry ? "" : "; " + ApplyTask.resetHint(config, flow, table));
        metrics.errorEpisodeStarted("copy");
        try {
            catalog.copies().markCopyFailed(flow, table, owner, attempt, error, now, next);
        } catch (RuntimeException e) {
            log.warn("flow {}, table {}: cannot record the copy failure ({}); the lease will expire instead", flow, table,
                    e.getMessage());
        }
        if (retry) {
            log.error("flow {}, table {}: {}; retried in {} ms (failure {} of at most {})", flow, table, error,
                    config.tableRetryDelayMs(), failed, config.maxTableRetries() + 1);
        } else {
            log.error("flow {}, table {}: {}; no retries left (max.table.retries={}): the table stays errored until it"
                    + " is reset (see docs/operations.md); other tables carry on", flow, table, error,
                    config.maxTableRetries());
        }
        closeConnections();
        finished = true;
    }

    /** Whether this copy stopped because the source could not be reached: its task waits before the next claim. */
    boolean stoppedBySourceOutage() {
        return sourceUnreachable;
    }

    /** Stops the copy and gives the table back to {@code pending} (the task stops). */
    void abandon(String why) {
        if (finished) {
            return;
        }
        abandoned = true;
        finished = true;
        closeConnections();
        try {
            if (catalog.copies().releaseCopy(flow, table, owner)) {
                log.info("flow {}, table {}: copy stopped ({}); the table is pending again", flow, table, why);
            }
        } catch (RuntimeException e) {
            log.info("flow {}, table {}: copy stopped ({}); its lease expires in {}", flow, table, why, config.copyLease());
        }
    }

    /** The start of the error a copy task leaves on its table when it stops with records Kafka did not take. */
    static final String UNACKNOWLEDGED = "copy task stopped with ";

    /**
     * The task stops (Connect calls stop() after a failure too, once it gave up on the records in flight): the table
     * goes back to {@code pending}, and when Kafka had not acknowledged some of this copy's records, its row says so,
     * as the task's failure (a send Kafka refused) is otherwise seen only in Connect's status and the worker's log.
     * The error stays until a copy of the table hands it over.
     */
    void taskStopped() {
        ChangeBatcher b = batcher;
        int unacknowledged = finished || b == null ? 0 : b.unacknowledged();
        abandon("the task stopped");
        if (unacknowledged == 0) {
            return;
        }
        String error = UNACKNOWLEDGED + unacknowledged + " of its records not acknowledged by Kafka (owner " + owner
                + "): if the task failed, its cause is in the connector's status (GET /connectors/" + flow
                + "/status) and the worker's log, e.g. a record above the max.message.bytes of topic "
                + config.topic(table) + "; fix it and restart the task, and the table is copied again";
        try {
            catalog.progress().recordError(flow, table, error, Instant.now(), null);
            log.warn("flow {}, table {}: {}", flow, table, error);
        } catch (RuntimeException e) {
            log.warn("flow {}, table {}: {} (cannot record it in the catalog: {})", flow, table, error, e.toString());
        }
    }

    void close() {
        closeConnections();
    }

    private void closeReaders() {
        copies.clear();
        for (Connection reader : readers) {
            Resources.closeQuietly(reader, "a snapshot reader connection");
        }
        readers.clear();
    }

    /** Closes every connection of the copy; its temporary slot goes with the replication connection. */
    private void closeConnections() {
        endPause();
        closeSources();
    }

    /** Closes every connection to the source (the pause, if any, stays). */
    private void closeSources() {
        closeReaders();
        Resources.closeQuietly(stream, "the copy's replication stream");
        Resources.closeQuietly(replication, "the copy's replication connection");
        Resources.closeQuietly(control, "the copy's control connection");
        stream = null;
        replication = null;
        control = null;
    }

    /** {@code <slot.prefix>_copy_<8 hex of the main slot's hash>_}: the flow's copy slots, and only them. */
    static String copySlotPrefix(String slotPrefix, String mainSlot) {
        return io.tablecdc.common.FlowSlots.copySlotPrefix(slotPrefix, mainSlot);
    }

    /** The marker's content: flow, table and owner on three lines. */
    static String markerContent(String flow, String table, String owner) {
        return flow + "\n" + table + "\n" + owner;
    }

    /**
     * The table and the owner of a marker of {@code flow}, or null for another flow's marker. The flow is known and
     * the owner (the flow, "/copy-", digits) ends the content, so a table name holding a line break still parses.
     */
    static String[] parseMarker(String flow, String content) {
        if (!content.startsWith(flow + "\n")) {
            return null;
        }
        String rest = content.substring(flow.length() + 1);
        int ownerAt = rest.lastIndexOf("\n" + flow + "/copy-");
        if (ownerAt < 0) {
            return null;
        }
        return new String[] {rest.substring(0, ownerAt), rest.substring(ownerAt + 1)};
    }

    /** A TRUNCATE fragment's replay id, scoped to its table: {@code <xid>/<ordinal>/table/<oid>}. */
    static String replayId(long xid, int ordinal, long oid) {
        return xid + "/" + ordinal + "/table/" + oid;
    }

    private static String quote(String identifier) {
        return "\"" + identifier.replace("\"", "\"\"") + "\"";
    }
}
