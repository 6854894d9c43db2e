package io.tablecdc.pg;

import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.source.SourceRecord;

import io.tablecdc.common.NonFiniteValues;
import io.tablecdc.common.RecordHeaders;
import io.tablecdc.common.RowBlock;
import io.tablecdc.catalog.SyncedBatch;
import io.tablecdc.pg.wire.Lsn;

/**
 * Turns the changes of the stream into per-table batches of records, and follows their acknowledgements to the
 * flow's durable position. Free of any Postgres connection so that it can be tested on its own.
 *
 * <h2>Batches</h2>
 * A table's batch is its changes in one flush slice, cut every {@code batch.rows} rows of that table: one
 * transaction, or (coalescing, as the apply task does) every transaction read in one poll, so that many small
 * transactions do not make many tiny batches. Records of a batch are emitted together when the slice closes, the last one with
 * {@code tablecdc.batch.last=true}. Batch ids are per table and come from {@link BatchIds} (in the tasks: blocks
 * reserved in the catalog, so an id is never used twice).
 *
 * <h2>Offsets</h2>
 * <ul>
 * <li>Table records carry partition {@code {"flow": f, "table": schema.table}} and offset
 * {@code {"batch": id, "lsn": commit LSN}}.</li>
 * <li>The flow's position is partition {@code {"flow": f, "slot": s}}, offset {@code {"lsn": X/Y}}: the end of the
 * last transaction whose records are all acknowledged by Kafka (or, while idle, the server's position). It
 * travels on position records ({@link #positionRecord}) that the task emits only once that position is safe.
 * Kafka Connect commits each source partition's offsets on their own, so the position cannot ride on table
 * records: a later table's acknowledged record would commit the position while an earlier table's record was
 * still in flight.</li>
 * </ul>
 *
 * <p>Thread-safety: the task's poll thread calls everything except {@link #acknowledged}, which the producer's
 * thread calls; shared state is guarded by this object's lock.
 *
 * <p>Why it is long: the batches and the position they make safe share one lock and one bookkeeping of transactions in
 * flight; splitting them would put that lock across two classes.
 */
final class ChangeBatcher {
    static final String FLOW_KEY = "flow";
    static final String TABLE_KEY = "table";
    static final String SLOT_KEY = "slot";
    static final String BATCH_KEY = "batch";
    static final String LSN_KEY = "lsn";

    /** A table batch whose records are all acknowledged: what the catalog mirrors. */
    record Synced(String table, SyncedBatch batch) {
    }

    private final String flow;
    private final String slot;
    private final String heartbeatTopic;
    private final int batchRows;
    private final java.util.function.Function<String, String> topicOf;
    private final BatchIds batchIds;
    private final boolean coalesce;
    /** {@code record.format=blocks}: the most bytes of rows in one block record; 0 for a record per row. */
    private int blockBytes;
    /** The largest record Kafka takes; null: not checked (unit tests). */
    private RecordLimit limit;
    /** Rows emitted as records so far (poll thread only): a poll's measure of work whatever the record format. */
    private long emittedRows;

    // poll thread only
    private final Map<String, Slice> slices = new LinkedHashMap<>();
    private final Map<String, Long> ordinals = new HashMap<>();
    private final Map<String, List<Slice>> held = new HashMap<>();
    private long heldRows;
    private Txn open;

    // shared with the producer thread, under this
    private final Deque<Txn> inFlight = new ArrayDeque<>();
    private final Map<SourceRecord, Tag> tags = new IdentityHashMap<>();
    private final List<Synced> synced = new ArrayList<>();
    private Lsn safe;
    private Lsn acknowledgedPosition;

    ChangeBatcher(String flow, String slot, String heartbeatTopic, int batchRows,
                  java.util.function.Function<String, String> topicOf, BatchIds batchIds, Lsn start) {
        this(flow, slot, heartbeatTopic, batchRows, topicOf, batchIds, start, false);
    }

