package io.tablecdc.pg.convert;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.time.Instant;
import java.time.LocalDate;
import java.util.Arrays;
import java.util.List;

import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.junit.jupiter.api.Test;

import io.tablecdc.common.TablecdcTypes;

class ValueConverterTest {
    private static int numericTypmod(int precision, int scale) {
        return ((precision << 16) | (scale & 0x7FF)) + 4;
    }

    private static Object convert(long oid, int typmod, String text) {
        return ValueConverter.forType(oid, typmod, true).convert(text);
    }

    private static Schema schema(long oid, int typmod) {
        return ValueConverter.forType(oid, typmod, true).schema();
    }

    private static long micros(String instant) {
        Instant i = Instant.parse(instant);
        return i.getEpochSecond() * 1_000_000L + i.getNano() / 1_000;
    }

    @Test
    void integersKeepTheirWidthSoThatTheSinkPicksTheRightColumnType() {
        assertEquals(Schema.Type.INT16, schema(PgTypes.INT2, -1).type());
        assertEquals((short) -32768, convert(PgTypes.INT2, -1, "-32768"));
        assertEquals(Schema.Type.INT32, schema(PgTypes.INT4, -1).type());
        assertEquals(2147483647, convert(PgTypes.INT4, -1, "2147483647"));
        assertEquals(Schema.Type.INT64, schema(PgTypes.INT8, -1).type());
        assertEquals(-9223372036854775808L, convert(PgTypes.INT8, -1, "-9223372036854775808"));
        assertEquals(4294967295L, convert(PgTypes.OID, -1, "4294967295"));
    }

    @Test
    void numericWithTypmodIsADecimalThatCarriesItsPrecisionForTheSink() {
        Schema schema = schema(PgTypes.NUMERIC, numericTypmod(12, 2));
        assertEquals(Decimal.LOGICAL_NAME, schema.name());
        assertEquals("2", schema.parameters().get(Decimal.SCALE_FIELD));
        assertEquals("12", schema.parameters().get(ValueConverter.DECIMAL_PRECISION_PARAMETER));
        assertEquals(new BigDecimal("-1234567890.12"), convert(PgTypes.NUMERIC, numericTypmod(12, 2), "-1234567890.12"));
        assertEquals(2, ((BigDecimal) convert(PgTypes.NUMERIC, numericTypmod(12, 2), "5.00")).scale());
    }

    @Test
    void numericWithNegativeScaleWidensThePrecisionInsteadOfRejectingRoundedValues() {
        // numeric(2,-3) stores 99000: scale 0, five digits
        Schema schema = schema(PgTypes.NUMERIC, numericTypmod(2, -3));
        assertEquals("0", schema.parameters().get(Decimal.SCALE_FIELD));
        assertEquals("5", schema.parameters().get(ValueConverter.DECIMAL_PRECISION_PARAMETER));
        assertEquals(new BigDecimal("99000"), convert(PgTypes.NUMERIC, numericTypmod(2, -3), "99000"));
        assertArrayEquals(new int[] {2, -3}, ValueConverter.numericPrecisionScale(numericTypmod(2, -3)));
    }

    @Test
    void numericWithScaleAbovePrecisionKeepsAllFractionDigits() {
        Schema schema = schema(PgTypes.NUMERIC, numericTypmod(3, 5));
        assertEquals("5", schema.parameters().get(Decimal.SCALE_FIELD));
        assertEquals("5", schema.parameters().get(ValueConverter.DECIMAL_PRECISION_PARAMETER));
        assertEquals(new BigDecimal("0.00123"), convert(PgTypes.NUMERIC, numericTypmod(3, 5), "0.00123"));
    }

    @Test
    void numericNaNAndInfinityInADecimalColumnBecomeNullInsteadOfFailingTheTable() {
        int typmod = numericTypmod(10, 2);
        assertNull(convert(PgTypes.NUMERIC, typmod, "NaN"));
        assertNull(convert(PgTypes.NUMERIC, typmod, "Infinity"));
        assertNull(convert(PgTypes.NUMERIC, typmod, "-Infinity"));
    }

    @Test
    void unconstrainedNumericStaysExactTextBecauseNoScaleFitsEveryValue() {
        assertEquals(Schema.Type.STRING, schema(PgTypes.NUMERIC, -1).type());
        String huge = "123456789012345678901234567890123456789012345.000000000000000000001";
        assertEquals(huge, convert(PgTypes.NUMERIC, -1, huge));
        assertEquals("NaN", convert(PgTypes.NUMERIC, -1, "NaN"));
    }

