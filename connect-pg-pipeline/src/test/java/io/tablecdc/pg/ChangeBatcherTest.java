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
        return new ChangeBatcher("f", "slot_1", "__hb", batchRows, t -> "pg." + t, BatchIds.countingFrom(t -> lastIds.getOrDefault(t, 0L)),
                Lsn.parse("0/100"));
    }

    private static Change change(String table, Op op, long id) {
        Struct value = new Struct(VALUE).put("id", id).put("name", "n" + id);
        return new Change(table, op, KEY, new Struct(KEY).put("id", id), VALUE, value);
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
        assertEquals(ChangeVersion.of(Lsn.parse("0/200"), 1), new java.math.BigInteger(header(out.get(0), RecordHeaders.VERSION)));
        assertEquals(ChangeVersion.of(Lsn.parse("0/200"), 2), new java.math.BigInteger(header(out.get(1), RecordHeaders.VERSION)));
        assertEquals(ChangeVersion.of(Lsn.parse("0/200"), 1), new java.math.BigInteger(header(out.get(2), RecordHeaders.VERSION)));
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
        assertTrue(new java.math.BigInteger(header(out.get(2), RecordHeaders.VERSION)).compareTo(new java.math.BigInteger(header(out.get(1), RecordHeaders.VERSION))) > 0);
        assertTrue(new java.math.BigInteger(header(out.get(3), RecordHeaders.VERSION)).compareTo(new java.math.BigInteger(header(out.get(2), RecordHeaders.VERSION))) > 0);
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

    /**
     * A catalog outage while batch ids are reserved must not leave records tracked but never returned: the ids of every
     * table of the transaction are reserved before any record is made.
     */
    @Test
    void aFailingBatchIdReservationLeavesNothingHalfDone() {
        boolean[] fail = {false};
        ChangeBatcher b = new ChangeBatcher("f", "slot_1", "__hb", 10, t -> "pg." + t, BatchIds.countingFrom(t -> {
            if (fail[0] && t.equals("s.b")) {
                throw new IllegalStateException("catalog unavailable");
            }
            return 3L;
        }), Lsn.parse("0/100"));
        b.begin(Lsn.parse("0/200"), T, T);
        b.add(change("s.a", Op.CREATE, 1));
        b.add(change("s.b", Op.CREATE, 1));
        fail[0] = true;
        org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class, () -> b.commit(Lsn.parse("0/250")));
        b.abort();
        fail[0] = false;
        b.begin(Lsn.parse("0/200"), T, T);
        b.add(change("s.a", Op.CREATE, 1));
        b.add(change("s.b", Op.CREATE, 1));
        List<SourceRecord> out = b.commit(Lsn.parse("0/250"));
        assertEquals(2, out.size());
        assertEquals("4", header(out.get(1), RecordHeaders.BATCH));
        out.forEach(b::acknowledged);
        assertEquals(Lsn.parse("0/250"), b.safePosition(), "nothing of the failed attempt holds the position back");
    }

    @Test
    void aTruncateIsABatchOfItsOwnBetweenTheRowsAroundIt() {
        ChangeBatcher b = batcher(100);
        b.begin(Lsn.parse("0/200"), T, T);
        List<SourceRecord> out = new ArrayList<>();
        out.addAll(b.add(change("s.a", Op.CREATE, 1)));
        out.addAll(b.add(Change.truncate("s.a", "77/2/table/16384")));
        out.addAll(b.add(change("s.a", Op.CREATE, 2)));
        out.addAll(b.commit(Lsn.parse("0/250")));
        assertEquals(3, out.size());
        assertEquals(List.of("8", "9", "10"), out.stream().map(r -> header(r, RecordHeaders.BATCH)).toList());
        assertTrue(out.stream().allMatch(r -> "true".equals(header(r, RecordHeaders.BATCH_LAST))));
        SourceRecord truncate = out.get(1);
        assertEquals("t", header(truncate, RecordHeaders.OP));
        assertEquals("77/2/table/16384", header(truncate, RecordHeaders.REPLAY_ID));
        assertNull(truncate.key());
        assertNull(truncate.value());
        assertNull(header(out.get(0), RecordHeaders.REPLAY_ID));
        // the truncate takes its place among the table's changes
        assertEquals(ChangeVersion.of(Lsn.parse("0/200"), 2), new java.math.BigInteger(header(truncate, RecordHeaders.VERSION)));
    }

    @Test
    void aSnapshotVersionsEveryRowBelowAnyChangeStreamedAfterItsConsistentPoint() {
        ChangeBatcher b = batcher(100);
        b.beginSnapshot(Lsn.parse("0/300"), T);
        List<SourceRecord> out = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            out.addAll(b.add(change("s.a", Op.SNAPSHOT, i)));
        }
        out.addAll(b.commit(Lsn.parse("0/300")));
        java.math.BigInteger copied = ChangeVersion.snapshot(Lsn.parse("0/300"));
        assertTrue(out.stream().allMatch(r -> new java.math.BigInteger(header(r, RecordHeaders.VERSION)).equals(copied)));
        // a transaction whose commit record sits exactly at the consistent point is streamed, and must still win
        assertTrue(ChangeVersion.of(Lsn.parse("0/300"), 1).compareTo(copied) > 0);
        assertTrue(ChangeVersion.of(Lsn.parse("0/2FF"), ChangeVersion.MAX_ORDINAL).compareTo(copied) < 0);
    }

    @Test
    void heldChangesWaitKeepThePositionBehindAndLeaveInOrderWithFreshIds() {
        ChangeBatcher b = batcher(100);
        b.hold("s.a");
        List<SourceRecord> out = new ArrayList<>();
        b.begin(Lsn.parse("0/200"), T, T);
        out.addAll(b.add(change("s.a", Op.CREATE, 1)));
        out.addAll(b.add(change("s.b", Op.CREATE, 1)));
        out.addAll(b.commit(Lsn.parse("0/250")));
        b.begin(Lsn.parse("0/300"), T, T);
        out.addAll(b.add(change("s.a", Op.UPDATE, 1)));
        out.addAll(b.commit(Lsn.parse("0/350")));
        // only table b left; a's two changes are held
        assertEquals(1, out.size());
        assertEquals("pg.s.b", out.get(0).topic());
        assertEquals(2, b.heldRows());
        b.acknowledged(out.get(0));
        assertEquals(Lsn.parse("0/100"), b.safePosition(), "held changes keep the position behind them");
        // the copy recorded batches up to 20 meanwhile
        lastIds.put("s.a", 20L);
        List<SourceRecord> released = b.release("s.a");
        assertEquals(2, released.size());
        assertEquals(List.of("21", "22"), released.stream().map(r -> header(r, RecordHeaders.BATCH)).toList());
        assertEquals(List.of("c", "u"), released.stream().map(r -> header(r, RecordHeaders.OP)).toList());
        assertEquals(ChangeVersion.of(Lsn.parse("0/300"), 1), new java.math.BigInteger(header(released.get(1), RecordHeaders.VERSION)));
        assertEquals(0, b.heldRows());
        b.acknowledged(released.get(0));
        assertEquals(Lsn.parse("0/250"), b.safePosition());
        b.acknowledged(released.get(1));
        assertEquals(Lsn.parse("0/350"), b.safePosition());
        assertTrue(b.drained());
    }

    @Test
    void discardedHeldChangesReleaseThePosition() {
        ChangeBatcher b = batcher(1);
        b.hold("s.a");
        b.begin(Lsn.parse("0/200"), T, T);
        assertTrue(b.add(change("s.a", Op.CREATE, 1)).isEmpty(), "a held slice cut by batch.rows stays held");
        assertTrue(b.add(change("s.a", Op.CREATE, 2)).isEmpty());
        assertTrue(b.commit(Lsn.parse("0/250")).isEmpty());
        assertEquals(2, b.heldRows());
        assertEquals(Lsn.parse("0/100"), b.safePosition());
        b.discard("s.a");
        assertEquals(0, b.heldRows());
        assertEquals(Lsn.parse("0/250"), b.safePosition());
        assertTrue(!b.holding("s.a"));
    }

    @Test
    void anAbortedTransactionDropsWhatItHeld() {
        ChangeBatcher b = batcher(1);
        b.hold("s.a");
        b.begin(Lsn.parse("0/200"), T, T);
        b.add(change("s.a", Op.CREATE, 1));
        assertEquals(1, b.heldRows());
        b.abort();
        assertEquals(0, b.heldRows());
        assertTrue(b.release("s.a").isEmpty());
    }

    @Test
    void coalescingMakesOneBatchPerTableOfManySmallTransactionsAndKeepsThePositionBehindUnsentOnes() {
        ChangeBatcher b = new ChangeBatcher("f", "slot_1", "__hb", 100, t -> "pg." + t,
                BatchIds.countingFrom(t -> 0L), Lsn.parse("0/100"), true);
        b.begin(Lsn.parse("0/200"), T, T);
        assertTrue(b.add(change("s.a", Op.CREATE, 1)).isEmpty());
        assertTrue(b.commit(Lsn.parse("0/250")).isEmpty(), "a commit sends nothing while coalescing");
        b.begin(Lsn.parse("0/300"), T.plusSeconds(1), T);
        b.add(change("s.a", Op.UPDATE, 1));
        b.add(change("s.b", Op.CREATE, 7));
        b.commit(Lsn.parse("0/350"));
        assertEquals(Lsn.parse("0/100"), b.safePosition(), "committed but unsent changes keep the position back");
        // a third transaction breaks off: its changes are read again, the two committed ones are still sent
        b.begin(Lsn.parse("0/400"), T, T);
        b.add(change("s.a", Op.DELETE, 1));
        b.abort();
        List<SourceRecord> out = b.flush();
        assertEquals(3, out.size());
        assertEquals(List.of("1", "1", "1"), out.stream().map(r -> header(r, RecordHeaders.BATCH)).toList());
        assertEquals(List.of("c", "u", "c"), out.stream().map(r -> header(r, RecordHeaders.OP)).toList());
        // each change keeps its own transaction's version; the batch's offset is its newest commit
        assertEquals(ChangeVersion.of(Lsn.parse("0/200"), 1), new java.math.BigInteger(header(out.get(0), RecordHeaders.VERSION)));
        assertEquals(ChangeVersion.of(Lsn.parse("0/300"), 1), new java.math.BigInteger(header(out.get(1), RecordHeaders.VERSION)));
        assertEquals(Map.of("batch", 1L, "lsn", "0/300"), out.get(1).sourceOffset());
        assertEquals("true", header(out.get(1), RecordHeaders.BATCH_LAST));
        b.acknowledged(out.get(0));
        assertEquals(Lsn.parse("0/250"), b.safePosition());
        b.acknowledged(out.get(1));
        b.acknowledged(out.get(2));
        assertEquals(Lsn.parse("0/350"), b.safePosition(), "the aborted transaction never counts");
        List<ChangeBatcher.Synced> synced = b.drainSynced();
        assertEquals(2, synced.size());
        assertEquals(T, synced.get(0).batch().firstRowCommitTime(), "a batch's lag counts from its oldest commit");
    }

    @Test
    void droppingATableReleasesThePositionItsUnsentChangesHeld() {
        ChangeBatcher b = new ChangeBatcher("f", "slot_1", "__hb", 100, t -> "pg." + t,
                BatchIds.countingFrom(t -> 0L), Lsn.parse("0/100"), true);
        b.begin(Lsn.parse("0/200"), T, T);
        b.add(change("s.a", Op.CREATE, 1));
        b.commit(Lsn.parse("0/250"));
        b.drop("s.a");
        assertEquals(Lsn.parse("0/250"), b.safePosition());
        assertTrue(b.flush().isEmpty());
    }

    /**
     * Under connector-defined Kafka transactions the position record rides in the same Kafka transaction as the
     * records before it: its position is what was handed out, in order, acknowledged or not; held, unsent and open
     * changes keep it back, an aborted transaction never counts.
     */
    @Test
    void theEmittedPositionCountsWhatWasHandedOutInOrder() {
        ChangeBatcher b = new ChangeBatcher("f", "slot_1", "__hb", 100, t -> "pg." + t,
                BatchIds.countingFrom(t -> 0L), Lsn.parse("0/100"), true);
        b.hold("s.h");
        b.begin(Lsn.parse("0/200"), T, T);
        b.add(change("s.a", Op.CREATE, 1));
        b.commit(Lsn.parse("0/250"));
        assertEquals(Lsn.parse("0/100"), b.emittedPosition(), "committed but not yet made into records");
        List<SourceRecord> out = new ArrayList<>(b.flush());
        assertEquals(Lsn.parse("0/250"), b.emittedPosition(), "handed out, not yet acknowledged");
        assertEquals(Lsn.parse("0/100"), b.safePosition());
        b.begin(Lsn.parse("0/300"), T, T);
        b.add(change("s.h", Op.CREATE, 1));
        b.commit(Lsn.parse("0/350"));
        b.begin(Lsn.parse("0/400"), T, T);
        b.add(change("s.a", Op.UPDATE, 1));
        b.commit(Lsn.parse("0/450"));
        out.addAll(b.flush());
        assertEquals(Lsn.parse("0/250"), b.emittedPosition(), "the held change of 0/350 keeps it back");
        b.begin(Lsn.parse("0/500"), T, T);
        b.add(change("s.a", Op.DELETE, 1));
        assertEquals(Lsn.parse("0/250"), b.emittedPosition());
        out.addAll(b.release("s.h"));
        assertEquals(Lsn.parse("0/450"), b.emittedPosition(), "the open transaction does not count");
        b.abort();
        b.idle(Lsn.parse("0/600"));
        assertEquals(Lsn.parse("0/600"), b.emittedPosition(), "the aborted transaction never counts");
        for (SourceRecord r : out) {
            b.acknowledged(r);
        }
        assertEquals(Lsn.parse("0/600"), b.safePosition());
        assertEquals(b.safePosition(), b.emittedPosition(), "never behind the acknowledged position");
    }

    /** Every NaN / ±Infinity of a record leaves with a tablecdc.nonfinite header: the decimal marks and the floats. */
    @Test
    void nonFiniteValuesAreNamedInHeaders() {
        Schema value = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA)
                .field("n", org.apache.kafka.connect.data.Decimal.builder(2).optional().build())
                .field("f", Schema.OPTIONAL_FLOAT64_SCHEMA)
                .field("af", SchemaBuilder.array(Schema.OPTIONAL_FLOAT32_SCHEMA).optional().build()).build();
        Struct row = new Struct(value).put("id", 1L).put("f", Double.POSITIVE_INFINITY)
                .put("af", java.util.Arrays.asList(1f, Float.NaN));
        ChangeBatcher b = batcher(100);
        b.begin(Lsn.parse("0/200"), T, T);
        List<SourceRecord> out = new ArrayList<>();
        out.addAll(b.add(new Change("s.a", Op.CREATE, KEY, new Struct(KEY).put("id", 1L), value, row)
                .withNonFinite(List.of("n=-Infinity"))));
        out.addAll(b.add(change("s.a", Op.UPDATE, 2)));
        out.addAll(b.commit(Lsn.parse("0/250")));
        List<String> marks = new ArrayList<>();
        out.get(0).headers().allWithName(RecordHeaders.NON_FINITE).forEachRemaining(h -> marks.add((String) h.value()));
        assertEquals(List.of("n=-Infinity", "f=Infinity", "af[1]=NaN"), marks);
        assertNull(header(out.get(1), RecordHeaders.NON_FINITE));
    }

    /**
     * record.format=blocks: a batch is one block record per record.block.bytes of rows (the last one
     * marked), rows in order with their versions; the batch syncs, and the position moves, only once every block of it
     * is acknowledged; a truncate is a block of its own; a relation change starts a new block.
     */
    @Test
    void blocksCarryTheBatchAndAreAcknowledgedForEveryRowTheyHold() {
        ChangeBatcher b = new ChangeBatcher("f", "slot_1", "__hb", 1000, t -> "pg." + t, BatchIds.countingFrom(t -> 0L),
                Lsn.parse("0/100"), true).blocks(1024);
        b.begin(Lsn.parse("0/200"), T, T);
        List<SourceRecord> out = new ArrayList<>();
        for (long id = 1; id <= 200; id++) {
            out.addAll(b.add(change("s.a", Op.CREATE, id)));
        }
        b.commit(Lsn.parse("0/250"));
        b.begin(Lsn.parse("0/300"), T, T);
        out.addAll(b.add(Change.truncate("s.a", "9/0/table/1")));
        Schema wider = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("name", Schema.OPTIONAL_STRING_SCHEMA)
                .field("extra", Schema.OPTIONAL_INT32_SCHEMA).build();
        out.addAll(b.add(change("s.a", Op.UPDATE, 1)));
        out.addAll(b.add(new Change("s.a", Op.UPDATE, KEY, new Struct(KEY).put("id", 2L), wider,
                new Struct(wider).put("id", 2L).put("extra", 5))));
        b.commit(Lsn.parse("0/350"));
        out.addAll(b.flush());

        io.tablecdc.common.RowBlock.Reader reader = new io.tablecdc.common.RowBlock.Reader();
        List<io.tablecdc.common.RowBlock.Row> rows = new ArrayList<>();
        List<String> batches = new ArrayList<>();
        List<String> lasts = new ArrayList<>();
        List<Integer> sizes = new ArrayList<>();
        for (SourceRecord r : out) {
            assertEquals("1", header(r, io.tablecdc.common.RowBlock.HEADER));
            assertEquals(Schema.BYTES_SCHEMA, r.valueSchema());
            assertNull(r.key());
            assertEquals(0, r.kafkaPartition());
            io.tablecdc.common.RowBlock.Decoded block = reader.read((byte[]) r.value());
            rows.addAll(block.rows());
            sizes.add(block.rows().size());
            batches.add(header(r, RecordHeaders.BATCH));
            lasts.add(String.valueOf(header(r, RecordHeaders.BATCH_LAST)));
        }
        assertEquals(203, rows.size());
        assertTrue(sizes.get(0) > 1 && sizes.get(0) < 200, "a block closes at record.block.bytes: " + sizes);
        int firstBatchBlocks = (int) batches.stream().filter("1"::equals).count();
        assertTrue(firstBatchBlocks >= 2, "the 200 rows span blocks: " + batches);
        assertEquals("true", lasts.get(firstBatchBlocks - 1));
        assertTrue(lasts.subList(0, firstBatchBlocks - 1).stream().allMatch("null"::equals), lasts.toString());
        // the truncate is batch 2, alone; the two updates batch 3 in two blocks (the schema changed between them)
        assertEquals(List.of("2", "3", "3"), batches.subList(firstBatchBlocks, batches.size()));
        assertEquals(List.of("true", "null", "true"), lasts.subList(firstBatchBlocks, lasts.size()));
        io.tablecdc.common.RowBlock.Row truncate = rows.get(200);
        assertEquals(Op.TRUNCATE, truncate.op());
        assertEquals("9/0/table/1", truncate.replayId());
        for (int i = 0; i < 200; i++) {
            assertEquals(i + 1L, rows.get(i).value().get("id"));
            assertEquals(new Struct(KEY).put("id", i + 1L), rows.get(i).key());
            assertEquals(ChangeVersion.of(Lsn.parse("0/200"), i + 1), rows.get(i).version());
        }
        assertEquals(5, rows.get(202).value().get("extra"));

        // acknowledged in reverse: nothing syncs and the position stays until the first block is in
        for (int i = out.size() - 1; i >= 1; i--) {
            b.acknowledged(out.get(i));
        }
        assertEquals(List.of("3", "2"), b.drainSynced().stream().map(s -> Long.toString(s.batch().batchId())).toList(),
                "in acknowledgement order");
        assertEquals(Lsn.parse("0/100"), b.safePosition());
        b.acknowledged(out.get(0));
        List<ChangeBatcher.Synced> synced = b.drainSynced();
        assertEquals(1, synced.size());
        assertEquals(1L, synced.get(0).batch().batchId());
        assertEquals(200L, synced.get(0).batch().rows(), "a batch counts its rows, not its blocks");
        assertEquals(Lsn.parse("0/350"), b.safePosition(), "every block acknowledged");
    }

    private static Change text(String table, long id, int chars) {
        Struct value = new Struct(VALUE).put("id", id).put("name", "x".repeat(chars));
        return new Change(table, Op.CREATE, KEY, new Struct(KEY).put("id", id), VALUE, value);
    }

    /**
     * Kafka's record limit (issue 35 item 6): a block is closed before a row that would take it past the limit (not
     * only once it holds record.block.bytes), every block stays within it, and a row that cannot fit even alone is
     * refused when added, nothing of it kept, so that its table alone stops.
     */
    @Test
    void blocksCloseBeforeARowThatWouldPassTheRecordLimitAndARowAboveItIsRefused() {
        RecordLimit limit = new RecordLimit(64 * 1024, "producer.override.max.request.size=65536", true);
        ChangeBatcher b = new ChangeBatcher("f", "slot_1", "__hb", 1000, t -> "pg." + t, BatchIds.countingFrom(t -> 0L),
                Lsn.parse("0/100"), true).blocks(256 * 1024).limit(limit);
        b.begin(Lsn.parse("0/200"), T, T);
        List<SourceRecord> out = new ArrayList<>();
        for (long id = 1; id <= 20; id++) {
            out.addAll(b.add(text("s.a", id, 2000)));
        }
        out.addAll(b.add(text("s.a", 21, 30_000)));
        out.addAll(b.add(text("s.a", 22, 100)));
        RecordLimit.TooLarge refused = org.junit.jupiter.api.Assertions.assertThrows(RecordLimit.TooLarge.class,
                () -> b.add(text("s.a", 23, 70_000)));
        assertTrue(refused.getMessage().contains("table s.a") && refused.getMessage().contains("65536")
                && refused.getMessage().contains("producer.override.max.request.size")
                && refused.getMessage().contains("max.message.bytes of topic pg.s.a"), refused.getMessage());
        b.commit(Lsn.parse("0/250"));
        out.addAll(b.flush());
        io.tablecdc.common.RowBlock.Reader reader = new io.tablecdc.common.RowBlock.Reader();
        List<Integer> sizes = new ArrayList<>();
        for (SourceRecord r : out) {
            byte[] block = (byte[]) r.value();
            assertTrue(block.length <= limit.maxBlockBytes(), block.length + " bytes");
            sizes.add(reader.read(block).rows().size());
        }
        assertEquals(List.of(20, 2), sizes, "closed before the 30 KB row, which went on with the next");
        for (SourceRecord r : out) {
            b.acknowledged(r);
        }
        assertEquals(Lsn.parse("0/250"), b.safePosition(), "the refused row keeps nothing back");

        // row records: the same row is refused, a row below the limit is not
        ChangeBatcher rows = batcher(100).limit(new RecordLimit(64 * 1024, "test", false));
        rows.begin(Lsn.parse("0/300"), T, T);
        rows.add(text("s.a", 1, 60_000));
        org.junit.jupiter.api.Assertions.assertThrows(RecordLimit.TooLarge.class, () -> rows.add(text("s.a", 2, 70_000)));
        // a string of control characters takes 6 bytes each in JSON
        org.junit.jupiter.api.Assertions.assertThrows(RecordLimit.TooLarge.class,
                () -> rows.add(new Change("s.a", Op.CREATE, KEY, new Struct(KEY).put("id", 3L), VALUE,
                        new Struct(VALUE).put("id", 3L).put("name", "\u0001".repeat(12_000)))));
    }
}
