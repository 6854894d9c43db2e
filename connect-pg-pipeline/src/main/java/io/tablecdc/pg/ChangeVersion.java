package io.tablecdc.pg;

import java.math.BigInteger;

import io.tablecdc.pg.wire.Lsn;

/**
 * The {@code tablecdc.version} of a streamed change: (commit LSN, ordinal) as one non-negative integer below
 * 2<sup>112</sup>, written in the header as a decimal string; the sink stores it in the UInt128
 * {@code _tablecdc_version} column.
 *
 * <pre>
 *   bits 111..48                               bits 47..0
 *   commit LSN (all 64 bits, unsigned)          ordinal of the change within its transaction and table (48 bits)
 * </pre>
 *
 * <p>Why it orders every change of one row: two changes of one row in different transactions are ordered by
 * their commit LSNs (a row is locked until its transaction commits, so the later change commits later), and
 * the commit LSN is the high part; two changes of one row in the same transaction share the commit LSN and
 * are ordered by the ordinal, which counts the table's changes in the transaction from 1. The commit LSN,
 * never the change's own LSN, is used: a transaction that began before another but committed after it must
 * win. Rows of a copy take ordinal 0 at their snapshot's consistent point ({@link #snapshot}).
 *
 * <p>Every LSN Postgres can reach packs, and no two changes of one flow share a version: 2<sup>48</sup> changes of
 * one table in one transaction is more rows than a table can hold. (Earlier builds kept 16 bits for the ordinal,
 * which saturated at 65535, so that changes past the 65535th of one table in one transaction shared a version and
 * a load of several batches in one {@code INSERT} could keep the older image.) Rows those builds loaded keep their
 * smaller versions: every change sent after an upgrade commits after them (or is one of them sent again from the
 * slot), so it takes a larger version in either layout. A final table whose {@code _tablecdc_version} is the
 * UInt64 of the earliest builds cannot hold these versions: the sink stops that table and says to reload it.
 */
public final class ChangeVersion {
    /** Bits of the ordinal. */
    public static final int ORDINAL_BITS = 48;
    /** The largest ordinal. */
    public static final long MAX_ORDINAL = (1L << ORDINAL_BITS) - 1;
    /** Above every version: 2^112 (the largest LSN, 2^64 - 1, with the largest ordinal is one below). */
    public static final BigInteger LIMIT = BigInteger.ONE.shiftLeft(64 + ORDINAL_BITS);

    private ChangeVersion() {
    }

    /**
     * The version of the {@code ordinal}-th change (from 1) of a table in the transaction committed at
     * {@code commitLsn}.
     *
     * @throws IllegalArgumentException when the ordinal is below 1 or above {@link #MAX_ORDINAL} (two changes would
     *                                  share a version)
     */
    public static BigInteger of(Lsn commitLsn, long ordinal) {
        if (ordinal < 1 || ordinal > MAX_ORDINAL) {
            throw new IllegalArgumentException("a change's ordinal is from 1 to " + MAX_ORDINAL + ": " + ordinal);
        }
        return unsigned(commitLsn.value()).shiftLeft(ORDINAL_BITS).or(BigInteger.valueOf(ordinal));
    }

    /**
     * The version of a row copied in the snapshot exported at {@code consistentPoint}: ordinal 0, below every
     * change a stream delivers after that point (their commit LSN is at or past it, their ordinal at least 1).
     * A copied row therefore loses to any streamed change of the same row and wins over any change that
     * committed before the snapshot, which a re-copy must replace.
     */
    public static BigInteger snapshot(Lsn consistentPoint) {
        return unsigned(consistentPoint.value()).shiftLeft(ORDINAL_BITS);
    }

    /** The commit LSN a version was packed from. */
    public static Lsn commitLsn(BigInteger version) {
        return Lsn.of(version.shiftRight(ORDINAL_BITS).longValue());
    }

    /** The ordinal a version was packed from. */
    public static long ordinal(BigInteger version) {
        return version.longValue() & MAX_ORDINAL;
    }

    /** An LSN is an unsigned 64-bit number. */
    private static BigInteger unsigned(long lsn) {
        BigInteger value = BigInteger.valueOf(lsn & Long.MAX_VALUE);
        return lsn < 0 ? value.setBit(63) : value;
    }
}
