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
import io.tablecdc.pg.ChangeBatcher.Change;
import io.tablecdc.pg.config.PgPipelineConfig;
import io.tablecdc.pg.convert.ConversionException;
import io.tablecdc.pg.convert.RelationSchema;
import io.tablecdc.pg.wire.Lsn;
import io.tablecdc.pg.wire.PgOutputDecoder;
import io.tablecdc.pg.wire.PgOutputMessage;
import io.tablecdc.pg.wire.PgOutputMessage.Begin;
import io.tablecdc.pg.wire.PgOutputMessage.Commit;
import io.tablecdc.pg.wire.PgOutputMessage.Delete;
import io.tablecdc.pg.wire.PgOutputMessage.Insert;
import io.tablecdc.pg.wire.PgOutputMessage.Relation;
import io.tablecdc.pg.wire.PgOutputMessage.ReplicaIdentity;
import io.tablecdc.pg.wire.PgOutputMessage.Truncate;
import io.tablecdc.pg.wire.PgOutputMessage.Update;
import io.tablecdc.pg.wire.RelationCache;

/**
 * The apply task (task 0): owns the flow's main slot and streams every ready table of the publication.
 *
 * <p>At start it registers the flow in {@code cdc_flow} (source system identifier, timeline, slot, publication)
 * and refuses a mismatch; creates the main slot {@code <slot.prefix>_<random>} if missing (its name is recorded
 * before it is created); puts every table of the publication in the catalog, a new one {@code ready} at the
 * slot's position (no copy in this release); then streams pgoutput v1 from the flow's offset (or the slot's
 * confirmed position when there is none).
 *
 * <p>Changes become per-table batches in {@link ChangeBatcher}. The flow's position is confirmed to Postgres only
 * for offsets Connect has stored: {@link #commit()} (called after an offset flush) hands the position acknowledged
 * before the previous flush to the poll thread, which owns the replication stream and sends it.
 *
 * <p>A table whose change cannot be converted (or carries an unchanged TOAST value) is marked {@code errored} in
 * the catalog and its changes are skipped from then on; the other tables carry on. A message that cannot be
 * decoded at all fails the task: it cannot be attributed to a table.
 */
public class PgPipelineSourceTask extends SourceTask {
    private static final Logger log = LoggerFactory.getLogger(PgPipelineSourceTask.class);
    static final String SOURCE_KIND = "pg_pipeline";
    /** The flow (the connector's name), set by the connector. */
    static final String FLOW_PROP = "tablecdc.flow";
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
    private final RelationCache relations = new RelationCache();
    private final Map<Long, RelationSchema> schemas = new HashMap<>();
    private final Map<String, TableRun> tables = new HashMap<>();
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
    private boolean skipTxn;

