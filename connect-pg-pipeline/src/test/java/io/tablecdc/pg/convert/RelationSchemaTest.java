package io.tablecdc.pg.convert;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.Test;

import io.tablecdc.pg.wire.PgOutputMessage.Column;
import io.tablecdc.pg.wire.PgOutputMessage.OldTuple;
import io.tablecdc.pg.wire.PgOutputMessage.Relation;
import io.tablecdc.pg.wire.PgOutputMessage.ReplicaIdentity;
import io.tablecdc.pg.wire.TupleData;
import io.tablecdc.pg.wire.TupleValue;

class RelationSchemaTest {
    private static Relation relation(ReplicaIdentity identity, int idFlags, int bodyFlags) {
        return new Relation(16384, "public", "docs", identity, List.of(
                new Column(idFlags, "id", PgTypes.INT8, -1),
                new Column(0, "title", PgTypes.TEXT, -1),
                new Column(bodyFlags, "body", PgTypes.TEXT, -1)));
    }

    @Test
    void keyColumnsAreRequiredAndEveryOtherColumnOptionalBecausePgoutputDoesNotSendNullability() {
        RelationSchema schema = RelationSchema.of(relation(ReplicaIdentity.DEFAULT, 1, 0));
        assertEquals(List.of("id"), schema.keyColumns());
        assertFalse(schema.valueSchema().field("id").schema().isOptional());
        assertTrue(schema.valueSchema().field("title").schema().isOptional());
        assertEquals(1, schema.keySchema().fields().size());
        assertEquals(Schema.Type.INT64, schema.keySchema().field("id").schema().type());
        assertEquals(List.of("id", "title", "body"), schema.valueSchema().fields().stream().map(f -> f.name()).toList());
    }

    @Test
    void replicaIdentityFullDoesNotMakeEveryColumnAKey() {
        RelationSchema schema = RelationSchema.of(relation(ReplicaIdentity.FULL, 1, 1));
        assertNull(schema.keySchema());
        assertTrue(schema.valueSchema().field("title").schema().isOptional());
        RelationSchema withPrimaryKey = RelationSchema.of(relation(ReplicaIdentity.FULL, 1, 1), List.of("id"));
        assertEquals(List.of("id"), withPrimaryKey.keyColumns());
    }

    @Test
    void defaultIdentityOfATableWithoutPrimaryKeyHasNoKeyAndNoRequiredColumn() {
        RelationSchema schema = RelationSchema.of(relation(ReplicaIdentity.DEFAULT, 0, 0));
        assertNull(schema.keySchema());
        assertNull(schema.key(schema.row(TupleData.of(TupleValue.NULL, TupleValue.NULL, TupleValue.NULL)).value()));
        assertTrue(schema.valueSchema().fields().stream().allMatch(f -> f.schema().isOptional()));
    }

    @Test
    void replicaIdentityNothingHasNoKey() {
        assertNull(RelationSchema.of(relation(ReplicaIdentity.NOTHING, 0, 0)).keySchema());
    }

    @Test
    void keyNamingAMissingColumnFailsAtSchemaTimeNotAtTheFirstRow() {
        assertThrows(ConversionException.class, () -> RelationSchema.of(relation(ReplicaIdentity.FULL, 1, 1), List.of("nope")));
    }

    @Test
    void insertRowConvertsEveryColumnAndProjectsTheKey() {
        RelationSchema schema = RelationSchema.of(relation(ReplicaIdentity.DEFAULT, 1, 0));
        RelationSchema.Row row = schema.row(TupleData.of(TupleValue.text("7"), TupleValue.NULL, TupleValue.text("hello")));
        assertEquals(7L, row.value().get("id"));
        assertNull(row.value().get("title"));
        assertEquals("hello", row.value().get("body"));
        assertTrue(row.unchangedToastColumns().isEmpty());
        Struct key = schema.key(row.value());
        assertEquals(7L, key.get("id"));
        key.validate();
    }

    @Test
    void unchangedToastIsMarkedAndNeverPassedOffAsANull() {
        RelationSchema schema = RelationSchema.of(relation(ReplicaIdentity.DEFAULT, 1, 0));
        RelationSchema.Row row = schema.row(TupleData.of(TupleValue.text("7"), TupleValue.text("t"), TupleValue.UNCHANGED_TOAST));
        assertEquals(Set.of("body"), row.unchangedToastColumns());
        assertNull(row.value().get("body"));
    }

    @Test
    void unchangedToastIsTakenFromTheFullOldRowWhenTheServerSentIt() {
        RelationSchema schema = RelationSchema.of(relation(ReplicaIdentity.FULL, 1, 1), List.of("id"));
        OldTuple old = new OldTuple(true, TupleData.of(TupleValue.text("7"), TupleValue.text("old"), TupleValue.text("long body")));
        RelationSchema.Row row = schema.row(TupleData.of(TupleValue.text("7"), TupleValue.text("new"), TupleValue.UNCHANGED_TOAST), old);
        assertEquals("long body", row.value().get("body"));
        assertEquals("new", row.value().get("title"));
        assertTrue(row.unchangedToastColumns().isEmpty());
    }

    @Test
    void deleteByKeyHasOnlyTheKeyColumns() {
        RelationSchema schema = RelationSchema.of(relation(ReplicaIdentity.DEFAULT, 1, 0));
        RelationSchema.Row row = schema.row(TupleData.of(TupleValue.text("9"), TupleValue.NULL, TupleValue.NULL));
        assertEquals(9L, schema.key(row.value()).get("id"));
    }

