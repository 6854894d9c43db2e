package io.tablecdc.clickhouse.schema;

import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;

import io.tablecdc.common.TablecdcTypes;

/** The ClickHouse column type of each Connect schema, and the type of the version column. */
public final class ClickHouseTypes {
    /** The version column's type in tables the sink creates: versions are non-negative integers below 2^128. */
    public static final String VERSION_TYPE = "UInt128";
    /** The version column's type in tables created by earlier releases; they keep loading versions below 2^63. */
    public static final String LEGACY_VERSION_TYPE = "UInt64";
    /** Above every version a {@link #LEGACY_VERSION_TYPE} column takes: 2^63. */
    public static final java.math.BigInteger LEGACY_VERSION_LIMIT = java.math.BigInteger.ONE.shiftLeft(63);
    private static final java.math.BigInteger VERSION_LIMIT = java.math.BigInteger.ONE.shiftLeft(128);
    private static final org.apache.avro.Schema VERSION_AVRO = org.apache.avro.Schema.createFixed("tablecdc_uint128",
            "a UInt128, little-endian (how ClickHouse reads Avro fixed(16) into UInt128)", "io.tablecdc", 16);
    /** The first day {@code Date32} holds, 1900-01-01, in days since 1970-01-01. */
    public static final int DATE32_MIN_DAY = (int) java.time.LocalDate.of(1900, 1, 1).toEpochDay();
    /** The last day {@code Date32} holds, 2299-12-31, in days since 1970-01-01. */
    public static final int DATE32_MAX_DAY = (int) java.time.LocalDate.of(2299, 12, 31).toEpochDay();
    /** The first instant {@code DateTime64(6)} holds, 1900-01-01 00:00:00 UTC, in microseconds since the epoch. */
    public static final long DATETIME64_MIN_MICROS = DATE32_MIN_DAY * 86_400_000_000L;
    /** The last instant {@code DateTime64(6)} holds, 2299-12-31 23:59:59.999999 UTC, in microseconds since the epoch. */
    public static final long DATETIME64_MAX_MICROS = (DATE32_MAX_DAY + 1L) * 86_400_000_000L - 1;

    private ClickHouseTypes() {
    }

    /** The version in a stage file: Avro {@code fixed(16)}, little-endian, which ClickHouse loads into UInt128. */
    static org.apache.avro.Schema versionAvroType() {
        return VERSION_AVRO;
    }

    static Object versionAvroValue(java.math.BigInteger version) {
        if (version.signum() < 0 || version.compareTo(VERSION_LIMIT) >= 0) {
            throw new TypeMappingException("a row version must be a non-negative integer below 2^128: " + version);
        }
        byte[] bigEndian = version.toByteArray();
        byte[] little = new byte[16];
        for (int i = 0; i < bigEndian.length && i < 16; i++) {
            little[i] = bigEndian[bigEndian.length - 1 - i];
        }
        return new org.apache.avro.generic.GenericData.Fixed(VERSION_AVRO, little);
    }

    /** The value of a staged version ({@link #versionAvroValue}). */
    public static java.math.BigInteger versionOf(Object avroValue) {
        byte[] little = ((org.apache.avro.generic.GenericFixed) avroValue).bytes();
        byte[] bigEndian = new byte[little.length];
        for (int i = 0; i < little.length; i++) {
            bigEndian[i] = little[little.length - 1 - i];
        }
        return new java.math.BigInteger(1, bigEndian);
    }

    /**
     * The ClickHouse type for a Connect field: {@code Nullable(T)} when optional (arrays excepted: a null
     * array is staged empty), {@code Decimal(P,S)}, {@code Date32}, {@code DateTime64(6,'UTC')},
     * {@code UUID}, {@code Array(T)}, and {@code String} for text, bytes, JSON, maps and structs. Times of
     * day are {@code Int64} microseconds since midnight.
     */
    public static String columnType(String table, String column, Schema schema) {
        return columnType(table, column, schema, false);
    }

    /**
     * {@link #columnType(String, String, Schema)}, with dates as {@code Int32} days since 1970-01-01 and timestamps
     * as {@code Int64} microseconds since the epoch when {@code integerTemporal}: every value arrives exactly, also
     * those outside {@code Date32}/{@code DateTime64}'s range.
     */
    public static String columnType(String table, String column, Schema schema, boolean integerTemporal) {
        String type = baseType(table, column, schema, integerTemporal);
        if (schema.type() == Schema.Type.ARRAY || !schema.isOptional()) {
            return type;
        }
        return "Nullable(" + type + ")";
    }

    private static String baseType(String table, String column, Schema schema, boolean integerTemporal) {
        String name = schema.name();
        if (Decimal.LOGICAL_NAME.equals(name)) {
            int scale = Integer.parseInt(schema.parameters().get(Decimal.SCALE_FIELD));
            return "Decimal(" + StageSchema.precision(schema) + ", " + scale + ")";
        }
        if (Date.LOGICAL_NAME.equals(name)) {
            return integerTemporal ? "Int32" : "Date32";
        }
        if (Timestamp.LOGICAL_NAME.equals(name) || TablecdcTypes.is(schema, TablecdcTypes.MICRO_TIMESTAMP)) {
            return integerTemporal ? "Int64" : "DateTime64(6, 'UTC')";
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
                String inner = baseType(table, column, element, integerTemporal);
                yield "Array(" + (element.isOptional() ? "Nullable(" + inner + ")" : inner) + ")";
            }
        };
    }

    private static final java.util.regex.Pattern SCALAR = java.util.regex.Pattern.compile(
            "Int8|Int16|Int32|Int64|UInt8|UInt16|UInt32|UInt64|UInt128|UInt256|Float32|Float64|Bool|String|UUID|Date32"
                    + "|DateTime64\\(6, 'UTC'\\)|Decimal\\(([1-9]|[1-6][0-9]|7[0-6]), ([0-9]|[1-6][0-9]|7[0-6])\\)");

    /**
     * Whether {@code type} is one this sink writes into a stage file (the grammar of the table above, plus the
     * unsigned types of its own version and delete columns): the types read back from a stage file go into
     * {@code CREATE TABLE} and {@code ALTER TABLE} statements, so anything else is refused rather than pasted.
     */
    public static boolean isSinkType(String type) {
        if (type == null || type.length() > 200) {
            return false;
        }
        if (type.startsWith("Nullable(") && type.endsWith(")")) {
            String inner = type.substring("Nullable(".length(), type.length() - 1);
            return !inner.startsWith("Nullable(") && !inner.startsWith("Array(") && isSinkType(inner);
        }
        if (type.startsWith("Array(") && type.endsWith(")")) {
            return isSinkType(type.substring("Array(".length(), type.length() - 1));
        }
        java.util.regex.Matcher decimal = SCALAR.matcher(type);
        if (!decimal.matches()) {
            return false;
        }
        // Decimal(p, s) needs s <= p
        return decimal.group(1) == null || Integer.parseInt(decimal.group(2)) <= Integer.parseInt(decimal.group(1));
    }
}
