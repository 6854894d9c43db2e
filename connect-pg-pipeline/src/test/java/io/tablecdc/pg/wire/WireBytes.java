package io.tablecdc.pg.wire;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/** Builds pgoutput messages byte by byte for tests, following the protocol documentation. */
final class WireBytes {
    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    static WireBytes message(char type) {
        return new WireBytes().int8(type);
    }

    WireBytes int8(int value) {
        out.write(value);
        return this;
    }

    WireBytes int16(int value) {
        out.write(value >>> 8);
        out.write(value);
        return this;
    }

    WireBytes int32(long value) {
        out.writeBytes(ByteBuffer.allocate(4).putInt((int) value).array());
        return this;
    }

    WireBytes int64(long value) {
        out.writeBytes(ByteBuffer.allocate(8).putLong(value).array());
        return this;
    }

    WireBytes string(String value) {
        out.writeBytes(value.getBytes(StandardCharsets.UTF_8));
        out.write(0);
        return this;
    }

    WireBytes text(String value) {
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        return int8('t').int32(bytes.length).raw(bytes);
    }

    WireBytes raw(byte[] bytes) {
        out.writeBytes(bytes);
        return this;
    }

    byte[] bytes() {
        return out.toByteArray();
    }
}
