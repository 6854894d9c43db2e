package io.tablecdc.clickhouse.schema;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

import org.apache.avro.LogicalTypes;
import org.apache.avro.SchemaBuilder;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;

import io.tablecdc.common.TablecdcTypes;

/**
 * The stage file layout of one table for one value schema: the Avro schema of its records (the row's
 * columns plus {@code _tablecdc_version} and {@code _tablecdc_is_deleted}), the ClickHouse type of every
 * column, and the conversion of a Connect value into an Avro record.
 *
 * <p>Logical types are chosen so that ClickHouse's Avro input reads each into its column type directly:
 * decimal → {@code Decimal(P,S)}, date → {@code Date32}, timestamp-micros → {@code DateTime64(6,'UTC')},
 * uuid → {@code UUID}. Optional fields are unions with null → {@code Nullable(T)}; arrays are never
 * Nullable in ClickHouse, so a null array is staged as an empty one.
 *
 * <p>Dates and timestamps outside {@code Date32}/{@code DateTime64}'s range (1900-01-01 to 2299-12-31, which
 * ClickHouse would clamp on insert without a word) are stored at the range's edge here and reported by
 * {@link #lastClamps()}, so the caller counts and logs them; in a key column they are refused, since two clamped
 * keys would merge two rows. Columns chosen with {@code integerTemporal} are {@code Int32} days /
 * {@code Int64} microseconds instead and hold every value exactly.
 *
 * <p>Why it is long: it is the type mapping, one case per Connect type and logical type, each with its Avro schema, its
 * ClickHouse type and its conversion side by side, so that the three never disagree.
 */
public final class StageSchema {
    public static final String VERSION_COLUMN = "_tablecdc_version";
    public static final String IS_DELETED_COLUMN = "_tablecdc_is_deleted";
    /** Precision of a Connect decimal that does not say its own (Connect's Decimal carries only a scale). */
    public static final int DEFAULT_DECIMAL_PRECISION = 38;
    public static final int MAX_DECIMAL_PRECISION = 76;
    static final String PRECISION_PARAMETER = "connect.decimal.precision";
    static final String COLUMN_PROPERTY = "tablecdc.column";
    static final String TYPE_PROPERTY = "tablecdc.type";
    static final String KEY_PROPERTY = "tablecdc.key";
    /** Marks a field that the normalize reads but that is not a column of the final table. */
    static final String AUX_PROPERTY = "tablecdc.aux";
    /** The columns of a row whose value is "kept from the row's previous version" (unchanged TOAST values). */
    public static final String UNCHANGED_COLUMN = "_tablecdc_unchanged";
    /** The i-th key column of the row version whose values the unchanged columns keep: {@code _tablecdc_lookup_<i>}. */
    public static final String LOOKUP_KEY_PREFIX = "_tablecdc_lookup_";
    /** The kept values are those of the lookup key's newest version below this one. */
    public static final String LOOKUP_VERSION_COLUMN = "_tablecdc_lookup_version";
    private static final Pattern AVRO_NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");

    private final String table;
    private final Schema valueSchema;
    private final org.apache.avro.Schema avroSchema;
    private final List<StageColumn> columns;
    /** What {@link #toAvro} does with each value field, in field order: resolved once here, not by name per row. */
    private final ColumnPlan[] plans;
    /** Key column names in field order when the layout carries the lookup fields, else null. */
    private final List<String> lookupKeys;
    /** The plans of {@link #lookupKeys}, in their order (empty without the lookup fields). */
    private final ColumnPlan[] lookupPlans;
    private final Set<String> keyColumns;
    private final List<Clamp> clamps = new ArrayList<>();

    /**
     * A value ClickHouse cannot hold, stored otherwise: at the edge of its column type's range (the edge as ISO 8601
     * text, a date or an instant in UTC), or as {@code NULL} (a decimal's NaN or ±Infinity); {@code exactUnder} is the
     * setting that keeps the column's values exact.
     */
    public record Clamp(String column, String value, String storedAs, String exactUnder) {
        public Clamp(String column, String value, String storedAs) {
            this(column, value, storedAs, TEMPORAL_INTEGER_COLUMNS);
        }
    }

    /** The sink setting that keeps dates and timestamps exact as integers. */
    public static final String TEMPORAL_INTEGER_COLUMNS = "temporal.integer.columns";
    /** The sink setting that keeps decimals exact as text (NaN, ±Infinity, values wider than Decimal(76, 38)). */
    public static final String DECIMAL_TEXT_COLUMNS = "decimal.text.columns";

