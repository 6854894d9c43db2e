package io.tablecdc.common;

import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;

/**
 * The {@link RecordHeaders#NON_FINITE} headers: the values of a record's value that are {@code NaN}, {@code Infinity} or
 * {@code -Infinity}. Kafka's {@code JsonConverter} writes such a float as a JSON string and reads it back as 0, and a
 * Connect {@code Decimal} cannot hold them at all (a source sends null there); so the source names every one of them in
 * a header, which every header converter carries as text, and the sink puts the exact value back (a float), or knows
 * what the null stands for (a decimal), whatever converter the worker uses.
 *
 * <p>One header per value: {@code column=NaN} for a field, {@code column[i]=-Infinity} for element {@code i} (from 0)
 * of an ARRAY field. The text after the last {@code =} is the value ({@code NaN}, {@code Infinity} or
 * {@code -Infinity}); the text before it names a field of the value exactly, or else, ending in {@code [i]}, an element
 * of the array field it starts with. A float field holds the value too (0 after JsonConverter); a decimal field holds
 * null.
 */
public final class NonFiniteValues {
    private NonFiniteValues() {
    }

    /** The header values for the non-finite floats of {@code value} (top-level fields and array elements), in field order. */
    public static List<String> marks(Struct value) {
        if (value == null) {
            return List.of();
        }
        List<String> marks = null;
        for (Field field : value.schema().fields()) {
            Schema schema = field.schema();
            if (isFloat(schema)) {
                String token = token(value.get(field));
                if (token != null) {
                    marks = add(marks, field.name() + "=" + token);
                }
            } else if (schema.type() == Schema.Type.ARRAY && isFloat(schema.valueSchema())
                    && value.get(field) instanceof List<?> list) {
                for (int i = 0; i < list.size(); i++) {
                    String token = token(list.get(i));
                    if (token != null) {
                        marks = add(marks, field.name() + "[" + i + "]=" + token);
                    }
                }
            }
        }
        return marks == null ? List.of() : marks;
    }

    /**
     * {@code value} with the float values {@code marks} name put back (a copy; {@code value} itself when there are none).
     * The marks that name a decimal field or element (whose value is null) go into {@code decimals}, by the text before
     * the {@code =} ({@code column} or {@code column[i]}), with their value.
     *
     * @throws IllegalArgumentException naming the header value when it names no float or decimal field or array element
     *     of {@code value}, names a decimal that is not null, or its value is not {@code NaN}, {@code Infinity} or
     *     {@code -Infinity}
     */
    public static Struct restore(Struct value, List<String> marks, java.util.Map<String, String> decimals) {
        if (marks.isEmpty() || value == null) {
            return value;
        }
        Struct out = null;
        for (String mark : marks) {
            int eq = mark.lastIndexOf('=');
            String token = eq < 0 ? "" : mark.substring(eq + 1);
            double number = switch (token) {
                case "NaN" -> Double.NaN;
                case "Infinity" -> Double.POSITIVE_INFINITY;
                case "-Infinity" -> Double.NEGATIVE_INFINITY;
                default -> throw new IllegalArgumentException(bad(mark, "its value is not NaN, Infinity or -Infinity"));
            };
            String name = mark.substring(0, eq);
            Field field = value.schema().field(name);
            if (field != null) {
                if (isDecimal(field.schema())) {
                    if (value.get(field) != null) {
                        throw new IllegalArgumentException(bad(mark, "decimal field " + name + " is not null"));
                    }
                    decimals.put(name, token);
                    continue;
                }
                if (!isFloat(field.schema())) {
                    throw new IllegalArgumentException(bad(mark, "field " + name + " is " + field.schema().type()
                            + ", not a float or a decimal"));
                }
                out = out == null ? copy(value) : out;
                out.put(field, boxed(field.schema(), number));
                continue;
            }
            int open = name.lastIndexOf('[');
            Field array = open > 0 && name.endsWith("]") ? value.schema().field(name.substring(0, open)) : null;
            Schema element = array == null || array.schema().type() != Schema.Type.ARRAY ? null : array.schema().valueSchema();
            if (!isFloat(element) && !isDecimal(element)) {
                throw new IllegalArgumentException(bad(mark, "the value has no float or decimal field or array named so"));
            }
            int index;
            try {
                index = Integer.parseInt(name.substring(open + 1, name.length() - 1));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(bad(mark, "the array index is not a number"), e);
            }
            List<?> list = (List<?>) value.get(array);
            if (list == null || index < 0 || index >= list.size()) {
                throw new IllegalArgumentException(bad(mark, "array " + array.name() + " has no element " + index));
            }
            if (isDecimal(element)) {
                if (list.get(index) != null) {
                    throw new IllegalArgumentException(bad(mark, "element " + index + " of decimal array " + array.name()
                            + " is not null"));
                }
                decimals.put(name, token);
                continue;
            }
            out = out == null ? copy(value) : out;
            @SuppressWarnings("unchecked")
            List<Object> target = (List<Object>) out.get(array);
            target.set(index, boxed(element, number));
        }
        return out == null ? value : out;
    }

    /** A copy of {@code value} whose lists are copies too (they are changed in place). */
    private static Struct copy(Struct value) {
        Struct out = new Struct(value.schema());
        for (Field field : value.schema().fields()) {
            Object v = value.get(field);
            out.put(field, v instanceof List<?> list ? new ArrayList<>(list) : v);
        }
        return out;
    }

    private static boolean isDecimal(Schema schema) {
        return schema != null && org.apache.kafka.connect.data.Decimal.LOGICAL_NAME.equals(schema.name());
    }

    private static String bad(String mark, String why) {
        return "header " + RecordHeaders.NON_FINITE + " '" + mark + "': " + why;
    }

    private static boolean isFloat(Schema schema) {
        return schema != null && (schema.type() == Schema.Type.FLOAT32 || schema.type() == Schema.Type.FLOAT64);
    }

    private static Object boxed(Schema schema, double number) {
        return schema.type() == Schema.Type.FLOAT32 ? (Object) (float) number : (Object) number;
    }

    private static String token(Object v) {
        double d;
        if (v instanceof Double x) {
            d = x;
        } else if (v instanceof Float x) {
            d = x;
        } else {
            return null;
        }
        if (Double.isNaN(d)) {
            return "NaN";
        }
        return d == Double.POSITIVE_INFINITY ? "Infinity" : d == Double.NEGATIVE_INFINITY ? "-Infinity" : null;
    }

    private static List<String> add(List<String> marks, String mark) {
        List<String> out = marks == null ? new ArrayList<>(2) : marks;
        out.add(mark);
        return out;
    }
}
