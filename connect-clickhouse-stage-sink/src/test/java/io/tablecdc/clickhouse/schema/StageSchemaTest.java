package io.tablecdc.clickhouse.schema;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.avro.file.DataFileReader;
import org.apache.avro.file.DataFileWriter;
import org.apache.avro.file.SeekableByteArrayInput;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Timestamp;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.api.Test;

import io.tablecdc.common.TablecdcTypes;

class StageSchemaTest {

    static List<Arguments> typePairs() {
        return List.of(
                Arguments.of(Schema.INT8_SCHEMA, "Int8", (byte) -7, -7),
                Arguments.of(Schema.INT16_SCHEMA, "Int16", (short) 300, 300),
                Arguments.of(Schema.INT32_SCHEMA, "Int32", Integer.MIN_VALUE, Integer.MIN_VALUE),
                Arguments.of(Schema.INT64_SCHEMA, "Int64", Long.MAX_VALUE, Long.MAX_VALUE),
                Arguments.of(Schema.FLOAT32_SCHEMA, "Float32", 1.5f, 1.5f),
                Arguments.of(Schema.FLOAT64_SCHEMA, "Float64", -0.25d, -0.25d),
                Arguments.of(Schema.BOOLEAN_SCHEMA, "Bool", true, true),
                Arguments.of(Schema.STRING_SCHEMA, "String", "naïve 東京 🚀", "naïve 東京 🚀"),
                Arguments.of(Schema.STRING_SCHEMA, "String", "", ""),
                Arguments.of(Schema.OPTIONAL_STRING_SCHEMA, "Nullable(String)", null, null),
                Arguments.of(Schema.OPTIONAL_INT64_SCHEMA, "Nullable(Int64)", 5L, 5L),
                Arguments.of(TablecdcTypes.json().build(), "String", "{\"a\":[1,2]}", "{\"a\":[1,2]}"),
                Arguments.of(TablecdcTypes.uuid().build(), "UUID", "123e4567-e89b-12d3-a456-426614174000",
                        "123e4567-e89b-12d3-a456-426614174000"),
                // 1969-12-31T23:59:59.999999Z: a timestamp before 1970 with microseconds
                Arguments.of(TablecdcTypes.microTimestamp().build(), "DateTime64(6, 'UTC')", -1L, -1L),
                Arguments.of(TablecdcTypes.microTime().build(), "Int64", 86_399_999_999L, 86_399_999_999L),
                Arguments.of(Timestamp.SCHEMA, "DateTime64(6, 'UTC')", new java.util.Date(1_700_000_000_123L), 1_700_000_000_123_000L),
                // 1900-01-01 is 25567 days before the epoch
                Arguments.of(Date.SCHEMA, "Date32", new java.util.Date(-25_567L * 86_400_000L), -25_567),
                Arguments.of(SchemaBuilder.array(Schema.INT32_SCHEMA).build(), "Array(Int32)", List.of(1, 2, 3), List.of(1, 2, 3)),
                Arguments.of(SchemaBuilder.array(Schema.OPTIONAL_STRING_SCHEMA).optional().build(), "Array(Nullable(String))",
                        null, List.of()),
                Arguments.of(SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build(), "String",
                        Map.of("k", 1), "{\"k\":1}"));
    }

    @ParameterizedTest(name = "{1} from {0}")
    @MethodSource("typePairs")
    void eachConnectTypeStagesAsItsClickHouseType(Schema fieldSchema, String clickHouseType, Object value, Object staged) throws IOException {
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("v", fieldSchema).build();
        StageSchema stage = StageSchema.of("db.t", valueSchema, Set.of("id"));
        assertEquals(clickHouseType, stage.columns().get(1).type());

        Struct row = new Struct(valueSchema).put("id", 1L).put("v", value);
        GenericRecord read = roundTrip(stage, stage.toAvro(row, java.math.BigInteger.TEN, false));
        Object actual = read.get("v");
        if (actual instanceof org.apache.avro.util.Utf8 || actual instanceof CharSequence) {
            actual = actual.toString();
        }
        if (actual instanceof List<?> list) {
            actual = list.stream().map(o -> o instanceof CharSequence cs ? cs.toString() : o).toList();
        }
        assertEquals(staged, actual);
        assertEquals(java.math.BigInteger.TEN, ClickHouseTypes.versionOf(read.get(StageSchema.VERSION_COLUMN)));
        assertEquals(0, read.get(StageSchema.IS_DELETED_COLUMN));
    }

