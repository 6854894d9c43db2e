package io.tablecdc.bigquery.sql;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.List;

import org.junit.jupiter.api.Test;

import com.google.cloud.bigquery.StandardSQLTypeName;

import io.tablecdc.bigquery.config.TableSpec;

class CdcSqlTest {
    private static final TableSpec ORDERS = new TableSpec("my-project", "shop", "orders", "updated_at", List.of("id"));
    private static final List<String> COLUMNS = List.of("id", "amount", "updated_at");

    private static final String TS = CdcSql.watermarkExpression("updated_at", StandardSQLTypeName.TIMESTAMP, ZoneOffset.UTC);

    @Test
    void queryWindowUsesNamedParametersAndQuotedIdentifiers() {
        assertEquals("SELECT `id`, `amount`, `updated_at`, `updated_at` AS _tablecdc_watermark FROM `my-project`.`shop`.`orders`"
                        + " WHERE `updated_at` > @lower AND `updated_at` <= @upper",
                CdcSql.window(ORDERS, COLUMNS, TS));
    }

    @Test
    void datetimeAndDateWatermarksArePlacedInTheConfiguredZoneInTheQuery() {
        assertEquals("TIMESTAMP(`d`, 'America/New_York')",
                CdcSql.watermarkExpression("d", StandardSQLTypeName.DATETIME, ZoneId.of("America/New_York")));
        assertEquals("TIMESTAMP(`d`, 'UTC')", CdcSql.watermarkExpression("d", StandardSQLTypeName.DATE, ZoneOffset.UTC));
        assertEquals("TIMESTAMP(`d`, '+02:00')", CdcSql.watermarkExpression("d", StandardSQLTypeName.DATETIME, ZoneId.of("+02:00")));
        assertEquals("'a\\'b'", CdcSql.stringLiteral("a'b"));
    }

    @Test
    void noOrderByAnywhere() {
        for (String sql : List.of(CdcSql.window(ORDERS, COLUMNS, TS), CdcSql.appends(ORDERS, COLUMNS), CdcSql.changes(ORDERS, COLUMNS),
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
