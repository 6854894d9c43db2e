package io.tablecdc.clickhouse;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
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
import io.tablecdc.clickhouse.stage.StageStore;
import io.tablecdc.clickhouse.stage.StageStores;
import io.tablecdc.common.Backoff;
import io.tablecdc.common.Resources;
import io.tablecdc.common.Version;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogUnavailableException;
import io.tablecdc.catalog.SinkLeases;
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
 * <p>The task routes: each record to its table's {@link TableSink} (which owns everything about one table: its
 * destination claim, open batch, upload, hold, errant rows and normalize loop), and each partition's offsets. Only this
 * task's thread calls them; the normalize loops run on {@link NormalizeLoops}' threads.
 */
public class ClickHouseStageSinkTask extends SinkTask {
    private static final Logger log = LoggerFactory.getLogger(ClickHouseStageSinkTask.class);
    /** What an error that fails the task under errors.tolerance=none adds: how to go on without the record. */
    private static final String STOPS = "; errors.tolerance=none stops the task at such a record: to go on without it, set"
            + " errors.tolerance=all (with errors.deadletterqueue.topic.name to keep it), and the task reads its batch again";

    private ClickHouseStageSinkConfig config;
    private String connectorName;
    private volatile Catalog catalog;
    /** While the catalog could not be reached (at start, or since): when to try again. */
    private final Backoff catalogBackoff = new Backoff(1_000, 60_000);
    private long catalogRetryAtMs;
    private StageStore store;
    private ClickHouseDestination destination;
    /** The normalize loop of each table of this task. */
    private NormalizeLoops loops;
    private ErrantRecordReporter reporter;
    /** {@code errors.tolerance=all}: a record that cannot be staged is reported (or, with no reporter, logged) and skipped. */
    private boolean tolerateAll;
    private TableMetrics metrics;
    /** What every table of this task shares. */
    private TableSink.Shared shared;

