package io.tablecdc.pg;

import io.tablecdc.pg.wire.Lsn;

/**
 * The {@code tablecdc.version} of a streamed change: (commit LSN, ordinal) packed into one non-negative
 * {@code long}, which the sink stores in the UInt64 {@code _tablecdc_version} column.
 *
 * <pre>
 *   bit 63      bits 62..16                bits 15..0
 *   0           commit LSN (47 bits)        ordinal of the change within its transaction and table (16 bits)
 * </pre>
 *
 * <p>Why it orders every change of one row: two changes of one row in different transactions are ordered by
 * their commit LSNs (a row is locked until its transaction commits, so the later change commits later), and
 * the commit LSN is the high part; two changes of one row in the same transaction share the commit LSN and
 * are ordered by the ordinal, which counts the table's changes in the transaction from 1. The commit LSN,
 * never the change's own LSN, is used: a transaction that began before another but committed after it must
 * win. Rows of a copy take ordinal 0 at their snapshot's consistent point ({@link #snapshot}).
 *
 * <p>Limits, both far from ordinary use but real:
 * <ul>
 * <li>The commit LSN must be below 2<sup>47</sup> (128 TiB of WAL written over the cluster's life, i.e. LSN
 * {@code 8000/0}). A change committed at or beyond it fails the task with an error saying so rather than
 * wrap around and lose to older versions.</li>
 * <li>The ordinal saturates at 65535: changes after the 65535th of one table in one transaction share the
 * version 65535. ReplacingMergeTree then keeps the row inserted last among equal versions, which is the
 * later change as long as the batch is loaded once in order (the sink's normal case); only a second change of
 * the same row past that point, re-delivered after a restart, could be resolved to the older image.</li>
 * </ul>
 */
public final class ChangeVersion {
    /** Bits of the ordinal. */
    public static final int ORDINAL_BITS = 16;
    /** The largest ordinal; larger ones saturate to it. */
    public static final long MAX_ORDINAL = (1L << ORDINAL_BITS) - 1;
    /** The first commit LSN that cannot be packed: 2^47. */
    public static final long LSN_LIMIT = 1L << (63 - ORDINAL_BITS);

    private ChangeVersion() {
    }

    /**
     * The version of the {@code ordinal}-th change (from 1) of a table in the transaction committed at
     * {@code commitLsn}.
     *
     * @throws IllegalArgumentException when the commit LSN is at or beyond {@link #LSN_LIMIT}, or the ordinal is
     *     below 1
     */
    public static long of(Lsn commitLsn, long ordinal) {
        if (ordinal < 1) {
            throw new IllegalArgumentException("a change's ordinal starts at 1: " + ordinal);
        }
        long lsn = commitLsn.value();
        if (lsn < 0 || lsn >= LSN_LIMIT) {
            throw new IllegalArgumentException("commit LSN " + commitLsn + " is beyond what the version packs ("
                    + Lsn.of(LSN_LIMIT) + ", 128 TiB of WAL): versions would no longer order changes");
        }
        return (lsn << ORDINAL_BITS) | Math.min(ordinal, MAX_ORDINAL);
    }

    /**
     * The version of a row copied in the snapshot exported at {@code consistentPoint}: ordinal 0, below every
     * change a stream delivers after that point (their commit LSN is at or past it, their ordinal at least 1).
     * A copied row therefore loses to any streamed change of the same row and wins over any change that
     * committed before the snapshot, which a re-copy must replace.
     */
    public static long snapshot(Lsn consistentPoint) {
        long lsn = consistentPoint.value();
        if (lsn < 0 || lsn >= LSN_LIMIT) {
            throw new IllegalArgumentException("consistent point " + consistentPoint + " is beyond what the version packs ("
                    + Lsn.of(LSN_LIMIT) + ", 128 TiB of WAL)");
        }
        return lsn << ORDINAL_BITS;
    }

    /** The commit LSN a version was packed from. */
    public static Lsn commitLsn(long version) {
        return Lsn.of(version >>> ORDINAL_BITS);
    }

    /** The (possibly saturated) ordinal a version was packed from. */
    public static long ordinal(long version) {
        return version & MAX_ORDINAL;
    }
}
