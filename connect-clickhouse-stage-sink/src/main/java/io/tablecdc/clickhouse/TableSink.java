package io.tablecdc.clickhouse;

import java.io.IOException;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.BiConsumer;
import java.util.function.Supplier;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.errors.RetriableException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.DestinationRefusal;
import io.tablecdc.catalog.SinkLeases;
import io.tablecdc.catalog.Stage;
import io.tablecdc.catalog.StageFile;
import io.tablecdc.catalog.StagedOffsets;
import io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig;
import io.tablecdc.clickhouse.schema.TypeMappingException;
import io.tablecdc.clickhouse.stage.StagePart;
import io.tablecdc.clickhouse.stage.StageStore;
import io.tablecdc.common.Backoff;
import io.tablecdc.common.ErrorEpisode;
import io.tablecdc.common.RecordHeaders;
import io.tablecdc.common.TablePause;
import io.tablecdc.common.metrics.TableMetrics;

/**
 * One table inside a sink task: its destination claim (or the refusal that stopped it), its open batch
 * ({@link TableStager}), the complete batch waiting for its upload, its normalize loop, and what is done with its rows
 * that cannot be staged. A record's rows (one for a row record, a block's rows for a block record) take one path,
 * {@link #take}: check, stage, report the rows that cannot be staged, close the batch they completed. The task routes
 * records and partitions to their table and records the offsets taken; only the task's thread calls these methods.
 *
 * <p>The object lives as long as the task: the claim's refusal, a {@code table.per.topic} binding refused and whether
 * this sink cuts the table's batches are kept when the table's partition is revoked ({@link #leave}); its open batch,
 * pending upload and normalize loop are not.
 *
 * <p>Why it is long: it is one table's state machine (docs/design.md, "A table inside a sink task"); its claim, open
 * batch, upload, hold and errant rows share that state, and each change of it is made here.
 */
final class TableSink {
    /** Its lines are the sink task's, under the sink task's name. */
    private static final Logger log = LoggerFactory.getLogger(ClickHouseStageSinkTask.class);
    /** The kind of error episode an upload reports in the table's metrics. */
    static final String STAGE_EPISODE = "stage";
    /** Marks the upload's errors in the table's shared error (the source and the normalize loop mark their own). */
    static final String STAGE_ERROR_PREFIX = "stage: ";
    /** The pause reason of a table whose staged batches fill its normalize buffer. */
    static final String SINK_BUFFER_FULL = "sink_normalize_buffer_full";
    /** How often a refused table checks its claim again, so that it proceeds once the operator removed the cause. */
    static final long RECHECK_MS = 30_000;
    /** How many failed rows a block's report names. */
    private static final int ROWS_NAMED = 10;

    /** What a table asks of its task: its partitions paused and resumed, and the next delivery put off. */
    interface Task {
        /** Records that {@code tp} carries the table's records (before the table may be paused). */
        void bind(TopicPartition tp, TableKey key);

        void pause(TableKey key);

        void resume(TableKey key);

        /** Pauses one partition; a partition not assigned (records routed from another topic) is left. */
        void pause(TopicPartition tp);

        /** Resumes one partition; a partition not assigned any more is left. */
        void resume(TopicPartition tp);

        /** Connect delivers the records again after {@code ms} (with a {@link RetriableException}). */
        void timeout(long ms);
    }

    /**
     * What became of a row: held (nothing staged), staged, staged as the last of its batch, or dropped as a replay of a
     * record of another producer staged before.
     */
    private enum Staged { HELD, ROW, LAST, DROPPED }

    /**
     * What every table of a task shares. {@code errant}: reports a record that cannot be staged, or fails the task;
     * {@code held}: the tables whose sink hold this task renews (claimed on it, not left), read by another thread.
     */
    record Shared(ClickHouseStageSinkConfig config, String connectorName, Supplier<Catalog> catalog, StageStore store,
                  NormalizeLoops loops, TableMetrics metrics, Path localDir, DestinationNames names, Task task,
                  BiConsumer<SinkRecord, Exception> errant, Set<List<String>> clampsLogged, Set<TableKey> held) {
    }

    /** One row of a record: the row record itself, or a block's row as the row record it stands for. */
    record Row(SinkRecord record, SinkHeaders headers, String name) {
    }

    private static final class PendingUpload {
        final TableStager.ClosedBatch batch;
        /** For a batch this sink cut: per consumed topic partition, its highest offset and latest record timestamp. */
        final List<StagedOffsets> covering;
        final ErrorEpisode episode;
        long retryAtMs;

