package io.tablecdc.clickhouse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.avro.file.DataFileReader;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.sink.SinkRecord;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import io.tablecdc.clickhouse.schema.StageSchema;
import io.tablecdc.clickhouse.schema.TypeMappingException;
import io.tablecdc.common.RecordHeaders.Op;
import io.tablecdc.catalog.RowCounts;

/** How a batch that starts with a truncate is held open and closed (the task decides where a truncate may go). */
class TableStagerTest {
    private static final Schema KEY = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("name", Schema.STRING_SCHEMA).build();
    private static final TopicPartition TP = new TopicPartition("pg.public.items", 0);

    @TempDir
    Path localDir;

    private TableStager stager() {
        return new TableStager(new TableKey("f", "public.items", "public_items"), localDir, "null", 1 << 20);
    }

    private static SinkRecord row(long id, long offset) {
        return new SinkRecord(TP.topic(), TP.partition(), KEY, new Struct(KEY).put("id", id), VALUE,
                new Struct(VALUE).put("id", id).put("name", "n" + id), offset);
    }

    private static SinkRecord truncateRecord(long offset) {
        return new SinkRecord(TP.topic(), TP.partition(), null, null, null, null, offset);
    }

    @Test
    void aBatchThatIsOnlyATruncateIsOpenWithoutAFileAndClosesWithNoPart() throws Exception {
        TableStager stager = stager();
        stager.truncate(truncateRecord(40), 3, 1_000);
        assertTrue(stager.open(), "a truncate opens its batch, or preCommit would commit past it before it is staged");
        assertFalse(stager.hasRows());
        assertEquals(3, stager.batchId());
        assertEquals(40L, stager.firstOffset(TP));

        TableStager.ClosedBatch closed = stager.close();
        assertTrue(closed.truncateBefore());
        assertEquals(0, closed.parts().size());
        assertEquals(0, closed.rows());
        assertEquals(RowCounts.ZERO, closed.counts());
        assertEquals(Map.of(TP, 40L), closed.firstOffsets());
        assertFalse(stager.open(), "the next batch starts clean");
        try (var files = Files.list(localDir)) {
            assertEquals(0, files.count(), "no local file for a truncate");
        }
    }

    @Test
    void rowsAfterTheTruncateJoinItsBatchAndTheNextBatchDoesNotInheritTheTruncate() throws Exception {
        TableStager stager = stager();
        stager.truncate(truncateRecord(50), 5, 1_000);
        stager.append(row(1, 51), 5, java.math.BigInteger.valueOf(10), Op.CREATE, 1_001);
        stager.append(row(2, 52), 5, java.math.BigInteger.valueOf(11), Op.UPDATE, 1_002);
        assertEquals(1_000, stager.openedAtMs(), "the batch opened with its truncate");
        TableStager.ClosedBatch closed = stager.close();
        assertTrue(closed.truncateBefore());
        assertEquals(5, closed.batchId());
        assertEquals(2, closed.rows());
        assertEquals(1, closed.parts().size());
        assertEquals(new RowCounts(1, 1, 0), closed.counts());
        assertEquals(50L, closed.firstOffsets().get(TP));

        stager.append(row(3, 53), 6, java.math.BigInteger.valueOf(12), Op.CREATE, 1_003);
        TableStager.ClosedBatch next = stager.close();
        assertFalse(next.truncateBefore());
        assertEquals(6, next.batchId());
    }

    @Test
    void aSecondTruncateAtTheStartOfABatchChangesNothingButOneAfterRowsIsRefused() throws Exception {
        TableStager stager = stager();
        stager.truncate(truncateRecord(60), 7, 1_000);
        stager.truncate(truncateRecord(61), 7, 2_000);
        assertEquals(60L, stager.firstOffset(TP));
        assertEquals(1_000, stager.openedAtMs());
        stager.append(row(1, 62), 7, java.math.BigInteger.valueOf(1), Op.CREATE, 2_001);
        assertThrows(IllegalStateException.class, () -> stager.truncate(truncateRecord(63), 7, 2_002));
        stager.abandon();
        assertFalse(stager.open());
    }