    /**
     * @param coalesce when true, a commit does not close the transaction's slices: a table's changes of several
     *     transactions share a batch until {@link #flush} (the task calls it once per poll) or {@code batch.rows}
     */
    ChangeBatcher(String flow, String slot, String heartbeatTopic, int batchRows,
                  java.util.function.Function<String, String> topicOf, BatchIds batchIds, Lsn start, boolean coalesce) {
        this.flow = flow;
        this.slot = slot;
        this.heartbeatTopic = heartbeatTopic;
        this.batchRows = batchRows;
        this.topicOf = topicOf;
        this.batchIds = batchIds;
        this.safe = start;
        this.acknowledgedPosition = start;
        this.coalesce = coalesce;
    }

    /**
     * Emits each batch as block records ({@link RowBlock}) of at most about {@code maxBytes} of rows each, instead of a
     * record per row ({@code record.format=blocks}).
     */
    ChangeBatcher blocks(int maxBytes) {
        this.blockBytes = maxBytes;
        return this;
    }

    /**
     * Checks every change against the largest record Kafka takes: a row above it is refused when added
     * ({@link RecordLimit.TooLarge}, nothing of it kept), and a block is closed before a row that would take it past it.
     */
    ChangeBatcher limit(RecordLimit limit) {
        this.limit = limit;
        return this;
    }

    /** Rows emitted as records since this batcher was made (a block record counts the rows it holds). */
    long emittedRows() {
        return emittedRows;
    }

    static Map<String, String> tablePartition(String flow, String table) {
        return Map.of(FLOW_KEY, flow, TABLE_KEY, table);
    }

    static Map<String, String> slotPartition(String flow, String slot) {
        return Map.of(FLOW_KEY, flow, SLOT_KEY, slot);
    }

    /** A transaction begins; its changes are versioned with {@code commitLsn}. */
    void begin(Lsn commitLsn, Instant commitTime, Instant receivedAt) {
        begin(commitLsn, commitTime, receivedAt, false);
    }

    /**
     * The rows of a copy begin: one "transaction" at the snapshot's consistent point whose changes all take
     * {@link ChangeVersion#snapshot}, below every change a stream delivers after that point.
     */
    void beginSnapshot(Lsn consistentPoint, Instant at) {
        begin(consistentPoint, at, at, true);
    }

    private void begin(Lsn commitLsn, Instant commitTime, Instant receivedAt, boolean snapshot) {
        if (open != null) {
            throw new IllegalStateException("transaction at " + open.commitLsn + " is still open when one at " + commitLsn + " begins");
        }
        open = new Txn(commitLsn, commitTime, receivedAt);
        open.snapshot = snapshot;
        ordinals.clear();
        synchronized (this) {
            inFlight.addLast(open);
        }
    }

    boolean inTransaction() {
        return open != null;
    }

    /** Adds a change of the open transaction; returns the records of a batch it completed ({@code batch.rows}). */
    List<SourceRecord> add(Change change) {
        return addAll(List.of(change));
    }

    /**
     * Adds the changes of one row message (two for an update that changes the key: the delete of the old key and
     * the update, which are never cut into two batches); returns the records of a batch they completed.
     */
    List<SourceRecord> addAll(List<Change> changes) {
        if (changes.isEmpty()) {
            return List.of();
        }
        if (limit != null) {
            // every change first: a refused row leaves nothing of its message behind
            for (Change change : changes) {
                limit.check(change, topicOf.apply(change.table()), blockBytes > 0);
            }
        }
        for (int i = 0; i < changes.size() - 1; i++) {
            addOne(changes.get(i));
        }
        Change change = changes.get(changes.size() - 1);
        Slice slice = addOne(change);
        if (slice.changes.size() >= batchRows) {
            List<SourceRecord> out = new ArrayList<>();
            close(change.table(), slices.remove(change.table()), out);
            return out;
        }
        return List.of();
    }

