package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;
import org.junit.jupiter.api.Test;

import io.tablecdc.common.RecordHeaders;
import io.tablecdc.common.RecordHeaders.Op;
import io.tablecdc.pg.wire.Lsn;

class ChangeBatcherTest {
    private static final Schema KEY = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA)
            .field("name", Schema.OPTIONAL_STRING_SCHEMA).build();
    private static final Instant T = Instant.parse("2026-01-02T03:04:05Z");

    private final Map<String, Long> lastIds = new HashMap<>(Map.of("s.a", 7L));

    private ChangeBatcher batcher(int batchRows) {
        return new ChangeBatcher("f", "slot_1", "__hb", batchRows, t -> "pg." + t, t -> lastIds.getOrDefault(t, 0L),
                Lsn.parse("0/100"));
    }

    private static ChangeBatcher.Change change(String table, Op op, long id) {
        Struct value = new Struct(VALUE).put("id", id).put("name", "n" + id);
        return new ChangeBatcher.Change(table, op, KEY, new Struct(KEY).put("id", id), VALUE, value);
    }

    private static String header(SourceRecord r, String key) {
        return RecordHeaders.text(r.headers(), key);
    }

    @Test
    void aTransactionMakesOneBatchPerTableWithTheLastRecordMarked() {
        ChangeBatcher b = batcher(100);
        b.begin(Lsn.parse("0/200"), T, T);
        List<SourceRecord> out = new ArrayList<>();
        out.addAll(b.add(change("s.a", Op.CREATE, 1)));
        out.addAll(b.add(change("s.b", Op.CREATE, 1)));
        out.addAll(b.add(change("s.a", Op.UPDATE, 1)));
        assertTrue(out.isEmpty(), "nothing leaves before the slice closes");
        out.addAll(b.commit(Lsn.parse("0/250")));
        assertEquals(3, out.size());
        // table a: ids continue after the given last id; records in change order
        assertEquals("pg.s.a", out.get(0).topic());
        assertEquals("8", header(out.get(0), RecordHeaders.BATCH));
        assertNull(header(out.get(0), RecordHeaders.BATCH_LAST));
        assertEquals("u", header(out.get(1), RecordHeaders.OP));
        assertEquals("true", header(out.get(1), RecordHeaders.BATCH_LAST));
        assertEquals("pg.s.b", out.get(2).topic());
        assertEquals("1", header(out.get(2), RecordHeaders.BATCH));
        assertEquals("true", header(out.get(2), RecordHeaders.BATCH_LAST));
        assertEquals("f", header(out.get(2), RecordHeaders.FLOW));
        assertEquals("s.b", header(out.get(2), RecordHeaders.TABLE));
        // versions: commit LSN, ordinal per table within the transaction
        assertEquals(ChangeVersion.of(Lsn.parse("0/200"), 1), Long.parseLong(header(out.get(0), RecordHeaders.VERSION)));
        assertEquals(ChangeVersion.of(Lsn.parse("0/200"), 2), Long.parseLong(header(out.get(1), RecordHeaders.VERSION)));
        assertEquals(ChangeVersion.of(Lsn.parse("0/200"), 1), Long.parseLong(header(out.get(2), RecordHeaders.VERSION)));
        // offsets: per table, batch id and commit LSN
        assertEquals(Map.of("flow", "f", "table", "s.a"), out.get(0).sourcePartition());
        assertEquals(Map.of("batch", 8L, "lsn", "0/200"), out.get(0).sourceOffset());
        assertEquals(new Struct(KEY).put("id", 1L), out.get(0).key());
    }

    @Test
    void batchRowsCutsATablesSliceAndIdsKeepGrowing() {
        ChangeBatcher b = batcher(2);
        b.begin(Lsn.parse("0/200"), T, T);
        List<SourceRecord> out = new ArrayList<>();
        out.addAll(b.add(change("s.b", Op.CREATE, 1)));
        out.addAll(b.add(change("s.b", Op.CREATE, 2)));
        assertEquals(2, out.size(), "the table reached batch.rows");
        out.addAll(b.add(change("s.b", Op.CREATE, 3)));
        out.addAll(b.commit(Lsn.parse("0/250")));
        b.begin(Lsn.parse("0/300"), T, T);
        out.addAll(b.add(change("s.b", Op.DELETE, 3)));
        out.addAll(b.commit(Lsn.parse("0/350")));
        List<String> batches = out.stream().map(r -> header(r, RecordHeaders.BATCH)).toList();
        List<String> lasts = out.stream().map(r -> String.valueOf(header(r, RecordHeaders.BATCH_LAST))).toList();
        assertEquals(List.of("1", "1", "2", "3"), batches);
        assertEquals(List.of("null", "true", "true", "true"), lasts);
        // the ordinal goes on across a cut: the third change of the transaction orders after the second
        assertTrue(Long.parseLong(header(out.get(2), RecordHeaders.VERSION)) > Long.parseLong(header(out.get(1), RecordHeaders.VERSION)));
        assertTrue(Long.parseLong(header(out.get(3), RecordHeaders.VERSION)) > Long.parseLong(header(out.get(2), RecordHeaders.VERSION)));
    }

    @Test
    void anEmptyTransactionMakesNoRecordsButMovesThePosition() {
        ChangeBatcher b = batcher(10);
        b.begin(Lsn.parse("0/200"), T, T);
        assertTrue(b.commit(Lsn.parse("0/250")).isEmpty());
        assertEquals(Lsn.parse("0/250"), b.safePosition());
    }

    /**
     * Kafka may acknowledge a later table's records first: the position must wait for every record before it,
     * or a restart would skip the unacknowledged ones.
     */
    @Test
    void thePositionWaitsForEveryEarlierRecord() {
        ChangeBatcher b = batcher(10);
        b.begin(Lsn.parse("0/200"), T, T);
        b.add(change("s.a", Op.CREATE, 1));
        List<SourceRecord> first = b.commit(Lsn.parse("0/250"));
        b.begin(Lsn.parse("0/300"), T, T);
        b.add(change("s.b", Op.CREATE, 1));
        List<SourceRecord> second = b.commit(Lsn.parse("0/350"));
        assertEquals(Lsn.parse("0/100"), b.safePosition());
        b.acknowledged(second.get(0));
        assertEquals(Lsn.parse("0/100"), b.safePosition(), "the first transaction is still in flight");
        b.idle(Lsn.parse("0/400"));
        assertEquals(Lsn.parse("0/100"), b.safePosition(), "idle positions queue behind it too");
        b.acknowledged(first.get(0));
        assertEquals(Lsn.parse("0/400"), b.safePosition());
        List<ChangeBatcher.Synced> synced = b.drainSynced();
        assertEquals(List.of("s.b", "s.a"), synced.stream().map(ChangeBatcher.Synced::table).toList());
        assertEquals("0/200", synced.get(1).batch().cursor());
        assertEquals(8, synced.get(1).batch().batchId());
        assertEquals(1, synced.get(1).batch().rows());
        assertTrue(b.drainSynced().isEmpty());
    }

    @Test
    void positionRecordsCarryTheSlotPartitionAndCountOnlyOnceAcknowledged() {
        ChangeBatcher b = batcher(10);
        SourceRecord position = b.positionRecord(Lsn.parse("0/180"));
        assertEquals(Map.of("flow", "f", "slot", "slot_1"), position.sourcePartition());
        assertEquals(Map.of("lsn", "0/180"), position.sourceOffset());
        assertEquals("__hb", position.topic());
        assertEquals(Lsn.parse("0/100"), b.acknowledgedPosition());
        b.acknowledged(position);
        assertEquals(Lsn.parse("0/180"), b.acknowledgedPosition());
    }

    /** After the stream breaks mid-transaction, that transaction is read again: its end must not become safe. */
    @Test
    void anAbortedTransactionNeverMovesThePosition() {
        ChangeBatcher b = batcher(1);
        b.begin(Lsn.parse("0/200"), T, T);
        List<SourceRecord> cut = b.add(change("s.a", Op.CREATE, 1));
        b.abort();
        b.acknowledged(cut.get(0));
        assertEquals(Lsn.parse("0/100"), b.safePosition());
        b.begin(Lsn.parse("0/200"), T, T);
        List<SourceRecord> again = new ArrayList<>(b.add(change("s.a", Op.CREATE, 1)));
        again.addAll(b.commit(Lsn.parse("0/250")));
        assertEquals("9", header(again.get(0), RecordHeaders.BATCH), "the replay takes a new batch id");
        b.acknowledged(again.get(0));
        assertEquals(Lsn.parse("0/250"), b.safePosition());
    }

    @Test
    void aDroppedTablesPendingChangesAreNotEmitted() {
        ChangeBatcher b = batcher(10);
        b.begin(Lsn.parse("0/200"), T, T);
        b.add(change("s.a", Op.CREATE, 1));
        b.add(change("s.b", Op.CREATE, 1));
        b.drop("s.a");
        List<SourceRecord> out = b.commit(Lsn.parse("0/250"));
        assertEquals(List.of("pg.s.b"), out.stream().map(SourceRecord::topic).toList());
    }

    /** A catalog outage while a table's first batch id is looked up must not leave half-tracked records behind. */
    @Test
    void aFailingBatchIdLookupLeavesNothingHalfDone() {
        boolean[] fail = {true};
        ChangeBatcher b = new ChangeBatcher("f", "slot_1", "__hb", 10, t -> "pg." + t, t -> {
            if (fail[0]) {
                throw new IllegalStateException("catalog unavailable");
            }
            return 3L;
        }, Lsn.parse("0/100"));
        b.begin(Lsn.parse("0/200"), T, T);
        org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class, () -> b.add(change("s.a", Op.CREATE, 1)));
        b.abort();
        fail[0] = false;
        b.begin(Lsn.parse("0/200"), T, T);
        b.add(change("s.a", Op.CREATE, 1));
        List<SourceRecord> out = b.commit(Lsn.parse("0/250"));
        assertEquals("4", header(out.get(0), RecordHeaders.BATCH));
        b.acknowledged(out.get(0));
        assertEquals(Lsn.parse("0/250"), b.safePosition());
    }
}
