package io.tablecdc.pg.wire;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

import io.tablecdc.pg.wire.PgOutputMessage.Begin;
import io.tablecdc.pg.wire.PgOutputMessage.Column;
import io.tablecdc.pg.wire.PgOutputMessage.Commit;
import io.tablecdc.pg.wire.PgOutputMessage.Delete;
import io.tablecdc.pg.wire.PgOutputMessage.Insert;
import io.tablecdc.pg.wire.PgOutputMessage.LogicalMessage;
import io.tablecdc.pg.wire.PgOutputMessage.OldTuple;
import io.tablecdc.pg.wire.PgOutputMessage.Origin;
import io.tablecdc.pg.wire.PgOutputMessage.Relation;
import io.tablecdc.pg.wire.PgOutputMessage.ReplicaIdentity;
import io.tablecdc.pg.wire.PgOutputMessage.Truncate;
import io.tablecdc.pg.wire.PgOutputMessage.Type;
import io.tablecdc.pg.wire.PgOutputMessage.Update;

/**
 * Parses one pgoutput message (protocol version 1) from the payload of an XLogData frame, i.e. from the
 * buffer {@code PGReplicationStream.readPending()} returns: the bytes between its position and its limit.
 * The parser never reads {@code array()} (pgjdbc's buffer wraps the whole frame) and leaves the caller's
 * buffer untouched.
 *
 * <p>Strings and text values are read as UTF-8: pgoutput sends them in the database encoding without
 * conversion, so the source database must use UTF8.
 *
 * <p>Stateless and thread-safe; relation metadata lives in {@link RelationCache}.
 */
public final class PgOutputParser {
    /** Microseconds between 1970-01-01 and 2000-01-01, the epoch of PostgreSQL timestamps. */
    static final long PG_EPOCH_OFFSET_MICROS = 946_684_800_000_000L;

    private PgOutputParser() {
    }

    /**
     * The message in {@code payload}'s remaining bytes.
     *
     * @throws PgOutputParseException naming the message type and what is wrong, when the bytes are truncated,
     *     carry trailing bytes, or are a message of a later protocol version
     */
    public static PgOutputMessage parse(ByteBuffer payload) {
        ByteBuffer in = payload.duplicate().order(ByteOrder.BIG_ENDIAN);
        if (!in.hasRemaining()) {
            throw new PgOutputParseException("empty pgoutput message");
        }
        char type = (char) (in.get() & 0xFF);
        PgOutputMessage message;
        try {
            message = switch (type) {
                case 'B' -> new Begin(lsn(in), timestamp(in), uint32(in));
                case 'C' -> new Commit(in.get() & 0xFF, lsn(in), lsn(in), timestamp(in));
                case 'O' -> new Origin(lsn(in), string(in));
                case 'R' -> relation(in);
                case 'Y' -> new Type(uint32(in), string(in), string(in));
                case 'I' -> insert(in);
                case 'U' -> update(in);
                case 'D' -> delete(in);
                case 'T' -> truncate(in);
                case 'M' -> logicalMessage(in);
                case 'S', 'E', 'c', 'A' -> throw new PgOutputParseException("message '" + type
                        + "' belongs to protocol version 2 streaming of in-progress transactions, which this decoder does not"
                        + " support: start the slot with proto_version 1 and without streaming");
                case 'b', 'P', 'K', 'r', 'p' -> throw new PgOutputParseException("message '" + type
                        + "' belongs to protocol version 3 two-phase commit, which this decoder does not support:"
                        + " start the slot with proto_version 1 and without two_phase");
                default -> throw new PgOutputParseException("unknown pgoutput message type 0x" + Integer.toHexString(type));
            };
        } catch (BufferUnderflowException e) {
            throw new PgOutputParseException("pgoutput message '" + type + "' is truncated (" + payload.remaining() + " bytes)", e);
        }
        if (in.hasRemaining()) {
            throw new PgOutputParseException("pgoutput message '" + type + "' has " + in.remaining()
                    + " unexpected trailing bytes (a later protocol version?)");
        }
        return message;
    }

    /** Parses a message from a byte array (test vectors, captured streams). */
    public static PgOutputMessage parse(byte[] payload) {
        return parse(ByteBuffer.wrap(payload));
    }

    /** The instant of a PostgreSQL timestamp: microseconds since 2000-01-01T00:00:00Z. */
    public static Instant instant(long pgMicros) {
        long unixMicros = Math.addExact(pgMicros, PG_EPOCH_OFFSET_MICROS);
        return Instant.ofEpochSecond(Math.floorDiv(unixMicros, 1_000_000L), Math.floorMod(unixMicros, 1_000_000L) * 1_000L);
    }

