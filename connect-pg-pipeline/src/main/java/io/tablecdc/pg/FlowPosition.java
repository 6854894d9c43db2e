package io.tablecdc.pg;

import java.util.concurrent.atomic.AtomicReference;

import io.tablecdc.pg.wire.Lsn;

/**
 * The apply task's position in its slot, as one value: where the stream (re)starts, which position record went out
 * last, what Connect has stored and what the server was told.
 *
 * <ul>
 *   <li><b>read</b>: the end of the last transaction whose records were all handed to Connect (or, while idle, the
 *       server's position); a reconnect reads from here, and transactions committed before it are not sent again.
 *   <li><b>emitted</b>: the last position record handed to Connect, and when.
 *   <li><b>stored</b>: {@link #committed} (Connect's {@code commit()}, after an offset flush) takes the position
 *       acknowledged before the previous call, which that flush stored.
 *   <li><b>confirmed</b>: what the server was told ({@code confirmed_flush_lsn}); never ahead of a stored position.
 * </ul>
 * The poll thread owns everything but {@link #committed}, which runs on Connect's commit thread.
 */
final class FlowPosition {
    private Lsn read;
    private Lsn confirmed;
    private Lsn emitted;
    private long emittedAt;
    private volatile Lsn ackedAtLastCommit;
    private final AtomicReference<Lsn> toConfirm = new AtomicReference<>();

    /**
     * @param read where the stream starts
     * @param confirmed the slot's confirmed position on the server
     */
    FlowPosition(Lsn read, Lsn confirmed) {
        this.read = read;
        this.confirmed = confirmed;
        this.emitted = read;
        this.ackedAtLastCommit = read;
    }

    Lsn read() {
        return read;
    }

    /** The stream got this far (a commit's end, or the server's position while idle); never moves back. */
    void readTo(Lsn lsn) {
        read = Lsn.max(read, lsn);
    }

    /** The slot's confirmed position as the server reports it (after a reconnect). */
    void serverConfirmed(Lsn lsn) {
        if (lsn != null && lsn.isAfter(confirmed)) {
            confirmed = lsn;
        }
    }

    /**
     * Connect flushed offsets: the position acknowledged before the previous call was in this flush's snapshot, so it
     * is stored and may be confirmed; {@code acknowledgedNow} becomes the candidate of the next call.
     */
    void committed(Lsn acknowledgedNow) {
        Lsn stored = ackedAtLastCommit;
        ackedAtLastCommit = acknowledgedNow;
        if (stored != null) {
            toConfirm.accumulateAndGet(stored, (a, b) -> a == null || b.isAfter(a) ? b : a);
        }
    }

    /** A stored position the server has not been told yet, now taken as confirmed; null when there is none. */
    Lsn takeToConfirm() {
        Lsn lsn = toConfirm.getAndSet(null);
        if (lsn == null || !lsn.isAfter(confirmed)) {
            return null;
        }
        confirmed = lsn;
        return lsn;
    }

    /** Whether a position record for {@code safe} is due: past the last one, and at least {@code intervalNanos} later. */
    boolean emitDue(Lsn safe, long now, long intervalNanos) {
        return safe.isAfter(emitted) && now - emittedAt >= intervalNanos;
    }

    void emitted(Lsn lsn, long now) {
        emitted = lsn;
        emittedAt = now;
    }
}
