package io.tablecdc.clickhouse.schema;

import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;

import io.tablecdc.common.TablecdcTypes;

/** The ClickHouse column type of each Connect schema, and the type of the version column. */
public final class ClickHouseTypes {
    /** The version column's type: versions are non-negative 64-bit integers. */
    public static final String VERSION_TYPE = "UInt64";

    private ClickHouseTypes() {
    }

    static org.apache.avro.Schema versionAvroType() {
        return org.apache.avro.Schema.create(org.apache.avro.Schema.Type.LONG);
    }

    static Object versionAvroValue(long version) {
        if (version < 0) {
            throw new TypeMappingException("a row version must not be negative: " + version);
        }
        return version;
    }

    /**
     * The ClickHouse type for a Connect field: {@code Nullable(T)} when optional (arrays excepted: a null
     * array is staged empty), {@code Decimal(P,S)}, {@code Date32}, {@code DateTime64(6,'UTC')},
     * {@code UUID}, {@code Array(T)}, and {@code String} for text, bytes, JSON, maps and structs. Times of
     * day are {@code Int64} microseconds since midnight.
     */
    public static String columnType(String table, String column, Schema schema) {
        String type = baseType(table, column, schema);
        if (schema.type() == Schema.Type.ARRAY || !schema.isOptional()) {
            return type;
        }
        return "Nullable(" + type + ")";
    }

    private static String baseType(String table, String column, Schema schema) {
        String name = schema.name();
        if (Decimal.LOGICAL_NAME.equals(name)) {
            int scale = Integer.parseInt(schema.parameters().get(Decimal.SCALE_FIELD));
            return "Decimal(" + StageSchema.precision(schema) + ", " + scale + ")";
        }
        if (Date.LOGICAL_NAME.equals(name)) {
            return "Date32";
        }
        if (Timestamp.LOGICAL_NAME.equals(name) || TablecdcTypes.is(schema, TablecdcTypes.MICRO_TIMESTAMP)) {
            return "DateTime64(6, 'UTC')";
        }
        if (Time.LOGICAL_NAME.equals(name) || TablecdcTypes.is(schema, TablecdcTypes.MICRO_TIME)) {
            return "Int64";
        }
        if (TablecdcTypes.is(schema, TablecdcTypes.UUID)) {
            return "UUID";
        }
        return switch (schema.type()) {
            case INT8 -> "Int8";
            case INT16 -> "Int16";
            case INT32 -> "Int32";
            case INT64 -> "Int64";
            case FLOAT32 -> "Float32";
            case FLOAT64 -> "Float64";
            case BOOLEAN -> "Bool";
            case STRING, BYTES, MAP, STRUCT -> "String";
            case ARRAY -> {
                Schema element = schema.valueSchema();
                if (element.type() == Schema.Type.ARRAY) {
                    throw new TypeMappingException("table " + table + ", column " + column + ": arrays of arrays are not supported");
                }
                String inner = baseType(table, column, element);
                yield "Array(" + (element.isOptional() ? "Nullable(" + inner + ")" : inner) + ")";
            }
        };
    }
}
