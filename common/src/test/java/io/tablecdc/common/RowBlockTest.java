package io.tablecdc.common;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;
import org.junit.jupiter.api.Test;

class RowBlockTest {
    private static final Schema VALUE = SchemaBuilder.struct().name("public.t")
            .field("id", Schema.INT64_SCHEMA)
            .field("small", Schema.OPTIONAL_INT16_SCHEMA)
            .field("tiny", Schema.OPTIONAL_INT8_SCHEMA)
            .field("i", Schema.OPTIONAL_INT32_SCHEMA)
            .field("f4", Schema.OPTIONAL_FLOAT32_SCHEMA)
            .field("f8", Schema.OPTIONAL_FLOAT64_SCHEMA)
            .field("ok", Schema.OPTIONAL_BOOLEAN_SCHEMA)
            .field("s", Schema.OPTIONAL_STRING_SCHEMA)
            .field("b", Schema.OPTIONAL_BYTES_SCHEMA)
            .field("d", Decimal.builder(3).parameter("connect.decimal.precision", "20").optional().build())
            .field("day", Date.builder().optional().build())
            .field("tod", Time.builder().optional().build())
            .field("ts", Timestamp.builder().optional().build())
            .field("us", TablecdcTypes.microTimestamp().optional().build())
            .field("a8", SchemaBuilder.array(Schema.OPTIONAL_FLOAT64_SCHEMA).optional().build())
            .field("m", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.OPTIONAL_INT32_SCHEMA).optional().build())
            .field("nested", SchemaBuilder.struct().field("x", Schema.STRING_SCHEMA).optional().version(3).build())
            .build();
    private static final Schema KEY = SchemaBuilder.struct().name("public.t.key").field("id", Schema.INT64_SCHEMA).build();

    private static Struct full(long id) {
        Struct nested = new Struct(VALUE.field("nested").schema()).put("x", "ü€");
        return new Struct(VALUE).put("id", id).put("small", (short) -12).put("tiny", (byte) -3).put("i", Integer.MIN_VALUE)
                .put("f4", Float.NaN).put("f8", Double.NEGATIVE_INFINITY).put("ok", true).put("s", "a\u0000b")
                .put("b", new byte[] {0, -1, 7}).put("d", new BigDecimal("-12345678901234567.891"))
                .put("day", new java.util.Date(-86_400_000L * 719_528)).put("tod", new java.util.Date(86_399_999L))
                .put("ts", new java.util.Date(-1L)).put("us", Long.MIN_VALUE)
                .put("a8", Arrays.asList(1.5, null, Double.NaN)).put("m", Map.of("k", 1)).put("nested", nested);
    }

    @Test
    void rowsComeBackWithTheirSchemasValuesAndHeaders() {
        RowBlock.Writer writer = new RowBlock.Writer(VALUE, KEY);
        Struct sparse = new Struct(VALUE).put("id", 2L);
        BigInteger big = BigInteger.ONE.shiftLeft(127).add(BigInteger.TEN);
        writer.add(RecordHeaders.Op.SNAPSHOT, BigInteger.ZERO, full(1), Set.of(), false, List.of(), null);
        writer.add(RecordHeaders.Op.UPDATE, big, sparse, Set.of("s", "b"), true, List.of("d=NaN"), null);
        writer.add(RecordHeaders.Op.DELETE, BigInteger.valueOf(Long.MAX_VALUE), sparse, Set.of(), false, List.of(), null);
        assertEquals(3, writer.rows());
        byte[] block = writer.finish();
        assertEquals(0, writer.rows());

        RowBlock.Decoded decoded = new RowBlock.Reader().read(block);
        assertEquals(VALUE, decoded.valueSchema());
        assertEquals(KEY, decoded.keySchema());
        assertEquals(3, decoded.rows().size());

        RowBlock.Row first = decoded.rows().get(0);
        assertEquals(RecordHeaders.Op.SNAPSHOT, first.op());
        assertEquals(BigInteger.ZERO, first.version());
        Struct expected = full(1);
        for (org.apache.kafka.connect.data.Field field : VALUE.fields()) {
            Object want = expected.get(field);
            Object got = first.value().get(field.name());
            if (want instanceof byte[] bytes) {
                assertArrayEquals(bytes, (byte[]) got, field.name());
            } else {
                assertEquals(want, got, field.name());
            }
        }
        assertTrue(Float.isNaN(first.value().getFloat32("f4")));
        assertEquals(new Struct(KEY).put("id", 1L), first.key());
        assertEquals(List.of(), first.unchanged());
        assertNull(first.replayId());

        RowBlock.Row second = decoded.rows().get(1);
        assertEquals(RecordHeaders.Op.UPDATE, second.op());
        assertEquals(big, second.version());
        assertEquals(List.of("s", "b"), second.unchanged().stream().sorted(java.util.Comparator.reverseOrder()).toList());
        assertTrue(second.keyChanged());
        assertEquals(List.of("d=NaN"), second.nonFinite());
        assertEquals(sparse, second.value());
        assertEquals(BigInteger.valueOf(Long.MAX_VALUE), decoded.rows().get(2).version());
    }

    @Test
    void aTruncateBlockHasNoSchemas() {
        RowBlock.Writer writer = new RowBlock.Writer(null, null);
        writer.add(RecordHeaders.Op.TRUNCATE, BigInteger.valueOf(99), null, Set.of(), false, List.of(), "7/0/table/16384");
        RowBlock.Decoded decoded = new RowBlock.Reader().read(writer.finish());
        assertNull(decoded.valueSchema());
        RowBlock.Row row = decoded.rows().get(0);
        assertEquals(RecordHeaders.Op.TRUNCATE, row.op());
        assertNull(row.value());
        assertNull(row.key());
        assertEquals("7/0/table/16384", row.replayId());
    }

    @Test
    void equalSchemaSectionsGiveTheSameSchemaObjects() {
        RowBlock.Writer writer = new RowBlock.Writer(VALUE, KEY);
        writer.add(RecordHeaders.Op.CREATE, BigInteger.ONE, full(1), Set.of(), false, List.of(), null);
        byte[] one = writer.finish();
        writer.add(RecordHeaders.Op.CREATE, BigInteger.TWO, full(2), Set.of(), false, List.of(), null);
        byte[] two = writer.finish();
        RowBlock.Reader reader = new RowBlock.Reader();
        RowBlock.Decoded a = reader.read(one);
        RowBlock.Decoded b = reader.read(two);
        assertSame(a.valueSchema(), b.valueSchema());
        assertSame(a.valueSchema(), b.rows().get(0).value().schema());
        assertEquals(2L, b.rows().get(0).value().get("id"));
        assertNotSame(a.valueSchema(), new RowBlock.Reader().read(one).valueSchema());
    }

    @Test
    void malformedBlocksAreRefusedNamingWhatIsWrong() {
        RowBlock.Writer writer = new RowBlock.Writer(VALUE, KEY);
        writer.add(RecordHeaders.Op.CREATE, BigInteger.ONE, full(1), Set.of(), false, List.of(), null);
        byte[] block = writer.finish();
        RowBlock.Reader reader = new RowBlock.Reader();
        IllegalArgumentException early = assertThrows(IllegalArgumentException.class,
                () -> reader.read(Arrays.copyOf(block, block.length - 3)));
        assertTrue(early.getMessage().contains("ends early"), early.getMessage());
        byte[] longer = Arrays.copyOf(block, block.length + 2);
        IllegalArgumentException trailing = assertThrows(IllegalArgumentException.class, () -> reader.read(longer));
        assertTrue(trailing.getMessage().contains("bytes after its 1 rows"), trailing.getMessage());
        IllegalArgumentException notBlock = assertThrows(IllegalArgumentException.class,
                () -> reader.read("{\"id\":1}".getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        assertTrue(notBlock.getMessage().contains("not a tablecdc row block"), notBlock.getMessage());
        Struct other = new Struct(KEY).put("id", 1L);
        assertThrows(IllegalArgumentException.class,
                () -> writer.add(RecordHeaders.Op.CREATE, BigInteger.ONE, other, Set.of(), false, List.of(), null));
    }

    /** Any corruption of a block is refused as unreadable (IllegalArgumentException) or read, never another failure. */
    @Test
    void corruptedBlocksAreRefusedAsUnreadable() {
        RowBlock.Writer writer = new RowBlock.Writer(VALUE, KEY);
        writer.add(RecordHeaders.Op.CREATE, BigInteger.ONE, full(1), Set.of(), false, List.of(), null);
        writer.add(RecordHeaders.Op.UPDATE, BigInteger.TEN, full(2), Set.of("s"), false, List.of("d=NaN"), null);
        byte[] block = writer.finish();
        java.util.Random random = new java.util.Random(7);
        int refused = 0;
        for (int i = 0; i < 5_000; i++) {
            byte[] corrupt = block.clone();
            for (int flips = 1 + random.nextInt(3); flips > 0; flips--) {
                corrupt[4 + random.nextInt(corrupt.length - 4)] = (byte) random.nextInt(256);
            }
            try {
                new RowBlock.Reader().read(corrupt);
            } catch (IllegalArgumentException e) {
                refused++;
            }
        }
        assertTrue(refused > 1_000, "most corruptions are noticed: " + refused);
    }
}
