package io.tablecdc.bigquery.sql;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.junit.jupiter.api.Test;

import com.google.cloud.bigquery.QueryParameterValue;
import com.google.cloud.bigquery.StandardSQLTypeName;

import io.tablecdc.bigquery.config.TableSpec;

class CdcSqlTest {
    private static final TableSpec ORDERS = new TableSpec("my-project", "shop", "orders", "updated_at", List.of("id"));
    private static final List<String> COLUMNS = List.of("id", "amount", "updated_at");

    private static final String TS = CdcSql.watermarkExpression("updated_at", StandardSQLTypeName.TIMESTAMP, ZoneOffset.UTC);
    private static final CdcSql.Watermark TS_WATERMARK = CdcSql.watermark("updated_at", StandardSQLTypeName.TIMESTAMP, ZoneOffset.UTC);

    @Test
    void queryWindowUsesNamedParametersAndQuotedIdentifiers() {
        assertEquals("SELECT `id`, `amount`, `updated_at`, `updated_at` AS _tablecdc_watermark FROM `my-project`.`shop`.`orders`"
                        + " WHERE `updated_at` > @lower AND `updated_at` <= @upper",
                CdcSql.window(ORDERS, COLUMNS, TS_WATERMARK));
    }

    @Test
    void datetimeAndDateWatermarksArePlacedInTheConfiguredZoneInTheQuery() {
        assertEquals("TIMESTAMP(`d`, 'America/New_York')",
                CdcSql.watermarkExpression("d", StandardSQLTypeName.DATETIME, ZoneId.of("America/New_York")));
        assertEquals("TIMESTAMP(`d`, 'UTC')", CdcSql.watermarkExpression("d", StandardSQLTypeName.DATE, ZoneOffset.UTC));
        assertEquals("TIMESTAMP(`d`, '+02:00')", CdcSql.watermarkExpression("d", StandardSQLTypeName.DATETIME, ZoneId.of("+02:00")));
        assertEquals("'a\\'b'", CdcSql.stringLiteral("a'b"));
    }

    /**
     * Issue 37: {@code TIMESTAMP(col, 'zone') > @lower} is a function of the column, on which BigQuery does not prune
     * the partitions of a table partitioned by that DATETIME or DATE column. The window also compares the column in its
     * own type with constant bounds (query parameters), widened by a day, before the exact filter.
     */
    @Test
    void datetimeAndDateWindowsAlsoCompareTheColumnInItsOwnTypeForPartitionPruning() {
        CdcSql.Watermark datetime = CdcSql.watermark("m", StandardSQLTypeName.DATETIME, ZoneId.of("Asia/Tokyo"));
        assertEquals("SELECT `id`, `amount`, `m`, TIMESTAMP(`m`, 'Asia/Tokyo') AS _tablecdc_watermark FROM"
                + " `my-project`.`shop`.`orders` WHERE `m` >= @lower_own AND `m` <= @upper_own"
                + " AND TIMESTAMP(`m`, 'Asia/Tokyo') > @lower AND TIMESTAMP(`m`, 'Asia/Tokyo') <= @upper",
                CdcSql.window(ORDERS, List.of("id", "amount", "m"), datetime));
        Instant lower = Instant.parse("2026-03-01T10:00:00.123456Z");
        Instant upper = Instant.parse("2026-03-02T10:00:00Z");
        Map<String, QueryParameterValue> p = datetime.parameters(lower, upper);
        assertEquals(StandardSQLTypeName.DATETIME, p.get("lower_own").getType());
        assertEquals("2026-02-28 10:00:00.123456", p.get("lower_own").getValue());
        assertEquals("2026-03-03 10:00:00.000000", p.get("upper_own").getValue());
        assertEquals(StandardSQLTypeName.TIMESTAMP, p.get("lower").getType());

        CdcSql.Watermark date = CdcSql.watermark("day", StandardSQLTypeName.DATE, ZoneOffset.UTC);
        Map<String, QueryParameterValue> d = date.parameters(lower, upper);
        assertEquals(StandardSQLTypeName.DATE, d.get("lower_own").getType());
        assertEquals("2026-02-28", d.get("lower_own").getValue());
        assertEquals("2026-03-03", d.get("upper_own").getValue());
        assertTrue(CdcSql.nextWatermark(ORDERS, date).contains("WHERE `day` >= @lower_own AND `day` <= @upper_own AND"),
                CdcSql.nextWatermark(ORDERS, date));
        // at BigQuery's edges the own-type bounds stay inside its range
        Map<String, QueryParameterValue> edge = date.parameters(Instant.parse("0001-01-01T05:00:00Z"),
                Instant.parse("9999-12-31T20:00:00Z"));
        assertEquals("0001-01-01", edge.get("lower_own").getValue());
        assertEquals("9999-12-31", edge.get("upper_own").getValue());

        // a TIMESTAMP column is compared as it is, with the window's bounds only
        CdcSql.Watermark timestamp = CdcSql.watermark("updated_at", StandardSQLTypeName.TIMESTAMP, ZoneOffset.UTC);
        assertEquals("`updated_at` > @lower AND `updated_at` <= @upper", timestamp.window());
        assertEquals(Set.of("lower", "upper"), timestamp.parameters(lower, upper).keySet());
    }