    private StageSchema(String table, Schema valueSchema, org.apache.avro.Schema avroSchema, List<StageColumn> columns,
                        List<String> lookupKeys, Set<String> keyColumns, Set<String> integerColumns,
                        Map<String, Schema> textDecimals) {
        this.table = table;
        this.valueSchema = valueSchema;
        this.avroSchema = avroSchema;
        this.columns = columns;
        this.lookupKeys = lookupKeys;
        this.keyColumns = keyColumns;
        List<Field> fields = valueSchema.fields();
        this.plans = new ColumnPlan[fields.size()];
        for (int i = 0; i < plans.length; i++) {
            plans[i] = ColumnPlan.of(fields.get(i), integerColumns, textDecimals);
        }
        this.lookupPlans = new ColumnPlan[lookupKeys == null ? 0 : lookupKeys.size()];
        for (int i = 0; i < lookupPlans.length; i++) {
            lookupPlans[i] = plans[valueSchema.field(lookupKeys.get(i)).index()];
        }
    }

    /** How a value is converted: by its staged schema's logical name first, then by its type. */
    private enum Kind { DECIMAL, DATE, TIME, TIMESTAMP, SMALL_INT, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, UUID,
        BYTES, ARRAY, JSON, UNSUPPORTED }

    /**
     * One value field (or an array's element) as staged: its field, its staged schema and conversion, a decimal's scale
     * and precision, whether its dates and timestamps are kept as integers, whether it is a decimal staged as text.
     */
    private record ColumnPlan(Field field, String name, Schema staged, Kind kind, int scale, int precision,
                              boolean integer, boolean decimal, boolean decimalText, ColumnPlan element) {
        static ColumnPlan of(Field field, Set<String> integerColumns, Map<String, Schema> textDecimals) {
            Schema schema = field.schema();
            boolean decimal = isDecimal(schema) || schema.type() == Schema.Type.ARRAY && isDecimal(schema.valueSchema());
            Schema text = textDecimals.get(field.name());
            return of(field, field.name(), text != null ? text : schema, integerColumns.contains(field.name()), decimal,
                    text != null);
        }

        private static ColumnPlan of(Field field, String name, Schema staged, boolean integer, boolean decimal,
                                     boolean decimalText) {
            Kind kind = kindOf(staged);
            int scale = 0;
            int precision = 0;
            if (kind == Kind.DECIMAL) {
                scale = Integer.parseInt(staged.parameters().get(Decimal.SCALE_FIELD));
                precision = StageSchema.precision(staged);
            }
            ColumnPlan element = kind == Kind.ARRAY ? of(null, name, staged.valueSchema(), integer, false, false) : null;
            return new ColumnPlan(field, name, staged, kind, scale, precision, integer, decimal, decimalText, element);
        }

        private static Kind kindOf(Schema schema) {
            String name = schema.name();
            if (Decimal.LOGICAL_NAME.equals(name)) {
                return Kind.DECIMAL;
            }
            if (Date.LOGICAL_NAME.equals(name)) {
                return Kind.DATE;
            }
            if (Time.LOGICAL_NAME.equals(name)) {
                return Kind.TIME;
            }
            if (Timestamp.LOGICAL_NAME.equals(name) || TablecdcTypes.is(schema, TablecdcTypes.MICRO_TIMESTAMP)) {
                return Kind.TIMESTAMP;
            }
            return switch (schema.type()) {
                case INT8, INT16 -> Kind.SMALL_INT;
                case INT32 -> Kind.INT32;
                case INT64 -> Kind.INT64;
                case FLOAT32 -> Kind.FLOAT32;
                case FLOAT64 -> Kind.FLOAT64;
                case BOOLEAN -> Kind.BOOLEAN;
                case STRING -> TablecdcTypes.is(schema, TablecdcTypes.UUID) ? Kind.UUID : Kind.STRING;
                case BYTES -> Kind.BYTES;
                case ARRAY -> Kind.ARRAY;
                case MAP, STRUCT -> Kind.JSON;
                default -> Kind.UNSUPPORTED;
            };
        }
    }

    /** The layout without the lookup fields. */
    public static StageSchema of(String table, Schema valueSchema, Set<String> keyColumns) {
        return of(table, valueSchema, keyColumns, false, column -> false);
    }

    /**
     * Builds the layout for {@code valueSchema} (a STRUCT) of {@code table}, with {@code keyColumns} as the
     * table's key. Fails naming the table and the column when a field's type cannot be staged. With {@code lookup}
     * (a batch that has unchanged TOAST values) every record also carries {@link #UNCHANGED_COLUMN}, the key of the
     * row version the unchanged values come from ({@link #LOOKUP_KEY_PREFIX}{@code <i>}) and
     * {@link #LOOKUP_VERSION_COLUMN}; these are never columns of the final table.
     */
    public static StageSchema of(String table, Schema valueSchema, Set<String> keyColumns, boolean lookup) {
        return of(table, valueSchema, keyColumns, lookup, column -> false);
    }