    @Test
    void numericWiderThanClickHouseDecimalStaysText() {
        assertEquals(Schema.Type.STRING, schema(PgTypes.NUMERIC, numericTypmod(100, 10)).type());
        assertEquals(Decimal.LOGICAL_NAME, schema(PgTypes.NUMERIC, numericTypmod(76, 10)).name());
    }

    @Test
    void floatSpecialValuesAreNotLost() {
        assertTrue(Float.isNaN((Float) convert(PgTypes.FLOAT4, -1, "NaN")));
        assertEquals(Float.POSITIVE_INFINITY, convert(PgTypes.FLOAT4, -1, "Infinity"));
        assertEquals(Double.NEGATIVE_INFINITY, convert(PgTypes.FLOAT8, -1, "-Infinity"));
        assertEquals(1.0E-300, convert(PgTypes.FLOAT8, -1, "1e-300"));
        assertEquals(3.4028235E38f, convert(PgTypes.FLOAT4, -1, "3.4028235e+38"));
        assertEquals(Schema.Type.FLOAT32, schema(PgTypes.FLOAT4, -1).type());
    }

    @Test
    void boolAcceptsOnlyTheServersSpelling() {
        assertEquals(true, convert(PgTypes.BOOL, -1, "t"));
        assertEquals(false, convert(PgTypes.BOOL, -1, "f"));
        assertThrows(IllegalArgumentException.class, () -> convert(PgTypes.BOOL, -1, "true"));
    }

    @Test
    void textTypesAndUnknownOidsKeepTheServersText() {
        for (long oid : new long[] {PgTypes.TEXT, PgTypes.VARCHAR, PgTypes.BPCHAR, PgTypes.NAME, PgTypes.CHAR, PgTypes.TIMETZ, 16_999}) {
            assertEquals(Schema.Type.STRING, schema(oid, -1).type(), "oid " + oid);
            assertEquals("ab  ", convert(oid, -1, "ab  "), "oid " + oid);
        }
        assertEquals("12:00:00+05:30", convert(PgTypes.TIMETZ, -1, "12:00:00+05:30"));
    }

    @Test
    void byteaHexAndEscapeFormatsGiveTheSameBytes() {
        byte[] expected = {0, 1, (byte) 0xFF, '\\', 'a'};
        assertArrayEquals(expected, (byte[]) convert(PgTypes.BYTEA, -1, "\\x0001ff5c61"));
        assertArrayEquals(expected, (byte[]) convert(PgTypes.BYTEA, -1, "\\000\\001\\377\\\\a"));
        assertArrayEquals(new byte[0], (byte[]) convert(PgTypes.BYTEA, -1, "\\x"));
        assertThrows(IllegalArgumentException.class, () -> convert(PgTypes.BYTEA, -1, "\\9"));
    }