    private Slice addOne(Change change) {
        if (open == null) {
            throw new IllegalStateException("a change of " + change.table() + " outside a transaction");
        }
        long ordinal = ordinals.merge(change.table(), 1L, Long::sum);
        Slice slice = slices.computeIfAbsent(change.table(), t -> new Slice());
        slice.add(change, open, open.snapshot ? ChangeVersion.snapshot(open.commitLsn) : ChangeVersion.of(open.commitLsn, ordinal));
        synchronized (this) {
            open.pending++;
        }
        return slice;
    }

    /**
     * From now on {@code table}'s changes are kept but not sent: its copy task is still sending the changes
     * committed before the cut-off. Held changes keep the flow's safe position behind them until they are
     * {@linkplain #release released} (sent) or {@linkplain #discard discarded}.
     */
    void hold(String table) {
        held.putIfAbsent(table, new ArrayList<>());
    }

    boolean holding(String table) {
        return held.containsKey(table);
    }

    /** Rows held over all tables. */
    long heldRows() {
        return heldRows;
    }

    /**
     * Sends {@code table}'s held changes as batches, in order, and stops holding it. Its batch ids come from a new
     * reservation, above its copy task's.
     */
    List<SourceRecord> release(String table) {
        List<Slice> list = held.get(table);
        if (list == null) {
            return List.of();
        }
        batchIds.forget(table);
        // every id first: a failing reservation leaves the table held, nothing half sent
        for (Slice slice : list) {
            assignIds(table, slice);
        }
        held.remove(table);
        List<SourceRecord> out = new ArrayList<>();
        for (Slice slice : list) {
            heldRows -= slice.changes.size();
            flush(table, slice, out);
        }
        return out;
    }

    /** Drops {@code table}'s held and unsent changes and stops holding it (its copy was abandoned). */
    void discard(String table) {
        List<Slice> list = held.remove(table);
        if (list != null) {
            for (Slice slice : list) {
                heldRows -= slice.changes.size();
                dropAll(slice);
            }
        }
        forget(table);
    }

    /**
     * Forgets {@code table}'s batch ids and unsent changes: it stopped streaming (a copy task took it again), and
     * when it comes back its ids come from a new reservation.
     */
    void forget(String table) {
        dropAll(slices.remove(table));
        batchIds.forget(table);
    }

    /**
     * Forgets every table's batch ids (not their changes): the next batch of each takes ids from a new reservation.
     * Called after a reconnect, when another task may have sent these tables with ids above the ones held here.
     */
    void forgetBatchIds() {
        batchIds.forgetAll();
    }

    /** Drops {@code table}'s unsent changes (the table just failed). */
    void drop(String table) {
        dropAll(slices.remove(table));
    }

    /** Unsent changes that will never be sent: they no longer keep their transactions' position back. */
    private void dropAll(Slice slice) {
        if (slice == null) {
            return;
        }
        synchronized (this) {
            for (Txn txn : slice.txns) {
                txn.pending--;
            }
            advance();
        }
    }

    private void close(String table, Slice slice, List<SourceRecord> out) {
        if (slice == null || slice.changes.isEmpty()) {
            return;
        }
        List<Slice> list = held.get(table);
        if (list == null) {
            assignIds(table, slice);
            flush(table, slice, out);
            return;
        }
        heldRows += slice.changes.size();
        list.add(slice);
    }

    /**
     * The open transaction committed ending at {@code endLsn}. Without coalescing its slices become batches now;
     * with coalescing they wait for {@link #flush}.
     */
    List<SourceRecord> commit(Lsn endLsn) {
        if (open == null) {
            throw new IllegalStateException("a commit at " + endLsn + " without a transaction");
        }
        List<SourceRecord> out = coalesce ? List.of() : flushSlices();
        synchronized (this) {
            open.endLsn = endLsn;
            open.closed = true;
            advance();
        }
        open = null;
        return out;
    }

