package io.tablecdc.common;

/** JSON text helpers for the places that write JSON by hand (STRUCT/MAP columns as JSON text). */
public final class JsonText {
    private JsonText() {
    }

    /** Appends {@code text} as a JSON string literal, escaping quotes, backslashes and control characters. */
    public static void appendString(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }
}
