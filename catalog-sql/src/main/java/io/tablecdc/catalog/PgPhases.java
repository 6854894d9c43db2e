package io.tablecdc.catalog;

import static io.tablecdc.catalog.Sql.STATE;
import static io.tablecdc.catalog.Sql.errorText;
import static io.tablecdc.catalog.Sql.exists;
import static io.tablecdc.catalog.Sql.first;
import static io.tablecdc.catalog.Sql.nullable;
import static io.tablecdc.catalog.Sql.list;
import static io.tablecdc.catalog.Sql.requireLsn;
import static io.tablecdc.catalog.Sql.update;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The phases of a Postgres pipeline table ({@code pending}, {@code copying}, {@code catchup}, {@code ready},
 * {@code errored}) as the apply task and the operator move them, and the table's membership in its publication. The
 * copy tasks' side of {@code copying} (claims, leases and fenced writes) is {@link CopyLeases}.
 *
 * <p>Writes are idempotent as described in {@link TableProgress}; each says what a repeat returns. On the client of an
 * apply task that took its flow ({@link Catalog#takeApply}) every write carries the task's apply epoch in its statement
 * and changes nothing once another apply task has taken the flow ({@link ApplyTakenOverException}).
 */
public final class PgPhases {

    /** The start of every update that marks a table {@code errored} and records its error, copy lease dropped. */
    static final String ERRORED = "UPDATE " + STATE + " SET phase = 'errored',"
            + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL," + PgPhases.UNDETACHED + ","
            + " last_error = ?, last_error_at = ?, next_retry_at = ?,";

    /** The error count of {@link #ERRORED}: one more when the error is newer than the stored one. */
    static final String COUNT_ERROR = " error_count = error_count + CASE WHEN last_error_at IS NULL OR last_error_at < ?"
            + "   THEN 1 ELSE 0 END";

    /**
     * The columns of a detach set back: the table's private slot is no longer its (the apply task drops such slots).
     * A table that goes back to a copy from scratch needs no private slot.
     */
    static final String UNDETACHED = " detach_slot = NULL, detach_lsn = NULL, detached_at = NULL";

    private final CatalogDb db;

    PgPhases(CatalogDb db) {
        this.db = db;
    }

    /**
     * Puts the table (back) in {@code pending}, dropping its phase LSN and any copy lease, e.g. when a new table
     * appears in the publication or the main slot is recreated. Creates the row if needed. May be called again after a
     * crash.
     *
     * @return true if the row changed
     */
    public boolean setPending(String flow, String table) {
        ApplyFence fence = db.fence();
        return db.onTable("setPending", flow, table, c -> update(c, "INSERT INTO " + STATE + " AS s"
                + " (flow_name, source_table_identifier, phase) SELECT ?, ?, 'pending' WHERE TRUE" + fence.and()
                + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE SET phase = 'pending',"
                + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL," + UNDETACHED,
                fence.bind(flow, table)) == 1);
    }

    /**
     * Gives a table whose row has no phase the phase {@code pending}: a Postgres table's row deleted by hand and written
     * again by another writer's upsert (a synced batch, the sink's normalize) has none. Rows with a phase are left as
     * they are. May be called again after a crash.
     *
     * @return true if the row had no phase
     */
    public boolean pendingIfUnknown(String flow, String table) {
        return db.onTable("pendingIfUnknown", flow, table, c -> update(c, "UPDATE " + STATE + " SET phase = 'pending',"
                + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL," + UNDETACHED
                + " WHERE flow_name = ? AND source_table_identifier = ? AND phase IS NULL" + db.fence().and(),
                db.fence().bind(flow, table)) == 1);
    }

    /**
     * Records where the apply task saw {@code owner}'s handover marker: the table stays {@code copying} with
     * {@code phase_lsn} = the marker's LSN, so that an apply task that restarts keeps holding the table's changes
     * after that point until the copy task moves it to {@code catchup(lsn)}. May be called again after a crash.
     *
     * @return true if {@code owner} still holds the table and the marker is recorded (now or before), or the table
     *     already is in {@code catchup} or {@code ready} at {@code lsn}
     */
    public boolean markHandover(String flow, String table, String owner, String lsn) {
        Objects.requireNonNull(owner, "owner");
        requireLsn(lsn);
        return db.onTable("markHandover", flow, table, c -> update(c, "UPDATE " + STATE + " SET phase_lsn = ?"
                + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'copying'"
                + " AND copy_lease_owner = ? AND (phase_lsn IS NULL OR phase_lsn = ?)" + db.fence().and(),
                db.fence().bind(lsn, flow, table, owner, lsn)) == 1
                || inPhase(c, flow, table, Phase.COPYING, lsn) || inPhase(c, flow, table, Phase.CATCHUP, lsn)
                || inPhase(c, flow, table, Phase.READY, lsn));
    }

    /**
     * Moves the table from {@code copying} (held by {@code owner}) to {@code catchup(lsn)} and releases the lease. May
     * be called again after a crash: true again when the table already is in {@code catchup} at {@code lsn}.
     *
     * @return false if {@code owner} does not hold the table and it is not already in catchup at lsn
     */
    public boolean markCatchup(String flow, String table, String owner, String lsn) {
        Objects.requireNonNull(owner, "owner");
        requireLsn(lsn);
        return db.onTable("markCatchup", flow, table, c -> update(c, "UPDATE " + STATE + " SET phase = 'catchup',"
                + " phase_lsn = ?, copy_lease_owner = NULL, copy_lease_until = NULL"
                + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'copying'"
                + " AND copy_lease_owner = ?", lsn, flow, table, owner) == 1
                || inPhase(c, flow, table, Phase.CATCHUP, lsn));
    }

    /**
     * Moves the table to {@code ready(lsn)}: from {@code catchup(lsn)} once the apply task's durable position passed
     * {@code lsn}, or straight from {@code pending} for a table that is not copied and streams from {@code lsn}. May
     * be called again after a crash: true again when already ready at {@code lsn}.
     *
     * @return false if the table is in another phase (e.g. a copy task claimed it meanwhile)
     */
    public boolean markReady(String flow, String table, String lsn) {
        requireLsn(lsn);
        return db.onTable("markReady", flow, table, c -> update(c, "UPDATE " + STATE + " SET phase = 'ready',"
                + " phase_lsn = ?, copy_lease_owner = NULL, copy_lease_until = NULL, copy_failures = 0"
                + " WHERE flow_name = ? AND source_table_identifier = ?"
                + " AND (phase = 'pending' OR (phase = 'catchup' AND phase_lsn = ?))" + db.fence().and(),
                db.fence().bind(lsn, flow, table, lsn)) == 1
                || inPhase(c, flow, table, Phase.READY, lsn));
    }

    /**
     * Moves every table of the flow in {@code catchup(c)} with {@code c <= durableLsn} to {@code ready(c)}. The apply
     * task calls it when its durable position advances. May be called again after a crash.
     *
     * @return the tables that became ready now
     */
    public List<String> markCaughtUpReady(String flow, String durableLsn) {
        requireLsn(durableLsn);
        return db.onFlow("markCaughtUpReady", flow, c -> {
            List<String> ready = list(c, "UPDATE " + STATE + " SET phase = 'ready', copy_failures = 0"
                    + " WHERE flow_name = ? AND phase = 'catchup' AND phase_lsn::pg_lsn <= ?::pg_lsn" + db.fence().and()
                    + " RETURNING source_table_identifier", rs -> rs.getString(1), db.fence().bind(flow, durableLsn));
            ready.sort(null);
            return ready;
        });
    }

    /**
     * Marks the table {@code errored} and records the error as {@link TableProgress#recordError} does. With an
     * {@code owner} (a copy task) only while that owner holds the table, so a task whose lease was taken over cannot
     * overwrite the new copy; with a null owner (the apply task) in any phase. With a {@code nextRetryAt} a copy task
     * claims it again from then; with null it stays errored. May be called again after a crash: the repeat changes
     * nothing.
     *
     * @return true if the row changed now
     */
    public boolean markErrored(String flow, String table, String owner, String error, Instant at,
                               Instant nextRetryAt) {
        Objects.requireNonNull(error, "error");
        Objects.requireNonNull(at, "at");
        return db.onTable("markErrored", flow, table, c -> update(c, ERRORED + COUNT_ERROR
                + " WHERE flow_name = ? AND source_table_identifier = ?"
                + " AND (last_error_at IS NULL OR last_error_at <= ?)"
                + " AND (CAST(? AS text) IS NULL OR (phase = 'copying' AND copy_lease_owner = ?))" + db.fence().and(),
                db.fence().bind(errorText(error), at, nullable(nextRetryAt), at, flow, table, at, owner, owner)) == 1);
    }

    /**
     * A change of a table the stream cannot convert: {@link #markErrored} without an owner (any phase), counting one
     * failure against the table's retry budget when {@code counted} (a copied table, copied again).
     *
     * @return true if the row changed now
     */
    public boolean markStreamFailed(String flow, String table, String error, Instant at, Instant nextRetryAt,
                                    boolean counted) {
        Objects.requireNonNull(error, "error");
        Objects.requireNonNull(at, "at");
        return db.onTable("markStreamFailed", flow, table, c -> update(c, ERRORED
                + " copy_failures = copy_failures + CASE WHEN ? THEN 1 ELSE 0 END," + COUNT_ERROR
                + " WHERE flow_name = ? AND source_table_identifier = ?"
                + " AND (last_error_at IS NULL OR last_error_at <= ?)" + db.fence().and(),
                db.fence().bind(errorText(error), at, nullable(nextRetryAt), counted, at, flow, table, at)) == 1);
    }

    // ---------------------------------------------------------------- detaching a table from the shared slot

    /**
     * The first step of detaching a {@code ready} table: records the name of its private slot before the slot is
     * created, only while fewer than {@code maxTables} tables of the flow have one. Not idempotent by nature (each
     * call names another slot); a detach whose slot or marker could not be made is undone by {@link #abandonDetach}.
     *
     * @return true if the table is now being detached with {@code slot}
     */
    public boolean beginDetach(String flow, String table, String slot, int maxTables) {
        Objects.requireNonNull(slot, "slot");
        return db.inTransaction("beginDetach", flow, c -> {
            // one detach decision of the flow at a time, so that two never both pass the count
            exists(c, "SELECT pg_advisory_xact_lock(hashtext('tablecdc.detach'), hashtext(?))", flow);
            return update(c, "UPDATE " + STATE + " SET detach_slot = ?"
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'ready' AND detach_slot IS NULL"
                    + " AND (SELECT count(*) FROM " + STATE + " WHERE flow_name = ? AND detach_slot IS NOT NULL) < ?"
                    + db.fence().and(), db.fence().bind(slot, flow, table, flow, maxTables)) == 1;
        });
    }

    /**
     * Where the apply task met the table's detach marker: its changes committed at or after {@code lsn} are the
     * private slot's from now on. Only for the table's current detach ({@code slot}). May be called again after a
     * crash: true again when the marker is recorded at {@code lsn}.
     *
     * @return false if the table is no longer being detached with {@code slot} (the marker is to be ignored)
     */
    public boolean markDetached(String flow, String table, String slot, String lsn) {
        Objects.requireNonNull(slot, "slot");
        requireLsn(lsn);
        return db.onTable("markDetached", flow, table, c -> update(c, "UPDATE " + STATE
                + " SET detach_lsn = ?, detached_at = now()"
                + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'ready' AND detach_slot = ?"
                + " AND detach_lsn IS NULL" + db.fence().and(), db.fence().bind(lsn, flow, table, slot)) == 1
                || exists(c, "SELECT 1 FROM " + STATE + " WHERE flow_name = ? AND source_table_identifier = ?"
                + " AND detach_slot = ? AND detach_lsn = ?", flow, table, slot, lsn));
    }

    /**
     * Moves every {@code ready} table of the flow whose detach marker lies at or before {@code durableLsn} (every change
     * the apply task kept of it is acknowledged by Kafka) to {@code lagging(detach_lsn)}. May be called again.
     *
     * @return the tables that became lagging now
     */
    public List<String> markLagging(String flow, String durableLsn) {
        requireLsn(durableLsn);
        return db.onFlow("markLagging", flow, c -> {
            List<String> lagging = list(c, "UPDATE " + STATE + " SET phase = 'lagging', phase_lsn = detach_lsn"
                    + " WHERE flow_name = ? AND phase = 'ready' AND detach_lsn IS NOT NULL"
                    + " AND detach_lsn::pg_lsn <= ?::pg_lsn" + db.fence().and() + " RETURNING source_table_identifier",
                    rs -> rs.getString(1), db.fence().bind(flow, durableLsn));
            lagging.sort(null);
            return lagging;
        });
    }

    /**
     * Undoes a detach whose slot or marker could not be made: the table streams on as before. Only before its marker
     * was met.
     *
     * @return true if the detach was undone now
     */
    public boolean abandonDetach(String flow, String table, String slot) {
        return db.onTable("abandonDetach", flow, table, c -> update(c, "UPDATE " + STATE + " SET" + UNDETACHED
                + " WHERE flow_name = ? AND source_table_identifier = ? AND detach_slot = ? AND detach_lsn IS NULL"
                + db.fence().and(), db.fence().bind(flow, table, slot)) == 1);
    }

    /**
     * {@link #restartTable} with no delay for a table whose private slot {@code slot} is gone, invalidated or past its
     * WAL bound, only while the table is still detached with that slot: a rejoin that completed meanwhile (the slot
     * dropped after the handover), or a later detach with another slot, is left alone.
     *
     * @return the phase before, or empty if the table is not detached with {@code slot}
     */
    public Optional<String> restartDetached(String flow, String table, String slot, String reason) {
        Objects.requireNonNull(slot, "slot");
        return db.onTable("restartDetached", flow, table, c -> first(c, "UPDATE " + STATE + " AS s SET phase = 'errored',"
                + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL," + UNDETACHED + ", copy_attempt = 0,"
                + " copy_failures = 0, error_count = 0, last_error = ?, last_error_at = now(), next_retry_at = now()"
                + " FROM (SELECT phase FROM " + STATE + " WHERE flow_name = ? AND source_table_identifier = ?"
                + "   AND detach_slot = ? FOR UPDATE) before"
                + " WHERE s.flow_name = ? AND s.source_table_identifier = ? AND s.phase IS NOT NULL AND s.detach_slot = ?"
                + db.fence().and() + " RETURNING before.phase", rs -> rs.getString(1),
                db.fence().bind(reason, flow, table, slot, flow, table, slot)));
    }

    /**
     * {@link #markErrored} without an owner and with no retry, for a table {@code table.sync.copy} does not copy whose
     * private slot {@code slot} is lost, only while the table is still detached with that slot.
     *
     * @return true if the row changed now
     */
    public boolean markDetachLost(String flow, String table, String slot, String error, Instant at) {
        Objects.requireNonNull(slot, "slot");
        Objects.requireNonNull(error, "error");
        Objects.requireNonNull(at, "at");
        return db.onTable("markDetachLost", flow, table, c -> update(c, ERRORED + COUNT_ERROR
                + " WHERE flow_name = ? AND source_table_identifier = ? AND detach_slot = ?" + db.fence().and(),
                db.fence().bind(errorText(error), at, nullable((Instant) null), at, flow, table, slot)) == 1);
    }

    /** The private slots the flow's tables hold now, by table. Read-only. */
    public Map<String, String> detachSlots(String flow) {
        return db.onFlow("detachSlots", flow, c -> {
            Map<String, String> slots = new HashMap<>();
            for (String[] row : list(c, "SELECT source_table_identifier, detach_slot FROM " + STATE
                    + " WHERE flow_name = ? AND detach_slot IS NOT NULL",
                    rs -> new String[] {rs.getString(1), rs.getString(2)}, flow)) {
                slots.put(row[0], row[1]);
            }
            return slots;
        });
    }

    // ---------------------------------------------------------------- publication membership and restarts

    /**
     * The publication entries the flow's tables were last seen to belong to their publication by (see
     * {@link #setPublicationMember}); tables without a recorded entry are left out.
     */
    public Map<String, String> publicationMembers(String flow) {
        return db.onFlow("publicationMembers", flow, c -> {
            Map<String, String> members = new HashMap<>();
            for (String[] row : list(c, "SELECT source_table_identifier, publication_member FROM " + STATE
                    + " WHERE flow_name = ? AND publication_member IS NOT NULL",
                    rs -> new String[] {rs.getString(1), rs.getString(2)}, flow)) {
                members.put(row[0], row[1]);
            }
            return members;
        });
    }

    /**
     * Records by which entry of its publication (a relation and the {@code pg_publication_rel} or
     * {@code pg_publication_namespace} row that lists it) a Postgres pipeline table belongs to it. A table that left
     * the publication and came back belongs by another entry.
     *
     * @return true if the table's row exists
     */
    public boolean setPublicationMember(String flow, String table, String member) {
        return db.onTable("setPublicationMember", flow, table, c -> update(c, "UPDATE " + STATE
                + " SET publication_member = ? WHERE flow_name = ? AND source_table_identifier = ?" + db.fence().and(),
                db.fence().bind(member, flow, table)) == 1);
    }

    /**
     * Marks a Postgres pipeline table that left its publication: {@code errored} with {@code reason} and no retry
     * time, so no copy task claims it and no task streams it, while its batch ids, its staged batches and its rows in
     * ClickHouse stay. Should it come back, {@link #restartTable} copies it again with batch ids above the old ones.
     *
     * @return true if the table had a row
     */
    public boolean markLeft(String flow, String table, String reason) {
        return db.onTable("markLeft", flow, table, c -> update(c, "UPDATE " + STATE + " SET phase = 'errored',"
                + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL," + UNDETACHED + ", last_error = ?,"
                + " last_error_at = now(), next_retry_at = NULL"
                + " WHERE flow_name = ? AND source_table_identifier = ? AND phase IS NOT NULL" + db.fence().and(),
                db.fence().bind(reason, flow, table)) == 1);
    }

    /**
     * Starts a Postgres pipeline table over with a new copy while its flow runs: the table becomes {@code errored}
     * with {@code reason} and a retry after {@code delaySeconds}, with a fresh retry budget. The apply task stops
     * sending its changes at its next catalog read; once the delay has passed a copy task claims it, truncates it in
     * ClickHouse, copies it from a new snapshot, catches it up and hands it over. The delay lets the apply task's last
     * records of the table reach Kafka before the copy's first one. Used by the apply task when a table came back to
     * its publication, and by {@code tablecdc-reset-table} ({@link #restartTable(Connection, String, String, String,
     * int)}).
     *
     * @return the phase before, or empty if the flow has no such table
     */
    public Optional<String> restartTable(String flow, String table, String reason, int delaySeconds) {
        return db.onTable("restartTable", flow, table, c -> restartTable(c, flow, table, reason, delaySeconds,
                db.fence()));
    }

    /**
     * {@link #restartTable(String, String, String, int)} on the caller's connection.
     *
     * @return the table's phase before, or empty when the flow has no Postgres pipeline table of that name
     */
    public static Optional<String> restartTable(Connection c, String flow, String table, String reason,
                                                int delaySeconds) throws SQLException {
        return restartTable(c, flow, table, reason, delaySeconds, ApplyFence.NONE);
    }

    private static Optional<String> restartTable(Connection c, String flow, String table, String reason,
                                                 int delaySeconds, ApplyFence fence) throws SQLException {
        return first(c, "UPDATE " + STATE + " AS s SET phase = 'errored',"
                + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL," + UNDETACHED + ", copy_attempt = 0,"
                + " copy_failures = 0, error_count = 0, last_error = ?, last_error_at = now(),"
                + " next_retry_at = now() + make_interval(secs => ?)"
                + " FROM (SELECT phase FROM " + STATE + " WHERE flow_name = ?"
                + "   AND source_table_identifier = ? FOR UPDATE) before"
                + " WHERE s.flow_name = ? AND s.source_table_identifier = ?"
                // a Postgres table (query CDC tables have no phase), also one whose row lost its phase (deleted by
                // hand and written again by another writer)
                + " AND (s.phase IS NOT NULL OR EXISTS (SELECT 1 FROM " + Sql.FLOW + " f WHERE f.flow_name = s.flow_name"
                + "   AND f.source_kind = 'pg_pipeline'))" + fence.and()
                + " RETURNING COALESCE(before.phase, 'no phase')", rs -> rs.getString(1),
                fence.bind(reason, delaySeconds, flow, table, flow, table));
    }

    /** Whether the table is in {@code phase} at {@code lsn}. */
    static boolean inPhase(Connection c, String flow, String table, Phase phase, String lsn) throws SQLException {
        return exists(c, "SELECT 1 FROM " + STATE
                + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = ? AND phase_lsn = ?",
                flow, table, phase.sqlName(), lsn);
    }
}
