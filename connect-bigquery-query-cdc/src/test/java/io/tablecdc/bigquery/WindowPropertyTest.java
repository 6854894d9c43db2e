package io.tablecdc.bigquery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * The QUERY mode walk of one table ({@code TablePoller.walk}) driven by the pure window rules of {@link Window},
 * against a model table: rows whose watermark is stamped before they commit, committing up to the safety lag later
 * (or before their watermark: a watermark ahead of the clock). Each poll reads BigQuery's clock, places windows
 * {@code (cursor, min(cursor + max window, now - lag)]}, reads the rows committed by then, jumps over empty windows to
 * the next watermark and moves the cursor to the batch's largest watermark (clamped to the window's upper bound, as
 * {@code TablePoller.endCursor} does); a failed batch leaves the cursor where it was and is read again.
 *
 * <p>What holds: without failed batches every row is read in exactly one window; a row is read twice only when a batch
 * holding it failed (at least once). The cursor never decreases, never passes a row not yet read, and every window
 * ends at or before {@code now - lag}. Times are microseconds (BigQuery's precision) on a small range so that
 * watermarks collide and fall on window bounds.
 */
class WindowPropertyTest {
    private static final Instant T0 = Instant.parse("2026-01-01T00:00:00Z");

    /** A row: its watermark and when its write commits (both µs after T0). */
    record Row(long watermark, long commit) {
    }

    record Scenario(List<Row> rows, long lagMicros, long maxWindowMicros, List<Long> polls, List<Boolean> failures) {
    }

    @Provide
    Arbitrary<Scenario> scenarios() {
        Arbitrary<Long> lag = Arbitraries.longs().between(0, 12);
        Arbitrary<Long> maxWindow = Arbitraries.longs().between(1, 25);
        Arbitrary<List<long[]>> rows = Combinators.combine(Arbitraries.longs().between(1, 60),
                        Arbitraries.longs().between(-6, 12))
                .as((w, d) -> new long[] {w, d}).list().ofMaxSize(14);
        Arbitrary<List<Long>> polls = Arbitraries.longs().between(0, 90).list().ofMaxSize(20)
                .map(l -> l.stream().sorted().toList());
        Arbitrary<List<Boolean>> failures = Arbitraries.integers().between(0, 5).map(i -> i == 0).list().ofMaxSize(10);
        return Combinators.combine(lag, maxWindow, rows, polls, failures).as((l, mw, rs, ps, fs) -> {
            List<Row> list = new ArrayList<>();
            for (long[] r : rs) {
                // committed at most the safety lag after its watermark (the rule the lag stands for)
                long delay = Math.min(r[1], l);
                list.add(new Row(r[0], Math.max(0, r[0] + delay)));
            }
            return new Scenario(list, l, mw, ps, fs);
        });
    }

    private static Instant at(long micros) {
        return T0.plusNanos(micros * 1_000);
    }

    private static long micros(Instant instant) {
        return Duration.between(T0, instant).toNanos() / 1_000;
    }

    @Property(tries = 1500)
    void everyRowIsReadAndTheCursorNeverPassesAnUnreadRow(@ForAll("scenarios") Scenario s) {
        Duration lag = Duration.ofNanos(s.lagMicros() * 1_000);
        Duration maxWindow = Duration.ofNanos(s.maxWindowMicros() * 1_000);
        int[] reads = new int[s.rows().size()];
        boolean[] inFailedBatch = new boolean[s.rows().size()];
        Instant cursor = T0;
        int batches = 0;
        List<String> trace = new ArrayList<>();

        // the given polls, then polls at a clock past every row until the walk finds nothing more
        List<Long> clock = new ArrayList<>(s.polls());
        long end = 100 + s.lagMicros();
        for (int i = 0; i < 40 + 2 * s.rows().size(); i++) {
            clock.add(end);
        }
        for (long nowMicros : clock) {
            Instant now = at(nowMicros);
            Instant limit = Window.limit(now, lag);
            Optional<Window> window = Window.first(cursor, now, lag, maxWindow);
            while (window.isPresent()) {
                Window w = window.get();
                assertFalse(w.upper().isAfter(limit), "a window past now - lag: " + w);
                List<Integer> read = new ArrayList<>();
                for (int i = 0; i < s.rows().size(); i++) {
                    Row r = s.rows().get(i);
                    if (r.commit() <= nowMicros && at(r.watermark()).isAfter(w.lower())
                            && !at(r.watermark()).isAfter(w.upper())) {
                        read.add(i);
                    }
                }
                if (!read.isEmpty()) {
                    boolean failed = batches < s.failures().size() && s.failures().get(batches);
                    batches++;
                    Instant maxSeen = null;
                    for (int i : read) {
                        reads[i]++;
                        inFailedBatch[i] |= failed;
                        Instant seen = at(s.rows().get(i).watermark());
                        maxSeen = maxSeen == null || seen.isAfter(maxSeen) ? seen : maxSeen;
                    }
                    trace.add("now " + nowMicros + ": " + window(w) + " reads " + read + (failed ? " and fails" : ""));
                    if (!failed) {
                        Instant seen = maxSeen.isAfter(w.upper()) ? w.upper() : maxSeen;
                        Instant next = Window.advance(cursor, seen);
                        assertFalse(next.isBefore(cursor), "the cursor went back: " + trace);
                        cursor = next;
                    }
                    break;
                }
                Optional<Window> next = w.next(now, lag, maxWindow);
                if (next.isPresent()) {
                    // nextWatermark: the smallest committed watermark in (upper, limit]
                    Instant resume = null;
                    for (Row r : s.rows()) {
                        Instant wm = at(r.watermark());
                        if (r.commit() <= nowMicros && wm.isAfter(w.upper()) && !wm.isAfter(limit)
                                && (resume == null || wm.isBefore(resume))) {
                            resume = wm;
                        }
                    }
                    next = w.jumpTo(resume, now, lag, maxWindow);
                }
                window = next;
            }
            // the cursor never passes a row not read yet, committed or not
            for (int i = 0; i < s.rows().size(); i++) {
                if (reads[i] == 0) {
                    Row r = s.rows().get(i);
                    assertTrue(at(r.watermark()).isAfter(cursor), "the cursor " + micros(cursor) + " passed row " + r
                            + ", never read: " + trace);
                }
            }
        }
        for (int i = 0; i < s.rows().size(); i++) {
            Row r = s.rows().get(i);
            assertTrue(reads[i] >= 1, "row " + r + " was never read: " + trace);
            if (!inFailedBatch[i]) {
                assertEquals(1, reads[i], "row " + r + " was read " + reads[i] + " times: " + trace);
            }
        }
    }

    private static String window(Window w) {
        return "(" + micros(w.lower()) + ", " + micros(w.upper()) + "]";
    }

    /** The cursor after a batch: never back, the largest watermark seen otherwise. */
    @Property(tries = 500)
    void advanceIsTheMaximum(@ForAll("micros") long cursor, @ForAll("micros") long seen) {
        Instant next = Window.advance(at(cursor), at(seen));
        assertEquals(at(Math.max(cursor, seen)), next);
        assertEquals(at(cursor), Window.advance(at(cursor), null));
    }

    @Provide
    Arbitrary<Long> micros() {
        return Arbitraries.longs().between(0, 30);
    }
}
