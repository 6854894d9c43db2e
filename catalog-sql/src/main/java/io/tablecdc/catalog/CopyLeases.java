package io.tablecdc.catalog;

import static io.tablecdc.catalog.Sql.STATE;
import static io.tablecdc.catalog.Sql.errorText;
import static io.tablecdc.catalog.Sql.exists;
import static io.tablecdc.catalog.Sql.first;
import static io.tablecdc.catalog.Sql.nullable;
import static io.tablecdc.catalog.Sql.instant;
import static io.tablecdc.catalog.Sql.requireLsn;
import static io.tablecdc.catalog.Sql.requireName;
import static io.tablecdc.catalog.Sql.requirePositive;
import static io.tablecdc.catalog.Sql.seconds;
import static io.tablecdc.catalog.Sql.texts;
import static io.tablecdc.catalog.Sql.update;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.Collection;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * The copy tasks' side of a Postgres pipeline table in {@code copying}: claims, leases by the catalog's clock (so that
 * every worker agrees on when a lease expires), fenced writes (lease owner, claim number and an unexpired lease
 * checked where the write happens), and the retry budget ({@code copy_failures}). The phases around it are
 * {@link PgPhases}.
 */
public final class CopyLeases {

    /** The check every fenced write of a copy task makes on the table's row. */
    private static final String HOLDS_COPY = " phase = 'copying' AND copy_lease_owner = ? AND copy_attempt = ?"
            + " AND copy_lease_until > now()";

    private final CatalogDb db;

    CopyLeases(CatalogDb db) {
        this.db = db;
    }

    /**
     * Claims one table of the flow for copying: a {@code pending} table, a {@code copying} table whose lease expired
     * (its task died), or an {@code errored} table whose {@code next_retry_at} has come. The claimed table becomes
     * {@code copying}, leased to {@code owner} for {@code lease} by the catalog's clock, and its copy attempt grows by
     * one. Concurrent claims never return the same table ({@code FOR UPDATE SKIP LOCKED} on the row, then the lease).
     *
     * <p>Not idempotent by nature: each call claims another table. After a crash the lease expires and the table is
     * claimed again.
     *
     * @return the claimed table, or empty if none is claimable now
     */
    public Optional<CopyClaim> claimCopy(String flow, String owner, Duration lease) {
        return claimCopy(flow, owner, lease, null, List.of());
    }

    /**
     * {@link #claimCopy(String, String, Duration)} restricted to the tables a flow copies: with {@code only} non-null,
     * only those tables; never a table of {@code except}. A table outside them is never claimed, whatever its phase.
     * The claim reports the table's failed attempts since it was last ready ({@code copy_failures}); its
     * {@code attempt} (the table's claim count) together with {@code owner} identifies this claim in every fenced
     * write.
     *
     * @return the claimed table, or empty if none is claimable now
     */
    public Optional<CopyClaim> claimCopy(String flow, String owner, Duration lease, Collection<String> only,
                                         Collection<String> except) {
        Objects.requireNonNull(owner, "owner");
        requirePositive(lease);
        String[] onlyTables = only == null ? null : texts(only);
        String[] exceptTables = texts(except == null ? List.of() : except);
        return db.onFlow("claimCopy", flow, c -> first(c, "UPDATE " + STATE + " AS s SET phase = 'copying',"
                + " phase_lsn = NULL, copy_lease_owner = ?,"
                + " copy_lease_until = now() + make_interval(secs => ?),"
                + " copy_attempt = s.copy_attempt + 1, next_retry_at = NULL"
                + " WHERE (s.flow_name, s.source_table_identifier) = ("
                + "   SELECT c.flow_name, c.source_table_identifier FROM " + STATE + " c"
                + "   WHERE c.flow_name = ? AND (((c.phase = 'pending'"
                + "     OR (c.phase = 'copying' AND c.copy_lease_until < now())"
                + "     OR (c.phase = 'errored' AND c.next_retry_at <= now()))"
                + "   AND (CAST(? AS text[]) IS NULL OR c.source_table_identifier = ANY (CAST(? AS text[])))"
                + "   AND NOT (c.source_table_identifier = ANY (CAST(? AS text[]))))"
                // a detached table rejoins once the sink loaded every batch it has, whether it is copied or not
                + "     OR (c.phase = 'lagging' AND c.normalized_batch_id >= c.synced_batch_id)"
                + "     OR (c.phase = 'copying' AND c.detach_lsn IS NOT NULL AND c.copy_lease_until < now()))"
                + "   ORDER BY c.phase <> 'pending', c.copy_attempt, c.source_table_identifier"
                + "   LIMIT 1 FOR UPDATE SKIP LOCKED)"
                + " RETURNING s.source_table_identifier, s.copy_attempt, s.copy_lease_until, s.copy_failures,"
                + " s.detach_slot, s.detach_lsn",
                rs -> new CopyClaim(rs.getString(1), rs.getInt(2), instant(rs.getTimestamp(3)), rs.getInt(4),
                        rs.getString(5), rs.getString(6)),
                owner, seconds(lease), flow, nullable(onlyTables), nullable(onlyTables), exceptTables));
    }

