package io.tablecdc.clickhouse.destination;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

import org.apache.avro.Schema;
import org.apache.avro.file.DataFileStream;
import org.apache.avro.file.DataFileWriter;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;

import io.tablecdc.clickhouse.schema.ClickHouseTypes;
import io.tablecdc.clickhouse.schema.StageSchema;

/**
 * Loading into a table created by an earlier release, whose {@code _tablecdc_version} is UInt64: versions below 2^63
 * (every version of a commit LSN below 8000/0) load as before; a larger one fails the load with a message naming
 * the table and what to do.
 */
final class LegacyVersions {
    private LegacyVersions() {
    }

    /** The message of a version that does not fit the table's UInt64 column. */
    static String error(String database, String table) {
        return "tablecdc: a row version is 2^63 or more, which the UInt64 _tablecdc_version column of " + database + "."
                + table + " (created by an earlier release) cannot hold; recreate the table (the sink creates it with a"
                + " UInt128 version column) and load the flow's table again";
    }

    /**
     * Push mode: the stage file rewritten with its versions as Avro longs, which ClickHouse loads into UInt64 (a
     * temporary file, deleted when the stream is closed).
     *
     * @throws IllegalArgumentException with {@link #error} when a version does not fit
     */
    static InputStream asLongs(InputStream avroFile, String database, String table) throws IOException {
        Path tmp = Files.createTempFile("tablecdc-legacy-version", ".avro");
        try (DataFileStream<GenericRecord> in = new DataFileStream<>(avroFile, new GenericDatumReader<>())) {
            Schema staged = in.getSchema();
            List<Schema.Field> fields = new ArrayList<>();
            for (Schema.Field f : staged.getFields()) {
                Schema type = f.name().equals(StageSchema.VERSION_COLUMN) ? Schema.create(Schema.Type.LONG) : f.schema();
                fields.add(new Schema.Field(f.name(), type, f.doc(), f.defaultVal()));
            }
            Schema converted = Schema.createRecord(staged.getName(), staged.getDoc(), staged.getNamespace(), false, fields);
            try (OutputStream out = Files.newOutputStream(tmp, StandardOpenOption.TRUNCATE_EXISTING);
                 DataFileWriter<GenericRecord> writer = new DataFileWriter<>(new GenericDatumWriter<>(converted))) {
                writer.create(converted, out);
                int version = staged.getField(StageSchema.VERSION_COLUMN).pos();
                for (GenericRecord record : in) {
                    GenericData.Record copy = new GenericData.Record(converted);
                    for (int i = 0; i < fields.size(); i++) {
                        copy.put(i, record.get(i));
                    }
                    BigInteger value = ClickHouseTypes.versionOf(record.get(version));
                    if (value.compareTo(ClickHouseTypes.LEGACY_VERSION_LIMIT) >= 0) {
                        throw new IllegalArgumentException(error(database, table) + " (version " + value + ")");
                    }
                    copy.put(version, value.longValueExact());
                    writer.append(copy);
                }
            }
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(tmp);
            throw e;
        }
        InputStream file = Files.newInputStream(tmp);
        return new java.io.FilterInputStream(file) {
            @Override
            public void close() throws IOException {
                try {
                    super.close();
                } finally {
                    Files.deleteIfExists(tmp);
                }
            }
        };
    }
}
