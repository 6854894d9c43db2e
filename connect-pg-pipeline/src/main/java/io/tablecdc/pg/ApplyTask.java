package io.tablecdc.pg;

import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.errors.RetriableException;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;
import org.postgresql.PGConnection;
import org.postgresql.replication.LogSequenceNumber;
import org.postgresql.replication.PGReplicationStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.common.RecordHeaders.Op;
import io.tablecdc.common.Version;
import io.tablecdc.common.catalog.Catalog;
import io.tablecdc.common.catalog.CatalogUnavailableException;
import io.tablecdc.common.catalog.FlowIdentity;
import io.tablecdc.common.catalog.FlowIdentityMismatchException;
import io.tablecdc.common.catalog.FlowRecord;
import io.tablecdc.common.catalog.Phase;
import io.tablecdc.common.catalog.TableState;
import io.tablecdc.common.metrics.TableMetrics;
import io.tablecdc.pg.ChangeBatcher.Change;
import io.tablecdc.pg.config.PgPipelineConfig;
import io.tablecdc.pg.convert.ConversionException;
import io.tablecdc.pg.wire.Lsn;
import io.tablecdc.pg.wire.PgOutputDecoder;
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
 * <p>A table whose change cannot be converted (or carries an unchanged TOAST value) is marked {@code errored} in
 * the catalog and its changes are skipped from then on; the other tables carry on. A message that cannot be
 * decoded at all fails the task: it cannot be attributed to a table.
 */
public class ApplyTask extends SourceTask {
    private static final Logger log = LoggerFactory.getLogger(ApplyTask.class);
    static final long REFRESH_BUSY_MS = 200;
    static final long REFRESH_IDLE_MS = 2000;
    private static final long PUBLICATION_CHECK_MS = 10_000;
    /** Batch ids reserved per catalog update. */
    static final int BATCH_ID_BLOCK = 100;
    private static final long POLL_BUDGET_NANOS = TimeUnit.MILLISECONDS.toNanos(500);
    private static final long POSITION_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(1);
    private static final long SLOT_BUSY_WAIT_MS = 60_000;

    private PgPipelineConfig config;
    private String flow;
    private Catalog catalog;
    private Connection sql;
    private Connection replication;
    private PGReplicationStream stream;
    private String slot;
    private ChangeBatcher batcher;
    private ChangeDecoder decoder;
    private TableMetrics metrics;
    private final Map<String, TableRun> tables = new HashMap<>();
    private long refreshedAt;
    private long publicationCheckedAt;
    private Lsn readyCheckedAt;
    private boolean holdLimitLogged;
    private final AtomicReference<Lsn> toConfirm = new AtomicReference<>();
    private List<ChangeBatcher.Synced> unsyncedToCatalog = new ArrayList<>();