    /**
     * Extends the copy lease of {@code owner} on the table to {@code lease} from now (catalog clock). May be repeated;
     * a crash in between only lets the lease run out sooner.
     *
     * @return false if {@code owner} no longer holds the table (its copy must stop)
     */
    public boolean renewCopyLease(String flow, String table, String owner, Duration lease) {
        Objects.requireNonNull(owner, "owner");
        requirePositive(lease);
        return db.onTable("renewCopyLease", flow, table, c -> update(c, "UPDATE " + STATE
                + " SET copy_lease_until = now() + make_interval(secs => ?)"
                + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'copying'"
                + " AND copy_lease_owner = ?", seconds(lease), flow, table, owner) == 1);
    }

    /**
     * Extends the lease of one claim ({@code owner}, {@code attempt}) to {@code lease} from now, only while it still
     * holds: the table is {@code copying} under this claim and the lease has not expired. A copy task calls it before
     * it hands records to Connect. May be repeated.
     *
     * @return false if the claim no longer holds (its copy must stop without sending anything more)
     */
    public boolean renewCopyLease(String flow, String table, String owner, int attempt, Duration lease) {
        Objects.requireNonNull(owner, "owner");
        requirePositive(lease);
        return db.onTable("renewCopyLease", flow, table, c -> update(c, "UPDATE " + STATE
                + " SET copy_lease_until = now() + make_interval(secs => ?)"
                + " WHERE flow_name = ? AND source_table_identifier = ? AND" + HOLDS_COPY,
                seconds(lease), flow, table, owner, attempt) == 1);
    }

    /**
     * Gives a table {@code owner} holds back to {@code pending} (its copy task stops cleanly), so another copy task
     * claims it at once instead of waiting for the lease to expire. May be called again: a table no longer held by
     * {@code owner} is left as it is.
     *
     * @return true if the table was released now
     */
    public boolean releaseCopy(String flow, String table, String owner) {
        Objects.requireNonNull(owner, "owner");
        // a detached table's rejoin goes back to lagging, to be claimed again once drained
        return db.onTable("releaseCopy", flow, table, c -> update(c, "UPDATE " + STATE + " SET"
                + " phase = CASE WHEN detach_lsn IS NULL THEN 'pending' ELSE 'lagging' END,"
                + " phase_lsn = detach_lsn, copy_lease_owner = NULL, copy_lease_until = NULL"
                + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'copying'"
                + " AND copy_lease_owner = ?", flow, table, owner) == 1);
    }

    /**
     * Records a copy's progress: rows sent so far and the expected total (raised to {@code done} when the estimate was
     * low). Only while {@code owner} holds the table. May be called again with the same values.
     *
     * @return false if {@code owner} no longer holds the table
     */
    public boolean recordCopyProgress(String flow, String table, String owner, long done, long total) {
        Objects.requireNonNull(owner, "owner");
        String held = " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'copying' AND copy_lease_owner = ?";
        return db.onTable("recordCopyProgress", flow, table, c -> update(c, "UPDATE " + STATE
                + " SET copy_rows_done = ?, copy_rows_total = ?" + held, done, Math.max(done, total), flow, table, owner) == 1
                // an update that changes nothing reports no row: check the lease
                || exists(c, "SELECT 1 FROM " + STATE + held, flow, table, owner));
    }

    /**
     * {@link #recordCopyProgress(String, String, String, long, long)} fenced by the claim and an unexpired lease.
     *
     * @return false if the claim no longer holds
     */
    public boolean recordCopyProgress(String flow, String table, String owner, int attempt, long done, long total) {
        Objects.requireNonNull(owner, "owner");
        return db.inTransaction("recordCopyProgress", flow, c -> {
            if (!holdsCopy(c, flow, table, owner, attempt)) {
                return false;
            }
            update(c, "UPDATE " + STATE + " SET copy_rows_done = ?, copy_rows_total = ?"
                    + " WHERE flow_name = ? AND source_table_identifier = ?", done, Math.max(done, total), flow, table);
            return true;
        });
    }

