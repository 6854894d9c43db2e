package io.tablecdc.clickhouse;

import java.io.IOException;
import java.io.InputStream;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.avro.file.DataFileStream;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.clickhouse.destination.ClickHouseDestination;
import io.tablecdc.clickhouse.destination.ClickHouseRefusals;
import io.tablecdc.clickhouse.schema.StageColumn;
import io.tablecdc.clickhouse.schema.StageSchema;
import io.tablecdc.clickhouse.stage.StageStore;
import io.tablecdc.common.Backoff;
import io.tablecdc.common.ErrorEpisode;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.RowCounts;
import io.tablecdc.catalog.SinkLeases;
import io.tablecdc.catalog.Stage;
import io.tablecdc.catalog.StageFile;
import io.tablecdc.common.metrics.TableMetrics;

/**
 * The normalize loop of one table: loads its staged batches into the final ClickHouse table in batch order,
 * one at a time, on the task's normalize pool (its own concurrency limit). A failure backs off this table
 * only; other tables keep normalizing.
 *
 * <p>For each batch: every file is loaded with its deduplication token ({@link #token}), the rows ClickHouse reports
 * written are checked against the rows staged (files that hold fewer rows fail the step), then the
 * normalized batch id is raised with the batch's counts, in one catalog transaction that also checks that the batch's
 * stage row still names the files just loaded ({@code Stages.recordLoaded}; a batch the sink staged again meanwhile is
 * not recorded and its new files are loaded by the next run), and only then are the files and the stage row (while it
 * names those files) deleted. A crash anywhere repeats at most the load of files that ClickHouse then deduplicates.
 *
 * <p>A batch staged with {@link Stage#truncateBefore()} first empties the final table, then loads its files
 * (none when the batch is only the truncate). Batches of a table are loaded strictly in batch order and the
 * normalized id moves only after a whole batch, so when the truncate runs every earlier batch is in the table
 * and no later one is: the truncate removes exactly the rows the source removed. Repeating such a batch after
 * a crash (the truncate ran, maybe some files loaded, the process died before the normalized id moved) runs
 * the truncate again and then loads every file again, which is the same result, because no later batch can
 * have been loaded in between. For that repeat, the files of a truncate batch are loaded with a token unique
 * to the attempt, so that ClickHouse cannot skip the reload as a repeat of rows the second truncate removed: a
 * plain MergeTree clears its deduplication log on {@code TRUNCATE} (measured on the test engine), but a
 * replicated table's deduplication blocks in Keeper are reported to outlive dropped data.
 *
 * <p>Exactly one loop loads a table at any time: a run first takes the table's normalize lease in the catalog
 * ({@link SinkLeases#claimNormalizeLease}), renews it every third of its duration while it runs, checks it before every
 * step that writes (truncate, each file, the normalized id) and gives it up when the run ends. A loop whose table
 * left its task ({@link #stopAndWait}) starts no further step; until its step in flight ends it keeps the lease, so
 * the table's next owner waits for it.
 *
 * <p>A statement given up on (no answer within {@code clickhouse.timeout.ms}, or the answer lost) is cancelled on the
 * server by its query id ({@link ClickHouseDestination#cancel}); while ClickHouse does not confirm that cancel
 * ({@link ClickHouseDestination.StatementMayRun}), the loop keeps the lease between its runs (renewed), and each run
 * cancels again before anything else, so that nothing else writes the table while the old statement may. A loop stopped
 * meanwhile stops renewing and leaves the lease to run out rather than give it up.
 */
final class TableNormalizer {
    private static final Logger log = LoggerFactory.getLogger(TableNormalizer.class);
    /** The kind of error episode this loop reports in the table's metrics. */
    static final String EPISODE = "normalize";
    /** Marks this loop's errors in the table's shared error (the source and the stage upload mark their own). */
    static final String ERROR_PREFIX = "normalize: ";

