package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
        Client clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
    }

    private static Map<String, String> sourceConfig(String prefix, String publication) {
        Map<String, String> config = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, prefix);
        config.put("table.sync.copy", "all");
        config.put("batch.rows", "3");
        return config;
    }

    private static Map<String, String> sinkConfig(String prefix) {
        Map<String, String> config = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);
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

    // ------------------------------------------------------------------------------------- numeric NaN

    // a numeric(p,s) holds NaN but not ±Infinity (Postgres refuses them: only an unconstrained numeric holds them)
    private static final String NON_FINITE = "('NaN')";

    /** How many numeric values of the rows {@code where} selects are NaN (a Decimal holds none). */
    private static long nonFinite(String table, String where) throws SQLException {
        String sql = "SELECT coalesce(sum(coalesce((n IN " + NON_FINITE + ")::int, 0) + coalesce((m IN " + NON_FINITE + ")::int, 0)"
                + " + (SELECT count(*) FROM unnest(an) x WHERE x IN " + NON_FINITE + ")), 0) FROM " + table + " WHERE " + where;
        try (Connection c = pg.source(); Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    /** Postgres text of a numeric as the Decimal column shows it: no trailing zeros, NaN as null. */
    private static String pgDecimal(String column) {
        return "coalesce(CASE WHEN " + column + " NOT IN " + NON_FINITE + " THEN trim_scale(" + column + ")::text END, '-')";
    }

    private static final String NULLED_PG = "id::text || '|' || " + pgDecimal("n") + " || '|' || " + pgDecimal("m") + " || '|' || "
            + pgArray("an", PgTypesIT::pgDecimal);
    private static final String NULLED_CH = "concat(toString(id), '|', ifNull(toString(n), '-'), '|', ifNull(toString(m), '-'), '|',"
            + " arrayStringConcat(arrayMap(x -> ifNull(toString(x), '-'), an), ','))";
    // the server's own text: the scale's zeros kept, NaN as such
    private static final String TEXT_PG = "id::text || '|' || coalesce(n::text, '-') || '|' || coalesce(m::text, '-') || '|' || "
            + "coalesce(array_to_string(an, ',', '-'), '')";
    private static final String TEXT_CH = "concat(toString(id), '|', ifNull(n, '-'), '|', ifNull(m, '-'), '|',"
            + " arrayStringConcat(arrayMap(x -> ifNull(x, '-'), an), ','))";

    /**
     * numeric(p,s) {@code NaN}, copied and streamed (also inside arrays): a Decimal cannot hold it, so by default each
     * arrives as NULL and is counted per table in the catalog; a table listed in {@code decimal.text.columns} holds every
     * value exactly as the server's text.
     */
    @Test
    void numericNaNIsNullAndCountedOrKeptExactAsText() throws Exception {
        String prefix = "pgtn";
        String flow = "pgtn-flow";
        String sink = "pgtn-sink";
        String columns = "(id int PRIMARY KEY, n numeric(10,2), m numeric(6,0), an numeric(5,1)[])";
        String copied = "(1, 12.50, 'NaN', '{1.5,NaN,NULL}'), (2, 'NaN', -5, '{NaN}'), (3, NULL, 0, NULL),"
                + " (4, -0.01, 999999, '{}')";
        pg.sql("DROP PUBLICATION IF EXISTS pgtn_pub",
                "DROP SCHEMA IF EXISTS tn CASCADE",
                "CREATE SCHEMA tn",
                "CREATE TABLE tn.nulled " + columns,
                "CREATE TABLE tn.exact " + columns,
                "INSERT INTO tn.nulled VALUES " + copied,
                "INSERT INTO tn.exact VALUES " + copied,
                "CREATE PUBLICATION pgtn_pub FOR TABLE tn.nulled, tn.exact");
        long copiedNonFinite = nonFinite("tn.nulled", "true");
        assertEquals(4, copiedNonFinite);

        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> sinkConfig = sinkConfig(prefix);
        sinkConfig.put("decimal.text.columns", "tn.exact.*");
        rest.putConfig(sink, sinkConfig);
        rest.putConfig(flow, sourceConfig(prefix, "pgtn_pub"));
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        rest.awaitRunning(sink, 1, Duration.ofSeconds(90));
        for (String table : new String[] {"tn.nulled", "tn.exact"}) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(180));
        }
        Map<String, String[]> tables = new LinkedHashMap<>();
        tables.put("tn.nulled", new String[] {NULLED_PG, NULLED_CH});
        tables.put("tn.exact", new String[] {TEXT_PG, TEXT_CH});
        pg.awaitEqual(tables, Duration.ofSeconds(120));
        PgChecks.awaitTrue(() -> clampedInCatalog(flow, "tn.nulled") == copiedNonFinite, Duration.ofSeconds(60),
                "the copy's NaN values never counted: " + clampedInCatalog(flow, "tn.nulled"));
        assertEquals(0, clampedInCatalog(flow, "tn.exact"), "text columns change nothing");

        for (String table : new String[] {"tn.nulled", "tn.exact"}) {
            pg.transaction("INSERT INTO " + table + " VALUES (11, 'NaN', 'NaN', '{NaN,NaN,1}'), (12, 1.00, 'NaN', NULL)",
                    "UPDATE " + table + " SET n = 'NaN' WHERE id = 4",
                    "DELETE FROM " + table + " WHERE id = 2");
        }
        // each staged row image is counted: rows 11 and 12 as inserted, row 4 as updated; the delete carries only the key
        long streamedNonFinite = nonFinite("tn.nulled", "id IN (11, 12, 4)");
        assertEquals(6, streamedNonFinite);
        pg.awaitEqual(tables, Duration.ofSeconds(120));
        long expected = copiedNonFinite + streamedNonFinite;
        PgChecks.awaitTrue(() -> clampedInCatalog(flow, "tn.nulled") == expected, Duration.ofSeconds(60),
                "the stream's NaN values never counted: " + clampedInCatalog(flow, "tn.nulled") + ", expected " + expected);
        assertEquals(0, clampedInCatalog(flow, "tn.exact"), "text columns change nothing");

        rest.delete(flow);
        rest.delete(sink);
    }

    // ------------------------------------------------------------------------------------- multi-dimensional arrays

    private static final String GRID_PG = "id::text || '|' || coalesce(cells::text, '-') || '|' || " + "coalesce(array_to_string(tags,"
            + " '~', '-'), '')";
    private static final String GRID_CH = "concat(toString(id), '|', ifNull(cells, '-'), '|', arrayStringConcat(arrayMap(x -> ifNull(x,"
            + " '-'), tags), '~'))";

    /**
     * A multi-dimensional array value stops its table with an error naming the column and {@code array.text.columns};
     * a column listed there arrives as the server's array text, any number of dimensions, copied and streamed.
     */
    @Test
    void multiDimensionalArraysStopTheirTableNamingTheSettingOrArriveAsTextWhenListed() throws Exception {
        String prefix = "pgtm";
        String flow = "pgtm-flow";
        String sink = "pgtm-sink";
        String columns = "(id int PRIMARY KEY, cells int[], tags text[])";
        String copied = "(1, '{{1,2},{3,NULL}}', '{a,\"b c\"}'), (2, '{5,6}', NULL), (3, NULL, '{}'),"
                + " (4, '[0:1][1:1][1:2]={{{1,2}},{{3,4}}}', '{x}')";
        pg.sql("DROP PUBLICATION IF EXISTS pgtm_pub",
                "DROP SCHEMA IF EXISTS tm CASCADE",
                "CREATE SCHEMA tm",
                "CREATE TABLE tm.grid " + columns,
                "CREATE TABLE tm.listed " + columns,
                "INSERT INTO tm.grid VALUES " + copied,
                "INSERT INTO tm.listed VALUES " + copied,
                "CREATE PUBLICATION pgtm_pub FOR TABLE tm.grid, tm.listed");

        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> source = sourceConfig(prefix, "pgtm_pub");
        source.put("array.text.columns", "tm.listed.cells");
        source.put("max.table.retries", "0");
        rest.putConfig(sink, sinkConfig(prefix));
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        rest.awaitRunning(sink, 1, Duration.ofSeconds(90));
        Map<String, String> grid = pg.awaitTable(flow, "tm.grid", row -> "errored".equals(row.get("phase")), Duration.ofSeconds(180));
        String error = grid.get("last_error");
        assertTrue(error.contains("tm.grid") && error.contains("column cells") && error.contains("array.text.columns"), error);
        pg.awaitTable(flow, "tm.listed", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(180));
        Map<String, String[]> tables = Map.of("tm.listed", new String[] {GRID_PG, GRID_CH});
        pg.awaitEqual(tables, Duration.ofSeconds(120));

        pg.transaction("INSERT INTO tm.listed VALUES (11, '{{7},{8}}', '{\"{{not,an,array}}\"}'), (12, '{}', NULL)",
                "UPDATE tm.listed SET cells = '{{{9}}}' WHERE id = 2");
        pg.awaitEqual(tables, Duration.ofSeconds(120));

        rest.delete(flow);
        rest.delete(sink);
    }

    // ------------------------------------------------------------------------------------- one column per type

    /**
     * One column of {@code ty.all}: its Postgres type, the values of rows 1 and 2 (row 3 is all null), and the text
     * each side renders for it ({@code %s} is the column). The ClickHouse side renders what arrived; the Postgres side
     * what the types table of docs/types.md says arrives, from the source value.
     */
    record Col(String name, String type, String value1, String value2, String pg, String ch) {
        String pgText() {
            return "coalesce(" + pg.replace("%s", name) + ", '-')";
        }

        String chText() {
            return "ifNull(" + ch.replace("%s", name) + ", '-')";
        }
    }

    // Postgres prints NaN, Infinity and -Infinity; ClickHouse's toString would print nan, inf and -inf
    private static final String PG_FLOAT = "%s::text";
    private static final String CH_FLOAT = "multiIf(isNaN(%s), 'NaN', isInfinite(%s) AND %s > 0, 'Infinity', isInfinite(%s), '-Infinity',"
            + " toString(%s))";
    private static final String CH_FLOAT_ARRAY = "arrayStringConcat(arrayMap(x -> ifNull(" + CH_FLOAT.replace("%s", "x") + ", '-'), %s),"
            + " '~')";
    // a null array arrives as an empty one
    private static final String PG_ARRAY = "coalesce(array_to_string(%s, '~', '-'), '')";
    private static final String CH_ARRAY = "arrayStringConcat(arrayMap(x -> ifNull(toString(x), '-'), %s), '~')";

    static final Col[] COLS = {
        new Col("i2", "int2", "1", "'-32768'", "%s::text", "toString(%s)"),
        new Col("i4", "int4", "1", "2147483647", "%s::text", "toString(%s)"),
        new Col("i8", "int8", "1", "'-9223372036854775808'", "%s::text", "toString(%s)"),
        new Col("o", "oid", "1", "4294967295", "%s::text", "toString(%s)"),
        // ClickHouse prints a Decimal without trailing zeros; NaN, which a Decimal cannot hold, arrives as null
        new Col("n", "numeric(10,2)", "12.50", "'NaN'", "CASE WHEN %s <> 'NaN' THEN trim_scale(%s)::text END", "toString(%s)"),
        new Col("nfree", "numeric", "123456789012345678901234567890.123456789", "'NaN'", "%s::text", "%s"),
        new Col("nwide", "numeric(80,2)", "123456789012345678901234567890123456789012345678901234567890123456789012345678.99",
                "'-1'", "%s::text", "%s"),
        // NaN and ±Infinity arrive as they are through Kafka's JsonConverter (the stack's), which alone would read them
        // back as 0: the tablecdc.nonfinite header carries them
        new Col("f4", "float4", "3.25", "'NaN'", PG_FLOAT, CH_FLOAT),
        new Col("f8", "float8", "0.1", "'-Infinity'", PG_FLOAT, CH_FLOAT),
        new Col("f4i", "float4", "'Infinity'", "'-Infinity'", PG_FLOAT, CH_FLOAT),
        new Col("f8i", "float8", "'NaN'", "'Infinity'", PG_FLOAT, CH_FLOAT),
        new Col("af8", "float8[]", "'{1.5,NaN,NULL,Infinity,-Infinity}'", "'{-Infinity}'", PG_ARRAY, CH_FLOAT_ARRAY),
        new Col("af4", "float4[]", "'{NaN,2.5}'", "'{}'", PG_ARRAY, CH_FLOAT_ARRAY),
        new Col("b", "bool", "true", "false", "CASE %s WHEN true THEN 'true' WHEN false THEN 'false' END", "toString(%s)"),
        new Col("t", "text", "'plain'", "'Zoë 😀 e\u0301 \u200d\u200f שלום 𝔘 \uFFFD tab\tnewline\n'", "%s", "%s"),
        new Col("vc", "varchar(10)", "'abc'", "''", "%s::text", "%s"),
        // char(n) keeps its padding: Postgres's own ::text would trim it
        new Col("cp", "char(5)", "'ab'", "'abcde'", "rpad(%s, 5)", "%s"),
        new Col("nm", "name", "'a_name'", "'x'", "%s::text", "%s"),
        new Col("by", "bytea", "'\\x00ff10'", "'\\x'", "encode(%s, 'hex')", "lower(hex(%s))"),
        new Col("u", "uuid", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A12'", "%s::text", "toString(%s)"),
        new Col("j", "json", "'{\"b\": 1,  \"a\": [1, 2]}'", "'[]'", "%s::text", "%s"),
        new Col("jb", "jsonb", "'{\"b\": 1,  \"a\": [1, 2]}'", "'\"x\"'", "%s::text", "%s"),
        new Col("d", "date", "'2024-02-29'", "'1999-12-31'", "%s::text", "toString(%s)"),
        new Col("ts", "timestamp", "'2024-02-29 12:34:56.123456'", "'1970-01-01 00:00:00'", "to_char(%s, 'YYYY-MM-DD HH24:MI:SS.US')",
                "toString(%s)"),
        new Col("tz", "timestamptz", "'2024-02-29 12:34:56.123456+05:30'", "'1969-12-31 23:59:59.999999+00'",
                "to_char(%s AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')", "toString(%s)"),
        // microseconds since midnight
        new Col("tm", "time", "'12:34:56.789'", "'24:00:00'", "(extract(epoch FROM %s) * 1000000)::bigint::text", "toString(%s)"),
        new Col("ttz", "timetz", "'12:34:56.789+05:30'", "'00:00:00-03'", "%s::text", "%s"),
        // ISO 8601 as Postgres prints it with IntervalStyle=iso_8601 (the comparing session sets it)
        new Col("iv", "interval", "'1 year 2 mons -3 days 04:05:06.5'", "'-1 mons'", "%s::text", "%s"),
        new Col("m", "money", "1234.56", "'-1'", "%s::text", "%s"),
        // concat() prints with the type's output function, as the server sends it (inet's ::text adds /128)
        new Col("ip", "inet", "'192.168.0.1/24'", "'::1'", "CASE WHEN %s IS NOT NULL THEN concat(%s) END", "%s"),
        new Col("ci", "cidr", "'10.0.0.0/8'", "'2001:db8::/32'", "%s::text", "%s"),
        new Col("mac", "macaddr", "'08:00:2b:01:02:03'", "'FF-FF-FF-FF-FF-FF'", "%s::text", "%s"),
        new Col("bt", "bit(4)", "B'1010'", "B'0000'", "%s::text", "%s"),
        new Col("vb", "varbit", "B'101'", "B''", "%s::text", "%s"),
        new Col("r", "int4range", "'[1,5)'", "'empty'", "%s::text", "%s"),
        new Col("dr", "daterange", "'[2024-01-01,2024-02-01)'", "'(,2024-01-01]'", "%s::text", "%s"),
        new Col("comp", "ty.pair", "ROW(1, 'x y')", "ROW(NULL, '')", "%s::text", "%s"),
        new Col("dom", "ty.posint", "42", "1", "%s::text", "%s"),
        new Col("en", "ty.mood", "'happy'", "'sad'", "%s::text", "%s"),
        new Col("x", "xml", "'<a k=\"v\">1</a>'", "'text'", "%s::text", "%s"),
        new Col("pt", "point", "'(1,2)'", "'(-1.5,0)'", "%s::text", "%s"),
        new Col("ai", "int4[]", "'{1,NULL,3}'", "'{}'", PG_ARRAY, CH_ARRAY),
        new Col("at", "text[]", "'{\"a b\",NULL,\"NULL\",\"q\\\"uote\"}'", "'{\"\"}'", PG_ARRAY, CH_ARRAY),
    };

    /**
     * A table with a column of every type of docs/types.md, copied and then streamed (inserts of the same values, an
     * update): ClickHouse equals Postgres value by value, each rendered as the same text.
     */
    /**
     * Table {@code <schema>.all} of every column of {@link #COLS} (their types named in {@code <schema>}): its DDL, the
     * insert of rows 1 and 2 (row 3 is all NULLs, inserted by id alone), each row rendered as text in Postgres and in
     * ClickHouse, and the column names after the id (each preceded by a comma).
     */
    record AllTypes(String ddl, String insert, String pgRow, String chRow, String names) {
        static AllTypes in(String schema) {
            StringBuilder ddl = new StringBuilder("CREATE TABLE " + schema + ".all (id int PRIMARY KEY");
            StringBuilder row1 = new StringBuilder("(1");
            StringBuilder row2 = new StringBuilder("(2");
            StringBuilder pgRow = new StringBuilder("id::text");
            StringBuilder chRow = new StringBuilder("concat(toString(id)");
            StringBuilder names = new StringBuilder();
            for (Col col : COLS) {
                String type = col.type().replace("ty.", schema + ".");
                ddl.append(", ").append(col.name()).append(' ').append(type);
                row1.append(", ").append(col.value1()).append("::").append(type);
                row2.append(", ").append(col.value2()).append("::").append(type);
                pgRow.append(" || '|' || ").append(col.pgText());
                chRow.append(", '|', ").append(col.chText());
                names.append(", ").append(col.name());
            }
            return new AllTypes(ddl + ")", "INSERT INTO " + schema + ".all VALUES " + row1 + "), " + row2 + ")",
                    pgRow.toString(), chRow + ")", names.toString());
        }
    }

    @Test
    void everyTypeArrivesAsTheTypesTableSaysCopiedAndStreamed() throws Exception {
        String prefix = "pgty";
        String flow = "pgty-flow";
        String sink = "pgty-sink";
        AllTypes all = AllTypes.in("ty");
        pg.sql("DROP PUBLICATION IF EXISTS pgty_pub",
                "DROP SCHEMA IF EXISTS ty CASCADE",
                "CREATE SCHEMA ty",
                "CREATE TYPE ty.pair AS (a int, b text)",
                "CREATE DOMAIN ty.posint AS int CHECK (VALUE > 0)",
                "CREATE TYPE ty.mood AS ENUM ('happy', 'sad')",
                all.ddl(),
                all.insert(),
                "INSERT INTO ty.all (id) VALUES (3)",
                "CREATE PUBLICATION pgty_pub FOR TABLE ty.all");

        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(sink, sinkConfig(prefix));
        rest.putConfig(flow, sourceConfig(prefix, "pgty_pub"));
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        rest.awaitRunning(sink, 1, Duration.ofSeconds(90));
        pg.awaitTable(flow, "ty.all", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(180));
        Map<String, String[]> tables = Map.of("ty.all", new String[] {all.pgRow(), all.chRow()});
        PgChecks iso = isoIntervals();
        iso.awaitEqual(tables, Duration.ofSeconds(120));

        // streamed: the same values again under new keys, and an update
        pg.transaction("INSERT INTO ty.all SELECT id + 100" + all.names() + " FROM ty.all",
                "UPDATE ty.all SET t = t || '!', i4 = i4 - 1, ai = ai || 4, f8i = '-Infinity', af8 = af8 || 'NaN'::float8 WHERE id = 101");
        iso.awaitEqual(tables, Duration.ofSeconds(120));
        assertEquals(6, iso.postgresRows("ty.all", "id").size());

        rest.delete(flow);
        rest.delete(sink);
    }

    /** {@link #pg} with sessions that print intervals as ISO 8601. */
    private static PgChecks isoIntervals() {
        Client clickhouse = stack.clickhouse().client();
        return new PgChecks(stack, () -> {
            Connection c = stack.postgres().connect(DATABASE);
            try (Statement s = c.createStatement()) {
                s.execute("SET IntervalStyle = iso_8601");
            }
            return c;
        }, catalogUrl, clickhouse);
    }
}
