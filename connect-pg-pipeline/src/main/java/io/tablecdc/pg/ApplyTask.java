package io.tablecdc.pg;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Set;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;
import org.postgresql.replication.LogSequenceNumber;
import org.postgresql.replication.PGReplicationStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.common.RecordHeaders.Op;
import io.tablecdc.common.Resources;
import io.tablecdc.common.Version;
import io.tablecdc.catalog.ApplyTakenOverException;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogUnavailableException;
import io.tablecdc.catalog.FlowIdentity;
import io.tablecdc.catalog.FlowIdentityMismatchException;
import io.tablecdc.catalog.FlowRecord;
import io.tablecdc.catalog.Phase;
import io.tablecdc.catalog.TableState;
import io.tablecdc.common.metrics.TableMetrics;
import io.tablecdc.pg.config.PgPipelineConfig;
import io.tablecdc.pg.config.TopicNames;
import io.tablecdc.pg.convert.ConversionException;
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
 * The apply task (task 0): owns the flow's main slot and streams every table of the publication whose phase lets
 * it, under the cut-off rule.
 *
 * <p>At start it registers the flow in {@code cdc_flow} (source system identifier, timeline, slot, publication)
 * and refuses a mismatch; creates the main slot {@code <slot.prefix>_<random>} if missing (its name is recorded
 * before it is created); drops copy slots crashed copy tasks left; puts every table of the publication in the
 * catalog; then streams pgoutput v1 from the flow's offset (or the slot's confirmed position when there is none).
 *
 * <p>Per table it is in one of three states. <b>Streaming from c</b> ({@code catchup(c)} or {@code ready(c)}, or a
 * table not copied, which becomes {@code ready} where the flow found it): it sends the table's changes of
 * transactions committed at or after {@code c}. <b>Skipping</b> ({@code pending}, {@code copying},
 * {@code errored}): a copy task owns the table's rows. <b>Holding from m</b>: the stream delivered the handover
 * marker of the table's copy task at {@code m} (see {@link TableCopy}); the changes committed at or after {@code m} are
 * this task's, but they are kept (not sent) until the copy task's records are all in Kafka and the catalog says
 * {@code catchup(m)}; then they are sent in order and the table streams. The catalog is read again every
 * {@value #REFRESH_BUSY_MS} ms while a table is not streaming (otherwise every {@value #REFRESH_IDLE_MS} ms), and
 * only between transactions. Tables in {@code catchup(c)} become {@code ready(c)} once the acknowledged
 * position passes {@code c}.
 *
 * <p>Changes become per-table batches in {@link ChangeBatcher}. The flow's position is confirmed to Postgres only
 * for offsets Connect has stored: {@link #commit()} (called after an offset flush) hands the position acknowledged
 * before the previous flush to the poll thread, which owns the replication stream and sends it.
 *
 * <p>A broken source connection (or catalog outage) closes both source connections; a later poll opens them again
 * with backoff and runs the checks of a start first ({@link #reconnect()}; the slot through {@link SlotManager}),
 * then reads on from the flow's {@link FlowPosition}. Held changes are bounded ({@code hold.max.bytes}, 20 x
 * {@code batch.rows}): past that, reading pauses, also inside a transaction, with standby status updates sent on.
 *
 * <p>A table whose change cannot be converted is marked {@code errored} in
 * the catalog and its changes are skipped from then on; the other tables carry on. A message that cannot be
 * decoded at all fails the task: it cannot be attributed to a table.
 *
 * <p>Why it is long: one poll thread owns the replication stream, the source connections and every table's run, and
 * each table's state may change only between transactions, so the stream loop, the runs and the reconnects stay in
 * one class; the publication's membership ({@link PublicationMembership}) and the held changes' limits
 * ({@link HoldBudget}) are classes of their own.
 */
public class ApplyTask extends SourceTask {
    private static final Logger log = LoggerFactory.getLogger(ApplyTask.class);
    static final long REFRESH_BUSY_MS = 200;
    static final long REFRESH_IDLE_MS = 2000;
    /** Batch ids reserved per catalog update. */
    static final int BATCH_ID_BLOCK = 100;
    private static final long POLL_BUDGET_NANOS = TimeUnit.MILLISECONDS.toNanos(500);
    private static final long POSITION_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(1);
    private static final long SLOT_BUSY_WAIT_MS = 60_000;
    /** Tells a stream whose connection died without closing (a black hole) from a quiet one. */
    private final StreamLiveness liveness = new StreamLiveness();
    static final long RECONNECT_BACKOFF_INITIAL_MS = 1_000;
    static final long RECONNECT_BACKOFF_MAX_MS = 30_000;

    private PgPipelineConfig config;
    private String flow;
    /** This start of the task, as {@code cdc_flow.apply_owner} records it when it takes the flow. */
    private String owner;
    private Catalog catalog;
    private Connection sql;
    /** Publication checks in a row that gave up waiting for a table's lock ({@link #checkPublication}). */
    private int publicationLockWaits;
    private Connection replication;
    private PGReplicationStream stream;
    private String slot;
    private SlotManager slots;
    private volatile ChangeBatcher batcher;
    private ChangeBuilder changeBuilder;
    private TableMetrics metrics;
    /** Set when an {@link ApplyAndCopyTask} shares these metrics with its copy half: they are that task's to close. */
    private TableMetrics sharedMetrics;
    private final Map<String, TableRun> tables = new HashMap<>();
    /** Tables left out because their topic clashes with another table's. */
    private final Map<String, TableRun> clashing = new HashMap<>();
    /** Which tables the publication holds, which are leaving it, which came back. */
    private PublicationMembership membership;
    private long refreshedAt;
    private long publicationCheckedAt;
    private Lsn readyCheckedAt;
    private boolean holdLimitLogged;
    /** What the changes held for tables being handed over weigh, against their limits. */
    private HoldBudget hold;
    /** Detaches tables whose ClickHouse side fell behind from the shared slot; looks after their private slots. */
    private Detacher detacher;
    private Lsn laggingCheckedAt;
    private long slotsCheckedAt;
    /** Size of the message being handled. */
    private int messageBytes;
    private long statusSentAt;
    private long releaseCheckedAt;
    private List<ChangeBatcher.Synced> unsyncedToCatalog = new ArrayList<>();

    /** The flow's position: where the stream (re)starts, what was emitted, stored and confirmed. */
    private volatile FlowPosition position;
    private long idleAt;
    private final Object lifecycle = new Object();
    private volatile boolean stopping;
    private boolean polling;
    /** While the source connections are down: when the next reconnect may run, and the backoff after it. */
    /** Whether {@link #begin} succeeded: until then poll tries it again (the catalog or the source was down). */
    private boolean started;
    private long reconnectAt;
    private long reconnectBackoffMs = RECONNECT_BACKOFF_INITIAL_MS;
    private int reconnectAttempts;

    // the open transaction
    private Lsn txnCommitLsn;
    private long txnXid;
    private int txnOrdinal;
    private boolean skipTxn;

    enum RunState { STREAMING, HOLDING, SKIPPING }

    /** A table as the apply task sees it. */
    private static final class TableRun {
        RunState state = RunState.SKIPPING;
        /** STREAMING: the cut-off (changes committed at or after it are sent); HOLDING: the marker's LSN. */
        Lsn lsn;
        /** STREAMING a table being detached: its detach marker's LSN (changes committed at or after it are not sent). */
        Lsn until;
        Phase phase;
        String reason;
    }

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        config = new PgPipelineConfig(props);
        hold = new HoldBudget(config.holdMaxBytes(), config.batchRows());
        flow = PgPipelineTaskConfig.of(props).flow();
        byte[] random = new byte[3];
        new SecureRandom().nextBytes(random);
        // a new owner per start, named with its worker's process (pid@host): the one an operator finds in the log
        owner = flow + "/apply-" + HexFormat.of().formatHex(random) + " on "
                + ManagementFactory.getRuntimeMXBean().getName();
        metrics = sharedMetrics != null ? sharedMetrics : TableMetrics.forSource(() -> context.pluginMetrics(), flow);
        begin();
    }

    /**
     * Opens the catalog and the source, runs the checks of a start and starts streaming. When the catalog or the
     * source cannot be reached (an outage, not a refusal), the task stays up and {@link #poll} tries again with
     * backoff, as after a broken connection; a refusal fails the task.
     *
     * @return whether the task streams now
     */
    private boolean begin() {
        try {
            if (catalog == null) {
                catalog = Catalog.open(config.catalog(), "source " + flow + " apply");
                slots = new SlotManager(flow, config, catalog, this::storedPosition);
                membership = new PublicationMembership(config, flow, catalog);
                detacher = new Detacher(config, flow, catalog, metrics);
            }
            startStreaming();
        } catch (FlowIdentityMismatchException e) {
            closeQuietly();
            throw new ConnectException(e.getMessage(), e);
        } catch (ApplyTakenOverException e) {
            ConnectException stop = takenOver(e);
            closeQuietly();
            throw stop;
        } catch (CatalogUnavailableException e) {
            return deferStart(e);
        } catch (SQLException e) {
            // a read of the publication that waited for a table's lock (a DDL queued behind a copy): tried again
            if (SourceDatabase.unreachable(e) || SourceDatabase.lockTimedOut(e)) {
                return deferStart(e);
            }
            closeQuietly();
            throw new ConnectException("flow " + flow + ": cannot start streaming from " + config.jdbcUrl() + ": "
                    + e.getMessage(), e);
        } catch (RuntimeException e) {
            closeQuietly();
            throw e;
        }
        started = true;
        if (reconnectAttempts > 0) {
            log.info("flow {}: started after {} failed attempt(s) to reach the source and the catalog", flow,
                    reconnectAttempts);
        }
        reconnectAttempts = 0;
        reconnectBackoffMs = RECONNECT_BACKOFF_INITIAL_MS;
        return true;
    }

    private boolean deferStart(Exception e) {
        closeSource();
        reconnectAttempts++;
        log.warn("flow {}: cannot start: {} (attempt {}); the task stays up and tries again in {} ms", flow,
                e.getMessage(), reconnectAttempts, reconnectBackoffMs);
        reconnectAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(reconnectBackoffMs);
        reconnectBackoffMs = Math.min(reconnectBackoffMs * 2, RECONNECT_BACKOFF_MAX_MS);
        return false;
    }

    private void startStreaming() throws SQLException {
        connectSource();
        SourceDatabase.SystemIdentity identity = SourceDatabase.identify(replication);
        FlowIdentity recorded = catalog.flows().getFlow(flow).map(FlowRecord::identity).orElse(null);
        slot = recorded == null ? null : recorded.slot();
        boolean acceptTimeline = FlowRefusals.check(flow, config, recorded, identity,
                slot == null ? Optional.empty() : SourceDatabase.slot(sql, slot));
        if (recorded != null) {
            // before this start's first write: an earlier apply task of the flow still running is fenced from now on
            takeFlow();
        }
        if (acceptTimeline && recorded.timeline() != null && recorded.timeline() != identity.timeline()) {
            // before the new timeline is recorded: a crash in between runs it again
            FailoverRecovery.afterPromotion(catalog, flow, replication, recorded.timeline(), identity.timeline());
        }
        if (slot == null) {
            slots.refuseSlotWithoutState(sql);
            slot = slots.newName();
        }
        register(identity, recorded, acceptTimeline);
        if (recorded == null) {
            // the flow's first start: its row exists from now on
            takeFlow();
        }
        SlotManager.Checked checked = slots.ensure(sql, replication, slot, null);
        slot = checked.slot();
        Lsn slotStart = checked.start();
        String stored = storedPosition(slot);
        position = new FlowPosition(stored == null ? slotStart : Lsn.max(Lsn.parse(stored), slotStart), slotStart);
        changeBuilder = new ChangeBuilder(oid -> SourceDatabase.primaryKey(sql, oid), config::arrayText);
        batcher = newBatcher(position.read());
        detacher.mainSlot(slot);
        detacher.abandonUnfinished(sql, catalog.progress().listTables(flow), null);
        List<String> stale = SourceDatabase.dropStaleSlots(sql, TableCopy.copySlotPrefix(config.slotPrefix(), slot));
        if (!stale.isEmpty()) {
            log.info("flow {}: dropped copy slots left by stopped copy tasks: {}", flow, stale);
        }
        initTables(slotStart);
        openStream();
        log.info("flow {}: apply task streaming publication {} from slot {} at {} ({} tables)", flow,
                config.publication(), slot, position.read(), tables.size());
    }

    /**
     * Takes the flow's apply epoch ({@link Catalog#takeApply}): every catalog write of this task carries it from now on,
     * and is refused ({@link ApplyTakenOverException}) once a later apply task of the flow has taken a higher one.
     */
    private void takeFlow() {
        long epoch = catalog.takeApply(flow, owner);
        log.info("flow {}: apply task {} took the flow (apply epoch {}); earlier apply tasks of the flow can no longer"
                + " change its catalog rows", flow, owner, epoch);
    }

    /**
     * Another apply task took the flow: this one was cut off or blocked while it was started again elsewhere. It writes
     * nothing more and fails, with the catalog's refusal as its reason; it is never retried as an outage.
     */
    private ConnectException takenOver(ApplyTakenOverException e) {
        log.error("{}", e.getMessage());
        closeSource();
        return e;
    }

    private ChangeBatcher newBatcher(Lsn start) {
        return new ChangeBatcher(flow, slot, config.heartbeatTopic(), config.batchRows(), config::topic,
                BatchIds.reserved(catalog, flow, BATCH_ID_BLOCK, BatchIds.fromOffsets(context.offsetStorageReader(), flow)),
                start, true).blocks(config.blockBytes())
                .limit(RecordLimit.of(config.originals()));
    }

    /** The flow's position Connect stores for {@code slotName} ({@code X/Y}), or null. */
    private String storedPosition(String slotName) {
        Map<String, Object> offset = context.offsetStorageReader().offset(ChangeBatcher.slotPartition(flow, slotName));
        return offset == null || offset.get(ChangeBatcher.LSN_KEY) == null ? null
                : offset.get(ChangeBatcher.LSN_KEY).toString();
    }

    /** Opens the regular and the replication connection to the source. */
    private void connectSource() throws SQLException {
        sql = SourceDatabase.connect(config, "tablecdc " + flow + " apply");
        // no statement of the apply task may queue behind a DDL that waits for a copy's lock (all tables would stall)
        SourceDatabase.boundLockWaits(sql, SourceDatabase.APPLY_LOCK_TIMEOUT_MS);
        replication = SourceDatabase.connectReplication(config, "tablecdc " + flow + " apply");
    }

    /**
     * Records the flow (first start) or checks it against {@code cdc_flow} (system identifier, slot, publication; the
     * timeline unless a promotion is accepted, which is then recorded).
     */
    private void register(SourceDatabase.SystemIdentity identity, FlowIdentity recorded, boolean acceptTimeline) {
        FlowRecord registered = catalog.flows().registerFlow(flow, new FlowIdentity(PgPipelineSourceTask.SOURCE_KIND,
                identity.systemIdentifier(), identity.timeline(), slot, config.publication(), null), null,
                acceptTimeline);
        if (acceptTimeline && recorded != null && recorded.timeline() != null
                && recorded.timeline() != identity.timeline()) {
            log.info("flow {}: the source moved from timeline {} to {} (a promoted standby); resuming from failover"
                    + " slot {}", flow, recorded.timeline(), identity.timeline(), slot);
        }
        slot = registered.identity().slot();
    }

    /**
     * After the source connections broke (a Postgres restart, a network cut, a catalog outage): opens both again and
     * runs the checks of a start before reading anything: the same cluster (system identifier) and timeline (a
     * promotion only with a failover slot), the same slot recorded in the catalog, and the slot still usable. A slot
     * the server invalidated is refused or recreated ({@code invalidated.slot.behavior}); a slot that is gone is
     * refused. A refusal fails the task (a {@link ConnectException}); a connection that cannot be opened yet throws
     * {@link SQLException} and is tried again with backoff.
     */
    private void reconnect() throws SQLException {
        closeSource();
        connectSource();
        SourceDatabase.SystemIdentity identity = SourceDatabase.identify(replication);
        FlowIdentity recorded = catalog.flows().getFlow(flow).map(FlowRecord::identity).orElse(null);
        if (recorded == null || !slot.equals(recorded.slot())) {
            throw new ConnectException("flow " + flow + " refuses to resume: the apply task streams from slot " + slot
                    + ", but the catalog (" + config.catalog().jdbcUrl() + ") now records "
                    + (recorded == null ? "no row for this flow in cdc_flow (it was deleted, or catalog.jdbc.url"
                    + " reaches another catalog)" : "slot " + recorded.slot() + " (cdc_flow.source_slot)")
                    + ". Nothing was read or changed. Point catalog.jdbc.url back at the flow's catalog and restart"
                    + " the task.");
        }
        boolean acceptTimeline = FlowRefusals.check(flow, config, recorded, identity, SourceDatabase.slot(sql, slot));
        if (acceptTimeline && recorded.timeline() != null && recorded.timeline() != identity.timeline()) {
            // a promotion accepted here gets the recovery a start runs, before the new timeline is recorded (a crash
            // in between runs it again); the tables it puts back to pending are followed at the next poll's catalog
            // read, before anything of the new timeline is read
            FailoverRecovery.afterPromotion(catalog, flow, replication, recorded.timeline(), identity.timeline());
            refreshedAt = System.nanoTime() - TimeUnit.MINUTES.toNanos(1);
        }
        register(identity, recorded, acceptTimeline);
        SlotManager.Checked checked = slots.ensure(sql, replication, slot,
                "the apply task was streaming from it at " + position.read() + " until the connection broke");
        if (checked.recreated()) {
            slot = checked.slot();
            restartOnNewSlot(checked.start());
        } else {
            position.serverConfirmed(checked.start());
            // detaches whose undo failed with the connection are undone now rather than at the next start
            detacher.abandonUnfinished(sql, catalog.progress().listTables(flow), position.read());
            // a task that was cut off (its worker frozen or partitioned) may find its tables sent by another task
            // meanwhile, with ids above the ones it holds: ids sent below those would be dropped by the sink as
            // already loaded
            batcher.forgetBatchIds();
        }
        openStream();
    }

    /**
     * The lost slot was replaced while the task ran: what was read from it is void (every table is pending, to be
     * copied again), so the position starts over at the new slot's, under the new slot's offset partition.
     */
    private void restartOnNewSlot(Lsn start) {
        detacher.mainSlot(slot);
        position = new FlowPosition(start, start);
        batcher = newBatcher(start);
        unsyncedToCatalog = new ArrayList<>();
        txnCommitLsn = null;
        skipTxn = false;
        hold.clear();
        for (TableState state : catalog.progress().listTables(flow)) {
            TableRun run = tables.computeIfAbsent(state.table(), t -> new TableRun());
            run.state = RunState.SKIPPING;
            run.lsn = null;
            follow(state.table(), run, state.phase(), state.phaseLsn(), state.detachLsn(), start, null);
        }
    }

    /**
     * A new reconnect attempt once the backoff allows it; false while the source is not back (the poll returns
     * nothing).
     */
    private boolean reconnected() throws InterruptedException {
        long now = System.nanoTime();
        if (now < reconnectAt) {
            Thread.sleep(Math.max(1, Math.min(100, TimeUnit.NANOSECONDS.toMillis(reconnectAt - now))));
            return false;
        }
        try {
            reconnect();
        } catch (SQLException | CatalogUnavailableException e) {
            closeSource();
            reconnectAttempts++;
            log.warn("flow {}: cannot reconnect to {} (attempt {}: {}); trying again in {} ms", flow, config.jdbcUrl(),
                    reconnectAttempts, e.getMessage(), reconnectBackoffMs);
            reconnectAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(reconnectBackoffMs);
            reconnectBackoffMs = Math.min(reconnectBackoffMs * 2, RECONNECT_BACKOFF_MAX_MS);
            return false;
        } catch (FlowIdentityMismatchException e) {
            closeSource();
            throw new ConnectException(e.getMessage(), e);
        } catch (ApplyTakenOverException e) {
            throw takenOver(e);
        } catch (RuntimeException e) {
            closeSource();
            throw e;
        }
        log.info("flow {}: reconnected to {} after {} failed attempt(s); the source passed the resume checks;"
                + " streaming from slot {} at {}", flow, config.jdbcUrl(), reconnectAttempts, slot, position.read());
        reconnectAttempts = 0;
        reconnectBackoffMs = RECONNECT_BACKOFF_INITIAL_MS;
        return true;
    }

    /** The connections broke: everything source-side is closed and reopened (with the checks) by a later poll. */
    private void disconnected() {
        closeSource();
        reconnectAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(reconnectBackoffMs);
        reconnectBackoffMs = Math.min(reconnectBackoffMs * 2, RECONNECT_BACKOFF_MAX_MS);
    }

    private void initTables(Lsn slotStart) throws SQLException {
        Map<String, String> publishedMembers = SourceDatabase.publicationMembers(sql, config.publication());
        List<String> published = List.copyOf(publishedMembers.keySet());
        if (published.isEmpty()) {
            throw new ConnectException("flow " + flow + ": publication " + config.publication() + " has no tables");
        }
        for (String table : published) {
            catalog.progress().initTable(flow, table, Phase.PENDING);
        }
        membership.start(publishedMembers);
        Map<String, TableState> states = new HashMap<>();
        List<String> followed = new ArrayList<>(published);
        for (TableState state : catalog.progress().listTables(flow)) {
            states.put(state.table(), state);
            if (membership.leftWhileStopped(sql, state, publishedMembers)) {
                followed.add(state.table());
            }
        }
        for (String table : followed) {
            TableRun run = new TableRun();
            if (topicClash(table, run)) {
                continue;
            }
            tables.put(table, run);
            TableState state = states.get(table);
            metrics.table(table).batchIdKnown(state == null ? 0 : state.syncedBatchId());
            follow(table, run, state == null ? Phase.PENDING : state.phase(), state == null ? null : state.phaseLsn(),
                    state == null ? null : state.detachLsn(), slotStart, null);
        }
        publicationCheckedAt = System.nanoTime();
    }

    /**
     * Brings a table's run in line with its catalog phase: a table not copied becomes {@code ready} at {@code at};
     * {@code catchup(c)}/{@code ready(c)} stream from {@code c}; {@code copying} with a recorded marker holds;
     * anything else is skipped. Held changes are released into {@code out} or discarded. Called between
     * transactions only.
     */
    private void follow(String table, TableRun run, Phase phase, String phaseLsn, String detachLsn, Lsn at,
                        List<SourceRecord> out) {
        Phase before = run.phase;
        if (phase == null) {
            // a row without a phase: deleted by hand and written again by another writer's upsert (a synced batch, the
            // sink's normalize); only the pipeline gives a table its phase, and it starts over as pending
            log.warn("flow {}, table {}: its catalog row has no phase (deleted by hand and written again by another"
                    + " writer?); taken as pending: {}", flow, table, config.copies(table) ? "it is copied again"
                    : "it streams on, not copied");
            catalog.phases().pendingIfUnknown(flow, table);
            phase = Phase.PENDING;
        }
        run.phase = phase;
        if (phase == Phase.PENDING && !config.copies(table)) {
            // a table that streams already goes on from where it streams (nothing it holds unsent is dropped)
            boolean streaming = run.state == RunState.STREAMING && run.lsn != null && run.until == null;
            Lsn from = streaming ? run.lsn : at;
            if (catalog.phases().markReady(flow, table, from.toString())) {
                log.info("flow {}, table {}: ready, streaming from {} (not copied)", flow, table, from);
                if (!streaming) {
                    stream(table, run, from, out);
                }
                run.phase = Phase.READY;
                return;
            }
            TableState now = catalog.progress().getTable(flow, table).orElse(null);
            // no recursion through pending: another writer moved the table on (e.g. a reset), follow that phase once
            if (now != null && now.phase() != null && now.phase() != Phase.PENDING) {
                follow(table, run, now.phase(), now.phaseLsn(), now.detachLsn(), at, out);
            }
            return;
        }
        switch (phase == null ? Phase.PENDING : phase) {
            case CATCHUP, READY -> {
                Lsn cutoff = Lsn.parse(phaseLsn);
                // a table being detached: its changes committed from its detach marker on are its private slot's
                Lsn until = phase == Phase.READY && detachLsn != null ? Lsn.parse(detachLsn) : null;
                if (!(run.state == RunState.STREAMING && cutoff.equals(run.lsn))) {
                    stream(table, run, cutoff, out);
                }
                run.until = until;
            }
            case LAGGING -> {
                skip(table, run);
                metrics.table(table).paused(Detacher.PAUSED_REASON);
                if (before != phase) {
                    log.info("flow {}, table {}: detached at {}; its changes wait in its private slot until the sink has"
                            + " loaded its batches and a copy task hands it back", flow, table, phaseLsn);
                }
            }
            case COPYING -> {
                if (phaseLsn != null) {
                    Lsn mark = Lsn.parse(phaseLsn);
                    if (run.state == RunState.HOLDING && mark.equals(run.lsn)) {
                        return;
                    }
                    skip(table, run);
                    run.state = RunState.HOLDING;
                    run.lsn = mark;
                    batcher.hold(table);
                    log.info("flow {}, table {}: holding its changes after {} until its copy task hands it over", flow,
                            table, mark);
                } else {
                    skip(table, run);
                }
            }
            default -> {
                skip(table, run);
                if (before != phase) {
                    log.info("flow {}, table {}: phase {}; its changes are left to its copy", flow, table, phase.sqlName());
                }
            }
        }
    }

    private void stream(String table, TableRun run, Lsn cutoff, List<SourceRecord> out) {
        if (run.state == RunState.HOLDING && cutoff.equals(run.lsn)) {
            List<SourceRecord> released = batcher.release(table);
            hold.gone(table);
            if (out != null) {
                out.addAll(released);
            }
            log.info("flow {}, table {}: handed over at {}; streaming ({} held records sent)", flow, table, cutoff,
                    released.size());
        } else {
            skip(table, run);
            log.info("flow {}, table {}: streaming changes committed from {}", flow, table, cutoff);
        }
        run.state = RunState.STREAMING;
        run.lsn = cutoff;
        run.until = null;
        run.reason = null;
        if (Detacher.PAUSED_REASON.equals(metrics.table(table).pausedReason())) {
            metrics.table(table).resumed();
            metrics.table(table).detachedWal(-1);
        }
        metrics.table(table).errorEpisodeEnded("apply");
    }

    /** Stops sending or holding a table's changes; its batch ids are looked up again when it streams again. */
    private void skip(String table, TableRun run) {
        if (run.state == RunState.HOLDING) {
            batcher.discard(table);
            hold.gone(table);
        } else if (run.state == RunState.STREAMING) {
            batcher.forget(table);
        }
        run.state = RunState.SKIPPING;
        run.lsn = null;
        run.until = null;
    }

    /** Reads the flow's tables from the catalog and follows phase changes (between transactions only). */
    private void refresh(List<SourceRecord> out) throws SQLException {
        long now = System.nanoTime();
        boolean busy = tables.values().stream().anyMatch(r -> r.state != RunState.STREAMING || r.phase == Phase.CATCHUP);
        if (now - refreshedAt < TimeUnit.MILLISECONDS.toNanos(busy ? REFRESH_BUSY_MS : REFRESH_IDLE_MS)) {
            return;
        }
        if (batcher.inTransaction() || txnCommitLsn != null) {
            // due, but only between transactions: this poll ends at the open transaction's commit, so that the next
            // one starts between transactions (polls that end once a batch's worth of rows went out would otherwise
            // all start inside one while transactions larger than batch.rows follow each other)
            refreshDue = true;
            return;
        }
        refreshDue = false;
        refreshedAt = now;
        if (now - publicationCheckedAt > TimeUnit.MILLISECONDS.toNanos(PublicationMembership.CHECK_MS)) {
            publicationCheckedAt = now;
            Map<String, String> published = checkPublication();
            // a table added to the publication that has not changed yet: copy it now rather than at its first change
            for (String table : published.keySet()) {
                if (!tables.containsKey(table) && !clashing.containsKey(table)) {
                    discovered(table, position.read(), out);
                }
            }
        }
        membership.leaveOncePassed(batcher.acknowledgedPosition(), this::left);
        Lsn acked = batcher.acknowledgedPosition();
        if (tables.values().stream().anyMatch(r -> r.phase == Phase.CATCHUP) && !acked.equals(readyCheckedAt)) {
            readyCheckedAt = acked;
            for (String table : catalog.phases().markCaughtUpReady(flow, acked.toString())) {
                log.info("flow {}, table {}: ready (the flow's acknowledged position {} passed its cut-off)", flow,
                        table, acked);
            }
        }
        if (tables.values().stream().anyMatch(r -> r.until != null) && !acked.equals(laggingCheckedAt)) {
            laggingCheckedAt = acked;
            for (String table : catalog.phases().markLagging(flow, acked.toString())) {
                log.info("flow {}, table {}: lagging (the flow's acknowledged position {} passed its detach marker)", flow,
                        table, acked);
            }
        }
        if (now - slotsCheckedAt > TimeUnit.MILLISECONDS.toNanos(PublicationMembership.CHECK_MS)) {
            slotsCheckedAt = now;
            detacher.checkSlots(sql, position.read());
        }
        List<TableState> states = catalog.progress().listTables(flow);
        for (TableState state : states) {
            TableRun run = tables.get(state.table());
            if (run != null) {
                Phase phase = state.phase();
                if (phase == Phase.ERRORED && !config.copies(state.table()) && state.nextRetryAt() != null
                        && !state.nextRetryAt().isAfter(Instant.now()) && catalog.phases().setPending(flow, state.table())) {
                    // a table not copied and reset (tablecdc-reset-table): no copy task claims it; it streams again
                    // from here, as a table not copied does where the flow finds it
                    phase = Phase.PENDING;
                }
                follow(state.table(), run, phase, state.phaseLsn(), state.detachLsn(), position.read(), out);
            }
        }
        Set<String> streamed = new HashSet<>();
        tables.forEach((table, run) -> {
            if (run.state == RunState.STREAMING && run.until == null) {
                streamed.add(table);
            }
        });
        detacher.consider(states, streamed);
    }

    /**
     * Reads the publication ({@link PublicationMembership#check}); an empty map, and another try at the next check,
     * when the read waited {@link SourceDatabase#APPLY_LOCK_TIMEOUT_MS} for a table's lock: a DDL or TRUNCATE queued
     * behind a copy's lock holds every later lock request on its table, and the stream of every table goes on
     * meanwhile.
     */
    private Map<String, String> checkPublication() throws SQLException {
        try {
            Map<String, String> published = membership.check(sql, tables.keySet());
            if (publicationLockWaits > 0) {
                log.info("flow {}: publication {} read again after {} check(s) that waited for a table's lock", flow,
                        config.publication(), publicationLockWaits);
                publicationLockWaits = 0;
            }
            return published;
        } catch (SQLException e) {
            if (!SourceDatabase.lockTimedOut(e)) {
                throw e;
            }
            if (publicationLockWaits++ == 0) {
                log.warn("flow {}: reading publication {} waited {} ms for a table's lock (a DDL or TRUNCATE queued"
                        + " behind a copy of that table holds every later lock request on it); tables keep streaming,"
                        + " tables that join or leave the publication are found once the lock is free; tried again"
                        + " every {} ms", flow, config.publication(), SourceDatabase.APPLY_LOCK_TIMEOUT_MS,
                        PublicationMembership.CHECK_MS);
            }
            return Map.of();
        }
    }

    /**
     * A table that left the publication, once Kafka has acknowledged everything the stream read up to the moment it
     * was found missing: this task stops following it, and the catalog shows it {@code errored} for good
     * ({@link PublicationMembership#left}).
     */
    private void left(String table) {
        TableRun run = tables.remove(table);
        if (run != null) {
            skip(table, run);
        }
        // a table waiting for a copy (its private slot lost, its copy failed, not copied yet) has in ClickHouse what it
        // had, without the changes that copy would have brought
        membership.left(table, run != null && (run.phase == Phase.PENDING || run.phase == Phase.ERRORED
                || run.phase == Phase.COPYING));
    }

    /** A table of the publication this task did not know: pending for a copy task, or ready here when not copied. */
    private void discovered(String table, Lsn at, List<SourceRecord> out) {
        catalog.progress().initTable(flow, table, Phase.PENDING);
        membership.discovered(sql, table);
        TableState state = catalog.progress().getTable(flow, table).orElseThrow();
        TableRun run = new TableRun();
        log.info("flow {}, table {}: new in publication {}", flow, table, config.publication());
        if (topicClash(table, run)) {
            return;
        }
        tables.put(table, run);
        follow(table, run, state.phase(), state.phaseLsn(), state.detachLsn(), at, out);
    }

    private void openStream() throws SQLException {
        changeBuilder.clear();
        long deadline = System.currentTimeMillis() + SLOT_BUSY_WAIT_MS;
        while (true) {
            try {
                if (replication == null || replication.isClosed()) {
                    replication = SourceDatabase.connectReplication(config, "tablecdc " + flow + " apply");
                }
                stream = ReplicationStream.start(replication, slot, config.publication(), position.read());
                liveness.streamOpened();
                return;
            } catch (SQLException e) {
                // after a restart the previous task's walsender may still hold the slot for a moment
                boolean busy = "55006".equals(e.getSQLState());
                if (!busy || System.currentTimeMillis() > deadline || stopping) {
                    throw e;
                }
                log.info("flow {}: slot {} is still active (previous task?); retrying", flow, slot);
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw e;
                }
            }
        }
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        synchronized (lifecycle) {
            if (stopping) {
                return null;
            }
            polling = true;
        }
        try {
            return pollStream();
        } finally {
            synchronized (lifecycle) {
                polling = false;
                if (stopping) {
                    closeQuietly();
                }
            }
        }
    }

    /**
     * The catalog read of {@link #refresh} came due inside a transaction: the poll ends at the transaction's commit
     * (between transactions), and the next poll reads the catalog.
     */
    private boolean refreshDue;

    private List<SourceRecord> pollStream() throws InterruptedException {
        List<SourceRecord> out = new ArrayList<>();
        if (!started) {
            long now = System.nanoTime();
            if (now < reconnectAt) {
                Thread.sleep(Math.max(1, Math.min(100, TimeUnit.NANOSECONDS.toMillis(reconnectAt - now))));
                return null;
            }
            if (!begin()) {
                return null;
            }
        }
        if (stream == null && !reconnected()) {
            return null;
        }
        try {
            liveness.check(sql, replication, slot);
            applyConfirm();
            refresh(out);
            long deadline = System.nanoTime() + POLL_BUDGET_NANOS;
            // rows, not records: a block record holds many
            long emittedBefore = batcher.emittedRows();
            while (!stopping) {
                if (hold.full(batcher.heldRows())) {
                    // held tables wait for their copy tasks; reading on would only grow what is held (also in the
                    // middle of a transaction: the rest of it stays with the server until a table is handed over)
                    if (!holdLimitLogged) {
                        holdLimitLogged = true;
                        log.warn("flow {}: {} changes ({} bytes) held for tables being handed over (limits {} changes,"
                                + " {} bytes); reading pauses until their copy tasks finish", flow, batcher.heldRows(),
                                hold.bytes(), hold.maxRows(), config.holdMaxBytes());
                    }
                    keepAlive();
                    if (batcher.inTransaction()) {
                        releaseHandedOver(out);
                    }
                    Thread.sleep(50);
                    break;
                }
                holdLimitLogged = false;
                ByteBuffer buffer = stream.readPending();
                if (buffer == null) {
                    idle();
                    // caught up with the server: send what this poll read rather than wait for more
                    if (!out.isEmpty() || System.nanoTime() > deadline
                            || (batcher.hasUnsent() && !batcher.inTransaction())) {
                        break;
                    }
                    Thread.sleep(10);
                    continue;
                }
                messageBytes = buffer.remaining();
                handle(PgOutputParser.parse(buffer), out);
                if (batcher.emittedRows() - emittedBefore >= config.batchRows() || System.nanoTime() > deadline
                        || (refreshDue && !batcher.inTransaction() && txnCommitLsn == null)) {
                    break;
                }
            }
            // the transactions read in this poll become one batch per table (batch ids may need the catalog)
            out.addAll(batcher.flush());
        } catch (ApplyTakenOverException e) {
            // what this poll read goes nowhere: the task that took the flow reads it again
            throw takenOver(e);
        } catch (SQLException | CatalogUnavailableException e) {
            if (stopping) {
                return null;
            }
            // the open transaction is read again from the end of the last one handed to Connect
            log.warn("flow {}: {} failed ({}); reconnecting (with the resume checks) and reading again from {}", flow,
                    e instanceof SQLException ? "the source connection" : "the catalog", e.getMessage(), position.read());
            batcher.abort();
            txnCommitLsn = null;
            skipTxn = false;
            hold.aborted();
            disconnected();
            // records of transactions that committed before the failure are tracked already: they go out
            return out.isEmpty() ? null : out;
        }
        syncToCatalog();
        // with connector-defined Kafka transactions (exactly-once worker) this poll's records are one Kafka
        // transaction: the position they reach goes with them, so a restart resumes exactly after what committed;
        // otherwise the position waits for Kafka's acknowledgements (at most one record a second)
        boolean transactional = context.transactionContext() != null;
        Lsn safe = transactional ? batcher.emittedPosition() : batcher.safePosition();
        long now = System.nanoTime();
        if (position.emitDue(safe, now, transactional ? 0 : POSITION_INTERVAL_NANOS)) {
            out.add(batcher.positionRecord(safe));
            position.emitted(safe, now);
        }
        return out.isEmpty() ? null : out;
    }

    /** While no transaction is open and nothing is pending, lets the position follow the server's. */
    private void idle() {
        long now = System.nanoTime();
        if (batcher.inTransaction() || txnCommitLsn != null || now - idleAt < TimeUnit.MILLISECONDS.toNanos(config.heartbeatIntervalMs())) {
            return;
        }
        idleAt = now;
        Lsn received = Lsn.of(stream.getLastReceiveLSN().asLong());
        if (received.isAfter(position.read())) {
            position.readTo(received);
            batcher.idle(received);
        }
    }

    private void handle(PgOutputMessage message, List<SourceRecord> out) throws SQLException {
        if (message instanceof Begin begin) {
            // the server may repeat transactions before the offset's position: they are in Kafka already
            skipTxn = begin.finalLsn().isBefore(position.read());
            txnCommitLsn = begin.finalLsn();
            txnXid = begin.xid();
            txnOrdinal = 0;
            if (!skipTxn) {
                batcher.begin(begin.finalLsn(), begin.commitTime(), Instant.now());
            }
        } else if (message instanceof Commit commit) {
            hold.committed();
            if (!skipTxn) {
                out.addAll(batcher.commit(commit.endLsn()));
                position.readTo(commit.endLsn());
            }
            txnCommitLsn = null;
            skipTxn = false;
        } else if (message instanceof Relation relation) {
            changeBuilder.accept(relation);
            String table = relation.qualifiedName();
            if (!tables.containsKey(table) && !clashing.containsKey(table)) {
                // a table added to the publication while the flow runs: copied (it is pending for a copy task, whose
                // snapshot covers this transaction), or, when not copied, streamed from this transaction on
                discovered(table, txnCommitLsn != null ? txnCommitLsn : position.read(), out);
            }
        } else if (message instanceof PgOutputMessage.Type type) {
            changeBuilder.accept(type);
        } else if (message instanceof Insert || message instanceof Update || message instanceof Delete) {
            txnOrdinal++;
            change(message, out);
        } else if (message instanceof Truncate truncate) {
            txnOrdinal++;
            if (skipTxn) {
                return;
            }
            // one fragment per table, each its own batch with a replay id scoped to its table
            for (long oid : truncate.relationOids()) {
                String table = changeBuilder.table(oid);
                if (included(table)) {
                    out.addAll(batcher.add(Change.truncate(table, TableCopy.replayId(txnXid, txnOrdinal, oid))));
                }
            }
        } else if (message instanceof LogicalMessage marker && !marker.transactional()
                && TableCopy.MARKER_PREFIX.equals(marker.prefix())) {
            handoverMarker(marker, out);
        } else if (message instanceof LogicalMessage marker && !marker.transactional()
                && Detacher.MARKER_PREFIX.equals(marker.prefix())) {
            detachMarker(marker);
        }
        // Origin, other logical messages: nothing to do
    }

    /** Whether the open transaction's changes of {@code table} are this task's (the cut-off rule). */
    private boolean included(String table) {
        TableRun run = tables.get(table);
        return run != null && keeps(run.state, run.lsn, run.until, txnCommitLsn);
    }

    /**
     * The cut-off rule: a table streaming from {@code c} keeps changes committed at or after {@code c}; a table held
     * at marker {@code m} keeps those committed at or after {@code m} as well. {@code m} is the end of the marker's
     * WAL record, where the next record may start: a transaction whose commit record directly follows the marker
     * has commit LSN {@code m}, comes after the marker in every stream and so is not the copy's. A skipped table
     * keeps none.
     */
    static boolean keeps(RunState state, Lsn lsn, Lsn commitLsn) {
        return keeps(state, lsn, null, commitLsn);
    }

    /**
     * {@link #keeps(RunState, Lsn, Lsn)} for a streamed table being detached at marker {@code until} (null: none):
     * changes committed at or after {@code until} are its private slot's (whose consistent point lies before the
     * marker), the ones committed before it are this task's; {@code until} is the end of the marker's record, so the
     * boundary is the copy handover's with the sides swapped.
     */
    static boolean keeps(RunState state, Lsn lsn, Lsn until, Lsn commitLsn) {
        return switch (state) {
            case STREAMING -> !commitLsn.isBefore(lsn) && (until == null || commitLsn.isBefore(until));
            case HOLDING -> !commitLsn.isBefore(lsn);
            case SKIPPING -> false;
        };
    }

    /**
     * A detach marker ({@link Detacher}): if the catalog still detaches the table with the marker's private slot, the
     * marker's LSN is recorded and the table's changes committed from it on are no longer sent.
     */
    private void detachMarker(LogicalMessage marker) {
        String[] parts = Detacher.parseMarker(flow, marker.contentText());
        if (parts == null) {
            return;
        }
        String table = parts[0];
        TableRun run = tables.get(table);
        if (run == null || run.state != RunState.STREAMING) {
            return;
        }
        if (!catalog.phases().markDetached(flow, table, parts[1], marker.lsn().toString())) {
            log.info("flow {}, table {}: ignoring the detach marker of slot {} at {} (the table is not detached with it)",
                    flow, table, parts[1], marker.lsn());
            return;
        }
        run.until = marker.lsn();
        log.info("flow {}, table {}: detached at {}: its changes committed from there on are left to private slot {}",
                flow, table, marker.lsn(), parts[1]);
    }

    /**
     * A copy task's handover marker: if that task still holds the table, the marker's LSN is recorded and the
     * table's later changes are held until the copy task moves it to {@code catchup(marker)}.
     */
    private void handoverMarker(LogicalMessage marker, List<SourceRecord> out) {
        String[] parts = TableCopy.parseMarker(flow, marker.contentText());
        if (parts == null) {
            return;
        }
        String table = parts[0];
        TableRun run = tables.get(table);
        if (run == null || run.state == RunState.STREAMING) {
            return;
        }
        if (!catalog.phases().markHandover(flow, table, parts[1], marker.lsn().toString())) {
            log.info("flow {}, table {}: ignoring the handover marker of copy task {} at {} (it no longer holds the table)",
                    flow, table, parts[1], marker.lsn());
            return;
        }
        TableState state = catalog.progress().getTable(flow, table).orElseThrow();
        follow(table, run, state.phase(), state.phaseLsn(), state.detachLsn(), position.read(), out);
    }

    private void change(PgOutputMessage message, List<SourceRecord> out) throws SQLException {
        if (skipTxn) {
            return;
        }
        long oid = message instanceof Insert i ? i.relationOid()
                : message instanceof Update u ? u.relationOid() : ((Delete) message).relationOid();
        String table = changeBuilder.table(oid);
        if (!included(table)) {
            return;
        }
        try {
            // a row above Kafka's record limit is refused here too (RecordLimit.TooLarge): its table only stops
            out.addAll(batcher.addAll(changeBuilder.changes(message)));
        } catch (ConversionException e) {
            failTable(table, tables.get(table), e.getMessage());
            return;
        }
        if (tables.get(table).state == RunState.HOLDING) {
            hold.held(table, messageBytes);
        }
    }

    /**
     * While reading is paused the server hears from this task anyway: a standby status update at least every second,
     * so that wal_sender_timeout does not end the connection.
     */
    private void keepAlive() throws SQLException {
        long now = System.nanoTime();
        if (now - statusSentAt >= TimeUnit.SECONDS.toNanos(1)) {
            statusSentAt = now;
            stream.forceUpdateStatus();
        }
    }

    /**
     * Paused in the middle of a transaction: the catalog is read for held tables whose copy task has handed them over
     * ({@code catchup} at the held marker), and their held changes are sent, so that reading can go on. A held table
     * the catalog no longer shows as {@code copying} at the held marker (its copy task died after writing the marker,
     * and another copy attempt claimed the table, or even handed it over at a later marker) has its held changes
     * dropped: they are all committed before the new attempt's marker (a transaction committed after that marker comes
     * after it in the stream, and reading the marker would have moved the table on), so the new copy covers them.
     * Without that, reading would stay paused for ever, waiting for a marker it can no longer reach. Other phase
     * changes wait for the end of the transaction.
     */
    private void releaseHandedOver(List<SourceRecord> out) {
        long now = System.nanoTime();
        if (now - releaseCheckedAt < TimeUnit.MILLISECONDS.toNanos(REFRESH_BUSY_MS)) {
            return;
        }
        releaseCheckedAt = now;
        for (Map.Entry<String, TableRun> entry : tables.entrySet()) {
            TableRun run = entry.getValue();
            if (run.state != RunState.HOLDING) {
                continue;
            }
            TableState state = catalog.progress().getTable(flow, entry.getKey()).orElse(null);
            if (state == null) {
                continue;
            }
            boolean atHeldMarker = state.phaseLsn() != null && Lsn.parse(state.phaseLsn()).equals(run.lsn);
            if (atHeldMarker && (state.phase() == Phase.CATCHUP || state.phase() == Phase.READY)) {
                run.phase = state.phase();
                stream(entry.getKey(), run, run.lsn, out);
            } else if (!(atHeldMarker && state.phase() == Phase.COPYING)) {
                log.info("flow {}, table {}: its copy task's marker at {} is no longer the table's ({} {}); dropping the"
                        + " changes held for it", flow, entry.getKey(), run.lsn, state.phase() == null ? "pending"
                        : state.phase().sqlName(), state.phaseLsn() == null ? "" : "at " + state.phaseLsn());
                skip(entry.getKey(), run);
                run.phase = state.phase();
            }
        }
    }

    private void failTable(String table, TableRun run, String error) {
        Instant now = Instant.now();
        // copied tables are copied again after table.retry.delay.ms, up to max.table.retries failures since ready
        boolean copied = config.copies(table);
        Instant retryAt = copied && catalog.copies().copyFailures(flow, table) + 1 <= config.maxTableRetries()
                ? now.plusMillis(config.tableRetryDelayMs()) : null;
        // the catalog first: if it is unreachable the transaction is read again and the table fails then
        catalog.phases().markStreamFailed(flow, table, retryAt == null ? error + "; " + resetHint(config, flow, table) : error,
                now, retryAt, copied);
        skip(table, run);
        run.phase = Phase.ERRORED;
        run.reason = error;
        metrics.table(table).errorEpisodeStarted("apply");
        if (retryAt != null) {
            log.error("flow {}, table {}: {}; the table is marked errored and will be copied again from {}; other tables"
                    + " carry on", flow, table, error, retryAt);
        } else {
            log.error("flow {}, table {}: {}; the table is marked errored and its changes are skipped, other tables"
                    + " carry on", flow, table, error);
        }
    }

    /**
     * A table whose topic Kafka would take for another table's of the flow ({@code .} and {@code _} the same) is
     * marked errored for good, with the reason, and its changes are skipped; the table found first keeps its topic
     * and every other table carries on. {@code validate()} reports the same clash before the flow starts.
     */
    private boolean topicClash(String table, TableRun run) {
        String topic = config.topic(table);
        for (String other : tables.keySet()) {
            if (!other.equals(table) && TopicNames.clashKey(config.topic(other)).equals(TopicNames.clashKey(topic))) {
                String error = "its topic " + topic + " clashes with topic " + config.topic(other) + " of table " + other
                        + " (Kafka takes '.' and '_' as the same character in topic names), so its changes are"
                        + " skipped: rename one of the tables or leave one out of the publication, then copy it again"
                        + " with tablecdc-reset-table --flow " + flow + " --table " + table;
                catalog.phases().markErrored(flow, table, null, error, Instant.now(), null);
                run.state = RunState.SKIPPING;
                run.phase = Phase.ERRORED;
                run.reason = error;
                clashing.put(table, run);
                log.error("flow {}, table {}: {}", flow, table, error);
                return true;
            }
        }
        return false;
    }

    /** What the operator does with a table that stays errored: fix the cause, then have it copied again. */
    static String resetHint(PgPipelineConfig config, String flow, String table) {
        return (config.copies(table) ? "no retries left (max.table.retries=" + config.maxTableRetries() + ")"
                + ": fix the cause, then copy it again with" : "not copied (table.sync.copy), so it is not retried:"
                + " fix the cause, then restart it with") + " tablecdc-reset-table --flow " + flow + " --table " + table
                + " (docs/operations.md, Reset one Postgres table)";
    }

    private void syncToCatalog() {
        List<ChangeBatcher.Synced> pending = new ArrayList<>(unsyncedToCatalog);
        pending.addAll(batcher.drainSynced());
        unsyncedToCatalog = new ArrayList<>();
        Instant now = Instant.now();
        for (int i = 0; i < pending.size(); i++) {
            ChangeBatcher.Synced synced = pending.get(i);
            try {
                catalog.progress().recordSync(flow, synced.table(), synced.batch(), now);
                TableMetrics.Table m = metrics.table(synced.table());
                m.batchSynced(synced.batch().batchId(), synced.batch().rows());
                if (synced.batch().firstRowCommitTime() != null) {
                    // a pg batch is (part of) one transaction: its commit time is its newest
                    m.syncedUpTo(synced.batch().firstRowCommitTime());
                }
            } catch (ApplyTakenOverException e) {
                throw takenOver(e);
            } catch (RuntimeException e) {
                log.warn("flow {}, table {}: cannot record batch {} in the catalog ({}); retrying", flow, synced.table(),
                        synced.batch().batchId(), e.getMessage());
                unsyncedToCatalog.addAll(pending.subList(i, pending.size()));
                return;
            }
        }
    }

    /** Sends the position {@link #commit()} found stored to the server (the stream belongs to this thread). */
    private void applyConfirm() throws SQLException {
        Lsn lsn = position.takeToConfirm();
        if (lsn == null) {
            return;
        }
        LogSequenceNumber pg = LogSequenceNumber.valueOf(lsn.value());
        stream.setFlushedLSN(pg);
        stream.setAppliedLSN(pg);
        stream.forceUpdateStatus();
        log.debug("flow {}: confirmed {} to slot {}", flow, lsn, slot);
    }

    @Override
    public void commitRecord(SourceRecord record, RecordMetadata metadata) {
        if (batcher != null) {
            batcher.acknowledged(record);
        }
    }

    /**
     * Called after Connect flushed offsets. A position record acknowledged before the previous call was in this
     * flush's snapshot (Connect snapshots acknowledged offsets after the previous commit returned), so its LSN is
     * stored: that one is confirmed, never a newer one.
     */
    @Override
    public void commit() {
        if (batcher == null) {
            return;
        }
        position.committed(batcher.acknowledgedPosition());
    }

    /** Closes the connections now, or, while a poll runs, lets that poll close them when it returns. */
    @Override
    public void stop() {
        synchronized (lifecycle) {
            stopping = true;
            if (!polling) {
                closeQuietly();
            }
        }
    }

    /** Closes the stream and both source connections. */
    private void closeSource() {
        // closing the stream waits for the server's answer: on a connection that died without closing it would wait
        // for ever, so the close is bounded
        StreamLiveness.boundWaits(replication);
        StreamLiveness.boundWaits(sql);
        Resources.closeQuietly(stream, "the replication stream");
        Resources.closeQuietly(replication, "the replication connection");
        Resources.closeQuietly(sql, "the source connection");
        stream = null;
        replication = null;
        sql = null;
    }

    private void closeQuietly() {
        closeSource();
        if (detacher != null) {
            detacher.close();
        }
        Resources.closeQuietly(catalog, "the catalog");
        Resources.closeQuietly(sharedMetrics != null ? null : metrics, "the metrics");
    }

    /** Before {@link #start}: count into {@code metrics}, which the caller closes, instead of into metrics of its own. */
    void shareMetrics(TableMetrics metrics) {
        this.sharedMetrics = metrics;
    }
}