    private static java.util.Date day(int year, int month, int dayOfMonth) {
        return new java.util.Date(java.time.LocalDate.of(year, month, dayOfMonth).toEpochDay() * 86_400_000L);
    }

    private static long micros(String instant) {
        java.time.Instant i = java.time.Instant.parse(instant);
        return i.getEpochSecond() * 1_000_000L + i.getNano() / 1000;
    }

    @Test
    void datesAndTimestampsOutsideClickHousesRangeAreStoredAtTheEdgeAndReported() throws IOException {
        Schema ts = io.tablecdc.common.TablecdcTypes.microTimestamp().optional().build();
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("d", Date.builder().optional().build())
                .field("t", ts).field("ds", SchemaBuilder.array(Date.builder().optional().build()).optional().build()).build();
        StageSchema stage = StageSchema.of("db.t", valueSchema, Set.of("id"));
        int min = (int) java.time.LocalDate.of(1900, 1, 1).toEpochDay();
        int max = (int) java.time.LocalDate.of(2299, 12, 31).toEpochDay();

        // inside the range, edges included: unchanged, nothing reported
        Struct inside = new Struct(valueSchema).put("id", 1L).put("d", day(1900, 1, 1)).put("t", micros("2299-12-31T23:59:59.999999Z"))
                .put("ds", List.of(day(2299, 12, 31)));
        GenericRecord read = roundTrip(stage, stage.toAvro(inside, java.math.BigInteger.valueOf(1), false));
        assertEquals(min, read.get("d"));
        assertEquals(micros("2299-12-31T23:59:59.999999Z"), read.get("t"));
        assertEquals(List.of(), stage.lastClamps());

        Struct outside = new Struct(valueSchema).put("id", 2L).put("d", day(1850, 6, 1)).put("t", micros("2500-01-01T00:00:00Z"))
                .put("ds", java.util.Arrays.asList(day(-43, 3, 15), null, day(2000, 1, 1), new java.util.Date(Integer.MAX_VALUE * 86_400_000L)));
        read = roundTrip(stage, stage.toAvro(outside, java.math.BigInteger.valueOf(2), false));
        assertEquals(min, read.get("d"));
        assertEquals(micros("2299-12-31T23:59:59.999999Z"), read.get("t"));
        assertEquals(java.util.Arrays.asList(min, null, (int) java.time.LocalDate.of(2000, 1, 1).toEpochDay(), max), read.get("ds"));
        assertEquals(List.of(new StageSchema.Clamp("d", "1850-06-01", "1900-01-01"),
                new StageSchema.Clamp("t", "2500-01-01T00:00:00Z", "2299-12-31T23:59:59.999999Z"),
                new StageSchema.Clamp("ds", "-0043-03-15", "1900-01-01"),
                new StageSchema.Clamp("ds", "infinity", "2299-12-31")), stage.lastClamps());
        // the next row starts afresh
        stage.toAvro(inside, java.math.BigInteger.valueOf(3), false);
        assertEquals(List.of(), stage.lastClamps());
    }

    @Test
    void anOutOfRangeDateInAKeyIsRefusedRatherThanMergedWithAnotherRow() {
        Schema valueSchema = SchemaBuilder.struct().field("d", Date.SCHEMA).field("v", Schema.OPTIONAL_STRING_SCHEMA).build();
        StageSchema stage = StageSchema.of("db.days", valueSchema, Set.of("d"));
        TypeMappingException e = assertThrows(TypeMappingException.class,
                () -> stage.toAvro(new Struct(valueSchema).put("d", day(1, 1, 1)), java.math.BigInteger.valueOf(1), false));
        assertTrue(e.getMessage().contains("table db.days, key column d: 0001-01-01 is outside ClickHouse's Date32 range"), e.getMessage());
        assertTrue(e.getMessage().contains("temporal.integer.columns"), e.getMessage());
    }

