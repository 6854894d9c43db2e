package io.tablecdc.bigquery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Instant;
import java.util.HashMap;
import java.util.Map;

import org.junit.jupiter.api.Test;

class CursorTest {
    @Test
    void rfc3339WithNanosecondsRoundTripsMicroseconds() {
        Instant t = Instant.parse("2024-03-01T10:00:00.123456Z");
        assertEquals("2024-03-01T10:00:00.123456000Z", Cursor.format(t));
        assertEquals(t, Cursor.parse(Cursor.format(t)));
        assertEquals(1_709_287_200_123_456L, Cursor.micros(t));
        assertEquals(t, Cursor.ofMicros(Cursor.micros(t)));
        assertNull(Cursor.parse(""));
    }

    @Test
    void microsecondsBefore1970() {
        Instant t = Instant.parse("1969-12-31T23:59:59.999999Z");
        assertEquals(-1L, Cursor.micros(t));
        assertEquals(t, Cursor.ofMicros(-1L));
    }

    @Test
    void versionIsTheWatermarkInNanosecondsAndZeroWithoutOneOrBefore1970() {
        assertEquals("1709287200123456000", TablePoller.version(1_709_287_200_123_456L));
        assertEquals("0", TablePoller.version(null));
        assertEquals("0", TablePoller.version(-1L));
        assertEquals("0", TablePoller.version(0L));
    }

    @Test
    void versionOfTheLargestBigQueryTimestampDoesNotOverflow() {
        // 9999-12-31T23:59:59.999999Z is 253402300799999999 µs: in nanoseconds beyond a signed 64-bit integer
        assertEquals("253402300799999999000",
                TablePoller.version(Cursor.micros(Instant.parse("9999-12-31T23:59:59.999999Z"))));
        assertEquals("9223372036854775807000", TablePoller.version(Long.MAX_VALUE));
    }

    @Test
    void offsetsAreTypeChecked() {
        assertEquals(new OffsetValue(Instant.parse("2024-03-01T10:00:00.123456Z"), 7),
                OffsetValue.of(Map.of("cursor", "2024-03-01T10:00:00.123456000Z", "batch", 7L)));
        assertEquals(new OffsetValue(null, 3), OffsetValue.of(Map.of("cursor", "", "batch", 3)));
        assertEquals(OffsetValue.NONE, OffsetValue.of(null));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> OffsetValue.of(Map.of("cursor", "yesterday", "batch", 1L)));
        assertTrue(e.getMessage().contains("yesterday") && e.getMessage().contains("RFC 3339"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> OffsetValue.of(Map.of("cursor", "", "batch", "7")));
        assertTrue(e.getMessage().contains("'batch' must be an integer"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> OffsetValue.of(Map.of("cursor", 5L, "batch", 1L)));
        assertTrue(e.getMessage().contains("'cursor' must be a string"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> OffsetValue.of(Map.of("cursor", "", "batch", -1L)));
        assertTrue(e.getMessage().contains("negative"), e.getMessage());
        Map<String, Object> extra = new HashMap<>(Map.of("cursor", "", "batch", 1L, "lsn", "0/1"));
        e = assertThrows(IllegalArgumentException.class, () -> OffsetValue.of(extra));
        assertTrue(e.getMessage().contains("unknown offset field 'lsn'"), e.getMessage());
    }
}
