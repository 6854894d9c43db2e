package io.tablecdc.common.catalog;

/** Inserted, updated and deleted row counts of one or more batches. */
public record RowCounts(long inserts, long updates, long deletes) {

    public static final RowCounts ZERO = new RowCounts(0, 0, 0);

    public RowCounts {
        if (inserts < 0 || updates < 0 || deletes < 0) {
            throw new IllegalArgumentException("row counts cannot be negative: " + inserts + "/" + updates + "/" + deletes);
        }
    }

    public long total() {
        return inserts + updates + deletes;
    }
}