    private final TableKey key;
    private final Catalog catalog;
    private final StageStore store;
    private final ClickHouseDestination destination;
    private final boolean push;
    private final ScheduledExecutorService pool;
    private final ErrorEpisode episode;
    private final TableMetrics.Table metrics;
    private final AtomicBoolean scheduled = new AtomicBoolean();
    private final AtomicBoolean rerun = new AtomicBoolean();
    private final AtomicLong pendingBatches = new AtomicLong();
    private volatile boolean stopped;
    private final String owner;
    private final Duration lease;
    private final ScheduledExecutorService leaseTimer;
    /**
     * A statement of this loop that ClickHouse may still run (given up on, its cancel not confirmed), or null: while set,
     * this loop keeps the table's normalize lease between runs (renewed), and each run cancels it again before anything
     * else and writes only once the cancel is confirmed.
     */
    private volatile ClickHouseDestination.StatementMayRun mayRun;
    /** The lease's renewal, every third of its duration; kept between runs while {@link #mayRun} is set. */
    private volatile ScheduledFuture<?> heartbeat;
    /** When the lease was last taken or renewed (System.nanoTime), 0 while this loop does not hold it. */
    private volatile long leaseRenewedAt;
    private volatile boolean leaseLost;
    private volatile ScheduledFuture<?> next;
    /**
     * Set when a group load wrote fewer rows than staged (its files held fewer), until a load is recorded: the
     * rows it did write carry the group's token, so the same group loaded again under that token would be taken for a
     * repeat and skipped; its next loads use a token of their own (a group is of a keyed table: rows written twice are
     * one row in {@code FINAL}). Kept in memory: a restart loads under the group's token again.
     */
    private volatile String afterShortfall = "";
    /** The catalog's normalized id was read once (for the metrics of a table with nothing staged). */
    private boolean normalizedIdKnown;
    /** The default of {@code normalize.batches.per.load}. */
    static final int DEFAULT_BATCHES_PER_LOAD = 100;
    /** {@link #normalizeAll} loads at most this many waiting batches of a table in one INSERT. */
    private final int batchesPerLoad;
    /** A group of batches loaded together takes no further batch once it holds this many rows. */
    static final long MAX_ROWS_PER_LOAD = 1_000_000;

    TableNormalizer(TableKey key, Catalog catalog, StageStore store, ClickHouseDestination destination, boolean push,
                    ScheduledExecutorService pool, long backoffInitialMs, long backoffMaxMs, TableMetrics.Table metrics,
                    String owner, Duration lease, ScheduledExecutorService leaseTimer) {
        this(key, catalog, store, destination, push, pool, backoffInitialMs, backoffMaxMs, metrics, owner, lease, leaseTimer,
                DEFAULT_BATCHES_PER_LOAD);
    }

    /** As above; {@code batchesPerLoad}: most waiting batches loaded by one INSERT ({@code normalize.batches.per.load}). */
    TableNormalizer(TableKey key, Catalog catalog, StageStore store, ClickHouseDestination destination, boolean push,
                    ScheduledExecutorService pool, long backoffInitialMs, long backoffMaxMs, TableMetrics.Table metrics,
                    String owner, Duration lease, ScheduledExecutorService leaseTimer, int batchesPerLoad) {
        this.key = key;
        this.batchesPerLoad = batchesPerLoad;
        this.catalog = catalog;
        this.store = store;
        this.destination = destination;
        this.push = push;
        this.pool = pool;
        this.episode = new ErrorEpisode(log, "normalize of flow " + key.flow() + ", table " + key.table(),
                new Backoff(backoffInitialMs, backoffMaxMs), Clock.systemUTC(),
                ErrorEpisode.inCatalog(() -> catalog, key.flow(), key.table(), ERROR_PREFIX), ErrorEpisode.metric(() -> metrics, EPISODE));
        this.metrics = metrics;
        this.owner = owner;
        this.lease = lease;
        this.leaseTimer = leaseTimer;
        // an earlier task (before a restart or a rebalance) may have left the table's normalize error in the catalog:
        // this loop's first success clears it (only a "normalize: " error), or the recovered table kept showing it
        episode.errorLeftInCatalog();
    }

    /** Asks for a run soon (a batch was staged). Runs of one table never overlap. */
    void wake() {
        // first ask for another run, then look at the backoff: a run ending now either sees this request or has
        // already left its backoff, which this call then sees (both fields are volatile), so no wake-up is lost. A
        // wake-up during a failing episode leaves the batch to the scheduled retry, which reads every stage row.
        rerun.set(true);
        if (inBackoff) {
            return;
        }
        schedule(0);
    }