        PendingUpload(TableStager.ClosedBatch batch, List<StagedOffsets> covering, ErrorEpisode episode) {
            this.batch = batch;
            this.covering = covering;
            this.episode = episode;
        }
    }

    final TableKey key;
    private final Shared shared;
    private final ClickHouseStageSinkConfig config;
    private final String connectorName;
    /**
     * Why the table is stopped: another source table is loaded into its ClickHouse table, another sink holds it, or it
     * was loaded elsewhere. Checked again {@value #RECHECK_MS} ms after the refusal ({@link #recheckRefusal}).
     */
    private String refused;
    /** When a refused table checks its claim again. */
    private long recheckAtMs;
    /** The partitions paused by the refusal, resumed when the table checks its claim again. */
    private final Set<TopicPartition> refusedPartitions = new HashSet<>();
    /** The last refusal logged at error level; the same refusal found again by a recheck is logged at debug. */
    private String refusalLogged;
    /** With table.per.topic: why a record of the table arrived on a topic bound to another table. */
    private String unbound;
    /** Whether this sink cuts the table's batches (records of other producers): closed by size or age. */
    private boolean selfCut;
    /**
     * Records of other producers: per consumed topic partition, how far the table's batches are staged (read from the
     * catalog when the table is claimed, raised by each batch staged here). A record at or below it is a replay.
     */
    private Map<TopicPartition, StagedOffsets> stagedOffsets = Map.of();
    /** What the open batch of records of other producers holds, per consumed topic partition. */
    private final Map<TopicPartition, StagedOffsets> openCovering = new HashMap<>();
    /** Replayed records dropped since the last line logged about them: how many, of which partition, which offsets. */
    private long replaysDropped;
    private TopicPartition replayPartition;
    private long replayFirst;
    private long replayLast;
    /** The open batch; null until the table's destination is claimed on this task (again after {@link #leave}). */
    private TableStager stager;
    /** The complete batch whose upload or catalog write failed; retried with backoff, the table paused meanwhile. */
    private PendingUpload pending;
    /** The table's normalize loop on this task, once started. */
    private TableNormalizer loop;
    /**
     * The table's back-pressure hold: its partitions paused while its staged batches fill its normalize buffer
     * ({@code normalize.buffer.batches}), until its loop drains below it. Kept after the table leaves: pauses and
     * resumes within a minute of its last resume log at debug.
     */
    private final TablePause bufferHold = new TablePause(log, Duration.ofMinutes(1));

    TableSink(TableKey key, Shared shared) {
        this.key = key;
        this.shared = shared;
        this.config = shared.config();
        this.connectorName = shared.connectorName();
    }

    private Catalog catalog() {
        return shared.catalog().get();
    }

    /** The table's normalize loop, started (and woken for batches staged before) on first use. */
    TableNormalizer loop() {
        if (loop == null) {
            loop = shared.loops().of(key);
        }
        return loop;
    }

    /**
     * Takes a record's rows: a row record's one row, or a block record's rows. The order is the same for both: the
     * table's destination is claimed; each row is staged, or kept to be reported; the record goes to the errant record
     * reporter with the rows that cannot be staged (without a reporter, errors.tolerance=none, that fails the task);
     * only then is the batch its last row completed closed (uploaded, recorded), so that no batch is staged without a
     * row that failed the task. Returns false, nothing of the record taken, when the table is stopped or held before
     * the record's first row that can be staged. A row record's report carries its own error; a block's names up to
     * {@value #ROWS_NAMED} of its failed rows, and its other rows are staged.
     */
    boolean take(SinkRecord record, List<Row> rows, boolean block, TopicPartition tp, long now) throws IOException {
        if (rows.isEmpty()) {
            return true;
        }
        if (!claim(record, rows.get(0).headers().present(), tp)) {
            return false;
        }
        shared.task().bind(tp, key);
        List<String> failed = null;
        RuntimeException firstFailure = null;
        int failures = 0;
        int staged = 0;
        boolean complete = false;
        for (int i = 0; i < rows.size(); i++) {
            Row row = rows.get(i);
            try {
                Staged outcome = stageRow(row.record(), row.headers(), now);
                if (outcome == Staged.HELD) {
                    if (staged == 0) {
                        // held before the record's first row that can be staged (the rows before it cannot, and are
                        // not reported yet): nothing of the record is taken, it is read again once the table resumes
                        return false;
                    }
                    // a staged row leaves its batch open, and every row of a block is of that batch
                    throw new IllegalStateException("sink " + connectorName + ", flow " + key.flow() + ", table "
                            + key.table() + ": held at row " + i + " of a block of batch " + row.headers().batch()
                            + " after " + staged + " of its rows were staged");
                }
                staged++;
                complete |= outcome == Staged.LAST;
            } catch (TypeMappingException | IllegalArgumentException | ClassCastException e) {
                failures++;
                if (firstFailure == null) {
                    firstFailure = e;
                    failed = new ArrayList<>();
                }
                if (failed.size() < ROWS_NAMED) {
                    failed.add(row.name() + ": " + e.getMessage());
                }
                // a row that carried tablecdc.batch.last=true completes its batch all the same (without it)
                complete |= completesOpenBatch(row.headers());
            }
        }
        if (firstFailure != null) {
            errant(record, !block ? firstFailure : new IllegalArgumentException("flow " + key.flow() + ", table "
                    + key.table() + ", batch " + rows.get(0).headers().batch() + ": " + failures + " of the block's "
                    + rows.size() + " rows cannot be staged (the others are): " + String.join("; ", failed)
                    + (failures > failed.size() ? "; …" : "")));
        }
        if (complete && stager.open()) {
            closeBatch();
        }
        return true;
    }

