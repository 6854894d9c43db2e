package io.tablecdc.clickhouse;

import java.nio.charset.StandardCharsets;

import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.header.Headers;

import io.tablecdc.common.RecordHeaders;

/**
 * The tablecdc headers of one record, read in one pass over its header list (the last header of a name wins, as
 * with {@link Headers#lastWithName}). Checked on arrival: a record whose batch header is not a positive integer
 * goes to the errant record reporter instead of being staged.
 */
record SinkHeaders(String flow, String table, String op, String batch, String last) {
    static final SinkHeaders NONE = new SinkHeaders(null, null, null, null, null);

    static SinkHeaders of(Headers headers) {
        if (headers == null || headers.isEmpty()) {
            return NONE;
        }
        String flow = null;
        String table = null;
        String op = null;
        String batch = null;
        String last = null;
        for (Header header : headers) {
            switch (header.key()) {
                case RecordHeaders.FLOW -> flow = text(header);
                case RecordHeaders.TABLE -> table = text(header);
                case RecordHeaders.OP -> op = text(header);
                case RecordHeaders.BATCH -> batch = text(header);
                case RecordHeaders.BATCH_LAST -> last = text(header);
                default -> {
                }
            }
        }
        return new SinkHeaders(flow, table, op, batch, last);
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

    RecordHeaders.Op operation() {
        return op == null ? RecordHeaders.Op.CREATE : RecordHeaders.Op.of(op);
    }
}
