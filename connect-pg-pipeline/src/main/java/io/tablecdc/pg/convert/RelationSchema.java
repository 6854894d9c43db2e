package io.tablecdc.pg.convert;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;

import io.tablecdc.pg.wire.PgOutputMessage.Column;
import io.tablecdc.pg.wire.PgOutputMessage.OldTuple;
import io.tablecdc.pg.wire.PgOutputMessage.Relation;
import io.tablecdc.pg.wire.PgOutputMessage.ReplicaIdentity;
import io.tablecdc.pg.wire.TupleData;
import io.tablecdc.pg.wire.TupleValue;

/**
 * The Connect key and value schemas of one {@link Relation}, and the conversion of its row images.
 *
 * <p>pgoutput does not say whether a column is nullable, so every value field is optional except the key
 * columns. The key is the replica identity when it is the primary key or an index; under
 * {@code REPLICA IDENTITY FULL} every column is flagged on the wire and under {@code NOTHING} none is, so
 * for those the caller passes the primary key it read from the catalog (or none).
 */
public final class RelationSchema {
    private final Relation relation;
    private final List<String> keyColumns;
    private final Schema keySchema;
    private final Schema valueSchema;
    private final List<ColumnConverter> converters;

    private RelationSchema(Relation relation, List<String> keyColumns, Schema keySchema, Schema valueSchema,
                           List<ColumnConverter> converters) {
        this.relation = relation;
        this.keyColumns = keyColumns;
        this.keySchema = keySchema;
        this.valueSchema = valueSchema;
        this.converters = converters;
    }

    /**
     * Schemas keyed by the replica identity columns the Relation flags; no key under
     * {@link ReplicaIdentity#FULL} (all flagged) or {@link ReplicaIdentity#NOTHING} (none).
     */
    public static RelationSchema of(Relation relation) {
        boolean flagsAreAKey = relation.replicaIdentity() == ReplicaIdentity.DEFAULT
                || relation.replicaIdentity() == ReplicaIdentity.INDEX;
        List<String> key = flagsAreAKey ? relation.keyColumns().stream().map(Column::name).toList() : List.of();
        return of(relation, key);
    }

    /**
     * Schemas keyed by {@code keyColumns} (in that order; empty for a table without a key).
     *
     * @throws ConversionException when a key column is not a column of the relation
     */
    public static RelationSchema of(Relation relation, List<String> keyColumns) {
        return of(relation, keyColumns, (table, column) -> false);
    }

    /** The array columns carried as the server's array text ({@code array.text.columns}), by table and column. */
    public interface TextArrays {
        boolean test(String table, String column);
    }

    /**
     * As {@link #of(Relation, List)}, with the array columns {@code textArrays} names as STRING: the server's array
     * text, which any number of dimensions keeps.
     *
     * @throws ConversionException when a key column is not a column of the relation
     */
    public static RelationSchema of(Relation relation, List<String> keyColumns, TextArrays textArrays) {
        Set<String> keys = new LinkedHashSet<>(keyColumns);
        SchemaBuilder value = SchemaBuilder.struct();
        List<ColumnConverter> converters = new ArrayList<>();
        for (Column column : relation.columns()) {
            boolean text = PgTypes.arrayElement(column.typeOid()) >= 0 && textArrays.test(relation.qualifiedName(), column.name());
            ColumnConverter converter = text ? ValueConverter.text(!keys.contains(column.name()))
                    : ValueConverter.forType(column.typeOid(), column.typeModifier(), !keys.contains(column.name()));
            converters.add(converter);
            value.field(column.name(), converter.schema());
        }
        Schema valueSchema = value.build();
        Schema keySchema = null;
        if (!keys.isEmpty()) {
            SchemaBuilder key = SchemaBuilder.struct();
            for (String name : keys) {
                if (valueSchema.field(name) == null) {
                    throw new ConversionException("table " + relation.qualifiedName() + ": key column " + name
                            + " is not among its columns " + relation.columns().stream().map(Column::name).toList());
                }
                key.field(name, valueSchema.field(name).schema());
            }
            keySchema = key.build();
        }
        return new RelationSchema(relation, List.copyOf(keys), keySchema, valueSchema, List.copyOf(converters));
    }

    public Relation relation() {
        return relation;
    }

    public List<String> keyColumns() {
        return keyColumns;
    }

    /** The key schema, or null when the table has no key. */
    public Schema keySchema() {
        return keySchema;
    }

    public Schema valueSchema() {
        return valueSchema;
    }

    /**
     * A row image with its unchanged TOAST columns: they are null in {@link #value()} but mean "keep the
     * previous value", never "set to null"; and the {@code tablecdc.nonfinite} marks of its numeric {@code NaN} and
     * {@code ±Infinity} values, which a decimal cannot hold and are null in {@link #value()} ({@code column=NaN},
     * {@code column[i]=Infinity} for an array element).
     */
    public record Row(Struct value, Set<String> unchangedToastColumns, List<String> nonFinite) {
        public Row {
            unchangedToastColumns = Collections.unmodifiableSet(new LinkedHashSet<>(unchangedToastColumns));
            nonFinite = List.copyOf(nonFinite);
        }