    /** Whether some table has changes not yet made into batches. */
    boolean hasUnsent() {
        return !slices.isEmpty();
    }

    /** Turns every table's unsent changes into batches (or moves them to the table's hold). */
    List<SourceRecord> flush() {
        return flushSlices();
    }

    private List<SourceRecord> flushSlices() {
        // every id first: a failing reservation (catalog outage) must not leave some tables' records tracked but
        // never returned; the caller aborts and the changes are read again
        for (Map.Entry<String, Slice> entry : slices.entrySet()) {
            if (!held.containsKey(entry.getKey())) {
                assignIds(entry.getKey(), entry.getValue());
            }
        }
        List<SourceRecord> out = new ArrayList<>();
        for (Map.Entry<String, Slice> entry : slices.entrySet()) {
            close(entry.getKey(), entry.getValue(), out);
        }
        slices.clear();
        return out;
    }

    /**
     * Drops the open transaction's changes not yet emitted (the stream broke or restarts); it will be received
     * again from the position the stream restarts at. Changes of transactions that committed before it stay and
     * are sent by the next {@link #flush}.
     */
    void abort() {
        if (open != null) {
            Txn aborted = open;
            for (var it = slices.entrySet().iterator(); it.hasNext(); ) {
                Slice slice = it.next().getValue();
                slice.removeOf(aborted);
                if (slice.changes.isEmpty()) {
                    it.remove();
                }
            }
            for (List<Slice> list : held.values()) {
                for (Slice slice : list) {
                    heldRows -= slice.removeOf(aborted);
                }
                list.removeIf(slice -> slice.changes.isEmpty());
            }
            synchronized (this) {
                // its emitted records (batches cut by batch.rows) stay tracked; its position never becomes safe
                aborted.pending = 0;
                aborted.endLsn = null;
                aborted.closed = true;
                aborted.aborted = true;
                advance();
            }
        }
        open = null;
    }

    /**
     * The server says nothing before {@code serverLsn} is left to send: while no transaction is open, the
     * position may move there once everything before it is acknowledged.
     */
    void idle(Lsn serverLsn) {
        if (open != null || serverLsn == null) {
            return;
        }
        synchronized (this) {
            Txn marker = new Txn(serverLsn, null, null);
            marker.endLsn = serverLsn;
            marker.closed = true;
            inFlight.addLast(marker);
            advance();
        }
    }

    /** Reserves the ids of the batches {@code slice} makes (one per run of rows, one per truncate), once. */
    private void assignIds(String table, Slice slice) {
        if (slice == null || slice.ids != null) {
            return;
        }
        int batches = 0;
        boolean rows = false;
        for (Change change : slice.changes) {
            if (change.op() == RecordHeaders.Op.TRUNCATE) {
                batches += rows ? 2 : 1;
                rows = false;
            } else {
                rows = true;
            }
        }
        batches += rows ? 1 : 0;
        long[] ids = new long[batches];
        for (int i = 0; i < batches; i++) {
            ids[i] = batchIds.next(table);
        }
        slice.ids = ids;
    }

    /** Emits {@code slice} as batches: a truncate is a batch of its own, cutting the rows around it. */
    private void flush(String table, Slice slice, List<SourceRecord> out) {
        if (slice == null || slice.changes.isEmpty()) {
            return;
        }
        int start = 0;
        for (int i = 0; i < slice.changes.size(); i++) {
            if (slice.changes.get(i).op() == RecordHeaders.Op.TRUNCATE) {
                emit(table, slice, start, i, out);
                emit(table, slice, i, i + 1, out);
                start = i + 1;
            }
        }
        emit(table, slice, start, slice.changes.size(), out);
    }

