package io.tablecdc.bigquery;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.source.SourceRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import com.google.cloud.bigquery.BigQueryException;
import com.google.cloud.bigquery.FieldList;
import com.google.cloud.bigquery.FieldValue;
import com.google.cloud.bigquery.FieldValueList;
import com.google.cloud.bigquery.QueryParameterValue;

import io.tablecdc.bigquery.config.BigQueryQueryCdcConfig;
import io.tablecdc.bigquery.config.BigQueryQueryCdcConfig.InitialLoad;
import io.tablecdc.bigquery.config.BigQueryQueryCdcConfig.Mode;
import io.tablecdc.bigquery.config.TableSpec;
import io.tablecdc.bigquery.schema.TableSchema;
import io.tablecdc.bigquery.sql.CdcSql;
import io.tablecdc.common.Backoff;
import io.tablecdc.common.ErrorEpisode;
import io.tablecdc.common.NonFiniteValues;
import io.tablecdc.common.RecordHeaders;
import io.tablecdc.common.TablePause;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.BatchIdReservations;
import io.tablecdc.catalog.SyncedBatch;
import io.tablecdc.catalog.TableState;
import io.tablecdc.common.metrics.TableMetrics;

/**
 * One table's poll loop. Each {@link #poll()} takes the next step of the spec, in order: back-pressure against the
 * catalog, cadence, window on BigQuery's clock, pull permit, the parameterised query, then the batch's rows page by
 * page, then (once Kafka acknowledged every record of the batch) the catalog mirror.
 *
 * <h2>Batch ids never repeat</h2>
 * Every batch takes its id from the catalog before its first record is handed to Connect
 * ({@link BatchIdReservations#reserveBatchIds}): the catalog hands out ids above every id reserved, synced, normalized or staged for
 * the table, so an id is never used twice, whichever task asks and however tasks die (for example after Kafka took a
 * batch and the sink loaded it, but before the catalog mirror and Connect's offset flush). An id reserved by a task
 * that died before sending it is a gap, which the sink accepts (it loads whatever batches are staged, in order).
 *
 * <h2>Offsets</h2>
 * Source partition {@code {"table": "project.dataset.table"}}, offset {@code {"cursor": RFC 3339, "batch": id}}, plus
 * {@code "snapshot": RFC 3339} (the snapshot's bound) while the initial snapshot is read chunk by chunk. Records inside a
 * batch carry the cursor the batch started from; only the batch's last record carries the new cursor, so a task
 * stopped mid-batch reads the whole window (or snapshot chunk) again.
 *
 * <p>{@link #acknowledged()} runs on the producer's thread and only counts; the catalog is written by the task
 * thread in {@link #poll()}.
 *
 * <p>Why it is long: it is one state machine (snapshot, walk, stream a batch, mirror), whose steps share the cursor,
 * the open batch and the batch ids; its pieces that stand alone are {@link Window}, {@link Cursor},
 * {@code OffsetValue}, {@code ErrorEpisode} and {@code TablePause}.
 */
final class TablePoller {
    private static final Logger log = LoggerFactory.getLogger(TablePoller.class);
    static final String PARTITION_KEY = "table";
    static final String CURSOR_KEY = "cursor";
    static final String BATCH_KEY = "batch";
    static final String SNAPSHOT_KEY = "snapshot";
    /** The {@code watermark.time.zone} a QUERY table's cursor is read in, also in its offset (see checkWatermarkZone). */
    static final String ZONE_KEY = "zone";
    static final String PAUSED_REASON = "normalize_buffer_full";
    /** A record's position in its batch (0, 1, ...): makes two records of identical rows unequal. */
    static final String ROW_HEADER = "tablecdc.row";
    private static final long IDLE_SLEEP_MS = 500;
    private static final long BACKPRESSURE_RECHECK_MS = 2_000;

    private final String flow;
    private final TableSpec table;
    private final BigQueryQueryCdcConfig config;
    private final SourceClient client;
    /** Opens the catalog: at the first poll, and again after a failed open (an outage at task start is retried). */
    private final java.util.function.Supplier<Catalog> catalogOpener;
    private Catalog catalog;
    private final Semaphore permits;
    private final Clock clock;
    private final String topic;
    private final Map<String, String> partition;
    private final ErrorEpisode episode;
    private final AtomicLong inFlight = new AtomicLong();
    private final TableMetrics.Table metrics;
    /** {@code query.destination.dataset} as {project, dataset}, or null. */
    private final String[] destinationDataset;
    /**
     * Where this task's queries write their result ({@code query.destination.dataset}), or null: a name of its own per
     * task start (the table's ownership epoch, taken at start), so that two tasks of the table (during a rebalance)
     * never write into each other's result; set when the task starts.
     */
    private com.google.cloud.bigquery.TableId destination;

    private Instant cursor;
    private long lastBatchId;
    /** The table's synced batch id in the catalog as this task knows it (what a cursor-only record repeats). */
    private long syncedBatchId;
    /** The batch id of the Connect offset at start: the first reserved id is above it (a table added back). */
    private long offsetBatchId;
    private TableSchema schema;
    private long nextDueAtMs;
    /** Until when a failed start or catalog mirror waits before it is tried again. */
    private long retryAtMs;
    /** This table's back-pressure pause; every pause and resume is logged at info. */
    private final TablePause pause = new TablePause(log, Duration.ZERO);
    /** A watermark ahead of the source clock is reported on the table ({@link #checkAhead}). */
    private boolean aheadReported;
    private boolean aheadInCatalog;
    private long aheadCheckDueMs;
    /** While the initial snapshot is read chunk by chunk (QUERY mode): its upper bound; null otherwise. */
    private Instant snapshotUntil;
    /** The last batch was cut short after some of its records were sent: its window is read again at once. */
    private boolean retryOwed;
    private boolean started;
    /** The truncate batch of a re-snapshot was sent by this task. */
    private boolean truncateSent;
    /** This task's ownership of the table in the catalog ({@code source_epoch}), taken at start. */
    private long epoch = -1;
    /** The zone of a DATETIME/DATE watermark was compared with the one the cursor was read in. */
    private boolean zoneChecked;
    /** The zone the Connect offset says its cursor was read in, or null. */
    private final String offsetZone;
    private Batch streaming;
    private Batch closing;
    /**
     * A batch that ended before its window's last page (its time was up under exactly-once, or a page could not be
     * read): once it is recorded, the window's remaining pages go on as the next batch, from the page after its last
     * one (or the page that failed), never from the window's first page again.
     */
    private Batch resume;
    /**
     * Under exactly-once delivery ({@code transaction.boundary=connector}) a batch is one Kafka transaction: it ends at
     * the page being sent once its first record is this old, so that no transaction outlives the producer's
     * {@code transaction.timeout.ms}. 0: no time bound (without exactly-once a batch is the whole window).
     */
    private long batchMaxMs;
    private volatile boolean stopping;
    private Runnable cutShort = () -> { };

