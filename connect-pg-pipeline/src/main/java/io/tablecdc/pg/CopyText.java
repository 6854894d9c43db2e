package io.tablecdc.pg;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import io.tablecdc.pg.wire.TupleData;
import io.tablecdc.pg.wire.TupleValue;

/**
 * Parses one row of {@code COPY … TO STDOUT} in text format into the same {@link TupleData} a pgoutput message
 * carries: both use the types' text output, so the copy and the streams convert values with one converter.
 *
 * <p>Text format: columns separated by a tab, the row ended by a newline, {@code \N} for NULL, and backslash
 * escapes for the backslash itself and control characters ({@code \b \f \n \r \t \v}, octal {@code \ooo}, hex
 * {@code \xhh}); any other escaped character stands for itself. Bytes are UTF-8 (the connection's client
 * encoding); tabs and backslashes never occur inside a multi-byte UTF-8 sequence, so splitting on bytes is safe.
 */
final class CopyText {
    private CopyText() {
    }

    /**
     * The values of one row.
     *
     * @throws IllegalArgumentException when the row does not have {@code columns} values
     */
    static TupleData parse(byte[] row, int columns) {
        int end = row.length;
        if (end > 0 && row[end - 1] == '\n') {
            end--;
        }
        List<TupleValue> values = new ArrayList<>(columns);
        int start = 0;
        while (true) {
            int tab = start;
            while (tab < end && row[tab] != '\t') {
                tab++;
            }
            values.add(value(row, start, tab));
            if (tab >= end) {
                break;
            }
            start = tab + 1;
        }
        if (values.size() != columns) {
            throw new IllegalArgumentException("a COPY row has " + values.size() + " values where " + columns
                    + " columns were expected");
        }
        return new TupleData(values);
    }

    private static TupleValue value(byte[] row, int from, int to) {
        if (to - from == 2 && row[from] == '\\' && row[from + 1] == 'N') {
            return TupleValue.NULL;
        }
        int backslash = from;
        while (backslash < to && row[backslash] != '\\') {
            backslash++;
        }
        if (backslash == to) {
            return TupleValue.text(new String(row, from, to - from, StandardCharsets.UTF_8));
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(to - from);
        out.write(row, from, backslash - from);
        int i = backslash;
        while (i < to) {
            byte b = row[i];
            if (b != '\\' || i + 1 >= to) {
                out.write(b);
                i++;
                continue;
            }
            byte next = row[i + 1];
            i += 2;
            switch (next) {
                case 'b' -> out.write('\b');
                case 'f' -> out.write('\f');
                case 'n' -> out.write('\n');
                case 'r' -> out.write('\r');
                case 't' -> out.write('\t');
                case 'v' -> out.write(0x0B);
                case 'x' -> {
                    int value = 0;
                    int digits = 0;
                    while (digits < 2 && i < to && Character.digit(row[i], 16) >= 0) {
                        value = value * 16 + Character.digit(row[i], 16);
                        i++;
                        digits++;
                    }
                    if (digits == 0) {
                        out.write('x');
                    } else {
                        out.write(value);
                    }
                }
                default -> {
                    if (next >= '0' && next <= '7') {
                        int value = next - '0';
                        int digits = 1;
                        while (digits < 3 && i < to && row[i] >= '0' && row[i] <= '7') {
                            value = value * 8 + (row[i] - '0');
                            i++;
                            digits++;
                        }
                        out.write(value);
                    } else {
                        out.write(next);
                    }
                }
            }
        }
        return TupleValue.text(out.toByteArray());
    }
}
