package io.tablecdc.clickhouse;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.header.Headers;

import io.tablecdc.common.RecordHeaders;

/**
 * The tablecdc headers of one record, read in one pass over its header list (the last header of a name wins, as
 * with {@link Headers#lastWithName}). Checked on arrival: a record whose batch header is not a positive integer
 * goes to the errant record reporter instead of being staged. {@code tablecdc.unchanged} may appear several times (one
 * column each); all are kept, in order. So may {@code tablecdc.nonfinite} (one float value each).
 */
record SinkHeaders(String flow, String table, String op, String batch, String last, String version, List<String> unchanged,
                   boolean keyChanged, List<String> nonFinite) {
    static final SinkHeaders NONE = new SinkHeaders(null, null, null, null, null, null, List.of(), false, List.of());

    SinkHeaders(String flow, String table, String op, String batch, String last) {
        this(flow, table, op, batch, last, null, List.of(), false, List.of());
    }

    static SinkHeaders of(Headers headers) {
        if (headers == null || headers.isEmpty()) {
            return NONE;
        }
        String flow = null;
        String table = null;
        String op = null;
        String batch = null;
        String last = null;
        String version = null;
        List<String> unchanged = null;
        List<String> nonFinite = null;
        boolean keyChanged = false;
        for (Header header : headers) {
            switch (header.key()) {
                case RecordHeaders.FLOW -> flow = text(header);
                case RecordHeaders.TABLE -> table = text(header);
                case RecordHeaders.OP -> op = text(header);
                case RecordHeaders.BATCH -> batch = text(header);
                case RecordHeaders.BATCH_LAST -> last = text(header);
                case RecordHeaders.VERSION -> version = text(header);
                case RecordHeaders.UNCHANGED -> {
                    String column = text(header);
                    if (column != null) {
                        if (unchanged == null) {
                            unchanged = new ArrayList<>(2);
                        }
                        if (!unchanged.contains(column)) {
                            unchanged.add(column);
                        }
                    }
                }
                case RecordHeaders.KEY_CHANGED -> keyChanged = "true".equals(text(header));
                case RecordHeaders.NON_FINITE -> {
                    String mark = text(header);
                    if (mark != null) {
                        if (nonFinite == null) {
                            nonFinite = new ArrayList<>(2);
                        }
                        nonFinite.add(mark);
                    }
                }
                default -> {
                }
            }
        }
        return new SinkHeaders(flow, table, op, batch, last, version, unchanged == null ? List.of() : List.copyOf(unchanged), keyChanged,
                nonFinite == null ? List.of() : List.copyOf(nonFinite));
    }

    private static String text(Header header) {
        Object value = header.value();
        if (value == null) {
            return null;
        }
        return value instanceof byte[] bytes ? new String(bytes, StandardCharsets.UTF_8) : value.toString();
    }

    /** Whether the record carries tablecdc headers at all (records of other producers do not). */
    boolean present() {
        return table != null && batch != null;
    }

    boolean lastOfBatch() {
        return "true".equals(last);
    }

    /** The batch id; fails naming the header when it is not a positive integer. */
    long batchId() {
        long id;
        try {
            id = Long.parseLong(batch.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("header " + RecordHeaders.BATCH + " is not an integer: '" + batch + "'", e);
        }
        if (id < 1) {
            throw new IllegalArgumentException("header " + RecordHeaders.BATCH + " must be a positive integer (batch ids start"
                    + " at 1): '" + batch + "'");
        }
        return id;
    }

    /** The row version; fails naming the header when it is missing or not a decimal integer below 2^128. */
    java.math.BigInteger versionValue() {
        return RecordHeaders.versionValue(version);
    }

    RecordHeaders.Op operation() {
        return op == null ? RecordHeaders.Op.CREATE : RecordHeaders.Op.of(op);
    }
}
