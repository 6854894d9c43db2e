package io.tablecdc.catalog;

import static io.tablecdc.catalog.Sql.STATE;
import static io.tablecdc.catalog.Sql.errorText;
import static io.tablecdc.catalog.Sql.first;
import static io.tablecdc.catalog.Sql.instant;
import static io.tablecdc.catalog.Sql.list;
import static io.tablecdc.catalog.Sql.nullable;
import static io.tablecdc.catalog.Sql.nullableLong;
import static io.tablecdc.catalog.Sql.requireBatchId;
import static io.tablecdc.catalog.Sql.update;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * A table's progress in {@code cdc_table_replication_state}, for every source and the sink: its row, its cursor, its
 * synced and normalized batch ids and counts, its pause and its error episode.
 *
 * <p>Every write is idempotent unless its javadoc says otherwise: calling it again with the same arguments, for
 * instance after a crash, leaves the catalog as the first call left it (ids only rise, counts are added only when an
 * id advances, rows are upserted, and an update that would change nothing is skipped by the schema's triggers,
 * {@code updated_at} included). Methods that report whether they changed something return {@code false} on such a
 * repeat, so a caller can log once per episode. Timestamps passed in ({@code at}, {@code nextRetryAt}) are the
 * caller's.
 */
public final class TableProgress {

    private static final String STATE_COLUMNS = "flow_name, source_table_identifier, cursor_text,"
            + " last_attempt_at, last_synced_at, last_normalized_at, synced_batch_id, normalized_batch_id,"
            + " synced_rows_count, phase, phase_lsn, copy_attempt, copy_lease_owner, copy_lease_until,"
            + " paused_reason, paused_at, last_error, last_error_at, error_count, next_retry_at, inserts_count,"
            + " updates_count, deletes_count, first_row_received_at, first_row_commit_time, updated_at,"
            + " copy_rows_done, copy_rows_total, clamped_values_count, detach_slot, detach_lsn, detached_at";

    /** The update that closes a table's error episode, before its {@code WHERE}. */
    static final String CLEAR_ERROR = "UPDATE " + STATE
            + " SET last_error = NULL, last_error_at = NULL, error_count = 0, next_retry_at = NULL,"
            + " refused_batch_id = NULL, refused_at = NULL";

    private final CatalogDb db;

    TableProgress(CatalogDb db) {
        this.db = db;
    }

    /**
     * Creates the table's row if it does not exist; never touches an existing row (its cursor, ids, counts and phase
     * stay). May be called again after a crash.
     *
     * @param initialPhase the phase of a new row ({@link Phase#PENDING} for Postgres tables), or null
     * @return true if the row was created now
     */
    public boolean initTable(String flow, String table, Phase initialPhase) {
        ApplyFence fence = db.fence();
        return db.onTable("initTable", flow, table, c -> update(c, "INSERT INTO " + STATE
                + " (flow_name, source_table_identifier, phase) SELECT ?, ?, CAST(? AS text) WHERE TRUE" + fence.and()
                + " ON CONFLICT (flow_name, source_table_identifier) DO NOTHING",
                fence.bind(flow, table, initialPhase == null ? null : initialPhase.sqlName())) == 1);
    }

    /** {@link #initTable(String, String, Phase)} without a phase (query CDC). */
    public boolean initTable(String flow, String table) {
        return initTable(flow, table, null);
    }

    /**
     * Records a poll attempt at {@code at}. {@code last_attempt_at} only moves forward, so a late or repeated call
     * cannot rewind it. May be called again after a crash.
     */
    public void recordAttempt(String flow, String table, Instant at) {
        Objects.requireNonNull(at, "at");
        db.onTable("recordAttempt", flow, table, c -> update(c, "INSERT INTO " + STATE + " AS s"
                + " (flow_name, source_table_identifier, last_attempt_at) VALUES (?, ?, ?)"
                + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE"
                + " SET last_attempt_at = GREATEST(s.last_attempt_at, EXCLUDED.last_attempt_at)", flow, table, at));
    }

