package io.tablecdc.clickhouse.stage;

import java.io.Closeable;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.apache.avro.file.CodecFactory;
import org.apache.avro.file.DataFileWriter;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;

import io.tablecdc.clickhouse.schema.StageSchema;

/**
 * Streams the records of one (table, batch) into Avro container files on local disk, never holding the batch
 * in memory, and starts a new part when the current one reaches {@code maxFileBytes}. A schema change
 * inside a batch also starts a new part, since an Avro file has one schema.
 */
public final class StageWriter implements Closeable {
    private final Path dir;
    private final String baseName;
    private final CodecFactory codec;
    private final long maxFileBytes;
    private final List<StagePart> parts = new ArrayList<>();

    private DataFileWriter<GenericRecord> writer;
    private StageSchema schema;
    private Path current;
    private CountingStream written;
    private long rows;

    public StageWriter(Path dir, String baseName, String codec, long maxFileBytes) {
        this.dir = dir;
        this.baseName = baseName;
        this.codec = codec(codec);
        this.maxFileBytes = maxFileBytes;
    }

    /** Avro's codec for a {@code avro.codec} value: {@code zstandard}, {@code snappy}, {@code deflate}, {@code null}. */
    public static CodecFactory codec(String name) {
        return switch (name) {
            case "zstandard" -> CodecFactory.zstandardCodec(3);
            case "snappy" -> CodecFactory.snappyCodec();
            case "deflate" -> CodecFactory.deflateCodec(6);
            case "null" -> CodecFactory.nullCodec();
            default -> throw new IllegalArgumentException("unknown Avro codec '" + name + "' (zstandard, snappy, deflate, null)");
        };
    }

    /** Appends one record written with {@code recordSchema}. */
    public void append(StageSchema recordSchema, GenericRecord record) throws IOException {
        if (writer != null && (recordSchema != schema || written.count >= maxFileBytes)) {
            closePart();
        }
        if (writer == null) {
            openPart(recordSchema);
        }
        writer.append(record);
        rows++;
    }

    /** Closes the last part and returns every part, in order. */
    public List<StagePart> finish() throws IOException {
        closePart();
        return List.copyOf(parts);
    }

    public long rows() {
        long total = rows;
        for (StagePart part : parts) {
            total += part.rows();
        }
        return total;
    }

    private void openPart(StageSchema recordSchema) throws IOException {
        Files.createDirectories(dir);
        schema = recordSchema;
        current = dir.resolve(baseName + "-" + parts.size() + ".avro");
        DataFileWriter<GenericRecord> w = new DataFileWriter<>(new StageDatumWriter(recordSchema.avroSchema()));
        w.setCodec(codec);
        // blocks reach the file every ~64 KiB, so the count tracks the part's size closely enough to split on
        written = new CountingStream(Files.newOutputStream(current));
        writer = w.create(recordSchema.avroSchema(), written);
        rows = 0;
    }

    private void closePart() throws IOException {
        if (writer == null) {
            return;
        }
        writer.close();
        writer = null;
        parts.add(new StagePart(current, rows, Files.size(current)));
        rows = 0;
    }

    private static final class CountingStream extends java.io.FilterOutputStream {
        long count;

        CountingStream(java.io.OutputStream out) {
            super(out);
        }

        @Override
        public void write(int b) throws IOException {
            out.write(b);
            count++;
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            out.write(b, off, len);
            count += len;
        }
    }

    /** Abandons the batch: closes and deletes every local part. */
    @Override
    public void close() throws IOException {
        if (writer != null) {
            writer.close();
            writer = null;
            Files.deleteIfExists(current);
        }
        for (StagePart part : parts) {
            Files.deleteIfExists(part.file());
        }
    }

    /**
     * Avro's generic writer, with the branch of a nullable column's union ({@code [null, T]} or {@code [T, null]}) chosen
     * by whether the value is null instead of by Avro's lookup of the value's type name in the union (a map lookup per
     * value, the writer's largest cost after encoding). Other unions are resolved as Avro does.
     */
    static final class StageDatumWriter extends GenericDatumWriter<GenericRecord> {
        StageDatumWriter(org.apache.avro.Schema schema) {
            super(schema);
        }

        @Override
        protected int resolveUnion(org.apache.avro.Schema union, Object datum) {
            java.util.List<org.apache.avro.Schema> types = union.getTypes();
            if (types.size() == 2) {
                boolean firstNull = types.get(0).getType() == org.apache.avro.Schema.Type.NULL;
                boolean secondNull = types.get(1).getType() == org.apache.avro.Schema.Type.NULL;
                if (firstNull != secondNull) {
                    return (datum == null) == firstNull ? 0 : 1;
                }
            }
            return super.resolveUnion(union, datum);
        }
    }
}
