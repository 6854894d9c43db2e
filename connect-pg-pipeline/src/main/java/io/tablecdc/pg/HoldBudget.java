package io.tablecdc.pg;

import java.util.HashMap;
import java.util.Map;

/**
 * The changes the apply task holds for tables being handed over, counted in bytes as received, per table and as the
 * open transaction's share: reading pauses while more than {@code hold.max.bytes} bytes or 20 x {@code batch.rows}
 * changes are held. A table that stops holding (released, discarded) takes its bytes with it; an open transaction
 * that is dropped (to be read again) takes its share.
 */
final class HoldBudget {
    private final long maxBytes;
    private final long maxRows;
    /** Bytes (as received) of the changes of held tables, per table, and the open transaction's share of them. */
    private final Map<String, Long> heldBytes = new HashMap<>();
    private final Map<String, Long> openTxnHeldBytes = new HashMap<>();
    private long heldBytesTotal;

    HoldBudget(long maxBytes, int batchRows) {
        this.maxBytes = maxBytes;
        this.maxRows = 20L * batchRows;
    }

    /** A held table's change of {@code bytes} in the open transaction. */
    void held(String table, long bytes) {
        heldBytes.merge(table, bytes, Long::sum);
        openTxnHeldBytes.merge(table, bytes, Long::sum);
        heldBytesTotal += bytes;
    }

    /** The open transaction committed: its held changes stay held, as changes of committed transactions. */
    void committed() {
        openTxnHeldBytes.clear();
    }

    /** The open transaction was dropped (read again later): its held changes are gone from the batcher too. */
    void aborted() {
        openTxnHeldBytes.forEach((table, bytes) -> {
            heldBytes.computeIfPresent(table, (t, b) -> b - bytes <= 0 ? null : b - bytes);
            heldBytesTotal -= bytes;
        });
        openTxnHeldBytes.clear();
    }

    /** A table stopped holding (released, discarded): its held bytes no longer count. */
    void gone(String table) {
        Long bytes = heldBytes.remove(table);
        if (bytes != null) {
            heldBytesTotal -= bytes;
        }
        openTxnHeldBytes.remove(table);
    }

    /** Everything read is void (the stream starts over on a new slot). */
    void clear() {
        heldBytes.clear();
        openTxnHeldBytes.clear();
        heldBytesTotal = 0;
    }

    /** Whether held changes ({@code heldRows} of them, as the batcher counts) reached a limit: reading pauses. */
    boolean full(long heldRows) {
        return heldBytesTotal > maxBytes || heldRows > maxRows;
    }

    long bytes() {
        return heldBytesTotal;
    }

    long maxRows() {
        return maxRows;
    }
}
