package io.tablecdc.bigquery;

import java.time.DateTimeException;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;

/**
 * A table's cursor: the largest watermark value seen, as RFC 3339 text in UTC with nine fractional digits (the
 * offset and catalog form), e.g. {@code 2024-03-01T10:00:00.123456000Z}. BigQuery keeps microseconds, so the last
 * three digits are always 0 for cursors this connector writes; a rewound cursor may have any precision.
 */
public final class Cursor {
    private static final DateTimeFormatter FORMAT = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSSSSSSSS'Z'")
            .withZone(ZoneOffset.UTC);

    private Cursor() {
    }

    public static String format(Instant instant) {
        return FORMAT.format(instant);
    }

    /**
     * Parses a cursor; {@code ""} (no cursor yet) is null.
     *
     * @throws IllegalArgumentException explaining the expected form
     */
    public static Instant parse(String text) {
        if (text == null || text.isBlank()) {
            return null;
        }
        try {
            return Instant.parse(text.trim());
        } catch (DateTimeException e) {
            throw new IllegalArgumentException("cursor '" + text + "' is not an RFC 3339 UTC timestamp such as"
                    + " 2024-03-01T10:00:00.123456000Z");
        }
    }

    /** Microseconds since the epoch (BigQuery's precision), rounding down. */
    public static long micros(Instant instant) {
        return Math.addExact(Math.multiplyExact(instant.getEpochSecond(), 1_000_000L), instant.getNano() / 1_000);
    }

    public static Instant ofMicros(long micros) {
        return Instant.EPOCH.plus(micros, ChronoUnit.MICROS);
    }
}
