package io.tablecdc.pg;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import io.tablecdc.pg.config.PgPipelineConfig;
import io.tablecdc.pg.wire.Lsn;
import io.tablecdc.pg.wire.PgOutputMessage.Column;
import io.tablecdc.pg.wire.PgOutputMessage.Relation;
import io.tablecdc.pg.wire.PgOutputMessage.ReplicaIdentity;

/**
 * The SQL the pipeline runs on the source database: server checks, the publication's tables, slots, primary keys,
 * relation descriptions for copies and handover markers. Every statement is read-only except
 * {@link #emitHandover}, the slot creation and the slot drops; all use bound parameters.
 */
final class SourceDatabase {
    private SourceDatabase() {
    }

    /** A regular connection to the source database. */
    static Connection connect(PgPipelineConfig config, String applicationName) throws SQLException {
        return DriverManager.getConnection(config.jdbcUrl(), config.connectionProperties(applicationName, false));
    }

    /**
     * How long a statement of the apply task waits for a lock ({@code lock_timeout}). Its statements on the system
     * catalogs take no lock on a user table, but {@code pg_publication_tables} opens every published table: while a
     * DDL or TRUNCATE queues for {@code ACCESS EXCLUSIVE} behind a copy's {@code ACCESS SHARE} lock, every later lock
     * request on that table queues behind the DDL, for as long as the copy reads. Bounded, the read fails with
     * {@link #lockTimedOut} and is tried again later while the stream goes on.
     */
    static final int APPLY_LOCK_TIMEOUT_MS = 2_000;