    private void emit(String table, Slice slice, int from, int to, List<SourceRecord> out) {
        if (from >= to) {
            return;
        }
        long id = slice.ids[slice.nextId++];
        int rows = to - from;
        emittedRows += rows;
        Txn first = slice.txns.get(from);
        Txn last = slice.txns.get(to - 1);
        // the batch's cursor is its newest commit; its lag counts from its oldest
        Batch batch = new Batch(table, id, last.commitLsn, rows, first.receivedAt, first.commitTime);
        Map<String, String> partition = tablePartition(flow, table);
        Map<String, Object> offset = Map.of(BATCH_KEY, id, LSN_KEY, last.commitLsn.toString());
        String topic = topicOf.apply(table);
        List<SourceRecord> records = new ArrayList<>(blockBytes > 0 ? 1 : rows);
        List<List<Txn>> recordTxns = new ArrayList<>(blockBytes > 0 ? 1 : rows);
        // only a batch with unchanged TOAST values needs its rows remembered by key
        UnchangedToast.Resolver toast = anyUnchanged(slice, from, to) ? new UnchangedToast.Resolver() : null;
        if (blockBytes > 0) {
            emitBlocks(table, id, partition, offset, topic, slice, from, to, toast, records, recordTxns);
        } else {
            for (int i = from; i < to; i++) {
                Change change = toast == null ? slice.changes.get(i) : toast.resolve(slice.changes.get(i));
                ConnectHeaders headers = new ConnectHeaders();
                headers.addString(RecordHeaders.FLOW, flow);
                headers.addString(RecordHeaders.TABLE, table);
                headers.addString(RecordHeaders.OP, change.op().code());
                headers.addString(RecordHeaders.VERSION, slice.versions.get(i).toString());
                headers.addString(RecordHeaders.BATCH, Long.toString(id));
                if (change.replayId() != null) {
                    headers.addString(RecordHeaders.REPLAY_ID, change.replayId());
                }
                for (String column : change.unchanged()) {
                    headers.addString(RecordHeaders.UNCHANGED, column);
                }
                if (change.keyChanged()) {
                    headers.addString(RecordHeaders.KEY_CHANGED, "true");
                }
                for (String mark : change.nonFinite()) {
                    headers.addString(RecordHeaders.NON_FINITE, mark);
                }
                for (String mark : NonFiniteValues.marks(change.value())) {
                    headers.addString(RecordHeaders.NON_FINITE, mark);
                }
                if (i == to - 1) {
                    headers.addString(RecordHeaders.BATCH_LAST, "true");
                }
                records.add(new SourceRecord(partition, offset, topic, 0, change.keySchema(), change.key(),
                        change.valueSchema(), change.value(), slice.txns.get(i).commitTime.toEpochMilli(), headers));
                recordTxns.add(List.of(slice.txns.get(i)));
            }
        }
        synchronized (this) {
            for (int i = 0; i < records.size(); i++) {
                List<Txn> txns = recordTxns.get(i);
                tags.put(records.get(i), new Tag(txns, batch, null));
                for (Txn txn : txns) {
                    txn.remaining++;
                    txn.pending--;
                }
            }
        }
        out.addAll(records);
    }

    private static boolean anyUnchanged(Slice slice, int from, int to) {
        for (int i = from; i < to; i++) {
            if (!slice.changes.get(i).unchanged().isEmpty()) {
                return true;
            }
        }
        return false;
    }

