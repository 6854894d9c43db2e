package io.tablecdc.pg;

import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.util.Collection;
import java.util.Map;

import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;

import io.tablecdc.pg.convert.ConversionException;

/**
 * The largest record Kafka takes from this flow, and an upper estimate of a change's record size, so that a row above
 * it stops its own table with an error a user can act on instead of failing the task's send (Connect then kills the
 * task, and every table it carries stops without a word in the catalog).
 *
 * <p>The limit is the producer's {@code max.request.size} ({@code producer.override.max.request.size} on the
 * connector, 1 MiB by default), and {@code topic.creation.default.max.message.bytes} when the connector creates its
 * topics with one. A topic's own {@code max.message.bytes} is not visible to a task: the error names it so that both
 * are raised together.
 *
 * <p>The estimate is a record as JsonConverter with schemas writes it (the widest of the usual converters: schema and
 * payload, strings escaped, bytes in base64), plus the headers and the producer's batch overhead. A block record
 * ({@code record.format=blocks}) is counted exactly by its writer; with a converter other than ByteArrayConverter its
 * bytes travel in base64.
 */
final class RecordLimit {
    static final String MAX_REQUEST_SIZE = "producer.override.max.request.size";
    static final String TOPIC_MAX_MESSAGE_BYTES = "topic.creation.default.max.message.bytes";
    /** The producer's default {@code max.request.size}. */
    static final int DEFAULT_MAX_REQUEST_SIZE = 1_048_576;
    /** Room for a record's headers (flow, table, op, version, batch, markers) and the producer's batch overhead. */
    private static final int OVERHEAD = 1024;
    private static final String BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter";

    /** While set, {@link #text} bounds a string by its length alone (6 bytes a char, the widest escape). */
    private static final ThreadLocal<Boolean> FAST = ThreadLocal.withInitial(() -> false);

    private final int maxBytes;
    private final String source;
    private final boolean rawBytes;

    RecordLimit(int maxBytes, String source, boolean rawBytes) {
        this.maxBytes = maxBytes;
        this.source = source;
        this.rawBytes = rawBytes;
    }

    /** The limit of a flow configured with {@code props} (the connector's properties, as its tasks get them). */
    static RecordLimit of(Map<String, ?> props) {
        int limit = DEFAULT_MAX_REQUEST_SIZE;
        String source = MAX_REQUEST_SIZE + "=" + DEFAULT_MAX_REQUEST_SIZE + " (the producer's default)";
        Integer request = number(props.get(MAX_REQUEST_SIZE));
        if (request != null) {
            limit = request;
            source = MAX_REQUEST_SIZE + "=" + request;
        }
        Integer topic = number(props.get(TOPIC_MAX_MESSAGE_BYTES));
        if (topic != null && topic < limit) {
            limit = topic;
            source = TOPIC_MAX_MESSAGE_BYTES + "=" + topic;
        }
        Object converter = props.get("value.converter");
        boolean raw = converter != null && BYTE_ARRAY_CONVERTER.equals(converter.toString().trim());
        return new RecordLimit(limit, source, raw);
    }

    private static Integer number(Object value) {
        if (value == null) {
            return null;
        }
        try {
            return Integer.valueOf(value.toString().trim());
        } catch (NumberFormatException e) {
            return null;
        }
    }

    int maxBytes() {
        return maxBytes;
    }

    /** The most bytes a block's content may take so that its record stays within the limit. */
    int maxBlockBytes() {
        int room = maxBytes - OVERHEAD;
        // base64 in a JSON string with its schema ({"schema":{"type":"bytes","optional":false},"payload":"…"})
        return rawBytes ? room : (room - 80) / 4 * 3;
    }

    /** Refuses a change whose record (a row record, or a block holding only it) would be above the limit. */
    void check(Change change, String topic, boolean blocks) {
        if (change.value() == null && change.key() == null) {
            return;
        }
        long limit = blocks ? maxBlockBytes() : maxBytes;
        // most rows are far below the limit: a bound that only adds lengths (6 bytes a char) settles them
        FAST.set(true);
        try {
            if ((blocks ? blockBound(change) : recordBytes(change)) <= limit) {
                return;
            }
        } finally {
            FAST.set(false);
        }
        long bytes = blocks ? blockBound(change) : recordBytes(change);
        if (bytes > limit) {
            throw new TooLarge(tooLarge(change.table(), topic, bytes, blocks));
        }
    }

    String tooLarge(String table, String topic, long bytes, boolean blocks) {
        return "table " + table + ": a row of about " + bytes + " bytes (as a " + (blocks ? "block" : "row")
                + " record) is above the largest record Kafka takes for this flow, " + maxBytes + " bytes (" + source
                + "), so the table stops here and other tables go on. To carry it, raise the connector's "
                + MAX_REQUEST_SIZE + " (the worker must allow client overrides) and the max.message.bytes of topic "
                + topic + " above the row's size, then copy the table again with tablecdc-reset-table";
    }

    /**
     * Whether {@code change}'s row still fits in a block whose record would take {@code blockBytes} so far: a block is
     * closed before a row that would take it past the limit.
     */
    boolean fitsInBlock(Change change, long blockBytes) {
        long room = maxBlockBytes() - blockBytes;
        FAST.set(true);
        try {
            if (blockRow(change) <= room) {
                return true;
            }
        } finally {
            FAST.set(false);
        }
        return blockRow(change) <= room;
    }

