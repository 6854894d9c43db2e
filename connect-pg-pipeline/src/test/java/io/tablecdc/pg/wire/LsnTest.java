package io.tablecdc.pg.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class LsnTest {
    @Test
    void formatsLikePgLsnWithUpperCaseHexAndNoPadding() {
        assertEquals("0/0", Lsn.INVALID.toString());
        assertEquals("16/B374D848", Lsn.of(0x16B374D848L).toString());
        assertEquals("FFFFFFFF/FFFFFFFF", Lsn.of(-1L).toString());
    }

    @Test
    void parsesWhatItFormatsIncludingLowerCase() {
        assertEquals(Lsn.of(0x16B374D848L), Lsn.parse("16/B374D848"));
        assertEquals(Lsn.of(0x16B374D848L), Lsn.parse("16/b374d848"));
        assertEquals(Lsn.of(-1L), Lsn.parse("FFFFFFFF/FFFFFFFF"));
        assertEquals(Lsn.of(0x100000000L), Lsn.parse("1/0"));
    }

    @Test
    void rejectsTextThatIsNotAnLsnInsteadOfReadingAWrongPosition() {
        for (String bad : new String[] {"", "/", "1/", "/1", "1", "1/2/3", "123456789/0", "0/123456789", "-1/0", "0/+1", "G/0", " 1/0"}) {
            assertThrows(IllegalArgumentException.class, () -> Lsn.parse(bad), bad);
        }
        assertThrows(IllegalArgumentException.class, () -> Lsn.parse(null));
    }

    @Test
    void ordersUnsignedSoThatHighPositionsAreNotBeforeLowOnes() {
        Lsn high = Lsn.parse("80000000/0");
        Lsn low = Lsn.parse("0/1");
        assertTrue(high.isAfter(low));
        assertTrue(low.isBefore(high));
        assertEquals(high, Lsn.max(low, high));
        assertEquals(0, Lsn.parse("A/1").compareTo(Lsn.parse("a/1")));
    }

    @Test
    void arithmeticCrossesTheThirtyTwoBitBoundary() {
        assertEquals(Lsn.parse("1/0"), Lsn.parse("0/FFFFFFFF").plus(1));
        assertEquals(Lsn.parse("0/FFFFFFFF"), Lsn.parse("1/0").plus(-1));
        assertEquals(1L, Lsn.parse("1/0").minus(Lsn.parse("0/FFFFFFFF")));
        assertEquals(-1L, Lsn.parse("0/FFFFFFFF").minus(Lsn.parse("1/0")));
    }

    @Test
    void arithmeticFailsInsteadOfWrappingAround() {
        assertThrows(ArithmeticException.class, () -> Lsn.of(-1L).plus(1));
        assertThrows(ArithmeticException.class, () -> Lsn.INVALID.plus(-1));
        assertThrows(ArithmeticException.class, () -> Lsn.of(-1L).minus(Lsn.INVALID));
    }

    @Test
    void invalidIsZero() {
        assertTrue(!Lsn.INVALID.isValid());
        assertTrue(Lsn.of(1).isValid());
    }
}
