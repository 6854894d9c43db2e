package io.tablecdc.clickhouse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.sink.SinkRecord;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import io.tablecdc.common.RecordHeaders.Op;
import io.tablecdc.common.catalog.RowCounts;

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
}
