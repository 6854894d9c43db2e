package io.tablecdc.common.metrics;

import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongFunction;
import java.util.function.Supplier;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Per-table metrics of one Connect task, published through Kafka's plugin metrics (KIP-877, Kafka 4.1+): one
 * MBean per table, {@code kafka.connect:type=plugins,connector=<c>,task=<n>,flow=<flow>,table=<table>}, whose
 * attributes are listed in {@code docs/metrics.md}.
 *
 * <p>The code paths that already know a value push it here ({@link Table#batchSynced}, {@link Table#paused}, …);
 * a JMX read only reads fields, never the catalog. On a worker without plugin metrics everything still works and
 * publishes nothing (logged once at INFO).
 *
 * <pre>{@code
 * metrics = TableMetrics.forSource(() -> context.pluginMetrics(), flow);   // in SourceTask.start
 * metrics.table("public.orders").batchSynced(batchId, rows);             // once Kafka acknowledged the batch
 * }</pre>
 * The supplier must be a lambda returning {@code Object} as above (not a method reference): on a worker older than
 * Kafka 4.1 calling {@code pluginMetrics()} throws, and this class catches that inside the supplier.
 */
public final class TableMetrics implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(TableMetrics.class);
    private static final AtomicBoolean unavailableLogged = new AtomicBoolean();
    private static final AtomicBoolean registrationFailureLogged = new AtomicBoolean();

    /** Which side of the data path a task is on: decides which gauges a table gets. */
    public enum Role { SOURCE, SINK }

    private final Role role;
    private final String defaultFlow;
    private final MetricsBinding binding;
    private final Map<List<String>, Table> tables = new ConcurrentHashMap<>();

    TableMetrics(Role role, String defaultFlow, MetricsBinding binding) {
        this.role = role;
        this.defaultFlow = defaultFlow;
        this.binding = binding;
    }

    /** The metrics of a source task of {@code flow}; {@code pluginMetrics} is {@code () -> context.pluginMetrics()}. */
    public static TableMetrics forSource(Supplier<Object> pluginMetrics, String flow) {
        return new TableMetrics(Role.SOURCE, flow, bind(pluginMetrics, "source " + flow));
    }

    /** The metrics of a sink task, whose tables may belong to several flows; see {@link #forSource}. */
    public static TableMetrics forSink(Supplier<Object> pluginMetrics, String connector) {
        return new TableMetrics(Role.SINK, null, bind(pluginMetrics, "sink " + connector));
    }

    static MetricsBinding bind(Supplier<Object> pluginMetrics, String who) {
        String why;
        try {
            Object metrics = pluginMetrics.get();
            if (metrics != null) {
                return PluginMetricsBinding.of(metrics);
            }
            why = "the worker gave no plugin metrics";
        } catch (NoSuchMethodError | NoClassDefFoundError e) {
            why = "the Connect worker predates plugin metrics (Kafka 4.1)";
        } catch (UnsupportedOperationException e) {
            why = "the worker does not support plugin metrics";
        }
        if (unavailableLogged.compareAndSet(false, true)) {
            log.info("{}: per-table metrics are off: {}", who, why);
        }
        return null;
    }

    /** True when the gauges are published (the worker has plugin metrics). */
    public boolean enabled() {
        return binding != null;
    }

    /** A table of this source task's flow; its gauges are registered on first call (and after {@link #remove}). */
    public Table table(String table) {
        if (defaultFlow == null) {
            throw new IllegalStateException("sink metrics need the flow of table " + table);
        }
        return table(defaultFlow, table);
    }

    /**
     * The metrics of {@code table} of {@code flow}, registered on first call and again after {@link #remove}. The
     * returned object stays the same for the (flow, table) for the life of this instance, so a loop may keep it.
     */
    public Table table(String flow, String table) {
        Table t = tables.computeIfAbsent(List.of(flow, table), k -> new Table(role, flow, table));
        t.register(binding);
        return t;
    }

    /**
     * Unregisters a table's gauges (the table left this task) and returns its values, or null for a table never
     * seen. Updates to its {@link Table} are still accepted and kept; they are published again if {@link #table} is
     * called for it.
     */
    public Table remove(String flow, String table) {
        Table t = tables.get(List.of(flow, table));
        if (t != null) {
            t.unregister(binding);
        }
        return t;
    }

    /** Unregisters every table's gauges (the task stops; the worker would drop them anyway). */
    @Override
    public void close() {
        for (Table t : tables.values()) {
            t.unregister(binding);
        }
    }

    /**
     * One table's values. Every method is cheap and thread-safe: the task thread, a normalize thread and the
     * producer's callback thread may call it while JMX reads it.
     */
    public static final class Table {
        /** {@link #lagSeconds} before anything is known about the table. */
        public static final double UNKNOWN = Double.NaN;

        private final Role role;
        private final String flow;
        private final String table;
        private final AtomicLong rows = new AtomicLong();
        private final AtomicLong batches = new AtomicLong();
        private final AtomicLong batchId = new AtomicLong();
        private final AtomicLong rowsNormalized = new AtomicLong();
        private final AtomicLong batchesNormalized = new AtomicLong();
        private final AtomicLong loads = new AtomicLong();
        private final AtomicLong normalizedBatchId = new AtomicLong();
        /** Sink: values stored at the edge of ClickHouse's range (dates and timestamps it cannot hold). */
        private final AtomicLong valuesClamped = new AtomicLong();
        /** Source: the newest time the table is known replicated up to (epoch ms); 0: unknown. */
        private final AtomicLong upToMs = new AtomicLong();
        /** Sink: staged batches not yet normalized, batch id to staging time (epoch ms). */
        private final ConcurrentSkipListMap<Long, Long> waiting = new ConcurrentSkipListMap<>();
        private final Set<String> openEpisodes = ConcurrentHashMap.newKeySet();
        private final AtomicLong episodes = new AtomicLong();
        private volatile String pausedReason;
        /** Postgres source: WAL bytes the private slot of this detached table keeps; -1 when not detached. */
        private final AtomicLong detachedWalBytes = new AtomicLong(-1);
        /** BigQuery source: bytes BigQuery reported the table's window and snapshot queries processed. */
        private final AtomicLong bytesProcessed = new AtomicLong();
        private List<Object> handles;

        Table(Role role, String flow, String table) {
            this.role = role;
            this.flow = flow;
            this.table = table;
        }

        // ---------------------------------------------------------------------------------------- source

        /** Source: a batch of {@code rows} records is durably in Kafka (every record acknowledged). */
        public void batchSynced(long id, long rowCount) {
            rows.addAndGet(rowCount);
            batches.incrementAndGet();
            batchId.accumulateAndGet(id, Math::max);
        }

        /**
         * Source: the table is replicated into Kafka up to {@code time} (the newest committed watermark or commit
         * time, or the end of windows read and found empty). Only ever raised.
         */
        public void syncedUpTo(Instant time) {
            if (time != null) {
                upToMs.accumulateAndGet(time.toEpochMilli(), Math::max);
            }
        }

        /**
         * Source: the catalog's synced batch id (sink: staged) is {@code id}, read at start, so that the id does not
         * read 0 until the task's first batch. Not counted as a batch.
         */
        public void batchIdKnown(long id) {
            batchId.accumulateAndGet(id, Math::max);
        }

        // ---------------------------------------------------------------------------------------- sink

        /** Sink: batch {@code id} of {@code rows} rows is staged (files uploaded, stage row written). */
        public void batchStaged(long id, long rowCount, Instant stagedAt) {
            rows.addAndGet(rowCount);
            batches.incrementAndGet();
            batchId.accumulateAndGet(id, Math::max);
            if (id > normalizedBatchId.get()) {
                waiting.put(id, stagedAt.toEpochMilli());
            }
        }

        /** Sink: batch {@code id}, staged at {@code stagedAt} (before this task started, say), waits for normalize. */
        public void batchWaiting(long id, Instant stagedAt) {
            batchId.accumulateAndGet(id, Math::max);
            if (id > normalizedBatchId.get() && stagedAt != null) {
                waiting.putIfAbsent(id, stagedAt.toEpochMilli());
            }
        }

        /** Sink: batch {@code id} of {@code rows} rows is loaded into ClickHouse. */
        public void batchNormalized(long id, long rowCount) {
            rowsNormalized.addAndGet(rowCount);
            batchesNormalized.incrementAndGet();
            normalizedUpTo(id);
        }

        /** Sink: one INSERT loaded one batch, or several that waited together. */
        public void loaded() {
            loads.incrementAndGet();
        }

        public long loads() {
            return loads.get();
        }

        /** Sink: the catalog's normalized batch id is {@code id} (read at start, or a batch loaded before a crash). */
        public void normalizedUpTo(long id) {
            normalizedBatchId.accumulateAndGet(id, Math::max);
            // what is normalized was staged
            batchId.accumulateAndGet(id, Math::max);
            waiting.headMap(id, true).clear();
        }

        /** Postgres source: the WAL the table's private slot keeps while it is detached; -1 once it is not. */
        public void detachedWal(long bytes) {
            detachedWalBytes.set(bytes);
        }

        public long detachedWalBytes() {
            return detachedWalBytes.get();
        }

        /** BigQuery source: a window or snapshot query of the table processed {@code bytes} (as BigQuery reports). */
        public void bytesProcessed(long bytes) {
            if (bytes > 0) {
                bytesProcessed.addAndGet(bytes);
            }
        }

        public long bytesProcessed() {
            return bytesProcessed.get();
        }

        // ---------------------------------------------------------------------------------------- both

        /** The table is held by back-pressure for {@code reason} (the catalog's {@code paused_reason}). */
        public void paused(String reason) {
            pausedReason = reason;
        }

        public void resumed() {
            pausedReason = null;
        }

        /**
         * An error episode of {@code kind} (e.g. {@code normalize}, {@code stage}, {@code poll}) began: counted once
         * however many retries fail within it.
         */
        public void errorEpisodeStarted(String kind) {
            if (openEpisodes.add(kind)) {
                episodes.incrementAndGet();
            }
        }

        /** The episode of {@code kind} ended with a success. */
        public void errorEpisodeEnded(String kind) {
            openEpisodes.remove(kind);
        }

        // ---------------------------------------------------------------------------------------- reads

        /**
         * Source: seconds from the time the table is replicated up to until {@code nowMs} ({@link #UNKNOWN} before
         * that time is known). Sink: the age of the oldest staged batch not yet normalized, 0 when none waits.
         */
        public double lagSeconds(long nowMs) {
            if (role == Role.SINK) {
                long oldest = Long.MAX_VALUE;
                for (long stagedAt : waiting.values()) {
                    oldest = Math.min(oldest, stagedAt);
                }
                return oldest == Long.MAX_VALUE ? 0.0 : Math.max(0, nowMs - oldest) / 1000.0;
            }
            long upTo = upToMs.get();
            return upTo == 0 ? UNKNOWN : Math.max(0, nowMs - upTo) / 1000.0;
        }

        public long rows() {
            return rows.get();
        }

        public long batches() {
            return batches.get();
        }

        /** Source: the synced batch id; sink: the staged batch id. */
        public long batchId() {
            return batchId.get();
        }

        public long normalizedBatchId() {
            return normalizedBatchId.get();
        }

        /** Sink: {@code count} values of a staged batch were stored at the edge of ClickHouse's range. */
        public void valuesClamped(long count) {
            valuesClamped.addAndGet(count);
        }

        public long valuesClamped() {
            return valuesClamped.get();
        }

        public long rowsNormalized() {
            return rowsNormalized.get();
        }

        public long batchesNormalized() {
            return batchesNormalized.get();
        }

        public int batchesWaiting() {
            return waiting.size();
        }

        public String pausedReason() {
            return pausedReason;
        }

        public long errorEpisodes() {
            return episodes.get();
        }

        public boolean inError() {
            return !openEpisodes.isEmpty();
        }

        // ---------------------------------------------------------------------------------------- registration

        /** The gauges of this table's role: name, description, value. JMX reads them as attributes. */
        List<Gauge> gauges() {
            List<Gauge> gauges = new ArrayList<>();
            if (role == Role.SOURCE) {
                gauges.add(new Gauge("rows-synced-total", "rows of this table acknowledged by Kafka since the task started",
                        now -> (double) rows()));
                gauges.add(new Gauge("batches-synced-total", "batches of this table acknowledged by Kafka since the task started",
                        now -> (double) batches()));
                gauges.add(new Gauge("synced-batch-id", "the last batch of this table durably in Kafka (0: none since the task started)",
                        now -> (double) batchId()));
                gauges.add(new Gauge("lag-seconds", "seconds since the newest point in time this table is replicated into Kafka up to",
                        this::lagSeconds));
                gauges.add(new Gauge("detached-wal-bytes", "Postgres: bytes of WAL the private slot of this table keeps while"
                        + " it is detached from the flow's shared slot (checked every 10 s); -1 when it is not detached",
                        now -> (double) detachedWalBytes()));
                gauges.add(new Gauge("bytes-processed-total", "BigQuery: bytes BigQuery reported the window and snapshot queries"
                        + " of this table processed since the task started (what on-demand pricing bills, before its minimum"
                        + " per query); 0 for Postgres", now -> (double) bytesProcessed()));
            } else {
                gauges.add(new Gauge("rows-staged-total", "rows of this table staged since the task started", now -> (double) rows()));
                gauges.add(new Gauge("batches-staged-total", "batches of this table staged since the task started",
                        now -> (double) batches()));
                gauges.add(new Gauge("staged-batch-id", "the last batch of this table staged", now -> (double) batchId()));
                gauges.add(new Gauge("rows-normalized-total", "rows of this table loaded into ClickHouse since the task started",
                        now -> (double) rowsNormalized()));
                gauges.add(new Gauge("batches-normalized-total", "batches of this table loaded into ClickHouse since the task started",
                        now -> (double) batchesNormalized()));
                gauges.add(new Gauge("normalize-loads-total", "INSERT statements that loaded batches of this table since the task"
                        + " started: fewer than batches-normalized-total when batches that waited were loaded together",
                        now -> (double) loads()));
                gauges.add(new Gauge("normalized-batch-id", "the last batch of this table loaded into ClickHouse",
                        now -> (double) normalizedBatchId()));
                gauges.add(new Gauge("batches-waiting", "staged batches of this table not yet loaded into ClickHouse",
                        now -> (double) batchesWaiting()));
                gauges.add(new Gauge("lag-seconds", "age in seconds of the oldest staged batch not yet loaded; 0 when none waits",
                        this::lagSeconds));
                gauges.add(new Gauge("values-clamped-total", "values of this table staged since the task started that ClickHouse"
                        + " cannot hold (dates and timestamps outside its range), stored at the range's edge",
                        now -> (double) valuesClamped()));
            }
            gauges.add(new Gauge("paused", "1 while back-pressure holds this table, else 0",
                    now -> pausedReason == null ? 0.0 : 1.0));
            gauges.add(new Gauge("paused-reason", "why this table is paused (the catalog's paused_reason); empty when running",
                    now -> pausedReason == null ? "" : pausedReason));
            gauges.add(new Gauge("in-error", "1 while an error episode of this table is open, else 0",
                    now -> inError() ? 1.0 : 0.0));
            gauges.add(new Gauge("error-episodes-total", "error episodes of this table begun since the task started",
                    now -> (double) errorEpisodes()));
            return gauges;
        }

        synchronized void register(MetricsBinding binding) {
            if (binding == null || handles != null) {
                return;
            }
            LinkedHashMap<String, String> tags = new LinkedHashMap<>();
            tags.put("flow", flow);
            tags.put("table", table);
            List<Object> added = new ArrayList<>();
            try {
                for (Gauge gauge : gauges()) {
                    added.add(binding.add(gauge.name(), gauge.description(), tags, gauge.value()));
                }
            } catch (RuntimeException e) {
                // e.g. the same table registered twice in one task: metrics are not worth failing the task for
                if (registrationFailureLogged.compareAndSet(false, true)) {
                    log.warn("flow {}, table {}: registering its metrics failed: {}", flow, table, e.toString());
                }
            }
            handles = added;
        }

        synchronized void unregister(MetricsBinding binding) {
            if (binding == null || handles == null) {
                return;
            }
            for (Object handle : handles) {
                try {
                    binding.remove(handle);
                } catch (RuntimeException e) {
                    // the worker closed the plugin metrics first (task stopping): they are gone already
                    log.debug("flow {}, table {}: removing metric {} failed: {}", flow, table, handle, e.toString());
                }
            }
            handles = null;
        }
    }

    /** One gauge of a table. */
    record Gauge(String name, String description, LongFunction<Object> value) {
    }
}