    private static final Schema DOC = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA)
            .field("n", Schema.OPTIONAL_INT32_SCHEMA).field("big", Schema.OPTIONAL_STRING_SCHEMA).build();

    private static SinkRecord doc(long id, Integer n, String big, long offset) {
        return new SinkRecord(TP.topic(), TP.partition(), KEY, new Struct(KEY).put("id", id), DOC,
                new Struct(DOC).put("id", id).put("n", n).put("big", big), offset);
    }

    private static List<GenericRecord> read(TableStager.ClosedBatch closed) throws Exception {
        List<GenericRecord> rows = new ArrayList<>();
        for (var part : closed.parts()) {
            try (DataFileReader<GenericRecord> reader = new DataFileReader<>(part.file().toFile(), new GenericDatumReader<>())) {
                reader.forEach(rows::add);
            }
        }
        return rows;
    }

    @Test
    void unchangedValuesCarryTheRowVersionTheyAreKeptFromAndTheBatchSwitchesToTheLookupLayoutOnce() throws Exception {
        TableStager stager = stager();
        stager.append(doc(1, 1, "B", 1), 9, java.math.BigInteger.valueOf(100), Op.CREATE, 1_000);
        // row 2's value is not in the batch: kept from its own version below 110
        stager.append(doc(2, 5, null, 2), 9, java.math.BigInteger.valueOf(110), Op.UPDATE, List.of("big"), false, 1_001);
        stager.append(doc(3, 1, "C", 3), 9, java.math.BigInteger.valueOf(120), Op.CREATE, 1_002);
        // row 2 again: still from below 110 (its version 110 in this batch has no value either)
        stager.append(doc(2, 6, null, 4), 9, java.math.BigInteger.valueOf(130), Op.UPDATE, List.of("big"), false, 1_003);
        // row 4 moves to key 40: kept from row 4 below the delete's version
        stager.append(doc(4, null, null, 5), 9, java.math.BigInteger.valueOf(140), Op.DELETE, 1_004);
        stager.append(doc(40, 1, null, 6), 9, java.math.BigInteger.valueOf(141), Op.UPDATE, List.of("big"), true, 1_005);
        stager.append(doc(40, 2, null, 7), 9, java.math.BigInteger.valueOf(150), Op.UPDATE, List.of("big"), false, 1_006);
        TableStager.ClosedBatch closed = stager.close();
        assertEquals(2, closed.parts().size(), "one part before the first unchanged value, one after");
        List<GenericRecord> rows = read(closed);
        assertEquals(7, rows.size());
        assertEquals(null, rows.get(0).getSchema().getField(StageSchema.UNCHANGED_COLUMN));
        long[][] expected = {{2, 110}, {3, 120}, {2, 110}, {4, 140}, {4, 140}, {4, 140}};
        for (int i = 1; i < rows.size(); i++) {
            GenericRecord row = rows.get(i);
            assertEquals(expected[i - 1][0], row.get(StageSchema.LOOKUP_KEY_PREFIX + "0"), "row " + i);
            assertEquals(java.math.BigInteger.valueOf(expected[i - 1][1]),
                    io.tablecdc.clickhouse.schema.ClickHouseTypes.versionOf(row.get(StageSchema.LOOKUP_VERSION_COLUMN)), "row " + i);
        }
        assertEquals("[big]", rows.get(1).get(StageSchema.UNCHANGED_COLUMN).toString());
        assertEquals("[]", rows.get(2).get(StageSchema.UNCHANGED_COLUMN).toString());
        assertEquals("[]", rows.get(4).get(StageSchema.UNCHANGED_COLUMN).toString());
        assertEquals(null, rows.get(1).get("big"));
        // the aux fields are never columns of the final table
        assertEquals(List.of("id", "n", "big", StageSchema.VERSION_COLUMN, StageSchema.IS_DELETED_COLUMN),
                StageSchema.columnsOf(rows.get(1).getSchema()).stream().map(c -> c.column()).toList());
        assertEquals(3 + 0, StageSchema.lookupColumnsOf(rows.get(1).getSchema()).size());

        // the next batch starts without the lookup layout
        stager.append(doc(5, 1, "E", 8), 10, java.math.BigInteger.valueOf(200), Op.CREATE, 1_007);
        assertEquals(List.of(), StageSchema.lookupColumnsOf(read(stager.close()).get(0).getSchema()));
    }

    /**
     * A key-changing update takes its unchanged values from the old key deleted by the record right before it. When
     * that record (a delete) was refused, the delete before it is not the old key: the update is refused too, rather
     * than given another row's values.
     */
    @Test
    void aKeyChangingUpdateAfterARefusedDeleteIsRefusedNotBoundToAnEarlierDelete() throws Exception {
        TableStager stager = stager();
        stager.append(doc(4, null, null, 1), 9, java.math.BigInteger.valueOf(140), Op.DELETE, 1_000);
        // a delete with unchanged values: refused
        assertThrows(TypeMappingException.class,
                () -> stager.append(doc(7, null, null, 2), 9, java.math.BigInteger.valueOf(150), Op.DELETE, List.of("big"), false, 1_001));
        // row 7 moves to key 70: its old key's delete was refused, so no row can give its unchanged values
        var moved = assertThrows(TypeMappingException.class,
                () -> stager.append(doc(70, 1, null, 3), 9, java.math.BigInteger.valueOf(151), Op.UPDATE, List.of("big"), true, 1_002));
        assertTrue(moved.getMessage().contains("not the delete of the old key"), moved.getMessage());
    }

    @Test
    void unchangedValuesWhereNoRowVersionCanHoldThemAreRefusedNamingTheRecord() throws Exception {
        TableStager stager = stager();
        var insert = assertThrows(TypeMappingException.class,
                () -> stager.append(doc(1, 1, null, 1), 9, java.math.BigInteger.valueOf(100), Op.CREATE, List.of("big"), false, 1_000));
        assertTrue(insert.getMessage().contains("only an update"), insert.getMessage());
        var keyColumn = assertThrows(TypeMappingException.class,
                () -> stager.append(doc(1, 1, null, 2), 9, java.math.BigInteger.valueOf(100), Op.UPDATE, List.of("id"), false, 1_000));
        assertTrue(keyColumn.getMessage().contains("unchanged column id is a key column"), keyColumn.getMessage());
        var moved = assertThrows(TypeMappingException.class,
                () -> stager.append(doc(1, 1, null, 3), 9, java.math.BigInteger.valueOf(100), Op.UPDATE, List.of("big"), true, 1_000));
        assertTrue(moved.getMessage().contains("not the delete of the old key"), moved.getMessage());
        SinkRecord keyless = new SinkRecord(TP.topic(), TP.partition(), null, null, DOC,
                new Struct(DOC).put("id", 1L).put("n", 1), 4);
        var noKey = assertThrows(TypeMappingException.class,
                () -> stager.append(keyless, 9, java.math.BigInteger.valueOf(100), Op.UPDATE, List.of("big"), false, 1_000));
        assertTrue(noKey.getMessage().contains("no key"), noKey.getMessage());
        assertFalse(stager.hasRows(), "nothing was staged");
    }

    private static final Schema FLOATS = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA)
            .field("f", Schema.OPTIONAL_FLOAT64_SCHEMA).field("g", Schema.OPTIONAL_FLOAT32_SCHEMA)
            .field("a", SchemaBuilder.array(Schema.OPTIONAL_FLOAT64_SCHEMA).optional().build()).build();

    /**
     * What JsonConverter hands the sink for NaN / ±Infinity is 0; the tablecdc.nonfinite headers put the exact values
     * back into the staged row. A header naming no float of the value refuses the record, naming table, record and header.
     */
    @Test
    void nonFiniteFloatsNamedInTheHeaderArriveExactly() throws Exception {
        TableStager stager = stager();
        SinkRecord asJsonReadIt = new SinkRecord(TP.topic(), TP.partition(), KEY, new Struct(KEY).put("id", 1L), FLOATS,
                new Struct(FLOATS).put("id", 1L).put("f", 0.0).put("g", 0.0f).put("a", java.util.Arrays.asList(0.0, 2.5, null)), 1);
        stager.append(asJsonReadIt, 9, java.math.BigInteger.ONE, Op.CREATE, List.of(), false,
                List.of("f=-Infinity", "g=NaN", "a[0]=Infinity"), 1_000);
        var bad = assertThrows(TypeMappingException.class, () -> stager.append(asJsonReadIt, 9, java.math.BigInteger.TWO, Op.CREATE,
                List.of(), false, List.of("id=NaN"), 1_001));
        assertTrue(bad.getMessage().contains("public.items") && bad.getMessage().contains("@1")
                && bad.getMessage().contains("tablecdc.nonfinite 'id=NaN'"), bad.getMessage());
        List<GenericRecord> rows = read(stager.close());
        assertEquals(1, rows.size());
        assertEquals(Double.NEGATIVE_INFINITY, rows.get(0).get("f"));
        assertTrue(Float.isNaN((Float) rows.get(0).get("g")));
        assertEquals("[Infinity, 2.5, null]", rows.get(0).get("a").toString());
    }
}