    /**
     * {@link #of(String, Schema, Set)} with the date and timestamp columns {@code integerTemporal} accepts (by column
     * name) as {@code Int32} days since 1970-01-01 / {@code Int64} microseconds since the epoch.
     */
    public static StageSchema of(String table, Schema valueSchema, Set<String> keyColumns,
                                 java.util.function.Predicate<String> integerTemporal) {
        return of(table, valueSchema, keyColumns, false, integerTemporal);
    }

    /** The layout with or without the lookup fields ({@code lookup}) and with {@code integerTemporal} columns as integers. */
    public static StageSchema of(String table, Schema valueSchema, Set<String> keyColumns, boolean lookup,
                                 java.util.function.Predicate<String> integerTemporal) {
        return of(table, valueSchema, keyColumns, lookup, integerTemporal, column -> false);
    }

    /**
     * As above, with the decimal columns (and arrays of decimals) {@code decimalText} accepts staged as {@code String}:
     * each value's plain text with its scale ({@code 12.50}), and {@code NaN}, {@code Infinity}, {@code -Infinity} as
     * such, exactly.
     */
    public static StageSchema of(String table, Schema valueSchema, Set<String> keyColumns, boolean lookup,
                                 java.util.function.Predicate<String> integerTemporal,
                                 java.util.function.Predicate<String> decimalText) {
        if (valueSchema == null || valueSchema.type() != Schema.Type.STRUCT) {
            throw new TypeMappingException("table " + table + ": the record value has no STRUCT schema ("
                    + (valueSchema == null ? "no schema" : valueSchema.type())
                    + "); use a converter that keeps schemas, e.g. JsonConverter with schemas.enable=true");
        }
        SchemaBuilder.FieldAssembler<org.apache.avro.Schema> record =
                SchemaBuilder.record(avroRecordName(table)).namespace("io.tablecdc.stage").fields();
        List<StageColumn> columns = new ArrayList<>();
        Set<String> usedNames = new HashSet<>();
        Set<String> integerColumns = new HashSet<>();
        Map<String, Schema> textDecimals = new java.util.HashMap<>();
        for (Field field : valueSchema.fields()) {
            if (field.name().startsWith("_tablecdc_")) {
                throw new TypeMappingException("table " + table + ", column " + field.name()
                        + ": names starting with _tablecdc_ are reserved for the sink's own columns");
            }
            String avroName = avroName(field, usedNames);
            boolean key = keyColumns.contains(field.name());
            boolean integer = integerTemporal.test(field.name());
            if (integer) {
                integerColumns.add(field.name());
            }
            Schema staged = field.schema();
            if (decimalText.test(field.name()) && (isDecimal(staged) || staged.type() == Schema.Type.ARRAY
                    && isDecimal(staged.valueSchema()))) {
                staged = textSchema(staged);
                textDecimals.put(field.name(), staged);
            }
            org.apache.avro.Schema fieldSchema = avroType(table, field.name(), staged, integer);
            if (staged.isOptional() && staged.type() != Schema.Type.ARRAY) {
                fieldSchema = org.apache.avro.Schema.createUnion(org.apache.avro.Schema.create(org.apache.avro.Schema.Type.NULL), fieldSchema);
                record = record.name(avroName).type(fieldSchema).withDefault(null);
            } else {
                record = record.name(avroName).type(fieldSchema).noDefault();
            }
            String type = ClickHouseTypes.columnType(table, field.name(), staged, integer);
            if (key && type.startsWith("Nullable(")) {
                // ORDER BY columns cannot be Nullable without allow_nullable_key; keys are never null anyway
                type = type.substring("Nullable(".length(), type.length() - 1);
            }
            columns.add(new StageColumn(avroName, field.name(), type, key));
        }
        record = record.name(VERSION_COLUMN).type(ClickHouseTypes.versionAvroType()).noDefault();
        record = record.name(IS_DELETED_COLUMN).type().intType().noDefault();
        columns.add(new StageColumn(VERSION_COLUMN, VERSION_COLUMN, ClickHouseTypes.VERSION_TYPE, false));
        columns.add(new StageColumn(IS_DELETED_COLUMN, IS_DELETED_COLUMN, "UInt8", false));
        for (String keyColumn : keyColumns) {
            if (valueSchema.field(keyColumn) == null) {
                throw new TypeMappingException("table " + table + ": key column " + keyColumn + " is not in the record value");
            }
        }
        List<StageColumn> aux = new ArrayList<>();
        List<String> lookupKeys = null;
        if (lookup) {
            if (keyColumns.isEmpty()) {
                throw new TypeMappingException("table " + table + ": unchanged values need a key to find the row's previous version");
            }
            record = record.name(UNCHANGED_COLUMN).type().array().items().stringType().noDefault();
            aux.add(new StageColumn(UNCHANGED_COLUMN, UNCHANGED_COLUMN, "Array(String)", false));
            lookupKeys = new ArrayList<>();
            for (StageColumn column : columns) {
                if (column.key()) {
                    String name = LOOKUP_KEY_PREFIX + lookupKeys.size();
                    Field field = valueSchema.field(column.column());
                    record = record.name(name).type(avroType(table, field.name(), textDecimals.getOrDefault(field.name(),
                            field.schema()), integerColumns.contains(field.name()))).noDefault();
                    aux.add(new StageColumn(name, name, column.type(), true));
                    lookupKeys.add(column.column());
                }
            }
            record = record.name(LOOKUP_VERSION_COLUMN).type(ClickHouseTypes.versionAvroType()).noDefault();
            aux.add(new StageColumn(LOOKUP_VERSION_COLUMN, LOOKUP_VERSION_COLUMN, ClickHouseTypes.VERSION_TYPE, false));
        }
        org.apache.avro.Schema avro = record.endRecord();
        for (StageColumn column : columns) {
            org.apache.avro.Schema.Field field = avro.getField(column.avroName());
            field.addProp(COLUMN_PROPERTY, column.column());
            field.addProp(TYPE_PROPERTY, column.type());
            field.addProp(KEY_PROPERTY, column.key());
        }
        for (StageColumn column : aux) {
            org.apache.avro.Schema.Field field = avro.getField(column.avroName());
            field.addProp(COLUMN_PROPERTY, column.column());
            field.addProp(TYPE_PROPERTY, column.type());
            field.addProp(KEY_PROPERTY, column.key());
            field.addProp(AUX_PROPERTY, true);
        }
        return new StageSchema(table, valueSchema, avro, List.copyOf(columns),
                lookupKeys == null ? null : List.copyOf(lookupKeys), Set.copyOf(keyColumns), Set.copyOf(integerColumns),
                Map.copyOf(textDecimals));
    }

