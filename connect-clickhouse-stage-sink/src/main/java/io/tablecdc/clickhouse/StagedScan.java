package io.tablecdc.clickhouse;

import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;

import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.catalog.Catalog;

/**
 * A sink task's lookups of the staged batches of its assigned tables, which start the normalize loops of tables that
 * have batches staged before a restart or a rebalance, so that they load even if no new record arrives.
 */
final class StagedScan {
    /** Its lines are the sink task's, under the sink task's name. */
    private static final Logger log = LoggerFactory.getLogger(ClickHouseStageSinkTask.class);
    static final long SCAN_RETRY_MS = 2_000;
    static final long RESCAN_MS = 30_000;

    /** The task's table of (flow, table, topic). */
    interface Tables {
        TableSink table(String flow, String table, String topic);
    }

    private final String connectorName;
    /** The catalog once the task could open it (null before). */
    private final Supplier<Catalog> catalog;
    /** The task's assigned partitions. */
    private final Supplier<Collection<TopicPartition>> assignment;
    private final Tables tables;
    private final NormalizeLoops loops;
    /** Topics of assigned partitions whose staged batches were not looked up yet. */
    private final Set<String> unscannedTopics = new HashSet<>();
    private long scanRetryAtMs;
    private long rescanAtMs;
    private int scanFailures;

    StagedScan(String connectorName, Supplier<Catalog> catalog, Supplier<Collection<TopicPartition>> assignment, Tables tables,
               NormalizeLoops loops) {
        this.connectorName = connectorName;
        this.catalog = catalog;
        this.assignment = assignment;
        this.tables = tables;
        this.loops = loops;
    }

    /** Newly assigned partitions: their topics are looked up at the next {@link #scan}. */
    void assigned(Collection<TopicPartition> partitions) {
        partitions.forEach(tp -> unscannedTopics.add(tp.topic()));
    }

    /** A revoked partition: its topic is no longer looked up. */
    void revoked(TopicPartition tp) {
        unscannedTopics.remove(tp.topic());
    }

    /**
     * Starts (or wakes) the normalize loops of the assigned tables that have staged batches: those of newly assigned
     * partitions until one lookup of them succeeded (retried from the task's {@code put} every {@value #SCAN_RETRY_MS} ms while
     * the catalog does not answer), and every {@value #RESCAN_MS} ms those of every assigned partition. A table whose
     * source sends nothing more (a detached Postgres table, a quiet one, a BigQuery table at its
     * {@code max.unnormalized.batches}) has no record to start its loop: without this, its batches staged before a
     * restart or rebalance during a catalog outage were never loaded, and its source waited for them for ever.
     */
    void scan(long now) {
        Catalog catalog = this.catalog.get();
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
                assignment.get().forEach(tp -> topics.add(tp.topic()));
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
            TableSink table = tables.table(row[0], row[1], row[2]);
            TableKey key = table.key;
            try {
                // the staged batches are loaded into the table this task's settings name now
                if (!table.claimBacklog(row[2])) {
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
            table.loop().wake();
        }
    }
}
