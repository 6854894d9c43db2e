package io.tablecdc.bigquery.schema;


import java.math.RoundingMode;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;

import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.FieldList;
import com.google.cloud.bigquery.FieldValue;
import com.google.cloud.bigquery.FieldValueList;
import com.google.cloud.bigquery.StandardSQLTypeName;

import io.tablecdc.bigquery.Cursor;
import io.tablecdc.common.JsonText;
import io.tablecdc.common.TablecdcTypes;

/**
 * BigQuery column types as Connect schemas, and BigQuery values as Connect values. The mapping keeps every value
 * exact:
 *
 * <table>
 * <caption>type mapping</caption>
 * <tr><th>BigQuery</th><th>Connect</th></tr>
 * <tr><td>INT64</td><td>INT64</td></tr>
 * <tr><td>FLOAT64</td><td>FLOAT64</td></tr>
 * <tr><td>BOOL</td><td>BOOLEAN</td></tr>
 * <tr><td>STRING</td><td>STRING</td></tr>
 * <tr><td>BYTES</td><td>BYTES</td></tr>
 * <tr><td>NUMERIC(P, S)</td><td>Decimal(S), parameter {@code connect.decimal.precision} = P (default 38, 9)</td></tr>
 * <tr><td>BIGNUMERIC(P, S)</td><td>Decimal(S), precision P (default 76, 38)</td></tr>
 * <tr><td>DATE</td><td>Connect Date</td></tr>
 * <tr><td>DATETIME</td><td>{@link TablecdcTypes#microTimestamp()}: the wall clock read as UTC</td></tr>
 * <tr><td>TIMESTAMP</td><td>{@link TablecdcTypes#microTimestamp()}</td></tr>
 * <tr><td>TIME</td><td>{@link TablecdcTypes#microTime()}</td></tr>
 * <tr><td>JSON</td><td>{@link TablecdcTypes#json()}</td></tr>
 * <tr><td>STRUCT (RECORD)</td><td>{@link TablecdcTypes#json()}: the struct as a JSON object</td></tr>
 * <tr><td>GEOGRAPHY</td><td>STRING (WKT)</td></tr>
 * <tr><td>INTERVAL, RANGE</td><td>STRING (BigQuery's text form)</td></tr>
 * <tr><td>REPEATED (ARRAY) of T</td><td>a required ARRAY of T (an empty array, never null, as in BigQuery)</td></tr>
 * </table>
 *
 * <p>A column is optional unless it is REQUIRED.
 */
public final class BigQueryTypes {
    /** The schema parameter the sink reads a decimal's precision from. */
    public static final String PRECISION_PARAMETER = "connect.decimal.precision";

    private BigQueryTypes() {
    }

    /** The Connect schema of a column. */
    public static Schema schemaOf(Field field) {
        if (field.getMode() == Field.Mode.REPEATED) {
            return SchemaBuilder.array(elementSchema(field)).build();
        }
        SchemaBuilder builder = builderOf(field);
        if (field.getMode() != Field.Mode.REQUIRED) {
            builder.optional();
        }
        return builder.build();
    }

    private static Schema elementSchema(Field field) {
        // BigQuery arrays hold no NULL elements
        return builderOf(field).build();
    }

    private static SchemaBuilder builderOf(Field field) {
        StandardSQLTypeName type = standardType(field);
        return switch (type) {
            case INT64 -> SchemaBuilder.int64();
            case FLOAT64 -> SchemaBuilder.float64();
            case BOOL -> SchemaBuilder.bool();
            case STRING, GEOGRAPHY, INTERVAL, RANGE -> SchemaBuilder.string();
            case BYTES -> SchemaBuilder.bytes();
            case NUMERIC -> decimal(field, 38, 9);
            case BIGNUMERIC -> decimal(field, 76, 38);
            case DATE -> Date.builder();
            case DATETIME, TIMESTAMP -> TablecdcTypes.microTimestamp();
            case TIME -> TablecdcTypes.microTime();
            case JSON, STRUCT -> TablecdcTypes.json();
            default -> throw new IllegalArgumentException("column " + field.getName() + " has the BigQuery type " + type
                    + ", which this connector cannot map");
        };
    }

    private static SchemaBuilder decimal(Field field, int defaultPrecision, int defaultScale) {
        int precision = field.getPrecision() == null ? defaultPrecision : field.getPrecision().intValue();
        int scale = field.getScale() == null ? (field.getPrecision() == null ? defaultScale : 0) : field.getScale().intValue();
        return Decimal.builder(scale).parameter(PRECISION_PARAMETER, Integer.toString(precision));
    }

    /** The standard SQL type of a field (RECORD is STRUCT). */
    public static StandardSQLTypeName standardType(Field field) {
        return field.getType().getStandardType();
    }

    /** The Connect value of a column's value, for the schema {@link #schemaOf} gives. */
    public static Object valueOf(Field field, Schema schema, FieldValue value) {
        if (field.getMode() == Field.Mode.REPEATED) {
            List<Object> list = new ArrayList<>();
            if (value != null && !value.isNull()) {
                for (FieldValue element : value.getRepeatedValue()) {
                    list.add(element == null || element.isNull() ? null : scalar(field, schema.valueSchema(), element));
                }
            }
            return list;
        }
        if (value == null || value.isNull()) {
            return null;
        }
        return scalar(field, schema, value);
    }

