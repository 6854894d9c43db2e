package io.tablecdc.catalog;

import static io.tablecdc.catalog.Sql.FLOW;
import static io.tablecdc.catalog.Sql.STAGE;
import static io.tablecdc.catalog.Sql.STATE;
import static io.tablecdc.catalog.Sql.first;
import static io.tablecdc.catalog.Sql.instant;
import static io.tablecdc.catalog.Sql.list;
import static io.tablecdc.catalog.Sql.nullable;
import static io.tablecdc.catalog.Sql.texts;
import static io.tablecdc.catalog.Sql.update;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The flows ({@code cdc_flow}): one row per connector's flow with the identity of its source and destination, checked
 * on every start, the main slot of a Postgres pipeline flow, and the pruning of tables a flow no longer has.
 */
public final class Flows {

    private static final String FLOW_COLUMNS = "flow_name, source_kind, source_system_identifier, source_timeline,"
            + " source_slot, source_publication, destination_identity, config_hash, created_at, updated_at";

    private final CatalogDb db;

    Flows(CatalogDb db) {
        this.db = db;
    }

    /**
     * Registers the flow on its first start and checks its identity on every later one. Fields of {@code identity}
     * that are null are not checked; recorded fields that are null are filled in. A recorded non-null field that
     * differs from the given one refuses the resume, except the timeline when {@code acceptTimelineChange} (failover
     * recovery on), which is then updated. The config hash is replaced when given. May be called again after a crash.
     *
     * @return the flow's row after the call
     * @throws FlowIdentityMismatchException naming every recorded value and the value now seen
     */
    public FlowRecord registerFlow(String flow, FlowIdentity identity, String configHash,
                                   boolean acceptTimelineChange) {
        Objects.requireNonNull(identity, "identity");
        return db.inTransaction("registerFlow", flow, c -> {
            update(c, "INSERT INTO " + FLOW + " (flow_name, source_kind,"
                    + " source_system_identifier, source_timeline, source_slot, source_publication,"
                    + " destination_identity, config_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    + " ON CONFLICT (flow_name) DO NOTHING", flow, identity.sourceKind(), identity.systemIdentifier(),
                    nullable(identity.timeline()), identity.slot(), identity.publication(), identity.destination(),
                    configHash);
            FlowRecord stored = first(c, "SELECT " + FLOW_COLUMNS + " FROM " + FLOW + " WHERE flow_name = ? FOR UPDATE",
                    Flows::flowRecord, flow).orElseThrow();
            FlowIdentity recorded = stored.identity();
            List<String> mismatches = new ArrayList<>();
            compare(mismatches, "source kind", recorded.sourceKind(), identity.sourceKind());
            compare(mismatches, "source system identifier", recorded.systemIdentifier(), identity.systemIdentifier());
            compare(mismatches, "slot", recorded.slot(), identity.slot());
            compare(mismatches, "publication", recorded.publication(), identity.publication());
            compare(mismatches, "destination", recorded.destination(), identity.destination());
            if (!acceptTimelineChange) {
                compare(mismatches, "timeline", recorded.timeline(), identity.timeline());
            }
            if (!mismatches.isEmpty()) {
                throw CatalogDb.flowMismatch("flow '" + flow + "' refuses to resume: "
                        + String.join("; ", mismatches) + ". The catalog and the source offsets belong to"
                        + " another source or destination; start a new flow (another connector name) or"
                        + " delete this flow's catalog rows and offsets to start over.");
            }
            update(c, "UPDATE " + FLOW + " SET"
                    + " source_kind = COALESCE(source_kind, ?),"
                    + " source_system_identifier = COALESCE(source_system_identifier, ?),"
                    + " source_timeline = COALESCE(?, source_timeline),"
                    + " source_slot = COALESCE(source_slot, ?),"
                    + " source_publication = COALESCE(source_publication, ?),"
                    + " destination_identity = COALESCE(destination_identity, ?),"
                    + " config_hash = COALESCE(?, config_hash)"
                    + " WHERE flow_name = ?", identity.sourceKind(), identity.systemIdentifier(),
                    nullable(identity.timeline()), identity.slot(), identity.publication(), identity.destination(),
                    configHash, flow);
            return readFlow(c, flow).orElseThrow();
        });
    }

