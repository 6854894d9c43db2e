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
