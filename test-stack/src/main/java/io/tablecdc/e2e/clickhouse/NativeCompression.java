package io.tablecdc.e2e.clickhouse;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import com.clickhouse.data.ClickHouseCityHash;

import net.jpountz.lz4.LZ4Compressor;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.lz4.LZ4FastDecompressor;

/**
 * A <b>test fixture</b> part of {@link ChdbHttpFront}: ClickHouse's native block compression on the HTTP interface
 * ({@code compress=1} for responses, {@code decompress=1} for requests). Each block is a 16-byte CityHash128 checksum
 * of the rest of the block, the method byte {@code 0x82} (LZ4), the block's compressed size including this 9-byte
 * header and its uncompressed size (both little-endian 32-bit), then the LZ4 block.
 */
final class NativeCompression {
    private static final byte LZ4 = (byte) 0x82;
    private static final int HEADER = 9;
    private static final int CHECKSUM = 16;
    /** Uncompressed bytes per block, as the server's default max_compress_block_size. */
    private static final int BLOCK = 1 << 20;
    private static final LZ4Compressor COMPRESSOR = LZ4Factory.fastestJavaInstance().fastCompressor();
    private static final LZ4FastDecompressor DECOMPRESSOR = LZ4Factory.fastestJavaInstance().fastDecompressor();

    private NativeCompression() {
    }

    static byte[] compress(byte[] data) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(data.length / 2 + 64);
        for (int off = 0; off < data.length; off += BLOCK) {
            int len = Math.min(BLOCK, data.length - off);
            byte[] block = new byte[HEADER + COMPRESSOR.maxCompressedLength(len)];
            int compressed = COMPRESSOR.compress(data, off, len, block, HEADER);
            ByteBuffer header = ByteBuffer.wrap(block, 0, HEADER).order(ByteOrder.LITTLE_ENDIAN);
            header.put(LZ4).putInt(HEADER + compressed).putInt(len);
            long[] hash = ClickHouseCityHash.cityHash128(block, 0, HEADER + compressed);
            out.writeBytes(ByteBuffer.allocate(CHECKSUM).order(ByteOrder.LITTLE_ENDIAN).putLong(hash[0]).putLong(hash[1]).array());
            out.write(block, 0, HEADER + compressed);
        }
        return out.toByteArray();
    }

    static byte[] decompress(byte[] body) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(body.length * 2);
        int pos = 0;
        while (pos < body.length) {
            if (body.length - pos < CHECKSUM + HEADER) {
                throw new IllegalArgumentException("truncated compressed block at byte " + pos);
            }
            ByteBuffer header = ByteBuffer.wrap(body, pos + CHECKSUM, HEADER).order(ByteOrder.LITTLE_ENDIAN);
            byte method = header.get();
            int compressedSize = header.getInt();
            int size = header.getInt();
            if (method != LZ4) {
                throw new IllegalArgumentException(String.format("compression method 0x%02x is not LZ4 (0x82)", method));
            }
            long[] hash = ClickHouseCityHash.cityHash128(body, pos + CHECKSUM, compressedSize);
            ByteBuffer checksum = ByteBuffer.wrap(body, pos, CHECKSUM).order(ByteOrder.LITTLE_ENDIAN);
            if (checksum.getLong() != hash[0] || checksum.getLong() != hash[1]) {
                throw new IllegalArgumentException("checksum mismatch in the compressed block at byte " + pos);
            }
            byte[] plain = new byte[size];
            DECOMPRESSOR.decompress(body, pos + CHECKSUM + HEADER, plain, 0, size);
            out.writeBytes(plain);
            pos += CHECKSUM + compressedSize;
        }
        return out.toByteArray();
    }
}
