package io.tablecdc.bigquery.sql;

import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.List;
import java.util.stream.Collectors;

import com.google.cloud.bigquery.QueryParameterValue;
import com.google.cloud.bigquery.StandardSQLTypeName;

import io.tablecdc.bigquery.config.TableSpec;

/**
 * The SQL text of every query the source runs. Identifiers are quoted with backticks (names are checked to hold
 * no backtick when configured; {@link #quote} escapes one anyway); every value is a named query parameter
 * ({@code @lower}, {@code @upper}), never concatenated. No {@code ORDER BY}: the cursor is the largest watermark
 * seen, whatever order rows come in.
 */
public final class CdcSql {
    /** Parameter names. */
    public static final String LOWER = "lower";
    public static final String UPPER = "upper";
    /** The window's bounds in a DATETIME or DATE watermark's own type, widened by a day ({@link Watermark}). */
    public static final String LOWER_OWN = "lower_own";
    public static final String UPPER_OWN = "upper_own";

    /** Aliases of BigQuery's reserved change-history columns (names starting with _CHANGE_ are reserved). */
    public static final String CHANGE_TYPE = "tablecdc_change_type";
    public static final String CHANGE_TIMESTAMP = "tablecdc_change_timestamp";
    public static final String CHANGE_IS_FOR_UPDATE = "tablecdc_change_is_for_update";

    /** Alias of the source clock in {@link #sourceNow()}. */
    public static final String NOW = "source_now";
    /** Alias of the smallest watermark in {@link #nextWatermark}. */
    public static final String NEXT_WATERMARK = "next_watermark";
    /** Alias of the largest watermark in {@link #maxWatermark}. */
    public static final String MAX_WATERMARK = "max_watermark";
    /**
     * Alias of the row's watermark as a TIMESTAMP, computed by the query itself, in the window and snapshot queries:
     * the connector takes cursors and versions from it, so that the query and the connector always agree on where a
     * DATETIME or DATE value lies (even on a value that a daylight-saving change makes ambiguous).
     */
    public static final String WATERMARK = "_tablecdc_watermark";

    private CdcSql() {
    }

    /** {@code `name`}, with a backtick or backslash in the name escaped. */
    public static String quote(String identifier) {
        return "`" + identifier.replace("\\", "\\\\").replace("`", "\\`") + "`";
    }

    /** {@code `project`.`dataset`.`table`}. */
    public static String table(TableSpec table) {
        return quote(table.project()) + "." + quote(table.dataset()) + "." + quote(table.table());
    }

    static String columns(List<String> columns) {
        return columns.stream().map(CdcSql::quote).collect(Collectors.joining(", "));
    }

    /** BigQuery's clock, the only clock windows are placed on. */
    public static String sourceNow() {
        return "SELECT CURRENT_TIMESTAMP() AS " + NOW;
    }

    /**
     * The watermark as a TIMESTAMP: a TIMESTAMP column itself; a DATETIME or DATE column placed in {@code zone}
     * ({@code watermark.time.zone}) with {@code TIMESTAMP(col, 'zone')}. The zone id is validated by the config to
     * hold only letters, digits and {@code / _ + - :}, and is quoted as a string literal (the emulator the tests run on
     * cannot take a query parameter as that argument).
     */
    public static String watermarkExpression(String column, com.google.cloud.bigquery.StandardSQLTypeName type,
                                             java.time.ZoneId zone) {
        if (type == com.google.cloud.bigquery.StandardSQLTypeName.TIMESTAMP) {
            return quote(column);
        }
        String id = zone instanceof java.time.ZoneOffset offset && offset.getTotalSeconds() == 0 ? "UTC" : zone.getId();
        return "TIMESTAMP(" + quote(column) + ", " + stringLiteral(id) + ")";
    }

