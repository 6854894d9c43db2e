package io.tablecdc.bigquery.schema;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.util.Base64;
import java.util.List;

import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.Test;

import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.FieldList;
import com.google.cloud.bigquery.FieldValue;
import com.google.cloud.bigquery.FieldValueList;
import com.google.cloud.bigquery.StandardSQLTypeName;

import io.tablecdc.bigquery.Cursor;
import io.tablecdc.bigquery.TablePollerTestAccess;
import io.tablecdc.bigquery.config.TableSpec;
import io.tablecdc.common.RecordHeaders;
import io.tablecdc.common.TablecdcTypes;

class BigQueryTypesTest {
    private static Field f(String name, StandardSQLTypeName type) {
        return Field.of(name, type);
    }

    private static FieldValue v(String text) {
        return FieldValue.of(FieldValue.Attribute.PRIMITIVE, text);
    }

    @Test
    void everyTypeHasASchema() {
        assertEquals(Schema.Type.INT64, BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.INT64)).type());
        assertEquals(Schema.Type.FLOAT64, BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.FLOAT64)).type());
        assertEquals(Schema.Type.BOOLEAN, BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.BOOL)).type());
        assertEquals(Schema.Type.STRING, BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.STRING)).type());
        assertEquals(Schema.Type.BYTES, BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.BYTES)).type());
        Schema numeric = BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.NUMERIC));
        assertEquals(Decimal.LOGICAL_NAME, numeric.name());
        assertEquals("9", numeric.parameters().get(Decimal.SCALE_FIELD));
        assertEquals("38", numeric.parameters().get(BigQueryTypes.PRECISION_PARAMETER));
        Schema big = BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.BIGNUMERIC));
        assertEquals("38", big.parameters().get(Decimal.SCALE_FIELD));
        assertEquals("76", big.parameters().get(BigQueryTypes.PRECISION_PARAMETER));
        Schema parameterized = BigQueryTypes.schemaOf(Field.newBuilder("a", StandardSQLTypeName.NUMERIC).setPrecision(10L).setScale(2L).build());
        assertEquals("2", parameterized.parameters().get(Decimal.SCALE_FIELD));
        assertEquals("10", parameterized.parameters().get(BigQueryTypes.PRECISION_PARAMETER));
        assertEquals(Date.LOGICAL_NAME, BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.DATE)).name());
        assertEquals(TablecdcTypes.MICRO_TIMESTAMP, BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.DATETIME)).name());
        assertEquals(TablecdcTypes.MICRO_TIMESTAMP, BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.TIMESTAMP)).name());
        assertEquals(TablecdcTypes.MICRO_TIME, BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.TIME)).name());
        assertEquals(TablecdcTypes.JSON, BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.JSON)).name());
        assertEquals(Schema.Type.STRING, BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.GEOGRAPHY)).type());
        assertEquals(Schema.Type.STRING, BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.INTERVAL)).type());
        Schema struct = BigQueryTypes.schemaOf(Field.of("a", StandardSQLTypeName.STRUCT, f("x", StandardSQLTypeName.INT64)));
        assertEquals(TablecdcTypes.JSON, struct.name());
        Schema array = BigQueryTypes.schemaOf(Field.newBuilder("a", StandardSQLTypeName.STRING).setMode(Field.Mode.REPEATED).build());
        assertEquals(Schema.Type.ARRAY, array.type());
        assertEquals(Schema.Type.STRING, array.valueSchema().type());
        assertTrue(!array.isOptional(), "arrays are never null in BigQuery");
        assertTrue(BigQueryTypes.schemaOf(f("a", StandardSQLTypeName.INT64)).isOptional());
        assertTrue(!BigQueryTypes.schemaOf(Field.newBuilder("a", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build()).isOptional());
    }

    @Test
    void valuesKeepTheirPrecision() {
        assertEquals(1_709_287_200_123_456L, value(f("a", StandardSQLTypeName.TIMESTAMP), v("1709287200.123456")));
        assertEquals(1_709_210_096_123_456L, value(f("a", StandardSQLTypeName.DATETIME), v("2024-02-29T12:34:56.123456")));
        assertEquals(45_296_654_321L, value(f("a", StandardSQLTypeName.TIME), v("12:34:56.654321")));
        assertEquals(new java.util.Date(19_782L * 86_400_000L), value(f("a", StandardSQLTypeName.DATE), v("2024-02-29")));
        assertEquals(new BigDecimal("123456789.123456789"), value(f("a", StandardSQLTypeName.NUMERIC), v("123456789.123456789")));
        assertEquals(new BigDecimal("-2.50000000000000000000000000000000000000"),
                value(f("a", StandardSQLTypeName.BIGNUMERIC), v("-2.5")));
        assertArrayEquals(new byte[] {0, (byte) 255}, (byte[]) value(f("a", StandardSQLTypeName.BYTES),
                v(Base64.getEncoder().encodeToString(new byte[] {0, (byte) 255}))));
        assertEquals("{\"a\":[1,2]}", value(f("a", StandardSQLTypeName.JSON), v("{\"a\":[1,2]}")));
        assertEquals("POINT(1 2)", value(f("a", StandardSQLTypeName.GEOGRAPHY), v("POINT(1 2)")));
        assertNull(value(f("a", StandardSQLTypeName.INT64), FieldValue.of(FieldValue.Attribute.PRIMITIVE, null)));
    }

    /**
     * The extremes of each BigQuery type arrive exactly in the record; what ClickHouse then holds of them is the sink's
     * decision (dates outside 1900..2299 clamped and counted, or exact as integers; see docs/types.md).
     */
    @Test
    void extremeValuesOfEveryTypeArriveExactly() {
        // DATE, DATETIME and TIMESTAMP run from 0001-01-01 to 9999-12-31 23:59:59.999999
        assertEquals(new java.util.Date(java.time.LocalDate.of(1, 1, 1).toEpochDay() * 86_400_000L),
                value(f("a", StandardSQLTypeName.DATE), v("0001-01-01")));
        assertEquals(new java.util.Date(java.time.LocalDate.of(9999, 12, 31).toEpochDay() * 86_400_000L),
                value(f("a", StandardSQLTypeName.DATE), v("9999-12-31")));
        assertEquals(-62_135_596_800_000_000L, value(f("a", StandardSQLTypeName.DATETIME), v("0001-01-01T00:00:00")));
        assertEquals(253_402_300_799_999_999L, value(f("a", StandardSQLTypeName.DATETIME), v("9999-12-31T23:59:59.999999")));
        assertEquals(-62_135_596_800_000_000L, value(f("a", StandardSQLTypeName.TIMESTAMP), v("-62135596800.000000")));
        assertEquals(253_402_300_799_999_999L, value(f("a", StandardSQLTypeName.TIMESTAMP), v("253402300799.999999")));
        // BIGNUMERIC's extremes: 77 digits, one more than Decimal(76, 38) holds; the record keeps them all (the sink
        // refuses the row naming table and column rather than round it)
        BigDecimal bigMax = new BigDecimal("578960446186580977117854925043439539266.34992332820282019728792003956564819967");
        assertEquals(bigMax, value(f("a", StandardSQLTypeName.BIGNUMERIC), v(bigMax.toPlainString())));
        assertEquals(bigMax.negate().subtract(new BigDecimal("1E-38")),
                value(f("a", StandardSQLTypeName.BIGNUMERIC), v("-578960446186580977117854925043439539266.34992332820282019728792003956564819968")));
        assertEquals(new BigDecimal("99999999999999999999999999999.999999999"),
                value(f("a", StandardSQLTypeName.NUMERIC), v("99999999999999999999999999999.999999999")));
        // FLOAT64's specials
        assertTrue(Double.isNaN((Double) value(f("a", StandardSQLTypeName.FLOAT64), v("NaN"))));
        assertEquals(Double.NEGATIVE_INFINITY, value(f("a", StandardSQLTypeName.FLOAT64), v("-Infinity")));
        // TIME's last microsecond
        assertEquals(86_399_999_999L, value(f("a", StandardSQLTypeName.TIME), v("23:59:59.999999")));
        // GEOGRAPHY, JSON, INTERVAL and RANGE arrive as the text BigQuery returns
        assertEquals("LINESTRING(0 0, 1 1)", value(f("a", StandardSQLTypeName.GEOGRAPHY), v("LINESTRING(0 0, 1 1)")));
        assertEquals("{\"a\":null,\"b\":[1.5,\"\u00e9\"]}", value(f("a", StandardSQLTypeName.JSON), v("{\"a\":null,\"b\":[1.5,\"\u00e9\"]}")));
        assertEquals("-1-2 3 -4:5:6.789", value(f("a", StandardSQLTypeName.INTERVAL), v("-1-2 3 -4:5:6.789")));
        assertEquals("[2024-01-01, UNBOUNDED)", value(f("a", StandardSQLTypeName.RANGE), v("[2024-01-01, UNBOUNDED)")));
    }

    @Test
    void nestedStructsAndArraysInsideStructsBecomeJsonWithNulls() {
        Field inner = Field.of("in", StandardSQLTypeName.STRUCT, f("d", StandardSQLTypeName.DATE),
                Field.newBuilder("n", StandardSQLTypeName.BIGNUMERIC).setMode(Field.Mode.REPEATED).build());
        Field outer = Field.of("o", StandardSQLTypeName.STRUCT, inner, f("s", StandardSQLTypeName.STRING));
        FieldValue innerValue = FieldValue.of(FieldValue.Attribute.RECORD, FieldValueList.of(List.of(v("0001-01-01"),
                FieldValue.of(FieldValue.Attribute.REPEATED, List.of(v("1.5"), v("-0.000001")))), inner.getSubFields()));
        FieldValue outerValue = FieldValue.of(FieldValue.Attribute.RECORD, FieldValueList.of(List.of(innerValue,
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, null)), outer.getSubFields()));
        // a date inside a struct is JSON text, so no ClickHouse range applies to it
        assertEquals("{\"in\":{\"d\":\"0001-01-01\",\"n\":[1.5,-0.000001]},\"s\":null}", value(outer, outerValue));
    }

    @Test
    void structsBecomeJsonAndArraysConnectArrays() {
        Field struct = Field.of("s", StandardSQLTypeName.STRUCT, f("x", StandardSQLTypeName.INT64), f("y", StandardSQLTypeName.STRING),
                Field.newBuilder("z", StandardSQLTypeName.FLOAT64).setMode(Field.Mode.REPEATED).build());
        FieldValue structValue = FieldValue.of(FieldValue.Attribute.RECORD, FieldValueList.of(List.of(v("7"), v("say \"hi\"\n"),
                FieldValue.of(FieldValue.Attribute.REPEATED, List.of(v("1.5"), v("2.0")))), struct.getSubFields()));
        assertEquals("{\"x\":7,\"y\":\"say \\\"hi\\\"\\n\",\"z\":[1.5,2.0]}", value(struct, structValue));

        Field array = Field.newBuilder("arr", StandardSQLTypeName.INT64).setMode(Field.Mode.REPEATED).build();
        assertEquals(List.of(1L, 2L), value(array, FieldValue.of(FieldValue.Attribute.REPEATED, List.of(v("1"), v("2")))));
        assertEquals(List.of(), value(array, FieldValue.of(FieldValue.Attribute.PRIMITIVE, null)));
    }

    @Test
    void rowsBecomeKeyAndValueStructs() {
        FieldList fields = FieldList.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                f("name", StandardSQLTypeName.STRING),
                f("updated_at", StandardSQLTypeName.TIMESTAMP));
        TableSpec spec = new TableSpec("p", "d", "t", "updated_at", List.of("id"));
        TableSchema schema = TableSchema.of(spec, fields, true);
        FieldValueList row = FieldValueList.of(List.of(v("42"), v("ada"), v("1709287200.000001")), fields);
        Struct value = schema.value(row);
        assertEquals(42L, value.get("id"));
        assertEquals("ada", value.get("name"));
        assertEquals(1_709_287_200_000_001L, value.get("updated_at"));
        assertEquals(42L, schema.key(value).get("id"));
        assertEquals(1_709_287_200_000_001L, schema.watermarkMicros(row, java.time.ZoneOffset.UTC));
        assertEquals("io.tablecdc.bigquery.p_d_t.Value", schema.valueSchema().name());
    }

    @Test
    void datetimeAndDateWatermarksArePlacedInTheConfiguredZone() {
        Field datetime = f("m", StandardSQLTypeName.DATETIME);
        Field date = f("d", StandardSQLTypeName.DATE);
        java.time.ZoneId newYork = java.time.ZoneId.of("America/New_York");
        // 10:00 in New York on 2024-03-01 (EST, UTC-5) is 15:00 UTC
        assertEquals(Cursor.micros(java.time.Instant.parse("2024-03-01T15:00:00Z")),
                BigQueryTypes.watermarkMicros(datetime, v("2024-03-01T10:00:00"), newYork));
        assertEquals(Cursor.micros(java.time.Instant.parse("2024-03-01T10:00:00Z")),
                BigQueryTypes.watermarkMicros(datetime, v("2024-03-01T10:00:00"), java.time.ZoneOffset.UTC));
        assertEquals(Cursor.micros(java.time.Instant.parse("2024-02-29T15:00:00Z")),
                BigQueryTypes.watermarkMicros(date, v("2024-03-01"), java.time.ZoneId.of("Asia/Tokyo")));
        // a query that computed the watermark itself (TIMESTAMP(col, zone)) is taken as it is
        FieldList fields = FieldList.of(f("id", StandardSQLTypeName.INT64), datetime, f("_tablecdc_watermark", StandardSQLTypeName.TIMESTAMP));
        TableSchema schema = TableSchema.of(new TableSpec("p", "d", "t", "m", List.of("id")),
                FieldList.of(f("id", StandardSQLTypeName.INT64), datetime), true);
        FieldValueList row = FieldValueList.of(List.of(v("1"), v("2024-11-03T01:30:00"), v("1730615400.0")), fields);
        assertEquals(1_730_615_400_000_000L, schema.watermarkMicros(row, newYork));
    }

    @Test
    void dateAndDaylightSavingDatetimeWatermarksNeedALongEnoughSafetyLag() {
        TableSpec spec = new TableSpec("p", "d", "t", "w", List.of());
        TableSchema date = TableSchema.of(spec, FieldList.of(f("w", StandardSQLTypeName.DATE)), true);
        TableSchema datetime = TableSchema.of(spec, FieldList.of(f("w", StandardSQLTypeName.DATETIME)), true);
        TableSchema timestamp = TableSchema.of(spec, FieldList.of(f("w", StandardSQLTypeName.TIMESTAMP)), true);
        java.time.ZoneId utc = java.time.ZoneOffset.UTC;
        java.time.ZoneId berlin = java.time.ZoneId.of("Europe/Berlin");
        long day = 86_400_000L;
        assertEquals("table p.d.t: watermark column w is DATE, whose value is the same for every row written that day;"
                + " safety.lag.ms is 86399999 but must be at least 86400000 (one day) so that a day is read only once it is over",
                date.lagProblem(day - 1, utc));
        assertNull(date.lagProblem(day, utc));
        assertTrue(date.lagProblem(day, berlin).contains("at least 90000000 (25 hours: Europe/Berlin has daylight-saving changes)"));
        assertNull(date.lagProblem(day + 3_600_000L, berlin));
        assertNull(datetime.lagProblem(1_000, utc));
        assertNull(datetime.lagProblem(1_000, java.time.ZoneId.of("+02:00")));
        assertEquals("table p.d.t: watermark column w is DATETIME in Europe/Berlin, which has daylight-saving changes;"
                + " safety.lag.ms is 3600000 but must be above 3600000 (one hour) so that rows of the hour the clocks go back"
                + " are not passed", datetime.lagProblem(3_600_000L, berlin));
        assertNull(datetime.lagProblem(3_600_001L, berlin));
        assertNull(timestamp.lagProblem(0, berlin));
        // a region whose offset last changed long ago has no clock changes to guard against
        assertNull(datetime.lagProblem(1_000, java.time.ZoneId.of("Asia/Tokyo")));
    }

    @Test
    void configurationErrorsNameTheTableAndTheColumn() {
        FieldList fields = FieldList.of(f("id", StandardSQLTypeName.INT64), f("note", StandardSQLTypeName.STRING));
        TableSchema.SchemaException e = assertThrows(TableSchema.SchemaException.class,
                () -> TableSchema.of(new TableSpec("p", "d", "t", "updated_at", List.of()), fields, true));
        assertEquals("table p.d.t has no watermark column updated_at", e.getMessage());
        e = assertThrows(TableSchema.SchemaException.class,
                () -> TableSchema.of(new TableSpec("p", "d", "t", "note", List.of()), fields, true));
        assertEquals("table p.d.t: watermark column note is STRING; it must be TIMESTAMP, DATETIME or DATE", e.getMessage());
        e = assertThrows(TableSchema.SchemaException.class, () -> TableSchema.of(
                new TableSpec("p", "d", "t", "", List.of("missing")), fields, false));
        assertEquals("table p.d.t has no key column missing", e.getMessage());
    }

    @Test
    void changeTypesBecomeOperationsAndTheDeleteHalfOfAnUpdateIsADelete() {
        FieldList fields = FieldList.of(f("tablecdc_change_type", StandardSQLTypeName.STRING),
                f("tablecdc_change_is_for_update", StandardSQLTypeName.BOOL));
        assertEquals(RecordHeaders.Op.CREATE, TablePollerTestAccess.changeOp(FieldValueList.of(List.of(v("INSERT"), v(null)), fields)));
        assertEquals(RecordHeaders.Op.UPDATE, TablePollerTestAccess.changeOp(FieldValueList.of(List.of(v("UPDATE"), v(null)), fields)));
        assertEquals(RecordHeaders.Op.DELETE, TablePollerTestAccess.changeOp(FieldValueList.of(List.of(v("DELETE"), v("false")), fields)));
        // the DELETE half of an update: it deletes the old key when the update changed the key
        assertEquals(RecordHeaders.Op.DELETE, TablePollerTestAccess.changeOp(FieldValueList.of(List.of(v("DELETE"), v("true")), fields)));
    }

    private static Object value(Field field, FieldValue value) {
        return BigQueryTypes.valueOf(field, BigQueryTypes.schemaOf(field), value);
    }
}
