package io.tablecdc.bigquery.schema;

import java.time.ZoneId;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;

import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.FieldList;
import com.google.cloud.bigquery.FieldValue;
import com.google.cloud.bigquery.FieldValueList;
import com.google.cloud.bigquery.StandardSQLTypeName;

import io.tablecdc.bigquery.config.TableSpec;
import io.tablecdc.bigquery.sql.CdcSql;

/**
 * One table's columns as BigQuery reports them (tables.get) and as Connect schemas: the value is the whole row, the
 * key the configured key columns. Built again when the table's columns change, so a new column flows through as a
 * new value schema.
 */
public final class TableSchema {
    private final TableSpec table;
    private final FieldList fields;
    private final Schema valueSchema;
    private final Schema keySchema;
    private final Field watermark;

    private TableSchema(TableSpec table, FieldList fields, Schema valueSchema, Schema keySchema, Field watermark) {
        this.table = table;
        this.fields = fields;
        this.valueSchema = valueSchema;
        this.keySchema = keySchema;
        this.watermark = watermark;
    }

    /**
     * Maps a table's columns.
     *
     * @throws SchemaException naming the table and the column when the watermark or a key column is missing or
     *                         has an unusable type, or a column has a type without a mapping
     */
    public static TableSchema of(TableSpec table, FieldList fields, boolean needsWatermark) {
        SchemaBuilder value = SchemaBuilder.struct().name(schemaName(table, "Value"));
        for (Field field : fields) {
            try {
                value.field(field.getName(), BigQueryTypes.schemaOf(field));
            } catch (IllegalArgumentException e) {
                throw new SchemaException("table " + table.fullName() + ": " + e.getMessage());
            }
        }
        Field watermark = null;
        if (!table.watermarkColumn().isEmpty()) {
            watermark = find(fields, table.watermarkColumn());
            if (watermark == null) {
                throw new SchemaException("table " + table.fullName() + " has no watermark column " + table.watermarkColumn());
            }
            if (!BigQueryTypes.usableAsWatermark(watermark)) {
                throw new SchemaException("table " + table.fullName() + ": watermark column " + watermark.getName() + " is "
                        + (watermark.getMode() == Field.Mode.REPEATED ? "an ARRAY of " : "") + BigQueryTypes.standardType(watermark)
                        + "; it must be TIMESTAMP, DATETIME or DATE");
            }
        } else if (needsWatermark) {
            throw new SchemaException("table " + table.fullName() + " has no watermark column configured");
        }
        Schema keySchema = null;
        if (table.hasKey()) {
            SchemaBuilder key = SchemaBuilder.struct().name(schemaName(table, "Key"));
            for (String column : table.keyColumns()) {
                Field field = find(fields, column);
                if (field == null) {
                    throw new SchemaException("table " + table.fullName() + " has no key column " + column);
                }
                if (field.getMode() == Field.Mode.REPEATED) {
                    throw new SchemaException("table " + table.fullName() + ": key column " + column + " is an ARRAY");
                }
                key.field(field.getName(), BigQueryTypes.schemaOf(field));
            }
            keySchema = key.build();
        }
        return new TableSchema(table, fields, value.build(), keySchema, watermark);
    }

    private static Field find(FieldList fields, String name) {
        for (Field field : fields) {
            if (field.getName().equalsIgnoreCase(name)) {
                return field;
            }
        }
        return null;
    }

    /** A Connect schema name that Avro converters accept: {@code io.tablecdc.bigquery.<project_dataset_table>.Value}. */
    static String schemaName(TableSpec table, String suffix) {
        String segment = table.fullName().replaceAll("[^A-Za-z0-9_]", "_");
        if (!Character.isLetter(segment.charAt(0)) && segment.charAt(0) != '_') {
            segment = "_" + segment;
        }
        return "io.tablecdc.bigquery." + segment + "." + suffix;
    }

    public TableSpec table() {
        return table;
    }

    public FieldList fields() {
        return fields;
    }

    /** The column names in table order. */
    public List<String> columns() {
        List<String> names = new ArrayList<>();
        for (Field field : fields) {
            names.add(field.getName());
        }
        return names;
    }

    public Schema valueSchema() {
        return valueSchema;
    }

    /** The key schema, or null when the table has no key columns configured. */
    public Schema keySchema() {
        return keySchema;
    }

    /** The watermark column, or null (APPENDS and CHANGES modes without one). */
    public Field watermark() {
        return watermark;
    }

    /** Whether the two describe the same columns (names, types and modes). */
    public boolean sameColumns(FieldList other) {
        return fields.equals(other);
    }