    /**
     * A table's watermark as the window queries use it: its TIMESTAMP {@code expression} ({@link #watermarkExpression}),
     * and for a DATETIME or DATE column a second filter on the column in its own type, whose bounds are query
     * parameters: BigQuery prunes the partitions (and clusters) of a table partitioned by that column only on a filter
     * that compares the column itself with constants; {@code TIMESTAMP(col, 'zone') > @lower} is a function of the
     * column and reads every partition. The own-type bounds are the window's bounds as UTC wall clocks widened by one
     * day each way: a zone's offset is less than a day, so every row whose {@code TIMESTAMP(col, 'zone')} is in the
     * window is inside them, and the exact filter on the expression still decides. A TIMESTAMP column needs none.
     */
    public record Watermark(String expression, String column, StandardSQLTypeName type) {
        /** Whether the window also filters on the column in its own type (DATETIME, DATE). */
        public boolean ownType() {
            return column != null && (type == StandardSQLTypeName.DATETIME || type == StandardSQLTypeName.DATE);
        }

        /** The window's condition {@code (@lower, @upper]}, after the own-type filter when there is one. */
        public String window() {
            String exact = expression + " > @" + LOWER + " AND " + expression + " <= @" + UPPER;
            return ownType() ? quote(column) + " >= @" + LOWER_OWN + " AND " + quote(column) + " <= @" + UPPER_OWN
                    + " AND " + exact : exact;
        }

        /** The parameters of {@link #window()} for the window {@code (lower, upper]}. */
        public java.util.Map<String, QueryParameterValue> parameters(Instant lower, Instant upper) {
            java.util.Map<String, QueryParameterValue> parameters = bounds(lower, upper);
            if (ownType()) {
                LocalDateTime low = wallClock(lower).minusDays(1);
                LocalDateTime high = wallClock(upper).plusDays(1);
                low = low.isBefore(FIRST) ? FIRST : low;
                high = high.isAfter(LAST) ? LAST : high;
                if (type == StandardSQLTypeName.DATE) {
                    parameters.put(LOWER_OWN, QueryParameterValue.date(low.toLocalDate().toString()));
                    parameters.put(UPPER_OWN, QueryParameterValue.date(high.toLocalDate().toString()));
                } else {
                    parameters.put(LOWER_OWN, QueryParameterValue.dateTime(OWN_DATETIME.format(low)));
                    parameters.put(UPPER_OWN, QueryParameterValue.dateTime(OWN_DATETIME.format(high)));
                }
            }
            return parameters;
        }

        private static LocalDateTime wallClock(Instant instant) {
            return LocalDateTime.ofEpochSecond(instant.getEpochSecond(), instant.getNano() / 1_000 * 1_000, ZoneOffset.UTC);
        }
    }

    /** {@code @lower} and {@code @upper} of the window {@code (lower, upper]}, as TIMESTAMP parameters. */
    public static java.util.Map<String, QueryParameterValue> bounds(Instant lower, Instant upper) {
        java.util.Map<String, QueryParameterValue> parameters = new java.util.HashMap<>();
        parameters.put(LOWER, QueryParameterValue.timestamp(io.tablecdc.bigquery.Cursor.micros(lower)));
        parameters.put(UPPER, QueryParameterValue.timestamp(io.tablecdc.bigquery.Cursor.micros(upper)));
        return parameters;
    }

    /** BigQuery's first and last DATETIME. */
    private static final LocalDateTime FIRST = LocalDateTime.of(1, 1, 1, 0, 0);
    private static final LocalDateTime LAST = LocalDateTime.of(9999, 12, 31, 23, 59, 59, 999_999_000);
    private static final DateTimeFormatter OWN_DATETIME = DateTimeFormatter.ofPattern("uuuu-MM-dd HH:mm:ss.SSSSSS");

    /** The {@link Watermark} of a column of {@code type} placed in {@code zone}. */
    public static Watermark watermark(String column, StandardSQLTypeName type, java.time.ZoneId zone) {
        return new Watermark(watermarkExpression(column, type, zone), column, type);
    }

    /** A string literal: {@code 'text'}, with a quote or backslash escaped. */
    static String stringLiteral(String text) {
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'";
    }

    /**
     * QUERY mode, one window: rows whose watermark ({@link #watermarkExpression}) is in {@code (@lower, @upper]}, with
     * the watermark as {@link #WATERMARK}; for a DATETIME or DATE column the filter on the column in its own type comes
     * first ({@link Watermark#window()}), so that BigQuery can prune the partitions of a table partitioned by it.
     */
    public static String window(TableSpec table, List<String> columns, Watermark watermark) {
        return "SELECT " + columns(columns) + ", " + watermark.expression() + " AS " + WATERMARK + " FROM " + table(table)
                + " WHERE " + watermark.window();
    }