    private static boolean isDecimal(Schema schema) {
        return schema != null && Decimal.LOGICAL_NAME.equals(schema.name());
    }

    /** The STRING schema a decimal (or an ARRAY of decimals) is staged as under decimal.text.columns. */
    private static Schema textSchema(Schema decimal) {
        if (decimal.type() == Schema.Type.ARRAY) {
            Schema element = textSchema(decimal.valueSchema());
            org.apache.kafka.connect.data.SchemaBuilder array = org.apache.kafka.connect.data.SchemaBuilder.array(element);
            return decimal.isOptional() ? array.optional().build() : array.build();
        }
        return decimal.isOptional() ? Schema.OPTIONAL_STRING_SCHEMA : Schema.STRING_SCHEMA;
    }

    /**
     * {@code raw}, a value of decimal column {@code column}, as text when the column is staged as text; otherwise
     * itself, with every NaN / ±Infinity of {@code nonFinite} (marked by the source, null in {@code raw}) counted as a
     * value stored as NULL.
     */
    private Object decimalValue(ColumnPlan plan, Object raw, Map<String, String> nonFinite) {
        String column = plan.name();
        boolean text = plan.decimalText();
        if (raw instanceof List<?> list) {
            List<Object> out = text ? new ArrayList<>(list.size()) : null;
            for (int i = 0; i < list.size(); i++) {
                Object item = list.get(i);
                String mark = item == null ? nonFinite.get(column + "[" + i + "]") : null;
                if (text) {
                    out.add(item == null ? mark : ((BigDecimal) item).toPlainString());
                } else if (mark != null) {
                    clamps.add(new Clamp(column, mark, "NULL", DECIMAL_TEXT_COLUMNS));
                }
            }
            return text ? out : raw;
        }
        if (raw == null) {
            String mark = nonFinite.get(column);
            if (mark != null && !text) {
                clamps.add(new Clamp(column, mark, "NULL", DECIMAL_TEXT_COLUMNS));
            }
            return text ? mark : null;
        }
        return text ? ((BigDecimal) raw).toPlainString() : raw;
    }

    /** Whether records of this layout carry the lookup fields. */
    public boolean lookup() {
        return lookupKeys != null;
    }