    /**
     * A record of the table that could not be taken at all went to the errant record reporter: when it carried
     * {@code tablecdc.batch.last=true}, its batch is complete all the same (without it), so it is closed and staged
     * rather than left open until another batch arrives.
     */
    void closeBatchOfErrantLast(SinkHeaders headers) throws IOException {
        if (completesOpenBatch(headers)) {
            closeBatch();
        }
    }

    /** Whether a row (or record) with these headers, which cannot be staged, was the last of the table's open batch. */
    private boolean completesOpenBatch(SinkHeaders headers) {
        if (!headers.present() || !headers.lastOfBatch() || headers.notText() != null) {
            return false;
        }
        long batch;
        try {
            batch = headers.batchId();
        } catch (IllegalArgumentException e) {
            return false;
        }
        return stager != null && stager.open() && stager.batchId() == batch;
    }

    private void errant(SinkRecord record, Exception error) {
        shared.errant().accept(record, error);
    }

    /**
     * Claims the table's destination on this task before anything of it is staged (with {@code table.per.topic}, also
     * its topic); false, with the record's partition paused, when the table is stopped. Throws
     * {@link IllegalArgumentException} (the record is errant) for a topic bound to another table, and
     * {@link RetriableException} (the same records come again) while ClickHouse or the catalog cannot answer.
     */
    private boolean claim(SinkRecord record, boolean tablecdc, TopicPartition tp) {
        if (stager != null) {
            return true;
        }
        if (refused != null) {
            shared.task().pause(tp);
            return false;
        }
        if (unbound == null && tablecdc && config.tablePerTopic()) {
            List<String> bound;
            try {
                bound = catalog().sink().otherTablesOfSinkTopic(connectorName, OriginalPartition.topic(record), key.flow(), key.table());
            } catch (RuntimeException e) {
                throw new RetriableException("sink " + connectorName + ": looking up the table of topic " + OriginalPartition.topic(record)
                        + " in the catalog failed: " + e.getMessage(), e);
            }
            if (!bound.isEmpty()) {
                unbound = "topic " + OriginalPartition.topic(record) + " is bound to " + bound.get(0) + " (table.per.topic=true); a record for"
                        + " flow " + key.flow() + ", table " + key.table() + " is not taken from it";
            }
        }
        if (unbound != null) {
            throw new IllegalArgumentException(unbound);
        }
        String destinationName;
        try {
            destinationName = shared.names().destinationOf(key);
        } catch (RuntimeException e) {
            // nothing of the table is staged before its destination is claimed: the same records come again
            shared.task().timeout(StagedScan.SCAN_RETRY_MS);
            throw new RetriableException("sink " + connectorName + ": asking ClickHouse for the UUID of database "
                    + config.clickHouseDatabase() + " (which the catalog records table " + key.table() + " under) failed;"
                    + " retried in " + StagedScan.SCAN_RETRY_MS + " ms: " + ErrorEpisode.describe(e), e);
        }
        Optional<DestinationRefusal> refusal;
        try {
            catalog().progress().initTable(key.flow(), key.table());
            refusal = catalog().sink().claimDestination(key.flow(), key.table(), destinationName,
                    shared.names().addressNameOf(key), connectorName, SinkLeases.SINK_HOLD);
            if (refusal.isEmpty()) {
                catalog().sink().recordSinkTopic(key.flow(), key.table(), connectorName, OriginalPartition.topic(record));
            }
            stagedOffsets = tablecdc ? new HashMap<>() : readStagedOffsets();
        } catch (RuntimeException e) {
            throw new RetriableException("sink " + connectorName + ": registering table " + key.table()
                    + " in the catalog failed: " + e.getMessage(), e);
        }
        if (refusal.isPresent()) {
            refuse(refusal.get(), tp);
            return false;
        }
        claimed();
        stager = new TableStager(key, shared.localDir(), config.avroCodec(), config.stageMaxFileBytes(),
                column -> config.integerTemporal(key.table(), column),
                column -> config.decimalText(key.table(), column),
                clamp -> {
                    if (shared.clampsLogged().add(List.of(key.flow(), key.table(), clamp.column()))) {
                        log.warn("sink {}, flow {}, table {}, column {}: {} is outside the range of the column's ClickHouse type"
                            + " and is stored as {}; such values are counted (clamped_values in tablecdc-status, the"
                            + " values-clamped-total metric) and not logged again for this column until the task restarts; list"
                            + " the column in {} to keep them exact", connectorName, key.flow(), key.table(), clamp.column(),
                            clamp.value(), clamp.storedAs(), clamp.exactUnder());
                    }
                });
        shared.metrics().table(key.flow(), key.table());
        return true;
    }