    /** The largest watermark of the table (null when it has no rows with one). */
    public static String maxWatermark(TableSpec table, String watermark) {
        return "SELECT MAX(" + watermark + ") AS " + MAX_WATERMARK + " FROM " + table(table);
    }

    /**
     * The smallest watermark in {@code (@lower, @upper]} (null when none), with the own-type filter of
     * {@link Watermark#window()}: after an empty window, the windows up to that value are empty too, so the walk jumps
     * there instead of querying each of them.
     */
    public static String nextWatermark(TableSpec table, Watermark watermark) {
        return "SELECT MIN(" + watermark.expression() + ") AS " + NEXT_WATERMARK + " FROM " + table(table)
                + " WHERE " + watermark.window();
    }

    /** The smallest watermark of the table (null when it has no rows with one). */
    public static String minWatermark(TableSpec table, String watermark) {
        return "SELECT MIN(" + watermark + ") AS " + NEXT_WATERMARK + " FROM " + table(table);
    }

    /** The first chunk of the initial snapshot: the rows without a watermark (no window ever matches them). */
    public static String snapshotWithoutWatermark(TableSpec table, List<String> columns) {
        return "SELECT " + columns(columns) + " FROM " + table(table) + " WHERE " + quote(table.watermarkColumn()) + " IS NULL";
    }

    /** The initial snapshot: every row with a watermark up to {@code @upper}, and the rows without one. */
    public static String snapshot(TableSpec table, List<String> columns, String watermark) {
        return "SELECT " + columns(columns) + ", " + watermark + " AS " + WATERMARK + " FROM " + table(table)
                + " WHERE " + watermark + " <= @" + UPPER + " OR " + quote(table.watermarkColumn()) + " IS NULL";
    }

    /** The initial snapshot of a table read without a watermark column (APPENDS or CHANGES mode): every row. */
    public static String snapshotAll(TableSpec table, List<String> columns) {
        return "SELECT " + columns(columns) + " FROM " + table(table);
    }

    /**
     * APPENDS mode, one window: the rows appended in {@code (@lower, @upper]}. {@code APPENDS()} includes its start
     * and excludes its end, so the call covers {@code [@lower, @upper + 1 µs)} and the filter on
     * {@code _CHANGE_TIMESTAMP} makes the window exclusive below and inclusive above, like QUERY mode.
     */
    public static String appends(TableSpec table, List<String> columns) {
        return "SELECT " + columns(columns) + ", _CHANGE_TIMESTAMP AS " + CHANGE_TIMESTAMP
                + " FROM APPENDS(TABLE " + table(table) + ", @" + LOWER + ", TIMESTAMP_ADD(@" + UPPER + ", INTERVAL 1 MICROSECOND))"
                + " WHERE _CHANGE_TIMESTAMP > @" + LOWER + " AND _CHANGE_TIMESTAMP <= @" + UPPER;
    }

    /**
     * CHANGES mode, one window: inserts, updates and deletes in {@code (@lower, @upper]}. The reserved
     * {@code _CHANGE_*} columns are re-aliased; the DELETE half of an update ({@code _CHANGE_IS_FOR_UPDATE}) is kept:
     * it deletes the old key when the update changed the key. {@code @upper} must be at least 10 minutes before now (BigQuery's
     * rule; the config requires safety.lag.ms >= 10 minutes).
     */
    public static String changes(TableSpec table, List<String> columns) {
        return "SELECT " + columns(columns) + ", _CHANGE_TYPE AS " + CHANGE_TYPE + ", _CHANGE_TIMESTAMP AS " + CHANGE_TIMESTAMP
                + ", _CHANGE_IS_FOR_UPDATE AS " + CHANGE_IS_FOR_UPDATE
                + " FROM CHANGES(TABLE " + table(table) + ", @" + LOWER + ", TIMESTAMP_ADD(@" + UPPER + ", INTERVAL 1 MICROSECOND))"
                + " WHERE _CHANGE_TIMESTAMP > @" + LOWER + " AND _CHANGE_TIMESTAMP <= @" + UPPER;
    }
}