    /** Set while a failed run's retry waits; cleared by a run that succeeded, before it looks at {@link #rerun}. */
    private volatile boolean inBackoff;

    /** Staged batches not yet normalized, as of the last run (for the sink's own back-pressure). */
    long pendingBatches() {
        return pendingBatches.get();
    }

    /** A batch was just staged: counted at once, before this loop next reads the catalog. */
    void staged() {
        pendingBatches.incrementAndGet();
    }

    /** A run has passed its start check and not yet ended (guarded by this). */
    private boolean inRun;

    void stop() {
        stopped = true;
    }

    /**
     * Stops this loop (its table left the task): no further run or step starts; waits up to {@code timeoutMs} for a
     * run in flight to end. A step that outlasts the wait keeps the lease until it ends.
     *
     * @return true if no run is in flight any more
     */
    boolean stopAndWait(long timeoutMs) throws InterruptedException {
        synchronized (this) {
            stopped = true;
            ScheduledFuture<?> future = next;
            // a run that has started is not cancelled here (a started FutureTask still cancels "successfully"): it
            // sees stopped at its next step and ends; wait for it below
            if (!inRun && future != null && future.cancel(false)) {
                scheduled.set(false);
            }
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        synchronized (this) {
            while (scheduled.get()) {
                long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                if (left <= 0) {
                    return false;
                }
                wait(left);
            }
        }
        return true;
    }

    /** The owner name this loop holds the table's normalize lease under. */
    String owner() {
        return owner;
    }

    private void schedule(long delayMs) {
        if (stopped) {
            return;
        }
        if (!scheduled.compareAndSet(false, true)) {
            rerun.set(true);
            return;
        }
        next = pool.schedule(this::run, delayMs, TimeUnit.MILLISECONDS);
    }

    private void run() {
        long retryIn = -1;
        boolean claimed = false;
        try {
            rerun.set(false);
            synchronized (this) {
                if (stopped) {
                    return;
                }
                inRun = true;
            }
            if (!catalog.sink().claimNormalizeLease(key.flow(), key.table(), owner, lease)) {
                long now = System.nanoTime();
                if (leaseMissSince == 0) {
                    leaseMissSince = now;
                    log.info("flow {}, table {}: another sink task still holds the normalize lease ({}); waiting up to {} ms for it to"
                            + " give it up or for it to run out", key.flow(), key.table(),
                            catalog.sink().normalizeLeaseHolder(key.flow(), key.table()).orElse("another owner"), lease.toMillis() * 2);
                }
                if (now - leaseMissSince < lease.toNanos() * 2) {
                    // after a rebalance the table's previous owner ends its step and gives the lease up, or its lease
                    // runs out (a killed worker): a wait, not an error
                    throw new LeaseWait();
                }
                throw new IllegalStateException("another sink task still loads this table (normalize lease held by "
                        + catalog.sink().normalizeLeaseHolder(key.flow(), key.table()).orElse("another owner") + " for more"
                        + " than " + lease.toMillis() * 2 + " ms)");
            }
            leaseMissSince = 0;
            claimed = true;
            leaseRenewedAt = System.nanoTime();
            leaseLost = false;
            if (heartbeat == null) {
                long every = Math.max(1, lease.toMillis() / 3);
                heartbeat = leaseTimer.scheduleAtFixedRate(this::renewLease, every, every, TimeUnit.MILLISECONDS);
            }
            ClickHouseDestination.StatementMayRun pending = mayRun;
            if (pending != null) {
                // nothing is written while the statement given up on may still write
                destination.cancelAgain(pending);
                mayRun = null;
                log.info("flow {}, table {}: ClickHouse confirmed that statement {} is not running; loading goes on",
                        key.flow(), key.table(), pending.queryId());
            }
            normalizeAll();
            if (stopped) {
                return;
            }
            inBackoff = false;
            episode.succeeded();
        } catch (LeaseWait e) {
            retryIn = Math.max(100, Math.min(lease.toMillis() / 5, 2_000));
        } catch (Restaged e) {
            log.info("flow {}, table {}: batch {} was staged again while this run read it; reading the stage rows again",
                    key.flow(), key.table(), e.batchId);
            rerun.set(true);
        } catch (ClickHouseDestination.StatementMayRun e) {
            mayRun = e;
            inBackoff = true;
            retryIn = episode.failed(e);
        } catch (BatchRefused e) {
            inBackoff = true;
            retryIn = episode.failed(e, e.batchId);
        } catch (Exception e) {
            inBackoff = true;
            retryIn = episode.failed(e);
        } finally {
            // a statement that may still run keeps the lease to this loop (renewed) until its cancel is confirmed; a loop
            // stopped meanwhile stops renewing and leaves the lease to run out
            boolean keep = claimed && mayRun != null && !stopped && !leaseLost;
            if (heartbeat != null && !keep) {
                heartbeat.cancel(false);
                heartbeat = null;
            }
            if (claimed && mayRun != null && !keep) {
                log.warn("flow {}, table {}: statement {} may still run on ClickHouse and this loop stopped or lost its lease;"
                        + " the normalize lease is left to run out ({} ms) rather than given up", key.flow(), key.table(), mayRun.queryId(),
                        lease.toMillis());
                leaseRenewedAt = 0;
            } else if (claimed && !keep) {
                leaseRenewedAt = 0;
                try {
                    catalog.sink().releaseNormalizeLease(key.flow(), key.table(), owner);
                } catch (RuntimeException catalogDown) {
                    log.debug("releasing the normalize lease of {} failed (it expires): {}", key, catalogDown.toString());
                }
            }
            synchronized (this) {
                inRun = false;
                scheduled.set(false);
                notifyAll();
            }
        }
        if (stopped) {
            return;
        }
        if (retryIn >= 0) {
            schedule(retryIn);
        } else if (rerun.get()) {
            schedule(0);
        }
    }

    private void renewLease() {
        synchronized (this) {
            if (stopped && !inRun) {
                // stopped between the runs of a statement that may still run: the lease is left to run out
                if (heartbeat != null) {
                    heartbeat.cancel(false);
                    heartbeat = null;
                }
                return;
            }
        }
        try {
            if (catalog.sink().renewNormalizeLease(key.flow(), key.table(), owner, lease)) {
                leaseRenewedAt = System.nanoTime();
            } else {
                leaseLost = true;
            }
        } catch (RuntimeException e) {
            log.debug("renewing the normalize lease of {} failed: {}", key, e.toString());
        }
    }

    /** Before a step that writes: false when this loop was stopped; fails when its lease is lost or may have expired. */
    private boolean mayWrite() {
        if (stopped) {
            return false;
        }
        long renewed = leaseRenewedAt;
        // a margin of a third of the lease for the step's own first moments
        if (leaseLost || renewed == 0 || System.nanoTime() - renewed > lease.toNanos() * 2 / 3) {
            throw new IllegalStateException("the normalize lease of this table was lost (not renewed in time, or taken by"
                    + " another owner); the next run takes it again");
        }
        return true;
    }

    private void normalizeAll() throws Exception {
        List<Stage> stages = catalog.stages().listStages(key.flow(), key.table());
        pendingBatches.set(stages.size());
        long normalized = stages.isEmpty() && normalizedIdKnown ? 0
                : catalog.progress().getTable(key.flow(), key.table()).map(t -> t.normalizedBatchId()).orElse(0L);
        normalizedIdKnown = true;
        int epoch = stages.isEmpty() ? 0 : catalog.sink().normalizeEpoch(key.flow(), key.table());
        if (!stages.isEmpty()) {
            flowIncarnation = incarnationOf(key.flow());
        }
        metrics.normalizedUpTo(normalized);
        for (Stage stage : stages) {
            metrics.batchWaiting(stage.batchId(), stage.createdAt());
        }
        Map<String, org.apache.avro.Schema> schemas = new HashMap<>();
        for (int next = 0; next < stages.size(); ) {
            Stage stage = stages.get(next);
            if (!mayWrite()) {
                return;
            }
            if (stage.batchId() <= normalized) {
                // loaded already: a crash came after the normalized id was raised and before the stage row was
                // deleted (its files may be gone too); loading it again would fail on a missing file forever
                for (StageFile file : stage.files()) {
                    if (store.exists(file.uri())) {
                        store.delete(file.uri());
                    }
                }
                catalog.stages().deleteStage(key.flow(), key.table(), stage.batchId(), stage.files());
                pendingBatches.decrementAndGet();
                metrics.normalizedUpTo(stage.batchId());
                log.info("flow {}, table {}: batch {} was normalized before a restart; its stage row is removed",
                        key.flow(), key.table(), stage.batchId());
                next++;
                continue;
            }
            List<Stage> group = group(stages, next, schemas);
            next += group.size();
            Stage last = group.get(group.size() - 1);
            String attempt = "";
            if (stage.truncateBefore() && mayWrite()) {
                destination.truncate(key.clickHouseTable());
                attempt = "/after-truncate-" + UUID.randomUUID();
                log.info("flow {}, table {}: batch {} starts with a truncate of the source table; emptied {} (if it existed)",
                        key.flow(), key.table(), stage.batchId(), key.clickHouseTable());
            }
            if (group.size() > 1) {
                if (!mayWrite()) {
                    return;
                }
                loadTogether(group, attempt, epoch, schemas);
            } else {
                for (int part = 0; part < stage.files().size(); part++) {
                    if (!mayWrite()) {
                        return;
                    }
                    load(stage, part, attempt, epoch, schemas);
                }
            }
            if (!mayWrite()) {
                return;
            }
            // recorded only while every stage row of the group still names the files just loaded: a batch staged again
            // meanwhile (a larger copy under other files) keeps its row, unrecorded, and the next run loads its files
            long restaged = catalog.stages().recordLoaded(key.flow(), key.table(), group, countsOf(group), Instant.now());
            if (restaged != 0) {
                throw new Restaged(restaged);
            }
            afterShortfall = "";
            metrics.loaded();
            for (Stage loaded : group) {
                metrics.batchNormalized(loaded.batchId(), loaded.rows());
                for (StageFile file : loaded.files()) {
                    store.delete(file.uri());
                    schemas.remove(file.uri());
                }
                catalog.stages().deleteStage(key.flow(), key.table(), loaded.batchId(), loaded.files());
                pendingBatches.decrementAndGet();
            }
            if (group.size() > 1) {
                log.debug("normalized batches {} to {} of {} ({} rows) into {} in one load", stage.batchId(), last.batchId(),
                        key, group.stream().mapToLong(Stage::rows).sum(), key.clickHouseTable());
            } else {
                log.debug("normalized batch {} of {} ({} rows) into {}", stage.batchId(), key, stage.rows(), key.clickHouseTable());
            }
        }
    }

    /**
     * The batches loaded together from {@code stages[from]} on: just that one, or (pull mode, the table has a key)
     * it and the batches that follow it with the same file schema, up to {@link #batchesPerLoad} (and no batch
     * more once they hold {@link #MAX_ROWS_PER_LOAD} rows). A batch that
     * starts with a truncate begins a group of its own; a batch whose rows keep unchanged values is loaded alone (its
     * values come from the rows loaded before it); a table without a key loads every batch alone, so that each
     * keeps the deduplication token of its own parts. A batch whose lowest row version is not above every version of
     * the group so far begins a new group (and a batch whose stage files do not name their versions is loaded alone):
     * the rows of one INSERT from several files arrive in no fixed order, and among rows of one key and one version
     * ReplacingMergeTree keeps the last inserted, so equal versions must reach ClickHouse in batch order. Batches loaded together once are loaded again as other
     * groups after a crash between the load and the record of it: every row then arrives twice with its version,
     * and the key and version make it one row in {@code FINAL}.
     */
    private List<Stage> group(List<Stage> stages, int from, Map<String, org.apache.avro.Schema> schemas) throws IOException {
        Stage first = stages.get(from);
        if (push || batchesPerLoad == 1 || from + 1 >= stages.size() || first.files().isEmpty()
                || first.batchId() <= loadAloneThrough) {
            return List.of(first);
        }
        org.apache.avro.Schema schema = null;
        List<Stage> group = new ArrayList<>();
        long rows = 0;
        java.math.BigInteger groupMax = null;
        for (int i = from; i < stages.size() && group.size() < batchesPerLoad && rows < MAX_ROWS_PER_LOAD; i++) {
            Stage stage = stages.get(i);
            if (i > from && stage.truncateBefore() || stage.files().isEmpty()) {
                break;
            }
            java.math.BigInteger[] range = versionRange(stage);
            if (range == null) {
                if (i == from) {
                    return List.of(first);
                }
                break;
            }
            if (groupMax != null && range[0].compareTo(groupMax) <= 0) {
                break;
            }
            boolean fits = true;
            for (StageFile file : stage.files()) {
                if (!store.exists(file.uri())) {
                    // staged again or missing: the batch on its own finds out which
                    fits = false;
                    break;
                }
                org.apache.avro.Schema fileSchema = schemaOf(file.uri(), schemas);
                if (schema == null) {
                    if (!StageSchema.lookupColumnsOf(fileSchema).isEmpty()
                            || StageSchema.columnsOf(fileSchema).stream().noneMatch(StageColumn::key)) {
                        return List.of(first);
                    }
                    schema = fileSchema;
                } else if (!schema.equals(fileSchema)) {
                    fits = false;
                    break;
                }
            }
            if (!fits) {
                break;
            }
            group.add(stage);
            rows += stage.rows();
            groupMax = groupMax == null ? range[1] : groupMax.max(range[1]);
        }
        if (group.size() > 1 && store.pullSource(uris(group)) == null) {
            return List.of(first);
        }
        return group.isEmpty() ? List.of(first) : group;
    }

    private static final java.util.regex.Pattern VERSIONS = java.util.regex.Pattern.compile("\\.v(\\d+)_(\\d+)\\.avro$");

    /**
     * The lowest and highest row version of a staged batch, from the names of its stage files
     * ({@code .v<min>_<max>.avro}, see {@link TableStager.ClosedBatch#objectName}); null when its files do not name
     * them (staged by an earlier release) or disagree.
     */
    static java.math.BigInteger[] versionRange(Stage stage) {
        java.math.BigInteger[] range = null;
        for (StageFile file : stage.files()) {
            java.util.regex.Matcher m = VERSIONS.matcher(file.uri());
            if (!m.find()) {
                return null;
            }
            java.math.BigInteger[] of = {new java.math.BigInteger(m.group(1)), new java.math.BigInteger(m.group(2))};
            if (range != null && !(range[0].equals(of[0]) && range[1].equals(of[1]))) {
                return null;
            }
            range = of;
        }
        return range;
    }

    private static List<String> uris(List<Stage> group) {
        List<String> uris = new ArrayList<>();
        for (Stage stage : group) {
            for (StageFile file : stage.files()) {
                uris.add(file.uri());
            }
        }
        return uris;
    }

    private static RowCounts countsOf(List<Stage> group) {
        if (group.size() == 1) {
            return group.get(0).counts();
        }
        long inserts = 0;
        long updates = 0;
        long deletes = 0;
        long clamped = 0;
        for (Stage stage : group) {
            inserts += stage.counts().inserts();
            updates += stage.counts().updates();
            deletes += stage.counts().deletes();
            clamped += stage.counts().clampedValues();
        }
        return new RowCounts(inserts, updates, deletes, clamped);
    }

    /**
     * The flow's incarnation in deduplication tokens: {@code @} and the time its catalog row was made, in microseconds
     * (empty for a flow the catalog does not register, such as another producer's topic). A flow started over (its
     * catalog rows gone, its batch ids counting from 1 again) gets another, so that ClickHouse, which remembers the
     * tokens of the last {@code clickhouse.deduplication.window} loads, does not skip its batches as repeats of the
     * earlier flow's batches of the same ids.
     */
    private String incarnationOf(String flow) {
        return catalog.flows().getFlow(flow)
                .map(f -> "@" + (f.createdAt().getEpochSecond() * 1_000_000L + f.createdAt().getNano() / 1_000))
                .orElse("");
    }

    /** {@link #incarnationOf} as of this run's start. */
    private String flowIncarnation = "";

    /**
     * The deduplication token of a group of batches loaded together: the same whenever the same group is loaded
     * again (a failed load retried by the next run before more batches arrived).
     */
    static String groupToken(String flow, String table, long firstBatchId, long lastBatchId, int files, long rows, int epoch) {
        return flow + "/" + table + "/batches-" + firstBatchId + "-to-" + lastBatchId + "/files-" + files + "/rows-" + rows
                + (epoch > 0 ? "/reload-" + epoch : "");
    }

    /**
     * The deduplication token of one part of a batch: the same whenever the same batch is loaded again, even after it
     * was staged again under other file names (a restart before its offsets were committed), so that a table
     * without a key does not get its rows twice.
     */
    static String token(String flow, String table, long batchId, int part, int parts, long rows, int epoch) {
        return flow + "/" + table + "/" + batchId + "/part-" + part + "-of-" + parts + "/rows-" + rows
                + (epoch > 0 ? "/reload-" + epoch : "");
    }

    private void load(Stage stage, int part, String attempt, int epoch, Map<String, org.apache.avro.Schema> schemas)
            throws Exception {
        StageFile file = stage.files().get(part);
        requirePresent(stage, file);
        org.apache.avro.Schema fileSchema = schemaOf(file.uri(), schemas);
        List<StageColumn> columns = StageSchema.columnsOf(fileSchema);
        List<StageColumn> lookupColumns = StageSchema.lookupColumnsOf(fileSchema);
        if (!lookupColumns.isEmpty() && push) {
            throw new IllegalStateException("table " + key.table() + ": batch " + stage.batchId()
                    + " has rows with unchanged (TOAST) values, which only normalize.mode=pull fills in from the final table");
        }
        String token = token(key.flow() + flowIncarnation, key.table(), stage.batchId(), part, stage.files().size(), file.rows(),
                epoch) + attempt;
        boolean loading = false;
        try {
            destination.ensureTable(key.table(), key.clickHouseTable(), columns);
            loading = true;
            if (push) {
                // the sink streams the file it opened itself: no file of the batch can be left out
                try (InputStream in = store.open(file.uri())) {
                    destination.loadPush(key.clickHouseTable(), columns, in, token);
                }
            } else {
                StageStore.PullSource source = store.pullSource(file.uri());
                long written = lookupColumns.isEmpty() ? destination.loadPull(key.clickHouseTable(), columns, source, token)
                        : destination.loadPullFilling(key.table(), key.clickHouseTable(), columns, lookupColumns, source, token);
                requireAllWritten(List.of(stage), written, file.rows(), source);
            }
        } catch (Exception e) {
            // the table may have been altered or dropped behind the sink's back: read its columns again next time
            destination.forget(key.clickHouseTable());
            if (loading && ClickHouseRefusals.refusesData(e)) {
                throw new BatchRefused(stage.batchId(), e);
            }
            throw e;
        }
    }

    /** One INSERT of every file of {@code group} (batches of one file schema, see {@link #group}). */
    private void loadTogether(List<Stage> group, String attempt, int epoch, Map<String, org.apache.avro.Schema> schemas)
            throws Exception {
        List<StageColumn> columns = null;
        long rows = 0;
        for (Stage stage : group) {
            for (StageFile file : stage.files()) {
                requirePresent(stage, file);
                if (columns == null) {
                    columns = StageSchema.columnsOf(schemaOf(file.uri(), schemas));
                }
                rows += file.rows();
            }
        }
        List<String> uris = uris(group);
        String token = groupToken(key.flow() + flowIncarnation, key.table(), group.get(0).batchId(), group.get(group.size() - 1).batchId(),
                uris.size(), rows, epoch) + attempt + afterShortfall;
        boolean loading = false;
        try {
            destination.ensureTable(key.table(), key.clickHouseTable(), columns);
            loading = true;
            StageStore.PullSource source = store.pullSource(uris);
            requireAllWritten(group, destination.loadPull(key.clickHouseTable(), columns, source, token), rows, source);
        } catch (Exception e) {
            destination.forget(key.clickHouseTable());
            if (loading && ClickHouseRefusals.refusesData(e)) {
                // which batch holds the refused data is not known: the next run loads these batches one at a time, so
                // that a refusal names its batch (BatchRefused)
                long lastBatchId = group.get(group.size() - 1).batchId();
                loadAloneThrough = Math.max(loadAloneThrough, lastBatchId);
                throw new IllegalStateException("ClickHouse refused the load of batches " + group.get(0).batchId() + " to "
                        + lastBatchId + " together; the next attempt loads them one at a time: "
                        + ErrorEpisode.describe(e), e);
            }
            throw e;
        }
    }

    /**
     * After a pull load of {@code staged} rows of {@code group}: ClickHouse reports {@code written} rows. Fewer is
     * either a repeat that its token deduplicated (ClickHouse may count those rows as written or not; ClickHouse 26.5
     * counts them) or stage files that hold fewer rows than staged: an object overwritten, or a file deleted after
     * {@link #requirePresent} and left out of a glob by a server that lists it (26.5 fails on the missing key instead).
     * The files are counted again to tell the two apart; a batch staged again meanwhile starts the run over, any other
     * shortfall fails the step, and nothing is recorded as loaded.
     */
    private void requireAllWritten(List<Stage> group, long written, long staged, StageStore.PullSource source)
            throws Exception {
        if (written >= staged) {
            return;
        }
        long inFiles = destination.rowsIn(source);
        if (inFiles >= staged) {
            log.debug("flow {}, table {}: {} of {} rows written for batch {}: the rest deduplicated by the load's token",
                    key.flow(), key.table(), written, staged, group.get(0).batchId());
            return;
        }
        for (Stage stage : group) {
            Stage now = catalog.stages().getStage(key.flow(), key.table(), stage.batchId()).orElse(null);
            if (now == null || !now.files().equals(stage.files())) {
                throw new Restaged(stage.batchId());
            }
        }
        long first = group.get(0).batchId();
        long last = group.get(group.size() - 1).batchId();
        if (group.size() > 1) {
            afterShortfall = "/after-shortfall-" + UUID.randomUUID();
        }
        throw new IllegalStateException("flow " + key.flow() + ", table " + key.table() + ": "
                + (first == last ? "batch " + first : "batches " + first + " to " + last) + ": ClickHouse wrote " + written
                + " rows and the stage files it reads hold " + inFiles + " of the " + staged + " rows staged (a stage file"
                + " is missing or short); not recorded as loaded");
    }

    private void requirePresent(Stage stage, StageFile file) throws IOException {
        if (!store.exists(file.uri())) {
            Stage now = catalog.stages().getStage(key.flow(), key.table(), stage.batchId()).orElse(null);
            if (now == null || !now.files().equals(stage.files())) {
                // staged again (a larger copy replaced it) or loaded by a run before: read the stage rows again
                throw new Restaged(stage.batchId());
            }
            throw new IOException("stage file " + file.uri() + " of batch " + stage.batchId() + " is missing from the stage store");
        }
    }

    private org.apache.avro.Schema schemaOf(String uri, Map<String, org.apache.avro.Schema> schemas) throws IOException {
        org.apache.avro.Schema schema = schemas.get(uri);
        if (schema == null) {
            schema = readSchema(uri);
            schemas.put(uri, schema);
        }
        return schema;
    }

    private org.apache.avro.Schema readSchema(String uri) throws IOException {
        try (InputStream in = store.open(uri);
             DataFileStream<GenericRecord> avro = new DataFileStream<>(in, new GenericDatumReader<>())) {
            return avro.getSchema();
        } catch (IOException e) {
            throw new IOException("stage file " + uri + " is not a readable Avro file: " + e.getMessage(), e);
        }
    }

    /**
     * Batches up to this id are loaded one at a time: ClickHouse refused a load of several batches together, and only a
     * batch's own load tells which one it refuses.
     */
    private volatile long loadAloneThrough;

    /**
     * ClickHouse refused the data of one batch ({@link ClickHouseRefusals#refusesData}): recorded in the catalog as that
     * batch's refusal, which {@code tablecdc-quarantine-batch} acts on.
     */
    static final class BatchRefused extends Exception {
        private static final long serialVersionUID = 1L;
        final long batchId;

        BatchRefused(long batchId, Exception cause) {
            // ClickHouse's own text, as for any other error (tablecdc-status shows its start); the batch is recorded
            // in the catalog beside it
            super(ErrorEpisode.describe(cause), cause);
            this.batchId = batchId;
        }
    }

    /** When this loop first found the table's normalize lease held by another owner (System.nanoTime), 0 when it holds it. */
    private volatile long leaseMissSince;

    /** Another owner holds the table's normalize lease, for less than twice its duration so far: the run waits. */
    private static final class LeaseWait extends RuntimeException {
        LeaseWait() {
            super(null, null, false, false);
        }
    }

    /** The stage row a run was loading changed under it: not an error, the run starts over at once. */
    private static final class Restaged extends RuntimeException {
        private final long batchId;

        Restaged(long batchId) {
            super(null, null, false, false);
            this.batchId = batchId;
        }
    }
}