    /**
     * Every row of a DATETIME or DATE watermark that the exact filter takes is inside the own-type bounds, in zones at
     * both ends of the offsets (+14:00, -12:00) and across a daylight-saving change.
     */
    @Test
    void theOwnTypeBoundsHoldEveryRowTheExactFilterTakes() {
        Instant lower = Instant.parse("2026-10-25T00:30:00Z");
        Instant upper = Instant.parse("2026-10-25T03:30:00Z");
        for (String zone : List.of("Pacific/Kiritimati", "Etc/GMT+12", "Europe/Berlin", "America/New_York", "UTC")) {
            ZoneId id = ZoneId.of(zone);
            Map<String, QueryParameterValue> p = CdcSql.watermark("m", StandardSQLTypeName.DATETIME, id).parameters(lower, upper);
            java.time.LocalDateTime low = java.time.LocalDateTime.parse(p.get("lower_own").getValue().replace(' ', 'T'));
            java.time.LocalDateTime high = java.time.LocalDateTime.parse(p.get("upper_own").getValue().replace(' ', 'T'));
            for (Instant t = lower.plusSeconds(60); !t.isAfter(upper); t = t.plusSeconds(60)) {
                java.time.LocalDateTime wall = java.time.LocalDateTime.ofInstant(t, id);
                assertTrue(!wall.isBefore(low) && !wall.isAfter(high), zone + ": " + wall + " outside " + low + ".." + high);
            }
        }
    }

    @Test
    void noOrderByAnywhere() {
        for (String sql : List.of(CdcSql.window(ORDERS, COLUMNS, TS_WATERMARK), CdcSql.appends(ORDERS, COLUMNS), CdcSql.changes(ORDERS, COLUMNS),
                CdcSql.snapshot(ORDERS, COLUMNS, TS), CdcSql.snapshotAll(ORDERS, COLUMNS))) {
            assertFalse(sql.toUpperCase().contains("ORDER BY"), sql);
        }
    }

    @Test
    void identifiersCannotBreakOutOfTheirQuotes() {
        assertEquals("`a\\`b`", CdcSql.quote("a`b"));
        assertEquals("`a\\\\b`", CdcSql.quote("a\\b"));
    }

    @Test
    void snapshotReadsUpToTheLargestWatermarkAndRowsWithout() {
        assertEquals("SELECT `id`, `amount`, `updated_at`, `updated_at` AS _tablecdc_watermark FROM `my-project`.`shop`.`orders`"
                + " WHERE `updated_at` <= @upper OR `updated_at` IS NULL", CdcSql.snapshot(ORDERS, COLUMNS, TS));
        assertEquals("SELECT MAX(`updated_at`) AS max_watermark FROM `my-project`.`shop`.`orders`",
                CdcSql.maxWatermark(ORDERS, TS));
    }

    @Test
    void appendsCoversTheSameHalfOpenWindowAsQueryMode() {
        assertEquals("SELECT `id`, `amount`, `updated_at`, _CHANGE_TIMESTAMP AS tablecdc_change_timestamp"
                + " FROM APPENDS(TABLE `my-project`.`shop`.`orders`, @lower, TIMESTAMP_ADD(@upper, INTERVAL 1 MICROSECOND))"
                + " WHERE _CHANGE_TIMESTAMP > @lower AND _CHANGE_TIMESTAMP <= @upper", CdcSql.appends(ORDERS, COLUMNS));
    }

    @Test
    void changesReAliasesReservedColumnsAndKeepsTheDeleteHalfOfUpdates() {
        String sql = CdcSql.changes(ORDERS, COLUMNS);
        assertTrue(sql.startsWith("SELECT `id`, `amount`, `updated_at`, _CHANGE_TYPE AS tablecdc_change_type,"
                + " _CHANGE_TIMESTAMP AS tablecdc_change_timestamp, _CHANGE_IS_FOR_UPDATE AS tablecdc_change_is_for_update"
                + " FROM CHANGES(TABLE `my-project`.`shop`.`orders`, @lower,"), sql);
        assertTrue(sql.endsWith(" WHERE _CHANGE_TIMESTAMP > @lower AND _CHANGE_TIMESTAMP <= @upper"), sql);
        assertFalse(sql.contains(" AS _CHANGE"), "reserved names must not be output column names");
    }
}