    /** Bounds every lock wait of {@code c}'s statements to {@code millis} ({@code lock_timeout}, for the session). */
    static void boundLockWaits(Connection c, int millis) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT set_config('lock_timeout', ?, false)")) {
            ps.setString(1, millis + "ms");
            ps.execute();
        }
    }

    /** Whether {@code e} is a statement given up after {@code lock_timeout} (SQLSTATE 55P03, lock_not_available). */
    static boolean lockTimedOut(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLException sql && "55P03".equals(sql.getSQLState())) {
                return true;
            }
        }
        return false;
    }

    /** A logical replication connection ({@code replication=database}) to the source database. */
    static Connection connectReplication(PgPipelineConfig config, String applicationName) throws SQLException {
        return DriverManager.getConnection(config.jdbcUrl(), config.connectionProperties(applicationName, true));
    }

    /** What {@code IDENTIFY_SYSTEM} says on a replication connection. */
    record SystemIdentity(String systemIdentifier, long timeline, Lsn position) {
    }

    static SystemIdentity identify(Connection replication) throws SQLException {
        try (Statement s = replication.createStatement(); ResultSet rs = s.executeQuery("IDENTIFY_SYSTEM")) {
            rs.next();
            return new SystemIdentity(rs.getString(1), rs.getLong(2), Lsn.parse(rs.getString(3)));
        }
    }

    static String walLevel(Connection c) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SHOW wal_level")) {
            rs.next();
            return rs.getString(1);
        }
    }

    /**
     * Whether {@code e} says the source could not be reached or went away (SQLSTATE class 08, or the server shutting
     * down or not accepting connections yet, 57P01-57P03): an outage to ride out, not a fault of a table or of the
     * configuration.
     */
    static boolean unreachable(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof java.sql.SQLRecoverableException) {
                return true;
            }
            if (t instanceof SQLException sql && sql.getSQLState() != null) {
                String state = sql.getSQLState();
                if (state.startsWith("08") || state.equals("57P01") || state.equals("57P02") || state.equals("57P03")) {
                    return true;
                }
            }
        }
        return false;
    }

    static boolean publicationExists(Connection c, String publication) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT 1 FROM pg_publication WHERE pubname = ?")) {
            ps.setString(1, publication);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next();
            }
        }
    }

    /** The publication's tables as {@code schema.table}, sorted. */
    static List<String> publicationTables(Connection c, String publication) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT schemaname, tablename FROM pg_publication_tables"
                + " WHERE pubname = ? ORDER BY schemaname, tablename")) {
            ps.setString(1, publication);
            List<String> tables = new ArrayList<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    tables.add(rs.getString(1) + "." + rs.getString(2));
                }
            }
            return tables;
        }
    }

    /**
     * The publication's tables ({@code schema.table}, sorted) with the entry by which each belongs to it: its relation
     * and the {@code pg_publication_rel} row that lists it, else the {@code pg_publication_namespace} row of its schema
     * (PostgreSQL 15+), else the publication itself ({@code FOR ALL TABLES}). A table removed from the publication and
     * added again, or dropped and created again, has another entry.
     */
    static Map<String, String> publicationMembers(Connection c, String publication) throws SQLException {
        String schemaEntry = serverVersionNum(c) >= 150000
                ? "(SELECT CAST(pn.oid AS text) FROM pg_publication_namespace pn WHERE pn.pnpubid = p.oid"
                        + " AND pn.pnnspid = cl.relnamespace)"
                : "CAST(NULL AS text)";
        try (PreparedStatement ps = c.prepareStatement("SELECT t.schemaname, t.tablename, CAST(cl.oid AS text),"
                + " (SELECT CAST(pr.oid AS text) FROM pg_publication_rel pr WHERE pr.prpubid = p.oid"
                + "   AND pr.prrelid = cl.oid), " + schemaEntry
                + " FROM pg_publication p JOIN pg_publication_tables t ON t.pubname = p.pubname"
                + " JOIN pg_namespace n ON n.nspname = t.schemaname"
                + " JOIN pg_class cl ON cl.relnamespace = n.oid AND cl.relname = t.tablename"
                + " WHERE p.pubname = ? ORDER BY t.schemaname, t.tablename")) {
            ps.setString(1, publication);
            Map<String, String> members = new LinkedHashMap<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    String entry = rs.getString(4) != null ? "table entry " + rs.getString(4)
                            : rs.getString(5) != null ? "schema entry " + rs.getString(5) : "all tables";
                    members.put(rs.getString(1) + "." + rs.getString(2), "relation " + rs.getString(3) + ", " + entry);
                }
            }
            return members;
        }
    }

    /** Whether the connected user may open replication connections (REPLICATION attribute or superuser). */
    static boolean canReplicate(Connection c) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(
                "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user")) {
            return rs.next() && rs.getBoolean(1);
        }
    }

    /**
     * A replication slot as {@code pg_replication_slots} shows it; {@code failover} is false on servers before
     * PostgreSQL 17, which have no failover slots.
     */
    record Slot(String name, String plugin, String database, Lsn confirmedFlush, String walStatus, boolean failover) {
    }

    static Optional<Slot> slot(Connection c, String name) throws SQLException {
        // the failover column exists from PostgreSQL 17 on: read through jsonb so that one statement fits every version
        try (PreparedStatement ps = c.prepareStatement("SELECT slot_name, plugin, database, confirmed_flush_lsn::text,"
                + " wal_status, COALESCE(CAST(to_jsonb(s) ->> 'failover' AS boolean), false)"
                + " FROM pg_replication_slots s WHERE slot_name = ?")) {
            ps.setString(1, name);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return Optional.empty();
                }
                String confirmed = rs.getString(4);
                return Optional.of(new Slot(rs.getString(1), rs.getString(2), rs.getString(3),
                        confirmed == null ? null : Lsn.parse(confirmed), rs.getString(5), rs.getBoolean(6)));
            }
        }
    }

    /**
     * The logical slots of {@code database} named like a flow's main slot, {@code <slotPrefix>_<16 hex digits>}
     * (copy slots have another shape), by name.
     */
    static List<String> mainSlotsLike(Connection c, String slotPrefix, String database) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT slot_name FROM pg_replication_slots"
                + " WHERE slot_type = 'logical' AND database = ? AND left(slot_name, length(?) + 1) = ? || '_'"
                + " AND substr(slot_name, length(?) + 2) ~ '^[0-9a-f]{16}$' ORDER BY slot_name")) {
            ps.setString(1, database);
            ps.setString(2, slotPrefix);
            ps.setString(3, slotPrefix);
            ps.setString(4, slotPrefix);
            List<String> slots = new ArrayList<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    slots.add(rs.getString(1));
                }
            }
            return slots;
        }
    }

    /** {@code server_version_num}, e.g. 170007. */
    static int serverVersionNum(Connection c) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SHOW server_version_num")) {
            rs.next();
            return Integer.parseInt(rs.getString(1).trim());
        }
    }

    /**
     * Creates a pgoutput slot with {@code failover} set (PostgreSQL 17+), which standbys with
     * {@code sync_replication_slots=on} keep in step; returns its consistent point. pgjdbc's slot builder has no
     * failover option, and the SQL function takes it as a bound argument.
     */
    static Lsn createFailoverSlot(Connection c, String name) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT CAST(lsn AS text)"
                + " FROM pg_create_logical_replication_slot(?, 'pgoutput', false, false, true)")) {
            ps.setString(1, name);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return Lsn.parse(rs.getString(1));
            }
        }
    }

    /** {@code wal_sender_timeout} in milliseconds (0 when disabled). */
    static long walSenderTimeoutMs(Connection c) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(
                "SELECT setting::bigint * CASE unit WHEN 's' THEN 1000 WHEN 'min' THEN 60000 ELSE 1 END"
                        + " FROM pg_settings WHERE name = 'wal_sender_timeout'")) {
            return rs.next() ? rs.getLong(1) : 60_000;
        }
    }

    /** Ends the backend that has {@code slot} active, if any; returns its process ids. */
    static List<Integer> terminateSlotUser(Connection c, String slot) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT active_pid FROM pg_replication_slots"
                + " WHERE slot_name = ? AND active AND active_pid IS NOT NULL AND pg_terminate_backend(active_pid)")) {
            ps.setString(1, slot);
            List<Integer> pids = new ArrayList<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    pids.add(rs.getInt(1));
                }
            }
            return pids;
        }
    }

    /** Drops the slot if it exists and nobody uses it; returns whether it was dropped. */
    static boolean dropSlot(Connection c, String name) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT pg_drop_replication_slot(slot_name)"
                + " FROM pg_replication_slots WHERE slot_name = ? AND NOT active")) {
            ps.setString(1, name);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next();
            }
        }
    }

    /**
     * The primary key columns of the relation {@code oid}, in key order; empty when it has none. Used for tables
     * whose replica identity (FULL, NOTHING) does not name a key on the wire.
     */
    static List<String> primaryKey(Connection c, long oid) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT a.attname FROM pg_index i"
                + " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)"
                + " WHERE i.indrelid = CAST(? AS oid) AND i.indisprimary"
                + " ORDER BY array_position(CAST(i.indkey AS int2[]), a.attnum)")) {
            ps.setLong(1, oid);
            List<String> columns = new ArrayList<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    columns.add(rs.getString(1));
                }
            }
            return columns;
        }
    }

    /**
     * A published table described the way pgoutput's Relation message describes it (same columns in the same
     * order, same key flags, same type OIDs and modifiers), so that copied rows get the same schema as streamed
     * ones. Run inside the copy's snapshot. Empty when the table is not (or no longer) in the publication.
     */
    static Optional<Relation> describe(Connection c, String publication, String table) throws SQLException {
        long oid;
        String namespace;
        String name;
        ReplicaIdentity identity;
        try (PreparedStatement ps = c.prepareStatement("SELECT cl.oid, n.nspname, cl.relname, cl.relreplident"
                + " FROM pg_publication_tables p JOIN pg_namespace n ON n.nspname = p.schemaname"
                + " JOIN pg_class cl ON cl.relnamespace = n.oid AND cl.relname = p.tablename"
                + " WHERE p.pubname = ? AND p.schemaname || '.' || p.tablename = ?")) {
            ps.setString(1, publication);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return Optional.empty();
                }
                oid = rs.getLong(1);
                namespace = rs.getString(2);
                name = rs.getString(3);
                identity = ReplicaIdentity.of(rs.getString(4).charAt(0));
            }
        }
        // pgoutput flags the replica identity's columns: the primary key (DEFAULT), the chosen index (INDEX),
        // every column (FULL) or none (NOTHING); generated and dropped columns are not sent
        try (PreparedStatement ps = c.prepareStatement("SELECT a.attname, a.atttypid, a.atttypmod,"
                + " (cl.relreplident = 'f' OR a.attnum = ANY (COALESCE((SELECT CAST(i.indkey AS int2[]) FROM pg_index i"
                + "   WHERE i.indrelid = cl.oid AND CASE cl.relreplident WHEN 'd' THEN i.indisprimary"
                + "   WHEN 'i' THEN i.indisreplident ELSE false END LIMIT 1), CAST('{}' AS int2[]))))"
                + " FROM pg_attribute a JOIN pg_class cl ON cl.oid = a.attrelid"
                + " WHERE a.attrelid = CAST(? AS oid) AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''"
                + " ORDER BY a.attnum")) {
            ps.setLong(1, oid);
            List<Column> columns = new ArrayList<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    columns.add(new Column(rs.getBoolean(4) ? Column.FLAG_KEY : 0, rs.getString(1), rs.getLong(2),
                            rs.getInt(3)));
                }
            }
            return Optional.of(new Relation(oid, namespace, name, identity, columns));
        }
    }

    /**
     * Run in a copy's snapshot transaction right after {@code SET TRANSACTION SNAPSHOT}: takes {@code ACCESS SHARE}
     * on the table (it waits for a TRUNCATE or rewriting ALTER TABLE in progress, and keeps any later one out until
     * the copy's transaction ends), then tells whether the table still has the storage the snapshot knows. False when
     * a TRUNCATE or a table rewrite committed after the snapshot was taken: the snapshot would read the new, empty
     * storage (its rows carry a later transaction id, or there are none) while the stream carries no rows for them,
     * so the copy must start over from a new snapshot.
     */
    static boolean lockUnrewritten(Connection c, Relation relation) throws SQLException {
        try (Statement s = c.createStatement()) {
            // identifiers quoted; LOCK takes no parameters
            s.execute("LOCK TABLE ONLY " + quote(relation.namespace()) + "." + quote(relation.name())
                    + " IN ACCESS SHARE MODE");
        }
        // relfilenode as the snapshot sees pg_class, against the relation's current storage (the system cache, up
        // to date once the lock is held)
        try (PreparedStatement ps = c.prepareStatement("SELECT COALESCE(cl.relfilenode = pg_relation_filenode(cl.oid),"
                + " false) FROM pg_class cl WHERE cl.oid = CAST(? AS oid)")) {
            ps.setLong(1, relation.oid());
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() && rs.getBoolean(1);
            }
        }
    }

    private static String quote(String identifier) {
        return "\"" + identifier.replace("\"", "\"\"") + "\"";
    }

    /** The planner's row estimate for the relation (-1 when it was never analyzed) and its size in pages. */
    record Size(long estimatedRows, long pages) {
    }

    static Size size(Connection c, long oid) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT CAST(reltuples AS bigint),"
                + " pg_relation_size(CAST(? AS oid)) / current_setting('block_size')::bigint FROM pg_class"
                + " WHERE oid = CAST(? AS oid)")) {
            ps.setLong(1, oid);
            ps.setLong(2, oid);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? new Size(rs.getLong(1), rs.getLong(2)) : new Size(-1, 0);
            }
        }
    }

    /**
     * Writes a non-transactional logical decoding message and returns its LSN. Every slot's stream delivers it in
     * WAL order: after each transaction that committed before it and before each that commits after it.
     */
    static Lsn emitHandover(Connection c, String prefix, String content) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT CAST(pg_logical_emit_message(false, ?, ?) AS text)")) {
            ps.setString(1, prefix);
            ps.setString(2, content);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return Lsn.parse(rs.getString(1));
            }
        }
    }

    /** The server's current WAL write position. */
    static Lsn currentWal(Connection c) throws SQLException {
        try (Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT CAST(pg_current_wal_lsn() AS text)")) {
            rs.next();
            return Lsn.parse(rs.getString(1));
        }
    }

    /**
     * Drops the inactive slots whose name starts with {@code prefix} (copy slots of this flow that a crashed copy
     * task left behind); slots of other flows never match the prefix.
     *
     * @return the dropped slots
     */
    static List<String> dropStaleSlots(Connection c, String prefix) throws SQLException {
        String pattern = prefix.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + "%";
        try (PreparedStatement ps = c.prepareStatement("SELECT slot_name, pg_drop_replication_slot(slot_name)"
                + " FROM pg_replication_slots WHERE slot_name LIKE ? AND NOT active")) {
            ps.setString(1, pattern);
            List<String> dropped = new ArrayList<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    dropped.add(rs.getString(1));
                }
            }
            return dropped;
        }
    }
}