    /**
     * The columns a stage file loads into, read back from its Avro schema (each field carries its column
     * name, ClickHouse type and key flag), so that a batch staged before a restart can be normalized from
     * its file alone.
     */
    public static List<StageColumn> columnsOf(org.apache.avro.Schema fileSchema) {
        return fieldsOf(fileSchema, false);
    }

    /**
     * The lookup fields of a stage file ({@link #UNCHANGED_COLUMN}, the lookup key, {@link #LOOKUP_VERSION_COLUMN}),
     * empty when its rows have no unchanged values to fill.
     */
    public static List<StageColumn> lookupColumnsOf(org.apache.avro.Schema fileSchema) {
        return fieldsOf(fileSchema, true);
    }

    private static List<StageColumn> fieldsOf(org.apache.avro.Schema fileSchema, boolean aux) {
        List<StageColumn> columns = new ArrayList<>();
        for (org.apache.avro.Schema.Field field : fileSchema.getFields()) {
            if (Boolean.TRUE.equals(field.getObjectProp(AUX_PROPERTY)) != aux) {
                continue;
            }
            Object column = field.getObjectProp(COLUMN_PROPERTY);
            Object type = field.getObjectProp(TYPE_PROPERTY);
            if (column == null || type == null) {
                throw new TypeMappingException("stage file field " + field.name() + " has no " + COLUMN_PROPERTY + "/" + TYPE_PROPERTY
                        + " property: the file was not written by this sink");
            }
            if (!ClickHouseTypes.isSinkType(type.toString())) {
                throw new TypeMappingException("stage file field " + field.name() + " (column " + column + ") declares the"
                        + " ClickHouse type '" + type + "', which is not a type this sink writes; the file is refused");
            }
            columns.add(new StageColumn(field.name(), column.toString(), type.toString(), Boolean.TRUE.equals(field.getObjectProp(KEY_PROPERTY))));
        }
        return columns;
    }

    public String table() {
        return table;
    }

    public Schema valueSchema() {
        return valueSchema;
    }

    public org.apache.avro.Schema avroSchema() {
        return avroSchema;
    }

    /** The row's columns in field order, then the version and delete columns. */
    public List<StageColumn> columns() {
        return columns;
    }

    /**
     * The Avro record of one row. Deletes may carry only the key columns: the other columns are written as
     * null when optional, or as their type's zero value otherwise (the row is deleted; they are never read).
     */
    public GenericRecord toAvro(Struct value, java.math.BigInteger version, boolean deleted) {
        return toAvro(value, version, deleted, List.of(), null, version);
    }

    /**
     * The Avro record of one row whose {@code unchanged} columns keep the values of the newest version below
     * {@code lookupVersion} of the row with key {@code lookupKey} (the row's own key and version when it has no
     * unchanged column). The lookup arguments are ignored by a layout without the lookup fields.
     */
    public GenericRecord toAvro(Struct value, java.math.BigInteger version, boolean deleted, List<String> unchanged,
                                Struct lookupKey, java.math.BigInteger lookupVersion) {
        return toAvro(value, version, deleted, unchanged, lookupKey, lookupVersion, Map.of());
    }

    /**
     * As above; {@code nonFinite} holds the decimal values the source marked NaN, Infinity or -Infinity
     * ({@code tablecdc.nonfinite}; null in {@code value}), by column ({@code column} or {@code column[i]}): stored as
     * text in a column staged as text, else as NULL and counted in {@link #lastClamps()}.
     */
    public GenericRecord toAvro(Struct value, java.math.BigInteger version, boolean deleted, List<String> unchanged,
                                Struct lookupKey, java.math.BigInteger lookupVersion, Map<String, String> nonFinite) {
        clamps.clear();
        GenericData.Record out = new GenericData.Record(avroSchema);
        // a value of this layout's own schema is read by field position; another (a key projected for a delete, a
        // value rebuilt around non-finite decimals) by name
        boolean own = value != null && value.schema() == valueSchema;
        boolean anyUnchanged = !unchanged.isEmpty();
        int n = plans.length;
        for (int i = 0; i < n; i++) {
            ColumnPlan plan = plans[i];
            Object raw = value == null || anyUnchanged && unchanged.contains(plan.name()) ? null
                    : own ? value.get(plan.field()) : value.get(plan.name());
            if (plan.decimal()) {
                raw = decimalValue(plan, raw, deleted ? Map.of() : nonFinite);
            }
            out.put(i, avroValue(plan, raw, deleted));
        }
        out.put(n, ClickHouseTypes.versionAvroValue(version));
        out.put(n + 1, deleted ? 1 : 0);
        if (lookupKeys != null) {
            out.put(n + 2, List.copyOf(unchanged));
            Struct key = lookupKey == null ? value : lookupKey;
            for (int i = 0; i < lookupPlans.length; i++) {
                ColumnPlan plan = lookupPlans[i];
                Object raw = key == null || key.schema().field(plan.name()) == null ? null : key.get(plan.name());
                if (plan.decimalText()) {
                    raw = decimalValue(plan, raw, Map.of());
                }
                out.put(n + 3 + i, avroValue(plan, raw, true));
            }
            out.put(n + 3 + lookupPlans.length, ClickHouseTypes.versionAvroValue(lookupVersion));
        } else if (!unchanged.isEmpty()) {
            throw new IllegalStateException("table " + table + ": a row with unchanged columns needs the lookup layout");
        }
        return out;
    }

