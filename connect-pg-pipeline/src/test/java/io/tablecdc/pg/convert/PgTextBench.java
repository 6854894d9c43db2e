package io.tablecdc.pg.convert;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.function.ToLongFunction;

/**
 * Not a test: a side-by-side timing of {@link PgText}'s scanners against the regular expressions they replaced
 * ({@link RegexPgText}) on the same texts, in one JVM, the two alternating round by round (issue 20). Run with the
 * module's test class path: {@code java -cp … io.tablecdc.pg.convert.PgTextBench [rounds]}; prints the median
 * nanoseconds per value of each and their ratio.
 */
public final class PgTextBench {
    private PgTextBench() {
    }

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 15;
        Random random = new Random(20);
        List<String> timestamps = new ArrayList<>();
        List<String> dates = new ArrayList<>();
        List<String> times = new ArrayList<>();
        for (int i = 0; i < 100_000; i++) {
            long micros = 1_700_000_000_000_000L + (long) (random.nextDouble() * 100_000_000_000_000L);
            java.time.LocalDateTime t = java.time.LocalDateTime.ofEpochSecond(micros / 1_000_000, (int) (micros % 1_000_000) * 1000,
                    java.time.ZoneOffset.UTC);
            String fraction = String.format("%06d", micros % 1_000_000).replaceAll("0+$", "");
            String clock = String.format("%02d:%02d:%02d", t.getHour(), t.getMinute(), t.getSecond())
                    + (fraction.isEmpty() ? "" : "." + fraction);
            // what a timestamptz column prints in a UTC session, as the copy reads it
            timestamps.add(t.toLocalDate() + " " + clock + "+00");
            dates.add(t.toLocalDate().toString());
            times.add(clock);
        }
        report("timestamptz", timestamps, PgText::epochMicros, RegexPgText::epochMicros, rounds);
        report("date", dates, PgText::epochDay, RegexPgText::epochDay, rounds);
        report("time", times, PgText::microsOfDay, RegexPgText::microsOfDay, rounds);
    }

    private static void report(String what, List<String> texts, ToLongFunction<String> scanner, ToLongFunction<String> regex,
            int rounds) {
        double[] scanned = new double[rounds];
        double[] matched = new double[rounds];
        long sink = 0;
        for (int r = 0; r < rounds; r++) {
            long start = System.nanoTime();
            for (String text : texts) {
                sink += regex.applyAsLong(text);
            }
            matched[r] = (System.nanoTime() - start) / (double) texts.size();
            start = System.nanoTime();
            for (String text : texts) {
                sink -= scanner.applyAsLong(text);
            }
            scanned[r] = (System.nanoTime() - start) / (double) texts.size();
        }
        if (sink != 0) {
            throw new AssertionError("the scanner and the regular expressions disagree");
        }
        // the first third of the rounds warms the JIT up
        double scannerNs = median(Arrays.copyOfRange(scanned, rounds / 3, rounds));
        double regexNs = median(Arrays.copyOfRange(matched, rounds / 3, rounds));
        System.out.printf("%-12s regular expressions %7.1f ns/value, scanner %7.1f ns/value, ratio %.2f (%d values, %d rounds)%n",
                what, regexNs, scannerNs, scannerNs / regexNs, texts.size(), rounds);
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
