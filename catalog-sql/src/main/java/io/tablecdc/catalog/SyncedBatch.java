package io.tablecdc.catalog;

import java.time.Instant;
import java.util.Objects;

/**
 * What a source records once Kafka acknowledged a table's batch: the cursor the table resumes from, the
 * batch id, how many rows the batch had, and the times of its oldest row (null when the batch is empty).
 * An empty poll that only moved the cursor repeats the last batch id with {@code rows = 0}.
 *
 * @param cursor             the table's cursor after this batch (RFC 3339 with nanoseconds, or an LSN)
 * @param batchId            the batch id, at least 0 (0: no batch yet, cursor only)
 * @param rows               rows in the batch
 * @param firstRowReceivedAt when the source read the batch's first row
 * @param firstRowCommitTime the source commit time of the batch's oldest row
 */
public record SyncedBatch(String cursor, long batchId, long rows, Instant firstRowReceivedAt,
                          Instant firstRowCommitTime) {

    public SyncedBatch {
        Objects.requireNonNull(cursor, "cursor");
        if (batchId < 0) {
            throw new IllegalArgumentException("batch id cannot be negative: " + batchId);
        }
        if (rows < 0) {
            throw new IllegalArgumentException("rows cannot be negative: " + rows);
        }
    }

    /** A sync that only moves the cursor (an empty window), keeping {@code batchId}. */
    public static SyncedBatch cursorOnly(String cursor, long batchId) {
        return new SyncedBatch(cursor, batchId, 0, null, null);
    }
}
