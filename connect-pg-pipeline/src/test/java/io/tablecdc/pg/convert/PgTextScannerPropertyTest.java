package io.tablecdc.pg.convert;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.function.Function;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;

/**
 * {@link PgText}'s hand-written scanners of dates, times, timestamps and intervals against the regular expressions
 * they replaced ({@link RegexPgText}): on the same text both return the same value, or both fail with the same
 * exception and message. The texts are built from the grammar's pieces with every piece also too short, too long or
 * missing, then mutated by a character inserted, removed or replaced, so that both sides of every boundary of the
 * grammar are tried.
 */
class PgTextScannerPropertyTest {

    /** The value, or the exception's class and message. */
    private static String outcome(Function<String, Object> parse, String text) {
        try {
            return "= " + parse.apply(text);
        } catch (RuntimeException e) {
            return e.getClass().getName() + ": " + e.getMessage();
        }
    }

    private static void same(Function<String, Object> scanner, Function<String, Object> regex, String text) {
        assertEquals(outcome(regex, text), outcome(scanner, text), "on '" + text + "'");
    }

    @Property(tries = 3000)
    void timestampsParseAsWithTheRegularExpression(@ForAll("timestamps") String text) {
        same(PgText::epochMicros, RegexPgText::epochMicros, text);
    }

    @Property(tries = 2000)
    void datesParseAsWithTheRegularExpression(@ForAll("dates") String text) {
        same(PgText::epochDay, RegexPgText::epochDay, text);
    }

    @Property(tries = 2000)
    void timesParseAsWithTheRegularExpression(@ForAll("times") String text) {
        same(PgText::microsOfDay, RegexPgText::microsOfDay, text);
    }

    @Property(tries = 2000)
    void intervalsParseAsWithTheRegularExpression(@ForAll("intervals") String text) {
        same(PgText::isoInterval, RegexPgText::isoInterval, text);
    }

    @Property(tries = 2000)
    void anyShortTextOfTheGrammarsCharactersParsesAsWithTheRegularExpression(@ForAll("noise") String text) {
        same(PgText::epochMicros, RegexPgText::epochMicros, text);
        same(PgText::epochDay, RegexPgText::epochDay, text);
        same(PgText::microsOfDay, RegexPgText::microsOfDay, text);
        same(PgText::isoInterval, RegexPgText::isoInterval, text);
    }

    @Example
    void edgesParseAsWithTheRegularExpression() {
        for (String text : List.of("2024-02-29 23:59:59.999999+05:30", "2024-02-29 23:59:59.9999999+05:30",
                "2024-02-29 23:59:59.+05", "2024-02-29 23:59:59+05:30:15", "2024-02-29 23:59:59+05:30:15:01",
                "2024-02-29 23:59:59+5", "2024-02-29 23:59:59+05:3", "0001-01-01 00:00:00 BC", "0001-01-01 00:00:00+00 BC",
                "0001-01-01 00:00:00BC", "0001-01-01 00:00:00 BC ", "294276-12-31 23:59:59.999999", "294277-01-01 00:00:00",
                "12345678901-01-01 00:00:00", "2023-02-29 00:00:00", "2024-13-01 00:00:00", "2024-01-01 24:00:00",
                "2024-01-01 23:60:00", "2024-01-01 23:00:60", "2024-01-01T00:00:00", "2024-01-01  00:00:00", "2024-01-01 ",
                "2024-01-01", "infinity", "-infinity", "+infinity", "", " ", "٢٠٢٤-01-01 00:00:00")) {
            same(PgText::epochMicros, RegexPgText::epochMicros, text);
        }
        for (String text : List.of("2024-02-29", "0001-01-01 BC", "0001-01-01 BC ", "0001-01-01BC", "5874897-12-31",
                "99999999999-01-01", "999-01-01", "2024-1-01", "2024-01-1", "infinity", "-infinity", "")) {
            same(PgText::epochDay, RegexPgText::epochDay, text);
        }
        for (String text : List.of("24:00:00", "24:00:00.000001", "23:59:59.999999", "23:59:59.9999990", "00:00:00.",
                "0:00:00", "00:60:00", "00:00:60", "99:59:59", "")) {
            same(PgText::microsOfDay, RegexPgText::microsOfDay, text);
        }
        for (String text : List.of("1 year 2 mons -3 days +04:05:06.5", "-04:05:06", "+04:05:06.1234567", "00:00:00",
                "", "   ", " 1 day ", "1  day", "1\tday", "1 day 2 days", "1 fortnight", "9223372036854775807 years",
                "99999999999999999999:00:00", "99999999999999999999:60:00", "01:02:03 1 day", "1 day 01:02:03 01:02:03",
                "1", "day", "P1Y", "p1y")) {
            same(PgText::isoInterval, RegexPgText::isoInterval, text);
        }
    }

    @Example
    void valuesAreTheServersOwn() {
        java.time.Instant utc = java.time.Instant.parse("2024-02-29T18:29:59.999999Z");
        assertEquals(utc.getEpochSecond() * 1_000_000L + utc.getNano() / 1_000, PgText.epochMicros("2024-02-29 23:59:59.999999+05:30"));
        assertEquals(-62_167_219_200_000_000L, PgText.epochMicros("0001-01-01 00:00:00 BC"));
        assertEquals(561_000_000L, PgText.epochMicros("1970-01-01 00:00:00-00:09:21"));
        assertEquals(500_000L, PgText.epochMicros("1970-01-01 00:00:00.5"));
        assertEquals(19_782L, PgText.epochDay("2024-02-29"));
        assertEquals(86_400_000_000L, PgText.microsOfDay("24:00:00"));
        assertEquals("P1Y2M-3DT4H5M6.5S", PgText.isoInterval("1 year 2 mons -3 days +04:05:06.5"));
    }