    private static Object scalar(Field field, Schema schema, FieldValue value) {
        StandardSQLTypeName type = standardType(field);
        return switch (type) {
            case INT64 -> value.getLongValue();
            case FLOAT64 -> value.getDoubleValue();
            case BOOL -> value.getBooleanValue();
            case STRING, GEOGRAPHY, INTERVAL, JSON -> value.getStringValue();
            case RANGE -> String.valueOf(value.getValue());
            case BYTES -> value.getBytesValue();
            case NUMERIC, BIGNUMERIC -> value.getNumericValue().setScale(schema.parameters() == null ? 0
                    : Integer.parseInt(schema.parameters().get(Decimal.SCALE_FIELD)), RoundingMode.UNNECESSARY);
            case DATE -> new java.util.Date(LocalDate.parse(value.getStringValue()).toEpochDay() * 86_400_000L);
            case DATETIME -> datetimeMicros(value.getStringValue());
            case TIMESTAMP -> timestampMicros(value);
            case TIME -> LocalTime.parse(value.getStringValue()).toNanoOfDay() / 1_000L;
            case STRUCT -> json(field.getSubFields(), value.getRecordValue());
            default -> throw new IllegalArgumentException("column " + field.getName() + ": type " + type + " cannot be read");
        };
    }

    /** Microseconds since the epoch of a TIMESTAMP value, exact. */
    public static long timestampMicros(FieldValue value) {
        return Cursor.micros(value.getTimestampInstant());
    }

    /** A DATETIME's wall clock read as UTC, in microseconds since the epoch. */
    public static long datetimeMicros(String text) {
        LocalDateTime dateTime = LocalDateTime.parse(text.replace(' ', 'T'));
        Instant instant = dateTime.toInstant(ZoneOffset.UTC);
        return Cursor.micros(instant);
    }

    /** A STRUCT value as a JSON object, field by field in schema order. */
    static String json(FieldList fields, FieldValueList values) {
        StringBuilder out = new StringBuilder();
        appendStruct(out, fields, values);
        return out.toString();
    }

    private static void appendStruct(StringBuilder out, FieldList fields, FieldValueList values) {
        out.append('{');
        for (int i = 0; i < fields.size(); i++) {
            if (i > 0) {
                out.append(',');
            }
            Field field = fields.get(i);
            JsonText.appendString(out, field.getName());
            out.append(':');
            FieldValue value = i < values.size() ? values.get(i) : null;
            if (field.getMode() == Field.Mode.REPEATED) {
                out.append('[');
                if (value != null && !value.isNull()) {
                    List<FieldValue> elements = value.getRepeatedValue();
                    for (int j = 0; j < elements.size(); j++) {
                        if (j > 0) {
                            out.append(',');
                        }
                        appendJsonValue(out, field, elements.get(j));
                    }
                }
                out.append(']');
            } else {
                appendJsonValue(out, field, value);
            }
        }
        out.append('}');
    }

    private static void appendJsonValue(StringBuilder out, Field field, FieldValue value) {
        if (value == null || value.isNull()) {
            out.append("null");
            return;
        }
        switch (standardType(field)) {
            case INT64 -> out.append(value.getLongValue());
            case FLOAT64 -> {
                double d = value.getDoubleValue();
                if (Double.isFinite(d)) {
                    out.append(d);
                } else {
                    JsonText.appendString(out, Double.toString(d));
                }
            }
            case BOOL -> out.append(value.getBooleanValue());
            case NUMERIC, BIGNUMERIC -> out.append(value.getNumericValue().toPlainString());
            case BYTES -> JsonText.appendString(out, Base64.getEncoder().encodeToString(value.getBytesValue()));
            case TIMESTAMP -> JsonText.appendString(out, Cursor.format(value.getTimestampInstant()));
            case JSON -> out.append(value.getStringValue());
            case STRUCT -> appendStruct(out, field.getSubFields(), value.getRecordValue());
            default -> JsonText.appendString(out, String.valueOf(value.getValue()));
        }
    }


    /** Whether a column can be a watermark: TIMESTAMP, DATETIME or DATE, not repeated. */
    public static boolean usableAsWatermark(Field field) {
        if (field.getMode() == Field.Mode.REPEATED) {
            return false;
        }
        StandardSQLTypeName type = standardType(field);
        return type == StandardSQLTypeName.TIMESTAMP || type == StandardSQLTypeName.DATETIME || type == StandardSQLTypeName.DATE;
    }

    /**
     * The microseconds since the epoch of a watermark value: TIMESTAMP as is, DATETIME and DATE (at midnight) placed in
     * {@code zone}. A DATETIME the clock change makes ambiguous takes the earlier offset, one skipped over is moved
     * forward by the gap; queries return their own {@code TIMESTAMP(col, zone)}, which the connector prefers.
     */
    public static long watermarkMicros(Field field, FieldValue value, ZoneId zone) {
        return switch (standardType(field)) {
            case TIMESTAMP -> timestampMicros(value);
            case DATETIME -> Cursor.micros(LocalDateTime.parse(value.getStringValue().replace(' ', 'T')).atZone(zone).toInstant());
            case DATE -> Cursor.micros(LocalDate.parse(value.getStringValue()).atStartOfDay(zone).toInstant());
            default -> throw new IllegalArgumentException("column " + field.getName() + " is not a watermark type");
        };
    }

    /** As {@link #watermarkMicros(Field, FieldValue, ZoneId)} in UTC. */
    public static long watermarkMicros(Field field, FieldValue value) {
        return watermarkMicros(field, value, ZoneOffset.UTC);
    }

}
