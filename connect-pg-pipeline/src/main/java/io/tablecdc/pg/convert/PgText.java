package io.tablecdc.pg.convert;

import java.io.ByteArrayOutputStream;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * Parsers for the text output formats of PostgreSQL types, as a session with {@code DateStyle=ISO} (what
 * pgjdbc sets), {@code IntervalStyle=postgres} or {@code iso_8601} and either {@code bytea_output} prints them.
 * Pure functions; they throw {@link IllegalArgumentException} on text they do not recognise.
 */
final class PgText {
    static final long MICROS_PER_SECOND = 1_000_000L;
    static final long MICROS_PER_DAY = 86_400L * MICROS_PER_SECOND;

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
        int dateEnd = dateEnd(text);
        int end = text.length();
        boolean bc = dateEnd >= 0 && isBc(text, dateEnd);
        if (dateEnd < 0 || (dateEnd != end && !bc)) {
            throw new IllegalArgumentException("not an ISO date: '" + text + "'");
        }
        return date(text, dateEnd, bc).toEpochDay();
    }

    /** Microseconds since midnight of {@code HH:MM:SS[.ffffff]}; {@code 24:00:00} is a full day. */
    static long microsOfDay(String text) {
        int clockEnd = clockEnd(text, 0);
        if (clockEnd != text.length()) {
            throw new IllegalArgumentException("not a time of day: '" + text + "'");
        }
        long micros = clockAfterHours(text, 2, twoDigits(text, 0), clockEnd);
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
     *
     * <p>Text: {@code YYYY-MM-DD HH:MM:SS[.f{1,6}][(+|-)HH[:MM][:SS]][ BC]}, scanned by hand: once per value of
     * every timestamp column of the copy and the streams, where a regular expression cost more than the rest of the
     * conversion.
     */
    static long epochMicros(String text) {
        if (isInfinity(text)) {
            return text.startsWith("-") ? Long.MIN_VALUE : Long.MAX_VALUE;
        }
        int end = text.length();
        int dateEnd = dateEnd(text);
        int clockAt = dateEnd + 1;
        int clockEnd = dateEnd < 0 || clockAt >= end || text.charAt(dateEnd) != ' ' ? -1 : clockEnd(text, clockAt);
        // the offset: a sign, two digits of hours, then up to two ":" and two digits (minutes, then seconds)
        int offsetAt = -1;
        int offsetParts = 0;
        int at = clockEnd;
        if (at >= 0 && at < end && (text.charAt(at) == '+' || text.charAt(at) == '-') && isDigits(text, at + 1, 2)) {
            offsetAt = at;
            offsetParts = 1;
            at += 3;
            while (offsetParts < 3 && at < end && text.charAt(at) == ':' && isDigits(text, at + 1, 2)) {
                offsetParts++;
                at += 3;
            }
        }
        boolean bc = at >= 0 && isBc(text, at);
        if (at < 0 || (at != end && !bc)) {
            throw new IllegalArgumentException("not an ISO timestamp: '" + text + "'");
        }
        LocalDate day = date(text, dateEnd, bc);
        long clock = clockAfterHours(text, clockAt + 2, twoDigits(text, clockAt), clockEnd);
        if (clock >= MICROS_PER_DAY) {
            throw new IllegalArgumentException("time of day after 23:59:59.999999: '" + text + "'");
        }
        long offsetSeconds = 0;
        if (offsetParts > 0) {
            offsetSeconds = twoDigits(text, offsetAt + 1) * 3600L
                    + (offsetParts < 2 ? 0 : twoDigits(text, offsetAt + 4) * 60L)
                    + (offsetParts < 3 ? 0 : twoDigits(text, offsetAt + 7));
            if (text.charAt(offsetAt) == '-') {
                offsetSeconds = -offsetSeconds;
            }
        }
        long seconds = Math.subtractExact(day.atStartOfDay().toEpochSecond(ZoneOffset.UTC), offsetSeconds);
        return Math.addExact(Math.multiplyExact(seconds, MICROS_PER_SECOND), clock);
    }

    private static boolean isInfinity(String text) {
        return text.equals("infinity") || text.equals("-infinity");
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    /** Whether {@code count} ASCII digits start at {@code at}. */
    private static boolean isDigits(String text, int at, int count) {
        if (at + count > text.length()) {
            return false;
        }
        for (int i = at; i < at + count; i++) {
            if (!isDigit(text.charAt(i))) {
                return false;
            }
        }
        return true;
    }

    private static int twoDigits(String text, int at) {
        return (text.charAt(at) - '0') * 10 + (text.charAt(at + 1) - '0');
    }

    /** Whether the text ends with exactly {@code " BC"} at {@code at}. */
    private static boolean isBc(String text, int at) {
        return at + 3 == text.length() && text.startsWith(" BC", at);
    }

    /** The end of {@code YYYY-MM-DD} (four or more digits of year) at the start of the text, or -1. */
    private static int dateEnd(String text) {
        int year = 0;
        while (year < text.length() && isDigit(text.charAt(year))) {
            year++;
        }
        if (year < 4 || year + 6 > text.length() || text.charAt(year) != '-' || !isDigits(text, year + 1, 2)
                || text.charAt(year + 3) != '-' || !isDigits(text, year + 4, 2)) {
            return -1;
        }
        return year + 6;
    }

    /** The date of the text's {@code YYYY-MM-DD}, which ends at {@code dateEnd}. */
    private static LocalDate date(String text, int dateEnd, boolean bc) {
        int yearEnd = dateEnd - 6;
        int y;
        if (yearEnd <= 9) {
            y = 0;
            for (int i = 0; i < yearEnd; i++) {
                y = y * 10 + (text.charAt(i) - '0');
            }
        } else {
            // fails as before on a year beyond an int
            y = Integer.parseInt(text.substring(0, yearEnd));
        }
        // PostgreSQL has no year 0: 1 BC is ISO year 0, 2 BC is -1
        return LocalDate.of(bc ? 1 - y : y, twoDigits(text, yearEnd + 1), twoDigits(text, yearEnd + 4));
    }

    /**
     * The end of {@code HH:MM:SS[.f{1,6}]} at {@code at} (two digits of hours), or -1; a dot must be followed by one to
     * six digits.
     */
    private static int clockEnd(String text, int at) {
        if (!isDigits(text, at, 2)) {
            return -1;
        }
        return minutesSecondsEnd(text, at + 2);
    }

    /** The end of {@code :MM:SS[.f{1,6}]} at {@code at}, or -1. */
    private static int minutesSecondsEnd(String text, int at) {
        if (at + 6 > text.length() || text.charAt(at) != ':' || !isDigits(text, at + 1, 2) || text.charAt(at + 3) != ':'
                || !isDigits(text, at + 4, 2)) {
            return -1;
        }
        int end = at + 6;
        if (end < text.length() && text.charAt(end) == '.') {
            int digits = end + 1;
            while (digits < text.length() && isDigit(text.charAt(digits))) {
                digits++;
            }
            int count = digits - end - 1;
            if (count < 1 || count > 6) {
                return -1;
            }
            end = digits;
        }
        return end;
    }

    /** {@code hours} plus the {@code :MM:SS[.f]} that starts at {@code colon} and ends at {@code end}. */
    private static long clockAfterHours(String text, int colon, long hours, int end) {
        checkMinutesSeconds(text, colon);
        int m = twoDigits(text, colon + 1);
        int s = twoDigits(text, colon + 4);
        return hours * 3_600 * MICROS_PER_SECOND + m * 60 * MICROS_PER_SECOND + s * MICROS_PER_SECOND
                + fractionMicros(text, colon + 6, end);
    }

    private static void checkMinutesSeconds(String text, int colon) {
        if (twoDigits(text, colon + 1) > 59 || twoDigits(text, colon + 4) > 59) {
            throw new IllegalArgumentException("minutes or seconds out of range: " + text.substring(colon + 1, colon + 3) + ":"
                    + text.substring(colon + 4, colon + 6));
        }
    }

    /** The microseconds of {@code .f{1,6}} from {@code dot} to {@code end}; 0 when there is none. */
    private static long fractionMicros(String text, int dot, int end) {
        long micros = 0;
        int digits = 0;
        for (int i = dot + 1; i < end; i++) {
            micros = micros * 10 + (text.charAt(i) - '0');
            digits++;
        }
        for (int i = digits; i < 6; i++) {
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
        List<String> tokens = spaceSeparated(text.trim());
        long months = 0;
        long days = 0;
        long micros = 0;
        boolean seenTime = false;
        for (int i = 0; i < tokens.size(); i++) {
            String token = tokens.get(i);
            // [+-]H+:MM:SS[.f{1,6}]
            int hoursAt = token.startsWith("+") || token.startsWith("-") ? 1 : 0;
            int hoursEnd = hoursAt;
            while (hoursEnd < token.length() && isDigit(token.charAt(hoursEnd))) {
                hoursEnd++;
            }
            if (hoursEnd > hoursAt && minutesSecondsEnd(token, hoursEnd) == token.length()) {
                if (seenTime || i != tokens.size() - 1) {
                    throw new IllegalArgumentException("not a postgres-style interval: '" + text + "'");
                }
                seenTime = true;
                int colon = hoursEnd;
                // minutes and seconds are checked before the hours are read (which may not fit a long)
                checkMinutesSeconds(token, colon);
                long value = clockAfterHours(token, colon, Long.parseLong(token.substring(hoursAt, hoursEnd)), token.length());
                micros = token.startsWith("-") ? -value : value;
                continue;
            }
            if (i + 1 >= tokens.size()) {
                throw new IllegalArgumentException("not a postgres-style interval (IntervalStyle must be postgres or iso_8601): '" + text + "'");
            }
            long amount;
            try {
                amount = Long.parseLong(token);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("not a postgres-style interval (IntervalStyle must be postgres or iso_8601): '" + text + "'", e);
            }
            String unit = tokens.get(++i);
            switch (unit) {
                case "year", "years" -> months = Math.addExact(months, Math.multiplyExact(amount, 12));
                case "mon", "mons" -> months = Math.addExact(months, amount);
                case "day", "days" -> days = Math.addExact(days, amount);
                default -> throw new IllegalArgumentException("unknown interval unit '" + unit + "' in '" + text + "'");
            }
        }
        return formatIso(months, days, micros);
    }

    /** The runs of the text between spaces; {@code [""]} for empty text (as {@code split(" +")} on trimmed text). */
    private static List<String> spaceSeparated(String text) {
        List<String> tokens = new ArrayList<>(8);
        int start = 0;
        while (true) {
            int space = text.indexOf(' ', start);
            if (space < 0) {
                tokens.add(text.substring(start));
                return tokens;
            }
            tokens.add(text.substring(start, space));
            start = space;
            while (start < text.length() && text.charAt(start) == ' ') {
                start++;
            }
        }
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
