package io.tablecdc.pg;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import io.tablecdc.pg.config.PgPipelineConfig;
import io.tablecdc.pg.wire.Lsn;

/**
 * The SQL the pipeline runs on the source database: server checks, the publication's tables, slots, primary keys.
 * Every statement is read-only except {@link #createSlot}; all use bound parameters.
 */
final class SourceDatabase {
    private SourceDatabase() {
    }

    /** A regular connection to the source database. */
    static Connection connect(PgPipelineConfig config, String applicationName) throws SQLException {
        return DriverManager.getConnection(config.jdbcUrl(), config.connectionProperties(applicationName, false));
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

    /** Whether the connected user may open replication connections (REPLICATION attribute or superuser). */
    static boolean canReplicate(Connection c) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(
                "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user")) {
            return rs.next() && rs.getBoolean(1);
        }
    }

    /** A replication slot as {@code pg_replication_slots} shows it. */
    record Slot(String name, String plugin, String database, Lsn confirmedFlush, String walStatus) {
    }

    static Optional<Slot> slot(Connection c, String name) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT slot_name, plugin, database, confirmed_flush_lsn::text,"
                + " wal_status FROM pg_replication_slots WHERE slot_name = ?")) {
            ps.setString(1, name);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return Optional.empty();
                }
                String confirmed = rs.getString(4);
                return Optional.of(new Slot(rs.getString(1), rs.getString(2), rs.getString(3),
                        confirmed == null ? null : Lsn.parse(confirmed), rs.getString(5)));
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
}