    /** The rows of one batch as they stream out, and what the catalog learns about it. */
    private static final class Batch {
        final long id;
        final Instant startCursor;
        final RecordHeaders.Op op;
        final SourceClient.Pages pages;
        /** The cursor a snapshot batch ends at (the largest watermark, or BigQuery's clock); null for windows. */
        final Instant snapshotCursor;
        Instant maxSeen;
        long rows;
        /** Records handed out so far: each record's position in its batch ({@link #ROW_HEADER}). */
        long sent;
        Instant firstRowReceivedAt;
        Long oldestCommitMicros;
        boolean failed;
        Instant endCursor;
        /** The largest watermark the batch's query reads (inclusive); a row beyond it never moves the cursor. */
        final Instant upper;
        /** When its first record was handed out (its Kafka transaction began, under exactly-once); -1 before. */
        long openedAtMs = -1;
        /** The batch ended before the window's last page; the window's next pages go on as the next batch. */
        boolean split;
        /**
         * Of a split batch: it ended on a page that could not be read, so what it sent (if anything) has no record
         * carrying batch.last, and the sink stages it only once the next batch's first record arrives.
         */
        boolean pageFailed;

        Batch(long id, Instant startCursor, RecordHeaders.Op op, SourceClient.Pages pages, Instant snapshotCursor,
              Instant upper) {
            this.id = id;
            this.upper = upper;
            this.startCursor = startCursor;
            this.op = op;
            this.pages = pages;
            this.snapshotCursor = snapshotCursor;
        }
    }

    TablePoller(String flow, TableSpec table, BigQueryQueryCdcConfig config, SourceClient client,
                java.util.function.Supplier<Catalog> catalogOpener, Semaphore permits, Clock clock, Map<String, Object> offset,
                TableMetrics.Table metrics) {
        this.flow = flow;
        this.table = table;
        this.config = config;
        this.client = client;
        this.catalogOpener = catalogOpener;
        this.permits = permits;
        this.clock = clock;
        this.topic = config.topic(table);
        this.partition = Map.of(PARTITION_KEY, table.fullName());
        this.episode = new ErrorEpisode(log, "poll of flow " + flow + ", table " + table.fullName(),
                new Backoff(5_000, Math.max(5_000, Math.min(60_000, config.syncIntervalMs()))), clock,
                ErrorEpisode.inCatalog(() -> catalog, flow, table.fullName(), ERROR_PREFIX), ErrorEpisode.metric(() -> metrics, EPISODE));
        OffsetValue stored = OffsetValue.of(offset);
        this.cursor = stored.cursor();
        this.lastBatchId = stored.batch();
        this.offsetBatchId = stored.batch();
        this.snapshotUntil = stored.cursor() == null ? null : stored.snapshot();
        this.offsetZone = stored.cursor() == null ? null : stored.zone();
        this.metrics = metrics;
        this.destinationDataset = config.destinationDataset();
    }

    /** How many earlier task starts' destination tables a task start drops (each start drops its predecessors'). */
    static final int DESTINATION_LEFTOVERS = 3;

