package io.tablecdc.pg.convert;

import java.io.ByteArrayOutputStream;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Parsers for the text output formats of PostgreSQL types, as a session with {@code DateStyle=ISO} (what
 * pgjdbc sets), {@code IntervalStyle=postgres} or {@code iso_8601} and either {@code bytea_output} prints them.
 * Pure functions; they throw {@link IllegalArgumentException} on text they do not recognise.
 */
final class PgText {
    static final long MICROS_PER_SECOND = 1_000_000L;
    static final long MICROS_PER_DAY = 86_400L * MICROS_PER_SECOND;

    private static final Pattern DATE = Pattern.compile("(\\d{4,})-(\\d{2})-(\\d{2})( BC)?");
    private static final Pattern TIME = Pattern.compile("(\\d{2}):(\\d{2}):(\\d{2})(?:\\.(\\d{1,6}))?");
    private static final Pattern TIMESTAMP = Pattern.compile(
            "(\\d{4,})-(\\d{2})-(\\d{2}) (\\d{2}):(\\d{2}):(\\d{2})(?:\\.(\\d{1,6}))?"
                    + "(?:([+-])(\\d{2})(?::(\\d{2}))?(?::(\\d{2}))?)?( BC)?");
    private static final Pattern INTERVAL_TIME = Pattern.compile("([+-])?(\\d+):(\\d{2}):(\\d{2})(?:\\.(\\d{1,6}))?");

    private PgText() {
    }

    /** {@code t} or {@code f}. */
    static boolean bool(String text) {
        return switch (text) {
            case "t" -> true;
            case "f" -> false;
            default -> throw new IllegalArgumentException("not a boolean: '" + text + "'");
        };
    }

