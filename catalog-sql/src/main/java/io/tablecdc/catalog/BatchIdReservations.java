package io.tablecdc.catalog;

import static io.tablecdc.catalog.Sql.STAGE;
import static io.tablecdc.catalog.Sql.STATE;
import static io.tablecdc.catalog.Sql.first;

import java.sql.Connection;
import java.sql.SQLException;

/**
 * A table's batch ids ({@code reserved_batch_id}): blocks of ids handed out to the tasks that send the table's
 * batches, so that two batches never share an id. A copy task reserves through {@link CopyLeases#reserveCopyBatchIds},
 * fenced by its claim.
 */
public final class BatchIdReservations {

    private final CatalogDb db;

    BatchIdReservations(CatalogDb db) {
        this.db = db;
    }

    /**
     * Reserves the next {@code count} batch ids of the table and returns the first: ids above every id reserved,
     * synced, normalized or staged for it before. An id handed out here is never handed out again, whichever task
     * asks and however tasks die, so two batches never share an id. Not idempotent: a repeated call reserves another
     * block (unused ids are gaps, which the sink accepts).
     *
     * @throws CatalogException when the table has no row
     */
    public long reserveBatchIds(String flow, String table, int count) {
        return reserveBatchIds(flow, table, count, 0);
    }

    /**
     * {@link #reserveBatchIds(String, String, int)} above {@code floor} as well: the largest id the caller knows to be
     * used elsewhere (e.g. the batch id of the table's offset in Kafka, when the catalog may have gone back in time).
     */
    public long reserveBatchIds(String flow, String table, int count, long floor) {
        requireCount(count);
        return db.onTable("reserveBatchIds", flow, table, c -> reserve(c, flow, table, count, floor, db.fence()));
    }

    static void requireCount(int count) {
        if (count < 1) {
            throw new IllegalArgumentException("count must be positive: " + count);
        }
    }

    /** {@link #reserveBatchIds} on the caller's connection. */
    static long reserve(Connection c, String flow, String table, int count) throws SQLException {
        return reserve(c, flow, table, count, 0);
    }

    /** {@link #reserveBatchIds(String, String, int, long)} on the caller's connection. */
    static long reserve(Connection c, String flow, String table, int count, long floor) throws SQLException {
        return reserve(c, flow, table, count, floor, ApplyFence.NONE);
    }

    private static long reserve(Connection c, String flow, String table, int count, long floor, ApplyFence fence)
            throws SQLException {
        return first(c, "UPDATE " + STATE + " AS s SET reserved_batch_id ="
                + " GREATEST(s.reserved_batch_id, s.synced_batch_id, s.normalized_batch_id, ?,"
                + "   (SELECT COALESCE(max(st.batch_id), 0) FROM " + STAGE + " st"
                + "    WHERE st.flow_name = s.flow_name AND st.source_table_identifier = s.source_table_identifier))"
                + "   + ?"
                + " WHERE s.flow_name = ? AND s.source_table_identifier = ?" + fence.and() + " RETURNING s.reserved_batch_id",
                rs -> rs.getLong(1) - count + 1, fence.bind(Math.max(0, floor), count, flow, table))
                .orElseThrow(() -> new CatalogException("flow " + flow + ", table " + table + ": no catalog row to"
                        + " reserve batch ids in"));
    }
}
