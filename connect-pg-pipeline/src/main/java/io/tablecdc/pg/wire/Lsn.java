package io.tablecdc.pg.wire;

/**
 * A PostgreSQL log sequence number: an unsigned 64-bit byte position in the WAL, written {@code X/Y} with
 * the high and low 32 bits in upper-case hexadecimal (as {@code pg_lsn} prints it).
 *
 * <p>Ordering is unsigned: {@code FFFFFFFF/0} is after {@code 0/1}.
 */
public record Lsn(long value) implements Comparable<Lsn> {
    /** {@code 0/0}: "no position" in the protocol (e.g. an unset origin LSN). */
    public static final Lsn INVALID = new Lsn(0L);

    public static Lsn of(long value) {
        return new Lsn(value);
    }

    /**
     * Parses {@code X/Y} where each half is 1 to 8 hexadecimal digits (either case).
     *
     * @throws IllegalArgumentException naming the text when it is not an LSN
     */
    public static Lsn parse(String text) {
        if (text == null) {
            throw new IllegalArgumentException("an LSN must be X/Y in hexadecimal, got null");
        }
        int slash = text.indexOf('/');
        if (slash <= 0 || slash > 8 || slash == text.length() - 1 || text.length() - slash - 1 > 8
                || text.indexOf('/', slash + 1) >= 0) {
            throw new IllegalArgumentException("an LSN must be X/Y with 1 to 8 hexadecimal digits on each side, got '" + text + "'");
        }
        try {
            long high = parseHex(text, 0, slash);
            long low = parseHex(text, slash + 1, text.length());
            return new Lsn((high << 32) | low);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("an LSN must be X/Y with 1 to 8 hexadecimal digits on each side, got '" + text + "'", e);
        }
    }

    private static long parseHex(String text, int from, int to) {
        for (int i = from; i < to; i++) {
            if (Character.digit(text.charAt(i), 16) < 0) {
                // Long.parseLong would accept a sign; an LSN has none
                throw new NumberFormatException("not a hexadecimal digit: '" + text.charAt(i) + "'");
            }
        }
        return Long.parseLong(text, from, to, 16);
    }

    public boolean isValid() {
        return value != 0L;
    }

    /** The LSN {@code bytes} further on (or back, when negative); fails on unsigned overflow. */
    public Lsn plus(long bytes) {
        long result = value + bytes;
        boolean overflow = bytes >= 0
                ? Long.compareUnsigned(result, value) < 0
                : Long.compareUnsigned(result, value) > 0;
        if (overflow) {
            throw new ArithmeticException("LSN " + this + " plus " + bytes + " bytes leaves the 64-bit WAL range");
        }
        return new Lsn(result);
    }

    /** How many bytes of WAL lie between {@code earlier} and this LSN (negative when {@code earlier} is after). */
    public long minus(Lsn earlier) {
        long difference = value - earlier.value;
        // the true difference of two unsigned 64-bit values can exceed a signed long; WAL never gets there
        boolean after = Long.compareUnsigned(value, earlier.value) >= 0;
        if (after != (difference >= 0)) {
            throw new ArithmeticException("the distance from " + earlier + " to " + this + " does not fit a signed 64-bit integer");
        }
        return difference;
    }

    public boolean isBefore(Lsn other) {
        return compareTo(other) < 0;
    }

    public boolean isAfter(Lsn other) {
        return compareTo(other) > 0;
    }

    public static Lsn max(Lsn a, Lsn b) {
        return a.compareTo(b) >= 0 ? a : b;
    }

    @Override
    public int compareTo(Lsn other) {
        return Long.compareUnsigned(value, other.value);
    }

    @Override
    public String toString() {
        return Long.toHexString(value >>> 32).toUpperCase(java.util.Locale.ROOT) + "/"
                + Long.toHexString(value & 0xFFFFFFFFL).toUpperCase(java.util.Locale.ROOT);
    }
}