    /** A row that no record can carry: stops its own table (handled as a change that cannot be converted). */
    static final class TooLarge extends ConversionException {
        private static final long serialVersionUID = 1L;

        TooLarge(String message) {
            super(message);
        }
    }

    /** The estimated size of a change's row record: key and value as JsonConverter writes them, and the headers. */
    static long recordBytes(Change change) {
        long bytes = OVERHEAD + change.table().length() * 2L;
        if (change.key() != null) {
            bytes += envelope(change.keySchema(), change.key());
        }
        if (change.value() != null) {
            bytes += envelope(change.valueSchema(), change.value());
        }
        for (String column : change.unchanged()) {
            bytes += column.length() * 4L + 32;
        }
        for (String mark : change.nonFinite()) {
            bytes += mark.length() * 4L + 32;
        }
        return bytes;
    }

    /**
     * An upper bound of a block holding only {@code change}: its schemas, and its row (a block writes strings and bytes
     * as they are and numbers in at most 10 bytes, never more than JSON plus 16 bytes a field).
     */
    static long blockBound(Change change) {
        return 64 + schema(change.valueSchema()) + schema(change.keySchema()) + blockRow(change);
    }

    /** An upper bound of the bytes {@code change}'s row takes in a block (without the block's schemas). */
    static long blockRow(Change change) {
        long bytes = 32 + (change.replayId() == null ? 0 : change.replayId().length() * 4L);
        if (change.value() != null) {
            bytes += payload(change.valueSchema(), change.value()) + 16L * change.valueSchema().fields().size();
        }
        for (String column : change.unchanged()) {
            bytes += column.length() * 4L + 8;
        }
        for (String mark : change.nonFinite()) {
            bytes += mark.length() * 4L + 8;
        }
        return bytes;
    }

    private static long envelope(Schema schema, Object value) {
        return 24 + schema(schema) + payload(schema, value);
    }

    /** JsonConverter's schema object, generously. */
    private static long schema(Schema schema) {
        if (schema == null) {
            return 4;
        }
        long bytes = 64;
        if (schema.name() != null) {
            bytes += text(schema.name()) + 16;
        }
        if (schema.doc() != null) {
            bytes += text(schema.doc()) + 16;
        }
        if (schema.parameters() != null) {
            for (Map.Entry<String, String> p : schema.parameters().entrySet()) {
                bytes += text(p.getKey()) + text(p.getValue()) + 8;
            }
        }
        if (schema.defaultValue() != null) {
            bytes += 16 + payload(schema, schema.defaultValue());
        }
        switch (schema.type()) {
            case STRUCT -> {
                for (Field field : schema.fields()) {
                    bytes += schema(field.schema()) + text(field.name()) + 16;
                }
            }
            case ARRAY -> bytes += schema(schema.valueSchema()) + 16;
            case MAP -> bytes += schema(schema.keySchema()) + schema(schema.valueSchema()) + 32;
            default -> {
            }
        }
        return bytes;
    }

    /** JsonConverter's payload of {@code value}, generously. */
    private static long payload(Schema schema, Object value) {
        if (value == null) {
            return 4;
        }
        if (value instanceof Struct struct) {
            long bytes = 2;
            for (Field field : struct.schema().fields()) {
                bytes += text(field.name()) + 2 + payload(field.schema(), struct.get(field));
            }
            return bytes;
        }
        if (value instanceof CharSequence s) {
            return text(s);
        }
        if (value instanceof byte[] b) {
            return base64(b.length);
        }
        if (value instanceof ByteBuffer b) {
            return base64(b.remaining());
        }
        if (value instanceof BigDecimal d) {
            // base64 of the unscaled bytes, or the number written out (decimal.format=NUMERIC)
            return Math.max(base64(d.unscaledValue().bitLength() / 8 + 1), d.toString().length() + 2);
        }
        if (value instanceof Collection<?> list) {
            Schema element = schema == null ? null : schema.valueSchema();
            long bytes = 2;
            for (Object item : list) {
                bytes += payload(element, item) + 1;
            }
            return bytes;
        }
        if (value instanceof Map<?, ?> map) {
            Schema keys = schema == null ? null : schema.keySchema();
            Schema values = schema == null ? null : schema.valueSchema();
            long bytes = 2;
            for (Map.Entry<?, ?> e : map.entrySet()) {
                // an object, or an array of [key, value] pairs for keys that are not strings
                bytes += payload(keys, e.getKey()) + payload(values, e.getValue()) + 6;
            }
            return bytes;
        }
        // numbers, booleans, dates (as numbers)
        return 32;
    }

    private static long base64(long n) {
        return 2 + (n + 2) / 3 * 4;
    }

    /** A JSON string's bytes: quotes, UTF-8, escapes ({@code \n}, {@code \u0001}). */
    private static long text(CharSequence s) {
        long bytes = 2;
        int n = s.length();
        if (FAST.get()) {
            return bytes + 6L * n;
        }
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c < 0x20) {
                bytes += 6;
            } else if (c == '"' || c == '\\') {
                bytes += 2;
            } else if (c < 0x80) {
                bytes += 1;
            } else if (c < 0x800 || Character.isSurrogate(c)) {
                // a surrogate pair is 4 bytes in UTF-8: 2 per char
                bytes += 2;
            } else {
                bytes += 3;
            }
        }
        return bytes;
    }
}
