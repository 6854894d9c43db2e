package io.tablecdc.e2e.bench;

/**
 * ClickHouse's TabSeparated text, as the BigQuery export baseline writes it: fields separated by a tab, rows ended by
 * a newline, {@code \N} for NULL, and in strings a backslash escape for the backslash, tab, newline, carriage return,
 * NUL, backspace and form feed (what ClickHouse's TabSeparated input reads back as the same characters).
 */
final class Tsv {
    static final String NULL = "\\N";

    private Tsv() {
    }

    /** Appends {@code value} escaped, or {@code \N} for null. */
    static StringBuilder field(StringBuilder out, String value) {
        if (value == null) {
            return out.append(NULL);
        }
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            switch (c) {
                case '\\' -> out.append("\\\\");
                case '\t' -> out.append("\\t");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\0' -> out.append("\\0");
                case '\b' -> out.append("\\b");
                case '\f' -> out.append("\\f");
                default -> out.append(c);
            }
        }
        return out;
    }

    /** One row: the fields escaped, tab-separated, ended by a newline. */
    static StringBuilder row(StringBuilder out, String... values) {
        for (int i = 0; i < values.length; i++) {
            if (i > 0) {
                out.append('\t');
            }
            field(out, values[i]);
        }
        return out.append('\n');
    }
}