    /**
     * The name of the destination table of a task start:
     * {@code tablecdc_<flow>_<dataset>_<table>_<hash>_<epoch>}, where the hash (8 hex digits of the SHA-256 of the flow
     * and the table's full name) keeps apart flows and tables whose names read the same once cleaned, and the epoch is
     * the task start's ownership of the table in the catalog (one higher at every start): a task start knows the names
     * its predecessors used, and drops what they left ({@link #dropLeftoverDestinations}).
     */
    static String destinationTable(String flow, TableSpec table, long epoch) {
        String hash;
        try {
            byte[] digest = java.security.MessageDigest.getInstance("SHA-256").digest(
                    (flow + "\n" + table.fullName()).getBytes(java.nio.charset.StandardCharsets.UTF_8));
            hash = java.util.HexFormat.of().formatHex(digest, 0, 4);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        return "tablecdc_" + part(flow) + "_" + part(table.dataset()) + "_" + part(table.table()) + "_" + hash + "_" + epoch;
    }

    /**
     * The destination tables of the task starts before this one ({@link #DESTINATION_LEFTOVERS} of them) are dropped:
     * a task that died while it read a result (killed, crash-looping) left its table, which would otherwise stay until
     * it expires, one per restart. A task of an earlier start that still runs somewhere has lost the table to this one
     * (its next catalog write is refused): losing its result only ends it sooner.
     */
    private void dropLeftoverDestinations() {
        for (long earlier = epoch - 1; earlier >= 1 && earlier >= epoch - DESTINATION_LEFTOVERS; earlier--) {
            com.google.cloud.bigquery.TableId leftover = com.google.cloud.bigquery.TableId.of(destination.getProject(),
                    destination.getDataset(), destinationTable(flow, table, earlier));
            boolean dropped;
            try {
                dropped = client.dropTable(leftover);
            } catch (RuntimeException e) {
                log.info("flow {}, table {}: dropping the destination table {} of an earlier task start failed ({}); it"
                        + " expires by itself", flow, table.fullName(), leftover.getTable(), e.getMessage());
                dropped = false;
            }
            if (!dropped) {
                // BigQuery failed (the client logged why): the others are left to expire, rather than hold the start
                // for one more call each while BigQuery is unreachable
                return;
            }
            log.debug("flow {}, table {}: dropped {} if an earlier task start left it", flow, table.fullName(),
                    leftover.getTable());
        }
    }

    private static String part(String name) {
        String clean = name.replaceAll("[^A-Za-z0-9_]", "_");
        return clean.length() > 250 ? clean.substring(0, 250) : clean;
    }

    com.google.cloud.bigquery.TableId destination() {
        return destination;
    }

    static Map<String, String> partition(TableSpec table) {
        return Map.of(PARTITION_KEY, table.fullName());
    }

    /** Called from {@code commitRecord}, on the producer's thread: one record of this table is acknowledged. */
    void acknowledged() {
        inFlight.decrementAndGet();
    }

    void stop() {
        stopping = true;
    }

    /**
     * {@code action} runs when a batch ends without a record carrying {@code tablecdc.batch.last} after some of its
     * records were handed out: cut short (a page that cannot be read, a row that cannot be converted; its window is
     * read again under a new id), or a last page that holds no record. The task commits the open Kafka transaction
     * there, so those records reach Kafka as without exactly-once support (the sink stages them as a batch without
     * its last record) and are acknowledged.
     */
    void onCutShort(Runnable action) {
        this.cutShort = action;
    }

    /**
     * Under exactly-once delivery with connector-defined transaction boundaries, a batch ends at the page being sent
     * once its first record was handed out {@code ms} ago (see {@link #batchMaxMs}); the window goes on as the next
     * batch. The task calls it with half the producer's {@code transaction.timeout.ms}.
     */
    void closeBatchesAfter(long ms) {
        this.batchMaxMs = Math.max(0, ms);
    }

    /**
     * Closes the catalog, if it was opened, and drops this task's destination table: a batch not read to its end, or a
     * query that failed after the table was created, leaves it (BigQuery answers a table that is not there with a
     * not-found, which is no error here).
     */
    void close() {
        if (catalog != null) {
            catalog.close();
        }
        if (destination != null) {
            client.dropTable(destination);
        }
    }

    /** The next step; returns the records to send (none when there is nothing to do now). */
    List<SourceRecord> poll() throws InterruptedException {
        long attemptStarted = System.nanoTime();
        try {
            if (clock.millis() < retryAtMs) {
                // after a failed start or catalog write: wait out the backoff before trying again
                idle(retryAtMs - clock.millis());
                return List.of();
            }
            if (catalog == null) {
                // an outage of the catalog at task start is retried with backoff, like any other failure
                catalog = catalogOpener.get();
            }
            if (!started) {
                start();
            }
            if (streaming != null) {
                return nextPage();
            }
            if (closing != null && !mirror()) {
                return List.of();
            }
            if (resume != null) {
                return resumeWindow();
            }
            return startBatch();
        } catch (TableSchema.SchemaException e) {
            // the task fails; the catalog (and so tablecdc-status) says why until a restarted task polls again
            try {
                if (catalog != null) {
                    catalog.progress().recordError(flow, table.fullName(), ERROR_PREFIX + e.getMessage(), clock.instant(), null);
                }
            } catch (RuntimeException catalogDown) {
                log.debug("flow {}, table {}: recording the error in the catalog failed: {}", flow, table.fullName(), catalogDown.toString());
            }
            throw new ConnectException("flow " + flow + ": " + e.getMessage());
        } catch (InterruptedException e) {
            throw e;
        } catch (io.tablecdc.catalog.TableLostException e) {
            // another task owns the table now: this one stops for good (Connect has given the table to the other)
            log.warn("{}", e.getMessage());
            streaming = null;
            closing = null;
            resume = null;
            throw new ConnectException(e.getMessage(), e);
        } catch (RuntimeException e) {
            failed(unanswered(e, attemptStarted));
            return List.of();
        }
    }

    /**
     * A request that met a host answering nothing (frozen, or behind a network that drops packets) ends at
     * {@code bigquery.timeout.ms}; the client reports that as a read timeout or as an interrupted wait inside its retry
     * loop, which says nothing to an operator. The table's error then names the bound that ended it.
     */
    private RuntimeException unanswered(RuntimeException e, long attemptStartedNanos) {
        java.time.Duration timeout = config.timeout();
        if (System.nanoTime() - attemptStartedNanos < timeout.toNanos()) {
            return e;
        }
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof InterruptedException || t instanceof java.net.SocketTimeoutException) {
                return new com.google.cloud.bigquery.BigQueryException(0, "no answer from BigQuery within "
                        + BigQueryQueryCdcConfig.TIMEOUT_MS_CONFIG + "=" + timeout.toMillis() + " ("
                        + io.tablecdc.common.ErrorEpisode.describe(e) + ")", e);
            }
        }
        return e;
    }

    private void start() {
        catalog.progress().initTable(flow, table.fullName());
        // the newest task on the table owns it: every earlier one's next catalog write is refused (it stops sending)
        epoch = catalog.owners().take(flow, table.fullName(), "task of " + flow + " on "
                + java.lang.management.ManagementFactory.getRuntimeMXBean().getName() + " started " + clock.instant());
        if (destinationDataset != null) {
            destination = com.google.cloud.bigquery.TableId.of(destinationDataset[0], destinationDataset[1],
                    destinationTable(flow, table, epoch));
            dropLeftoverDestinations();
        }
        TableState state = catalog.progress().getTable(flow, table.fullName()).orElseThrow();
        // ids of new batches are reserved in the catalog (nextBatchId); this is only what is known so far
        lastBatchId = Math.max(lastBatchId, state.syncedBatchId());
        syncedBatchId = state.syncedBatchId();
        takeLaterCursor(state.cursor());
        boolean failedLast = state.lastError() != null && state.lastError().startsWith(ERROR_PREFIX);
        if (failedLast) {
            // an error left by an earlier task (a failed start, a configuration error) is cleared by the first success
            episode.errorLeftInCatalog();
        }
        aheadInCatalog = state.lastError() != null && state.lastError().startsWith(AHEAD_PREFIX);
        nextDueAtMs = state.lastAttemptAt() == null || failedLast ? 0
                : state.lastAttemptAt().toEpochMilli() + config.syncIntervalMs();
        started = true;
        metrics.syncedUpTo(cursor);
        metrics.batchIdKnown(state.syncedBatchId());
        log.info("flow {}, table {}: starting from cursor {} (batch ids are reserved in the catalog, last synced {})", flow, table.fullName(),
                cursor == null ? "(none: initial load " + config.initialLoad().name().toLowerCase() + ")" : Cursor.format(cursor),
                syncedBatchId);
    }

    /**
     * The table's cursor is the later of its Connect offset and the catalog's: the catalog learns a cursor once Kafka
     * acknowledged the batch (or an empty window moved it), Connect stores an offset only when it flushes, and only
     * with a record. A worker that died between the two (a batch after {@code initial.load=skip}, APPENDS/CHANGES
     * windows of an idle table) left the catalog ahead; reading on from the offset would skip again, or fall outside
     * the time travel window. An operator's rewind or reset moves both ({@code alterOffsets}).
     */
    private void takeLaterCursor(String catalogCursor) {
        Instant stored;
        try {
            stored = Cursor.parse(catalogCursor);
        } catch (IllegalArgumentException e) {
            log.warn("flow {}, table {}: the catalog's cursor is not usable ({}); reading on from the Connect offset", flow,
                    table.fullName(), e.getMessage());
            return;
        }
        if (stored == null || (cursor != null && !stored.isAfter(cursor))) {
            return;
        }
        log.info("flow {}, table {}: the catalog's cursor {} is later than the Connect offset's {} (the worker stopped"
                + " before Connect stored the offset of what Kafka has): reading on from the catalog's", flow,
                table.fullName(), Cursor.format(stored), cursor == null ? "(none)" : Cursor.format(cursor));
        cursor = stored;
        if (snapshotUntil != null && !cursor.isBefore(snapshotUntil)) {
            snapshotUntil = null;
        }
    }

    /** The id of a new batch, reserved in the catalog before any of its records is sent. */
    private long nextBatchId() {
        // the first reservation of a task also steps over the batch id of its Connect offset, which is above the
        // catalog's ids when the table's catalog row was pruned and the table added back
        int count = (int) Math.min(Integer.MAX_VALUE - 1, Math.max(1, offsetBatchId - syncedBatchId + 1));
        long first = catalog.owners().reserveBatchIds(flow, table.fullName(), count, epoch);
        offsetBatchId = 0;
        lastBatchId = first + count - 1;
        return lastBatchId;
    }

    // ------------------------------------------------------------------------------------------ steps 1-4

    private List<SourceRecord> startBatch() throws InterruptedException {
        long now = clock.millis();
        if (now < nextDueAtMs) {
            idle(nextDueAtMs - now);
            return List.of();
        }
        // the retry of a batch cut short is never held back: the sink stages the part it got only once the next
        // batch's first record arrives, so waiting for it to be normalized first would wait forever
        if (!retryOwed && backPressured(now)) {
            return List.of();
        }
        // the permit comes first: asking BigQuery for its clock is a query job too, and counts against the limit
        if (!permits.tryAcquire(IDLE_SLEEP_MS, TimeUnit.MILLISECONDS)) {
            return List.of();
        }
        try {
            Instant sourceNow = client.sourceNow();
            if (cursor != null && Window.first(cursor, sourceNow, lag(), maxWindow()).isEmpty()) {
                // nothing can be read yet; no attempt is recorded
                nextDueAtMs = now + config.syncIntervalMs();
                return List.of();
            }
            catalog.progress().recordAttempt(flow, table.fullName(), clock.instant());
            nextDueAtMs = now + config.syncIntervalMs();
            refreshSchema();
            if (cursor != null && config.mode() == Mode.QUERY && now >= aheadCheckDueMs) {
                hourlyAheadCheck(sourceNow);
            }
            Batch batch = cursor == null ? initialLoad(sourceNow) : walk(sourceNow);
            if (batch == null) {
                // nothing to read: the attempt succeeded (a window with rows succeeds once it is read and recorded)
                succeeded();
                return List.of();
            }
            streaming = batch;
            return emitOrClose(batch, batch.pages.page());
        } finally {
            permits.release();
        }
    }

    private boolean backPressured(long now) {
        TableState state = catalog.progress().getTable(flow, table.fullName()).orElseThrow();
        long buffer = config.normalizeBufferBatches();
        if (state.unnormalizedBatches() >= buffer) {
            metrics.paused(PAUSED_REASON);
            boolean recorded = catalog.progress().setPause(flow, table.fullName(), PAUSED_REASON, clock.instant());
            boolean began = pause.begin();
            if (recorded || began) {
                pause.log("flow {}, table {}: {} batches synced but not normalized (max.unnormalized.batches={}); pausing this table",
                        flow, table.fullName(), state.unnormalizedBatches(), buffer);
            }
            nextDueAtMs = now + Math.min(BACKPRESSURE_RECHECK_MS, config.syncIntervalMs());
            return true;
        }
        if (pause.paused() || PAUSED_REASON.equals(state.pausedReason())) {
            catalog.progress().clearPause(flow, table.fullName(), PAUSED_REASON);
            metrics.resumed();
            pause.end();
            pause.log("flow {}, table {}: normalize caught up; resuming", flow, table.fullName());
        }
        return false;
    }

    private void refreshSchema() {
        FieldList columns = client.columns(table);
        if (columns == null) {
            // retried with backoff (a job that drops and recreates the table); validate() reports a missing table
            throw new IllegalStateException("table " + table.fullName() + " does not exist");
        }
        if (schema == null || !schema.sameColumns(columns)) {
            if (schema != null) {
                log.info("flow {}, table {}: columns changed to {}", flow, table.fullName(), columns);
            }
            if (!table.hasKey()) {
                throw new TableSchema.SchemaException(BigQueryQueryCdcConfig.keylessProblem(table));
            }
            TableSchema next = TableSchema.of(table, columns, config.mode() == Mode.QUERY);
            String lagProblem = config.mode() == Mode.QUERY ? next.lagProblem(config.safetyLagMs(), config.watermarkTimeZone()) : null;
            if (lagProblem != null) {
                throw new TableSchema.SchemaException(lagProblem);
            }
            schema = next;
            checkWatermarkZone();
        }
    }

    /**
     * A DATETIME or DATE watermark is read in {@code watermark.time.zone} while the cursor is an instant: another zone
     * moves every row relative to the cursor (rows would be skipped, or read again). The zone the cursor was read in is
     * recorded in the catalog, and a change refused with the way out; a TIMESTAMP watermark does not depend on it.
     */
    private void checkWatermarkZone() {
        if (config.mode() != Mode.QUERY || zoneChecked) {
            return;
        }
        String zone = config.watermarkTimeZone().getId();
        Optional<String> stored = catalog.progress().watermarkZone(flow, table.fullName());
        if (stored.isEmpty() && offsetZone != null) {
            // the catalog row was removed (the table left the config, its batches were loaded, a later start pruned it)
            // and the table is back: its Connect offset still says which zone its cursor was read in
            stored = Optional.of(offsetZone);
        }
        com.google.cloud.bigquery.StandardSQLTypeName type = schema.watermark() == null ? null
                : schema.watermark().getType().getStandardType();
        boolean zoned = type == com.google.cloud.bigquery.StandardSQLTypeName.DATETIME
                || type == com.google.cloud.bigquery.StandardSQLTypeName.DATE;
        if (zoned && cursor != null && stored.isPresent() && !sameZone(stored.get(), zone)) {
            throw new TableSchema.SchemaException("table " + table.fullName() + ": watermark.time.zone is " + zone
                    + ", but the table's cursor " + Cursor.format(cursor) + " was read in " + stored.get() + ": its "
                    + type + " watermark " + table.watermarkColumn() + " means other instants in another zone, so"
                    + " reading on would skip rows or read them again. Either set watermark.time.zone back to "
                    + stored.get() + ", or read the table again in the new zone: stop the connector, wait until the sink"
                    + " has loaded the table's batches (tablecdc-status: NORMALIZED equals SYNCED), empty its ClickHouse"
                    + " table (TRUNCATE TABLE), reset the table (PATCH /connectors/" + flow + "/offsets with"
                    + " {\"partition\": {\"table\": \"" + table.fullName() + "\"}, \"offset\": null}) and resume with"
                    + " initial.load=snapshot (the default): the snapshot reads every row in the new zone. Rewinding the cursor is not enough: the versions"
                    + " of rows read in a zone east of " + stored.get() + " are lower than the ones ClickHouse holds,"
                    + " so their later updates would lose to the rows they update");
        }
        if (stored.isEmpty() || !stored.get().equals(zone)) {
            catalog.progress().recordWatermarkZone(flow, table.fullName(), zone);
        }
        zoneChecked = true;
    }

    private static boolean sameZone(String a, String b) {
        try {
            return java.time.ZoneId.of(a).normalized().equals(java.time.ZoneId.of(b).normalized());
        } catch (java.time.DateTimeException e) {
            return a.equals(b);
        }
    }

    /**
     * Step 5: the first window, then on while windows are empty, up to {@code source_now - safety lag}. In QUERY mode
     * the walk asks BigQuery for the smallest watermark after the empty window and goes straight to the window that
     * holds it: a table idle for a year costs three queries, not 365.
     */
    private Batch walk(Instant realNow) throws InterruptedException {
        // while the snapshot is read chunk by chunk, the walk ends at its bound (U + lag is never after realNow)
        Instant sourceNow = snapshotUntil != null ? snapshotUntil.plus(lag()) : realNow;
        Optional<Window> window = Window.first(cursor, sourceNow, lag(), maxWindow());
        while (window.isPresent()) {
            Window w = window.get();
            if (config.mode() != Mode.QUERY) {
                requireTimeTravel(w, sourceNow);
            }
            SourceClient.Pages pages = runWindow(w);
            if (!pages.page().isEmpty() || pages.hasNext()) {
                RecordHeaders.Op op = snapshotUntil != null ? RecordHeaders.Op.SNAPSHOT
                        : config.mode() == Mode.APPENDS ? RecordHeaders.Op.CREATE : RecordHeaders.Op.UPDATE;
                return new Batch(nextBatchId(), cursor, op, pages, null, w.upper());
            }
            // nothing to replicate up to here: an idle table is not lagging
            metrics.syncedUpTo(w.upper());
            if (config.mode() != Mode.QUERY) {
                // _CHANGE_TIMESTAMP is the commit time: nothing can appear in this window any more
                cursor = w.upper();
                mirrorCursorOnly();
            }
            Optional<Window> next = w.next(sourceNow, lag(), maxWindow());
            if (next.isPresent() && config.mode() == Mode.QUERY) {
                // one query finds where rows resume instead of one query per empty window
                Instant limit = Window.limit(sourceNow, lag());
                Instant resume = client.nextWatermark(table, schema.watermarkSql(config.watermarkTimeZone()), w.upper(), limit);
                if (resume == null) {
                    metrics.syncedUpTo(limit);
                }
                next = w.jumpTo(resume, sourceNow, lag(), maxWindow());
            }
            window = stopping ? Optional.empty() : next;
        }
        if (snapshotUntil != null && !stopping) {
            // every chunk up to the snapshot's bound is read: polling goes on with ordinary windows
            log.info("flow {}, table {}: initial snapshot read up to {}", flow, table.fullName(), Cursor.format(snapshotUntil));
            snapshotUntil = null;
        }
        return null; // every window was empty: the cursor stays (QUERY) or is at the last window's end (change history)
    }

    /** How far back BigQuery's APPENDS() and CHANGES() can read (its time travel window, 7 days at most). */
    static final Duration TIME_TRAVEL = Duration.ofDays(7);

    /**
     * APPENDS and CHANGES read the table's change history, which BigQuery keeps for its time travel window only: a
     * window that starts before it can never be read again, so the table's task fails with the way out.
     */
    void requireTimeTravel(Window w, Instant sourceNow) {
        Instant oldest = sourceNow.minus(TIME_TRAVEL);
        if (w.lower().isBefore(oldest)) {
            throw new TableSchema.SchemaException("table " + table.fullName() + ": the cursor " + Cursor.format(w.lower())
                    + " is more than " + TIME_TRAVEL.toDays() + " days before BigQuery's clock (" + Cursor.format(sourceNow)
                    + "), outside the time travel window that " + config.mode() + "() reads: the changes since then are"
                    + " gone. Re-snapshot the table: stop the connector, reset this table's offset (PATCH"
                    + " /connectors/" + flow + "/offsets with {\"partition\": {\"table\": \"" + table.fullName()
                    + "\"}, \"offset\": null}), resume");
        }
    }

    private SourceClient.Pages runWindow(Window window) throws InterruptedException {
        // with a DATETIME or DATE watermark, QUERY also binds the window's bounds in the column's own type (pruning)
        Map<String, QueryParameterValue> parameters = config.mode() == Mode.QUERY
                ? schema.watermarkSql(config.watermarkTimeZone()).parameters(window.lower(), window.upper())
                : CdcSql.bounds(window.lower(), window.upper());
        try {
            return scanned(client.query(sql(), parameters, destination));
        } catch (BigQueryException e) {
            if (e.getMessage() == null || !e.getMessage().contains("Unrecognized name")) {
                throw e;
            }
            // a column was dropped since the schema was read: read it again and retry once
            log.info("flow {}, table {}: {}; reading the table's columns again", flow, table.fullName(), e.getMessage());
            schema = null;
            refreshSchema();
            return scanned(client.query(sql(), parameters, destination));
        }
    }

    /** Counts the bytes BigQuery reported {@code pages}'s query processed in the table's metrics. */
    private SourceClient.Pages scanned(SourceClient.Pages pages) {
        metrics.bytesProcessed(pages.bytesProcessed());
        return pages;
    }

    /** The table's watermark as a TIMESTAMP in the SQL, DATETIME and DATE placed in {@code watermark.time.zone}. */
    private String watermarkSql() {
        return schema.watermarkExpression(config.watermarkTimeZone());
    }

    private String sql() {
        return switch (config.mode()) {
            case QUERY -> CdcSql.window(table, schema.columns(), schema.watermarkSql(config.watermarkTimeZone()));
            case APPENDS -> CdcSql.appends(table, schema.columns());
            case CHANGES -> CdcSql.changes(table, schema.columns());
        };
    }

    /** The initial load of a table without a cursor ({@code initial.load}). */
    private Batch initialLoad(Instant sourceNow) throws InterruptedException {
        if (config.mode() != Mode.QUERY) {
            // change history: everything up to now, then changes after now
            if (config.initialLoad() == InitialLoad.SKIP) {
                cursor = sourceNow;
                mirrorCursorOnly();
                return null;
            }
            if (syncedBatchId > 0 && !truncateSent) {
                // a re-snapshot (the offset was reset): its rows carry version 0 and would not replace what ClickHouse
                // holds, nor remove rows deleted meanwhile, so a truncate batch goes first
                truncateSent = true;
                return truncateBatch();
            }
            SourceClient.Pages pages = scanned(client.query(CdcSql.snapshotAll(table, schema.columns()), Map.of(), destination));
            return new Batch(nextBatchId(), null, RecordHeaders.Op.SNAPSHOT, pages, sourceNow, null);
        }
        Instant max = client.maxWatermark(table, watermarkSql());
        if (max == null) {
            log.debug("flow {}, table {}: no rows with a watermark yet", flow, table.fullName());
            return null;
        }
        checkAhead(max, sourceNow);
        // the snapshot, like every window, ends a safety lag before BigQuery's clock: a row stamped just below the
        // table's largest watermark and committed a moment later is read by the windows after it
        Instant upper = Window.snapshotUpper(max, sourceNow, lag());
        if (config.initialLoad() == InitialLoad.SKIP) {
            cursor = upper;
            mirrorCursorOnly();
            log.info("flow {}, table {}: initial.load=skip, polling from {}", flow, table.fullName(), Cursor.format(upper));
            return null;
        }
        // the snapshot is read in chunks, each a batch committed on its own: first the rows without a watermark, then
        // windows of max.query.window.ms from the smallest watermark up to the bound, so a task stopped during a long
        // snapshot continues from the last chunk Kafka acknowledged
        Instant min = client.minWatermark(table, watermarkSql());
        if (min == null || min.isAfter(upper)) {
            min = upper;
        }
        snapshotUntil = upper;
        log.info("flow {}, table {}: initial snapshot up to {} in chunks of max.query.window.ms from {}", flow,
                table.fullName(), Cursor.format(upper), Cursor.format(min));
        SourceClient.Pages pages = scanned(client.query(CdcSql.snapshotWithoutWatermark(table, schema.columns()), Map.of(), destination));
        if (pages.page().isEmpty() && !pages.hasNext()) {
            // no row without a watermark: the chunks of the walk come next, in this same poll
            cursor = min.minusNanos(1_000);
            mirrorCursorOnly();
            return walk(sourceNow);
        }
        return new Batch(nextBatchId(), null, RecordHeaders.Op.SNAPSHOT, pages, min.minusNanos(1_000), null);
    }

    /**
     * A batch of one truncate record (no key, no value, op {@code t}), which empties the table in ClickHouse before the
     * snapshot that follows it; it leaves the cursor as it is (none), so a task stopped after it truncates again.
     */
    private Batch truncateBatch() {
        Batch batch = new Batch(nextBatchId(), null, RecordHeaders.Op.TRUNCATE,
                client.new Pages(com.google.cloud.bigquery.Schema.of(), List.of()), null, null);
        log.info("flow {}, table {}: snapshotting again after {} batches were sent: truncating the table first (batch {})",
                flow, table.fullName(), syncedBatchId, batch.id);
        return batch;
    }

    /** How far a watermark may be ahead of BigQuery's clock before the table reports it. */
    static final Duration AHEAD_TOLERANCE = Duration.ofHours(1);
    /** How often a table's largest watermark is compared with BigQuery's clock (besides at the initial load). */
    static final Duration AHEAD_CHECK_INTERVAL = Duration.ofHours(1);
    /** The prefix of the table's {@code last_error} while a watermark is ahead of the source clock. */
    static final String AHEAD_PREFIX = "watermark ahead: ";
    /** The kind of the error episode (metrics) while a watermark is ahead of the source clock. */
    static final String AHEAD_EPISODE = "watermark_ahead";

    /**
     * Reports on the table (the catalog's {@code last_error}, the {@code in-error} metric) while its largest watermark
     * is more than {@link #AHEAD_TOLERANCE} ahead of BigQuery's clock, and clears the report once it is not. Such rows
     * never move the cursor: they are read when the clock has passed them by the safety lag.
     */
    private void checkAhead(Instant max, Instant sourceNow) {
        aheadCheckDueMs = clock.millis() + AHEAD_CHECK_INTERVAL.toMillis();
        boolean ahead = max != null && max.isAfter(sourceNow.plus(AHEAD_TOLERANCE));
        if (ahead && !aheadReported) {
            String message = "table " + table.fullName() + ": watermark column " + table.watermarkColumn() + " holds "
                    + Cursor.format(max) + ", more than " + AHEAD_TOLERANCE.toHours() + " h ahead of BigQuery's clock ("
                    + Cursor.format(sourceNow) + "); such rows are read only once the clock passes them";
            log.warn("flow {}, {}", flow, message);
            Instant now = clock.instant();
            catalog.progress().recordError(flow, table.fullName(), AHEAD_PREFIX + message, now, null);
            metrics.errorEpisodeStarted(AHEAD_EPISODE);
            aheadReported = true;
        } else if (!ahead && (aheadReported || aheadInCatalog)) {
            catalog.progress().clearError(flow, table.fullName(), AHEAD_PREFIX);
            metrics.errorEpisodeEnded(AHEAD_EPISODE);
            if (aheadReported) {
                log.info("flow {}, table {}: no watermark is ahead of BigQuery's clock any more", flow, table.fullName());
            }
            aheadReported = false;
            aheadInCatalog = false;
        }
    }

    /**
     * The hourly check for watermarks ahead of BigQuery's clock: a report, not a step of the poll, so its failure (a
     * scan above {@code maximum.bytes.billed}, a BigQuery error) is logged and the check tried again an hour later,
     * while the windows go on.
     */
    private void hourlyAheadCheck(Instant sourceNow) throws InterruptedException {
        aheadCheckDueMs = clock.millis() + AHEAD_CHECK_INTERVAL.toMillis();
        Instant max;
        try {
            max = client.maxWatermark(table, watermarkSql());
        } catch (BigQueryException e) {
            log.warn("flow {}, table {}: the hourly check for watermarks ahead of BigQuery's clock (a MAX({}) query)"
                    + " failed, tried again in {} h; the table polls on: {}", flow, table.fullName(),
                    table.watermarkColumn(), AHEAD_CHECK_INTERVAL.toHours(), e.getMessage());
            return;
        }
        checkAhead(max, sourceNow);
    }

    private void mirrorCursorOnly() {
        catalog.owners().recordSync(flow, table.fullName(), SyncedBatch.cursorOnly(Cursor.format(cursor), syncedBatchId),
                clock.instant(), epoch);
        metrics.syncedUpTo(cursor);
    }

    // ------------------------------------------------------------------------------------------ step 6: emit

    private List<SourceRecord> nextPage() {
        Batch batch = streaming;
        List<FieldValueList> page;
        try {
            page = batch.pages.next();
        } catch (RuntimeException e) {
            if (pageCanBeReadAgain(e)) {
                // the rows sent so far stay a batch of their own (the sink stages it without its last record); after
                // the backoff the same page is read again, as the first of the next batch: nothing is sent twice
                pageFailed(batch);
            } else {
                // the result is gone: the rows sent so far stay a batch of their own, and the window is read again,
                // under a new batch id, once they are acknowledged
                cutShort(batch);
            }
            throw e;
        }
        // a task whose table another task took over sends no further page of it
        catalog.owners().requireOwner(flow, table.fullName(), epoch);
        return emitOrClose(batch, page);
    }

    /** {@link #emit}, closing the batch as failed when a row cannot be converted (none of the page is sent). */
    private List<SourceRecord> emitOrClose(Batch batch, List<FieldValueList> page) {
        try {
            return emit(batch, page);
        } catch (RuntimeException e) {
            cutShort(batch);
            throw e;
        }
    }

    /**
     * Whether a page that could not be read can be asked for again: a failed read leaves the page token as it was, and
     * BigQuery keeps a query's result for a day. Not when BigQuery says the result is not there (404: it expired, or
     * its destination table was dropped) or the request itself is wrong (400): the window is then read again.
     */
    static boolean pageCanBeReadAgain(RuntimeException e) {
        return !(e instanceof BigQueryException bq && (bq.getCode() == 404 || bq.getCode() == 400));
    }

    /**
     * A page of the batch could not be read: the batch ends here (what was sent of it stays a batch of its own, without
     * its last record) and the window's pages go on from the failed one as the next batch, after the backoff.
     */
    private void pageFailed(Batch batch) {
        batch.split = true;
        batch.pageFailed = true;
        batch.endCursor = batch.startCursor;
        streaming = null;
        closing = batch;
        resume = batch;
        if (batch.rows > 0) {
            cutShort.run();
        }
    }

    /**
     * The next batch of a window whose previous batch ended before the window did ({@link #resume}): the same query
     * result, read on from where the previous batch stopped, under a new batch id. A batch that ended on a page
     * failure is followed at once (the sink stages it only once the next batch's first record arrives); one that
     * ended because its time was up waits for back-pressure like any batch.
     */
    private List<SourceRecord> resumeWindow() {
        Batch previous = resume;
        long now = clock.millis();
        if (!previous.pageFailed && backPressured(now)) {
            retryAtMs = nextDueAtMs;
            return List.of();
        }
        Batch next = new Batch(nextBatchId(), previous.startCursor, previous.op, previous.pages, previous.snapshotCursor,
                previous.upper);
        next.maxSeen = previous.maxSeen;
        resume = null;
        streaming = next;
        log.debug("flow {}, table {}: the window from {} goes on as batch {}", flow, table.fullName(),
                previous.startCursor == null ? "(snapshot)" : Cursor.format(previous.startCursor), next.id);
        return nextPage();
    }

    /** The batch ends here, failed: what was sent of it stays a batch of its own, its window is read again. */
    private void cutShort(Batch batch) {
        batch.failed = true;
        streaming = null;
        closing = batch;
        if (batch.rows > 0) {
            cutShort.run();
        }
    }

    private List<SourceRecord> emit(Batch batch, List<FieldValueList> page) {
        if (batch.op == RecordHeaders.Op.TRUNCATE) {
            ConnectHeaders headers = new ConnectHeaders();
            headers.addString(RecordHeaders.FLOW, flow);
            headers.addString(RecordHeaders.TABLE, table.fullName());
            headers.addString(RecordHeaders.OP, RecordHeaders.Op.TRUNCATE.code());
            headers.addString(RecordHeaders.VERSION, "0");
            headers.addString(RecordHeaders.BATCH, Long.toString(batch.id));
            headers.addString(RecordHeaders.BATCH_LAST, "true");
            headers.addString(ROW_HEADER, Long.toString(batch.sent++));
            batch.rows = 1;
            streaming = null;
            closing = batch;
            inFlight.incrementAndGet();
            return List.of(new SourceRecord(partition, Map.of(CURSOR_KEY, "", BATCH_KEY, batch.id), topic, 0, null, null,
                    null, null, null, headers));
        }
        boolean lastPage = !batch.pages.hasNext();
        List<Converted> rows = new ArrayList<>(page.size());
        List<Converted> read = new ArrayList<>(page.size());
        for (FieldValueList row : page) {
            Converted converted = convert(batch, row);
            read.add(converted);
            if (converted.op != null) {
                rows.add(converted);
            }
        }
        Instant receivedAt = clock.instant();
        if (batch.firstRowReceivedAt == null && !rows.isEmpty()) {
            batch.firstRowReceivedAt = receivedAt;
        }
        if (batch.openedAtMs < 0 && !rows.isEmpty()) {
            batch.openedAtMs = clock.millis();
        }
        // under exactly-once, a batch whose first record went out batchMaxMs ago ends with this page (its transaction
        // commits) and the window goes on as the next batch; the cursor moves only with the window's last page
        boolean timeUp = !lastPage && !rows.isEmpty() && batchMaxMs > 0 && clock.millis() - batch.openedAtMs >= batchMaxMs;
        // every row read moves the cursor, a dropped one too (else a window of dropped rows would be read forever)
        for (Converted row : read) {
            if (row.watermarkMicros != null) {
                Instant seen = Cursor.ofMicros(row.watermarkMicros);
                batch.maxSeen = batch.maxSeen == null || seen.isAfter(batch.maxSeen) ? seen : batch.maxSeen;
                if (batch.oldestCommitMicros == null || row.watermarkMicros < batch.oldestCommitMicros) {
                    batch.oldestCommitMicros = row.watermarkMicros;
                }
            }
        }
        batch.rows += rows.size();
        List<SourceRecord> records = new ArrayList<>(rows.size());
        String startCursor = batch.startCursor == null ? "" : Cursor.format(batch.startCursor);
        for (int i = 0; i < rows.size(); i++) {
            boolean last = (lastPage || timeUp) && i == rows.size() - 1;
            String offsetCursor = startCursor;
            if (last && lastPage) {
                batch.endCursor = endCursor(batch);
                offsetCursor = Cursor.format(batch.endCursor);
            }
            records.add(record(batch, rows.get(i), offsetCursor, last));
        }
        if (timeUp) {
            // the batch's last record carries the cursor the window started from: a task stopped before the window's
            // end reads the whole window again
            batch.split = true;
            batch.endCursor = batch.startCursor;
            streaming = null;
            closing = batch;
            resume = batch;
            log.debug("flow {}, table {}: batch {} ends after {} ms ({} rows) with the window unfinished (exactly-once:"
                    + " its transaction must end within transaction.timeout.ms)", flow, table.fullName(), batch.id,
                    clock.millis() - batch.openedAtMs, batch.rows);
        }
        if (lastPage) {
            streaming = null;
            closing = batch;
            if (rows.isEmpty()) {
                // no row of the last page became a record: the batch has none, or ends without its last record
                batch.endCursor = endCursor(batch);
                if (batch.rows > 0) {
                    cutShort.run();
                }
            }
            log.debug("flow {}, table {}: batch {} of {} rows, cursor {}", flow, table.fullName(), batch.id, batch.rows,
                    Cursor.format(batch.endCursor));
        }
        inFlight.addAndGet(records.size());
        return records;
    }

    private Instant endCursor(Batch batch) {
        if (batch.op == RecordHeaders.Op.SNAPSHOT && batch.snapshotCursor != null) {
            return batch.snapshotCursor;
        }
        if (config.mode() != Mode.QUERY && batch.upper != null) {
            // _CHANGE_TIMESTAMP is the commit time: the whole window is read, whatever its largest change
            return batch.upper;
        }
        Instant seen = batch.maxSeen;
        if (seen != null && batch.upper != null && seen.isAfter(batch.upper)) {
            seen = batch.upper;
        }
        return Window.advance(batch.startCursor, seen);
    }

    /** A row as a record's parts; {@code beforeUpdate} for the DELETE half of an update (CHANGES mode). */
    private record Converted(Struct key, Struct value, Long watermarkMicros, RecordHeaders.Op op, boolean beforeUpdate) {
    }

    private Converted convert(Batch batch, FieldValueList row) {
        Struct value = schema.value(row);
        Long watermark;
        RecordHeaders.Op op = batch.op;
        boolean beforeUpdate = false;
        if (config.mode() == Mode.QUERY || batch.op == RecordHeaders.Op.SNAPSHOT) {
            watermark = schema.watermarkMicros(row, config.watermarkTimeZone());
        } else {
            watermark = io.tablecdc.bigquery.schema.BigQueryTypes.timestampMicros(row.get(CdcSql.CHANGE_TIMESTAMP));
            if (config.mode() == Mode.CHANGES) {
                op = changeOp(row);
                beforeUpdate = deleteHalfOfUpdate(row);
            }
        }
        return new Converted(schema.key(value), value, watermark, op, beforeUpdate);
    }

    /**
     * The operation of a CHANGES row: INSERT {@code c}, UPDATE {@code u}, DELETE {@code d}. The DELETE half of an
     * update ({@code _CHANGE_IS_FOR_UPDATE}, carrying the row as it was) is a {@code d} too: when the update changed the
     * key, it deletes the old key's row; when it did not, the UPDATE half wins over it by version
     * ({@link #version(Long, boolean)}).
     */
    static RecordHeaders.Op changeOp(FieldValueList row) {
        String type = row.get(CdcSql.CHANGE_TYPE).getStringValue();
        return switch (type) {
            case "INSERT" -> RecordHeaders.Op.CREATE;
            case "UPDATE" -> RecordHeaders.Op.UPDATE;
            case "DELETE" -> RecordHeaders.Op.DELETE;
            default -> throw new IllegalArgumentException("table: unknown _CHANGE_TYPE '" + type + "'");
        };
    }

    /** Whether a CHANGES row is the DELETE half of an update. */
    static boolean deleteHalfOfUpdate(FieldValueList row) {
        FieldValue forUpdate = row.get(CdcSql.CHANGE_IS_FOR_UPDATE);
        return "DELETE".equals(row.get(CdcSql.CHANGE_TYPE).getStringValue())
                && forUpdate != null && !forUpdate.isNull() && forUpdate.getBooleanValue();
    }

    /**
     * The record's version: the watermark (or change timestamp) in nanoseconds since 1970, as the decimal text of the
     * {@code tablecdc.version} header. Computed without overflow for every BigQuery timestamp (up to
     * 9999-12-31T23:59:59.999999Z, about 2.5e20 ns, beyond a signed 64-bit integer). A row without a watermark, or with
     * one before 1970, gets version 0: any later change of the row wins.
     */
    static String version(Long watermarkMicros) {
        return version(watermarkMicros, false);
    }

    /**
     * As {@link #version(Long)}; the DELETE half of an update ({@code beforeUpdate}) gets one nanosecond less than its
     * change's time, so that the UPDATE half of the same key, at the change's time, always wins over it, in whichever
     * order the two arrive, while it still wins over every earlier change of the old key (those are at least a
     * microsecond earlier).
     */
    static String version(Long watermarkMicros, boolean beforeUpdate) {
        if (watermarkMicros == null || watermarkMicros < 0) {
            return "0";
        }
        java.math.BigInteger nanos = java.math.BigInteger.valueOf(watermarkMicros).multiply(java.math.BigInteger.valueOf(1_000L));
        if (beforeUpdate && nanos.signum() > 0) {
            nanos = nanos.subtract(java.math.BigInteger.ONE);
        }
        return nanos.toString();
    }

    private SourceRecord record(Batch batch, Converted row, String offsetCursor, boolean last) {
        ConnectHeaders headers = new ConnectHeaders();
        headers.addString(RecordHeaders.FLOW, flow);
        headers.addString(RecordHeaders.TABLE, table.fullName());
        headers.addString(RecordHeaders.OP, row.op.code());
        headers.addString(RecordHeaders.VERSION, version(row.watermarkMicros, row.beforeUpdate));
        headers.addString(RecordHeaders.BATCH, Long.toString(batch.id));
        for (String mark : NonFiniteValues.marks(row.value)) {
            headers.addString(RecordHeaders.NON_FINITE, mark);
        }
        if (last) {
            headers.addString(RecordHeaders.BATCH_LAST, "true");
        }
        // no two records of a batch are equal, also for two identical rows: an exactly-once worker whose transaction
        // boundary is not the connector's reports committed records from a map keyed by record equality, and would
        // report them once, so the batch would wait for the other acknowledgement for ever
        headers.addString(ROW_HEADER, Long.toString(batch.sent++));
        Map<String, Object> offset = new java.util.HashMap<>();
        offset.put(CURSOR_KEY, offsetCursor);
        offset.put(BATCH_KEY, batch.id);
        if (snapshotUntil != null) {
            offset.put(SNAPSHOT_KEY, Cursor.format(snapshotUntil));
        }
        if (config.mode() == Mode.QUERY && !offsetCursor.isEmpty()) {
            offset.put(ZONE_KEY, config.watermarkTimeZone().getId());
        }
        return new SourceRecord(partition, offset, topic, 0, schema.keySchema(), row.key, schema.valueSchema(), row.value,
                null, headers);
    }

    // ------------------------------------------------------------------------------------------ catalog mirror

    /**
     * Records the closing batch in the catalog once Kafka acknowledged all its records; false while records are still
     * in flight or the catalog is unreachable (retried at the next poll, never skipped). May be called again after a
     * crash: the catalog ignores a repeat.
     */
    private boolean mirror() {
        if (inFlight.get() > 0) {
            idle(50);
            return false;
        }
        Batch batch = closing;
        Instant newCursor = batch.failed ? batch.startCursor : batch.endCursor;
        Instant commitTime = batch.oldestCommitMicros == null ? null : Cursor.ofMicros(batch.oldestCommitMicros);
        if (newCursor == null) {
            newCursor = cursor;
        }
        String cursorText = newCursor == null ? "" : Cursor.format(newCursor);
        Instant firstRow = batch.firstRowReceivedAt;
        // a batch of which no record was sent leaves nothing for the sink to load: only its cursor is recorded, so
        // that synced - normalized counts batches the sink can actually normalize
        long recordedId = batch.rows > 0 ? batch.id : syncedBatchId;
        catalog.owners().recordSync(flow, table.fullName(), new SyncedBatch(cursorText, recordedId, batch.rows,
                batch.rows > 0 ? firstRow : null, batch.rows > 0 ? (commitTime == null ? firstRow : commitTime) : null),
                clock.instant(), epoch);
        syncedBatchId = Math.max(syncedBatchId, recordedId);
        metrics.batchSynced(batch.id, batch.rows);
        retryOwed = batch.failed && batch.rows > 0;
        if (!batch.failed) {
            cursor = newCursor;
            if (snapshotUntil != null && cursor != null && !cursor.isBefore(snapshotUntil)) {
                log.info("flow {}, table {}: initial snapshot read up to {}", flow, table.fullName(), Cursor.format(snapshotUntil));
                snapshotUntil = null;
            }
            metrics.syncedUpTo(newCursor);
        }
        closing = null;
        if (!batch.failed && !batch.split) {
            // the window is read to its end, sent, acknowledged and recorded: only now does an error episode end (a
            // query that succeeds and a page of it that fails are one episode, one warning)
            succeeded();
        }
        return true;
    }

    // ------------------------------------------------------------------------------------------ step 7: errors

    /** Marks this source's errors in the table's shared error episode (the sink marks its own). */
    static final String ERROR_PREFIX = "poll: ";
    /** The kind of error episode this loop reports in the table's metrics. */
    static final String EPISODE = "poll";

    /** Backoff, log, metric and the catalog's error (not written while the catalog could not be opened). */
    private void failed(RuntimeException e) {
        long delay = episode.failed(e);
        nextDueAtMs = clock.millis() + delay;
        if (!started || closing != null || resume != null) {
            retryAtMs = nextDueAtMs;
        }
    }

    private void succeeded() {
        if (episode.succeeded() && aheadReported) {
            // the poll's error replaced the report of a watermark ahead in the catalog: check again at once
            aheadReported = false;
            aheadCheckDueMs = 0;
        }
    }

    private void idle(long ms) {
        if (stopping) {
            return;
        }
        try {
            Thread.sleep(Math.max(1, Math.min(ms, IDLE_SLEEP_MS)));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private Duration lag() {
        return Duration.ofMillis(config.safetyLagMs());
    }

    private Duration maxWindow() {
        return Duration.ofMillis(config.maxQueryWindowMs());
    }

    // for tests and the task
    Instant cursor() {
        return cursor;
    }

    long lastBatchId() {
        return lastBatchId;
    }
}