    /** The values of the last {@link #toAvro} row stored at the edge of ClickHouse's range (usually none). */
    public List<Clamp> lastClamps() {
        return List.copyOf(clamps);
    }

    private Object avroValue(ColumnPlan plan, Object raw, boolean deleted) {
        String column = plan.name();
        Schema schema = plan.staged();
        if (raw == null) {
            if (schema.type() == Schema.Type.ARRAY) {
                return List.of();
            }
            if (schema.isOptional()) {
                return null;
            }
            if (deleted) {
                return zeroValue(column, schema);
            }
            throw new TypeMappingException("table " + table + ", column " + column + ": null in a required column");
        }
        try {
            return convert(plan, raw);
        } catch (TypeMappingException e) {
            throw e;
        } catch (RuntimeException e) {
            throw new TypeMappingException("table " + table + ", column " + column + ": cannot stage value of "
                    + raw.getClass().getSimpleName() + " as " + describe(schema) + ": " + e.getMessage(), e);
        }
    }

    private Object convert(ColumnPlan plan, Object raw) {
        String column = plan.name();
        switch (plan.kind()) {
            case DECIMAL: {
                BigDecimal decimal = ((BigDecimal) raw).setScale(plan.scale(), RoundingMode.UNNECESSARY);
                if (decimal.precision() > plan.precision()) {
                    throw new TypeMappingException("table " + table + ", column " + column + ": " + decimal
                            + " has more than " + plan.precision() + " digits, more than the column's Decimal(" + plan.precision()
                            + ", " + plan.scale() + ") holds; list the column in " + DECIMAL_TEXT_COLUMNS
                            + " to keep such values exact as text");
                }
                return ByteBuffer.wrap(decimal.unscaledValue().toByteArray());
            }
            case DATE: {
                long day = Math.floorDiv(((java.util.Date) raw).getTime(), 86_400_000L);
                return (int) (plan.integer() ? day
                        : clamp(column, day, ClickHouseTypes.DATE32_MIN_DAY, ClickHouseTypes.DATE32_MAX_DAY, false));
            }
            case TIME:
                return ((java.util.Date) raw).getTime() * 1000L;
            case TIMESTAMP: {
                long micros = raw instanceof java.util.Date date ? Math.multiplyExact(date.getTime(), 1000L) : (Long) raw;
                return plan.integer() ? micros
                        : clamp(column, micros, ClickHouseTypes.DATETIME64_MIN_MICROS, ClickHouseTypes.DATETIME64_MAX_MICROS, true);
            }
            case SMALL_INT:
                return ((Number) raw).intValue();
            case INT32:
                return (Integer) raw;
            case INT64:
                return (Long) raw;
            case FLOAT32:
                return (Float) raw;
            case FLOAT64:
                return (Double) raw;
            case BOOLEAN:
                return (Boolean) raw;
            case STRING:
                return (String) raw;
            case UUID:
                return java.util.UUID.fromString((String) raw).toString();
            case BYTES:
                return raw instanceof byte[] bytes ? ByteBuffer.wrap(bytes) : (ByteBuffer) raw;
            case ARRAY: {
                List<?> items = (List<?>) raw;
                List<Object> out = new ArrayList<>(items.size());
                for (Object item : items) {
                    out.add(item == null ? null : convert(plan.element(), item));
                }
                return out;
            }
            case JSON:
                return JsonColumn.of(plan.staged(), raw);
            default:
                throw new TypeMappingException("table " + table + ", column " + column + ": unsupported type "
                        + describe(plan.staged()));
        }
    }

