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
        assertTrue(above(ChangeVersion.of(later, 1), ChangeVersion.of(earlier, 1_000_000)));
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

    /**
     * Versions of the earlier 16-bit-ordinal layout ({@code lsn << 16 | ordinal}, rows already in tables) stay below
     * the version of any change that commits after them, even one whose ordinal passed 65535.
     */
    @Test
    void earlierLayoutsVersionsStayBelowLaterChanges() {
        Lsn earlier = Lsn.parse("16/B374D848");
        BigInteger old = BigInteger.valueOf((earlier.value() << 16) | 65535);
        assertTrue(above(ChangeVersion.of(earlier.plus(1), 1), old));
        assertTrue(above(ChangeVersion.snapshot(earlier.plus(1)), old));
        // the same change sent again after an upgrade: above its own earlier version
        assertTrue(above(ChangeVersion.of(earlier, 1), old));
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

    /** Past 65535 (where the ordinal saturated before) every change of one transaction still has its own version. */
    @Test
    void ordinalsPast65535StayDistinctAndOrdered() {
        Lsn commit = Lsn.parse("1/0");
        assertTrue(above(ChangeVersion.of(commit, 65536), ChangeVersion.of(commit, 65535)));
        assertTrue(above(ChangeVersion.of(commit, 150_001), ChangeVersion.of(commit, 150_000)));
        assertEquals(150_001, ChangeVersion.ordinal(ChangeVersion.of(commit, 150_001)));
        assertTrue(above(ChangeVersion.of(commit.plus(1), 1), ChangeVersion.of(commit, ChangeVersion.MAX_ORDINAL)));
        assertThrows(IllegalArgumentException.class, () -> ChangeVersion.of(commit, ChangeVersion.MAX_ORDINAL + 1));
    }
}