    /** {@code \x0a0b} (hex, the default) or the escape format ({@code \\} and {@code \ooo} octal). */
    static byte[] bytea(String text) {
        if (text.startsWith("\\x")) {
            return HexFormat.of().parseHex(text, 2, text.length());
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(text.length());
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c != '\\') {
                if (c > 0xFF) {
                    throw new IllegalArgumentException("bytea escape format holds no character above 0xFF: '" + c + "'");
                }
                out.write(c);
            } else if (i + 1 < text.length() && text.charAt(i + 1) == '\\') {
                out.write('\\');
                i++;
            } else if (i + 3 < text.length() && isOctal(text.charAt(i + 1)) && isOctal(text.charAt(i + 2)) && isOctal(text.charAt(i + 3))) {
                out.write(Integer.parseInt(text, i + 1, i + 4, 8));
                i += 3;
            } else {
                throw new IllegalArgumentException("bad bytea escape at offset " + i);
            }
        }
        return out.toByteArray();
    }

    private static boolean isOctal(char c) {
        return c >= '0' && c <= '7';
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

    /** The rendering of PostgreSQL's {@code EncodeInterval} for {@code INTSTYLE_ISO_8601}. */
    static String formatIso(long months, long days, long micros) {
        if (months == 0 && days == 0 && micros == 0) {
            return "PT0S";
        }
        StringBuilder out = new StringBuilder("P");
        part(out, months / 12, 'Y');
        part(out, months % 12, 'M');
        part(out, days, 'D');
        long hours = micros / (3_600 * MICROS_PER_SECOND);
        long rest = micros % (3_600 * MICROS_PER_SECOND);
        long minutes = rest / (60 * MICROS_PER_SECOND);
        rest = rest % (60 * MICROS_PER_SECOND);
        if (micros != 0) {
            out.append('T');
        }
        part(out, hours, 'H');
        part(out, minutes, 'M');
        if (rest != 0) {
            if (rest < 0) {
                out.append('-');
            }
            long abs = Math.abs(rest);
            out.append(abs / MICROS_PER_SECOND);
            long fraction = abs % MICROS_PER_SECOND;
            if (fraction != 0) {
                String digits = String.format("%06d", fraction);
                int end = digits.length();
                while (digits.charAt(end - 1) == '0') {
                    end--;
                }
                out.append('.').append(digits, 0, end);
            }
            out.append('S');
        }
        return out.toString();
    }

    private static void part(StringBuilder out, long value, char unit) {
        if (value != 0) {
            out.append(value).append(unit);
        }
    }

    /** Why a multi-dimensional array value is refused, and the setting that carries such a column. */
    static final String MULTI_DIMENSIONAL = "a multi-dimensional array does not fit an Array column; list the column in"
            + " the pipeline's array.text.columns to carry it as the server's array text";

    /**
     * The elements of a one-dimensional array literal ({@code {a,"b c",NULL,"NULL"}}, optionally with explicit
     * bounds {@code [0:1]={…}}): unquoted {@code NULL} is SQL null, quoted {@code "NULL"} is text, and
     * backslash escapes any character inside or outside quotes.
     *
     * @throws IllegalArgumentException for a multi-dimensional array or malformed text
     */
    static List<String> arrayElements(String text) {
        int start = 0;
        if (text.startsWith("[")) {
            // explicit lower bounds, printed when they are not 1: "[0:2]={1,2,3}"
            int equals = text.indexOf('=');
            if (equals < 0) {
                throw new IllegalArgumentException("not an array literal: '" + text + "'");
            }
            if (text.lastIndexOf('[', equals) > 0) {
                throw new IllegalArgumentException(MULTI_DIMENSIONAL + ": '" + text + "'");
            }
            start = equals + 1;
        }
        if (text.length() - start < 2 || text.charAt(start) != '{' || text.charAt(text.length() - 1) != '}') {
            throw new IllegalArgumentException("not an array literal: '" + text + "'");
        }
        List<String> elements = new ArrayList<>();
        int i = start + 1;
        int end = text.length() - 1;
        if (i == end) {
            return elements;
        }
        StringBuilder element = new StringBuilder();
        while (true) {
            while (i < end && Character.isWhitespace(text.charAt(i))) {
                i++;
            }
            if (i < end && text.charAt(i) == '{') {
                throw new IllegalArgumentException(MULTI_DIMENSIONAL + ": '" + text + "'");
            }
            element.setLength(0);
            boolean quoted = false;
            boolean escaped = false;
            if (i < end && text.charAt(i) == '"') {
                quoted = true;
                i++;
                while (true) {
                    if (i >= end) {
                        throw new IllegalArgumentException("unterminated quoted array element: '" + text + "'");
                    }
                    char c = text.charAt(i++);
                    if (c == '"') {
                        break;
                    }
                    if (c == '\\') {
                        if (i >= end) {
                            throw new IllegalArgumentException("dangling backslash in array literal: '" + text + "'");
                        }
                        c = text.charAt(i++);
                    }
                    element.append(c);
                }
                while (i < end && Character.isWhitespace(text.charAt(i))) {
                    i++;
                }
            } else {
                int lastSignificant = 0;
                while (i < end && text.charAt(i) != ',') {
                    char c = text.charAt(i++);
                    if (c == '"' || c == '{' || c == '}') {
                        throw new IllegalArgumentException("unexpected '" + c + "' in array literal: '" + text + "'");
                    }
                    if (c == '\\') {
                        if (i >= end) {
                            throw new IllegalArgumentException("dangling backslash in array literal: '" + text + "'");
                        }
                        element.append(text.charAt(i++));
                        escaped = true;
                        lastSignificant = element.length();
                    } else {
                        element.append(c);
                        if (!Character.isWhitespace(c)) {
                            lastSignificant = element.length();
                        }
                    }
                }
                element.setLength(lastSignificant);
                if (element.isEmpty() && !escaped) {
                    throw new IllegalArgumentException("empty unquoted array element: '" + text + "'");
                }
            }
            boolean isNull = !quoted && !escaped && element.toString().equalsIgnoreCase("NULL");
            elements.add(isNull ? null : element.toString());
            if (i == end) {
                return elements;
            }
            if (text.charAt(i) != ',') {
                throw new IllegalArgumentException("expected ',' at offset " + i + " of array literal: '" + text + "'");
            }
            i++;
        }
    }
}