    /** {@code value} within {@code [min, max]}: an edge is recorded as a clamp, and refused in a key column. */
    private long clamp(String column, long value, long min, long max, boolean micros) {
        if (value >= min && value <= max) {
            return value;
        }
        long edge = value < min ? min : max;
        String shown = temporalText(value, micros);
        if (keyColumns.contains(column)) {
            throw new TypeMappingException("table " + table + ", key column " + column + ": " + shown + " is outside ClickHouse's "
                    + (micros ? "DateTime64" : "Date32") + " range (" + temporalText(min, micros) + " to " + temporalText(max, micros)
                    + "); stored at the edge it would merge rows; list the column in " + TEMPORAL_INTEGER_COLUMNS + " to keep it exact");
        }
        clamps.add(new Clamp(column, shown, temporalText(edge, micros)));
        return edge;
    }

    /** A day or a microsecond instant as ISO 8601 text; the extremes a source uses for infinity as {@code ±infinity}. */
    static String temporalText(long value, boolean micros) {
        if (micros ? value == Long.MAX_VALUE : value == Integer.MAX_VALUE) {
            return "infinity";
        }
        if (micros ? value == Long.MIN_VALUE : value == Integer.MIN_VALUE) {
            return "-infinity";
        }
        if (!micros) {
            return java.time.LocalDate.ofEpochDay(value).toString();
        }
        return java.time.Instant.ofEpochSecond(Math.floorDiv(value, 1_000_000L), Math.floorMod(value, 1_000_000L) * 1000L).toString();
    }

    private Object zeroValue(String column, Schema schema) {
        if (Decimal.LOGICAL_NAME.equals(schema.name())) {
            return ByteBuffer.wrap(new byte[] {0});
        }
        return switch (schema.type()) {
            case INT8, INT16, INT32 -> 0;
            case INT64 -> 0L;
            case FLOAT32 -> 0f;
            case FLOAT64 -> 0d;
            case BOOLEAN -> false;
            case STRING -> TablecdcTypes.is(schema, TablecdcTypes.UUID) ? new java.util.UUID(0, 0).toString() : "";
            case BYTES -> ByteBuffer.allocate(0);
            case ARRAY -> List.of();
            case MAP, STRUCT -> "{}";
            default -> throw new TypeMappingException("table " + table + ", column " + column + ": unsupported type " + describe(schema));
        };
    }

    static int precision(Schema decimalSchema) {
        Map<String, String> parameters = decimalSchema.parameters();
        String precision = parameters == null ? null : parameters.get(PRECISION_PARAMETER);
        return precision == null ? DEFAULT_DECIMAL_PRECISION : Integer.parseInt(precision);
    }

    static org.apache.avro.Schema avroType(String table, String column, Schema schema, boolean integerTemporal) {
        String name = schema.name();
        if (Decimal.LOGICAL_NAME.equals(name)) {
            int scale = Integer.parseInt(schema.parameters().get(Decimal.SCALE_FIELD));
            int precision = precision(schema);
            if (precision > MAX_DECIMAL_PRECISION || scale > precision || scale < 0) {
                throw new TypeMappingException("table " + table + ", column " + column + ": decimal(" + precision + ","
                        + scale + ") does not fit ClickHouse's Decimal (precision up to " + MAX_DECIMAL_PRECISION + ")");
            }
            return LogicalTypes.decimal(precision, scale).addToSchema(org.apache.avro.Schema.create(org.apache.avro.Schema.Type.BYTES));
        }
        if (Date.LOGICAL_NAME.equals(name)) {
            return integerTemporal ? org.apache.avro.Schema.create(org.apache.avro.Schema.Type.INT)
                    : LogicalTypes.date().addToSchema(org.apache.avro.Schema.create(org.apache.avro.Schema.Type.INT));
        }
        if (Timestamp.LOGICAL_NAME.equals(name) || TablecdcTypes.is(schema, TablecdcTypes.MICRO_TIMESTAMP)) {
            return integerTemporal ? org.apache.avro.Schema.create(org.apache.avro.Schema.Type.LONG) : LogicalTypes.timestampMicros().addToSchema(org.apache.avro.Schema.create(org.apache.avro.Schema.Type.LONG));
        }
        if (Time.LOGICAL_NAME.equals(name) || TablecdcTypes.is(schema, TablecdcTypes.MICRO_TIME)) {
            return org.apache.avro.Schema.create(org.apache.avro.Schema.Type.LONG);
        }
        if (TablecdcTypes.is(schema, TablecdcTypes.UUID)) {
            return LogicalTypes.uuid().addToSchema(org.apache.avro.Schema.create(org.apache.avro.Schema.Type.STRING));
        }
        return switch (schema.type()) {
            case INT8, INT16, INT32 -> org.apache.avro.Schema.create(org.apache.avro.Schema.Type.INT);
            case INT64 -> org.apache.avro.Schema.create(org.apache.avro.Schema.Type.LONG);
            case FLOAT32 -> org.apache.avro.Schema.create(org.apache.avro.Schema.Type.FLOAT);
            case FLOAT64 -> org.apache.avro.Schema.create(org.apache.avro.Schema.Type.DOUBLE);
            case BOOLEAN -> org.apache.avro.Schema.create(org.apache.avro.Schema.Type.BOOLEAN);
            case STRING, MAP, STRUCT -> org.apache.avro.Schema.create(org.apache.avro.Schema.Type.STRING);
            case BYTES -> org.apache.avro.Schema.create(org.apache.avro.Schema.Type.BYTES);
            case ARRAY -> {
                Schema element = schema.valueSchema();
                if (element.type() == Schema.Type.ARRAY) {
                    throw new TypeMappingException("table " + table + ", column " + column + ": arrays of arrays are not supported");
                }
                org.apache.avro.Schema item = avroType(table, column, element, integerTemporal);
                if (element.isOptional()) {
                    item = org.apache.avro.Schema.createUnion(org.apache.avro.Schema.create(org.apache.avro.Schema.Type.NULL), item);
                }
                yield org.apache.avro.Schema.createArray(item);
            }
        };
    }