    /** {@link #registerFlow(String, FlowIdentity, String, boolean)} refusing a timeline change. */
    public FlowRecord registerFlow(String flow, FlowIdentity identity, String configHash) {
        return registerFlow(flow, identity, configHash, false);
    }

    /**
     * Replaces the flow's main slot {@code oldSlot} (one the server invalidated) with {@code newSlot} and, in the same
     * transaction, puts every table of the flow back in {@code pending} with a fresh copy attempt count, no error and
     * no lease, so that each is copied again from the new slot. Recording the new name before the slot exists keeps
     * the usual order (name first, then the slot). May be called again after a crash: when the flow already records
     * {@code newSlot} nothing changes.
     *
     * @return the tables put back in pending (empty when the slot was already replaced)
     * @throws FlowIdentityMismatchException when the flow records neither slot
     */
    public List<String> replaceSlot(String flow, String oldSlot, String newSlot) {
        Objects.requireNonNull(oldSlot, "oldSlot");
        Objects.requireNonNull(newSlot, "newSlot");
        return db.inTransaction("replaceSlot", flow, c -> {
            String recorded = first(c, "SELECT source_slot FROM " + FLOW + " WHERE flow_name = ? FOR UPDATE",
                    rs -> rs.getString(1), flow).orElse(null);
            if (newSlot.equals(recorded)) {
                return List.<String>of();
            }
            if (!oldSlot.equals(recorded)) {
                throw CatalogDb.flowMismatch("flow '" + flow + "' records slot '" + recorded
                        + "', not '" + oldSlot + "': the slot was not replaced");
            }
            update(c, "UPDATE " + FLOW + " SET source_slot = ? WHERE flow_name = ?", newSlot, flow);
            List<String> tables = list(c, "UPDATE " + STATE + " SET phase = 'pending',"
                    + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL, copy_attempt = 0,"
                    + " copy_failures = 0, next_retry_at = NULL, last_error = NULL," + PgPhases.UNDETACHED
                    + " WHERE flow_name = ? RETURNING source_table_identifier", rs -> rs.getString(1), flow);
            tables.sort(null);
            return tables;
        });
    }

    /**
     * Raises the flow's apply epoch for {@code owner}, an apply task that starts streaming; see
     * {@link Catalog#takeApply}. Not idempotent: each call is a new ownership.
     *
     * @return the new epoch, or empty when the flow has no row
     */
    Optional<Long> takeApply(String flow, String owner) {
        return db.onFlowUnfenced("takeApply", flow, c -> first(c, "UPDATE " + FLOW
                + " SET apply_epoch = apply_epoch + 1, apply_owner = ? WHERE flow_name = ? RETURNING apply_epoch",
                rs -> rs.getLong(1), Sql.truncate(owner, 200), flow));
    }

    /** The flow's row. Read-only. */
    public Optional<FlowRecord> getFlow(String flow) {
        return db.onFlow("getFlow", flow, c -> readFlow(c, flow));
    }

    /** Every flow, by name. Read-only. */
    public List<FlowRecord> listFlows() {
        return db.onCatalog("listFlows", c -> list(c, "SELECT " + FLOW_COLUMNS + " FROM " + FLOW
                + " ORDER BY flow_name", Flows::flowRecord));
    }

    /**
     * The source kind of each flow of {@code flows} (of every flow when it is empty) that has a flow row or table rows,
     * by flow name (null for a flow with table rows only), on the caller's connection. Read-only.
     */
    public static Map<String, String> flowKinds(Connection c, List<String> flows) throws SQLException {
        Map<String, String> kinds = new LinkedHashMap<>();
        for (String[] row : list(c, "SELECT n.flow_name, f.source_kind FROM"
                + " (SELECT flow_name FROM " + FLOW + " UNION SELECT flow_name FROM " + STATE + ") n"
                + " LEFT JOIN " + FLOW + " f ON f.flow_name = n.flow_name"
                + " WHERE ? OR n.flow_name = ANY (?) ORDER BY n.flow_name",
                rs -> new String[] {rs.getString(1), rs.getString(2)}, flows.isEmpty(), texts(flows))) {
            kinds.put(row[0], row[1]);
        }
        return kinds;
    }