    /**
     * Records that a batch (or a cursor move without rows) is durably in Kafka. When {@code batch.batchId()} is above
     * the stored synced batch id, the id, the cursor and {@code last_synced_at} move and the batch's rows are added;
     * the oldest-unnormalized-row times are set if none are pending and the batch is not already normalized (the sink
     * can be faster than the source's acknowledgement). When it equals the stored id, only the cursor and
     * {@code last_synced_at} move (an empty window walked forward). A lower id is stale and changes nothing. May be
     * called again after a crash: the repeat adds nothing.
     *
     * @return true if the row changed
     */
    public boolean recordSync(String flow, String table, SyncedBatch batch, Instant at) {
        Objects.requireNonNull(batch, "batch");
        Objects.requireNonNull(at, "at");
        return db.onTable("recordSync", flow, table, c -> recordSync(c, flow, table, batch, at, null, db.fence()));
    }

    /** {@link #recordSync(String, String, SyncedBatch, Instant)} on the caller's connection. */
    static boolean recordSync(Connection c, String flow, String table, SyncedBatch batch, Instant at)
            throws SQLException {
        return recordSync(c, flow, table, batch, at, null, ApplyFence.NONE);
    }

    /** {@link #recordSync(Connection, String, String, SyncedBatch, Instant)}, only while {@code epoch} owns the table. */
    static boolean recordSync(Connection c, String flow, String table, SyncedBatch batch, Instant at, Long epoch)
            throws SQLException {
        return recordSync(c, flow, table, batch, at, epoch, ApplyFence.NONE);
    }

    /**
     * {@link #recordSync(Connection, String, String, SyncedBatch, Instant, Long)}, also only while {@code fence} holds
     * (its condition is on the row offered: a refused write neither inserts nor updates).
     */
    private static boolean recordSync(Connection c, String flow, String table, SyncedBatch batch, Instant at, Long epoch,
                                      ApplyFence fence) throws SQLException {
        String advanced = "EXCLUDED.synced_batch_id > s.synced_batch_id";
        // the sink may normalize a batch before its source records the sync: then nothing is pending
        String pending = advanced + " AND EXCLUDED.synced_batch_id > s.normalized_batch_id";
        boolean hasRows = batch.rows() > 0;
        return update(c, "INSERT INTO " + STATE + " AS s"
                + " (flow_name, source_table_identifier, cursor_text, synced_batch_id, synced_rows_count,"
                + " last_synced_at, first_row_received_at, first_row_commit_time)"
                + " SELECT ?, ?, ?, CAST(? AS bigint), CAST(? AS bigint), CAST(? AS timestamptz),"
                + " CAST(? AS timestamptz), CAST(? AS timestamptz) WHERE TRUE" + fence.and()
                + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE SET"
                + " cursor_text = EXCLUDED.cursor_text,"
                + " synced_rows_count = s.synced_rows_count"
                + "   + CASE WHEN " + advanced + " THEN EXCLUDED.synced_rows_count ELSE 0 END,"
                + " first_row_received_at = CASE WHEN " + pending
                + "   THEN COALESCE(s.first_row_received_at, EXCLUDED.first_row_received_at)"
                + "   ELSE s.first_row_received_at END,"
                + " first_row_commit_time = CASE WHEN " + pending
                + "   THEN COALESCE(s.first_row_commit_time, EXCLUDED.first_row_commit_time)"
                + "   ELSE s.first_row_commit_time END,"
                + " last_synced_at = GREATEST(s.last_synced_at, EXCLUDED.last_synced_at),"
                + " synced_batch_id = EXCLUDED.synced_batch_id"
                + " WHERE EXCLUDED.synced_batch_id >= s.synced_batch_id"
                + (epoch == null ? " AND ? IS NULL" : " AND s.source_epoch = ?"),
                // the fence's values come before the epoch's: its condition is in the SELECT
                Sql.join(fence.bind(flow, table, batch.cursor(), batch.batchId(), batch.rows(), at,
                        nullable(hasRows ? batch.firstRowReceivedAt() : null),
                        nullable(hasRows ? batch.firstRowCommitTime() : null)),
                        epoch == null ? nullable((Long) null) : epoch)) == 1;
    }