    @Test
    void uuidAndJsonCarryTheirSemanticTypes() {
        assertTrue(TablecdcTypes.is(schema(PgTypes.UUID, -1), TablecdcTypes.UUID));
        assertEquals("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", convert(PgTypes.UUID, -1, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
        assertTrue(TablecdcTypes.is(schema(PgTypes.JSON, -1), TablecdcTypes.JSON));
        assertTrue(TablecdcTypes.is(schema(PgTypes.JSONB, -1), TablecdcTypes.JSON));
        assertEquals("{\"a\": [1, null]}", convert(PgTypes.JSONB, -1, "{\"a\": [1, null]}"));
    }

    @Test
    void dateIsMidnightUtcIncludingBeforeChristWhereThereIsNoYearZero() {
        assertEquals(Date.LOGICAL_NAME, schema(PgTypes.DATE, -1).name());
        assertEquals(new java.util.Date(LocalDate.of(2024, 2, 29).toEpochDay() * 86_400_000L), convert(PgTypes.DATE, -1, "2024-02-29"));
        assertEquals(new java.util.Date(LocalDate.of(1969, 12, 31).toEpochDay() * 86_400_000L), convert(PgTypes.DATE, -1, "1969-12-31"));
        // 1 BC is ISO year 0
        assertEquals(new java.util.Date(LocalDate.of(0, 1, 1).toEpochDay() * 86_400_000L), convert(PgTypes.DATE, -1, "0001-01-01 BC"));
        assertEquals(new java.util.Date(LocalDate.of(-43, 3, 15).toEpochDay() * 86_400_000L), convert(PgTypes.DATE, -1, "0044-03-15 BC"));
        assertEquals(new java.util.Date(LocalDate.of(10000, 1, 1).toEpochDay() * 86_400_000L), convert(PgTypes.DATE, -1, "10000-01-01"));
    }

    @Test
    void infiniteDatesAndTimestampsBecomeTheTypesExtremesAsPostgresStoresThemNeverNull() {
        assertEquals(new java.util.Date(Integer.MAX_VALUE * 86_400_000L), convert(PgTypes.DATE, -1, "infinity"));
        assertEquals(new java.util.Date(Integer.MIN_VALUE * 86_400_000L), convert(PgTypes.DATE, -1, "-infinity"));
        assertEquals(Long.MAX_VALUE, convert(PgTypes.TIMESTAMP, -1, "infinity"));
        assertEquals(Long.MIN_VALUE, convert(PgTypes.TIMESTAMP, -1, "-infinity"));
        assertEquals(Long.MAX_VALUE, convert(PgTypes.TIMESTAMPTZ, -1, "infinity"));
        assertEquals(Long.MIN_VALUE, convert(PgTypes.TIMESTAMPTZ, -1, "-infinity"));
        // Connect's own Date logical type carries them as int days without loss
        assertEquals(Integer.MAX_VALUE, org.apache.kafka.connect.data.Date.fromLogical(org.apache.kafka.connect.data.Date.SCHEMA,
                (java.util.Date) convert(PgTypes.DATE, -1, "infinity")));
        assertEquals(Integer.MIN_VALUE, org.apache.kafka.connect.data.Date.fromLogical(org.apache.kafka.connect.data.Date.SCHEMA,
                (java.util.Date) convert(PgTypes.DATE, -1, "-infinity")));
    }

    @Test
    void timeIsMicrosSinceMidnightAndAcceptsTwentyFourHundred() {
        assertTrue(TablecdcTypes.is(schema(PgTypes.TIME, -1), TablecdcTypes.MICRO_TIME));
        assertEquals(0L, convert(PgTypes.TIME, -1, "00:00:00"));
        assertEquals(45_296_700_000L, convert(PgTypes.TIME, -1, "12:34:56.7"));
        assertEquals(86_399_999_999L, convert(PgTypes.TIME, -1, "23:59:59.999999"));
        assertEquals(86_400_000_000L, convert(PgTypes.TIME, -1, "24:00:00"));
        assertThrows(IllegalArgumentException.class, () -> convert(PgTypes.TIME, -1, "24:00:01"));
    }

    @Test
    void timestampWithoutZoneIsTheWallClockReadAsUtc() {
        assertTrue(TablecdcTypes.is(schema(PgTypes.TIMESTAMP, -1), TablecdcTypes.MICRO_TIMESTAMP));
        assertEquals(micros("2024-05-06T07:08:09.123456Z"), convert(PgTypes.TIMESTAMP, -1, "2024-05-06 07:08:09.123456"));
        assertEquals(micros("2024-05-06T07:08:09.100Z"), convert(PgTypes.TIMESTAMP, -1, "2024-05-06 07:08:09.1"));
        assertEquals(micros("1969-12-31T23:59:59.999999Z"), convert(PgTypes.TIMESTAMP, -1, "1969-12-31 23:59:59.999999"));
    }

    @Test
    void timestamptzAppliesEveryOffsetShapeTheServerPrints() {
        long expected = micros("2024-05-06T01:38:09.5Z");
        assertEquals(expected, convert(PgTypes.TIMESTAMPTZ, -1, "2024-05-06 07:08:09.5+05:30"));
        assertEquals(expected, convert(PgTypes.TIMESTAMPTZ, -1, "2024-05-05 22:38:09.5-03"));
        assertEquals(expected, convert(PgTypes.TIMESTAMPTZ, -1, "2024-05-06 01:38:09.5+00"));
        // local mean time offsets have seconds
        assertEquals(micros("1900-01-01T00:00:00Z"), convert(PgTypes.TIMESTAMPTZ, -1, "1900-01-01 00:19:32+00:19:32"));
    }

    @Test
    void timestampsBeforeChristPutTheEraAfterTheOffset() {
        long expected = LocalDate.of(-43, 3, 15).toEpochDay() * 86_400_000_000L + 12 * 3_600_000_000L;
        assertEquals(expected, convert(PgTypes.TIMESTAMP, -1, "0044-03-15 12:00:00 BC"));
        assertEquals(expected, convert(PgTypes.TIMESTAMPTZ, -1, "0044-03-15 13:00:00+01 BC"));
    }

    @Test
    void intervalKeepsMonthsDaysAndTimeApartAsIso8601() {
        assertEquals(Schema.Type.STRING, schema(PgTypes.INTERVAL, -1).type());
        assertEquals("P1Y2M3DT4H5M6.5S", convert(PgTypes.INTERVAL, -1, "1 year 2 mons 3 days 04:05:06.5"));
        assertEquals("PT0S", convert(PgTypes.INTERVAL, -1, "00:00:00"));
        assertEquals("P-1Y-2M3DT-4H-5M-6S", convert(PgTypes.INTERVAL, -1, "-1 years -2 mons +3 days -04:05:06"));
        assertEquals("P1DT-1H", convert(PgTypes.INTERVAL, -1, "1 day -01:00:00"));
        assertEquals("PT-0.000001S", convert(PgTypes.INTERVAL, -1, "-00:00:00.000001"));
        assertEquals("PT1000H", convert(PgTypes.INTERVAL, -1, "1000:00:00"));
        assertEquals("P14M", convert(PgTypes.INTERVAL, -1, "P14M"), "iso_8601 style passes through");
        assertEquals("P1Y2M", convert(PgTypes.INTERVAL, -1, "1 year 2 mons"));
    }

    @Test
    void intervalInAnotherIntervalStyleFailsInsteadOfBeingMisread() {
        assertThrows(IllegalArgumentException.class, () -> convert(PgTypes.INTERVAL, -1, "@ 1 year 2 mons"));
        assertThrows(IllegalArgumentException.class, () -> convert(PgTypes.INTERVAL, -1, "1-2 3 4:05:06"));
    }

    @Test
    void arraysConvertEachElementAndKeepNullElements() {
        Schema schema = schema(1007, -1);
        assertEquals(Schema.Type.ARRAY, schema.type());
        assertEquals(Schema.Type.INT32, schema.valueSchema().type());
        assertTrue(schema.valueSchema().isOptional());
        assertEquals(Arrays.asList(1, null, -3), convert(1007, -1, "{1,NULL,-3}"));
        assertEquals(List.of(), convert(1007, -1, "{}"));
        assertEquals(Arrays.asList(true, false), convert(1000, -1, "{t,f}"));
    }

    @Test
    void arrayQuotedNullIsTextAndUnquotedNullIsNull() {
        assertEquals(Arrays.asList("NULL", null, "null", null), convert(1009, -1, "{\"NULL\",NULL,\"null\",null}"));
    }

    @Test
    void arrayElementsUnescapeQuotesBackslashesCommasAndBraces() {
        assertEquals(List.of("a b", "say \"hi\"", "back\\slash", "x,y", "{z}", "", " lead"),
                convert(1009, -1, "{\"a b\",\"say \\\"hi\\\"\",\"back\\\\slash\",\"x,y\",\"{z}\",\"\",\" lead\"}"));
    }

    @Test
    void arrayOfByteaUnescapesBeforeDecodingHex() {
        @SuppressWarnings("unchecked")
        List<byte[]> values = (List<byte[]>) convert(1001, -1, "{\"\\\\x01ff\",NULL}");
        assertArrayEquals(new byte[] {1, (byte) 0xFF}, values.get(0));
        assertNull(values.get(1));
    }

    @Test
    void arrayOfNumericUsesTheColumnTypmodForEachElement() {
        Schema schema = schema(1231, numericTypmod(5, 1));
        assertEquals(Decimal.LOGICAL_NAME, schema.valueSchema().name());
        assertEquals(Arrays.asList(new BigDecimal("1.5"), null, null), convert(1231, numericTypmod(5, 1), "{1.5,NaN,NULL}"));
    }

    @Test
    void arrayWithExplicitLowerBoundKeepsItsElements() {
        assertEquals(List.of(7, 8), convert(1007, -1, "[0:1]={7,8}"));
    }

    @Test
    void multiDimensionalArraysFailInsteadOfBeingFlattened() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> convert(1007, -1, "{{1,2},{3,4}}"));
        assertTrue(e.getMessage().contains("multi-dimensional"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> convert(1007, -1, "[1:2][1:1]={{1},{2}}"));
    }

    @Test
    void malformedArraysFail() {
        for (String bad : new String[] {"", "{", "1,2", "{1,,2}", "{\"a}", "{a\"b}", "{1,2", "{a}b}"}) {
            assertThrows(RuntimeException.class, () -> convert(1009, -1, bad), bad);
        }
    }

    @Test
    void requiredColumnsHaveRequiredSchemas() {
        assertTrue(!ValueConverter.forType(PgTypes.INT4, -1, false).schema().isOptional());
        assertTrue(ValueConverter.forType(PgTypes.INT4, -1, true).schema().isOptional());
    }
}
