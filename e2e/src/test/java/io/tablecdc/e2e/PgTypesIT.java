package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * What arrives in ClickHouse for values at the edges of its types, copied and streamed from Postgres: compared value by
 * value with Postgres, both sides rendered as the same text.
 */
class PgTypesIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "pgtypes_source";

    private static String catalogUrl;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("pgtypes_catalog");
        Client clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user())
                .setPassword(stack.clickhouse().password()).compressServerResponse(false).build();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
    }

    private static Map<String, String> sourceConfig(String prefix, String publication) {
        Map<String, String> config = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, prefix);
        config.put("table.sync.copy", "all");
        config.put("batch.rows", "3");
        return config;
    }

    private static Map<String, String> sinkConfig(String prefix) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, prefix + "-stage");
        config.put("topics.regex", prefix + "\\..*");
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "2000");
        config.put("consumer.override.metadata.max.age.ms", "1000");
        return config;
    }

    // ------------------------------------------------------------------------------------- dates and timestamps

    private static final String DATE_MIN = "'1900-01-01'::date";
    private static final String DATE_MAX = "'2299-12-31'::date";
    private static final String TS_MIN = "'1900-01-01 00:00:00'::timestamp";
    private static final String TS_MAX = "'2299-12-31 23:59:59.999999'::timestamp";
    private static final String TSTZ_MIN = "'1900-01-01 00:00:00+00'::timestamptz";
    private static final String TSTZ_MAX = "'2299-12-31 23:59:59.999999+00'::timestamptz";

    /** A row's values in the order of the columns (id, d, t, tz, ds). */
    private static String dateRow(int id, String d, String t, String tz, String ds) {
        return "(" + id + ", " + d + ", " + t + ", " + tz + ", " + ds + ")";
    }

    /** The rows the copy takes: in range, at the edges, outside ClickHouse's range, infinite, null. */
    private static final String[] COPIED = {
        dateRow(1, "'2024-02-29'", "'2024-02-29 12:34:56.123456'", "'2024-02-29 12:34:56.123456+05:30'", "'{2024-02-29,NULL}'"),
        dateRow(2, "'1900-01-01'", "'1900-01-01 00:00:00'", "'2299-12-31 23:59:59.999999+00'", "'{1900-01-01,2299-12-31}'"),
        dateRow(3, "'1850-06-01'", "'2500-01-01 00:00:00'", "'0044-03-15 12:00:00+00 BC'", "'{1850-06-01,NULL,2000-01-01,infinity}'"),
        dateRow(4, "'0001-01-01'", "'9999-12-31 23:59:59'", "'1899-12-31 23:59:59.999999+00'", "NULL"),
        dateRow(5, "'infinity'", "'-infinity'", "'infinity'", "'{-infinity}'"),
        dateRow(6, "'-infinity'", "'infinity'", "'-infinity'", "'{}'"),
        dateRow(7, "'0044-03-15 BC'", "'1899-12-31 23:59:59.999999'", "'2300-01-01 00:00:00+00'", "'{9999-12-31}'"),
        dateRow(8, "NULL", "NULL", "NULL", "NULL"),
    };

    /** The rows streamed once the copy handed over. */
    private static final String[] STREAMED = {
        dateRow(11, "'1850-06-01'", "'2500-01-01 00:00:00'", "'0001-01-01 00:00:00+00'", "'{0001-01-01,NULL}'"),
        dateRow(12, "'infinity'", "'-infinity'", "'-infinity'", "'{infinity,1999-12-31}'"),
        dateRow(13, "'2000-01-01'", "'2000-01-01 00:00:00'", "'2000-01-01 00:00:00+00'", "'{}'"),
    };

    /** Postgres text of a clamped date: what ClickHouse's toString prints for the value the sink stores. */
    private static String pgClampedDate(String column) {
        // greatest and least skip nulls: a null stays null only through the CASE
        return "coalesce(CASE WHEN " + column + " IS NOT NULL THEN greatest(least(" + column + ", " + DATE_MAX + "), " + DATE_MIN
                + ")::text END, '-')";
    }

    private static String pgClampedTimestamp(String column, String min, String max, boolean tz) {
        String clamped = "CASE WHEN " + column + " IS NOT NULL THEN greatest(least(" + column + ", " + max + "), " + min + ") END";
        return "coalesce(to_char(" + (tz ? "(" + clamped + ") AT TIME ZONE 'UTC'" : clamped) + ", 'YYYY-MM-DD HH24:MI:SS.US'), '-')";
    }

    /** Postgres text of a column as integers: days since 1970 / microseconds since 1970 UTC, infinity as the extremes. */
    private static String pgDays(String column) {
        return "coalesce((CASE WHEN " + column + " = 'infinity' THEN 2147483647 WHEN " + column + " = '-infinity' THEN -2147483648"
                + " ELSE " + column + " - '1970-01-01'::date END)::text, '-')";
    }

    private static String pgMicros(String column) {
        return "coalesce((CASE WHEN " + column + " = 'infinity' THEN 9223372036854775807 WHEN " + column + " = '-infinity'"
                + " THEN -9223372036854775808 ELSE (extract(epoch FROM " + column + ") * 1000000)::bigint END)::text, '-')";
    }

    private static String pgArray(String column, java.util.function.UnaryOperator<String> element) {
        return "coalesce((SELECT string_agg(" + element.apply("x") + ", ',' ORDER BY o) FROM unnest(" + column
                + ") WITH ORDINALITY AS u(x, o)), '')";
    }

    private static final String CLAMPED_PG = "id::text || '|' || " + pgClampedDate("d") + " || '|' || "
            + pgClampedTimestamp("t", TS_MIN, TS_MAX, false) + " || '|' || " + pgClampedTimestamp("tz", TSTZ_MIN, TSTZ_MAX, true)
            + " || '|' || " + pgArray("ds", PgTypesIT::pgClampedDate);
    private static final String CLAMPED_CH = "concat(toString(id), '|', ifNull(toString(d), '-'), '|', ifNull(toString(t), '-'), '|',"
            + " ifNull(toString(tz), '-'), '|', arrayStringConcat(arrayMap(x -> ifNull(toString(x), '-'), ds), ','))";
    private static final String EXACT_PG = "id::text || '|' || " + pgDays("d") + " || '|' || " + pgMicros("t") + " || '|' || "
            + pgMicros("tz") + " || '|' || " + pgArray("ds", PgTypesIT::pgDays);
    private static final String EXACT_CH = CLAMPED_CH;

    /** How many values of the rows {@code where} selects are outside ClickHouse's Date32/DateTime64 range. */
    private static long outOfRange(String table, String where) throws SQLException {
        String sql = "SELECT coalesce(sum("
                + "coalesce((d NOT BETWEEN " + DATE_MIN + " AND " + DATE_MAX + ")::int, 0)"
                + " + coalesce((t NOT BETWEEN " + TS_MIN + " AND " + TS_MAX + ")::int, 0)"
                + " + coalesce((tz NOT BETWEEN " + TSTZ_MIN + " AND " + TSTZ_MAX + ")::int, 0)"
                + " + (SELECT count(*) FROM unnest(ds) x WHERE x NOT BETWEEN " + DATE_MIN + " AND " + DATE_MAX + ")), 0)"
                + " FROM " + table + " WHERE " + where;
        try (Connection c = pg.source(); Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    private static long clampedInCatalog(String flow, String table) throws SQLException {
        try (Connection c = pg.catalog(); Statement s = c.createStatement(); ResultSet rs = s.executeQuery(
                "SELECT clamped_values_count FROM cdc_table_replication_state WHERE flow_name = '" + flow
                        + "' AND source_table_identifier = '" + table + "'")) {
            return rs.next() ? rs.getLong(1) : -1;
        }
    }

    /**
     * Dates and timestamps outside ClickHouse's Date32/DateTime64 range (1900-01-01 to 2299-12-31), BC, and ±infinity,
     * copied and then streamed. By default each arrives at the range's nearest edge (infinity at the far edge, never
     * null) and is counted per table in the catalog; a table listed in {@code temporal.integer.columns} holds every
     * value exactly as days / microseconds since 1970, infinity as the extremes Postgres itself stores.
     */
    @Test
    void datesAndTimestampsOutsideClickHousesRangeAreClampedAndCountedOrKeptExactAsIntegers() throws Exception {
        String prefix = "pgtd";
        String flow = "pgtd-flow";
        String sink = "pgtd-sink";
        String columns = "(id int PRIMARY KEY, d date, t timestamp, tz timestamptz, ds date[])";
        pg.sql("DROP PUBLICATION IF EXISTS pgtd_pub",
                "DROP SCHEMA IF EXISTS td CASCADE",
                "CREATE SCHEMA td",
                "CREATE TABLE td.clamped " + columns,
                "CREATE TABLE td.exact " + columns,
                "INSERT INTO td.clamped VALUES " + String.join(", ", COPIED),
                "INSERT INTO td.exact VALUES " + String.join(", ", COPIED),
                "CREATE PUBLICATION pgtd_pub FOR TABLE td.clamped, td.exact");
        long copiedOutOfRange = outOfRange("td.clamped", "true");
        // rows 3 to 7 hold 19 values outside the range (the edges in rows 1 and 2 are inside)
        assertEquals(19, copiedOutOfRange);

        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> sinkConfig = sinkConfig(prefix);
        sinkConfig.put("temporal.integer.columns", "td.exact.*");
        rest.putConfig(sink, sinkConfig);
        rest.putConfig(flow, sourceConfig(prefix, "pgtd_pub"));
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        rest.awaitRunning(sink, 1, Duration.ofSeconds(90));
        for (String table : new String[] {"td.clamped", "td.exact"}) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(180));
        }
        Map<String, String[]> tables = new LinkedHashMap<>();
        tables.put("td.clamped", new String[] {CLAMPED_PG, CLAMPED_CH});
        tables.put("td.exact", new String[] {EXACT_PG, EXACT_CH});
        pg.awaitEqual(tables, Duration.ofSeconds(120));
        PgChecks.awaitTrue(() -> clampedInCatalog(flow, "td.clamped") == copiedOutOfRange, Duration.ofSeconds(60),
                "the copy's clamped values never counted: " + clampedInCatalog(flow, "td.clamped"));
        assertEquals(0, clampedInCatalog(flow, "td.exact"), "integer columns clamp nothing");

        // streamed: inserts, an update that moves a date out of range, a delete of a row holding out-of-range values
        for (String table : new String[] {"td.clamped", "td.exact"}) {
            pg.transaction("INSERT INTO " + table + " VALUES " + String.join(", ", STREAMED),
                    "UPDATE " + table + " SET d = '9999-12-31' WHERE id = 13",
                    "DELETE FROM " + table + " WHERE id = 4");
        }
        // each staged row image is counted: rows 11 and 12 as inserted, row 13 as inserted (all in range) and as
        // updated; the delete carries only the key
        long streamedOutOfRange = outOfRange("td.clamped", "id IN (11, 12, 13)");
        assertEquals(9, streamedOutOfRange);
        pg.awaitEqual(tables, Duration.ofSeconds(120));
        long expected = copiedOutOfRange + streamedOutOfRange;
        PgChecks.awaitTrue(() -> clampedInCatalog(flow, "td.clamped") == expected, Duration.ofSeconds(60),
                "the stream's clamped values never counted: " + clampedInCatalog(flow, "td.clamped") + ", expected " + expected);
        assertEquals(0, clampedInCatalog(flow, "td.exact"), "integer columns clamp nothing");

        rest.delete(flow);
        rest.delete(sink);
    }
}