    /**
     * Whether the table has staged batches of its own to load, at the scan of a newly assigned topic ({@code topic}):
     * claims its destination for them, the same claim as for new records (a changed table.name.format must not load a
     * backlog into another ClickHouse table), and false when the table is stopped. Throws when the claim cannot be asked.
     */
    boolean claimBacklog(String topic) {
        if (refused != null) {
            return false;
        }
        Optional<DestinationRefusal> refusal = catalog().sink().claimDestination(key.flow(), key.table(),
                shared.names().destinationOf(key), shared.names().addressNameOf(key), connectorName, SinkLeases.SINK_HOLD);
        if (refusal.isPresent()) {
            refuse(refusal.get(), new TopicPartition(topic, 0));
            return false;
        }
        claimed();
        return true;
    }

    /** The table's destination and sink hold are this sink's: the task renews the hold from now on. */
    private void claimed() {
        if (refusalLogged != null) {
            log.info("sink {}: flow {}, table {}: its claim, refused before, is granted now; it proceeds", connectorName,
                    key.flow(), key.table());
            refusalLogged = null;
            try {
                catalog().progress().clearError(key.flow(), key.table(), STAGE_ERROR_PREFIX);
            } catch (RuntimeException e) {
                log.debug("clearing the refusal of {} failed: {}", key, e.toString());
            }
        }
        shared.held().add(key);
    }

    /**
     * A refused table checks its claim again once {@value #RECHECK_MS} ms passed: its partitions resume, and the next
     * record (the one refused, read again) asks the catalog again; it proceeds, or is refused and paused again. So the
     * way out the refusal names (another sink stopped, a former flow retired) needs no restart of the sink.
     */
    void recheckRefusal(long now) {
        if (refused == null || now < recheckAtMs) {
            return;
        }
        refused = null;
        for (TopicPartition tp : refusedPartitions) {
            shared.task().resume(tp);
        }
        refusedPartitions.clear();
    }

    /**
     * Two source tables map to one ClickHouse table, another sink holds the table, or a table with batches loaded would
     * now be loaded into another one: the table is stopped (its partition paused, nothing of it staged or loaded), with
     * the error in the log and in its catalog row, and checks its claim again every {@value #RECHECK_MS} ms.
     */
    private void refuse(DestinationRefusal refusal, TopicPartition tp) {
        refuse(shared.names().refusalMessage(key, refusal, tp.topic()), tp);
    }

    /** Stops the table with {@code message}: its partition paused, nothing more of it staged or loaded. */
    private void refuse(String message, TopicPartition tp) {
        refused = message;
        recheckAtMs = System.currentTimeMillis() + RECHECK_MS;
        refusedPartitions.add(tp);
        if (message.equals(refusalLogged)) {
            log.debug("{} (checked again)", message);
        } else {
            log.error("{}", message);
            refusalLogged = message;
        }
        try {
            catalog().progress().recordError(key.flow(), key.table(), STAGE_ERROR_PREFIX + message, Instant.now(), null);
        } catch (RuntimeException e) {
            log.debug("recording the refusal of {} failed: {}", key, e.toString());
        }
        shared.task().pause(tp);
    }