    private static Relation relation(ByteBuffer in) {
        long oid = uint32(in);
        String namespace = string(in);
        String name = string(in);
        ReplicaIdentity identity = ReplicaIdentity.of(in.get() & 0xFF);
        int count = in.getShort() & 0xFFFF;
        List<Column> columns = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int flags = in.get() & 0xFF;
            String column = string(in);
            long typeOid = uint32(in);
            int typmod = in.getInt();
            columns.add(new Column(flags, column, typeOid, typmod));
        }
        return new Relation(oid, namespace, name, identity, columns);
    }

    private static Insert insert(ByteBuffer in) {
        long oid = uint32(in);
        expect(in, 'N', "Insert");
        return new Insert(oid, tuple(in));
    }

    private static Update update(ByteBuffer in) {
        long oid = uint32(in);
        char next = (char) (in.get() & 0xFF);
        OldTuple old = null;
        if (next == 'K' || next == 'O') {
            old = new OldTuple(next == 'O', tuple(in));
            next = (char) (in.get() & 0xFF);
        }
        if (next != 'N') {
            throw new PgOutputParseException("Update of relation " + oid + ": expected 'K', 'O' or 'N', got 0x" + Integer.toHexString(next));
        }
        return new Update(oid, old, tuple(in));
    }

    private static Delete delete(ByteBuffer in) {
        long oid = uint32(in);
        char kind = (char) (in.get() & 0xFF);
        if (kind != 'K' && kind != 'O') {
            throw new PgOutputParseException("Delete of relation " + oid + ": expected 'K' or 'O', got 0x" + Integer.toHexString(kind));
        }
        return new Delete(oid, new OldTuple(kind == 'O', tuple(in)));
    }

    private static Truncate truncate(ByteBuffer in) {
        long count = uint32(in);
        int options = in.get() & 0xFF;
        if (count > in.remaining() / 4) {
            throw new PgOutputParseException("Truncate names " + count + " relations but carries " + in.remaining() + " bytes");
        }
        List<Long> oids = new ArrayList<>((int) count);
        for (long i = 0; i < count; i++) {
            oids.add(uint32(in));
        }
        return new Truncate(options, oids);
    }

    private static LogicalMessage logicalMessage(ByteBuffer in) {
        int flags = in.get() & 0xFF;
        Lsn lsn = lsn(in);
        String prefix = string(in);
        byte[] content = bytes(in, in.getInt(), "Message content");
        return new LogicalMessage(flags, lsn, prefix, content);
    }

    private static TupleData tuple(ByteBuffer in) {
        int count = in.getShort() & 0xFFFF;
        List<TupleValue> values = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            char kind = (char) (in.get() & 0xFF);
            values.add(switch (kind) {
                case 'n' -> TupleValue.NULL;
                case 'u' -> TupleValue.UNCHANGED_TOAST;
                case 't' -> TupleValue.text(bytes(in, in.getInt(), "text value of column " + i));
                case 'b' -> new TupleValue.Binary(bytes(in, in.getInt(), "binary value of column " + i));
                default -> throw new PgOutputParseException("tuple column " + i + ": unknown kind 0x" + Integer.toHexString(kind));
            });
        }
        return new TupleData(values);
    }

    private static void expect(ByteBuffer in, char expected, String message) {
        char got = (char) (in.get() & 0xFF);
        if (got != expected) {
            throw new PgOutputParseException(message + ": expected '" + expected + "', got 0x" + Integer.toHexString(got));
        }
    }

    private static byte[] bytes(ByteBuffer in, int length, String what) {
        if (length < 0 || length > in.remaining()) {
            throw new PgOutputParseException(what + ": length " + length + " but " + in.remaining() + " bytes remain");
        }
        byte[] out = new byte[length];
        in.get(out);
        return out;
    }

    private static String string(ByteBuffer in) {
        int start = in.position();
        int end = start;
        while (end < in.limit() && in.get(end) != 0) {
            end++;
        }
        if (end == in.limit()) {
            throw new PgOutputParseException("unterminated string at offset " + start);
        }
        byte[] raw = new byte[end - start];
        in.get(raw);
        in.get(); // the terminator
        return new String(raw, StandardCharsets.UTF_8);
    }

    private static long uint32(ByteBuffer in) {
        return in.getInt() & 0xFFFFFFFFL;
    }

    private static Lsn lsn(ByteBuffer in) {
        return new Lsn(in.getLong());
    }

    private static Instant timestamp(ByteBuffer in) {
        return instant(in.getLong());
    }
}
