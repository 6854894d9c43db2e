package io.tablecdc.common;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;

/**
 * A block of rows of one table and batch in one record value: the {@code record.format=blocks} form of the record
 * contract (docs/design.md). A source puts several rows into one record whose value is this binary form (value schema
 * {@code BYTES}, best carried with {@code ByteArrayConverter}) and whose headers are the batch's ({@link #HEADER} marks
 * it); the stage sink unpacks it into the same rows, headers and schemas the row records would have carried, without a
 * converter decoding every row.
 *
 * <p>Layout (integers are unsigned LEB128 varints unless noted): the magic {@code TCB}, the format byte {@code 1}; the
 * schema section (its length, then the value schema and the key schema, each a presence byte and a schema); the row
 * count; then per row: the op code byte ({@code r c u d t}), the version ({@code 0} and a varint, or {@code 0xff} and
 * big-endian two's-complement bytes for versions above 2^63 - 1), a flags byte (key changed, unchanged columns, non-finite
 * marks, replay id, value present), the lists and strings the flags announce, and the value. A schema is its type name,
 * optional flag, name, version, parameters and (struct, array, map) its fields or element schemas; a value is written
 * by its schema: a presence byte when optional, fixed-width floats (NaN and infinities exactly), zig-zag varints for
 * integers, length-prefixed UTF-8 text and bytes, a decimal's unscaled two's-complement bytes, {@code Date} as days,
 * {@code Time} and {@code Timestamp} as milliseconds. Defaults and docs of schemas are not carried.
 *
 * <p>The key of a row is not written: it is the value's key columns, rebuilt by the reader from the key schema.
 */
public final class RowBlock {
    /** The header that marks a block record; its value is the format version. */
    public static final String HEADER = "tablecdc.block";
    /** The format this class writes and reads. */
    public static final String FORMAT = "1";

    private static final byte[] MAGIC = {'T', 'C', 'B', 1};
    private static final int KEY_CHANGED = 1;
    private static final int UNCHANGED = 2;
    private static final int NON_FINITE = 4;
    private static final int REPLAY_ID = 8;
    private static final int VALUE = 16;
    private static final int BIG_VERSION = 0xff;
    private static final BigInteger LONG_MAX = BigInteger.valueOf(Long.MAX_VALUE);

    private RowBlock() {
    }

    /** One row of a block: what a row record carries in its key, value and headers. */
    public record Row(RecordHeaders.Op op, BigInteger version, Struct key, Struct value, List<String> unchanged,
                      boolean keyChanged, List<String> nonFinite, String replayId) {
        public Row {
            unchanged = unchanged == null ? List.of() : unchanged;
            nonFinite = nonFinite == null ? List.of() : nonFinite;
        }
    }

    /** A block read back: its schemas (the same objects for equal schema sections read by one {@link Reader}) and rows. */
    public record Decoded(Schema valueSchema, Schema keySchema, List<Row> rows) {
    }

    /** Writes rows of one value and key schema into blocks; reused block after block. Not thread-safe. */
    public static final class Writer {
        private final Schema valueSchema;
        private final Field[] fields;
        private final Kind[] kinds;
        private final Out schemaSection = new Out(256);
        private final Out rows = new Out(64 * 1024);
        private int count;

        public Writer(Schema valueSchema, Schema keySchema) {
            this.valueSchema = valueSchema;
            this.fields = valueSchema == null ? new Field[0] : valueSchema.fields().toArray(new Field[0]);
            this.kinds = kinds(fields);
            writeOptionalSchema(schemaSection, valueSchema);
            writeOptionalSchema(schemaSection, keySchema);
        }

        /** Appends a row (its key is not written: the reader rebuilds it from the value). */
        public void add(RecordHeaders.Op op, BigInteger version, Struct value, java.util.Collection<String> unchanged,
                        boolean keyChanged, List<String> nonFinite, String replayId) {
            Out out = rows;
            out.write(op.code().charAt(0));
            if (version.signum() >= 0 && version.compareTo(LONG_MAX) <= 0) {
                out.write(0);
                out.varLong(version.longValue());
            } else {
                out.write(BIG_VERSION);
                out.bytes(version.toByteArray());
            }
            int flags = (keyChanged ? KEY_CHANGED : 0) | (unchanged.isEmpty() ? 0 : UNCHANGED)
                    | (nonFinite.isEmpty() ? 0 : NON_FINITE) | (replayId == null ? 0 : REPLAY_ID) | (value == null ? 0 : VALUE);
            out.write(flags);
            if (!unchanged.isEmpty()) {
                out.strings(unchanged);
            }
            if (!nonFinite.isEmpty()) {
                out.strings(nonFinite);
            }
            if (replayId != null) {
                out.string(replayId);
            }
            if (value != null) {
                if (value.schema() != valueSchema && !value.schema().equals(valueSchema)) {
                    throw new IllegalArgumentException("a row of another schema than its block's");
                }
                for (int i = 0; i < fields.length; i++) {
                    writeValue(out, fields[i].schema(), kinds[i], value.get(fields[i]));
                }
            }
            count++;
        }

