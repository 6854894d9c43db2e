package io.tablecdc.common;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;

/**
 * Semantic types the sources put on Connect schemas (as schema names) where Connect's own logical types
 * lose information: microsecond timestamps and times, JSON text and UUIDs. The sink maps them to
 * {@code DateTime64(6,'UTC')}, {@code Time64(6)}-compatible microseconds, {@code String} and {@code UUID}.
 * Any other converter-preserving consumer sees plain INT64 and STRING values.
 */
public final class TablecdcTypes {
    /** INT64 microseconds since 1970-01-01T00:00:00Z. */
    public static final String MICRO_TIMESTAMP = "io.tablecdc.MicroTimestamp";
    /** INT64 microseconds since midnight. */
    public static final String MICRO_TIME = "io.tablecdc.MicroTime";
    /** STRING holding a JSON document. */
    public static final String JSON = "io.tablecdc.Json";
    /** STRING holding a UUID in its canonical text form. */
    public static final String UUID = "io.tablecdc.Uuid";

    private TablecdcTypes() {
    }

    public static SchemaBuilder microTimestamp() {
        return SchemaBuilder.int64().name(MICRO_TIMESTAMP).version(1);
    }

    public static SchemaBuilder microTime() {
        return SchemaBuilder.int64().name(MICRO_TIME).version(1);
    }

    public static SchemaBuilder json() {
        return SchemaBuilder.string().name(JSON).version(1);
    }

    public static SchemaBuilder uuid() {
        return SchemaBuilder.string().name(UUID).version(1);
    }

    /** Whether {@code schema} carries the semantic type {@code name}. */
    public static boolean is(Schema schema, String name) {
        return schema != null && name.equals(schema.name());
    }
}