    /**
     * Stages one row (a truncate record marks its batch to empty the table first); {@link Staged#HELD} (nothing staged)
     * when the row would start a new batch of a table that must wait: its previous batch is not uploaded yet, or its
     * staged batches fill its normalize buffer.
     */
    private Staged stageRow(SinkRecord record, SinkHeaders headers, long now) throws IOException {
        headers.requireText();
        boolean tablecdc = headers.present();
        long headerBatch = tablecdc ? headers.batchId() : -1;
        RecordHeaders.Op headerOp = tablecdc ? headers.operation() : null;
        TableNormalizer normalizer = loop();
        long batch;
        BigInteger version;
        RecordHeaders.Op op;
        if (tablecdc) {
            batch = headerBatch;
            version = headers.versionValue();
            op = headerOp;
            if (op == RecordHeaders.Op.TRUNCATE && stager.hasRows() && stager.batchId() == batch) {
                // its rows share a file and are loaded together: nothing could empty the table between them; the
                // caller closes the batch if this was its last record, once the record is reported
                throw new IllegalArgumentException("table " + key.table() + ", batch " + batch + ": a truncate record after rows of"
                        + " the same batch cannot be ordered against them (a truncate must be the first record of its batch)");
            }
            if (stager.open() && stager.batchId() != batch) {
                // the previous batch lost its last record (its source restarted): stage what arrived
                closeBatch();
            }
        } else {
            // records of other producers: upserts, batches cut by size and time, versions from offsets
            Staged replay = replay(record);
            if (replay != null) {
                return replay;
            }
            batch = stager.open() ? stager.batchId() : -1;
            version = BigInteger.valueOf(record.kafkaOffset());
            op = record.value() == null ? RecordHeaders.Op.DELETE : RecordHeaders.Op.CREATE;
        }
        if (!stager.open()) {
            // one reading of the count decides: the normalize loop lowers it meanwhile, and partitions paused on a
            // reading that the hold did not share would never be resumed (randomized run seed 8752)
            long pendingBatches = normalizer.pendingBatches();
            boolean full = pendingBatches >= config.normalizeBufferBatches();
            if (full || pending != null) {
                if (full) {
                    holdForBuffer(pendingBatches);
                }
                shared.task().pause(key);
                return Staged.HELD;
            }
        }
        if (batch < 0) {
            batch = nextSelfCutBatchId();
        }
        if (!tablecdc) {
            TopicPartition tp = OriginalPartition.of(record);
            openCovering.merge(tp, new StagedOffsets(tp.topic(), tp.partition(), record.kafkaOffset(),
                    timestampOf(record)), StagedOffsets::max);
        }
        if (op == RecordHeaders.Op.TRUNCATE) {
            stager.truncate(record, batch, now);
        } else {
            stager.append(record, batch, version, op, headers.unchanged(), headers.keyChanged(), headers.nonFinite(), now);
        }
        if (tablecdc) {
            return headers.lastOfBatch() ? Staged.LAST : Staged.ROW;
        }
        if (stager.rows() >= config.batchMaxRows()) {
            closeBatch();
        }
        return Staged.ROW;
    }

    /**
     * A record of another producer at or below the offset its partition is staged up to: {@link Staged#DROPPED} when
     * it is a replay (the worker died before the offsets were committed, the offsets were reset, a time-cut batch ended
     * elsewhere before), {@link Staged#HELD} with the table stopped when it cannot have been staged before: its
     * timestamp is later than every record staged from the partition, so the topic's offsets went back (the topic was
     * recreated, reset, or a mirror took its place) and its rows, versioned by offset, would lose to the rows loaded
     * before. Null for a record above the staged offsets, which is staged.
     */
    private Staged replay(SinkRecord record) {
        TopicPartition tp = OriginalPartition.of(record);
        StagedOffsets staged = stagedOffsets.get(tp);
        long offset = record.kafkaOffset();
        if ((staged == null || offset > staged.lastOffset()) && !stager.open() && pending == null) {
            // the record would open a batch: read the catalog again, since another task may have staged the partition
            // after this one read it (the task that had it before a rebalance, until it learns that it lost it)
            try {
                stagedOffsets = readStagedOffsets();
            } catch (RuntimeException e) {
                throw new RetriableException("sink " + connectorName + ": reading how far table " + key.table()
                        + " is staged from the catalog failed: " + e.getMessage(), e);
            }
            staged = stagedOffsets.get(tp);
        }
        if (staged == null || offset > staged.lastOffset()) {
            logReplaysDropped();
            return null;
        }
        long timestamp = timestampOf(record);
        if (timestamp >= 0 && staged.maxTimestamp() >= 0 && timestamp > staged.maxTimestamp()) {
            logReplaysDropped();
            refuse(shared.names().offsetsWentBackMessage(key, tp, offset, timestamp, staged.lastOffset(),
                    staged.maxTimestamp()), tp);
            try {
                stager.abandon();
            } catch (IOException e) {
                log.debug("dropping the open batch of stopped table {} left local files behind: {}", key, e.toString());
            }
            stager = null;
            openCovering.clear();
            return Staged.HELD;
        }
        log.debug("sink {}, table {}: the record at {}@{} was staged before (up to offset {}); dropped as a replay",
                connectorName, key.table(), tp, offset, staged.lastOffset());
        if (replaysDropped > 0 && !tp.equals(replayPartition)) {
            logReplaysDropped();
        }
        if (replaysDropped == 0) {
            replayPartition = tp;
            replayFirst = offset;
        }
        replaysDropped++;
        replayLast = offset;
        return Staged.DROPPED;
    }