    /** A table's phase as the apply task sees it. */
    private static final class TableRun {
        boolean streaming;
        Lsn readyLsn;
        String reason;
    }

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        config = new PgPipelineConfig(props);
        String unsupported = PgPipelineConfig.unsupportedCopy(config.copyMode());
        if (unsupported != null) {
            throw new ConnectException(unsupported);
        }
        flow = props.getOrDefault(FLOW_PROP, props.getOrDefault("name", "pg-pipeline"));
        catalog = Catalog.open(config.catalog(), "source " + flow + " apply");
        try {
            sql = SourceDatabase.connect(config, "tablecdc " + flow + " apply");
            replication = SourceDatabase.connectReplication(config, "tablecdc " + flow + " apply");
            SourceDatabase.SystemIdentity identity = SourceDatabase.identify(replication);
            slot = catalog.getFlow(flow).map(f -> f.identity().slot()).orElse(null);
            if (slot == null) {
                byte[] random = new byte[8];
                new SecureRandom().nextBytes(random);
                slot = config.slotPrefix() + "_" + HexFormat.of().formatHex(random);
            }
            FlowRecord registered = catalog.registerFlow(flow, new FlowIdentity(SOURCE_KIND, identity.systemIdentifier(),
                    identity.timeline(), slot, config.publication(), null), null);
            slot = registered.identity().slot();
            Lsn slotStart = ensureSlot();
            Map<String, Object> offset = context.offsetStorageReader().offset(ChangeBatcher.slotPartition(flow, slot));
            Lsn offsetLsn = offset == null || offset.get(ChangeBatcher.LSN_KEY) == null ? null
                    : Lsn.parse(offset.get(ChangeBatcher.LSN_KEY).toString());
            resumeFrom = offsetLsn == null ? slotStart : Lsn.max(offsetLsn, slotStart);
            confirmed = slotStart;
            ackedAtLastCommit = resumeFrom;
            positionEmitted = resumeFrom;
            initTables(slotStart);
            batcher = new ChangeBatcher(flow, slot, config.heartbeatTopic(), config.batchRows(), config::topic,
                    this::lastBatchId, resumeFrom);
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

    /** Creates the main slot if it does not exist; returns the position a table without offsets starts from. */
    private Lsn ensureSlot() throws SQLException {
        Optional<SourceDatabase.Slot> existing = SourceDatabase.slot(sql, slot);
        boolean hasOffset = context.offsetStorageReader().offset(ChangeBatcher.slotPartition(flow, slot)) != null;
        if (existing.isPresent()) {
            SourceDatabase.Slot s = existing.get();
            if ("lost".equals(s.walStatus())) {
                throw new ConnectException("flow " + flow + ": replication slot " + slot + " was invalidated (wal_status"
                        + " lost): the changes it held are gone. Start a new flow (another connector name) to replicate"
                        + " again; recreating slots in place is not built yet");
            }
            if (!"pgoutput".equals(s.plugin()) || !config.database().equals(s.database())) {
                throw new ConnectException("flow " + flow + ": slot " + slot + " exists but is for plugin " + s.plugin()
                        + " on database " + s.database() + ", not pgoutput on " + config.database());
            }
            return s.confirmedFlush();
        }
        if (hasOffset) {
            throw new ConnectException("flow " + flow + ": replication slot " + slot + " recorded for this flow is gone"
                    + " but the flow has offsets: the changes since its last position are lost. Start a new flow (another"
                    + " connector name), or delete this flow's offsets and catalog rows to start over");
        }
        PGConnection pg = replication.unwrap(PGConnection.class);
        LogSequenceNumber point = pg.getReplicationAPI().createReplicationSlot().logical().withSlotName(slot)
                .withOutputPlugin("pgoutput").make().getConsistentPoint();
        log.info("flow {}: created replication slot {} at {}", flow, slot, Lsn.of(point.asLong()));
        return Lsn.of(point.asLong());
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
            TableState state = states.get(table);
            tables.put(table, run(table, state == null ? Phase.PENDING : state.phase(),
                    state == null ? null : state.phaseLsn(), slotStart));
        }
    }

    /** Brings a table to the phase the apply task can act on: without copy, pending becomes ready at {@code at}. */
    private TableRun run(String table, Phase phase, String phaseLsn, Lsn at) {
        TableRun run = new TableRun();
        if (phase == null || phase == Phase.PENDING) {
            if (catalog.markReady(flow, table, at.toString())) {
                log.info("flow {}, table {}: ready, streaming from {} (no copy)", flow, table, at);
                run.streaming = true;
                run.readyLsn = at;
                return run;
            }
            TableState now = catalog.getTable(flow, table).orElseThrow();
            return run(table, now.phase() == Phase.PENDING ? Phase.ERRORED : now.phase(), now.phaseLsn(), at);
        }
        if (phase == Phase.READY) {
            run.streaming = true;
            run.readyLsn = Lsn.parse(phaseLsn);
            return run;
        }
        run.reason = phase.sqlName();
        log.warn("flow {}, table {}: phase {}; its changes are skipped (copy and retries are not built yet)", flow, table,
                phase.sqlName());
        return run;
    }

    private long lastBatchId(String table) {
        Map<String, Object> offset = context.offsetStorageReader().offset(ChangeBatcher.tablePartition(flow, table));
        long fromOffset = 0;
        if (offset != null && offset.get(ChangeBatcher.BATCH_KEY) instanceof Number n) {
            fromOffset = n.longValue();
        }
        // the sink may have staged or loaded batches whose acknowledgement the previous run never recorded
        long fromCatalog = catalog.getTable(flow, table)
                .map(s -> Math.max(s.syncedBatchId(), s.normalizedBatchId())).orElse(0L);
        long staged = catalog.listStages(flow, table).stream().mapToLong(st -> st.batchId()).max().orElse(0L);
        // one more id is skipped, as the query CDC source does: ids only grow, gaps are harmless
        return Math.max(Math.max(fromOffset, fromCatalog), staged) + 1;
    }