    @Test
    void integerTemporalColumnsHoldEveryValueExactly() throws IOException {
        Schema ts = io.tablecdc.common.TablecdcTypes.microTimestamp().optional().build();
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("d", Date.builder().optional().build())
                .field("t", ts).field("ds", SchemaBuilder.array(Date.builder().optional().build()).optional().build())
                .field("other", Date.builder().optional().build()).build();
        StageSchema stage = StageSchema.of("db.t", valueSchema, Set.of("id"), Set.of("d", "t", "ds")::contains);
        assertEquals(List.of("Int64", "Nullable(Int32)", "Nullable(Int64)", "Array(Nullable(Int32))", "Nullable(Date32)"),
                stage.columns().subList(0, 5).stream().map(StageColumn::type).toList());
        Struct row = new Struct(valueSchema).put("id", 1L).put("d", new java.util.Date(Integer.MIN_VALUE * 86_400_000L))
                .put("t", Long.MAX_VALUE).put("ds", List.of(day(-43, 3, 15))).put("other", day(2000, 1, 1));
        GenericRecord read = roundTrip(stage, stage.toAvro(row, java.math.BigInteger.valueOf(1), false));
        assertEquals(Integer.MIN_VALUE, read.get("d"));
        assertEquals(Long.MAX_VALUE, read.get("t"));
        assertEquals(List.of((int) java.time.LocalDate.of(-43, 3, 15).toEpochDay()), read.get("ds"));
        assertEquals(List.of(), stage.lastClamps());
    }

    @Test
    void aDecimalWiderThanItsColumnIsRefusedNamingTableAndColumnNeverRounded() {
        // BigQuery's largest BIGNUMERIC has 77 digits; BIGNUMERIC maps to Decimal(76, 38)
        Schema big = Decimal.builder(38).parameter(StageSchema.PRECISION_PARAMETER, "76").optional().build();
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("n", big).build();
        StageSchema stage = StageSchema.of("ds.big", valueSchema, Set.of("id"));
        BigDecimal max = new BigDecimal("578960446186580977117854925043439539266.34992332820282019728792003956564819967");
        TypeMappingException e = assertThrows(TypeMappingException.class,
                () -> stage.toAvro(new Struct(valueSchema).put("id", 1L).put("n", max), java.math.BigInteger.valueOf(1), false));
        assertTrue(e.getMessage().startsWith("table ds.big, column n: "), e.getMessage());
        assertTrue(e.getMessage().contains("more than 76 digits"), e.getMessage());
        assertTrue(e.getMessage().contains("list the column in decimal.text.columns"), "names the way out: " + e.getMessage());
        // one integer digit fewer fits
        stage.toAvro(new Struct(valueSchema).put("id", 1L).put("n", max.movePointLeft(1).setScale(38, java.math.RoundingMode.DOWN)), java.math.BigInteger.valueOf(1), false);
    }

    @Test
    void underDecimalTextTheWidestBignumericArrivesExactlyAsText() throws IOException {
        Schema big = Decimal.builder(38).parameter(StageSchema.PRECISION_PARAMETER, "76").optional().build();
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("n", big).build();
        StageSchema stage = StageSchema.of("ds.big", valueSchema, Set.of("id"), false, c -> false, "n"::equals);
        assertEquals("Nullable(String)", stage.columns().get(1).type());
        BigDecimal max = new BigDecimal("578960446186580977117854925043439539266.34992332820282019728792003956564819967");
        GenericRecord read = roundTrip(stage, stage.toAvro(new Struct(valueSchema).put("id", 1L).put("n", max), BigInteger.ONE, false));
        assertEquals(max.toPlainString(), read.get("n").toString());
        assertEquals(List.of(), stage.lastClamps());
    }

    /**
     * A Postgres numeric(p,s) NaN / ±Infinity reaches the sink as null plus its tablecdc.nonfinite mark: in a Decimal
     * column it is NULL and counted; under decimal.text.columns it is the text, exactly, and nothing is counted.
     */
    @Test
    void decimalNaNAndInfinityAreNullAndCountedOrExactAsText() throws IOException {
        Schema dec = Decimal.builder(2).parameter(StageSchema.PRECISION_PARAMETER, "10").optional().build();
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("n", dec)
                .field("an", SchemaBuilder.array(dec).optional().build()).field("m", dec).build();
        Struct row = new Struct(valueSchema).put("id", 1L).put("m", new BigDecimal("12.50"))
                .put("an", java.util.Arrays.asList(new BigDecimal("1.50"), null, null));
        Map<String, String> marks = Map.of("n", "NaN", "an[2]", "-Infinity");

        StageSchema decimals = StageSchema.of("public.n", valueSchema, Set.of("id"));
        GenericRecord read = roundTrip(decimals, decimals.toAvro(row, BigInteger.ONE, false, List.of(), null, BigInteger.ONE, marks));
        assertNull(read.get("n"));
        assertEquals(3, ((List<?>) read.get("an")).size());
        assertNull(((List<?>) read.get("an")).get(2));
        assertEquals(List.of(new StageSchema.Clamp("n", "NaN", "NULL", "decimal.text.columns"),
                new StageSchema.Clamp("an", "-Infinity", "NULL", "decimal.text.columns")), decimals.lastClamps());
        // a delete's image is not a value: nothing counted
        decimals.toAvro(row, BigInteger.TWO, true, List.of(), null, BigInteger.TWO, marks);
        assertEquals(List.of(), decimals.lastClamps());

        StageSchema text = StageSchema.of("public.n", valueSchema, Set.of("id"), false, c -> false, c -> !c.equals("m"));
        assertEquals(List.of("Int64", "Nullable(String)", "Array(Nullable(String))", "Nullable(Decimal(10, 2))"),
                text.columns().stream().limit(4).map(StageColumn::type).toList());
        read = roundTrip(text, text.toAvro(row, BigInteger.ONE, false, List.of(), null, BigInteger.ONE, marks));
        assertEquals("NaN", read.get("n").toString());
        assertEquals("[1.50, null, -Infinity]", read.get("an").toString());
        assertEquals(List.of(), text.lastClamps());
    }