    /**
     * {@link BatchIdReservations#reserveBatchIds} for a copy task: only while its claim holds (checked on the locked row in the
     * same transaction as the reservation).
     *
     * @return the first reserved id, or empty if the claim no longer holds (nothing is reserved)
     */
    public Optional<Long> reserveCopyBatchIds(String flow, String table, String owner, int attempt, int count) {
        return reserveCopyBatchIds(flow, table, owner, attempt, count, 0);
    }

    /** {@link #reserveCopyBatchIds(String, String, String, int, int)} above {@code floor} as well. */
    public Optional<Long> reserveCopyBatchIds(String flow, String table, String owner, int attempt, int count,
                                              long floor) {
        BatchIdReservations.requireCount(count);
        return db.inTransaction("reserveCopyBatchIds", flow, c -> holdsCopy(c, flow, table, owner, attempt)
                ? Optional.of(BatchIdReservations.reserve(c, flow, table, count, floor)) : Optional.<Long>empty());
    }

    /**
     * {@link TableProgress#recordSync} for a copy task: only while its claim holds (checked on the locked row in the
     * same transaction as the write).
     *
     * @return false if the claim no longer holds (nothing is recorded)
     */
    public boolean recordCopySync(String flow, String table, String owner, int attempt, SyncedBatch batch, Instant at) {
        Objects.requireNonNull(batch, "batch");
        Objects.requireNonNull(at, "at");
        return db.inTransaction("recordCopySync", flow, c -> {
            if (!holdsCopy(c, flow, table, owner, attempt)) {
                return false;
            }
            TableProgress.recordSync(c, flow, table, batch, at);
            return true;
        });
    }

    /**
     * {@link PgPhases#markCatchup} fenced by the claim and an unexpired lease. May be called again after a crash: true
     * again when the table already is in {@code catchup} at {@code lsn}.
     *
     * @return false if the claim no longer holds and the table is not already in catchup at lsn
     */
    public boolean markCopyCatchup(String flow, String table, String owner, int attempt, String lsn) {
        Objects.requireNonNull(owner, "owner");
        requireLsn(lsn);
        return db.onTable("markCopyCatchup", flow, table, c -> update(c, "UPDATE " + STATE + " SET phase = 'catchup',"
                + " phase_lsn = ?, copy_lease_owner = NULL, copy_lease_until = NULL," + PgPhases.UNDETACHED
                + " WHERE flow_name = ? AND source_table_identifier = ? AND" + HOLDS_COPY,
                lsn, flow, table, owner, attempt) == 1 || PgPhases.inPhase(c, flow, table, Phase.CATCHUP, lsn));
    }

    /**
     * A copy attempt failed: like {@link PgPhases#markErrored} with an owner (only while this claim holds the table),
     * and one more failure counted against the table's retry budget ({@code copy_failures}). An interrupted attempt
     * (released, or its lease taken over) is never counted.
     *
     * @return true if the row changed now
     */
    public boolean markCopyFailed(String flow, String table, String owner, int attempt, String error, Instant at,
                                  Instant nextRetryAt) {
        Objects.requireNonNull(owner, "owner");
        Objects.requireNonNull(error, "error");
        Objects.requireNonNull(at, "at");
        return db.onTable("markCopyFailed", flow, table, c -> update(c, PgPhases.ERRORED
                + " copy_failures = copy_failures + 1," + PgPhases.COUNT_ERROR
                + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'copying'"
                + " AND copy_lease_owner = ? AND copy_attempt = ?",
                errorText(error), at, nullable(nextRetryAt), at, flow, table, owner, attempt) == 1);
    }

    /** Failed copy attempts of the table since it was last ready (0 when it has no row). */
    public int copyFailures(String flow, String table) {
        return db.onTable("copyFailures", flow, table, c -> first(c, "SELECT copy_failures FROM " + STATE
                + " WHERE flow_name = ? AND source_table_identifier = ?", rs -> rs.getInt(1), flow, table).orElse(0));
    }

    /** Locks the table's row and tells whether the claim ({@code owner}, {@code attempt}) holds it with a live lease. */
    private static boolean holdsCopy(Connection c, String flow, String table, String owner, int attempt)
            throws SQLException {
        requireName("fenced copy write", "table", table);
        Objects.requireNonNull(owner, "owner");
        return exists(c, "SELECT 1 FROM " + STATE + " WHERE flow_name = ?"
                + " AND source_table_identifier = ? AND" + HOLDS_COPY + " FOR UPDATE", flow, table, owner, attempt);
    }
}
