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
        assertSame(poll, TransactionBoundaries.commitAtLastBatchEnd(context, poll));
        assertEquals(List.of(pos), context.commits);

        context = new Recording();
        TransactionBoundaries.commitAtLastBatchEnd(context, List.of(row(1, false), end1, row(2, false), end2));
        assertEquals(List.of(end2), context.commits);
    }

    @Test
    void aBatchThatGoesOnInTheNextPollKeepsTheTransactionOpen() {
        SourceRecord end1 = row(1, true);
        Recording context = new Recording();
        // batch 2's first page: the transaction ends after batch 1, batch 2 stays open
        TransactionBoundaries.commitAtLastBatchEnd(context, List.of(row(1, false), end1, row(2, false), row(2, false)));
        assertEquals(List.of(end1), context.commits);
        // a page in the middle of batch 2: nothing to commit
        context = new Recording();
        TransactionBoundaries.commitAtLastBatchEnd(context, List.of(row(2, false), row(2, false)));
        assertEquals(List.of(), context.commits);
        assertEquals(0, context.batchCommits);
    }

    @Test
    void withoutATransactionContextNothingHappens() {
        List<SourceRecord> poll = List.of(row(1, true));
        assertSame(poll, TransactionBoundaries.commitAtLastBatchEnd(null, poll));
        assertNull(TransactionBoundaries.lastBoundary(null));
        assertNull(TransactionBoundaries.lastBoundary(List.of()));
    }
}
