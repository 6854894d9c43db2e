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
        assertEquals(1_709_287_200_123_456_000L, TablePoller.version(1_709_287_200_123_456L));
        assertEquals(0L, TablePoller.version(null));
        assertEquals(0L, TablePoller.version(-1L));
        assertTrue(TablePoller.version(Cursor.micros(Instant.parse("2262-01-01T00:00:00Z"))) > 0, "fits a signed long until 2262");
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