    /**
     * Deletes the state and stage rows of the flow's tables that are not in {@code tablesInFlow} (tables removed from
     * the flow's config); other flows are never touched. The stage files of pruned tables are left in the object
     * store. May be called again after a crash.
     *
     * @param tablesInFlow the flow's tables now; must not be empty (an empty list is most likely a configuration
     *                     mistake, and would erase the whole flow)
     * @return the pruned tables, by name
     */
    public List<String> pruneTables(String flow, Collection<String> tablesInFlow) {
        Objects.requireNonNull(tablesInFlow, "tablesInFlow");
        if (tablesInFlow.isEmpty()) {
            throw new IllegalArgumentException("pruneTables for flow '" + flow + "' needs the flow's tables;"
                    + " refusing to prune every table");
        }
        String[] keep = texts(tablesInFlow);
        return db.inTransaction("pruneTables", flow, c -> {
            update(c, "DELETE FROM " + STAGE + " WHERE flow_name = ? AND NOT (source_table_identifier = ANY (?))",
                    flow, keep);
            List<String> pruned = list(c, "DELETE FROM " + STATE
                    + " WHERE flow_name = ? AND NOT (source_table_identifier = ANY (?))"
                    + " RETURNING source_table_identifier", rs -> rs.getString(1), flow, keep);
            pruned.sort(null);
            return pruned;
        });
    }

    /** What {@link #pruneLoadedTables} did: the tables pruned, and those kept until the sink has loaded them. */
    public record Pruned(List<String> pruned, List<String> keptUntilLoaded) {
    }

    /**
     * As {@link #pruneTables}, but a removed table whose batches the sink has not loaded yet (staged batches, or synced
     * batches above its normalized one) is kept, its staged batches with it, so that removing a table from a config
     * loses nothing; a later call prunes it once the sink has loaded them. May be called again after a crash.
     */
    public Pruned pruneLoadedTables(String flow, Collection<String> tablesInFlow) {
        Objects.requireNonNull(tablesInFlow, "tablesInFlow");
        if (tablesInFlow.isEmpty()) {
            throw new IllegalArgumentException("pruneTables for flow '" + flow + "' needs the flow's tables;"
                    + " refusing to prune every table");
        }
        String[] keep = texts(tablesInFlow);
        return db.inTransaction("pruneTables", flow, c -> {
            List<String> unloaded = list(c, "SELECT source_table_identifier FROM " + STATE + " s"
                    + " WHERE flow_name = ? AND NOT (source_table_identifier = ANY (?))"
                    + " AND (synced_batch_id > normalized_batch_id OR EXISTS (SELECT 1 FROM " + STAGE + " st"
                    + "   WHERE st.flow_name = s.flow_name AND st.source_table_identifier = s.source_table_identifier))"
                    + " UNION SELECT source_table_identifier FROM " + STAGE
                    + " WHERE flow_name = ? AND NOT (source_table_identifier = ANY (?))",
                    rs -> rs.getString(1), flow, keep, flow, keep);
            List<String> kept = new java.util.ArrayList<>(unloaded);
            kept.sort(null);
            java.util.List<String> all = new java.util.ArrayList<>(tablesInFlow);
            all.addAll(kept);
            List<String> pruned = list(c, "DELETE FROM " + STATE
                    + " WHERE flow_name = ? AND NOT (source_table_identifier = ANY (?))"
                    + " RETURNING source_table_identifier", rs -> rs.getString(1), flow, texts(all));
            pruned.sort(null);
            return new Pruned(pruned, kept);
        });
    }

    // ---------------------------------------------------------------- tablecdc-retire-flow, on its connection

