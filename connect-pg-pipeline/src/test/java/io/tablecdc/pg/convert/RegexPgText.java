package io.tablecdc.pg.convert;

import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The regular-expression parsers {@link PgText} used before its hand-written scanners (issue 20), kept unchanged as the
 * oracle of {@link PgTextScannerPropertyTest}: the scanners must return what these return and fail where these fail.
 *
 * <p>Parsers for the text output formats of PostgreSQL types, as a session with {@code DateStyle=ISO} (what
 * pgjdbc sets), {@code IntervalStyle=postgres} or {@code iso_8601} and either {@code bytea_output} prints them.
 * Pure functions; they throw {@link IllegalArgumentException} on text they do not recognise.
 */
final class RegexPgText {
    static final long MICROS_PER_SECOND = 1_000_000L;
    static final long MICROS_PER_DAY = 86_400L * MICROS_PER_SECOND;

    private static final Pattern DATE = Pattern.compile("(\\d{4,})-(\\d{2})-(\\d{2})( BC)?");
    private static final Pattern TIME = Pattern.compile("(\\d{2}):(\\d{2}):(\\d{2})(?:\\.(\\d{1,6}))?");
    private static final Pattern TIMESTAMP = Pattern.compile(
            "(\\d{4,})-(\\d{2})-(\\d{2}) (\\d{2}):(\\d{2}):(\\d{2})(?:\\.(\\d{1,6}))?"
                    + "(?:([+-])(\\d{2})(?::(\\d{2}))?(?::(\\d{2}))?)?( BC)?");
    private static final Pattern INTERVAL_TIME = Pattern.compile("([+-])?(\\d+):(\\d{2}):(\\d{2})(?:\\.(\\d{1,6}))?");

    private RegexPgText() {
    }

    /**
     * Days since 1970-01-01 of {@code YYYY-MM-DD[ BC]}; {@code infinity} and {@code -infinity} are
     * {@link Integer#MAX_VALUE} and {@link Integer#MIN_VALUE}, as PostgreSQL itself stores them.
     */
    static long epochDay(String text) {
        if (isInfinity(text)) {
            return text.startsWith("-") ? Integer.MIN_VALUE : Integer.MAX_VALUE;
        }
        Matcher m = DATE.matcher(text);
        if (!m.matches()) {
            throw new IllegalArgumentException("not an ISO date: '" + text + "'");
        }
        return date(m.group(1), m.group(2), m.group(3), m.group(4) != null).toEpochDay();
    }

    /** Microseconds since midnight of {@code HH:MM:SS[.ffffff]}; {@code 24:00:00} is a full day. */
    static long microsOfDay(String text) {
        Matcher m = TIME.matcher(text);
        if (!m.matches()) {
            throw new IllegalArgumentException("not a time of day: '" + text + "'");
        }
        long micros = clock(m.group(1), m.group(2), m.group(3), m.group(4));
        if (micros > MICROS_PER_DAY) {
            throw new IllegalArgumentException("time of day after 24:00:00: '" + text + "'");
        }
        return micros;
    }

    /**
     * Microseconds since 1970-01-01T00:00:00Z of a {@code timestamp} (no offset: the wall clock is read as
     * UTC) or a {@code timestamptz} (with the session's offset, {@code +05:30}, {@code -03}, {@code +00:09:21});
     * {@code infinity} and {@code -infinity} are {@link Long#MAX_VALUE} and {@link Long#MIN_VALUE}, as PostgreSQL
     * itself stores them.
     */
    static long epochMicros(String text) {
        if (isInfinity(text)) {
            return text.startsWith("-") ? Long.MIN_VALUE : Long.MAX_VALUE;
        }
        Matcher m = TIMESTAMP.matcher(text);
        if (!m.matches()) {
            throw new IllegalArgumentException("not an ISO timestamp: '" + text + "'");
        }
        LocalDate day = date(m.group(1), m.group(2), m.group(3), m.group(12) != null);
        long clock = clock(m.group(4), m.group(5), m.group(6), m.group(7));
        if (clock >= MICROS_PER_DAY) {
            throw new IllegalArgumentException("time of day after 23:59:59.999999: '" + text + "'");
        }
        long offsetSeconds = 0;
        if (m.group(8) != null) {
            offsetSeconds = Integer.parseInt(m.group(9)) * 3600L
                    + (m.group(10) == null ? 0 : Integer.parseInt(m.group(10)) * 60L)
                    + (m.group(11) == null ? 0 : Integer.parseInt(m.group(11)));
            if (m.group(8).equals("-")) {
                offsetSeconds = -offsetSeconds;
            }
        }
        long seconds = Math.subtractExact(day.atStartOfDay().toEpochSecond(ZoneOffset.UTC), offsetSeconds);
        return Math.addExact(Math.multiplyExact(seconds, MICROS_PER_SECOND), clock);
    }