    /** The table's staged offsets as the catalog has them, by consumed topic partition. */
    private Map<TopicPartition, StagedOffsets> readStagedOffsets() {
        Map<TopicPartition, StagedOffsets> read = new HashMap<>();
        for (StagedOffsets o : catalog().stages().stagedOffsets(key.flow(), key.table())) {
            read.put(new TopicPartition(o.topic(), o.partition()), o);
        }
        return read;
    }

    /** Logs (at info) how many replayed records were dropped since the last such line, if any. */
    private void logReplaysDropped() {
        if (replaysDropped > 0) {
            log.info("sink {}, flow {}, table {}: {} records of {} at offsets {}-{} were staged before and are dropped as"
                    + " replays", connectorName, key.flow(), key.table(), replaysDropped, replayPartition, replayFirst,
                    replayLast);
            replaysDropped = 0;
        }
    }

    /** A record's Kafka timestamp, -1 when it has none. */
    private static long timestampOf(SinkRecord record) {
        Long timestamp = record.timestamp();
        return timestamp == null || timestamp < 0 ? -1 : timestamp;
    }

    /**
     * A new batch id for a table whose batches this sink cuts: reserved in the catalog, above every id reserved,
     * synced, normalized or staged for the table before, so that a batch still staged from before a restart is
     * never replaced by new records under its id.
     */
    private long nextSelfCutBatchId() {
        long next;
        try {
            next = catalog().batchIds().reserveBatchIds(key.flow(), key.table(), 1);
        } catch (RuntimeException e) {
            throw new RetriableException("sink " + connectorName + ": reserving a batch id for table " + key.table()
                    + " in the catalog failed: " + e.getMessage(), e);
        }
        selfCut = true;
        return next;
    }

    /** Closes the open batch of a table whose batches this sink cuts once it is {@code batch.max.ms} old. */
    void closeIfDue(long now) throws IOException {
        logReplaysDropped();
        if (stager != null && stager.open() && selfCut && now - stager.openedAtMs() >= config.batchMaxMs()) {
            closeBatch();
        }
    }

    /** The first offset in {@code tp} of the table's open batch or of its batch waiting for its upload; null when neither has one. */
    Long firstUnstagedOffset(TopicPartition tp) {
        Long first = stager != null && stager.open() ? stager.firstOffset(tp) : null;
        Long waiting = pending == null ? null : pending.batch.firstOffsets().get(tp);
        if (waiting != null && (first == null || waiting < first)) {
            return waiting;
        }
        return first;
    }

    private void closeBatch() throws IOException {
        TableStager.ClosedBatch batch = stager.close();
        PendingUpload upload = new PendingUpload(batch, List.copyOf(openCovering.values()), uploadEpisode());
        openCovering.clear();
        if (!tryUpload(upload, System.currentTimeMillis())) {
            pending = upload;
            shared.task().pause(key);
        }
    }

    /** The error episode of the upload of one batch: 1 s doubling to 60 s between attempts. */
    private ErrorEpisode uploadEpisode() {
        return new ErrorEpisode(log, "staging of flow " + key.flow() + ", table " + key.table(), new Backoff(1_000, 60_000),
                Clock.systemUTC(), ErrorEpisode.inCatalog(shared.catalog(), key.flow(), key.table(), STAGE_ERROR_PREFIX),
                ErrorEpisode.metric(() -> shared.metrics().table(key.flow(), key.table()), STAGE_EPISODE));
    }