        /** Rows added since the last {@link #finish()}. */
        public int rows() {
            return count;
        }

        /** Bytes of the rows added since the last {@link #finish()}. */
        public int bytes() {
            return rows.size;
        }

        /** An upper bound of the bytes {@link #finish()} would return now (the rows, the schemas and the framing). */
        public int blockBytes() {
            return MAGIC.length + 10 + schemaSection.size + 10 + rows.size;
        }

        /** The block of the rows added since the last call; the writer is empty afterwards. */
        public byte[] finish() {
            Out block = new Out(MAGIC.length + schemaSection.size + rows.size + 16);
            block.raw(MAGIC, 0, MAGIC.length);
            block.varLong(schemaSection.size);
            block.raw(schemaSection.buf, 0, schemaSection.size);
            block.varLong(count);
            block.raw(rows.buf, 0, rows.size);
            rows.size = 0;
            count = 0;
            return block.buf.length == block.size ? block.buf : Arrays.copyOf(block.buf, block.size);
        }
    }

    /** Reads blocks, keeping the schemas of the last schema sections so that equal sections give the same objects. */
    public static final class Reader {
        private static final int SCHEMAS_KEPT = 64;
        private final Map<ByteBuffer, Plan> schemas = new LinkedHashMap<>(16, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<ByteBuffer, Plan> eldest) {
                return size() > SCHEMAS_KEPT;
            }
        };

        /** A schema section read: the schemas, the value's fields and how each is read. */
        private record Plan(Schema valueSchema, Schema keySchema, Field[] fields, Kind[] kinds) {
        }

        /**
         * The block's schemas and rows.
         *
         * @throws IllegalArgumentException when the bytes are not a block of this format, or end early
         */
        public Decoded read(byte[] block) {
            try {
                return readBlock(block);
            } catch (IllegalArgumentException e) {
                throw e;
            } catch (RuntimeException e) {
                // a schema section or value that Connect refuses (a corrupted block): as unreadable as a short one
                throw new IllegalArgumentException("a tablecdc row block cannot be read: " + e, e);
            }
        }