    /**
     * The rows {@code from} to {@code to} of {@code slice} as block records: a new block when the rows so far reach
     * {@link #blockBytes} or the value schema changes (a relation changed within the slice). Floats travel exactly in a
     * block, so only the changes' own non-finite marks (decimals) are written.
     */
    private void emitBlocks(String table, long id, Map<String, String> partition, Map<String, Object> offset, String topic,
                            Slice slice, int from, int to, UnchangedToast.Resolver toast, List<SourceRecord> records,
                            List<List<Txn>> recordTxns) {
        RowBlock.Writer writer = null;
        org.apache.kafka.connect.data.Schema writerSchema = null;
        List<Txn> txns = new ArrayList<>();
        for (int i = from; i < to; i++) {
            Change change = toast == null ? slice.changes.get(i) : toast.resolve(slice.changes.get(i));
            if (writer != null && writer.rows() > 0 && (writer.bytes() >= blockBytes || change.valueSchema() != writerSchema
                    || limit != null && !limit.fitsInBlock(change, writer.blockBytes()))) {
                records.add(blockRecord(table, id, partition, offset, topic, writer.finish(), slice.txns.get(i - 1), false));
                recordTxns.add(txns);
                txns = new ArrayList<>();
            }
            if (writer == null || change.valueSchema() != writerSchema) {
                writer = new RowBlock.Writer(change.valueSchema(), change.keySchema());
                writerSchema = change.valueSchema();
            }
            writer.add(change.op(), slice.versions.get(i), change.value(), change.unchanged(), change.keyChanged(),
                    change.nonFinite(), change.replayId());
            txns.add(slice.txns.get(i));
        }
        records.add(blockRecord(table, id, partition, offset, topic, writer.finish(), slice.txns.get(to - 1), true));
        recordTxns.add(txns);
    }

    private SourceRecord blockRecord(String table, long id, Map<String, String> partition, Map<String, Object> offset,
                                     String topic, byte[] block, Txn lastTxn, boolean lastOfBatch) {
        ConnectHeaders headers = new ConnectHeaders();
        headers.addString(RecordHeaders.FLOW, flow);
        headers.addString(RecordHeaders.TABLE, table);
        headers.addString(RecordHeaders.BATCH, Long.toString(id));
        headers.addString(RowBlock.HEADER, RowBlock.FORMAT);
        if (lastOfBatch) {
            headers.addString(RecordHeaders.BATCH_LAST, "true");
        }
        return new SourceRecord(partition, offset, topic, 0, null, null, Schema.BYTES_SCHEMA, block,
                lastTxn.commitTime.toEpochMilli(), headers);
    }