    private static String avroName(Field field, Set<String> used) {
        String name = field.name();
        if (!AVRO_NAME.matcher(name).matches() || used.contains(name)) {
            name = "_c" + field.index() + "_" + name.replaceAll("[^A-Za-z0-9_]", "_");
        }
        used.add(name);
        return name;
    }

    private static String avroRecordName(String table) {
        String name = table.replaceAll("[^A-Za-z0-9_]", "_");
        return AVRO_NAME.matcher(name).matches() ? name : "_" + name;
    }

    static String describe(Schema schema) {
        return schema.name() == null ? schema.type().toString() : schema.type() + " (" + schema.name() + ")";
    }

    /** MAP and STRUCT values become JSON text; bytes inside them are base64. */
    static final class JsonColumn {
        private JsonColumn() {
        }

        static String of(Schema schema, Object value) {
            StringBuilder out = new StringBuilder();
            write(out, schema, value);
            return out.toString();
        }

        private static void write(StringBuilder out, Schema schema, Object value) {
            if (value == null) {
                out.append("null");
                return;
            }
            if (value instanceof BigDecimal decimal) {
                out.append(decimal.toPlainString());
                return;
            }
            switch (schema.type()) {
                case STRUCT -> {
                    Struct struct = (Struct) value;
                    out.append('{');
                    boolean first = true;
                    for (Field f : schema.fields()) {
                        if (!first) {
                            out.append(',');
                        }
                        first = false;
                        io.tablecdc.common.JsonText.appendString(out, f.name());
                        out.append(':');
                        write(out, f.schema(), struct.get(f));
                    }
                    out.append('}');
                }
                case MAP -> {
                    out.append('{');
                    boolean first = true;
                    for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                        if (!first) {
                            out.append(',');
                        }
                        first = false;
                        io.tablecdc.common.JsonText.appendString(out, String.valueOf(e.getKey()));
                        out.append(':');
                        write(out, schema.valueSchema(), e.getValue());
                    }
                    out.append('}');
                }
                case ARRAY -> {
                    out.append('[');
                    boolean first = true;
                    for (Object item : (List<?>) value) {
                        if (!first) {
                            out.append(',');
                        }
                        first = false;
                        write(out, schema.valueSchema(), item);
                    }
                    out.append(']');
                }
                case BYTES -> io.tablecdc.common.JsonText.appendString(out, Base64.getEncoder().encodeToString(
                        value instanceof byte[] b ? b : toArray((ByteBuffer) value)));
                case STRING -> io.tablecdc.common.JsonText.appendString(out, value.toString());
                case BOOLEAN, INT8, INT16, INT32, INT64, FLOAT32, FLOAT64 -> {
                    if (value instanceof java.util.Date d) {
                        io.tablecdc.common.JsonText.appendString(out, d.toInstant().toString());
                    } else if (value instanceof Double d && (d.isNaN() || d.isInfinite())
                            || value instanceof Float f && (f.isNaN() || f.isInfinite())) {
                        io.tablecdc.common.JsonText.appendString(out, value.toString());
                    } else {
                        out.append(value);
                    }
                }
                default -> io.tablecdc.common.JsonText.appendString(out, value.toString());
            }
        }

        private static byte[] toArray(ByteBuffer buffer) {
            byte[] bytes = new byte[buffer.remaining()];
            buffer.duplicate().get(bytes);
            return bytes;
        }

    }
}
