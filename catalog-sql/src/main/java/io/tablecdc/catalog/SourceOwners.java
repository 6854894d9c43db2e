package io.tablecdc.catalog;

import static io.tablecdc.catalog.Sql.STATE;
import static io.tablecdc.catalog.Sql.first;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Instant;
import java.util.Objects;

/**
 * Which task owns a query CDC table ({@code source_epoch}, {@code source_owner}): a task that starts on the table takes
 * the next epoch, and its writes that move the table (batch id reservations, synced batches and cursors) carry that
 * epoch in the same SQL statement, so the catalog refuses them once another task has taken the table, for instance
 * while this task's worker was cut off from its Connect group and the group gave the table to another worker. A refused
 * write throws {@link TableLostException}; the task then stops sending. No clock is involved: the newest start wins.
 */
public final class SourceOwners {

    private final CatalogDb db;

    SourceOwners(CatalogDb db) {
        this.db = db;
    }

    /**
     * Takes the table for {@code owner}: its epoch goes up by one, which fences every earlier owner. The table's row
     * must exist ({@link TableProgress#initTable}). Not idempotent: each call is a new ownership.
     *
     * @return this owner's epoch
     */
    public long take(String flow, String table, String owner) {
        Objects.requireNonNull(owner, "owner");
        return db.onTable("takeTable", flow, table, c -> first(c, "UPDATE " + STATE
                + " SET source_epoch = source_epoch + 1, source_owner = ?"
                + " WHERE flow_name = ? AND source_table_identifier = ? RETURNING source_epoch",
                rs -> rs.getLong(1), Sql.truncate(owner, 200), flow, table)
                .orElseThrow(() -> new CatalogException("flow " + flow + ", table " + table + ": no catalog row to take")));
    }

    /** Throws {@link TableLostException} unless {@code epoch} is still the table's. Read-only. */
    public void requireOwner(String flow, String table, long epoch) {
        db.onTable("requireOwner", flow, table, c -> {
            requireOwner(c, flow, table, epoch);
            return null;
        });
    }

    private static void requireOwner(Connection c, String flow, String table, long epoch) throws SQLException {
        Owner now = first(c, "SELECT source_epoch, source_owner FROM " + STATE
                + " WHERE flow_name = ? AND source_table_identifier = ?",
                rs -> new Owner(rs.getLong(1), rs.getString(2)), flow, table).orElse(new Owner(-1, null));
        if (now.epoch != epoch) {
            throw new TableLostException("flow " + flow + ", table " + table + ": another task took this table over"
                    + " (its owner is now " + (now.owner == null ? "none: the table's catalog row is gone" : "'" + now.owner
                    + "', epoch " + now.epoch) + "; this task's epoch is " + epoch + "); this task stops sending it");
        }
    }

    private record Owner(long epoch, String owner) {
    }

    /** {@link BatchIdReservations#reserveBatchIds}, refused unless {@code epoch} is still the table's. */
    public long reserveBatchIds(String flow, String table, int count, long epoch) {
        BatchIdReservations.requireCount(count);
        return db.onTable("reserveBatchIds", flow, table, c -> {
            var first = first(c, "UPDATE " + STATE + " AS s SET reserved_batch_id ="
                    + " GREATEST(s.reserved_batch_id, s.synced_batch_id, s.normalized_batch_id,"
                    + "   (SELECT COALESCE(max(st.batch_id), 0) FROM " + Sql.STAGE + " st"
                    + "    WHERE st.flow_name = s.flow_name AND st.source_table_identifier = s.source_table_identifier))"
                    + "   + ?"
                    + " WHERE s.flow_name = ? AND s.source_table_identifier = ? AND s.source_epoch = ?"
                    + " RETURNING s.reserved_batch_id",
                    rs -> rs.getLong(1) - count + 1, count, flow, table, epoch);
            if (first.isEmpty()) {
                requireOwner(c, flow, table, epoch);
                throw new CatalogException("flow " + flow + ", table " + table + ": no catalog row to reserve batch ids in");
            }
            return first.get();
        });
    }

    /**
     * {@link TableProgress#recordSync}, refused unless {@code epoch} is still the table's.
     *
     * @return true if the row changed
     */
    public boolean recordSync(String flow, String table, SyncedBatch batch, Instant at, long epoch) {
        Objects.requireNonNull(batch, "batch");
        Objects.requireNonNull(at, "at");
        return db.onTable("recordSync", flow, table, c -> {
            boolean changed = TableProgress.recordSync(c, flow, table, batch, at, epoch);
            if (!changed) {
                // nothing changed: a repeat, or the write was refused because the table has another owner
                requireOwner(c, flow, table, epoch);
            }
            return changed;
        });
    }
}
