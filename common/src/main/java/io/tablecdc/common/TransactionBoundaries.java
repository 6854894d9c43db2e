package io.tablecdc.common;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
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
 * open transaction. A record an SMT drops still ends the transaction when it is the one named here: Connect checks the
 * records it drops against the connector's request as well.
 *
 * <p>Acknowledgements: an exactly-once worker reports committed records ({@code commitRecord}) from a map keyed by
 * record <em>equality</em>, so two equal records (two identical rows of a BigQuery table, or of a Postgres table
 * without a key, copied in one batch) are reported once, and a task counting acknowledgements would wait for the
 * second forever. With connector-defined boundaries the worker commits only where the task asked, and calls
 * {@code commit()} right after each commit; so the task ignores the worker's {@code commitRecord} and, in
 * {@code commit()}, takes {@link #committed()}: every record it handed out up to the boundary just committed, each
 * once, in order. The worker's task thread makes every call here.
 */
public final class TransactionBoundaries {
    private final TransactionContext context;
    /** Records handed out and not yet committed, in order. */
    private final Deque<SourceRecord> pending = new ArrayDeque<>();
    /** The last record a commit was asked on, or null. */
    private SourceRecord boundary;
    /** A commit of everything handed out was asked ({@link #commitAll()}). */
    private boolean all;

    /** @param context the task's transaction context: null unless the worker runs {@code transaction.boundary=connector} */
    public TransactionBoundaries(TransactionContext context) {
        this.context = context;
    }

    /** Whether the connector defines the transaction boundaries (the worker gave the task a transaction context). */
    public boolean active() {
        return context != null;
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
     * The records one {@code poll()} returns: when active, asks Connect to commit the transaction on the last that ends
     * a batch, and keeps them for {@link #committed()}. Returns {@code records}.
     */
    public List<SourceRecord> polled(List<SourceRecord> records) {
        if (context == null || records == null || records.isEmpty()) {
            return records;
        }
        pending.addAll(records);
        SourceRecord last = lastBoundary(records);
        if (last != null) {
            boundary = last;
            context.commitTransaction(last);
        }
        return records;
    }

    /**
     * Asks Connect to commit everything handed out so far (a batch that ends without a record carrying
     * {@code tablecdc.batch.last}), after the current poll. Nothing when not active.
     */
    public void commitAll() {
        if (context == null) {
            return;
        }
        all = true;
        context.commitTransaction();
    }

    /**
     * Called in {@code commit()}, which the worker calls right after a transaction committed: the records handed out
     * up to the boundary asked for last (all of them after {@link #commitAll()}), in order, each once; they are
     * forgotten. Empty when not active.
     */
    public List<SourceRecord> committed() {
        List<SourceRecord> out = new ArrayList<>();
        if (context == null) {
            return out;
        }
        if (all) {
            out.addAll(pending);
            pending.clear();
        } else if (boundary != null) {
            while (!pending.isEmpty()) {
                SourceRecord record = pending.removeFirst();
                out.add(record);
                if (record == boundary) {
                    break;
                }
            }
        }
        all = false;
        boundary = null;
        return out;
    }
}
