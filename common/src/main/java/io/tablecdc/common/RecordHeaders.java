package io.tablecdc.common;

import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.header.Headers;

/**
 * The headers every tablecdc source puts on every record (see the record contract in docs/design.md), and
 * typed reads of them for the sink.
 */
public final class RecordHeaders {
    /** The flow (source connector name) that produced the record. */
    public static final String FLOW = "tablecdc.flow";
    /** The fully qualified source table name ({@code project.dataset.table}, {@code schema.table}). */
    public static final String TABLE = "tablecdc.table";
    /** One of {@link Op}: {@code r}, {@code c}, {@code u}, {@code d}, {@code t}. */
    public static final String OP = "tablecdc.op";
    /** The row version that orders every change of one row: a non-negative decimal integer. */
    public static final String VERSION = "tablecdc.version";
    /** The per-table batch id: starts at 1 and only grows. */
    public static final String BATCH = "tablecdc.batch";
    /** {@code true} on the last record of a batch. */
    public static final String BATCH_LAST = "tablecdc.batch.last";
    /**
     * On a Postgres TRUNCATE record: {@code <xid>/<ordinal>/table/<oid>}, scoped to its table so that a destination
     * de-duplicating by id never drops one fragment of a multi-table TRUNCATE. Informational for the stage sink.
     */
    public static final String REPLAY_ID = "tablecdc.replay.id";
    /**
     * On an update: one header per column whose value the source did not have (a Postgres unchanged TOAST value). The
     * value's field is null and means "the value this row had before this change", never SQL NULL.
     */
    public static final String UNCHANGED = "tablecdc.unchanged";
    /**
     * One header per float value of the record's value that is {@code NaN}, {@code Infinity} or {@code -Infinity}
     * ({@code column=NaN}, {@code column[i]=-Infinity} for an array element): Kafka's JsonConverter reads such values
     * back as 0, so the sink takes them from here. See {@link NonFiniteValues}.
     */
    public static final String NON_FINITE = "tablecdc.nonfinite";
    /**
     * {@code true} on an update that moved its row to another key; the record right before it, in the same batch, is
     * the delete of the old key, whose row holds the {@link #UNCHANGED} values.
     */
    public static final String KEY_CHANGED = "tablecdc.key.changed";

    private RecordHeaders() {
    }

    /** The operation a record carries. */
    public enum Op {
        SNAPSHOT("r"), CREATE("c"), UPDATE("u"), DELETE("d"), TRUNCATE("t");

        private final String code;

        Op(String code) {
            this.code = code;
        }

        public String code() {
            return code;
        }

        public static Op of(String code) {
            for (Op op : values()) {
                if (op.code.equals(code)) {
                    return op;
                }
            }
            throw new IllegalArgumentException("unknown " + OP + " '" + code + "' (expected one of r, c, u, d, t)");
        }
    }

    /** The header's value as text, or null when the record does not carry it. */
    public static String text(Headers headers, String key) {
        Header header = headers == null ? null : headers.lastWithName(key);
        if (header == null || header.value() == null) {
            return null;
        }
        Object value = header.value();
        return value instanceof byte[] bytes ? new String(bytes, java.nio.charset.StandardCharsets.UTF_8) : value.toString();
    }

    /** Whether the record carries tablecdc headers at all (records of other producers do not). */
    public static boolean present(Headers headers) {
        return text(headers, TABLE) != null && text(headers, BATCH) != null;
    }

    /** The header's value as a long; fails naming the header when it is missing or not a number. */
    public static long longValue(Headers headers, String key) {
        String text = text(headers, key);
        if (text == null) {
            throw new IllegalArgumentException("the record has no " + key + " header");
        }
        try {
            return Long.parseLong(text.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("header " + key + " is not an integer: '" + text + "'", e);
        }
    }

    /** Above every {@link #VERSION}: 2^128. */
    public static final java.math.BigInteger VERSION_LIMIT = java.math.BigInteger.ONE.shiftLeft(128);

    /**
     * The record's {@link #VERSION}: a decimal non-negative integer below 2^128, parsed without overflow.
     *
     * @throws IllegalArgumentException naming the header when it is missing, not a decimal integer, negative, or
     *     not below 2^128
     */
    public static java.math.BigInteger versionValue(Headers headers) {
        return versionValue(text(headers, VERSION));
    }

    /**
     * {@link #versionValue(Headers)} of the header's text, read already (null when the record has none): for a sink
     * that reads all of a record's headers in one pass.
     */
    public static java.math.BigInteger versionValue(String text) {
        if (text == null) {
            throw new IllegalArgumentException("the record has no " + VERSION + " header");
        }
        String trimmed = text.trim();
        if (!isDecimal(trimmed, 39)) {
            throw new IllegalArgumentException("header " + VERSION + " is not a non-negative decimal integer: '" + text
                    + "'");
        }
        if (trimmed.length() <= 18) {
            // below 10^18: a long, without BigInteger's parsing
            return java.math.BigInteger.valueOf(Long.parseLong(trimmed));
        }
        java.math.BigInteger value = new java.math.BigInteger(trimmed);
        if (value.compareTo(VERSION_LIMIT) >= 0) {
            throw new IllegalArgumentException("header " + VERSION + " is " + trimmed + ", not below 2^128");
        }
        return value;
    }

    /** Whether the text is 1 to {@code maxDigits} ASCII digits (what {@code [0-9]{1,maxDigits}} matches). */
    private static boolean isDecimal(String text, int maxDigits) {
        if (text.isEmpty() || text.length() > maxDigits) {
            return false;
        }
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c < '0' || c > '9') {
                return false;
            }
        }
        return true;
    }
}