    /** The row's value Struct. {@code row} holds at least the table's columns, by name. */
    public Struct value(FieldValueList row) {
        Struct struct = new Struct(valueSchema);
        for (Field field : fields) {
            org.apache.kafka.connect.data.Field target = valueSchema.field(field.getName());
            struct.put(target, BigQueryTypes.valueOf(field, target.schema(), row.get(field.getName())));
        }
        return struct;
    }

    /** The row's key Struct, taken from its value, or null when the table has no key columns. */
    public Struct key(Struct value) {
        if (keySchema == null) {
            return null;
        }
        Struct key = new Struct(keySchema);
        for (org.apache.kafka.connect.data.Field field : keySchema.fields()) {
            key.put(field, value.get(field.name()));
        }
        return key;
    }

    /**
     * The row's watermark in microseconds since the epoch, or null when it has none: the query's own
     * {@link CdcSql#WATERMARK} when the row carries it (window and snapshot queries), else the column's value placed in
     * {@code zone}.
     */
    public Long watermarkMicros(FieldValueList row, ZoneId zone) {
        if (watermark == null) {
            return null;
        }
        FieldValue computed = null;
        try {
            computed = row.get(CdcSql.WATERMARK);
        } catch (IllegalArgumentException notSelected) {
            // a query without the computed watermark (the full-table snapshot of APPENDS and CHANGES modes)
        }
        if (computed != null) {
            return computed.isNull() ? null : BigQueryTypes.timestampMicros(computed);
        }
        FieldValue value = row.get(watermark.getName());
        return value == null || value.isNull() ? null : BigQueryTypes.watermarkMicros(watermark, value, zone);
    }

    /** The watermark as a TIMESTAMP expression of the SQL ({@link CdcSql#watermarkExpression}). */
    public String watermarkExpression(ZoneId zone) {
        return CdcSql.watermarkExpression(watermark.getName(), BigQueryTypes.standardType(watermark), zone);
    }

    /** The watermark as the window queries use it, with a filter on a DATETIME or DATE column in its own type. */
    public CdcSql.Watermark watermarkSql(ZoneId zone) {
        return CdcSql.watermark(watermark.getName(), BigQueryTypes.standardType(watermark), zone);
    }

    /**
     * Why the safety lag is too short for this table's watermark type, or null when it is long enough. A DATE
     * watermark has the same value for every row written that day: the window may only reach a day once the day is
     * over, so the lag must be at least 24 hours (25 in a zone with daylight-saving changes, whose days can be 25 hours
     * long). A DATETIME watermark in a zone with daylight-saving changes is ambiguous for the hour the clocks go back:
     * a row of the second pass may be placed an hour early, so the lag must be above one hour.
     */
    public String lagProblem(long safetyLagMs, ZoneId zone) {
        if (watermark == null) {
            return null;
        }
        boolean changes = hasClockChanges(zone);
        StandardSQLTypeName type = BigQueryTypes.standardType(watermark);
        if (type == StandardSQLTypeName.DATE) {
            long need = (changes ? 25L : 24L) * 3_600_000L;
            if (safetyLagMs < need) {
                return "table " + table.fullName() + ": watermark column " + watermark.getName() + " is DATE, whose value"
                        + " is the same for every row written that day; safety.lag.ms is " + safetyLagMs + " but must be at"
                        + " least " + need + " (" + (changes ? "25 hours: " + zone.getId() + " has daylight-saving changes"
                        : "one day") + ") so that a day is read only once it is over";
            }
        } else if (type == StandardSQLTypeName.DATETIME && changes && safetyLagMs <= 3_600_000L) {
            return "table " + table.fullName() + ": watermark column " + watermark.getName() + " is DATETIME in "
                    + zone.getId() + ", which has daylight-saving changes; safety.lag.ms is " + safetyLagMs + " but must"
                    + " be above 3600000 (one hour) so that rows of the hour the clocks go back are not passed";
        }
        return null;
    }

    /**
     * Whether the zone's clocks change (daylight saving): a transition within the last year or ahead. A region whose
     * offset only changed long ago (Asia/Tokyo) counts as fixed.
     */
    static boolean hasClockChanges(ZoneId zone) {
        return zone.getRules().nextTransition(java.time.Instant.now().minus(java.time.Duration.ofDays(366))) != null;
    }

    /** The reason a table cannot be replicated as configured: a configuration error, not retried. */
    public static final class SchemaException extends RuntimeException {
        public SchemaException(String message) {
            super(message);
        }
    }
}
