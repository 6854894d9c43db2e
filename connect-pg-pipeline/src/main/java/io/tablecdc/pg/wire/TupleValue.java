package io.tablecdc.pg.wire;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HexFormat;

/** One column of a {@link TupleData}: the four kinds pgoutput sends. */
public sealed interface TupleValue {
    /** {@code n}: SQL NULL. */
    record Null() implements TupleValue {
        @Override
        public String toString() {
            return "null";
        }
    }

    /**
     * {@code u}: an unchanged TOASTed value whose content the server did not send (an UPDATE that did not
     * touch the column). It means "keep the previous value", never "null".
     */
    record UnchangedToast() implements TupleValue {
        @Override
        public String toString() {
            return "unchanged-toast";
        }
    }

    /** {@code t}: the value in the type's text output format, decoded as UTF-8. */
    record Text(String value) implements TupleValue {
        public Text {
            if (value == null) {
                throw new IllegalArgumentException("a text tuple value is never null (SQL NULL is TupleValue.Null)");
            }
        }

        @Override
        public String toString() {
            return "'" + value + "'";
        }
    }

    /**
     * {@code b}: the value in the type's binary send format. Only sent with {@code binary true} (protocol
     * version 2 and later); decoded so that a stream using it fails in conversion with a clear reason
     * rather than in framing.
     */
    record Binary(byte[] value) implements TupleValue {
        public Binary {
            value = value.clone();
        }

        @Override
        public byte[] value() {
            return value.clone();
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof Binary b && Arrays.equals(value, b.value);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(value);
        }

        @Override
        public String toString() {
            return "binary:" + HexFormat.of().formatHex(value);
        }
    }

    TupleValue NULL = new Null();
    TupleValue UNCHANGED_TOAST = new UnchangedToast();

    static TupleValue text(String value) {
        return new Text(value);
    }

    static TupleValue text(byte[] utf8) {
        return new Text(new String(utf8, StandardCharsets.UTF_8));
    }
}