    /**
     * Records that the table's batches up to {@code batchId} are loaded into ClickHouse. Only when {@code batchId} is
     * above the stored normalized batch id: the id rises, {@code counts} (the inserts, updates and deletes of the
     * batches in {@code (previous id, batchId]}) are added, and the oldest-unnormalized-row times are cleared once
     * nothing synced is left. While batches remain they keep their value, so the lag they give is an upper bound. May
     * be called again after a crash: the repeat adds nothing.
     *
     * @return true if the normalized batch id advanced
     */
    public boolean recordNormalize(String flow, String table, long batchId, RowCounts counts, Instant at) {
        Objects.requireNonNull(counts, "counts");
        Objects.requireNonNull(at, "at");
        requireBatchId(batchId);
        return db.onTable("recordNormalize", flow, table, c -> recordNormalize(c, flow, table, batchId, counts, at) == 1);
    }

    /** {@link #recordNormalize(String, String, long, RowCounts, Instant)} on the caller's connection; 1 if the id rose. */
    static int recordNormalize(Connection c, String flow, String table, long batchId, RowCounts counts, Instant at)
            throws SQLException {
        String caughtUp = "EXCLUDED.normalized_batch_id >= s.synced_batch_id";
        return update(c, "INSERT INTO " + STATE + " AS s"
                + " (flow_name, source_table_identifier, normalized_batch_id, inserts_count, updates_count,"
                + " deletes_count, last_normalized_at, clamped_values_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE SET"
                + " normalized_batch_id = EXCLUDED.normalized_batch_id,"
                + " inserts_count = s.inserts_count + EXCLUDED.inserts_count,"
                + " updates_count = s.updates_count + EXCLUDED.updates_count,"
                + " deletes_count = s.deletes_count + EXCLUDED.deletes_count,"
                + " clamped_values_count = s.clamped_values_count + EXCLUDED.clamped_values_count,"
                + " last_normalized_at = GREATEST(s.last_normalized_at, EXCLUDED.last_normalized_at),"
                + " first_row_received_at = CASE WHEN " + caughtUp + " THEN NULL"
                + "   ELSE s.first_row_received_at END,"
                + " first_row_commit_time = CASE WHEN " + caughtUp + " THEN NULL"
                + "   ELSE s.first_row_commit_time END"
                + " WHERE EXCLUDED.normalized_batch_id > s.normalized_batch_id",
                flow, table, batchId, counts.inserts(), counts.updates(), counts.deletes(), at,
                counts.clampedValues());
    }

    // ---------------------------------------------------------------- query CDC: rewinds and the watermark zone

    /**
     * Sets the table's cursor to {@code cursor} ({@code ""}: none, the table starts over with its initial load), in
     * either direction, and the watermark time zone it is read in: what an operator's offset rewind or reset of a query
     * CDC table says (the connector's {@code alterOffsets}, while the connector is stopped). A task takes the later of
     * its Connect offset and this cursor, so without it a rewind would be ignored. May be called again after a crash.
     *
     * @param zone the {@code watermark.time.zone} the cursor is read in, or null to keep the stored one
     */
    public void rewindCursor(String flow, String table, String cursor, String zone) {
        Objects.requireNonNull(cursor, "cursor");
        db.onTable("rewindCursor", flow, table, c -> update(c, "INSERT INTO " + STATE + " AS s"
                + " (flow_name, source_table_identifier, cursor_text, watermark_time_zone) VALUES (?, ?, ?, ?)"
                + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE SET cursor_text = EXCLUDED.cursor_text,"
                + " watermark_time_zone = COALESCE(EXCLUDED.watermark_time_zone, s.watermark_time_zone)",
                flow, table, cursor, zone));
    }

    /** The {@code watermark.time.zone} the table's cursor was read in, if recorded. Read-only. */
    public Optional<String> watermarkZone(String flow, String table) {
        return db.onTable("watermarkZone", flow, table, c -> first(c, "SELECT watermark_time_zone FROM " + STATE
                + " WHERE flow_name = ? AND source_table_identifier = ? AND watermark_time_zone IS NOT NULL",
                rs -> rs.getString(1), flow, table));
    }

    /** Records the {@code watermark.time.zone} the table's cursor is read in. May be called again after a crash. */
    public void recordWatermarkZone(String flow, String table, String zone) {
        Objects.requireNonNull(zone, "zone");
        db.onTable("recordWatermarkZone", flow, table, c -> update(c, "UPDATE " + STATE
                + " SET watermark_time_zone = ? WHERE flow_name = ? AND source_table_identifier = ?", zone, flow, table));
    }

