package io.tablecdc.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;

import org.apache.kafka.connect.header.ConnectHeaders;
import org.junit.jupiter.api.Test;

class RecordHeadersVersionTest {
    private static BigInteger parse(String text) {
        ConnectHeaders headers = new ConnectHeaders();
        headers.addString(RecordHeaders.VERSION, text);
        return RecordHeaders.versionValue(headers);
    }

    /** The header is decimal text of a non-negative integer below 2^128: parsed without overflow on both sides. */
    @Test
    void versionsUpTo2To128MinusOneParseAndLargerOnesAreRefusedNamingTheHeader() {
        BigInteger max = BigInteger.ONE.shiftLeft(128).subtract(BigInteger.ONE);
        assertEquals(BigInteger.ZERO, parse("0"));
        assertEquals(BigInteger.valueOf(Long.MAX_VALUE), parse(Long.toString(Long.MAX_VALUE)));
        assertEquals(BigInteger.ONE.shiftLeft(63), parse("9223372036854775808"), "one past a signed long");
        assertEquals(BigInteger.ONE.shiftLeft(64), parse("18446744073709551616"), "one past an unsigned long");
        assertEquals(max, parse(max.toString()));
        for (String bad : new String[] {max.add(BigInteger.ONE).toString(), "-1", "1e5", "", "0x10", "1 2"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> parse(bad), bad);
            assertTrue(e.getMessage().contains("tablecdc.version"), e.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> RecordHeaders.versionValue(new ConnectHeaders()));
    }
}