        private Decoded readBlock(byte[] block) {
            In in = new In(block);
            for (byte b : MAGIC) {
                if (in.pos >= block.length || block[in.pos++] != b) {
                    throw new IllegalArgumentException("not a tablecdc row block of format " + FORMAT + " (" + HEADER
                            + " header set, value of " + block.length + " bytes)");
                }
            }
            int sectionLength = in.length();
            int sectionStart = in.pos;
            in.need(sectionLength);
            ByteBuffer section = ByteBuffer.wrap(Arrays.copyOfRange(block, sectionStart, sectionStart + sectionLength));
            Plan plan = schemas.get(section);
            if (plan == null) {
                In s = new In(block);
                s.pos = sectionStart;
                Schema value = readOptionalSchema(s);
                Schema key = readOptionalSchema(s);
                Field[] fields = value == null ? new Field[0] : value.fields().toArray(new Field[0]);
                plan = new Plan(value, key, fields, kinds(fields));
                schemas.put(section, plan);
            }
            in.pos = sectionStart + sectionLength;
            Schema valueSchema = plan.valueSchema();
            Schema keySchema = plan.keySchema();
            Field[] fields = plan.fields();
            Kind[] kinds = plan.kinds();
            int count = in.length();
            List<Row> rows = new ArrayList<>(Math.min(count, 1 << 16));
            for (int i = 0; i < count; i++) {
                RecordHeaders.Op op = RecordHeaders.Op.of(String.valueOf((char) in.u8()));
                BigInteger version;
                version = in.u8() == BIG_VERSION ? new BigInteger(in.bytes()) : BigInteger.valueOf(in.varLong());
                int flags = in.u8();
                List<String> unchanged = (flags & UNCHANGED) != 0 ? in.strings() : List.of();
                List<String> nonFinite = (flags & NON_FINITE) != 0 ? in.strings() : List.of();
                String replayId = (flags & REPLAY_ID) != 0 ? in.string() : null;
                Struct value = null;
                Struct key = null;
                if ((flags & VALUE) != 0) {
                    if (valueSchema == null) {
                        throw new IllegalArgumentException("row " + i + " of a block without a value schema has a value");
                    }
                    value = new Struct(valueSchema);
                    for (int f = 0; f < fields.length; f++) {
                        value.put(fields[f], readValue(in, fields[f].schema(), kinds[f]));
                    }
                    if (keySchema != null) {
                        key = new Struct(keySchema);
                        for (Field field : keySchema.fields()) {
                            key.put(field, value.get(field.name()));
                        }
                    }
                }
                rows.add(new Row(op, version, key, value, unchanged, (flags & KEY_CHANGED) != 0, nonFinite, replayId));
            }
            if (in.pos != block.length) {
                throw new IllegalArgumentException("a tablecdc row block has " + (block.length - in.pos) + " bytes after its "
                        + count + " rows");
            }
            return new Decoded(valueSchema, keySchema, rows);
        }
    }

    private static void writeOptionalSchema(Out out, Schema schema) {
        out.write(schema == null ? 0 : 1);
        if (schema != null) {
            writeSchema(out, schema);
        }
    }

    private static void writeSchema(Out out, Schema schema) {
        out.string(schema.type().name());
        out.write(schema.isOptional() ? 1 : 0);
        out.nullableString(schema.name());
        out.write(schema.version() == null ? 0 : 1);
        if (schema.version() != null) {
            out.varLong(schema.version());
        }
        Map<String, String> parameters = schema.parameters() == null ? Map.of() : schema.parameters();
        out.varLong(parameters.size());
        for (Map.Entry<String, String> p : parameters.entrySet()) {
            out.string(p.getKey());
            out.string(p.getValue());
        }
        switch (schema.type()) {
            case STRUCT -> {
                out.varLong(schema.fields().size());
                for (Field field : schema.fields()) {
                    out.string(field.name());
                    writeSchema(out, field.schema());
                }
            }
            case ARRAY -> writeSchema(out, schema.valueSchema());
            case MAP -> {
                writeSchema(out, schema.keySchema());
                writeSchema(out, schema.valueSchema());
            }
            default -> {
            }
        }
    }

    private static Schema readOptionalSchema(In in) {
        return in.u8() == 0 ? null : readSchema(in);
    }

    private static Schema readSchema(In in) {
        Schema.Type type;
        String typeName = in.string();
        try {
            type = Schema.Type.valueOf(typeName);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("a tablecdc row block names an unknown schema type " + typeName, e);
        }
        boolean optional = in.u8() != 0;
        String name = in.nullableString();
        Integer version = in.u8() == 0 ? null : (int) in.varLong();
        int parameterCount = in.length();
        Map<String, String> parameters = new LinkedHashMap<>();
        for (int i = 0; i < parameterCount; i++) {
            parameters.put(in.string(), in.string());
        }
        SchemaBuilder builder = switch (type) {
            case STRUCT -> {
                SchemaBuilder struct = SchemaBuilder.struct();
                int fields = in.length();
                for (int i = 0; i < fields; i++) {
                    String fieldName = in.string();
                    struct.field(fieldName, readSchema(in));
                }
                yield struct;
            }
            case ARRAY -> SchemaBuilder.array(readSchema(in));
            case MAP -> {
                Schema keySchema = readSchema(in);
                yield SchemaBuilder.map(keySchema, readSchema(in));
            }
            default -> SchemaBuilder.type(type);
        };
        if (optional) {
            builder.optional();
        }
        if (name != null) {
            builder.name(name);
        }
        if (version != null) {
            builder.version(version);
        }
        if (!parameters.isEmpty()) {
            builder.parameters(parameters);
        }
        return builder.build();
    }

    private static void writeStruct(Out out, Schema schema, Struct struct) {
        for (Field field : schema.fields()) {
            writeValue(out, field.schema(), struct.get(field));
        }
    }

    /** How a value of a schema is written and read, chosen once per field. */
    private enum Kind {
        DECIMAL, DATE, MILLIS, INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES, ARRAY, MAP, STRUCT;

        static Kind of(Schema schema) {
            String logical = schema.name();
            if (Decimal.LOGICAL_NAME.equals(logical)) {
                return DECIMAL;
            } else if (Date.LOGICAL_NAME.equals(logical)) {
                return DATE;
            } else if (Time.LOGICAL_NAME.equals(logical) || Timestamp.LOGICAL_NAME.equals(logical)) {
                return MILLIS;
            }
            return valueOf(schema.type().name());
        }
    }

    private static Kind[] kinds(Field[] fields) {
        Kind[] kinds = new Kind[fields.length];
        for (int i = 0; i < fields.length; i++) {
            kinds[i] = Kind.of(fields[i].schema());
        }
        return kinds;
    }

    private static void writeValue(Out out, Schema schema, Object value) {
        writeValue(out, schema, Kind.of(schema), value);
    }

    private static void writeValue(Out out, Schema schema, Kind kind, Object value) {
        if (schema.isOptional()) {
            if (value == null) {
                out.write(0);
                return;
            }
            out.write(1);
        } else if (value == null) {
            throw new IllegalArgumentException("null in a required " + schema.type() + " value");
        }
        switch (kind) {
            case DECIMAL -> out.bytes(((BigDecimal) value).unscaledValue().toByteArray());
            case DATE -> out.varLong(zigZag(Math.floorDiv(((java.util.Date) value).getTime(), 86_400_000L)));
            case MILLIS -> out.varLong(zigZag(((java.util.Date) value).getTime()));
            case INT8 -> out.write((Byte) value);
            case INT16 -> out.varLong(zigZag((Short) value));
            case INT32 -> out.varLong(zigZag((Integer) value));
            case INT64 -> out.varLong(zigZag((Long) value));
            case FLOAT32 -> out.int32(Float.floatToRawIntBits((Float) value));
            case FLOAT64 -> out.int64(Double.doubleToRawLongBits((Double) value));
            case BOOLEAN -> out.write((Boolean) value ? 1 : 0);
            case STRING -> out.string((String) value);
            case BYTES -> {
                if (value instanceof ByteBuffer buffer) {
                    byte[] copy = new byte[buffer.remaining()];
                    buffer.duplicate().get(copy);
                    out.bytes(copy);
                } else {
                    out.bytes((byte[]) value);
                }
            }
            case ARRAY -> {
                List<?> list = (List<?>) value;
                out.varLong(list.size());
                for (Object element : list) {
                    writeValue(out, schema.valueSchema(), element);
                }
            }
            case MAP -> {
                Map<?, ?> map = (Map<?, ?>) value;
                out.varLong(map.size());
                for (Map.Entry<?, ?> e : map.entrySet()) {
                    writeValue(out, schema.keySchema(), e.getKey());
                    writeValue(out, schema.valueSchema(), e.getValue());
                }
            }
            case STRUCT -> writeStruct(out, schema, (Struct) value);
            default -> throw new IllegalArgumentException("no block form for schema type " + schema.type());
        }
    }

    private static Object readValue(In in, Schema schema) {
        return readValue(in, schema, Kind.of(schema));
    }

    private static Object readValue(In in, Schema schema, Kind kind) {
        if (schema.isOptional() && in.u8() == 0) {
            return null;
        }
        return switch (kind) {
            case DECIMAL -> new BigDecimal(new BigInteger(in.bytes()), Integer.parseInt(schema.parameters().get(Decimal.SCALE_FIELD)));
            case DATE -> new java.util.Date(Math.multiplyExact(unZigZag(in.varLong()), 86_400_000L));
            case MILLIS -> new java.util.Date(unZigZag(in.varLong()));
            case INT8 -> (byte) in.u8();
            case INT16 -> (short) unZigZag(in.varLong());
            case INT32 -> (int) unZigZag(in.varLong());
            case INT64 -> unZigZag(in.varLong());
            case FLOAT32 -> Float.intBitsToFloat(in.int32());
            case FLOAT64 -> Double.longBitsToDouble(in.int64());
            case BOOLEAN -> in.u8() != 0;
            case STRING -> in.string();
            case BYTES -> in.bytes();
            case ARRAY -> {
                int size = in.length();
                List<Object> list = new ArrayList<>(Math.min(size, 1 << 16));
                for (int i = 0; i < size; i++) {
                    list.add(readValue(in, schema.valueSchema()));
                }
                yield list;
            }
            case MAP -> {
                int size = in.length();
                Map<Object, Object> map = new LinkedHashMap<>();
                for (int i = 0; i < size; i++) {
                    Object k = readValue(in, schema.keySchema());
                    map.put(k, readValue(in, schema.valueSchema()));
                }
                yield map;
            }
            case STRUCT -> {
                Struct struct = new Struct(schema);
                for (Field field : schema.fields()) {
                    struct.put(field, readValue(in, field.schema()));
                }
                yield struct;
            }
        };
    }

    private static long zigZag(long v) {
        return (v << 1) ^ (v >> 63);
    }

    private static long unZigZag(long v) {
        return (v >>> 1) ^ -(v & 1);
    }

    /** A growable byte array. */
    private static final class Out {
        byte[] buf;
        int size;

        Out(int capacity) {
            buf = new byte[capacity];
        }

        private void ensure(int more) {
            if (size + more > buf.length) {
                buf = Arrays.copyOf(buf, Math.max(buf.length * 2, size + more));
            }
        }

        void write(int b) {
            ensure(1);
            buf[size++] = (byte) b;
        }

        void raw(byte[] bytes, int offset, int length) {
            ensure(length);
            System.arraycopy(bytes, offset, buf, size, length);
            size += length;
        }

        void varLong(long v) {
            ensure(10);
            while ((v & ~0x7FL) != 0) {
                buf[size++] = (byte) ((v & 0x7F) | 0x80);
                v >>>= 7;
            }
            buf[size++] = (byte) v;
        }

        void int32(int v) {
            ensure(4);
            buf[size++] = (byte) (v >>> 24);
            buf[size++] = (byte) (v >>> 16);
            buf[size++] = (byte) (v >>> 8);
            buf[size++] = (byte) v;
        }

        void int64(long v) {
            int32((int) (v >>> 32));
            int32((int) v);
        }

        void bytes(byte[] bytes) {
            varLong(bytes.length);
            raw(bytes, 0, bytes.length);
        }

        void string(String s) {
            bytes(s.getBytes(StandardCharsets.UTF_8));
        }

        void nullableString(String s) {
            write(s == null ? 0 : 1);
            if (s != null) {
                string(s);
            }
        }

        void strings(java.util.Collection<String> strings) {
            varLong(strings.size());
            for (String s : strings) {
                string(s);
            }
        }
    }

    /** Reads what {@link Out} wrote; every read checks the block's end. */
    private static final class In {
        final byte[] buf;
        int pos;

        In(byte[] buf) {
            this.buf = buf;
        }

        void need(int n) {
            if (n < 0 || pos + n > buf.length) {
                throw new IllegalArgumentException("a tablecdc row block ends early (" + buf.length + " bytes)");
            }
        }

        int u8() {
            need(1);
            return buf[pos++] & 0xff;
        }

        long varLong() {
            long v = 0;
            for (int shift = 0; shift < 64; shift += 7) {
                int b = u8();
                v |= (long) (b & 0x7F) << shift;
                if ((b & 0x80) == 0) {
                    return v;
                }
            }
            throw new IllegalArgumentException("a tablecdc row block has a malformed integer");
        }

        int length() {
            long v = varLong();
            if (v < 0 || v > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("a tablecdc row block has a malformed length " + v);
            }
            return (int) v;
        }

        int int32() {
            need(4);
            int v = ((buf[pos] & 0xff) << 24) | ((buf[pos + 1] & 0xff) << 16) | ((buf[pos + 2] & 0xff) << 8) | (buf[pos + 3] & 0xff);
            pos += 4;
            return v;
        }

        long int64() {
            return ((long) int32() << 32) | (int32() & 0xffffffffL);
        }

        byte[] bytes() {
            int n = length();
            need(n);
            byte[] out = Arrays.copyOfRange(buf, pos, pos + n);
            pos += n;
            return out;
        }

        String string() {
            int n = length();
            need(n);
            String s = new String(buf, pos, n, StandardCharsets.UTF_8);
            pos += n;
            return s;
        }

        String nullableString() {
            return u8() == 0 ? null : string();
        }

        List<String> strings() {
            int n = length();
            List<String> out = new ArrayList<>(Math.min(n, 1024));
            for (int i = 0; i < n; i++) {
                out.add(string());
            }
            return out;
        }
    }
}