    // ---------------------------------------------------------------- pause and errors

    /**
     * Pauses the table for {@code reason} (e.g. {@code normalize_buffer_full}, {@code manual}). {@code paused_at} is
     * set when the pause begins or its reason changes, and kept when the same pause is recorded again. May be called
     * again after a crash.
     *
     * @return true if this call began a pause or changed its reason (log it), false if it was already so
     */
    public boolean setPause(String flow, String table, String reason, Instant at) {
        Objects.requireNonNull(reason, "reason");
        Objects.requireNonNull(at, "at");
        return db.onTable("setPause", flow, table, c -> update(c, "INSERT INTO " + STATE + " AS s"
                + " (flow_name, source_table_identifier, paused_reason, paused_at) VALUES (?, ?, ?, ?)"
                + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE SET"
                + " paused_reason = EXCLUDED.paused_reason,"
                + " paused_at = CASE WHEN s.paused_reason IS NOT DISTINCT FROM EXCLUDED.paused_reason"
                + "   THEN s.paused_at ELSE EXCLUDED.paused_at END", flow, table, reason, at) == 1);
    }

    /**
     * Ends the table's pause. May be called again after a crash.
     *
     * @return true if the table was paused
     */
    public boolean clearPause(String flow, String table) {
        return db.onTable("clearPause", flow, table, c -> update(c, "UPDATE " + STATE
                + " SET paused_reason = NULL, paused_at = NULL"
                + " WHERE flow_name = ? AND source_table_identifier = ?", flow, table) == 1);
    }

    /**
     * Ends the table's pause only when it is paused for {@code reason}: a writer ends its own pause and leaves another
     * writer's (the sink's, an operator's) alone. May be called again after a crash.
     *
     * @return true if the table was paused for {@code reason}
     */
    public boolean clearPause(String flow, String table, String reason) {
        Objects.requireNonNull(reason, "reason");
        return db.onTable("clearPause", flow, table, c -> update(c, "UPDATE " + STATE
                + " SET paused_reason = NULL, paused_at = NULL"
                + " WHERE flow_name = ? AND source_table_identifier = ? AND paused_reason = ?", flow, table, reason) == 1);
    }

    /**
     * Opens the table's error episode or records one more error in it: {@code last_error}, {@code last_error_at} and
     * {@code next_retry_at} are replaced and {@code error_count} grows by one, but only for an error newer than the
     * one stored, so a repeat with the same {@code at} changes nothing. The error text is cut to 4000 characters. A
     * Postgres pipeline table that is {@code errored} is left as it is: its error and retry time are its copy's, or say
     * that it left the publication, and a sink's episode must neither hide them nor make a copy task claim it. May be
     * called again after a crash.
     *
     * @param nextRetryAt when the table is retried, or null if it is not
     * @return true if this call opened the episode (log it once), false if one was open or it is a repeat
     */
    public boolean recordError(String flow, String table, String error, Instant at, Instant nextRetryAt) {
        return recordError(flow, table, error, at, nextRetryAt, null);
    }

    /**
     * {@link #recordError(String, String, String, Instant, Instant)}, and with {@code refusedBatchId} the record that
     * this error is ClickHouse refusing that batch of the table (its data: {@code refused_batch_id}, and
     * {@code refused_at = at}, the error's time). Every recorded error replaces that record: an error without a batch
     * clears it, so it names a batch only while the table's last error is that batch's refusal
     * ({@link SinkLeases#lockForOperator} reads it so).
     */
    public boolean recordError(String flow, String table, String error, Instant at, Instant nextRetryAt,
                               Long refusedBatchId) {
        Objects.requireNonNull(error, "error");
        Objects.requireNonNull(at, "at");
        if (refusedBatchId != null) {
            requireBatchId(refusedBatchId);
        }
        return db.onTable("recordError", flow, table, c -> first(c, "INSERT INTO " + STATE + " AS s"
                + " (flow_name, source_table_identifier, last_error, last_error_at, error_count, next_retry_at,"
                + "  refused_batch_id, refused_at)"
                + " VALUES (?, ?, ?, ?, 1, ?, ?, ?)"
                + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE SET"
                + " last_error = EXCLUDED.last_error, last_error_at = EXCLUDED.last_error_at,"
                + " next_retry_at = EXCLUDED.next_retry_at, error_count = s.error_count + 1,"
                + " refused_batch_id = EXCLUDED.refused_batch_id, refused_at = EXCLUDED.refused_at"
                + " WHERE (s.last_error_at IS NULL OR EXCLUDED.last_error_at > s.last_error_at)"
                // an errored Postgres table's error and retry time are its copy's (or say that it left)
                + " AND s.phase IS DISTINCT FROM 'errored'"
                + " RETURNING error_count", rs -> rs.getInt(1), flow, table, errorText(error), at, nullable(nextRetryAt),
                nullable(refusedBatchId), nullable(refusedBatchId == null ? null : at))
                .map(count -> count == 1).orElse(false));
    }

