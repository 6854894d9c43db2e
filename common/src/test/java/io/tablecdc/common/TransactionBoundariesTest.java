package io.tablecdc.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.TransactionContext;
import org.junit.jupiter.api.Test;

class TransactionBoundariesTest {
    private static SourceRecord row(long batch, boolean last) {
        ConnectHeaders headers = new ConnectHeaders();
        headers.addString(RecordHeaders.BATCH, Long.toString(batch));
        if (last) {
            headers.addString(RecordHeaders.BATCH_LAST, "true");
        }
        return new SourceRecord(Map.of("table", "t"), Map.of("batch", batch), "topic", 0, Schema.STRING_SCHEMA,
                "k" + batch, Schema.STRING_SCHEMA, "v", null, headers);
    }

    /** A record outside every batch, like the Postgres pipeline's position records. */
    private static SourceRecord position() {
        return new SourceRecord(Map.of("slot", "s"), Map.of("lsn", "0/1"), "heartbeat", 0, Schema.STRING_SCHEMA, "f",
                Schema.STRING_SCHEMA, "0/1");
    }

    /** Records which records a task asked to commit on. */
    private static final class Recording implements TransactionContext {
        final List<SourceRecord> commits = new ArrayList<>();
        int batchCommits;

        @Override
        public void commitTransaction() {
            batchCommits++;
        }

        @Override
        public void commitTransaction(SourceRecord record) {
            commits.add(record);
        }

        @Override
        public void abortTransaction() {
            throw new AssertionError("never aborts");
        }

        @Override
        public void abortTransaction(SourceRecord record) {
            throw new AssertionError("never aborts");
        }
    }

    @Test
    void aBatchEndsOnItsLastRecordOrOutsideEveryBatch() {
        assertTrue(TransactionBoundaries.endsBatch(row(1, true)));
        assertFalse(TransactionBoundaries.endsBatch(row(1, false)));
        assertTrue(TransactionBoundaries.endsBatch(position()));
        ConnectHeaders notLast = new ConnectHeaders();
        notLast.addString(RecordHeaders.BATCH, "3");
        notLast.addString(RecordHeaders.BATCH_LAST, "false");
        assertFalse(TransactionBoundaries.endsBatch(new SourceRecord(Map.of(), Map.of(), "t", 0, null, null, null, null,
                null, notLast)));
    }

    @Test
    void commitsOnTheLastBatchEndOfAPoll() {
        SourceRecord end1 = row(1, true);
        SourceRecord end2 = row(2, true);
        SourceRecord pos = position();
        List<SourceRecord> poll = List.of(row(1, false), end1, row(2, false), end2, pos);
        Recording context = new Recording();
        TransactionBoundaries boundaries = new TransactionBoundaries(context);
        assertSame(poll, boundaries.polled(poll));
        assertEquals(List.of(pos), context.commits);

        context = new Recording();
        new TransactionBoundaries(context).polled(List.of(row(1, false), end1, row(2, false), end2));
        assertEquals(List.of(end2), context.commits);
    }

    @Test
    void aBatchThatGoesOnInTheNextPollKeepsTheTransactionOpen() {
        SourceRecord end1 = row(1, true);
        Recording context = new Recording();
        TransactionBoundaries boundaries = new TransactionBoundaries(context);
        // batch 2's first page: the transaction ends after batch 1, batch 2 stays open
        SourceRecord first2 = row(2, false);
        boundaries.polled(List.of(row(1, false), end1, first2));
        assertEquals(List.of(end1), context.commits);
        assertEquals(2, boundaries.committed().size(), "batch 1, up to its last record");
        // a page in the middle of batch 2: nothing to commit
        SourceRecord middle2 = row(2, false);
        boundaries.polled(List.of(middle2));
        assertEquals(List.of(end1), context.commits);
        SourceRecord end2 = row(2, true);
        boundaries.polled(List.of(end2));
        assertEquals(List.of(end1, end2), context.commits);
        assertEquals(List.of(first2, middle2, end2), boundaries.committed());
        assertEquals(0, context.batchCommits);
    }

    /**
     * An exactly-once worker reports committed records from a map keyed by record equality: two equal records (two
     * identical rows in one batch) are reported once. The records to acknowledge come from here instead, each once.
     */
    @Test
    void equalRecordsAreEachCommittedOnce() {
        SourceRecord a = row(5, false);
        SourceRecord b = row(5, false);
        SourceRecord end = row(5, true);
        assertEquals(a, b, "two identical rows make equal records");
        Recording context = new Recording();
        TransactionBoundaries boundaries = new TransactionBoundaries(context);
        boundaries.polled(List.of(a, b, end));
        List<SourceRecord> committed = boundaries.committed();
        assertEquals(3, committed.size());
        assertSame(a, committed.get(0));
        assertSame(b, committed.get(1));
        assertTrue(boundaries.committed().isEmpty(), "each record once");
    }

    @Test
    void aBatchEndingWithoutItsLastRecordCommitsEverythingHandedOut() {
        Recording context = new Recording();
        TransactionBoundaries boundaries = new TransactionBoundaries(context);
        SourceRecord a = row(7, false);
        SourceRecord b = row(7, false);
        boundaries.polled(List.of(a));
        boundaries.polled(List.of(b));
        boundaries.commitAll();
        assertEquals(1, context.batchCommits);
        assertEquals(List.of(a, b), boundaries.committed());
    }

    @Test
    void withoutATransactionContextNothingHappens() {
        TransactionBoundaries boundaries = new TransactionBoundaries(null);
        List<SourceRecord> poll = List.of(row(1, true));
        assertFalse(boundaries.active());
        assertSame(poll, boundaries.polled(poll));
        boundaries.commitAll();
        assertTrue(boundaries.committed().isEmpty());
        assertNull(TransactionBoundaries.lastBoundary(null));
        assertNull(TransactionBoundaries.lastBoundary(List.of()));
    }
}
