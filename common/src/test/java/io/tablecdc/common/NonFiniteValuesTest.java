package io.tablecdc.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;
import org.junit.jupiter.api.Test;

class NonFiniteValuesTest {
    private static final Schema SCHEMA = SchemaBuilder.struct()
            .field("id", Schema.INT32_SCHEMA)
            .field("f4", Schema.OPTIONAL_FLOAT32_SCHEMA)
            .field("f8", Schema.OPTIONAL_FLOAT64_SCHEMA)
            .field("g8", Schema.OPTIONAL_FLOAT64_SCHEMA)
            .field("a8", SchemaBuilder.array(Schema.OPTIONAL_FLOAT64_SCHEMA).optional().build())
            .field("a[1]", Schema.OPTIONAL_FLOAT64_SCHEMA)
            .field("s", Schema.OPTIONAL_STRING_SCHEMA)
            .field("d", org.apache.kafka.connect.data.Decimal.builder(2).optional().build())
            .field("ad", SchemaBuilder.array(org.apache.kafka.connect.data.Decimal.builder(2).optional().build()).optional().build())
            .build();

    private static Struct row() {
        return new Struct(SCHEMA).put("id", 1).put("f4", Float.NaN).put("f8", Double.NEGATIVE_INFINITY).put("g8", 1.5)
                .put("a8", Arrays.asList(1.0, Double.POSITIVE_INFINITY, null, Double.NaN)).put("a[1]", Double.NaN).put("s", "NaN")
                .put("d", new java.math.BigDecimal("1.25")).put("ad", Arrays.asList(new java.math.BigDecimal("1.00"), null));
    }

    private static Struct throughJson(Struct value) {
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of("schemas.enable", "true"), false);
        byte[] bytes = converter.fromConnectData("t", value.schema(), value);
        SchemaAndValue back = converter.toConnectData("t", bytes);
        return (Struct) back.value();
    }

    /** Why the header exists: Kafka's JsonConverter turns NaN and ±Infinity into 0, finite values survive. */
    @Test
    void jsonConverterReadsNonFiniteValuesBackAsZero() {
        Struct back = throughJson(row());
        assertEquals(0.0f, back.getFloat32("f4"));
        assertEquals(0.0, back.getFloat64("f8"));
        assertEquals(1.5, back.getFloat64("g8"));
        assertEquals(Arrays.asList(1.0, 0.0, null, 0.0), back.getArray("a8"));
    }

    @Test
    void marksNameEveryNonFiniteFloatAndArrayElement() {
        assertEquals(List.of("f4=NaN", "f8=-Infinity", "a8[1]=Infinity", "a8[3]=NaN", "a[1]=NaN"), NonFiniteValues.marks(row()));
        Struct finite = new Struct(SCHEMA).put("id", 2).put("f8", 0.0);
        assertEquals(List.of(), NonFiniteValues.marks(finite));
        assertEquals(List.of(), NonFiniteValues.marks(null));
    }

    /** Through JsonConverter for the value and the default header converter for the marks, every value comes back exact. */
    @Test
    void restoreAfterJsonConverterGivesTheExactValues() {
        Struct original = row();
        SimpleHeaderConverter headers = new SimpleHeaderConverter();
        headers.configure(Map.of());
        List<String> marks = new ArrayList<>();
        for (String mark : NonFiniteValues.marks(original)) {
            byte[] bytes = headers.fromConnectHeader("t", RecordHeaders.NON_FINITE, Schema.STRING_SCHEMA, mark);
            SchemaAndValue back = headers.toConnectHeader("t", RecordHeaders.NON_FINITE, bytes);
            marks.add(back.value().toString());
        }
        Struct converted = throughJson(original);
        assertNotEquals(original, converted);
        Struct restored = NonFiniteValues.restore(converted, marks, new java.util.HashMap<>());
        assertTrue(Float.isNaN(restored.getFloat32("f4")));
        assertEquals(Double.NEGATIVE_INFINITY, restored.getFloat64("f8"));
        assertEquals(1.5, restored.getFloat64("g8"));
        List<Double> a8 = restored.getArray("a8");
        assertEquals(1.0, a8.get(0));
        assertEquals(Double.POSITIVE_INFINITY, a8.get(1));
        assertEquals(null, a8.get(2));
        assertTrue(Double.isNaN(a8.get(3)));
        // a field named exactly as the mark wins over an element of the array it starts with
        assertTrue(Double.isNaN(restored.getFloat64("a[1]")));
        assertEquals("NaN", restored.getString("s"));
        assertEquals(Arrays.asList(1.0, 0.0, null, 0.0), converted.getArray("a8"), "the converted value is left as it was");
        assertSame(converted, NonFiniteValues.restore(converted, List.of(), new java.util.HashMap<>()));
    }

    @Test
    void aMarkThatNamesNoFloatFailsNamingTheHeader() {
        Struct value = throughJson(row());
        for (String mark : List.of("s=NaN", "nope=NaN", "f8=1.0", "f8", "a8[9]=NaN", "a8[x]=NaN", "id=Infinity", "d=NaN",
                "ad[0]=NaN", "ad[5]=NaN", "s[0]=NaN")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> NonFiniteValues.restore(value, List.of(mark), new java.util.HashMap<>()), mark);
            assertTrue(e.getMessage().contains(RecordHeaders.NON_FINITE) && e.getMessage().contains(mark), e.getMessage());
        }
    }

    /** A decimal cannot hold NaN or ±Infinity: the source sends null and the mark; restore hands the marks back by name. */
    @Test
    void marksOfNullDecimalsAreHandedBackByName() {
        Struct value = new Struct(SCHEMA).put("id", 1).put("ad", Arrays.asList(new java.math.BigDecimal("1.00"), null));
        java.util.Map<String, String> decimals = new java.util.LinkedHashMap<>();
        Struct restored = NonFiniteValues.restore(value, List.of("d=-Infinity", "ad[1]=NaN"), decimals);
        assertSame(value, restored, "no float to put back");
        assertEquals(java.util.Map.of("d", "-Infinity", "ad[1]", "NaN"), decimals);
        assertThrows(IllegalArgumentException.class, () -> NonFiniteValues.restore(value, List.of("ad[0]=NaN"), decimals),
                "a decimal that holds a value is not non-finite");
    }
}
