package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import io.tablecdc.pg.wire.Lsn;

class ChangeVersionTest {

    @Test
    void packsAndUnpacks() {
        long v = ChangeVersion.of(Lsn.parse("16/B374D848"), 3);
        assertEquals(Lsn.parse("16/B374D848"), ChangeVersion.commitLsn(v));
        assertEquals(3, ChangeVersion.ordinal(v));
        assertTrue(v > 0);
    }

    /** A change of a later transaction must win whatever its ordinal and the earlier one's. */
    @Test
    void laterCommitWinsOverAnyOrdinalOfAnEarlierOne() {
        Lsn earlier = Lsn.parse("0/1000");
        Lsn later = earlier.plus(1);
        assertTrue(ChangeVersion.of(later, 1) > ChangeVersion.of(earlier, ChangeVersion.MAX_ORDINAL));
        assertTrue(ChangeVersion.of(later, 1) > ChangeVersion.of(earlier, 1_000_000), "saturated ordinals stay below");
    }

    @Test
    void ordinalsOrderChangesWithinOneTransaction() {
        Lsn commit = Lsn.parse("A/0");
        List<Long> versions = new ArrayList<>();
        for (int i = 1; i <= 1000; i++) {
            versions.add(ChangeVersion.of(commit, i));
        }
        for (int i = 1; i < versions.size(); i++) {
            assertTrue(versions.get(i) > versions.get(i - 1));
        }
    }

    /** The sink stores the header in UInt64 after Long.parseLong: the largest packable LSN must stay positive. */
    @Test
    void largestPackableCommitStaysANonNegativeLong() {
        long v = ChangeVersion.of(Lsn.of(ChangeVersion.LSN_LIMIT - 1), ChangeVersion.MAX_ORDINAL);
        assertTrue(v > 0);
        assertEquals(Long.MAX_VALUE, v);
        assertEquals(v, Long.parseLong(Long.toString(v)));
    }

    /** Wrapping around would let old changes beat new ones: refuse instead. */
    @Test
    void commitBeyondThePackableRangeIsRefused() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ChangeVersion.of(Lsn.of(ChangeVersion.LSN_LIMIT), 1));
        assertTrue(e.getMessage().contains("8000/0"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> ChangeVersion.of(Lsn.parse("FFFFFFFF/0"), 1));
        assertThrows(IllegalArgumentException.class, () -> ChangeVersion.of(Lsn.parse("0/1"), 0));
    }

    @Test
    void ordinalSaturates() {
        Lsn commit = Lsn.parse("1/0");
        assertEquals(ChangeVersion.of(commit, ChangeVersion.MAX_ORDINAL), ChangeVersion.of(commit, ChangeVersion.MAX_ORDINAL + 5));
    }
}
