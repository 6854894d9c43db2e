package io.tablecdc.catalog;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The bind-and-execute helper of the catalog's operations: a statement run on a connection with its values bound in
 * order ({@link #update}, {@link #list}, {@link #first}, {@link #exists}), the catalog's table names, and the checks of
 * the values passed in.
 *
 * <p>Plain JDBC and nothing else (no Kafka class, no pool, no logging library): the operator commands run the concern
 * classes' operations that take a {@link Connection} from a plugin archive's {@code lib/} alone, without Kafka's jars,
 * so neither this class nor a concern class may name a Kafka type ({@link CatalogException} included) where the JVM
 * checks it when it loads the class (a {@code throw}, a cast, a return of another type); {@link CatalogDb} does that.
 */
final class Sql {

    static final String STATE = "cdc_table_replication_state";
    static final String STAGE = "cdc_table_avro_stage";
    static final String FLOW = "cdc_flow";
    static final String QUARANTINE = "cdc_table_quarantined_batch";
    static final String STAGED_OFFSET = "cdc_sink_staged_offset";

    private static final Pattern LSN = Pattern.compile("[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}");
    private static final int MAX_ERROR_CHARS = 4000;

    private Sql() {
    }

    /** Reads one row of a result. */
    @FunctionalInterface
    interface Row<T> {
        T read(ResultSet rs) throws SQLException;
    }

    // ---------------------------------------------------------------- statements

    /** Runs an update with {@code values} bound in order; returns the rows it changed. */
    static int update(Connection c, String sql, Object... values) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            bind(ps, values);
            return ps.executeUpdate();
        }
    }

    /** Runs a query (or a statement with {@code RETURNING}) with {@code values} bound in order; returns every row. */
    static <T> List<T> list(Connection c, String sql, Row<T> row, Object... values) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            bind(ps, values);
            List<T> rows = new ArrayList<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    rows.add(row.read(rs));
                }
            }
            return rows;
        }
    }

    /** {@link #list} for its first row only; empty when there is none. */
    static <T> Optional<T> first(Connection c, String sql, Row<T> row, Object... values) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            bind(ps, values);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? Optional.ofNullable(row.read(rs)) : Optional.empty();
            }
        }
    }

    /** Whether the query returns a row. */
    static boolean exists(Connection c, String sql, Object... values) throws SQLException {
        return first(c, sql, rs -> Boolean.TRUE, values).isPresent();
    }

    /** A null that is not text (a plain null binds as a null {@code varchar}, as {@code setString} does). */
    enum Null {
        TIMESTAMP(Types.TIMESTAMP), BIGINT(Types.BIGINT), ARRAY(Types.ARRAY);

        private final int sqlType;

        Null(int sqlType) {
            this.sqlType = sqlType;
        }
    }

    /** A nullable timestamp to bind. */
    static Object nullable(Instant at) {
        return at == null ? Null.TIMESTAMP : at;
    }

    /** A nullable {@code bigint} to bind. */
    static Object nullable(Long value) {
        return value == null ? Null.BIGINT : value;
    }

    /** A nullable {@code text[]} to bind. */
    static Object nullable(String[] texts) {
        return texts == null ? Null.ARRAY : texts;
    }

    /**
     * Binds {@code values} in order: strings, numbers and booleans as they are, an {@link Instant} as a timestamp, a
     * {@code String[]} as {@code text[]}, a {@code Long[]} as {@code int8[]}, null as a null {@code varchar} and a
     * {@link Null} as a null of its type.
     */
    static void bind(PreparedStatement ps, Object... values) throws SQLException {
        for (int i = 0; i < values.length; i++) {
            int index = i + 1;
            Object v = values[i];
            if (v == null) {
                ps.setNull(index, Types.VARCHAR);
            } else if (v instanceof Null n) {
                ps.setNull(index, n.sqlType);
            } else if (v instanceof String s) {
                ps.setString(index, s);
            } else if (v instanceof Long l) {
                ps.setLong(index, l);
            } else if (v instanceof Integer n) {
                ps.setInt(index, n);
            } else if (v instanceof Double d) {
                ps.setDouble(index, d);
            } else if (v instanceof Boolean b) {
                ps.setBoolean(index, b);
            } else if (v instanceof Instant t) {
                ps.setTimestamp(index, Timestamp.from(t));
            } else if (v instanceof String[] texts) {
                ps.setArray(index, ps.getConnection().createArrayOf("text", texts));
            } else if (v instanceof Long[] longs) {
                ps.setArray(index, ps.getConnection().createArrayOf("int8", longs));
            } else {
                throw new IllegalArgumentException("cannot bind a " + v.getClass().getName());
            }
        }
    }

    /** {@code head}'s values followed by {@code tail}'s, to bind in that order. */
    static Object[] join(Object[] head, Object... tail) {
        Object[] all = java.util.Arrays.copyOf(head, head.length + tail.length);
        System.arraycopy(tail, 0, all, head.length, tail.length);
        return all;
    }

    static Instant instant(Timestamp ts) {
        return ts == null ? null : ts.toInstant();
    }

    /** A nullable {@code bigint} column. */
    static Long nullableLong(ResultSet rs, int column) throws SQLException {
        long value = rs.getLong(column);
        return rs.wasNull() ? null : value;
    }

    /** A string list as {@code text[]}. */
    static String[] texts(Collection<String> values) {
        return values.toArray(new String[0]);
    }

    // ---------------------------------------------------------------- checks

    static void requireName(String operation, String what, String value) {
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException(operation + " needs a " + what + " name");
        }
    }

    static double seconds(Duration d) {
        return d.toNanos() / 1e9;
    }

    static void requirePositive(Duration lease) {
        if (lease == null || lease.isNegative() || lease.isZero()) {
            throw new IllegalArgumentException("a copy lease must be positive: " + lease);
        }
    }

    static void requireBatchId(long batchId) {
        if (batchId < 1) {
            throw new IllegalArgumentException("batch ids start at 1: " + batchId);
        }
    }

    static void requireLsn(String lsn) {
        if (lsn == null || !LSN.matcher(lsn).matches()) {
            throw new IllegalArgumentException("not an LSN (expected like 16/B374D848): " + lsn);
        }
    }

    /** An error text as stored: at most 4000 characters. */
    static String errorText(String error) {
        return truncate(error, MAX_ERROR_CHARS);
    }

    static String truncate(String s, int max) {
        return s.length() <= max ? s : s.substring(0, max);
    }
}
