package io.tablecdc.catalog;

/**
 * Inserted, updated and deleted row counts of one or more batches, and how many values in them the sink changed to
 * fit a ClickHouse type ({@code clampedValues}: a date or timestamp outside ClickHouse's range, stored at the range's
 * edge).
 */
public record RowCounts(long inserts, long updates, long deletes, long clampedValues) {

    public static final RowCounts ZERO = new RowCounts(0, 0, 0, 0);

    public RowCounts {
        if (inserts < 0 || updates < 0 || deletes < 0 || clampedValues < 0) {
            throw new IllegalArgumentException("row counts cannot be negative: " + inserts + "/" + updates + "/" + deletes
                    + "/" + clampedValues);
        }
    }

    /** Counts without changed values. */
    public RowCounts(long inserts, long updates, long deletes) {
        this(inserts, updates, deletes, 0);
    }

    public long total() {
        return inserts + updates + deletes;
    }
}