    private static boolean isInfinity(String text) {
        return text.equals("infinity") || text.equals("-infinity");
    }

    private static LocalDate date(String year, String month, String day, boolean bc) {
        int y = Integer.parseInt(year);
        // PostgreSQL has no year 0: 1 BC is ISO year 0, 2 BC is -1
        return LocalDate.of(bc ? 1 - y : y, Integer.parseInt(month), Integer.parseInt(day));
    }

    private static long clock(String hours, String minutes, String seconds, String fraction) {
        int m = Integer.parseInt(minutes);
        int s = Integer.parseInt(seconds);
        if (m > 59 || s > 59) {
            throw new IllegalArgumentException("minutes or seconds out of range: " + minutes + ":" + seconds);
        }
        return Long.parseLong(hours) * 3_600 * MICROS_PER_SECOND + m * 60 * MICROS_PER_SECOND + s * MICROS_PER_SECOND
                + fractionMicros(fraction);
    }

    private static long fractionMicros(String fraction) {
        if (fraction == null) {
            return 0;
        }
        long micros = Long.parseLong(fraction);
        for (int i = fraction.length(); i < 6; i++) {
            micros *= 10;
        }
        return micros;
    }

    /**
     * An interval as ISO 8601 text, written exactly as PostgreSQL writes it with {@code IntervalStyle=iso_8601}
     * ({@code P1Y2M3DT4H5M6.5S}, {@code P-1Y-2M3DT-4H}, {@code PT0S}): months, days and microseconds stay
     * separate fields because a month has no fixed length. Reads the {@code postgres} style
     * ({@code 1 year 2 mons -3 days +04:05:06.5}); text already in ISO 8601 is returned unchanged.
     */
    static String isoInterval(String text) {
        if (text.startsWith("P")) {
            return text;
        }
        String[] tokens = text.trim().split(" +");
        long months = 0;
        long days = 0;
        long micros = 0;
        boolean seenTime = false;
        for (int i = 0; i < tokens.length; i++) {
            Matcher time = INTERVAL_TIME.matcher(tokens[i]);
            if (time.matches()) {
                if (seenTime || i != tokens.length - 1) {
                    throw new IllegalArgumentException("not a postgres-style interval: '" + text + "'");
                }
                seenTime = true;
                long value = clock(time.group(2), time.group(3), time.group(4), time.group(5));
                micros = "-".equals(time.group(1)) ? -value : value;
                continue;
            }
            if (i + 1 >= tokens.length) {
                throw new IllegalArgumentException("not a postgres-style interval (IntervalStyle must be postgres or iso_8601): '" + text + "'");
            }
            long amount;
            try {
                amount = Long.parseLong(tokens[i]);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("not a postgres-style interval (IntervalStyle must be postgres or iso_8601): '" + text + "'", e);
            }
            switch (tokens[++i]) {
                case "year", "years" -> months = Math.addExact(months, Math.multiplyExact(amount, 12));
                case "mon", "mons" -> months = Math.addExact(months, amount);
                case "day", "days" -> days = Math.addExact(days, amount);
                default -> throw new IllegalArgumentException("unknown interval unit '" + tokens[i] + "' in '" + text + "'");
            }
        }
        return formatIso(months, days, micros);
    }

    private static String formatIso(long months, long days, long micros) {
        return PgText.formatIso(months, days, micros);
    }
}