        public Row(Struct value, Set<String> unchangedToastColumns) {
            this(value, unchangedToastColumns, List.of());
        }
    }

    /** The row image {@code tuple} (an Insert's new tuple, or a Delete's old key or old row). */
    public Row row(TupleData tuple) {
        return row(tuple, null);
    }

    /**
     * The row image {@code tuple}, taking each unchanged TOAST column from {@code old} when the old tuple
     * carries its value (replica identity full, or an old key that carries that column).
     *
     * @throws ConversionException naming the table, column and value when a value does not convert, a key
     *     column is null or unchanged without an old value, or the tuple does not match the relation
     */
    public Row row(TupleData tuple, OldTuple old) {
        List<Column> columns = relation.columns();
        if (tuple.size() != columns.size()) {
            throw new ConversionException("table " + relation.qualifiedName() + ": a row image has " + tuple.size()
                    + " columns but the relation has " + columns.size());
        }
        Struct value = new Struct(valueSchema);
        // the value schema's fields are the relation's columns, in order
        List<org.apache.kafka.connect.data.Field> fields = valueSchema.fields();
        Set<String> unchanged = new LinkedHashSet<>();
        List<String> nonFinite = null;
        for (int i = 0; i < columns.size(); i++) {
            Column column = columns.get(i);
            org.apache.kafka.connect.data.Field field = fields.get(i);
            TupleValue raw = tuple.get(i);
            if (raw instanceof TupleValue.UnchangedToast && old != null && old.tuple().size() == columns.size()
                    && old.tuple().get(i) instanceof TupleValue.Text) {
                raw = old.tuple().get(i);
            }
            Object converted;
            if (raw instanceof TupleValue.Text text) {
                converted = convert(i, column, text.value());
                nonFinite = nonFinite(column.name(), field.schema(), text.value(), converted, nonFinite);
            } else if (raw instanceof TupleValue.UnchangedToast) {
                unchanged.add(column.name());
                converted = null;
            } else if (raw instanceof TupleValue.Binary) {
                throw new ConversionException("table " + relation.qualifiedName() + ", column " + column.name()
                        + ": binary tuple values are not supported (start the slot without binary true)");
            } else {
                converted = null;
            }
            if (converted == null && !field.schema().isOptional()) {
                throw new ConversionException("table " + relation.qualifiedName() + ", key column " + column.name() + " is "
                        + (raw instanceof TupleValue.UnchangedToast ? "an unchanged TOAST value without an old value" : "null"));
            }
            value.put(field, converted);
        }
        return new Row(value, unchanged, nonFinite == null ? List.of() : nonFinite);
    }

    /**
     * {@code marks} with the marks of a decimal value (or of the elements of a decimal array) that arrived as text
     * but converted to null: numeric {@code NaN}, {@code Infinity} and {@code -Infinity}.
     */
    private static List<String> nonFinite(String column, Schema schema, String text, Object converted, List<String> marks) {
        if (isDecimal(schema) && converted == null) {
            marks = marks == null ? new ArrayList<>(2) : marks;
            marks.add(column + "=" + text);
        } else if (schema.type() == Schema.Type.ARRAY && isDecimal(schema.valueSchema()) && converted instanceof List<?> list
                && list.contains(null)) {
            List<String> texts = PgText.arrayElements(text);
            for (int i = 0; i < list.size(); i++) {
                if (list.get(i) == null && texts.get(i) != null) {
                    marks = marks == null ? new ArrayList<>(2) : marks;
                    marks.add(column + "[" + i + "]=" + texts.get(i));
                }
            }
        }
        return marks;
    }

    private static boolean isDecimal(Schema schema) {
        return org.apache.kafka.connect.data.Decimal.LOGICAL_NAME.equals(schema.name());
    }

    /** The key of a row value, or null when the table has no key. */
    public Struct key(Struct value) {
        if (keySchema == null) {
            return null;
        }
        Struct key = new Struct(keySchema);
        for (String column : keyColumns) {
            key.put(column, value.get(column));
        }
        return key;
    }

    private Object convert(int index, Column column, String text) {
        try {
            return converters.get(index).convert(text);
        } catch (RuntimeException e) {
            String shown = text.length() > 200 ? text.substring(0, 200) + "…" : text;
            throw new ConversionException("table " + relation.qualifiedName() + ", column " + column.name() + " (type oid "
                    + column.typeOid() + ", typmod " + column.typeModifier() + "): cannot convert '" + shown + "': " + e.getMessage(), e);
        }
    }
}