    /** Every table this task met, for the task's life ({@link TableSink#leave} drops what a revoked table had staged). */
    private final Map<TableKey, TableSink> tables = new HashMap<>();
    /** Each table by (flow, table, topic): built once rather than per record. */
    private final Map<List<String>, TableSink> routes = new HashMap<>();
    private final RecordRows recordRows = new RecordRows();
    private final Map<TopicPartition, Long> nextOffsets = new HashMap<>();
    private final Map<TopicPartition, TableKey> tableOfPartition = new HashMap<>();
    /** Starts the normalize loops of assigned tables with batches staged before. */
    private StagedScan stagedScan;
    /** The tables whose sink hold this task renews ({@link TableSink.Shared#held}). */
    private final Set<TableKey> held = ConcurrentHashMap.newKeySet();
    /** Renews this task's sink holds in the catalog ({@link SinkLeases#SINK_HOLD}), whatever the task's thread does. */
    private ScheduledExecutorService holdRenewer;
    /**
     * Held while holds are renewed or given up: a renewal reads {@link #held} and writes inside it, so that one in flight
     * never takes a hold again after the task gave it up (a table left {@link #held} before its hold is given up).
     */
    private final Object holdLock = new Object();

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
        Path localDir;
        try {
            localDir = config.stageLocalDir().isBlank()
                    ? Files.createTempDirectory("tablecdc-stage-")
                    : Files.createDirectories(Path.of(config.stageLocalDir()));
        } catch (IOException e) {
            throw new ConnectException("sink " + connectorName + ": cannot create the local stage folder: " + e.getMessage(), e);
        }
        DestinationNames names = new DestinationNames(config, connectorName, destination);
        names.askAtStart();
        tolerateAll = "all".equalsIgnoreCase(props.getOrDefault("errors.tolerance", "none").trim());
        try {
            reporter = context.errantRecordReporter();
        } catch (NoSuchMethodError | NoClassDefFoundError e) {
            reporter = null;
        }
        shared = new TableSink.Shared(config, connectorName, () -> catalog, store, loops, metrics, localDir, names,
                new TableSink.Task() {
                    @Override
                    public void bind(TopicPartition tp, TableKey key) {
                        tableOfPartition.put(tp, key);
                    }

                    @Override
                    public void pause(TableKey key) {
                        ClickHouseStageSinkTask.this.pause(key);
                    }

                    @Override
                    public void resume(TableKey key) {
                        ClickHouseStageSinkTask.this.resume(key);
                    }

                    @Override
                    public void pause(TopicPartition tp) {
                        try {
                            context.pause(tp);
                        } catch (IllegalStateException notAssigned) {
                            // open(): the table's records come through another topic (a router); its next record is held instead
                            log.debug("pausing {} failed: {}", tp, notAssigned.toString());
                        }
                    }

                    @Override
                    public void resume(TopicPartition tp) {
                        try {
                            context.resume(tp);
                        } catch (IllegalStateException notAssigned) {
                            log.debug("resuming {} failed: {}", tp, notAssigned.toString());
                        }
                    }

                    @Override
                    public void timeout(long ms) {
                        context.timeout(ms);
                    }
                }, this::report, ConcurrentHashMap.newKeySet(), held);
        holdRenewer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread thread = new Thread(r, "tablecdc-sink-holds-" + connectorName);
            thread.setDaemon(true);
            return thread;
        });
        long every = SinkLeases.SINK_HOLD.toMillis() / 4;
        holdRenewer.scheduleWithFixedDelay(this::renewHolds, every, every, TimeUnit.MILLISECONDS);
        stagedScan = new StagedScan(connectorName, () -> catalog, () -> context.assignment(), this::table, loops);
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

    /**
     * Renews this task's hold on its tables, so that no other sink takes them while it runs; a failure (the catalog
     * unreachable) is tried again at the next round, well before the hold runs out.
     */
    private void renewHolds() {
        synchronized (holdLock) {
            renewHeld();
        }
    }

    private void renewHeld() {
        Catalog open = catalog;
        List<TableKey> keys = List.copyOf(held);
        if (open == null || keys.isEmpty()) {
            return;
        }
        try {
            open.sink().renewSinkHolds(connectorName, keys.stream().map(TableKey::flow).toList(),
                    keys.stream().map(TableKey::table).toList(), SinkLeases.SINK_HOLD);
        } catch (RuntimeException e) {
            log.warn("sink {}: renewing its hold on {} tables in the catalog failed (tried again in {} s): {}", connectorName,
                    keys.size(), SinkLeases.SINK_HOLD.toSeconds() / 4, e.getMessage());
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
        for (TableSink table : tables.values()) {
            table.retryUpload(now);
            table.recheckRefusal(now);
        }
        stagedScan.scan(now);
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
                boolean block = headers.block() != null;
                List<TableSink.Row> rows = block ? recordRows.blockRows(record, headers) : RecordRows.rowOf(record, headers);
                if (!tableOf(record, headers).take(record, rows, block, tp, now)) {
                    // the table is held at a batch boundary: read this record again once it resumes
                    context.offset(tp, record.kafkaOffset());
                    held.add(tp);
                    continue;
                }
            } catch (TypeMappingException | IllegalArgumentException | ClassCastException e) {
                // the record cannot be taken at all (its headers, its block, its table's topic binding)
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
        for (TableSink table : tables.values()) {
            try {
                table.closeIfDue(now);
            } catch (IOException e) {
                throw new ConnectException("sink " + connectorName + ": closing a stage file of " + table.key + " failed: " + e.getMessage(), e);
            }
        }
        for (TableSink table : tables.values()) {
            table.releaseIfDrained();
        }
    }


    /** The table of a record (records of other producers: the table named by their topic). */
    private TableSink tableOf(SinkRecord record, SinkHeaders headers) {
        boolean tablecdc = headers.present();
        String flow = tablecdc ? headers.flow() : null;
        return table(flow != null ? flow : connectorName, tablecdc ? headers.table() : record.topic(), record.topic());
    }

    private TableSink table(String flow, String table, String topic) {
        return routes.computeIfAbsent(List.of(flow, table, topic), k -> tables.computeIfAbsent(
                new TableKey(flow, table, config.clickHouseTable(table, topic)), key -> new TableSink(key, shared)));
    }

    /**
     * A record that went to the errant record reporter whole: when it carried {@code tablecdc.batch.last=true}, its
     * table's open batch of that id is complete all the same (without it), and is closed and staged.
     */
    private void closeBatchOfErrantLast(SinkRecord record, SinkHeaders headers) throws IOException {
        if (!headers.present() || headers.notText() != null) {
            return;
        }
        TableSink table = routes.get(List.of(headers.flow() != null ? headers.flow() : connectorName, headers.table(), record.topic()));
        if (table != null) {
            table.closeBatchOfErrantLast(headers);
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

    /**
     * Hands a record that cannot be staged to Connect's errant record reporter, which sends it to the dead letter queue
     * and the error log as configured and, under {@code errors.tolerance=none}, then fails the task. Connect gives a
     * sink no reporter when neither {@code errors.deadletterqueue.topic.name} nor {@code errors.log.enable} is set: the
     * record is then logged and skipped under {@code errors.tolerance=all}, and fails the task under {@code none}.
     */
    private void report(SinkRecord record, Exception error) {
        String message = "sink " + connectorName + ": record " + record.topic() + "-" + record.kafkaPartition() + "@"
                + record.kafkaOffset() + " cannot be staged: " + error.getMessage();
        if (reporter == null) {
            if (tolerateAll) {
                log.warn("{}; errors.tolerance=all without a dead letter queue (errors.deadletterqueue.topic.name): the record"
                        + " is skipped", message);
                return;
            }
            throw new ConnectException(message + STOPS, error);
        }
        try {
            reporter.report(record, new ConnectException(message, error)).get(60, TimeUnit.SECONDS);
        } catch (ConnectException e) {
            // errors.tolerance=none: Connect reported the record (dead letter queue, error log), then refuses to go on
            throw new ConnectException(message + (tolerateAll ? "" : STOPS) + " (" + e.getMessage() + ")", e);
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
            for (TableSink table : tables.values()) {
                Long first = table.firstUnstagedOffset(tp);
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
        stagedScan.assigned(partitions);
        stagedScan.scan(System.currentTimeMillis());
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
            stagedScan.revoked(tp);
        }
        List<TableKey> releasing = affected.stream().filter(held::contains).toList();
        for (TableKey key : affected) {
            TableSink table = tables.get(key);
            // its normalize loop goes with it: the table's next owner starts its own once this one's lease is free
            TableNormalizer normalizer = table == null ? null : table.leave();
            if (normalizer != null) {
                stopping.put(key, normalizer);
            }
        }
        // every loop was told to stop above; wait for their steps in flight together, not one after another
        loops.awaitStopped(stopping);
        // the sink's hold on them goes too (Connect closes every partition before it stops a task)
        releaseHolds(releasing);
    }

    @Override
    public void stop() {
        if (holdRenewer != null) {
            holdRenewer.shutdownNow();
        }
        List<TableKey> holding = List.copyOf(held);
        held.clear();
        releaseHolds(holding);
        if (metrics != null) {
            metrics.close();
        }
        if (loops != null) {
            loops.stop();
        }
        // open batches and batches waiting for their upload are dropped (their records come again), with their local files
        tables.values().forEach(TableSink::stop);
        Resources.closeQuietly(destination, "the ClickHouse client");
        Resources.closeQuietly(store, "the stage store");
        Resources.closeQuietly(catalog, "the catalog");
    }

    /**
     * Gives up this task's sink hold on {@code keys} (tables it stops loading: revoked, or the task stops), so that
     * another sink may take them at once.
     */
    private void releaseHolds(List<TableKey> keys) {
        if (catalog == null || keys.isEmpty()) {
            return;
        }
        synchronized (holdLock) {
            releaseHeld(keys);
        }
    }

    private void releaseHeld(List<TableKey> keys) {
        try {
            catalog.sink().releaseSinkHolds(connectorName, keys.stream().map(TableKey::flow).toList(),
                    keys.stream().map(TableKey::table).toList());
        } catch (RuntimeException e) {
            log.info("sink {}: giving up its hold on {} tables failed; it runs out within {} s: {}", connectorName,
                    keys.size(), SinkLeases.SINK_HOLD.toSeconds(), e.getMessage());
        }
    }
}
