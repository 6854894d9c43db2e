package io.tablecdc.catalog;

import java.time.Instant;
import java.util.List;
import java.util.Objects;

/**
 * One staged batch of a table: the manifest of its Avro files and its counts.
 *
 * @param batchId        the batch id, at least 1
 * @param files          the batch's files, in order (a batch may be split into size-bounded files); empty for a
 *                       batch that is only a truncate
 * @param rows           rows in the batch
 * @param counts         inserts, updates and deletes in the batch
 * @param truncateBefore the batch starts with a truncate of its source table: the destination table is emptied
 *                       before the batch's files are loaded
 * @param createdAt      when the row was first written; ignored on write (the catalog's clock decides)
 */
public record Stage(long batchId, List<StageFile> files, long rows, RowCounts counts, boolean truncateBefore,
                    Instant createdAt) {

    public Stage {
        if (batchId < 1) {
            throw new IllegalArgumentException("batch ids start at 1: " + batchId);
        }
        files = List.copyOf(Objects.requireNonNull(files, "files"));
        Objects.requireNonNull(counts, "counts");
        if (rows < 0) {
            throw new IllegalArgumentException("rows cannot be negative: " + rows);
        }
    }

    /** A stage to write; {@code createdAt} is set by the catalog. */
    public Stage(long batchId, List<StageFile> files, long rows, RowCounts counts, boolean truncateBefore) {
        this(batchId, files, rows, counts, truncateBefore, null);
    }

    /** A stage of rows only (no truncate) to write; {@code createdAt} is set by the catalog. */
    public Stage(long batchId, List<StageFile> files, long rows, RowCounts counts) {
        this(batchId, files, rows, counts, false, null);
    }
}
