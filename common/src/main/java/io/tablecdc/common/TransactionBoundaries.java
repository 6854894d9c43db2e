package io.tablecdc.common;

import java.util.List;

import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.TransactionContext;

/**
 * Connector-defined transaction boundaries for the sources (Kafka Connect exactly-once support, KIP-618): a Kafka
 * transaction ends only where a batch ends, so a {@code read_committed} consumer never sees part of a batch.
 *
 * <p>A record ends a batch when it carries {@code tablecdc.batch.last=true}, or when it belongs to no batch at all
 * (no {@code tablecdc.batch} header: the Postgres pipeline's position records). Of the records one {@code poll()}
 * returns, the transaction is committed on the <em>last</em> that ends a batch: one Kafka transaction per poll at most,
 * never ending inside a batch. Records after it (the first pages of a batch that the next polls complete) stay in the
 * open transaction.
 *
 * <p>A record an SMT drops still ends the transaction when it is the one named here: Connect checks the records it
 * drops against the connector's request as well.
 */
public final class TransactionBoundaries {
    private TransactionBoundaries() {
    }

    /** Whether {@code record} ends a batch (or belongs to none): a Kafka transaction may end on it. */
    public static boolean endsBatch(SourceRecord record) {
        if (record == null) {
            return false;
        }
        Header last = record.headers().lastWithName(RecordHeaders.BATCH_LAST);
        if (last != null && last.value() != null && "true".equals(last.value().toString())) {
            return true;
        }
        return record.headers().lastWithName(RecordHeaders.BATCH) == null;
    }

    /** The last record of {@code records} that ends a batch, or null when none does (or there are none). */
    public static SourceRecord lastBoundary(List<SourceRecord> records) {
        if (records == null) {
            return null;
        }
        for (int i = records.size() - 1; i >= 0; i--) {
            if (endsBatch(records.get(i))) {
                return records.get(i);
            }
        }
        return null;
    }

    /**
     * When the worker lets the connector define transaction boundaries ({@code transaction.boundary=connector}: the
     * task's {@link TransactionContext} is not null), asks Connect to commit the transaction on the last record of
     * {@code records} that ends a batch. Otherwise does nothing. Returns {@code records}.
     */
    public static List<SourceRecord> commitAtLastBatchEnd(TransactionContext context, List<SourceRecord> records) {
        if (context != null) {
            SourceRecord boundary = lastBoundary(records);
            if (boundary != null) {
                context.commitTransaction(boundary);
            }
        }
        return records;
    }
}