    /**
     * Retries the upload of the batch waiting for it, once its retry time came; when it succeeds, the table's partitions
     * resume unless its buffer holds it.
     */
    void retryUpload(long now) {
        if (pending != null && now >= pending.retryAtMs && tryUpload(pending, now)) {
            pending = null;
            if (!bufferHold.paused()) {
                shared.task().resume(key);
            }
        }
    }

    /** Uploads a complete batch and records its stage row; false (and a retry time) when that failed. */
    private boolean tryUpload(PendingUpload upload, long now) {
        TableStager.ClosedBatch batch = upload.batch;
        List<StageFile> files = new ArrayList<>();
        boolean recorded = false;
        try {
            Stage existing = catalog().stages().getStage(key.flow(), key.table(), batch.batchId()).orElse(null);
            if (existing != null && existing.rows() >= batch.rows()) {
                // a staged batch is never replaced by a part of it, nor by a copy of itself (records delivered again
                // after a restart): keep the staged one, whose files a normalize run may be loading right now
                if (existing.rows() > batch.rows()) {
                    log.warn("sink {}: flow {}, table {}: batch {} is staged already with {} rows; a later copy with {} rows"
                            + " is dropped instead of replacing it", connectorName, key.flow(), key.table(), batch.batchId(),
                            existing.rows(), batch.rows());
                } else {
                    log.info("sink {}: flow {}, table {}: batch {} is staged already ({} rows); the copy delivered again is"
                            + " dropped", connectorName, key.flow(), key.table(), batch.batchId(), batch.rows());
                }
                for (StagePart part : batch.parts()) {
                    Files.deleteIfExists(part.file());
                }
                loop().wake();
                return true;
            }
            String attempt = Long.toHexString(System.nanoTime());
            for (int i = 0; i < batch.parts().size(); i++) {
                StagePart part = batch.parts().get(i);
                String objectKey = batch.objectName(key.fileName() + "/" + batch.batchId() + "/" + attempt, i);
                files.add(new StageFile(shared.store().upload(part.file(), objectKey), part.rows(), part.bytes()));
            }
            List<StageFile> previous = existing == null ? List.of() : existing.files();
            boolean stored = catalog().stages().upsertStage(key.flow(), key.table(), new Stage(batch.batchId(), files, batch.rows(), batch.counts(),
                    batch.truncateBefore()), upload.covering);
            recorded = true;
            for (StagedOffsets o : upload.covering) {
                stagedOffsets.merge(new TopicPartition(o.topic(), o.partition()), o, StagedOffsets::max);
                if (!stored) {
                    log.info("sink {}: flow {}, table {}: batch {} holds only records of {}-{} up to offset {} that were"
                            + " staged before (by another task); it is dropped", connectorName, key.flow(), key.table(),
                            batch.batchId(), o.topic(), o.partition(), o.lastOffset());
                }
            }
            // files of an earlier staging of this batch (replaced) or of this one (batch already normalized)
            for (StageFile file : stored ? previous : files) {
                if (!files.contains(file) || !stored) {
                    shared.store().delete(file.uri());
                }
            }
            for (StagePart part : batch.parts()) {
                Files.deleteIfExists(part.file());
            }
            TableMetrics.Table tableMetrics = shared.metrics().table(key.flow(), key.table());
            upload.episode.succeeded();
            if (stored) {
                tableMetrics.batchStaged(batch.batchId(), batch.rows(), Instant.now());
                tableMetrics.valuesClamped(batch.counts().clampedValues());
                TableNormalizer normalizer = loop();
                normalizer.staged();
                normalizer.wake();
            }
            return true;
        } catch (Exception e) {
            if (!recorded && !files.isEmpty()) {
                deleteUnreferenced(batch.batchId(), files);
            }
            upload.retryAtMs = now + upload.episode.failed(e);
            return false;
        }
    }

    /**
     * Holds the table, whose staged batches ({@code pendingBatches}, as the caller read them) fill its buffer; the caller
     * pauses its partitions, and {@link #releaseIfDrained} resumes them. The hold begins whatever the count is by now:
     * its loop may have drained meanwhile, and a pause without a hold would never end.
     */
    private void holdForBuffer(long pendingBatches) {
        if (bufferHold.begin()) {
            shared.metrics().table(key.flow(), key.table()).paused(SINK_BUFFER_FULL);
            bufferHold.log("flow {}, table {}: {} staged batches wait for normalize (normalize.buffer.batches={});"
                    + " pausing its partitions" + (bufferHold.quiet() ? "" : " (pauses within a minute of the last are logged at debug)"),
                    key.flow(), key.table(), pendingBatches, config.normalizeBufferBatches());
            try {
                catalog().progress().setPause(key.flow(), key.table(), SINK_BUFFER_FULL, Instant.now());
            } catch (RuntimeException e) {
                log.debug("recording the pause of {} failed: {}", key, e.toString());
            }
        }
    }