    @Test
    void decimalKeepsItsScaleAndPrecision() throws IOException {
        Schema amount = Decimal.builder(4).parameter(StageSchema.PRECISION_PARAMETER, "12").optional().build();
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("amount", amount).build();
        StageSchema stage = StageSchema.of("db.money", valueSchema, Set.of("id"));
        assertEquals("Nullable(Decimal(12, 4))", stage.columns().get(1).type());

        GenericRecord read = roundTrip(stage, stage.toAvro(new Struct(valueSchema).put("id", 1L).put("amount", new BigDecimal("-12345.6789")), java.math.BigInteger.valueOf(1), false));
        ByteBuffer bytes = (ByteBuffer) read.get("amount");
        byte[] unscaled = new byte[bytes.remaining()];
        bytes.get(unscaled);
        assertEquals(new BigDecimal(new BigInteger(unscaled), 4), new BigDecimal("-12345.6789"));
        assertEquals(4, ((org.apache.avro.LogicalTypes.Decimal) stage.avroSchema().getField("amount").schema().getTypes().get(1).getLogicalType()).getScale());
    }

    @Test
    void decimalThatWouldLoseDigitsIsRejectedNamingTableAndColumn() {
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("price", Decimal.schema(2)).build();
        StageSchema stage = StageSchema.of("shop.items", valueSchema, Set.of("id"));
        TypeMappingException e = assertThrows(TypeMappingException.class,
                () -> stage.toAvro(new Struct(valueSchema).put("id", 1L).put("price", new BigDecimal("1.005")), java.math.BigInteger.valueOf(1), false));
        assertTrue(e.getMessage().contains("shop.items") && e.getMessage().contains("price"), e.getMessage());
    }

