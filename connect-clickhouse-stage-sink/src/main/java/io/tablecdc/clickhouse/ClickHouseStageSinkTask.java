package io.tablecdc.clickhouse;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.errors.RetriableException;
import org.apache.kafka.connect.sink.ErrantRecordReporter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig;
import io.tablecdc.clickhouse.destination.ClickHouseClients;
import io.tablecdc.clickhouse.destination.ClickHouseDestination;
import io.tablecdc.clickhouse.schema.TypeMappingException;
import io.tablecdc.clickhouse.stage.StagePart;
import io.tablecdc.clickhouse.stage.StageStore;
import io.tablecdc.clickhouse.stage.StageStores;
import io.tablecdc.common.Backoff;
import io.tablecdc.common.ErrorEpisode;
import io.tablecdc.common.RecordHeaders;
import io.tablecdc.common.RowBlock;
import io.tablecdc.common.Resources;
import io.tablecdc.common.Version;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogUnavailableException;
import io.tablecdc.catalog.DestinationRefusal;
import io.tablecdc.catalog.Stage;
import io.tablecdc.catalog.StageFile;
import io.tablecdc.common.metrics.TableMetrics;

/**
 * Stages each table's batches as Avro files and normalizes them per table into ClickHouse.
 *
 * <p>{@link #put} only stages: records of a (table, batch) stream into local Avro files; when the batch is
 * complete its files are uploaded and recorded in the catalog, and the table's normalize loop is woken.
 * {@link #preCommit} returns, per partition, only offsets whose batches are durably staged. A table whose
 * upload fails, or whose staged batches reach {@code normalize.buffer.batches}, has its partitions paused;
 * every other table keeps flowing.
 *
 * <p>Why it is long: Connect's calls ({@code put}, {@code preCommit}, {@code open}, {@code close}) share the
 * partitions' offsets, the open batches and the uploads to retry, which only this task's thread touches; the normalize
 * loops and the buffer holds are {@link NormalizeLoops}', a table's open batch is {@link TableStager}'s.
 */
public class ClickHouseStageSinkTask extends SinkTask {
    private static final Logger log = LoggerFactory.getLogger(ClickHouseStageSinkTask.class);

    private ClickHouseStageSinkConfig config;
    private String connectorName;
    /** flow, table and column of every column this task logged a clamped value of: logged once per task. */
    private final Set<List<String>> clampsLogged = ConcurrentHashMap.newKeySet();
    private Catalog catalog;
    /** While the catalog could not be reached (at start, or since): when to try again. */
    private final Backoff catalogBackoff = new Backoff(1_000, 60_000);
    private long catalogRetryAtMs;
    private StageStore store;
    private ClickHouseDestination destination;
    private DestinationNames names;
    /** The normalize loop of each table of this task, and each table's hold while its buffer is full. */
    private NormalizeLoops loops;
    private ErrantRecordReporter reporter;
    private Path localDir;
    private TableMetrics metrics;

    private final Map<TableKey, TableStager> stagers = new HashMap<>();
    /** Reads block records; keeps their schemas so that a table's blocks share one schema object. */
    private final RowBlock.Reader blockReader = new RowBlock.Reader();
    /** Complete batches whose upload or catalog write failed; retried with backoff, their table paused. */
    private final Map<TableKey, PendingUpload> pendingUploads = new HashMap<>();
    private final Map<TopicPartition, Long> nextOffsets = new HashMap<>();
    private final Map<TopicPartition, TableKey> tableOfPartition = new HashMap<>();
    /** With table.per.topic: tables whose records arrived on a topic bound to another table, and why. */
    private final Map<TableKey, String> unboundTables = new HashMap<>();
    /** Tables stopped because another source table is loaded into their ClickHouse table already. */
    private final Map<TableKey, String> collisions = new HashMap<>();
    /** Tables whose batches this sink cuts (records of other producers): closed by size or age. */
    private final Set<TableKey> selfCutTables = new HashSet<>();
    private final Map<List<String>, TableKey> tableKeys = new HashMap<>();
    /**
     * While the rows of a block are staged: the batch its last row completed. It is closed (uploaded, recorded) only
     * after every row of the block was staged or reported: with errors.tolerance=none the report fails the task, and
     * a batch closed before it would be loaded without the bad row and its replay dropped as loaded already.
     */
    private boolean inBlock;
    private TableStager closeAfterBlock;
    /** Topics of assigned partitions whose staged batches were not looked up yet ({@link #scanStaged}). */
    private final Set<String> unscannedTopics = new HashSet<>();
    private long scanRetryAtMs;
    private long rescanAtMs;
    private int scanFailures;
    static final long SCAN_RETRY_MS = 2_000;
    static final long RESCAN_MS = 30_000;
    /** The kind of error episode an upload reports in the table's metrics. */
    static final String STAGE_EPISODE = "stage";
    /** Marks the upload's errors in the table's shared error (the source and the normalize loop mark their own). */
    static final String STAGE_ERROR_PREFIX = "stage: ";