    /** A position record for {@code lsn}: partition {@code {"flow", "slot"}}, offset {@code {"lsn"}}. */
    SourceRecord positionRecord(Lsn lsn) {
        // with blocks the worker may use ByteArrayConverter for values: the position's value is bytes then too
        SourceRecord record = blockBytes > 0
                ? new SourceRecord(slotPartition(flow, slot), Map.of(LSN_KEY, lsn.toString()), heartbeatTopic, 0,
                        Schema.STRING_SCHEMA, flow, Schema.BYTES_SCHEMA, lsn.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8))
                : new SourceRecord(slotPartition(flow, slot), Map.of(LSN_KEY, lsn.toString()), heartbeatTopic, 0,
                        Schema.STRING_SCHEMA, flow, Schema.STRING_SCHEMA, lsn.toString());
        synchronized (this) {
            tags.put(record, new Tag(List.of(), null, lsn));
        }
        return record;
    }

    /** Kafka acknowledged {@code record} (called on the producer's thread, from {@code commitRecord}). */
    synchronized void acknowledged(SourceRecord record) {
        Tag tag = tags.remove(record);
        if (tag == null) {
            return;
        }
        if (tag.position != null) {
            if (tag.position.isAfter(acknowledgedPosition)) {
                acknowledgedPosition = tag.position;
            }
            return;
        }
        for (Txn txn : tag.txns) {
            txn.remaining--;
        }
        tag.batch.remaining -= tag.txns.size();
        if (tag.batch.remaining == 0) {
            Batch b = tag.batch;
            synced.add(new Synced(b.table, new SyncedBatch(b.commitLsn.toString(), b.id, b.rows, b.receivedAt, b.commitTime)));
        }
        advance();
    }

    /** The end of the last transaction whose records are all acknowledged, in order; never moves back. */
    synchronized Lsn safePosition() {
        return safe;
    }

    /**
     * The end of the last transaction all of whose changes, and every earlier transaction's, were handed out as
     * records, acknowledged or not (never behind {@link #safePosition}). Under connector-defined Kafka transactions a
     * position record for it goes into the same Kafka transaction as those records: both commit, or neither.
     */
    synchronized Lsn emittedPosition() {
        Lsn at = safe;
        for (Txn txn : inFlight) {
            if (!txn.closed || txn.pending > 0) {
                break;
            }
            if (!txn.aborted && txn.endLsn.isAfter(at)) {
                at = txn.endLsn;
            }
        }
        return at;
    }

    /** The largest position whose position record Kafka acknowledged. */
    synchronized Lsn acknowledgedPosition() {
        return acknowledgedPosition;
    }

    /** The table batches acknowledged since the last call, in acknowledgement order. */
    synchronized List<Synced> drainSynced() {
        List<Synced> out = new ArrayList<>(synced);
        synced.clear();
        return out;
    }

    /** Records handed out and not acknowledged by Kafka yet (position records included). */
    synchronized int unacknowledged() {
        return tags.size();
    }

    /** Whether every record emitted so far is acknowledged and no transaction is open or held. */
    synchronized boolean drained() {
        return open == null && inFlight.isEmpty();
    }

    private void advance() {
        while (!inFlight.isEmpty()) {
            Txn head = inFlight.peekFirst();
            if (!head.closed || head.remaining > 0 || head.pending > 0) {
                return;
            }
            inFlight.removeFirst();
            if (!head.aborted && head.endLsn.isAfter(safe)) {
                safe = head.endLsn;
            }
        }
    }

    /** A table's unsent changes, each with its transaction and version. */
    private static final class Slice {
        final List<Change> changes = new ArrayList<>();
        final List<java.math.BigInteger> versions = new ArrayList<>();
        final List<Txn> txns = new ArrayList<>();
        long[] ids;
        int nextId;

        void add(Change change, Txn txn, java.math.BigInteger version) {
            changes.add(change);
            txns.add(txn);
            versions.add(version);
        }

        /** Removes the changes of {@code txn}; returns how many. */
        int removeOf(Txn txn) {
            int removed = 0;
            for (int i = changes.size() - 1; i >= 0; i--) {
                if (txns.get(i) == txn) {
                    changes.remove(i);
                    txns.remove(i);
                    versions.remove(i);
                    removed++;
                }
            }
            if (removed > 0) {
                // ids were reserved for the old shape: reserve again (the reserved ones become gaps)
                ids = null;
                nextId = 0;
            }
            return removed;
        }
    }

    private static final class Txn {
        final Lsn commitLsn;
        final Instant commitTime;
        final Instant receivedAt;
        Lsn endLsn;
        boolean closed;
        boolean aborted;
        boolean snapshot;
        /** Records emitted and not yet acknowledged. */
        int remaining;
        /** Changes not yet emitted (waiting in a slice or held): they keep the position behind this transaction. */
        int pending;

        Txn(Lsn commitLsn, Instant commitTime, Instant receivedAt) {
            this.commitLsn = commitLsn;
            this.commitTime = commitTime;
            this.receivedAt = receivedAt;
        }
    }

    private static final class Batch {
        final String table;
        final long id;
        final Lsn commitLsn;
        final long rows;
        final Instant receivedAt;
        final Instant commitTime;
        int remaining;

        Batch(String table, long id, Lsn commitLsn, int rows, Instant receivedAt, Instant commitTime) {
            this.table = table;
            this.id = id;
            this.commitLsn = commitLsn;
            this.rows = rows;
            this.remaining = rows;
            this.receivedAt = receivedAt;
            this.commitTime = commitTime;
        }
    }

    /** What a record acknowledges: the transaction of each of its rows (one, or a block's), or a position. */
    private record Tag(List<Txn> txns, Batch batch, Lsn position) {
    }
}
