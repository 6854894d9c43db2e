package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import io.tablecdc.pg.wire.Lsn;

class ChangeVersionTest {
    private static final BigInteger UINT128_LIMIT = BigInteger.ONE.shiftLeft(128);

    private static boolean above(BigInteger a, BigInteger b) {
        return a.compareTo(b) > 0;
    }

    @Test
    void packsAndUnpacks() {
        BigInteger v = ChangeVersion.of(Lsn.parse("16/B374D848"), 3);
        assertEquals(Lsn.parse("16/B374D848"), ChangeVersion.commitLsn(v));
        assertEquals(3, ChangeVersion.ordinal(v));
        assertTrue(v.signum() > 0);
    }

    /** A change of a later transaction must win whatever its ordinal and the earlier one's. */
    @Test
    void laterCommitWinsOverAnyOrdinalOfAnEarlierOne() {
        Lsn earlier = Lsn.parse("0/1000");
        Lsn later = earlier.plus(1);
        assertTrue(above(ChangeVersion.of(later, 1), ChangeVersion.of(earlier, ChangeVersion.MAX_ORDINAL)));
        assertTrue(above(ChangeVersion.of(later, 1), ChangeVersion.of(earlier, 1_000_000)), "saturated ordinals stay below");
    }

    @Test
    void ordinalsOrderChangesWithinOneTransaction() {
        Lsn commit = Lsn.parse("A/0");
        List<BigInteger> versions = new ArrayList<>();
        for (int i = 1; i <= 1000; i++) {
            versions.add(ChangeVersion.of(commit, i));
        }
        for (int i = 1; i < versions.size(); i++) {
            assertTrue(above(versions.get(i), versions.get(i - 1)));
        }
    }

    /** Below 2^47 the value is what the 63-bit scheme packed: rows already in a table keep their order. */
    @Test
    void belowTheOldLimitTheValueIsUnchanged() {
        long oldLimit = 1L << 47;
        Lsn last = Lsn.of(oldLimit - 1);
        assertEquals(BigInteger.valueOf(Long.MAX_VALUE), ChangeVersion.of(last, ChangeVersion.MAX_ORDINAL));
        assertEquals(BigInteger.valueOf((Lsn.parse("16/B374D848").value() << 16) | 3),
                ChangeVersion.of(Lsn.parse("16/B374D848"), 3));
    }

    /**
     * The commit LSNs that failed every change before (at and past 2^47 = 8000/0, up to 2^63 and the largest LSN)
     * now order like any other, on both sides of each boundary, and stay below 2^128 as decimal text.
     */
    @Test
    void everyLsnPacksAndOrdersAcrossTheFormerLimitsUpToTheLargest() {
        List<Lsn> boundaries = List.of(Lsn.parse("7FFF/FFFFFFFF"), Lsn.parse("8000/0"), Lsn.parse("8000/1"),
                Lsn.parse("7FFFFFFF/FFFFFFFF"), Lsn.parse("80000000/0"), Lsn.parse("80000000/1"),
                Lsn.parse("FFFFFFFF/FFFFFFFE"), Lsn.parse("FFFFFFFF/FFFFFFFF"));
        BigInteger previous = BigInteger.valueOf(-1);
        for (Lsn lsn : boundaries) {
            BigInteger snapshot = ChangeVersion.snapshot(lsn);
            BigInteger first = ChangeVersion.of(lsn, 1);
            BigInteger last = ChangeVersion.of(lsn, ChangeVersion.MAX_ORDINAL);
            assertTrue(above(snapshot, previous), lsn + " above the previous boundary's changes");
            assertTrue(above(first, snapshot) && above(last, first), lsn.toString());
            assertEquals(lsn, ChangeVersion.commitLsn(last), lsn.toString());
            assertEquals(ChangeVersion.MAX_ORDINAL, ChangeVersion.ordinal(last));
            assertTrue(last.compareTo(ChangeVersion.LIMIT) < 0 && last.compareTo(UINT128_LIMIT) < 0);
            assertEquals(last, new BigInteger(last.toString()), "the header's decimal text round-trips");
            previous = last;
        }
        assertEquals(ChangeVersion.LIMIT.subtract(BigInteger.ONE),
                ChangeVersion.of(Lsn.parse("FFFFFFFF/FFFFFFFF"), ChangeVersion.MAX_ORDINAL));
        assertTrue(above(ChangeVersion.of(Lsn.parse("80000000/0"), 1), BigInteger.valueOf(Long.MAX_VALUE)),
                "past 2^63 no signed wrap-around");
    }

    @Test
    void anOrdinalBelowOneIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> ChangeVersion.of(Lsn.parse("0/1"), 0));
    }

    @Test
    void ordinalSaturates() {
        Lsn commit = Lsn.parse("1/0");
        assertEquals(ChangeVersion.of(commit, ChangeVersion.MAX_ORDINAL), ChangeVersion.of(commit, ChangeVersion.MAX_ORDINAL + 5));
    }
}
