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
 * column each); all are kept, in order. So may {@code tablecdc.nonfinite} (one float value each). {@code tablecdc.block}
 * marks a block record, whose rows carry their own op, version, unchanged columns and marks ({@link #ofBlockRow}).
 *
 * <p>The headers that carry names (flow, table, unchanged columns) must arrive as the text the source wrote: as a
 * {@code String} or as bytes. Kafka Connect's default header converter, {@code SimpleHeaderConverter}, parses header
 * text that looks like a number, boolean, date, time or list into such a value ({@code 1e3} becomes 1000,
 * {@code 1.50} 1.5, {@code 0012} 12), and the name it stood for cannot be told from it. Such a record is refused
 * ({@link #requireText()}) rather than staged under another name; {@code header.converter=}
 * {@code org.apache.kafka.connect.storage.StringConverter} on the sink hands every header over as written.
 */
record SinkHeaders(String flow, String table, String op, String batch, String last, String version, List<String> unchanged,
                   boolean keyChanged, List<String> nonFinite, String notText, String block,
                   java.math.BigInteger blockVersion) {
    static final SinkHeaders NONE = new SinkHeaders(null, null, null, null, null, null, List.of(), false, List.of(), null, null,
            null);

    SinkHeaders(String flow, String table, String op, String batch, String last) {
        this(flow, table, op, batch, last, null, List.of(), false, List.of(), null, null, null);
    }

    /** The headers of row {@code row} of a block record with these headers ({@link io.tablecdc.common.RowBlock}). */
    SinkHeaders ofBlockRow(io.tablecdc.common.RowBlock.Row row, boolean lastOfBlock) {
        return new SinkHeaders(flow, table, row.op().code(), batch, lastOfBlock ? last : null, null, row.unchanged(),
                row.keyChanged(), row.nonFinite(), null, null, row.version());
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
        String notText = null;
        String block = null;
        for (Header header : headers) {
            switch (header.key()) {
                case RecordHeaders.FLOW -> {
                    flow = text(header);
                    notText = notText != null ? notText : notText(header);
                }
                case RecordHeaders.TABLE -> {
                    table = text(header);
                    notText = notText != null ? notText : notText(header);
                }
                case RecordHeaders.OP -> op = text(header);
                case RecordHeaders.BATCH -> batch = text(header);
                case RecordHeaders.BATCH_LAST -> last = text(header);
                case RecordHeaders.VERSION -> version = text(header);
                case RecordHeaders.UNCHANGED -> {
                    notText = notText != null ? notText : notText(header);
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
                case io.tablecdc.common.RowBlock.HEADER -> block = text(header);
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
                nonFinite == null ? List.of() : List.copyOf(nonFinite), notText, block, null);
    }

    /** Null when a name-carrying header arrived as text; else what arrived instead, for {@link #requireText()}. */
    private static String notText(Header header) {
        Object value = header.value();
        if (value == null) {
            // a tablecdc source never writes a name header without a value: the text "null", parsed by the converter
            return "header " + header.key() + " arrived without a value, not as the text the source wrote (the name null,"
                    + " which the worker's header converter, SimpleHeaderConverter unless set otherwise, parses to no value);"
                    + " set header.converter=org.apache.kafka.connect.storage.StringConverter on this sink connector";
        }
        if (value instanceof String || value instanceof byte[]) {
            return null;
        }
        return "header " + header.key() + " arrived as " + value.getClass().getSimpleName() + " " + value + ", not as the"
                + " text the source wrote: the worker's header converter (SimpleHeaderConverter unless set otherwise) parsed"
                + " it, and the name it stood for cannot be told from that value; set header.converter="
                + "org.apache.kafka.connect.storage.StringConverter on this sink connector";
    }

    /** Fails (the record goes to the errant record reporter) when a name-carrying header did not arrive as text. */
    void requireText() {
        if (notText != null) {
            throw new IllegalArgumentException(notText);
        }
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
        if (blockVersion != null) {
            if (blockVersion.signum() < 0 || blockVersion.compareTo(RecordHeaders.VERSION_LIMIT) >= 0) {
                throw new IllegalArgumentException("the row's version is " + blockVersion + ", not a non-negative integer"
                        + " below 2^128");
            }
            return blockVersion;
        }
        return RecordHeaders.versionValue(version);
    }

    RecordHeaders.Op operation() {
        return op == null ? RecordHeaders.Op.CREATE : RecordHeaders.Op.of(op);
    }
}