    @Test
    void nullKeyColumnFailsNamingTableAndColumn() {
        RelationSchema schema = RelationSchema.of(relation(ReplicaIdentity.DEFAULT, 1, 0));
        ConversionException e = assertThrows(ConversionException.class,
                () -> schema.row(TupleData.of(TupleValue.NULL, TupleValue.NULL, TupleValue.NULL)));
        assertTrue(e.getMessage().contains("public.docs") && e.getMessage().contains("id"), e.getMessage());
    }

    @Test
    void badValueFailsNamingTableColumnTypeAndValue() {
        RelationSchema schema = RelationSchema.of(relation(ReplicaIdentity.DEFAULT, 1, 0));
        ConversionException e = assertThrows(ConversionException.class,
                () -> schema.row(TupleData.of(TupleValue.text("seven"), TupleValue.NULL, TupleValue.NULL)));
        assertTrue(e.getMessage().contains("column id") && e.getMessage().contains("'seven'") && e.getMessage().contains("oid 20"), e.getMessage());
    }

    @Test
    void tupleWithAnotherColumnCountThanTheRelationFails() {
        RelationSchema schema = RelationSchema.of(relation(ReplicaIdentity.DEFAULT, 1, 0));
        assertThrows(ConversionException.class, () -> schema.row(TupleData.of(TupleValue.text("1"))));
    }

    @Test
    void binaryTupleValuesFailWithAdviceInsteadOfBeingReadAsText() {
        RelationSchema schema = RelationSchema.of(relation(ReplicaIdentity.DEFAULT, 1, 0));
        ConversionException e = assertThrows(ConversionException.class, () -> schema.row(TupleData.of(
                TupleValue.text("1"), new TupleValue.Binary(new byte[] {1}), TupleValue.NULL)));
        assertTrue(e.getMessage().contains("binary"), e.getMessage());
    }

    /**
     * A numeric(p,s) NaN or ±Infinity, which a decimal cannot hold, is null in the value and marked for the
     * tablecdc.nonfinite header (also inside an array); a float keeps its value (the batcher marks it from the value).
     */
    @Test
    void numericNaNAndInfinityAreNullAndMarked() {
        int typmod = ((10 << 16) | 2) + 4;
        RelationSchema schema = RelationSchema.of(new Relation(16385, "public", "n", ReplicaIdentity.DEFAULT, List.of(
                new Column(1, "id", PgTypes.INT8, -1),
                new Column(0, "n", PgTypes.NUMERIC, typmod),
                new Column(0, "m", PgTypes.NUMERIC, typmod),
                new Column(0, "an", 1231, typmod),
                new Column(0, "f", PgTypes.FLOAT8, -1),
                new Column(0, "free", PgTypes.NUMERIC, -1))));
        RelationSchema.Row row = schema.row(TupleData.of(TupleValue.text("1"), TupleValue.text("NaN"), TupleValue.text("-Infinity"),
                TupleValue.text("{1.5,NaN,NULL,Infinity}"), TupleValue.text("NaN"), TupleValue.text("NaN")));
        assertNull(row.value().get("n"));
        assertNull(row.value().get("m"));
        assertEquals(java.util.Arrays.asList(new java.math.BigDecimal("1.50"), null, null, null), row.value().get("an"));
        assertTrue(Double.isNaN((Double) row.value().get("f")));
        assertEquals("NaN", row.value().get("free"), "unconstrained numeric is text and keeps NaN itself");
        assertEquals(List.of("n=NaN", "m=-Infinity", "an[1]=NaN", "an[3]=Infinity"), row.nonFinite());

        RelationSchema.Row plain = schema.row(TupleData.of(TupleValue.text("2"), TupleValue.text("1"), TupleValue.NULL,
                TupleValue.text("{NULL}"), TupleValue.text("0"), TupleValue.NULL));
        assertEquals(List.of(), plain.nonFinite(), "SQL NULL is not marked");
    }

    /**
     * A multi-dimensional array value stops its table with an error naming table, column and array.text.columns;
     * listed there, the array column is the server's text and holds any number of dimensions.
     */
    @Test
    void multiDimensionalArraysFailNamingTheSettingOrArriveAsTextWhenListed() {
        Relation relation = new Relation(16386, "public", "grid", ReplicaIdentity.DEFAULT, List.of(
                new Column(1, "id", PgTypes.INT8, -1),
                new Column(0, "cells", 1007, -1),
                new Column(0, "tags", 1009, -1)));
        TupleData tuple = TupleData.of(TupleValue.text("1"), TupleValue.text("{{1,2},{3,NULL}}"), TupleValue.text("{a,\"b c\"}"));
        ConversionException e = assertThrows(ConversionException.class, () -> RelationSchema.of(relation).row(tuple));
        assertTrue(e.getMessage().contains("table public.grid, column cells") && e.getMessage().contains("array.text.columns"),
                e.getMessage());

        RelationSchema text = RelationSchema.of(relation, List.of("id"), (table, column) -> table.equals("public.grid")
                && column.equals("cells"));
        assertEquals(Schema.Type.STRING, text.valueSchema().field("cells").schema().type());
        assertEquals(Schema.Type.ARRAY, text.valueSchema().field("tags").schema().type(), "only the listed column");
        RelationSchema.Row row = text.row(tuple);
        assertEquals("{{1,2},{3,NULL}}", row.value().get("cells"));
        assertEquals(List.of("a", "b c"), row.value().get("tags"));
        // a listed column that is not an array keeps its type
        RelationSchema all = RelationSchema.of(relation, List.of("id"), (table, column) -> true);
        assertEquals(Schema.Type.INT64, all.valueSchema().field("id").schema().type());
        assertEquals(Schema.Type.STRING, all.valueSchema().field("tags").schema().type());
    }
}