    @Test
    void keyColumnsAreNeverNullableAndMustExist() {
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.OPTIONAL_INT64_SCHEMA).build();
        assertEquals("Int64", StageSchema.of("t", valueSchema, Set.of("id")).columns().get(0).type());
        TypeMappingException e = assertThrows(TypeMappingException.class, () -> StageSchema.of("t", valueSchema, Set.of("missing")));
        assertTrue(e.getMessage().contains("missing"), e.getMessage());
    }

    @Test
    void deleteCarryingOnlyTheKeyStagesZeroValuesForRequiredColumns() throws IOException {
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("name", Schema.STRING_SCHEMA)
                .field("note", Schema.OPTIONAL_STRING_SCHEMA).build();
        StageSchema stage = StageSchema.of("t", valueSchema, Set.of("id"));
        Struct keyOnly = new Struct(valueSchema).put("id", 9L).put("name", "x");
        GenericRecord read = roundTrip(stage, stage.toAvro(keyOnly, java.math.BigInteger.valueOf(3), true));
        assertEquals(1, read.get(StageSchema.IS_DELETED_COLUMN));
        assertNull(read.get("note"));
    }

    @Test
    void columnNamesThatAreNotAvroNamesAreRenamedInTheFileOnly() {
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("order-total €", Schema.FLOAT64_SCHEMA).build();
        StageColumn column = StageSchema.of("t", valueSchema, Set.of("id")).columns().get(1);
        assertEquals("order-total €", column.column());
        assertEquals("_c1_order_total__", column.avroName());
    }

    @Test
    void columnsCanBeReadBackFromTheFileSchemaAlone() {
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("a b", Schema.OPTIONAL_STRING_SCHEMA).build();
        StageSchema stage = StageSchema.of("t", valueSchema, Set.of("id"));
        org.apache.avro.Schema reparsed = new org.apache.avro.Schema.Parser().parse(stage.avroSchema().toString());
        assertEquals(stage.columns(), StageSchema.columnsOf(reparsed));
    }

    @Test
    void aColumnTypeInAStageFileThatThisSinkDoesNotWriteIsRefusedNotPastedIntoDdl() {
        String schema = "{\"type\":\"record\",\"name\":\"row\",\"fields\":[{\"name\":\"id\",\"type\":\"long\","
                + "\"tablecdc.column\":\"id\",\"tablecdc.type\":\"%s\"}]}";
        for (String bad : List.of("Int64) ENGINE = Memory; DROP TABLE x --", "Int64, `x` String", "Nullable(Nullable(Int64))",
                "Decimal(10, 11)", "LowCardinality(String)", "Object('json')", "DateTime64(6, 'UTC') DEFAULT now()")) {
            org.apache.avro.Schema file = new org.apache.avro.Schema.Parser().parse(String.format(schema, bad.replace("'", "'")));
            TypeMappingException e = assertThrows(TypeMappingException.class, () -> StageSchema.columnsOf(file), bad);
            assertTrue(e.getMessage().contains("not a type this sink writes"), e.getMessage());
        }
        for (String good : List.of("Int64", "Nullable(Decimal(38, 2))", "Array(Nullable(String))", "DateTime64(6, 'UTC')",
                "Array(Array(UUID))", "Date32", "Bool", "UInt8", "UInt64", "UInt128", "Decimal(76, 76)")) {
            org.apache.avro.Schema file = new org.apache.avro.Schema.Parser().parse(String.format(schema, good));
            assertEquals(good, StageSchema.columnsOf(file).get(0).type());
        }
    }

    @Test
    void everyTypeThisSinkMapsIsOneItReadsBack() {
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA)
                .field("d", Decimal.builder(3).parameter("connect.decimal.precision", "12").optional().build())
                .field("ts", Timestamp.builder().optional().build()).field("day", Date.builder().build())
                .field("tags", SchemaBuilder.array(Schema.OPTIONAL_STRING_SCHEMA).optional().build())
                .field("ok", Schema.BOOLEAN_SCHEMA).field("f", Schema.FLOAT32_SCHEMA).field("b", Schema.INT8_SCHEMA).build();
        StageSchema stage = StageSchema.of("t", valueSchema, Set.of("id"));
        org.apache.avro.Schema reparsed = new org.apache.avro.Schema.Parser().parse(stage.avroSchema().toString());
        assertEquals(stage.columns(), StageSchema.columnsOf(reparsed));
    }

    @Test
    void reservedColumnNamesAreRefused() {
        Schema valueSchema = SchemaBuilder.struct().field("_tablecdc_version", Schema.INT64_SCHEMA).build();
        assertThrows(TypeMappingException.class, () -> StageSchema.of("t", valueSchema, Set.of()));
    }

    @Test
    void recordWithoutStructSchemaIsRejectedWithAdvice() {
        TypeMappingException e = assertThrows(TypeMappingException.class, () -> StageSchema.of("db.t", null, Set.of()));
        assertTrue(e.getMessage().contains("schemas.enable=true"), e.getMessage());
    }

    @Test
    void bytesStayBytes() throws IOException {
        Schema valueSchema = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("blob", Schema.BYTES_SCHEMA).build();
        StageSchema stage = StageSchema.of("t", valueSchema, Set.of("id"));
        GenericRecord read = roundTrip(stage, stage.toAvro(new Struct(valueSchema).put("id", 1L).put("blob", new byte[] {0, -1, 2}), java.math.BigInteger.valueOf(1), false));
        ByteBuffer bytes = (ByteBuffer) read.get("blob");
        byte[] out = new byte[bytes.remaining()];
        bytes.get(out);
        assertArrayEquals(new byte[] {0, -1, 2}, out);
    }

    private static GenericRecord roundTrip(StageSchema stage, GenericRecord record) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataFileWriter<GenericRecord> writer = new DataFileWriter<>(new GenericDatumWriter<GenericRecord>(stage.avroSchema()))) {
            writer.create(stage.avroSchema(), bytes);
            writer.append(record);
        }
        try (DataFileReader<GenericRecord> reader = new DataFileReader<>(new SeekableByteArrayInput(bytes.toByteArray()),
                new GenericDatumReader<>())) {
            return reader.next();
        }
    }
}
