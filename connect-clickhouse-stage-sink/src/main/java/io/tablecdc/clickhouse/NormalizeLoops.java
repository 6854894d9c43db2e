package io.tablecdc.clickhouse;

import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.catalog.Catalog;
import io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig;
import io.tablecdc.clickhouse.destination.ClickHouseDestination;
import io.tablecdc.clickhouse.stage.StageStore;
import io.tablecdc.common.metrics.TableMetrics;

/**
 * A sink task's normalize loops, one per table whose partition it owns ({@link TableNormalizer}), their threads and
 * lease timer. The task stages; these load.
 */
final class NormalizeLoops {
    /** Its lines are the sink task's, under the sink task's name. */
    private static final Logger log = LoggerFactory.getLogger(ClickHouseStageSinkTask.class);
    /** How long close() waits for a revoked table's normalize step in flight. */
    static final long CLOSE_WAIT_MS = 10_000;

    private final ClickHouseStageSinkConfig config;
    private final String connectorName;
    /** The catalog once the task could open it (the loops start after that). */
    private final Supplier<Catalog> catalog;
    private final StageStore store;
    private final ClickHouseDestination destination;
    private final TableMetrics metrics;
    private final ScheduledExecutorService normalizePool;
    /** Renews the normalize leases of this task's loops while they run. */
    private final ScheduledExecutorService leaseTimer;
    /**
     * The start of the names this task's normalize loops hold their tables' leases under: each loop adds a number of
     * its own, so that a loop stopped by a rebalance whose step ends late cannot release (or renew) the lease of the
     * loop that took the table over on this task after an eager rebalance gave it back.
     */
    private final String leaseOwner;
    private final java.util.concurrent.atomic.AtomicLong loopsMade = new java.util.concurrent.atomic.AtomicLong();
    private final Map<TableKey, TableNormalizer> normalizers = new ConcurrentHashMap<>();

    NormalizeLoops(ClickHouseStageSinkConfig config, String connectorName, Supplier<Catalog> catalog, StageStore store,
                   ClickHouseDestination destination, TableMetrics metrics) {
        this.config = config;
        this.connectorName = connectorName;
        this.catalog = catalog;
        this.store = store;
        this.destination = destination;
        this.metrics = metrics;
        this.normalizePool = Executors.newScheduledThreadPool(config.normalizeParallelism(), r -> {
            Thread t = new Thread(r, "tablecdc-normalize-" + connectorName);
            t.setDaemon(true);
            return t;
        });
        this.leaseTimer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "tablecdc-normalize-lease-" + connectorName);
            t.setDaemon(true);
            return t;
        });
        this.leaseOwner = connectorName + "/" + UUID.randomUUID().toString().substring(0, 8);
    }

    /** The table's normalize loop, started (and woken for batches staged before a restart) on first use. */
    TableNormalizer of(TableKey key) {
        return normalizers.computeIfAbsent(key, k -> {
            TableNormalizer normalizer = new TableNormalizer(k, catalog.get(), store, destination, config.pushMode(), normalizePool,
                    config.normalizeBackoffInitialMs(), config.normalizeBackoffMaxMs(), metrics.table(k.flow(), k.table()),
                    leaseOwner + "#" + loopsMade.incrementAndGet(), config.normalizeLease(), leaseTimer,
                    config.normalizeBatchesPerLoad());
            // batches staged before a restart are loaded first
            normalizer.wake();
            return normalizer;
        });
    }

    /** Whether the table has a normalize loop on this task. */
    boolean has(TableKey key) {
        return normalizers.containsKey(key);
    }

    /**
     * The table left this task: its normalize loop is told to stop and returned (null when it had none), to be waited
     * for ({@link #awaitStopped}); the table's next owner starts its own once its lease is free.
     */
    TableNormalizer remove(TableKey key) {
        TableNormalizer normalizer = normalizers.remove(key);
        if (normalizer != null) {
            normalizer.stop();
        }
        return normalizer;
    }

    /** Waits, together rather than one after another and at most {@value #CLOSE_WAIT_MS} ms, for removed loops' steps in flight. */
    void awaitStopped(Map<TableKey, TableNormalizer> stopping) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLOSE_WAIT_MS);
        for (var entry : stopping.entrySet()) {
            TableKey key = entry.getKey();
            try {
                long left = Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
                if (!entry.getValue().stopAndWait(left)) {
                    log.info("sink {}: flow {}, table {} left this task while a normalize step was in flight; it keeps"
                            + " the table's normalize lease until that step ends", connectorName, key.flow(), key.table());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
    }

    /** The task stops: every loop stops (its step in flight waited for, within the same bound), then the threads. */
    void stop() {
        for (TableNormalizer normalizer : normalizers.values()) {
            normalizer.stop();
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLOSE_WAIT_MS);
        for (TableNormalizer normalizer : normalizers.values()) {
            try {
                normalizer.stopAndWait(Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        normalizePool.shutdownNow();
        try {
            normalizePool.awaitTermination(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        leaseTimer.shutdownNow();
    }
}