    // ---- generators

    private static Arbitrary<String> digits(int min, int max) {
        return Arbitraries.strings().withCharRange('0', '9').ofMinLength(min).ofMaxLength(max);
    }

    /** Usually {@code n} digits, sometimes one fewer or more, or none. */
    private static Arbitrary<String> nDigits(int n) {
        return Arbitraries.frequencyOf(
                Tuple.of(12, digits(n, n)),
                Tuple.of(1, digits(Math.max(0, n - 1), Math.max(0, n - 1))),
                Tuple.of(1, digits(n + 1, n + 1)),
                Tuple.of(1, Arbitraries.just("")));
    }

    private static Arbitrary<String> optional(Arbitrary<String> piece, int percent) {
        return Arbitraries.integers().between(0, 99).flatMap(r -> r < percent ? piece : Arbitraries.just(""));
    }

    private static Arbitrary<String> oneOf(String... texts) {
        return Arbitraries.of(texts);
    }

    private static Arbitrary<String> date() {
        return Combinators.combine(
                Arbitraries.frequencyOf(Tuple.of(10, digits(4, 4)), Tuple.of(2, digits(5, 7)),
                        Tuple.of(1, digits(0, 3)), Tuple.of(1, digits(8, 12))),
                oneOf("-", "-", "-", "-", "/", ""), nDigits(2), oneOf("-", "-", "-", "-", ":"), nDigits(2))
                .as((y, s1, m, s2, d) -> y + s1 + m + s2 + d);
    }

    private static Arbitrary<String> clock() {
        Arbitrary<String> fraction = Combinators.combine(oneOf(".", ".", ".", ","), digits(0, 8)).as((dot, f) -> dot + f);
        return Combinators.combine(nDigits(2), oneOf(":", ":", ":", ":", "."), nDigits(2), oneOf(":", ":", ":", ":", ""),
                nDigits(2), optional(fraction, 50))
                .as((h, c1, m, c2, s, f) -> h + c1 + m + c2 + s + f);
    }

    private static Arbitrary<String> offset() {
        Arbitrary<String> part = Combinators.combine(oneOf(":", ":", ":", "."), nDigits(2)).as((c, d) -> c + d);
        return Combinators.combine(oneOf("+", "-", "+", "-", " "), nDigits(2), optional(part, 40), optional(part, 20),
                optional(part, 5))
                .as((sign, h, p1, p2, p3) -> sign + h + p1 + p2 + p3);
    }

    private static Arbitrary<String> bc() {
        return oneOf(" BC", " BC", " BC", "BC", " bc", " BC ", "  BC", " AD");
    }

    /** Inserts, removes or replaces one character now and then. */
    private static Arbitrary<String> mutated(Arbitrary<String> texts) {
        Arbitrary<Character> chars = Arbitraries.of('0', '5', '9', '-', ':', ' ', '.', '+', 'B', 'C', 'x', '\t', '٣');
        return Combinators.combine(texts, Arbitraries.integers().between(0, 9), Arbitraries.integers().between(0, 60), chars)
                .as((text, what, where, c) -> {
                    int at = text.isEmpty() ? 0 : where % (text.length() + 1);
                    return switch (what) {
                        case 0 -> text.substring(0, at) + c + text.substring(at);
                        case 1 -> at < text.length() ? text.substring(0, at) + text.substring(at + 1) : text;
                        case 2 -> at < text.length() ? text.substring(0, at) + c + text.substring(at + 1) : text;
                        default -> text;
                    };
                });
    }

    @Provide
    Arbitrary<String> timestamps() {
        return mutated(Combinators.combine(date(), oneOf(" ", " ", " ", " ", "T", "  ", ""), clock(), optional(offset(), 60),
                optional(bc(), 15))
                .as((d, sep, c, o, b) -> d + sep + c + o + b));
    }

    @Provide
    Arbitrary<String> dates() {
        return mutated(Combinators.combine(date(), optional(bc(), 25)).as((d, b) -> d + b));
    }

    @Provide
    Arbitrary<String> times() {
        return mutated(clock());
    }

    @Provide
    Arbitrary<String> intervals() {
        Arbitrary<String> amount = Combinators.combine(oneOf("", "", "-", "+"),
                Arbitraries.frequencyOf(Tuple.of(10, digits(1, 3)), Tuple.of(1, digits(18, 21)),
                        Tuple.of(1, Arbitraries.just(""))))
                .as((s, d) -> s + d);
        Arbitrary<String> unit = oneOf("year", "years", "mon", "mons", "day", "days", "hour", "Year", "");
        Arbitrary<String> spaces = oneOf(" ", " ", " ", "  ", "\t", "");
        Arbitrary<String> part = Combinators.combine(amount, spaces, unit, spaces).as((a, s1, u, s2) -> a + s1 + u + s2);
        Arbitrary<String> time = Combinators.combine(oneOf("", "", "+", "-"),
                Arbitraries.frequencyOf(Tuple.of(10, digits(1, 3)), Tuple.of(1, digits(19, 21)),
                        Tuple.of(1, Arbitraries.just(""))),
                clock()).as((s, h, c) -> s + h + c.substring(Math.min(2, c.length())));
        return mutated(Combinators.combine(oneOf("", "", " ", "P"), part.list().ofMaxSize(4), optional(time, 60), oneOf("", "", " ", "  "))
                .as((lead, parts, t, trail) -> lead + String.join("", parts) + t + trail));
    }

    @Provide
    Arbitrary<String> noise() {
        return Arbitraries.strings().withChars("0123456789-: .+BCPdaymonsyr\t").ofMinLength(0).ofMaxLength(30);
    }
}
