package io.tablecdc.catalog;

import static io.tablecdc.catalog.Sql.STATE;
import static io.tablecdc.catalog.Sql.first;
import static io.tablecdc.catalog.Sql.list;
import static io.tablecdc.catalog.Sql.requireName;
import static io.tablecdc.catalog.Sql.seconds;
import static io.tablecdc.catalog.Sql.update;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * What the ClickHouse stage sink holds of a table: the topic and the sink that load it, the destination table it is
 * loaded into, and the normalize lease (by the catalog's clock) that lets one normalize loop at a time load it, with the
 * normalize epoch that {@code tablecdc-reload-table} raises.
 */
public final class SinkLeases {

    private final CatalogDb db;

    SinkLeases(CatalogDb db) {
        this.db = db;
    }

    /**
     * Records which sink connector loads the table and from which Kafka topic. Writes only when either changed, and
     * never while another sink holds the table ({@link #claimDestination(String, String, String, String, String, Duration)}).
     * May be called again after a crash.
     *
     * @return true if the row changed now
     */
    public boolean recordSinkTopic(String flow, String table, String sinkName, String topic) {
        return db.onTable("recordSinkTopic", flow, table, c -> update(c, "UPDATE " + STATE
                + " SET sink_name = ?, sink_topic = ?"
                + " WHERE flow_name = ? AND source_table_identifier = ?"
                + " AND (sink_name IS DISTINCT FROM ? OR sink_topic IS DISTINCT FROM ?) AND " + HOLD_FREE,
                sinkName, topic, flow, table, sinkName, topic, sinkName) == 1);
    }

    /** How long a sink's hold on a table lasts unless renewed: a sink task renews it well within this time. */
    public static final Duration SINK_HOLD = Duration.ofSeconds(90);

    /** The row's sink hold is free for sink {@code ?}: nobody holds it, that sink does, or the hold ran out. */
    private static final String HOLD_FREE = "(sink_name IS NULL OR sink_name = ? OR sink_lease_until IS NULL"
            + " OR sink_lease_until <= now())";

    /** The sink hold's end as text, ISO-8601 in UTC. */
    private static final String HOLD_UNTIL = "to_char(sink_lease_until AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')";

    /** The rows of {@code ?} (flows) and {@code ?} (tables), pair by pair, that sink {@code ?} holds. */
    private static final String SINKS_TABLES = " FROM unnest(?::text[], ?::text[]) AS k(flow_name, table_name)"
            + " WHERE s.flow_name = k.flow_name AND s.source_table_identifier = k.table_name AND s.sink_name = ?";

    /**
     * Renews sink {@code sinkName}'s hold on the tables it holds among {@code flows}/{@code tables} (pairs at the same
     * index) by {@code hold} from now; a table another sink took meanwhile is left. May be called again after a crash.
     *
     * @return how many holds were renewed
     */
    public int renewSinkHolds(String sinkName, List<String> flows, List<String> tables, Duration hold) {
        Objects.requireNonNull(sinkName, "sinkName");
        if (flows.isEmpty()) {
            return 0;
        }
        return db.onCatalog("renewSinkHolds", c -> update(c, "UPDATE " + STATE + " AS s"
                + " SET sink_lease_until = now() + make_interval(secs => ?)" + SINKS_TABLES,
                seconds(hold), Sql.texts(flows), Sql.texts(tables), sinkName));
    }

    /**
     * Gives up sink {@code sinkName}'s hold on the tables among {@code flows}/{@code tables} (a sink task that stops), so
     * that another sink may take them at once. The sink stays recorded as the one that loads them. May be called again.
     */
    public int releaseSinkHolds(String sinkName, List<String> flows, List<String> tables) {
        Objects.requireNonNull(sinkName, "sinkName");
        if (flows.isEmpty()) {
            return 0;
        }
        return db.onCatalog("releaseSinkHolds", c -> update(c, "UPDATE " + STATE + " AS s SET sink_lease_until = NULL"
                + SINKS_TABLES + " AND s.sink_lease_until IS NOT NULL",
                Sql.texts(flows), Sql.texts(tables), sinkName));
    }

    /**
     * The tables that sink {@code sinkName} loads from {@code topic}, other than {@code flow}/{@code table}, as
     * "flow F, table T" (for a sink that binds each topic to one table). Read-only.
     */
    public List<String> otherTablesOfSinkTopic(String sinkName, String topic, String flow, String table) {
        return db.onTable("otherTablesOfSinkTopic", flow, table, c -> list(c, "SELECT flow_name,"
                + " source_table_identifier FROM " + STATE
                + " WHERE sink_name = ? AND sink_topic = ? AND NOT (flow_name = ? AND source_table_identifier = ?)"
                + " ORDER BY flow_name, source_table_identifier",
                rs -> "flow " + rs.getString(1) + ", table " + rs.getString(2), sinkName, topic, flow, table));
    }

    /**
     * Takes or renews the lease on loading the table into ClickHouse, for {@code lease} from the catalog's clock:
     * granted when nobody holds it, {@code owner} holds it already, or its holder's lease has expired. One sink
     * normalize loop per table holds it while it loads, so that two loops never load, truncate or raise the normalized
     * id of one table at the same time, not even while a rebalance moves the table between tasks. May be called again
     * after a crash.
     *
     * @return true if {@code owner} holds the lease now
     * @throws CatalogException when the table has no row
     */
    public boolean claimNormalizeLease(String flow, String table, String owner, Duration lease) {
        Objects.requireNonNull(owner, "owner");
        if (lease == null || lease.isNegative() || lease.isZero()) {
            throw new IllegalArgumentException("a normalize lease must be positive: " + lease);
        }
        return db.onTable("claimNormalizeLease", flow, table, c -> update(c, "UPDATE " + STATE
                + " SET normalize_lease_owner = ?, normalize_lease_until = now() + make_interval(secs => ?)"
                + " WHERE flow_name = ? AND source_table_identifier = ?"
                + " AND (normalize_lease_owner IS NULL OR normalize_lease_owner = ? OR normalize_lease_until < now())",
                owner, seconds(lease), flow, table, owner) == 1);
    }

    /**
     * Extends {@code owner}'s normalize lease of the table by {@code lease} from now; nothing when another owner holds
     * it or nobody does (a lease given up is not taken again by a late renewal). May be called again after a crash.
     *
     * @return true if {@code owner} still holds the lease
     */
    public boolean renewNormalizeLease(String flow, String table, String owner, Duration lease) {
        Objects.requireNonNull(owner, "owner");
        Objects.requireNonNull(lease, "lease");
        return db.onTable("renewNormalizeLease", flow, table, c -> update(c, "UPDATE " + STATE + " SET"
                + " normalize_lease_until = now() + make_interval(secs => ?)"
                + " WHERE flow_name = ? AND source_table_identifier = ? AND normalize_lease_owner = ?",
                seconds(lease), flow, table, owner) == 1);
    }

    /**
     * Gives up {@code owner}'s normalize lease of the table (nothing when another owner holds it). May be called again
     * after a crash.
     *
     * @return true if {@code owner} held it
     */
    public boolean releaseNormalizeLease(String flow, String table, String owner) {
        Objects.requireNonNull(owner, "owner");
        return db.onTable("releaseNormalizeLease", flow, table, c -> update(c, "UPDATE " + STATE
                + " SET normalize_lease_owner = NULL, normalize_lease_until = NULL"
                + " WHERE flow_name = ? AND source_table_identifier = ? AND normalize_lease_owner = ?",
                flow, table, owner) == 1);
    }

    /** Who holds the table's normalize lease and until when, or empty when nobody does. Read-only. */
    public Optional<String> normalizeLeaseHolder(String flow, String table) {
        return db.onTable("normalizeLeaseHolder", flow, table, c -> first(c, "SELECT normalize_lease_owner || ' until '"
                + " || to_char(normalize_lease_until AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM " + STATE
                + " WHERE flow_name = ? AND source_table_identifier = ? AND normalize_lease_owner IS NOT NULL",
                rs -> rs.getString(1), flow, table));
    }

    /**
     * How many times the table was reloaded into ClickHouse by an operator ({@code tablecdc-reload-table}); 0 for a
     * table never reloaded or without a row. Part of the sink's deduplication tokens. Read-only.
     */
    public int normalizeEpoch(String flow, String table) {
        return db.onTable("normalizeEpoch", flow, table, c -> first(c, "SELECT normalize_epoch FROM " + STATE
                + " WHERE flow_name = ? AND source_table_identifier = ?", rs -> rs.getInt(1), flow, table).orElse(0));
    }

    /**
     * Records that the table is loaded into {@code destination} (a ClickHouse table, named with the identity of its
     * database), unless another table of the catalog is loaded there already (two source tables never share a
     * destination table) or this table already has batches loaded into another destination (a table never moves
     * silently: a reload or a reset, which start its loads over, clear that). May be called again after a crash.
     *
     * @return empty when {@code destination} is this table's now, otherwise why not
     */
    public Optional<DestinationRefusal> claimDestination(String flow, String table, String destination) {
        return claimDestination(flow, table, destination, null);
    }

    /**
     * As {@link #claimDestination(String, String, String)}, where {@code formerName} (null for none) is another name of
     * the same destination, as an earlier release recorded it: a table recorded under it is taken as loaded into
     * {@code destination} and its row rewritten to {@code destination}, and another table recorded under it holds
     * {@code destination}. May be called again after a crash.
     */
    public Optional<DestinationRefusal> claimDestination(String flow, String table, String destination, String formerName) {
        return claimDestination(flow, table, destination, formerName, null, null);
    }

    /**
     * As {@link #claimDestination(String, String, String, String)}, for sink {@code sinkName} (null: no sink's hold is
     * checked or taken), which also takes or renews its hold on the table for {@code hold}, in the same statement that
     * records the destination: refused while another sink holds it ({@link DestinationRefusal.HeldBySink}), so that two
     * sinks never load some batches each of one table. May be called again after a crash.
     */
    public Optional<DestinationRefusal> claimDestination(String flow, String table, String destination, String formerName,
                                                         String sinkName, Duration hold) {
        requireName("claimDestination", "destination", destination);
        String former = formerName == null || formerName.equals(destination) ? null : formerName;
        return db.onTable("claimDestination", flow, table, c -> {
            Optional<DestinationRefusal> held = destinationHolder(c, flow, table, destination);
            if (held.isEmpty() && former != null) {
                held = destinationHolder(c, flow, table, former);
            }
            if (held.isEmpty() && sinkName != null) {
                held = sinkHolder(c, flow, table, sinkName);
            }
            if (held.isPresent()) {
                return held;
            }
            Optional<DestinationRefusal> elsewhere = first(c, "SELECT destination_table, normalized_batch_id FROM "
                    + STATE + " WHERE flow_name = ? AND source_table_identifier = ?", rs -> {
                        String current = rs.getString(1);
                        long normalized = rs.getLong(2);
                        return current != null && !current.equals(destination) && !current.equals(former) && normalized > 0
                                ? new DestinationRefusal.LoadedElsewhere(current, normalized) : null;
                    }, flow, table);
            if (elsewhere.isPresent()) {
                return elsewhere;
            }
            try {
                if (sinkName == null) {
                    update(c, "UPDATE " + STATE + " SET destination_table = ? WHERE flow_name = ?"
                            + " AND source_table_identifier = ? AND destination_table IS DISTINCT FROM ?",
                            destination, flow, table, destination);
                } else if (update(c, "UPDATE " + STATE + " SET destination_table = ?, sink_name = ?,"
                        + " sink_lease_until = now() + make_interval(secs => ?)"
                        + " WHERE flow_name = ? AND source_table_identifier = ? AND " + HOLD_FREE,
                        destination, sinkName, seconds(Objects.requireNonNull(hold, "hold")), flow, table, sinkName) == 0) {
                    // another sink took it between the check and now (the hold, checked again in the statement)
                    return sinkHolder(c, flow, table, sinkName);
                }
            } catch (SQLException e) {
                if ("23505".equals(e.getSQLState())) {
                    // another table took it at the same moment
                    return destinationHolder(c, flow, table, destination);
                }
                throw e;
            }
            return Optional.<DestinationRefusal>empty();
        });
    }

    /** Another sink's live hold on the table, as a refusal of {@code sinkName}'s claim. */
    private static Optional<DestinationRefusal> sinkHolder(Connection c, String flow, String table, String sinkName)
            throws SQLException {
        return first(c, "SELECT sink_name, destination_table, " + HOLD_UNTIL + " FROM " + STATE
                + " WHERE flow_name = ? AND source_table_identifier = ? AND sink_name <> ? AND sink_lease_until > now()",
                rs -> new DestinationRefusal.HeldBySink(rs.getString(1), rs.getString(2), rs.getString(3)),
                flow, table, sinkName);
    }

    private static Optional<DestinationRefusal> destinationHolder(Connection c, String flow, String table,
                                                                  String destination) throws SQLException {
        return first(c, "SELECT flow_name, source_table_identifier FROM " + STATE
                + " WHERE destination_table = ? AND NOT (flow_name = ? AND source_table_identifier = ?)",
                rs -> new DestinationRefusal.HeldBy("flow " + rs.getString(1) + ", table " + rs.getString(2),
                        rs.getString(1)), destination, flow, table);
    }

    // ---------------------------------------------------------------- operator commands, on their connection

    /**
     * The table's row as {@link #lockForOperator} locked it: the normalize lease's live holder (or null), the last
     * error, the normalized batch id, the batch ClickHouse refused when the last error is that refusal (or null), and
     * the sink connector whose hold on the table has not run out and when that hold ends (ISO-8601, UTC), or nulls.
     */
    public record LockedTable(String leaseHolder, String lastError, long normalizedBatchId, Long refusedBatchId,
                              String holdingSink, String holdUntil) {
    }

    /**
     * Locks the table's row for the caller's transaction and reads who holds an unexpired normalize lease on it (a
     * sink task loading it now), which sink holds it (a running sink that loads it, even when idle), its last error, its normalized batch id and the batch whose refusal by ClickHouse
     * is that last error ({@link TableProgress#recordError(String, String, String, java.time.Instant, java.time.Instant, Long)}): only
     * while {@code refused_at} is the last error's time, so a later error of any kind, or none, names no batch.
     *
     * @return empty when the flow has no such table
     */
    public static Optional<LockedTable> lockForOperator(Connection c, String flow, String table) throws SQLException {
        return first(c, "SELECT normalize_lease_owner, normalize_lease_until > now(), last_error, normalized_batch_id,"
                + " CASE WHEN last_error IS NOT NULL AND refused_at = last_error_at THEN refused_batch_id END,"
                + " CASE WHEN sink_lease_until > now() THEN sink_name END, " + HOLD_UNTIL
                + " FROM " + STATE + " WHERE flow_name = ? AND source_table_identifier = ? FOR UPDATE",
                rs -> new LockedTable(rs.getBoolean(2) ? rs.getString(1) : null, rs.getString(3), rs.getLong(4),
                        Sql.nullableLong(rs, 5), rs.getString(6),
                        rs.getString(6) == null ? null : rs.getString(7)),
                flow, table);
    }

    /** Where {@link #reload} left the table: its normalized batch id before, and its normalize epoch now. */
    public record Reloaded(long normalizedBatchIdBefore, int normalizeEpoch) {
    }

    /**
     * Lets the sink load the table again from Kafka, on the caller's connection: normalized batch id and
     * insert/update/delete counts back to 0, the normalize epoch raised, the normalize lease and the error episode
     * cleared. The caller drops the table's stages ({@link Stages#dropStages}).
     */
    public static Reloaded reload(Connection c, String flow, String table) throws SQLException {
        return first(c, "UPDATE " + STATE + " AS s"
                + " SET normalized_batch_id = 0, inserts_count = 0, updates_count = 0, deletes_count = 0,"
                + " normalize_epoch = s.normalize_epoch + 1, normalize_lease_owner = NULL, normalize_lease_until = NULL,"
                + " last_error = NULL, last_error_at = NULL, error_count = 0, next_retry_at = NULL"
                + " FROM (SELECT normalized_batch_id FROM " + STATE + " WHERE flow_name = ?"
                + "   AND source_table_identifier = ?) old"
                + " WHERE s.flow_name = ? AND s.source_table_identifier = ?"
                + " RETURNING old.normalized_batch_id, s.normalize_epoch",
                rs -> new Reloaded(rs.getLong(1), rs.getInt(2)), flow, table, flow, table)
                .orElseThrow(() -> new SQLException("flow " + flow + " has no table " + table + " to reload"));
    }
}
