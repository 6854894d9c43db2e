package io.tablecdc.pg.convert;

import java.util.function.Function;

import org.apache.kafka.connect.data.Schema;

/**
 * The Connect schema of one column and the conversion of its text values. A converter may turn a value it
 * cannot represent (numeric {@code NaN}, date {@code infinity}) into null; it fails with
 * {@link IllegalArgumentException} or {@link ArithmeticException} on text that is not of its type.
 */
public final class ColumnConverter {
    private final Schema schema;
    private final Function<String, Object> parse;

    ColumnConverter(Schema schema, Function<String, Object> parse) {
        this.schema = schema;
        this.parse = parse;
    }

    public Schema schema() {
        return schema;
    }

    /** The Connect value of {@code text} (never null text: SQL NULL never reaches a converter). */
    public Object convert(String text) {
        return parse.apply(text);
    }
}
