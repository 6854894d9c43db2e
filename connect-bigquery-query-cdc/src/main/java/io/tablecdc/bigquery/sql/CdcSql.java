package io.tablecdc.bigquery.sql;

import java.util.List;
import java.util.stream.Collectors;

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

    /** A string literal: {@code 'text'}, with a quote or backslash escaped. */
    static String stringLiteral(String text) {
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'";
    }

    /**
     * QUERY mode, one window: rows whose watermark ({@link #watermarkExpression}) is in {@code (@lower, @upper]}, with
     * the watermark as {@link #WATERMARK}.
     */
    public static String window(TableSpec table, List<String> columns, String watermark) {
        return "SELECT " + columns(columns) + ", " + watermark + " AS " + WATERMARK + " FROM " + table(table)
                + " WHERE " + watermark + " > @" + LOWER + " AND " + watermark + " <= @" + UPPER;
    }

    /** The largest watermark of the table (null when it has no rows with one). */
    public static String maxWatermark(TableSpec table, String watermark) {
        return "SELECT MAX(" + watermark + ") AS " + MAX_WATERMARK + " FROM " + table(table);
    }

    /**
     * The smallest watermark in {@code (@lower, @upper]} (null when none): after an empty window, the windows up to
     * that value are empty too, so the walk jumps there instead of querying each of them.
     */
    public static String nextWatermark(TableSpec table, String watermark) {
        return "SELECT MIN(" + watermark + ") AS " + NEXT_WATERMARK + " FROM " + table(table)
                + " WHERE " + watermark + " > @" + LOWER + " AND " + watermark + " <= @" + UPPER;
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