    /**
     * A flow as {@link #lockForRetire} locked it: its tables, its main replication slot (null for a flow without one),
     * the private slots its tables hold, and what of it still runs (a copy task's or a sink task's live lease), one line
     * each.
     */
    public record RetiringFlow(List<String> tables, String mainSlot, List<String> detachSlots, List<String> running) {
    }

    /**
     * Locks the flow's row and its tables' rows for the caller's transaction and reads what {@link #retire} removes and
     * whether a task of the flow still runs: a copy lease or a normalize lease (a sink loading one of its tables now)
     * that has not run out.
     *
     * @return empty when the catalog has no row of the flow
     */
    public static Optional<RetiringFlow> lockForRetire(Connection c, String flow) throws SQLException {
        Optional<String> slot = first(c, "SELECT coalesce(source_slot, '') FROM " + FLOW + " WHERE flow_name = ? FOR UPDATE",
                rs -> rs.getString(1), flow);
        List<String> tables = new java.util.ArrayList<>();
        List<String> detachSlots = new java.util.ArrayList<>();
        List<String> running = new java.util.ArrayList<>();
        for (String[] row : list(c, "SELECT source_table_identifier, detach_slot,"
                + " CASE WHEN copy_lease_until > now() THEN copy_lease_owner END,"
                + " CASE WHEN normalize_lease_until > now() THEN normalize_lease_owner END"
                + " FROM " + STATE + " WHERE flow_name = ? ORDER BY source_table_identifier FOR UPDATE",
                rs -> new String[] {rs.getString(1), rs.getString(2), rs.getString(3), rs.getString(4)}, flow)) {
            tables.add(row[0]);
            if (row[1] != null) {
                detachSlots.add(row[1]);
            }
            if (row[2] != null) {
                running.add("table " + row[0] + ": copy task " + row[2] + " holds its copy lease");
            }
            if (row[3] != null) {
                running.add("table " + row[0] + ": sink task " + row[3] + " is loading it");
            }
        }
        if (slot.isEmpty() && tables.isEmpty()) {
            return Optional.empty();
        }
        String main = slot.filter(name -> !name.isEmpty()).orElse(null);
        return Optional.of(new RetiringFlow(tables, main, detachSlots, running));
    }

    /** What {@link #retire} removed: the flow's tables and their staged and quarantined batches. */
    public record Retired(int tables, int stagedBatches, int quarantinedBatches) {
    }

    /**
     * Removes the flow from the catalog, on the caller's connection: its row, its tables' rows (with them their
     * destinations, so that a flow under another name may load those ClickHouse tables) and their staged and
     * quarantined batches. Stage files are left in the object store.
     */
    public static Retired retire(Connection c, String flow) throws SQLException {
        int staged = update(c, "DELETE FROM " + STAGE + " WHERE flow_name = ?", flow);
        int quarantined = update(c, "DELETE FROM " + Sql.QUARANTINE + " WHERE flow_name = ?", flow);
        int tables = update(c, "DELETE FROM " + STATE + " WHERE flow_name = ?", flow);
        update(c, "DELETE FROM " + FLOW + " WHERE flow_name = ?", flow);
        return new Retired(tables, staged, quarantined);
    }

    private static Optional<FlowRecord> readFlow(Connection c, String flow) throws SQLException {
        return first(c, "SELECT " + FLOW_COLUMNS + " FROM " + FLOW + " WHERE flow_name = ?", Flows::flowRecord, flow);
    }

    private static void compare(List<String> mismatches, String what, Object recorded, Object seen) {
        if (recorded != null && seen != null && !recorded.equals(seen)) {
            mismatches.add(what + " was '" + recorded + "' when the flow was created but is '" + seen + "' now");
        }
    }

    private static FlowRecord flowRecord(ResultSet rs) throws SQLException {
        long timeline = rs.getLong(4);
        Long timelineOrNull = rs.wasNull() ? null : timeline;
        return new FlowRecord(rs.getString(1),
                new FlowIdentity(rs.getString(2), rs.getString(3), timelineOrNull, rs.getString(5),
                        rs.getString(6), rs.getString(7)),
                rs.getString(8), instant(rs.getTimestamp(9)), instant(rs.getTimestamp(10)));
    }
}