    /**
     * Ends the table's hold once its normalize loop drained below its buffer, and resumes its partitions unless a batch
     * waits for its upload.
     */
    void releaseIfDrained() {
        if (bufferHold.paused() && loop != null && loop.pendingBatches() < config.normalizeBufferBatches()) {
            bufferHold.end();
            shared.metrics().table(key.flow(), key.table()).resumed();
            bufferHold.log("flow {}, table {}: normalize caught up; resuming its partitions", key.flow(), key.table());
            try {
                catalog().progress().clearPause(key.flow(), key.table(), SINK_BUFFER_FULL);
            } catch (RuntimeException e) {
                log.debug("clearing the pause of {} failed: {}", key, e.toString());
            }
            if (pending == null) {
                shared.task().resume(key);
            }
        }
    }

    /**
     * Deletes the files a failed attempt uploaded, unless the batch's stage row names them: a stage row write whose
     * answer was lost (the catalog committed it, the connection broke before it said so) made them the batch's, and
     * the next attempt keeps that row. When the catalog cannot tell, the files stay: an orphan only costs storage, a
     * deleted file that the stage row names would stop the table.
     */
    private void deleteUnreferenced(long batchId, List<StageFile> files) {
        Set<String> referenced = new HashSet<>();
        try {
            catalog().stages().getStage(key.flow(), key.table(), batchId)
                    .ifPresent(stage -> stage.files().forEach(file -> referenced.add(file.uri())));
        } catch (RuntimeException catalogDown) {
            log.debug("sink {}: flow {}, table {}: the files of batch {}'s failed upload are kept: the catalog cannot say"
                    + " whether its stage row names them ({})", connectorName, key.flow(), key.table(), batchId,
                    catalogDown.toString());
            return;
        }
        for (StageFile file : files) {
            if (referenced.contains(file.uri())) {
                continue;
            }
            try {
                shared.store().delete(file.uri());
            } catch (Exception cleanup) {
                log.debug("removing the stage file {} of a failed upload failed: {}", file.uri(), cleanup.toString());
            }
        }
    }

    /**
     * The table left this task (its partition revoked): its open batch is dropped, and so is the batch waiting for its
     * upload, with its local files (their records come again to the table's next owner); its hold ends, and its normalize
     * loop is told to stop and returned (null when it had none), to be waited for. What the task learned of the table
     * (a refusal, a topic binding, a self-cut table) stays.
     */
    TableNormalizer leave() {
        try {
            if (stager != null) {
                stager.abandon();
            }
        } catch (IOException e) {
            log.warn("dropping the open batch of {} left local files behind: {}", key, e.toString());
        }
        dropBatches();
        bufferHold.abandon();
        TableNormalizer stopping = shared.loops().remove(key);
        loop = null;
        shared.held().remove(key);
        // its gauges go (its next owner publishes its own), and so do the pause and the upload retry just dropped,
        // should it come back
        TableMetrics.Table removed = shared.metrics().remove(key.flow(), key.table());
        if (removed != null) {
            removed.resumed();
            removed.errorEpisodeEnded(STAGE_EPISODE);
        }
        return stopping;
    }

    /** The task stops: the open batch and the batch waiting for its upload are dropped (their records come again). */
    void stop() {
        try {
            if (stager != null) {
                stager.abandon();
            }
        } catch (IOException e) {
            log.debug("dropping an open batch on stop: {}", e.toString());
        }
        dropBatches();
    }

    private void dropBatches() {
        stager = null;
        openCovering.clear();
        logReplaysDropped();
        if (pending != null) {
            deleteLocalParts(pending);
            pending = null;
        }
    }

    /** Removes the local files of a complete batch that is dropped before its upload succeeded. */
    private static void deleteLocalParts(PendingUpload dropped) {
        for (StagePart part : dropped.batch.parts()) {
            try {
                Files.deleteIfExists(part.file());
            } catch (IOException e) {
                log.debug("removing the local stage file {} of a dropped batch failed: {}", part.file(), e.toString());
            }
        }
    }
}