    /**
     * Closes the table's error episode only when its {@code last_error} starts with {@code prefix}: a source and a
     * sink share one episode per table, and each may only end its own ({@code "poll:"}, {@code "normalize:"},
     * {@code "stage:"}). May be called again after a crash.
     *
     * @return true if an episode was closed now
     */
    public boolean clearError(String flow, String table, String prefix) {
        return db.onTable("clearError", flow, table, c -> update(c, CLEAR_ERROR
                + " WHERE flow_name = ? AND source_table_identifier = ? AND starts_with(last_error, ?)"
                + " AND phase IS DISTINCT FROM 'errored'",
                flow, table, prefix) == 1);
    }

    /**
     * Closes the table's error episode after a success: clears the error, its time, count and next retry. May be
     * called again after a crash.
     *
     * @return true if an episode was open
     */
    public boolean clearError(String flow, String table) {
        return db.onTable("clearError", flow, table, c -> clearError(c, flow, table));
    }

    /** {@link #clearError(String, String)} on the caller's connection. */
    public static boolean clearError(Connection c, String flow, String table) throws SQLException {
        return update(c, CLEAR_ERROR + " WHERE flow_name = ? AND source_table_identifier = ?", flow, table) == 1;
    }

    // ---------------------------------------------------------------- reads

    /** The table's row. Read-only. */
    public Optional<TableState> getTable(String flow, String table) {
        return db.onTable("getTable", flow, table, c -> first(c, "SELECT " + STATE_COLUMNS + " FROM " + STATE
                + " WHERE flow_name = ? AND source_table_identifier = ?", TableProgress::tableState, flow, table));
    }

    /** The rows of every table of the flow, by table name. Read-only. */
    public List<TableState> listTables(String flow) {
        return db.onFlow("listTables", flow, c -> list(c, "SELECT " + STATE_COLUMNS + " FROM " + STATE
                + " WHERE flow_name = ? ORDER BY source_table_identifier", TableProgress::tableState, flow));
    }

    /**
     * The rows of the tables of {@code flows} (of every flow when it is empty), by flow and table name, on the
     * caller's connection. Read-only.
     */
    public static List<TableState> listTables(Connection c, List<String> flows) throws SQLException {
        return list(c, "SELECT " + STATE_COLUMNS + " FROM " + STATE + " WHERE ? OR flow_name = ANY (?)"
                + " ORDER BY flow_name, source_table_identifier", TableProgress::tableState,
                flows.isEmpty(), Sql.texts(flows));
    }

    private static TableState tableState(ResultSet rs) throws SQLException {
        return new TableState(rs.getString(1), rs.getString(2), rs.getString(3), instant(rs.getTimestamp(4)),
                instant(rs.getTimestamp(5)), instant(rs.getTimestamp(6)), rs.getLong(7), rs.getLong(8),
                rs.getLong(9), Phase.fromSqlName(rs.getString(10)), rs.getString(11), rs.getInt(12),
                rs.getString(13), instant(rs.getTimestamp(14)), rs.getString(15), instant(rs.getTimestamp(16)),
                rs.getString(17), instant(rs.getTimestamp(18)), rs.getInt(19), instant(rs.getTimestamp(20)),
                new RowCounts(rs.getLong(21), rs.getLong(22), rs.getLong(23), rs.getLong(29)),
                instant(rs.getTimestamp(24)), instant(rs.getTimestamp(25)), instant(rs.getTimestamp(26)),
                nullableLong(rs, 27), nullableLong(rs, 28), rs.getString(30), rs.getString(31),
                instant(rs.getTimestamp(32)));
    }
}
