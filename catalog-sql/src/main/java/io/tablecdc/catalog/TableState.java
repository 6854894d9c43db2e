package io.tablecdc.catalog;

import java.time.Instant;

/**
 * A {@code cdc_table_replication_state} row: one table of one flow.
 *
 * @param flow                the flow
 * @param table               the source table's fully qualified name
 * @param cursor              mirror of the table's Connect offset cursor ({@code ""} before the first sync)
 * @param lastAttemptAt       last poll attempt (query CDC)
 * @param lastSyncedAt        last time a batch or cursor was recorded as durable in Kafka
 * @param lastNormalizedAt    last time the normalized batch id advanced
 * @param syncedBatchId       last batch durably in Kafka (0: none)
 * @param normalizedBatchId   last batch loaded into ClickHouse (0: none)
 * @param syncedRows          rows of all synced batches
 * @param phase               Postgres pipeline phase; null for query CDC tables
 * @param phaseLsn            the LSN of {@code catchup(lsn)} / {@code ready(lsn)}
 * @param copyAttempt         copy attempts so far
 * @param copyLeaseOwner      the copy task holding the table while {@code copying}
 * @param copyLeaseUntil      when that lease expires (catalog clock)
 * @param pausedReason        why the table is paused now; null when running
 * @param pausedAt            when the current pause began
 * @param lastError           the current error episode's last error; null when healthy
 * @param lastErrorAt         when it happened
 * @param errorCount          errors in the current episode
 * @param nextRetryAt         when the table is retried next
 * @param normalizedCounts    inserts, updates and deletes of all normalized batches
 * @param firstRowReceivedAt  when the oldest unnormalized row was read; null when all is normalized
 * @param firstRowCommitTime  source commit time of that row
 * @param updatedAt           last change of this row (catalog clock)
 * @param copyRowsDone        rows a Postgres copy sent so far; null when never copied
 * @param copyRowsTotal       rows that copy expects in all (an estimate until it ends)
 * @param detachSlot          the private slot of a table being detached or detached from the shared slot; else null
 * @param detachLsn           the detach marker's LSN: the table's changes committed at or after it are the private
 *                            slot's; null until the apply task met the marker
 * @param detachedAt          when the apply task met the detach marker
 */
public record TableState(String flow, String table, String cursor, Instant lastAttemptAt, Instant lastSyncedAt,
                         Instant lastNormalizedAt, long syncedBatchId, long normalizedBatchId, long syncedRows,
                         Phase phase, String phaseLsn, int copyAttempt, String copyLeaseOwner,
                         Instant copyLeaseUntil, String pausedReason, Instant pausedAt, String lastError,
                         Instant lastErrorAt, int errorCount, Instant nextRetryAt, RowCounts normalizedCounts,
                         Instant firstRowReceivedAt, Instant firstRowCommitTime, Instant updatedAt,
                         Long copyRowsDone, Long copyRowsTotal, String detachSlot, String detachLsn,
                         Instant detachedAt) {

    /** Batches synced but not yet normalized: what the normalize buffer limits. */
    public long unnormalizedBatches() {
        return Math.max(0, syncedBatchId - normalizedBatchId);
    }

    public boolean paused() {
        return pausedReason != null;
    }
}