    private static final class PendingUpload {
        final TableStager.ClosedBatch batch;
        final ErrorEpisode episode;
        long retryAtMs;

        PendingUpload(TableStager.ClosedBatch batch, ErrorEpisode episode) {
            this.batch = batch;
            this.episode = episode;
        }
    }

    /** The error episode of the upload of one batch of {@code key}: 1 s doubling to 60 s between attempts. */
    private ErrorEpisode uploadEpisode(TableKey key) {
        return new ErrorEpisode(log, "staging of flow " + key.flow() + ", table " + key.table(), new Backoff(1_000, 60_000),
                Clock.systemUTC(), ErrorEpisode.inCatalog(() -> catalog, key.flow(), key.table(), STAGE_ERROR_PREFIX),
                ErrorEpisode.metric(() -> metrics.table(key.flow(), key.table()), STAGE_EPISODE));
    }

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        config = new ClickHouseStageSinkConfig(props);
        connectorName = ClickHouseStageSinkTaskConfig.of(props).connectorName();
        // a lambda returning Object, so that a worker without plugin metrics fails inside it (see TableMetrics)
        metrics = TableMetrics.forSink(() -> context.pluginMetrics(), connectorName);
        openCatalog(System.currentTimeMillis());
        store = StageStores.open(config);
        destination = new ClickHouseDestination(ClickHouseClients.client(config), config.clickHouseDatabase(), config.tableAutoCreate(),
                config.addColumns(), config.deduplicationWindow(), config.clickHouseTimeoutMs(), config.cluster());
        loops = new NormalizeLoops(config, connectorName, () -> catalog, store, destination, metrics);
        try {
            localDir = config.stageLocalDir().isBlank()
                    ? Files.createTempDirectory("tablecdc-stage-")
                    : Files.createDirectories(Path.of(config.stageLocalDir()));
        } catch (IOException e) {
            throw new ConnectException("sink " + connectorName + ": cannot create the local stage folder: " + e.getMessage(), e);
        }
        names = new DestinationNames(config, connectorName, destination);
        names.askAtStart();
        try {
            reporter = context.errantRecordReporter();
        } catch (NoSuchMethodError | NoClassDefFoundError e) {
            reporter = null;
        }
        log.info("sink {} started: ClickHouse {} database {}{}, stage {}, normalize {} with {} threads", connectorName,
                config.clickHouseUrlForLogs(), config.clickHouseDatabase(),
                config.cluster().enabled() ? " on cluster " + config.cluster().name() : "", config.stageUri(),
                config.pushMode() ? "push" : "pull", config.normalizeParallelism());
    }

    /**
     * Opens the catalog; false (and a retry time, doubling from 1 s to 60 s) while it cannot be reached, so that a
     * catalog outage at start holds the task back instead of failing it. A catalog that refuses the connection
     * (wrong password, unknown database) or has an unknown schema fails the task.
     */
    private boolean openCatalog(long now) {
        if (catalog != null) {
            return true;
        }
        if (now < catalogRetryAtMs) {
            return false;
        }
        try {
            catalog = Catalog.open(config.catalog(), "sink " + connectorName);
            if (catalogBackoff.failures() > 0) {
                log.info("sink {}: the catalog is reachable again; staging starts", connectorName);
            }
            catalogBackoff.succeeded();
            return true;
        } catch (CatalogUnavailableException e) {
            boolean first = catalogBackoff.failures() == 0;
            long delay = catalogBackoff.failed();
            catalogRetryAtMs = now + delay;
            if (first) {
                log.warn("sink {}: the catalog cannot be reached; nothing is staged until it can, retrying in {} ms"
                        + " (further failures are logged at debug level): {}", connectorName, delay, e.getMessage());
            } else {
                log.debug("sink {}: the catalog still cannot be reached, retrying in {} ms: {}", connectorName, delay, e.getMessage());
            }
            return false;
        } catch (RuntimeException e) {
            throw new ConnectException("sink " + connectorName + ": the catalog is not usable: " + e.getMessage(), e);
        }
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        long now = System.currentTimeMillis();
        if (!openCatalog(now)) {
            if (records.isEmpty()) {
                return;
            }
            // the same records come again (nothing of them was taken); offsets stay where they are
            context.timeout(Math.max(100, catalogRetryAtMs - now));
            throw new RetriableException("sink " + connectorName + ": the catalog cannot be reached yet");
        }
        retryPendingUploads(now);
        scanStaged(now);
        Set<TopicPartition> held = new HashSet<>();
        for (SinkRecord record : records) {
            TopicPartition tp = OriginalPartition.of(record);
            if (held.contains(tp)) {
                continue;
            }
            Long taken = nextOffsets.get(tp);
            if (taken != null && record.kafkaOffset() < taken) {
                // taken by an earlier delivery of this collection (Connect delivers a whole collection again after a
                // RetriableException part-way through it): staged, or reported as errant, already
                continue;
            }
            SinkHeaders headers = SinkHeaders.of(record.headers());
            try {
                if (!(headers.block() != null ? stageBlock(record, headers, tp, now) : stageRecord(record, headers, tp, now))) {
                    // the table is held at a batch boundary: read this record again once it resumes
                    context.offset(tp, record.kafkaOffset());
                    held.add(tp);
                    continue;
                }
            } catch (TypeMappingException | IllegalArgumentException | ClassCastException e) {
                report(record, e);
                try {
                    closeBatchOfErrantLast(record, headers);
                } catch (IOException closing) {
                    throw new ConnectException("sink " + connectorName + ": closing a stage file failed: " + closing.getMessage(), closing);
                }
            } catch (IOException e) {
                throw new ConnectException("sink " + connectorName + ": writing a local stage file failed: " + e.getMessage(), e);
            }
            nextOffsets.put(tp, record.kafkaOffset() + 1);
        }
        closeDueSelfCutBatches(now);
        loops.releaseDrained(pendingUploads::containsKey, this::resume);
    }

    /**
     * Stages the rows of a block record ({@link RowBlock}, {@code record.format=blocks} at the source) one by one as the
     * row records they stand for; returns false (nothing staged) when the table is held before the block's first row.
     * A block that cannot be read goes to the errant record reporter whole; rows that cannot be staged are named in one
     * report of their block, and the block's other rows are staged.
     */
    private boolean stageBlock(SinkRecord record, SinkHeaders headers, TopicPartition tp, long now) throws IOException {
        headers.requireText();
        if (!RowBlock.FORMAT.equals(headers.block())) {
            throw new IllegalArgumentException("header " + RowBlock.HEADER + " is '" + headers.block() + "': this sink reads"
                    + " blocks of format " + RowBlock.FORMAT + " (the source is of a newer tablecdc release?)");
        }
        if (!headers.present()) {
            throw new IllegalArgumentException("a block record without " + RecordHeaders.TABLE + " and " + RecordHeaders.BATCH
                    + " headers");
        }
        headers.batchId();
        byte[] bytes;
        if (record.value() instanceof byte[] b) {
            bytes = b;
        } else if (record.value() instanceof java.nio.ByteBuffer buffer) {
            bytes = new byte[buffer.remaining()];
            buffer.duplicate().get(bytes);
        } else {
            throw new IllegalArgumentException("flow " + headers.flow() + ", table " + headers.table() + ": a block record's value"
                    + " arrived as " + (record.value() == null ? "null" : record.value().getClass().getSimpleName())
                    + ", not as bytes; read the topic with the converter the source wrote it with (value.converter="
                    + "org.apache.kafka.connect.converters.ByteArrayConverter)");
        }
        RowBlock.Decoded block = blockReader.read(bytes);
        List<RowBlock.Row> rows = block.rows();
        List<String> failed = null;
        int failures = 0;
        int staged = 0;
        inBlock = true;
        closeAfterBlock = null;
        try {
            for (int i = 0; i < rows.size(); i++) {
                RowBlock.Row row = rows.get(i);
                SinkHeaders rowHeaders = headers.ofBlockRow(row, i == rows.size() - 1);
                SinkRecord rowRecord = blockRow(record, block, row);
                try {
                    if (!stageRecord(rowRecord, rowHeaders, tp, now)) {
                        if (staged == 0) {
                            // held before the block's first row that can be staged (the rows before it cannot, and are
                            // not reported yet): nothing of the block is taken, it is read again once the table resumes
                            return false;
                        }
                        // a staged row leaves its batch open, and every row of a block is of that batch
                        throw new IllegalStateException("sink " + connectorName + ", flow " + headers.flow() + ", table "
                                + headers.table() + ": held at row " + i + " of a block of batch " + headers.batch()
                                + " after " + staged + " of its rows were staged");
                    }
                    staged++;
                } catch (TypeMappingException | IllegalArgumentException | ClassCastException e) {
                    failures++;
                    if (failed == null) {
                        failed = new ArrayList<>();
                    }
                    if (failed.size() < 10) {
                        failed.add("row " + i + " (" + row.op() + ", version " + row.version() + "): " + e.getMessage());
                    }
                    closeBatchOfErrantLast(rowRecord, rowHeaders);
                }
            }
        } finally {
            inBlock = false;
        }
        if (failed != null) {
            // before the batch is closed: without a reporter (errors.tolerance=none) this fails the task, and nothing
            // of the block's batch is staged
            report(record, new IllegalArgumentException("flow " + headers.flow() + ", table " + headers.table() + ", batch "
                    + headers.batch() + ": " + failures + " of the block's " + rows.size() + " rows cannot be staged (the"
                    + " others are): " + String.join("; ", failed) + (failures > failed.size() ? "; …" : "")));
        }
        TableStager complete = closeAfterBlock;
        closeAfterBlock = null;
        if (complete != null && complete.open()) {
            closeBatch(complete);
        }
        return true;
    }

    /** Closes a batch whose last record arrived: at once, or (inside a block) once the whole block is staged or reported. */
    private void closeCompleteBatch(TableStager stager) throws IOException {
        if (inBlock) {
            closeAfterBlock = stager;
        } else {
            closeBatch(stager);
        }
    }

    /** Row {@code row} of a block record as the row record it stands for (same topic, partition and offsets). */
    private static SinkRecord blockRow(SinkRecord record, RowBlock.Decoded block, RowBlock.Row row) {
        try {
            return new SinkRecord(record.topic(), record.kafkaPartition(), block.keySchema(), row.key(), block.valueSchema(),
                    row.value(), record.kafkaOffset(), record.timestamp(), record.timestampType(), null,
                    record.originalTopic(), record.originalKafkaPartition(), record.originalKafkaOffset());
        } catch (NoSuchMethodError olderWorker) {
            return new SinkRecord(record.topic(), record.kafkaPartition(), block.keySchema(), row.key(), block.valueSchema(),
                    row.value(), record.kafkaOffset(), record.timestamp(), record.timestampType());
        }
    }

    /**
     * Stages one record (a truncate record marks its batch to empty the table first); returns false (nothing
     * staged) when the record would start a new batch of a table that must wait: its previous batch is not
     * uploaded yet, or its staged batches fill its normalize buffer.
     */
    private boolean stageRecord(SinkRecord record, SinkHeaders headers, TopicPartition tp, long now) throws IOException {
        headers.requireText();
        boolean tablecdc = headers.present();
        String table = tablecdc ? headers.table() : record.topic();
        String flowHeader = tablecdc ? headers.flow() : null;
        long headerBatch = tablecdc ? headers.batchId() : -1;
        RecordHeaders.Op headerOp = tablecdc ? headers.operation() : null;
        TableKey key = tableKey(flowHeader != null ? flowHeader : connectorName, table, record.topic());
        TableStager stager = stagers.get(key);
        if (stager == null) {
            if (collisions.containsKey(key)) {
                context.pause(tp);
                return false;
            }
            String unbound = unboundTables.get(key);
            if (unbound == null && tablecdc && config.tablePerTopic()) {
                List<String> bound;
                try {
                    bound = catalog.sink().otherTablesOfSinkTopic(connectorName, OriginalPartition.topic(record), key.flow(), key.table());
                } catch (RuntimeException e) {
                    throw new RetriableException("sink " + connectorName + ": looking up the table of topic " + OriginalPartition.topic(record)
                            + " in the catalog failed: " + e.getMessage(), e);
                }
                if (!bound.isEmpty()) {
                    unbound = "topic " + OriginalPartition.topic(record) + " is bound to " + bound.get(0) + " (table.per.topic=true); a record for"
                            + " flow " + key.flow() + ", table " + key.table() + " is not taken from it";
                    unboundTables.put(key, unbound);
                }
            }
            if (unbound != null) {
                throw new IllegalArgumentException(unbound);
            }
            String destinationName;
            try {
                destinationName = names.destinationOf(key);
            } catch (RuntimeException e) {
                // nothing of the table is staged before its destination is claimed: the same records come again
                context.timeout(SCAN_RETRY_MS);
                throw new RetriableException("sink " + connectorName + ": asking ClickHouse for the UUID of database "
                        + config.clickHouseDatabase() + " (which the catalog records table " + key.table() + " under) failed;"
                        + " retried in " + SCAN_RETRY_MS + " ms: " + ErrorEpisode.describe(e), e);
            }
            Optional<DestinationRefusal> refusal;
            try {
                catalog.progress().initTable(key.flow(), key.table());
                catalog.sink().recordSinkTopic(key.flow(), key.table(), connectorName, OriginalPartition.topic(record));
                refusal = catalog.sink().claimDestination(key.flow(), key.table(), destinationName, names.addressNameOf(key));
            } catch (RuntimeException e) {
                throw new RetriableException("sink " + connectorName + ": registering table " + key.table()
                        + " in the catalog failed: " + e.getMessage(), e);
            }
            if (refusal.isPresent()) {
                refuseDestination(key, refusal.get(), tp);
                return false;
            }
            TableKey k = key;
            stager = new TableStager(key, localDir, config.avroCodec(), config.stageMaxFileBytes(),
                    column -> config.integerTemporal(k.table(), column),
                    column -> config.decimalText(k.table(), column),
                    clamp -> {
                        if (clampsLogged.add(List.of(k.flow(), k.table(), clamp.column()))) {
                            log.warn("sink {}, flow {}, table {}, column {}: {} is outside the range of the column's ClickHouse type"
                                + " and is stored as {}; such values are counted (clamped_values in tablecdc-status, the"
                                + " values-clamped-total metric) and not logged again for this column until the task restarts; list"
                                + " the column in {} to keep them exact", connectorName, k.flow(), k.table(), clamp.column(),
                                clamp.value(), clamp.storedAs(), clamp.exactUnder());
                        }
                    });
            stagers.put(key, stager);
            metrics.table(key.flow(), key.table());
        }
        tableOfPartition.put(tp, key);
        TableNormalizer normalizer = loops.of(key);
        long batch;
        java.math.BigInteger version;
        RecordHeaders.Op op;
        if (tablecdc) {
            batch = headerBatch;
            version = headers.versionValue();
            op = headerOp;
            if (op == RecordHeaders.Op.TRUNCATE && stager.hasRows() && stager.batchId() == batch) {
                // its rows share a file and are loaded together: nothing could empty the table between them
                if (headers.lastOfBatch()) {
                    closeCompleteBatch(stager);
                }
                throw new IllegalArgumentException("table " + table + ", batch " + batch + ": a truncate record after rows of"
                        + " the same batch cannot be ordered against them (a truncate must be the first record of its batch)");
            }
            if (stager.open() && stager.batchId() != batch) {
                // the previous batch lost its last record (its source restarted): stage what arrived
                closeBatch(stager);
            }
        } else {
            // records of other producers: upserts, batches cut by size and time, versions from offsets
            batch = stager.open() ? stager.batchId() : -1;
            version = java.math.BigInteger.valueOf(record.kafkaOffset());
            op = record.value() == null ? RecordHeaders.Op.DELETE : RecordHeaders.Op.CREATE;
        }
        if (!stager.open()) {
            // one reading of the count decides: the normalize loop lowers it meanwhile, and partitions paused on a
            // reading that the hold did not share would never be resumed (randomized run seed 8752)
            long pending = normalizer.pendingBatches();
            boolean full = pending >= config.normalizeBufferBatches();
            if (full || pendingUploads.containsKey(key)) {
                if (full) {
                    loops.holdForBuffer(key, pending);
                }
                pause(key);
                return false;
            }
        }
        if (batch < 0) {
            batch = nextSelfCutBatchId(key);
        }
        if (op == RecordHeaders.Op.TRUNCATE) {
            stager.truncate(record, batch, now);
        } else {
            stager.append(record, batch, version, op, headers.unchanged(), headers.keyChanged(), headers.nonFinite(), now);
        }
        if (tablecdc && headers.lastOfBatch()) {
            closeCompleteBatch(stager);
        } else if (!tablecdc && stager.rows() >= config.batchMaxRows()) {
            closeBatch(stager);
        }
        return true;
    }

    /**
     * Two source tables map to one ClickHouse table, or a table with batches loaded would now be loaded into another
     * one: the table is stopped (its partition paused, nothing of it staged or loaded), with the error in the log and
     * in its catalog row, until the settings name its table again.
     */
    private void refuseDestination(TableKey key, DestinationRefusal refusal, TopicPartition tp) {
        String message = names.refusalMessage(key, refusal, tp.topic());
        collisions.put(key, message);
        log.error("{}", message);
        try {
            catalog.progress().recordError(key.flow(), key.table(), STAGE_ERROR_PREFIX + message, Instant.now(), null);
        } catch (RuntimeException e) {
            log.debug("recording the refusal of {} failed: {}", key, e.toString());
        }
        try {
            context.pause(tp);
        } catch (IllegalStateException notAssigned) {
            // open(): the table's records come through another topic (a router); its next record is held instead
            log.debug("pausing {} for {} failed: {}", tp, key, notAssigned.toString());
        }
    }

    /**
     * A record that carried {@code tablecdc.batch.last=true} went to the errant record reporter: its batch is complete
     * all the same (without it), so it is closed and staged rather than left open until another batch arrives.
     */
    private void closeBatchOfErrantLast(SinkRecord record, SinkHeaders headers) throws IOException {
        if (!headers.present() || !headers.lastOfBatch() || headers.notText() != null) {
            return;
        }
        long batch;
        try {
            batch = headers.batchId();
        } catch (IllegalArgumentException e) {
            return;
        }
        TableKey key = tableKeys.get(List.of(headers.flow() != null ? headers.flow() : connectorName, headers.table(), record.topic()));
        TableStager stager = key == null ? null : stagers.get(key);
        if (stager != null && stager.open() && stager.batchId() == batch) {
            closeCompleteBatch(stager);
        }
    }

    /** The table's key, built once per (flow, table, topic) rather than per record. */
    private TableKey tableKey(String flow, String table, String topic) {
        return tableKeys.computeIfAbsent(List.of(flow, table, topic),
                k -> new TableKey(flow, table, config.clickHouseTable(table, topic)));
    }

    /**
     * A new batch id for a table whose batches this sink cuts: reserved in the catalog, above every id reserved,
     * synced, normalized or staged for the table before, so that a batch still staged from before a restart is
     * never replaced by new records under its id.
     */
    private long nextSelfCutBatchId(TableKey key) {
        long next;
        try {
            next = catalog.batchIds().reserveBatchIds(key.flow(), key.table(), 1);
        } catch (RuntimeException e) {
            throw new RetriableException("sink " + connectorName + ": reserving a batch id for table " + key.table()
                    + " in the catalog failed: " + e.getMessage(), e);
        }
        selfCutTables.add(key);
        return next;
    }

    private void closeDueSelfCutBatches(long now) {
        for (TableStager stager : stagers.values()) {
            if (stager.open() && selfCutTables.contains(stager.key) && now - stager.openedAtMs() >= config.batchMaxMs()) {
                try {
                    closeBatch(stager);
                } catch (IOException e) {
                    throw new ConnectException("sink " + connectorName + ": closing a stage file of " + stager.key + " failed: " + e.getMessage(), e);
                }
            }
        }
    }

    private void closeBatch(TableStager stager) throws IOException {
        TableStager.ClosedBatch batch = stager.close();
        PendingUpload pending = new PendingUpload(batch, uploadEpisode(batch.key()));
        if (!tryUpload(pending, System.currentTimeMillis())) {
            pendingUploads.put(batch.key(), pending);
            pause(batch.key());
        }
    }

    private void retryPendingUploads(long now) {
        for (var it = pendingUploads.entrySet().iterator(); it.hasNext(); ) {
            var entry = it.next();
            if (now >= entry.getValue().retryAtMs && tryUpload(entry.getValue(), now)) {
                it.remove();
                if (!loops.heldForBuffer(entry.getKey())) {
                    resume(entry.getKey());
                }
            }
        }
    }

    /** Uploads a complete batch and records its stage row; false (and a retry time) when that failed. */
    private boolean tryUpload(PendingUpload pending, long now) {
        TableStager.ClosedBatch batch = pending.batch;
        TableKey key = batch.key();
        List<StageFile> files = new ArrayList<>();
        boolean recorded = false;
        try {
            Stage existing = catalog.stages().getStage(key.flow(), key.table(), batch.batchId()).orElse(null);
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
                loops.of(key).wake();
                return true;
            }
            String attempt = Long.toHexString(System.nanoTime());
            for (int i = 0; i < batch.parts().size(); i++) {
                StagePart part = batch.parts().get(i);
                String objectKey = batch.objectName(key.fileName() + "/" + batch.batchId() + "/" + attempt, i);
                files.add(new StageFile(store.upload(part.file(), objectKey), part.rows(), part.bytes()));
            }
            List<StageFile> previous = existing == null ? List.of() : existing.files();
            boolean stored = catalog.stages().upsertStage(key.flow(), key.table(), new Stage(batch.batchId(), files, batch.rows(), batch.counts(),
                    batch.truncateBefore()));
            recorded = true;
            // files of an earlier staging of this batch (replaced) or of this one (batch already normalized)
            for (StageFile file : stored ? previous : files) {
                if (!files.contains(file) || !stored) {
                    store.delete(file.uri());
                }
            }
            for (StagePart part : batch.parts()) {
                Files.deleteIfExists(part.file());
            }
            TableMetrics.Table tableMetrics = metrics.table(key.flow(), key.table());
            pending.episode.succeeded();
            if (stored) {
                tableMetrics.batchStaged(batch.batchId(), batch.rows(), Instant.now());
                tableMetrics.valuesClamped(batch.counts().clampedValues());
                TableNormalizer normalizer = loops.of(key);
                normalizer.staged();
                normalizer.wake();
            }
            return true;
        } catch (Exception e) {
            if (!recorded && !files.isEmpty()) {
                deleteUnreferenced(key, batch.batchId(), files);
            }
            pending.retryAtMs = now + pending.episode.failed(e);
            return false;
        }
    }

    /**
     * Deletes the files a failed attempt uploaded, unless the batch's stage row names them: a stage row write whose
     * answer was lost (the catalog committed it, the connection broke before it said so) made them the batch's, and
     * the next attempt keeps that row. When the catalog cannot tell, the files stay: an orphan only costs storage, a
     * deleted file that the stage row names would stop the table.
     */
    private void deleteUnreferenced(TableKey key, long batchId, List<StageFile> files) {
        Set<String> referenced = new HashSet<>();
        try {
            catalog.stages().getStage(key.flow(), key.table(), batchId)
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
                store.delete(file.uri());
            } catch (Exception cleanup) {
                log.debug("removing the stage file {} of a failed upload failed: {}", file.uri(), cleanup.toString());
            }
        }
    }

    /** Removes the local files of a complete batch that is dropped before its upload succeeded. */
    private void deleteLocalParts(PendingUpload pending) {
        for (StagePart part : pending.batch.parts()) {
            try {
                Files.deleteIfExists(part.file());
            } catch (IOException e) {
                log.debug("removing the local stage file {} of a dropped batch failed: {}", part.file(), e.toString());
            }
        }
    }

    private void pause(TableKey key) {
        TopicPartition[] partitions = partitionsOf(key);
        if (partitions.length > 0) {
            context.pause(partitions);
        }
    }

    private void resume(TableKey key) {
        TopicPartition[] partitions = partitionsOf(key);
        if (partitions.length > 0) {
            context.resume(partitions);
        }
    }

    private TopicPartition[] partitionsOf(TableKey key) {
        return tableOfPartition.entrySet().stream().filter(e -> e.getValue().equals(key)).map(Map.Entry::getKey)
                .toArray(TopicPartition[]::new);
    }

    private void report(SinkRecord record, Exception error) {
        String message = "sink " + connectorName + ": record " + record.topic() + "-" + record.kafkaPartition() + "@"
                + record.kafkaOffset() + " cannot be staged: " + error.getMessage();
        if (reporter == null) {
            throw new ConnectException(message, error);
        }
        try {
            reporter.report(record, new ConnectException(message, error)).get(60, TimeUnit.SECONDS);
        } catch (ConnectException e) {
            throw e;
        } catch (Exception e) {
            throw new ConnectException(message + " (and reporting it failed: " + e.getMessage() + ")", error);
        }
    }

    /**
     * Offsets only up to the last durably staged batch: for a partition with an open batch or a batch waiting
     * for its upload, the first offset of that batch; otherwise everything this task has seen (staged, or
     * reported as errant).
     */
    @Override
    public Map<TopicPartition, OffsetAndMetadata> preCommit(Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
        Map<TopicPartition, OffsetAndMetadata> safe = new HashMap<>();
        for (TopicPartition tp : currentOffsets.keySet()) {
            Long next = nextOffsets.get(tp);
            if (next == null) {
                continue;
            }
            long committable = next;
            for (TableStager stager : stagers.values()) {
                Long first = stager.open() ? stager.firstOffset(tp) : null;
                if (first != null) {
                    committable = Math.min(committable, first);
                }
            }
            for (PendingUpload pending : pendingUploads.values()) {
                Long first = pending.batch.firstOffsets().get(tp);
                if (first != null) {
                    committable = Math.min(committable, first);
                }
            }
            safe.put(tp, new OffsetAndMetadata(committable));
        }
        return safe;
    }

    /**
     * Starts the normalize loops of the tables of newly assigned partitions that have staged batches
     * waiting (staged before a restart or a rebalance), so they load even if no new record arrives.
     */
    @Override
    public void open(Collection<TopicPartition> partitions) {
        for (TopicPartition tp : partitions) {
            if (tp.partition() != 0) {
                // one table's batches are ordered by one partition: several partitions (perhaps on several tasks)
                // would interleave them, and cut batch ids of their own
                throw new ConnectException("sink " + connectorName + ": topic " + tp.topic() + " has more than one partition"
                        + " (partition " + tp.partition() + " was assigned); the stage sink loads one table from one"
                        + " single-partition topic. Recreate " + tp.topic() + " with one partition (tablecdc sources create"
                        + " their topics so), or remove it from topics/topics.regex");
            }
        }
        // close() forgot the holds of revoked partitions, but Connect re-pauses a partition it gives back to this
        // task: nothing here would ever resume it. Resume them all; put() holds a table again if its buffer is
        // still full.
        if (!partitions.isEmpty()) {
            try {
                context.resume(partitions.toArray(new TopicPartition[0]));
            } catch (RuntimeException e) {
                log.warn("sink {}: resuming reassigned partitions {} failed: {}", connectorName, partitions, e.toString());
            }
        }
        partitions.forEach(tp -> unscannedTopics.add(tp.topic()));
        scanStaged(System.currentTimeMillis());
    }

    /**
     * Starts (or wakes) the normalize loops of the assigned tables that have staged batches: those of newly assigned
     * partitions until one lookup of them succeeded (retried from {@link #put} every {@value #SCAN_RETRY_MS} ms while
     * the catalog does not answer), and every {@value #RESCAN_MS} ms those of every assigned partition. A table whose
     * source sends nothing more (a detached Postgres table, a quiet one, a BigQuery table at its
     * {@code max.unnormalized.batches}) has no record to start its loop: without this, its batches staged before a
     * restart or rebalance during a catalog outage were never loaded, and its source waited for them for ever.
     */
    private void scanStaged(long now) {
        if (catalog == null) {
            return;
        }
        Set<String> topics;
        if (!unscannedTopics.isEmpty()) {
            if (now < scanRetryAtMs) {
                return;
            }
            topics = new HashSet<>(unscannedTopics);
        } else if (now >= rescanAtMs) {
            topics = new HashSet<>();
            try {
                context.assignment().forEach(tp -> topics.add(tp.topic()));
            } catch (RuntimeException e) {
                return;
            }
        } else {
            return;
        }
        if (topics.isEmpty()) {
            rescanAtMs = now + RESCAN_MS;
            return;
        }
        List<String[]> rows;
        try {
            rows = catalog.stages().tablesWithStages(connectorName, topics);
        } catch (RuntimeException e) {
            scanRetryAtMs = now + SCAN_RETRY_MS;
            if (unscannedTopics.isEmpty()) {
                rescanAtMs = now + SCAN_RETRY_MS;
            }
            if (scanFailures++ == 0) {
                log.warn("sink {}: looking up the staged batches of topics {} failed ({}); tried again every {} ms until"
                        + " it succeeds", connectorName, topics, e.getMessage(), SCAN_RETRY_MS);
            } else {
                log.debug("sink {}: looking up staged batches failed again: {}", connectorName, e.getMessage());
            }
            return;
        }
        if (scanFailures > 0) {
            log.info("sink {}: the staged batches of topics {} were looked up after {} failed attempt(s)", connectorName,
                    topics, scanFailures);
            scanFailures = 0;
        }
        unscannedTopics.removeAll(topics);
        rescanAtMs = now + RESCAN_MS;
        for (String[] row : rows) {
            TableKey key = tableKey(row[0], row[1], row[2]);
            if (collisions.containsKey(key)) {
                continue;
            }
            try {
                // the staged batches are loaded into the table this task's settings name now: the same claim as for
                // new records (a changed table.name.format must not load a backlog into another ClickHouse table)
                Optional<DestinationRefusal> refusal = catalog.sink().claimDestination(key.flow(), key.table(), names.destinationOf(key), names.addressNameOf(key));
                if (refusal.isPresent()) {
                    refuseDestination(key, refusal.get(), new TopicPartition(row[2], 0));
                    continue;
                }
            } catch (RuntimeException e) {
                // the loop is not started without the claim: looked up again at the next scan
                unscannedTopics.add(row[2]);
                scanRetryAtMs = now + SCAN_RETRY_MS;
                log.debug("sink {}: claiming the destination of {} failed: {}", connectorName, key, e.toString());
                continue;
            }
            if (!loops.has(key)) {
                log.info("sink {}: flow {}, table {} has staged batches from before; normalizing them", connectorName,
                        key.flow(), key.table());
            }
            // a loop started now runs at once; a running one is asked for another run (a loop in its error backoff
            // keeps to its backoff)
            loops.of(key).wake();
        }
    }

    @Override
    public void close(Collection<TopicPartition> partitions) {
        // open batches of revoked partitions are dropped; their records come back to the next owner
        Set<TableKey> affected = new HashSet<>();
        Map<TableKey, TableNormalizer> stopping = new HashMap<>();
        for (TopicPartition tp : partitions) {
            TableKey key = tableOfPartition.remove(tp);
            if (key != null) {
                affected.add(key);
            }
            nextOffsets.remove(tp);
            unscannedTopics.remove(tp.topic());
        }
        for (TableKey key : affected) {
            TableStager stager = stagers.remove(key);
            try {
                if (stager != null) {
                    stager.abandon();
                }
            } catch (IOException e) {
                log.warn("dropping the open batch of {} left local files behind: {}", key, e.toString());
            }
            PendingUpload dropped = pendingUploads.remove(key);
            if (dropped != null) {
                deleteLocalParts(dropped);
            }
            // its normalize loop goes with it: the table's next owner starts its own once this one's lease is free
            TableNormalizer normalizer = loops.remove(key);
            if (normalizer != null) {
                stopping.put(key, normalizer);
            }
            // the table left this task: its gauges go (its next owner publishes its own), and so do the pause and
            // the upload retry just dropped, should it come back
            TableMetrics.Table removed = metrics.remove(key.flow(), key.table());
            if (removed != null) {
                removed.resumed();
                removed.errorEpisodeEnded(STAGE_EPISODE);
            }
        }
        // every loop was told to stop above; wait for their steps in flight together, not one after another
        loops.awaitStopped(stopping);
    }

    @Override
    public void stop() {
        if (metrics != null) {
            metrics.close();
        }
        if (loops != null) {
            loops.stop();
        }
        for (TableStager stager : stagers.values()) {
            try {
                stager.abandon();
            } catch (IOException e) {
                log.debug("dropping an open batch on stop: {}", e.toString());
            }
        }
        // batches waiting for their upload are dropped too (their records come again): their local files go with them
        pendingUploads.values().forEach(this::deleteLocalParts);
        pendingUploads.clear();
        Resources.closeQuietly(destination, "the ClickHouse client");
        Resources.closeQuietly(store, "the stage store");
        Resources.closeQuietly(catalog, "the catalog");
    }
}
