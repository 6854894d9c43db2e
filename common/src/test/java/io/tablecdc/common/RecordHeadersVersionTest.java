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

    /** The version as it was read before the hand-written check (issue 20): a regular expression, then BigInteger. */
    private static String regexOutcome(String text) {
        if (text == null) {
            return "refused";
        }
        String trimmed = text.trim();
        if (!trimmed.matches("[0-9]{1,39}")) {
            return "refused";
        }
        BigInteger value = new BigInteger(trimmed);
        return value.compareTo(RecordHeaders.VERSION_LIMIT) >= 0 ? "refused" : "= " + value;
    }

    private static String outcome(String text) {
        try {
            return "= " + RecordHeaders.versionValue(text);
        } catch (IllegalArgumentException e) {
            assertTrue(e.getMessage().contains("tablecdc.version"), e.getMessage());
            return "refused";
        }
    }

    /** Both sides of every boundary: 18/19 digits (the long fast path), 39/40 digits, 2^128, whitespace, non-ASCII digits. */
    @Test
    void theHandWrittenCheckAcceptsAndRefusesWhatTheRegularExpressionDid() {
        BigInteger limit = BigInteger.ONE.shiftLeft(128);
        java.util.List<String> texts = new java.util.ArrayList<>(java.util.Arrays.asList(null, "", " ", "0", "00", " 7 ", "\t7\n",
                "999999999999999999", "1000000000000000000", "9223372036854775807", "9223372036854775808",
                "0000000000000000000000000000000000000001", "000000000000000000000000000000000000001",
                limit.subtract(BigInteger.ONE).toString(), limit.toString(), "9".repeat(39), "9".repeat(40), "-0", "+1", "1_000",
                "\u0663", "1\u0663", "12a", "a12", "1.0", "1 2"));
        java.util.Random random = new java.util.Random(20);
        for (int i = 0; i < 2000; i++) {
            StringBuilder text = new StringBuilder();
            int length = random.nextInt(42);
            for (int c = 0; c < length; c++) {
                text.append(random.nextInt(20) == 0 ? " -x\u0663".charAt(random.nextInt(4)) : (char) ('0' + random.nextInt(10)));
            }
            texts.add(text.toString());
        }
        for (String text : texts) {
            assertEquals(regexOutcome(text), outcome(text), "on '" + text + "'");
        }
    }
}