    /** Where the stream (re)starts: the end of the last transaction whose records were all handed to Connect. */
    private Lsn resumeFrom;
    private Lsn confirmed;
    private Lsn positionEmitted;
    private long positionEmittedAt;
    private long idleAt;
    private final Object lifecycle = new Object();
    private volatile boolean stopping;
    private boolean polling;
    private Lsn ackedAtLastCommit;

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
        flow = props.getOrDefault(PgPipelineSourceTask.FLOW_PROP, props.getOrDefault("name", "pg-pipeline"));
        catalog = Catalog.open(config.catalog(), "source " + flow + " apply");
        metrics = TableMetrics.forSource(() -> context.pluginMetrics(), flow);
        try {
            sql = SourceDatabase.connect(config, "tablecdc " + flow + " apply");
            replication = SourceDatabase.connectReplication(config, "tablecdc " + flow + " apply");
            SourceDatabase.SystemIdentity identity = SourceDatabase.identify(replication);
            FlowIdentity recorded = catalog.getFlow(flow).map(FlowRecord::identity).orElse(null);
            slot = recorded == null ? null : recorded.slot();
            boolean acceptTimeline = FlowRefusals.check(flow, config, recorded, identity,
                    slot == null ? Optional.empty() : SourceDatabase.slot(sql, slot));
            if (acceptTimeline && recorded.timeline() != null && recorded.timeline() != identity.timeline()) {
                // before the new timeline is recorded: a crash in between runs it again
                FailoverRecovery.afterPromotion(catalog, flow, replication, recorded.timeline(), identity.timeline());
            }
            if (slot == null) {
                refuseSlotWithoutState();
                byte[] random = new byte[8];
                new SecureRandom().nextBytes(random);
                slot = config.slotPrefix() + "_" + HexFormat.of().formatHex(random);
            }
            FlowRecord registered = catalog.registerFlow(flow, new FlowIdentity(PgPipelineSourceTask.SOURCE_KIND,
                    identity.systemIdentifier(), identity.timeline(), slot, config.publication(), null), null,
                    acceptTimeline);
            if (acceptTimeline && recorded != null && recorded.timeline() != null
                    && recorded.timeline() != identity.timeline()) {
                log.info("flow {}: the source moved from timeline {} to {} (a promoted standby); resuming from failover"
                        + " slot {}", flow, recorded.timeline(), identity.timeline(), slot);
            }
            slot = registered.identity().slot();
            Lsn slotStart = ensureSlot();
            Map<String, Object> offset = context.offsetStorageReader().offset(ChangeBatcher.slotPartition(flow, slot));
            Lsn offsetLsn = offset == null || offset.get(ChangeBatcher.LSN_KEY) == null ? null
                    : Lsn.parse(offset.get(ChangeBatcher.LSN_KEY).toString());
            resumeFrom = offsetLsn == null ? slotStart : Lsn.max(offsetLsn, slotStart);
            confirmed = slotStart;
            ackedAtLastCommit = resumeFrom;
            positionEmitted = resumeFrom;
            decoder = new ChangeDecoder(oid -> SourceDatabase.primaryKey(sql, oid));
            batcher = new ChangeBatcher(flow, slot, config.heartbeatTopic(), config.batchRows(), config::topic,
                    BatchIds.reserved(catalog, flow, BATCH_ID_BLOCK), resumeFrom, true);
            List<String> stale = SourceDatabase.dropStaleSlots(sql, TableCopy.copySlotPrefix(config.slotPrefix(), slot));
            if (!stale.isEmpty()) {
                log.info("flow {}: dropped copy slots left by stopped copy tasks: {}", flow, stale);
            }
            initTables(slotStart);
            openStream();
            log.info("flow {}: apply task streaming publication {} from slot {} at {} ({} tables)", flow,
                    config.publication(), slot, resumeFrom, tables.size());
        } catch (FlowIdentityMismatchException e) {
            closeQuietly();
            throw new ConnectException(e.getMessage(), e);
        } catch (SQLException e) {
            closeQuietly();
            throw new ConnectException("flow " + flow + ": cannot start streaming from " + config.jdbcUrl() + ": "
                    + e.getMessage(), e);
        } catch (RuntimeException e) {
            closeQuietly();
            throw e;
        }
    }

    /**
     * Creates the main slot if it does not exist, or replaces it when the server invalidated it and
     * {@code invalidated.slot.behavior=recreate}; returns the position a table without offsets starts from. Refuses
     * a lost slot (by default), a slot of another plugin or database, and a missing slot the flow has already
     * streamed from.
     */
    private Lsn ensureSlot() throws SQLException {
        Optional<SourceDatabase.Slot> existing = SourceDatabase.slot(sql, slot);
        Map<String, Object> offset = context.offsetStorageReader().offset(ChangeBatcher.slotPartition(flow, slot));
        if (existing.isPresent()) {
            SourceDatabase.Slot s = existing.get();
            if ("lost".equals(s.walStatus())) {
                if (!config.recreateInvalidatedSlot()) {
                    throw new ConnectException(FlowRefusals.invalidated(flow, config, slot));
                }
                return recreateSlot();
            }
            if (!"pgoutput".equals(s.plugin()) || !config.database().equals(s.database())) {
                throw new ConnectException(FlowRefusals.foreignSlot(flow, config, s));
            }
            return s.confirmedFlush();
        }
        String streamed = offset != null && offset.get(ChangeBatcher.LSN_KEY) != null
                ? "Connect holds its position " + offset.get(ChangeBatcher.LSN_KEY) : null;
        if (streamed == null) {
            // tables that stream(ed) from the slot; a pending, copying or errored table starts over with a copy anyway
            List<String> started = catalog.listTables(flow).stream()
                    .filter(t -> t.phase() == Phase.CATCHUP || t.phase() == Phase.READY)
                    .map(t -> t.table() + " " + t.phase().sqlName()).toList();
            if (!started.isEmpty()) {
                streamed = "the catalog has tables past pending (" + String.join(", ", started) + ")";
            }
        }
        if (streamed != null) {
            throw new ConnectException(FlowRefusals.slotGone(flow, config, slot, streamed));
        }
        return createSlot();
    }

    private Lsn createSlot() throws SQLException {
        Lsn point;
        if (config.slotFailover()) {
            point = SourceDatabase.createFailoverSlot(sql, slot);
        } else {
            PGConnection pg = replication.unwrap(PGConnection.class);
            point = Lsn.of(pg.getReplicationAPI().createReplicationSlot().logical().withSlotName(slot)
                    .withOutputPlugin("pgoutput").make().getConsistentPoint().asLong());
        }
        log.info("flow {}: created replication slot {} at {}{}", flow, slot, point,
                config.slotFailover() ? " (failover)" : "");
        return point;
    }

    /**
     * {@code invalidated.slot.behavior=recreate}: every table back to pending and the new slot's name recorded (one
     * catalog transaction), then the lost slot dropped and the new one created. The old slot's offsets belong to
     * its partition and are never read again; each table's copy starts with a truncate, so ClickHouse keeps no row
     * from before. A crash after the catalog step finds the new slot recorded, missing and every table pending:
     * the slot is created then (and the lost one, if still there, stays; it holds no WAL).
     */
    private Lsn recreateSlot() throws SQLException {
        String lost = slot;
        byte[] random = new byte[8];
        new SecureRandom().nextBytes(random);
        String fresh = config.slotPrefix() + "_" + HexFormat.of().formatHex(random);
        List<String> pending = catalog.replaceSlot(flow, lost, fresh);
        slot = fresh;
        boolean dropped = SourceDatabase.dropSlot(sql, lost);
        log.warn("flow {}: replication slot {} was invalidated by the server (wal_status lost); invalidated.slot.behavior"
                + "=recreate: {} slot {}, new slot {}; {} tables back to pending to be copied again: {}", flow, lost,
                dropped ? "dropped" : "could not drop (in use)", lost, fresh, pending.size(), pending);
        List<String> stale = SourceDatabase.dropStaleSlots(sql, TableCopy.copySlotPrefix(config.slotPrefix(), lost));
        if (!stale.isEmpty()) {
            log.info("flow {}: dropped copy slots of the lost slot: {}", flow, stale);
        }
        return createSlot();
    }

    /**
     * First start as far as the catalog knows (no slot recorded): refuses when a slot shaped like this flow's main
     * slot exists on the database and Connect holds this flow's position for it: the catalog was wiped or
     * {@code catalog.jdbc.url} changed, and starting over here would forget what was already replicated.
     */
    private void refuseSlotWithoutState() throws SQLException {
        for (String candidate : SourceDatabase.mainSlotsLike(sql, config.slotPrefix(), config.database())) {
            Map<String, Object> offset = context.offsetStorageReader().offset(ChangeBatcher.slotPartition(flow, candidate));
            if (offset != null && offset.get(ChangeBatcher.LSN_KEY) != null) {
                throw new ConnectException(FlowRefusals.slotWithoutState(flow, config, candidate,
                        offset.get(ChangeBatcher.LSN_KEY).toString()));
            }
        }
    }

    private void initTables(Lsn slotStart) throws SQLException {
        List<String> published = SourceDatabase.publicationTables(sql, config.publication());
        if (published.isEmpty()) {
            throw new ConnectException("flow " + flow + ": publication " + config.publication() + " has no tables");
        }
        List<String> pruned = catalog.pruneTables(flow, published);
        if (!pruned.isEmpty()) {
            log.info("flow {}: tables no longer in publication {}, catalog rows removed: {}", flow, config.publication(), pruned);
        }
        for (String table : published) {
            catalog.initTable(flow, table, Phase.PENDING);
        }
        Map<String, TableState> states = new HashMap<>();
        for (TableState state : catalog.listTables(flow)) {
            states.put(state.table(), state);
        }
        for (String table : published) {
            TableRun run = new TableRun();
            tables.put(table, run);
            TableState state = states.get(table);
            metrics.table(table).batchIdKnown(state == null ? 0 : state.syncedBatchId());
            follow(table, run, state == null ? Phase.PENDING : state.phase(), state == null ? null : state.phaseLsn(),
                    slotStart, null);
        }
        publicationCheckedAt = System.nanoTime();
    }

    /**
     * Brings a table's run in line with its catalog phase: a table not copied becomes {@code ready} at {@code at};
     * {@code catchup(c)}/{@code ready(c)} stream from {@code c}; {@code copying} with a recorded marker holds;
     * anything else is skipped. Held changes are released into {@code out} or discarded. Called between
     * transactions only.
     */
    private void follow(String table, TableRun run, Phase phase, String phaseLsn, Lsn at, List<SourceRecord> out) {
        Phase before = run.phase;
        run.phase = phase;
        if ((phase == null || phase == Phase.PENDING) && !config.copies(table)) {
            if (catalog.markReady(flow, table, at.toString())) {
                log.info("flow {}, table {}: ready, streaming from {} (not copied)", flow, table, at);
                stream(table, run, at, out);
                run.phase = Phase.READY;
                return;
            }
            TableState now = catalog.getTable(flow, table).orElseThrow();
            if (now.phase() != Phase.PENDING) {
                follow(table, run, now.phase(), now.phaseLsn(), at, out);
            }
            return;
        }
        switch (phase == null ? Phase.PENDING : phase) {
            case CATCHUP, READY -> {
                Lsn cutoff = Lsn.parse(phaseLsn);
                if (run.state == RunState.STREAMING && cutoff.equals(run.lsn)) {
                    return;
                }
                stream(table, run, cutoff, out);
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
        run.reason = null;
        metrics.table(table).errorEpisodeEnded("apply");
    }

    /** Stops sending or holding a table's changes; its batch ids are looked up again when it streams again. */
    private void skip(String table, TableRun run) {
        if (run.state == RunState.HOLDING) {
            batcher.discard(table);
        } else if (run.state == RunState.STREAMING) {
            batcher.forget(table);
        }
        run.state = RunState.SKIPPING;
        run.lsn = null;
    }

    /** Reads the flow's tables from the catalog and follows phase changes (between transactions only). */
    private void refresh(List<SourceRecord> out) throws SQLException {
        long now = System.nanoTime();
        boolean busy = tables.values().stream().anyMatch(r -> r.state != RunState.STREAMING || r.phase == Phase.CATCHUP);
        if (now - refreshedAt < TimeUnit.MILLISECONDS.toNanos(busy ? REFRESH_BUSY_MS : REFRESH_IDLE_MS)
                || batcher.inTransaction() || txnCommitLsn != null) {
            return;
        }
        refreshedAt = now;
        if (now - publicationCheckedAt > TimeUnit.MILLISECONDS.toNanos(PUBLICATION_CHECK_MS)) {
            publicationCheckedAt = now;
            // a table added to the publication that has not changed yet: copy it now rather than at its first change
            for (String table : SourceDatabase.publicationTables(sql, config.publication())) {
                if (!tables.containsKey(table)) {
                    discovered(table, resumeFrom, out);
                }
            }
        }
        Lsn acked = batcher.acknowledgedPosition();
        if (tables.values().stream().anyMatch(r -> r.phase == Phase.CATCHUP) && !acked.equals(readyCheckedAt)) {
            readyCheckedAt = acked;
            for (String table : catalog.markCaughtUpReady(flow, acked.toString())) {
                log.info("flow {}, table {}: ready (the flow's acknowledged position {} passed its cut-off)", flow,
                        table, acked);
            }
        }
        for (TableState state : catalog.listTables(flow)) {
            TableRun run = tables.get(state.table());
            if (run != null) {
                Phase phase = state.phase();
                if (phase == Phase.ERRORED && !config.copies(state.table()) && state.nextRetryAt() != null
                        && !state.nextRetryAt().isAfter(Instant.now()) && catalog.setPending(flow, state.table())) {
                    // a table not copied and reset (tablecdc-reset-table): no copy task claims it; it streams again
                    // from here, as a table not copied does where the flow finds it
                    phase = Phase.PENDING;
                }
                follow(state.table(), run, phase, state.phaseLsn(), resumeFrom, out);
            }
        }
    }

    /** A table of the publication this task did not know: pending for a copy task, or ready here when not copied. */
    private void discovered(String table, Lsn at, List<SourceRecord> out) {
        catalog.initTable(flow, table, Phase.PENDING);
        TableState state = catalog.getTable(flow, table).orElseThrow();
        TableRun run = new TableRun();
        tables.put(table, run);
        log.info("flow {}, table {}: new in publication {}", flow, table, config.publication());
        follow(table, run, state.phase(), state.phaseLsn(), at, out);
    }

    private void openStream() throws SQLException {
        decoder.clear();
        long deadline = System.currentTimeMillis() + SLOT_BUSY_WAIT_MS;
        while (true) {
            try {
                if (replication == null || replication.isClosed()) {
                    replication = SourceDatabase.connectReplication(config, "tablecdc " + flow + " apply");
                }
                stream = replication.unwrap(PGConnection.class).getReplicationAPI().replicationStream().logical()
                        .withSlotName(slot)
                        .withSlotOption("proto_version", "1")
                        .withSlotOption("publication_names", "\"" + config.publication().replace("\"", "\"\"") + "\"")
                        .withSlotOption("messages", "true")
                        .withStartPosition(LogSequenceNumber.valueOf(resumeFrom.value()))
                        .withStatusInterval(10, TimeUnit.SECONDS)
                        .start();
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

    private List<SourceRecord> pollStream() throws InterruptedException {
        List<SourceRecord> out = new ArrayList<>();
        try {
            if (stream == null) {
                openStream();
            }
            applyConfirm();
            refresh(out);
            long deadline = System.nanoTime() + POLL_BUDGET_NANOS;
            while (!stopping) {
                if (!batcher.inTransaction() && batcher.heldRows() > holdLimit()) {
                    // held tables wait for their copy tasks; reading on would only grow what is held
                    if (!holdLimitLogged) {
                        holdLimitLogged = true;
                        log.warn("flow {}: {} changes held for tables being handed over (limit {}); reading pauses until"
                                + " their copy tasks finish", flow, batcher.heldRows(), holdLimit());
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
                handle(PgOutputDecoder.decode(buffer), out);
                if (out.size() >= config.batchRows() || System.nanoTime() > deadline) {
                    break;
                }
            }
            // the transactions read in this poll become one batch per table (batch ids may need the catalog)
            out.addAll(batcher.flush());
        } catch (SQLException | CatalogUnavailableException e) {
            if (stopping) {
                return null;
            }
            // the open transaction is read again from the end of the last one handed to Connect
            log.warn("flow {}: {} failed ({}); reconnecting from {}", flow,
                    e instanceof SQLException ? "replication stream" : "catalog", e.getMessage(), resumeFrom);
            batcher.abort();
            txnCommitLsn = null;
            closeStream();
            if (!out.isEmpty()) {
                return out;
            }
            throw new RetriableException("flow " + flow + ": streaming failed: " + e.getMessage(), e);
        }
        syncToCatalog();
        Lsn safe = batcher.safePosition();
        long now = System.nanoTime();
        if (safe.isAfter(positionEmitted) && now - positionEmittedAt >= POSITION_INTERVAL_NANOS) {
            out.add(batcher.positionRecord(safe));
            positionEmitted = safe;
            positionEmittedAt = now;
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
        if (received.isAfter(resumeFrom)) {
            resumeFrom = received;
            batcher.idle(received);
        }
    }

    private void handle(PgOutputMessage message, List<SourceRecord> out) throws SQLException {
        if (message instanceof Begin begin) {
            // the server may repeat transactions before the offset's position: they are in Kafka already
            skipTxn = begin.finalLsn().isBefore(resumeFrom);
            txnCommitLsn = begin.finalLsn();
            txnXid = begin.xid();
            txnOrdinal = 0;
            if (!skipTxn) {
                batcher.begin(begin.finalLsn(), begin.commitTime(), Instant.now());
            }
        } else if (message instanceof Commit commit) {
            if (!skipTxn) {
                out.addAll(batcher.commit(commit.endLsn()));
                resumeFrom = Lsn.max(resumeFrom, commit.endLsn());
            }
            txnCommitLsn = null;
            skipTxn = false;
        } else if (message instanceof Relation relation) {
            decoder.accept(relation);
            String table = relation.qualifiedName();
            if (!tables.containsKey(table)) {
                // a table added to the publication while the flow runs: copied (it is pending for a copy task, whose
                // snapshot covers this transaction), or, when not copied, streamed from this transaction on
                discovered(table, txnCommitLsn != null ? txnCommitLsn : resumeFrom, out);
            }
        } else if (message instanceof PgOutputMessage.Type type) {
            decoder.accept(type);
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
                String table = decoder.table(oid);
                if (included(table)) {
                    out.addAll(batcher.add(ChangeBatcher.Change.truncate(table, TableCopy.replayId(txnXid, txnOrdinal, oid))));
                }
            }
        } else if (message instanceof LogicalMessage marker && !marker.transactional()
                && TableCopy.MARKER_PREFIX.equals(marker.prefix())) {
            handoverMarker(marker, out);
        }
        // Origin, other logical messages: nothing to do
    }

    /** Whether the open transaction's changes of {@code table} are this task's (the cut-off rule). */
    private boolean included(String table) {
        TableRun run = tables.get(table);
        return run != null && keeps(run.state, run.lsn, txnCommitLsn);
    }

    /**
     * The cut-off rule: a table streaming from {@code c} keeps changes committed at or after {@code c}; a table held
     * at marker {@code m} keeps those committed at or after {@code m} as well. {@code m} is the end of the marker's
     * WAL record, where the next record may start: a transaction whose commit record directly follows the marker
     * has commit LSN {@code m}, comes after the marker in every stream and so is not the copy's. A skipped table
     * keeps none.
     */
    static boolean keeps(RunState state, Lsn lsn, Lsn commitLsn) {
        return switch (state) {
            case STREAMING, HOLDING -> !commitLsn.isBefore(lsn);
            case SKIPPING -> false;
        };
    }

    /**
     * A copy task's handover marker: if that task still holds the table, the marker's LSN is recorded and the
     * table's later changes are held until the copy task moves it to {@code catchup(marker)}.
     */
    private void handoverMarker(LogicalMessage marker, List<SourceRecord> out) {
        String[] parts = marker.contentText().split("\n", 3);
        if (parts.length != 3 || !parts[0].equals(flow)) {
            return;
        }
        String table = parts[1];
        TableRun run = tables.get(table);
        if (run == null || run.state == RunState.STREAMING) {
            return;
        }
        if (!catalog.markHandover(flow, table, parts[2], marker.lsn().toString())) {
            log.info("flow {}, table {}: ignoring the handover marker of copy task {} at {} (it no longer holds the table)",
                    flow, table, parts[2], marker.lsn());
            return;
        }
        TableState state = catalog.getTable(flow, table).orElseThrow();
        follow(table, run, state.phase(), state.phaseLsn(), resumeFrom, out);
    }

    private void change(PgOutputMessage message, List<SourceRecord> out) throws SQLException {
        if (skipTxn) {
            return;
        }
        long oid = message instanceof Insert i ? i.relationOid()
                : message instanceof Update u ? u.relationOid() : ((Delete) message).relationOid();
        String table = decoder.table(oid);
        if (!included(table)) {
            return;
        }
        List<Change> changes;
        try {
            changes = decoder.changes(message);
        } catch (ConversionException e) {
            failTable(table, tables.get(table), e.getMessage());
            return;
        }
        for (Change change : changes) {
            out.addAll(batcher.add(change));
        }
    }

    private long holdLimit() {
        return 20L * config.batchRows();
    }

    private void failTable(String table, TableRun run, String error) {
        Instant now = Instant.now();
        // copied tables are copied again after table.retry.delay.ms, up to max.table.retries failures since ready
        boolean copied = config.copies(table);
        Instant retryAt = copied && catalog.copyFailures(flow, table) + 1 <= config.maxTableRetries()
                ? now.plusMillis(config.tableRetryDelayMs()) : null;
        // the catalog first: if it is unreachable the transaction is read again and the table fails then
        catalog.markStreamFailed(flow, table, retryAt == null ? error + "; " + resetHint(config, flow, table) : error,
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
                catalog.recordSync(flow, synced.table(), synced.batch(), now);
                TableMetrics.Table m = metrics.table(synced.table());
                m.batchSynced(synced.batch().batchId(), synced.batch().rows());
                if (synced.batch().firstRowCommitTime() != null) {
                    // a pg batch is (part of) one transaction: its commit time is its newest
                    m.syncedUpTo(synced.batch().firstRowCommitTime());
                }
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
        Lsn lsn = toConfirm.getAndSet(null);
        if (lsn == null || !lsn.isAfter(confirmed)) {
            return;
        }
        LogSequenceNumber pg = LogSequenceNumber.valueOf(lsn.value());
        stream.setFlushedLSN(pg);
        stream.setAppliedLSN(pg);
        stream.forceUpdateStatus();
        confirmed = lsn;
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
        Lsn stored = ackedAtLastCommit;
        ackedAtLastCommit = batcher.acknowledgedPosition();
        if (stored != null) {
            toConfirm.accumulateAndGet(stored, (a, b) -> a == null || b.isAfter(a) ? b : a);
        }
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

    private void closeStream() {
        try {
            if (stream != null) {
                stream.close();
            }
        } catch (Exception e) {
            // the connection is being dropped anyway
        }
        stream = null;
        try {
            if (replication != null) {
                replication.close();
            }
        } catch (Exception e) {
            // nothing left to do
        }
        replication = null;
    }

    private void closeQuietly() {
        closeStream();
        try {
            if (sql != null) {
                sql.close();
            }
        } catch (Exception e) {
            // nothing left to do
        }
        if (catalog != null) {
            catalog.close();
        }
        if (metrics != null) {
            metrics.close();
        }
    }
}