    private void openStream() throws SQLException {
        relations.clear();
        schemas.clear();
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
            long deadline = System.nanoTime() + POLL_BUDGET_NANOS;
            while (!stopping) {
                ByteBuffer buffer = stream.readPending();
                if (buffer == null) {
                    idle();
                    if (!out.isEmpty() || System.nanoTime() > deadline) {
                        break;
                    }
                    Thread.sleep(10);
                    continue;
                }
                handle(PgOutputDecoder.decode(buffer), out);
                if (out.size() >= config.batchRows()) {
                    break;
                }
            }
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
            relations.accept(relation);
            schemas.remove(relation.oid());
            String table = relation.qualifiedName();
            if (!tables.containsKey(table)) {
                // a table added to the publication while the flow runs: it streams from this transaction on
                Lsn at = txnCommitLsn != null ? txnCommitLsn : resumeFrom;
                catalog.initTable(flow, table, Phase.PENDING);
                TableState state = catalog.getTable(flow, table).orElseThrow();
                tables.put(table, run(table, state.phase(), state.phaseLsn(), at));
            }
        } else if (message instanceof PgOutputMessage.Type type) {
            relations.accept(type);
        } else if (message instanceof Insert insert) {
            change(insert.relationOid(), out, (schema, changes) -> {
                RelationSchema.Row row = checked(schema, schema.row(insert.newTuple()));
                changes.add(change(schema, Op.CREATE, row.value()));
            });
        } else if (message instanceof Update update) {
            change(update.relationOid(), out, (schema, changes) -> {
                RelationSchema.Row row = checked(schema, schema.row(update.newTuple(), update.oldTuple()));
                if (update.oldTuple() != null && schema.keySchema() != null) {
                    RelationSchema.Row old = schema.row(update.oldTuple().tuple());
                    if (!schema.key(old.value()).equals(schema.key(row.value()))) {
                        // the key changed: the old key's row is gone
                        changes.add(change(schema, Op.DELETE, old.value()));
                    }
                }
                changes.add(change(schema, Op.UPDATE, row.value()));
            });
        } else if (message instanceof Delete delete) {
            change(delete.relationOid(), out, (schema, changes) -> {
                RelationSchema.Row old = schema.row(delete.oldTuple().tuple());
                changes.add(change(schema, Op.DELETE, old.value()));
            });
        } else if (message instanceof Truncate truncate) {
            for (long oid : truncate.relationOids()) {
                String table = relations.get(oid).qualifiedName();
                TableRun run = tables.get(table);
                if (skipTxn || run == null || !run.streaming) {
                    continue;
                }
                String error = "TRUNCATE committed at " + txnCommitLsn + " was not replicated: truncate is not supported"
                        + " by this release; ClickHouse still holds the rows (truncate the destination table by hand)";
                log.warn("flow {}, table {}: {}", flow, table, error);
                catalog.recordError(flow, table, error, Instant.now(), null);
            }
        }
        // Origin, logical messages: nothing to do in this release
    }

    private interface ChangeMaker {
        void make(RelationSchema schema, List<Change> changes);
    }

    private void change(long oid, List<SourceRecord> out, ChangeMaker maker) throws SQLException {
        if (skipTxn) {
            return;
        }
        Relation relation = relations.get(oid);
        String table = relation.qualifiedName();
        TableRun run = tables.get(table);
        if (run == null || !run.streaming || txnCommitLsn.isBefore(run.readyLsn)) {
            return;
        }
        List<Change> changes = new ArrayList<>(2);
        try {
            maker.make(schema(relation), changes);
        } catch (ConversionException e) {
            failTable(table, run, e.getMessage());
            return;
        }
        for (Change change : changes) {
            out.addAll(batcher.add(change));
        }
    }

    private RelationSchema schema(Relation relation) throws SQLException {
        RelationSchema schema = schemas.get(relation.oid());
        if (schema == null) {
            boolean wireKey = relation.replicaIdentity() == ReplicaIdentity.DEFAULT
                    || relation.replicaIdentity() == ReplicaIdentity.INDEX;
            schema = wireKey ? RelationSchema.of(relation)
                    : RelationSchema.of(relation, SourceDatabase.primaryKey(sql, relation.oid()));
            schemas.put(relation.oid(), schema);
        }
        return schema;
    }

    private static RelationSchema.Row checked(RelationSchema schema, RelationSchema.Row row) {
        if (!row.unchangedToastColumns().isEmpty()) {
            throw new ConversionException("table " + schema.relation().qualifiedName() + ": unchanged TOAST value in "
                    + row.unchangedToastColumns() + " without an old value; keeping the previous value is not supported yet"
                    + " (set REPLICA IDENTITY FULL on the table)");
        }
        return row;
    }

    private Change change(RelationSchema schema, Op op, org.apache.kafka.connect.data.Struct value) {
        return new Change(schema.relation().qualifiedName(), op, schema.keySchema(), schema.key(value),
                schema.valueSchema(), value);
    }

    private void failTable(String table, TableRun run, String error) {
        // the catalog first: if it is unreachable the transaction is read again and the table fails then
        catalog.markErrored(flow, table, null, error, Instant.now(), null);
        run.streaming = false;
        run.reason = error;
        batcher.drop(table);
        log.error("flow {}, table {}: {}; the table is marked errored and its changes are skipped, other tables carry on",
                flow, table, error);
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
    }
}
