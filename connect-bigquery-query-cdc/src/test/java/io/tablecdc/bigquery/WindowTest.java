package io.tablecdc.bigquery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.TreeSet;

import org.junit.jupiter.api.Test;

/**
 * Window placement and cursor advance. The last tests replay polls against a model of a table whose rows become
 * visible at their commit time, which may be later than their watermark (a transaction stamps rows when it starts).
 */
class WindowTest {
    private static final Duration LAG = Duration.ofSeconds(60);
    private static final Duration MAX = Duration.ofHours(24);
    private static final Instant T0 = Instant.parse("2024-03-01T10:00:00.123456Z");

    @Test
    void upperIsSourceNowMinusLagWhenTheCursorIsRecent() {
        Window w = Window.first(T0, T0.plusSeconds(600), LAG, MAX).orElseThrow();
        assertEquals(T0, w.lower());
        assertEquals(T0.plusSeconds(540), w.upper());
    }

    @Test
    void upperIsCursorPlusMaxWindowWhenFarBehind() {
        Window w = Window.first(T0, T0.plus(Duration.ofDays(10)), LAG, MAX).orElseThrow();
        assertEquals(T0.plus(MAX), w.upper());
    }

    @Test
    void noWindowWhileTheCursorIsInsideTheSafetyLag() {
        assertTrue(Window.first(T0, T0.plusSeconds(60), LAG, MAX).isEmpty(), "upper == cursor");
        assertTrue(Window.first(T0, T0.plusSeconds(30), LAG, MAX).isEmpty(), "upper < cursor");
        assertTrue(Window.first(T0, T0.plusSeconds(60).plusNanos(1_000), LAG, MAX).isPresent());
    }

    /** Windows are placed on BigQuery's clock: a worker clock ahead of it must not read rows not yet safe. */
    @Test
    void workerClockAheadOfTheSourceDoesNotMoveTheWindow() {
        Instant sourceNow = T0.plusSeconds(600);
        Instant workerNow = sourceNow.plus(Duration.ofHours(2));
        Window w = Window.first(T0, sourceNow, LAG, MAX).orElseThrow();
        assertEquals(sourceNow.minus(LAG), w.upper());
        assertTrue(w.upper().isBefore(workerNow.minus(LAG)));
    }

    /** A worker clock behind BigQuery's must not stop reading: the window still reaches source_now - lag. */
    @Test
    void workerClockBehindTheSourceStillReadsUpToSourceNowMinusLag() {
        Instant sourceNow = T0.plusSeconds(600);
        Instant workerNow = T0.minus(Duration.ofHours(1));
        Optional<Window> w = Window.first(T0, sourceNow, LAG, MAX);
        assertTrue(w.isPresent(), "a worker clock behind the cursor would see no window");
        assertTrue(Window.first(T0, workerNow, LAG, MAX).isEmpty());
        assertEquals(sourceNow.minus(LAG), w.get().upper());
    }

    @Test
    void emptyWindowsWalkForwardUpToTheLimitAndThenStop() {
        Instant sourceNow = T0.plus(Duration.ofHours(60)).plus(LAG);
        List<Window> walked = new ArrayList<>();
        Optional<Window> w = Window.first(T0, sourceNow, LAG, MAX);
        while (w.isPresent()) {
            walked.add(w.get());
            w = w.get().next(sourceNow, LAG, MAX);
        }
        assertEquals(List.of(
                new Window(T0, T0.plus(Duration.ofHours(24))),
                new Window(T0.plus(Duration.ofHours(24)), T0.plus(Duration.ofHours(48))),
                new Window(T0.plus(Duration.ofHours(48)), T0.plus(Duration.ofHours(60)))), walked);
        // all empty: the cursor stays where it was
        assertEquals(T0, Window.advance(T0, null));
    }

    @Test
    void emptyWindowJumpsToTheWindowHoldingTheNextWatermark() {
        Instant sourceNow = T0.plus(Duration.ofDays(400));
        Window first = Window.first(T0, sourceNow, LAG, MAX).orElseThrow();
        Instant next = T0.plus(Duration.ofDays(300));
        Window jumped = first.jumpTo(next, sourceNow, LAG, MAX).orElseThrow();
        assertEquals(next.minusNanos(1_000), jumped.lower());
        assertEquals(jumped.lower().plus(MAX), jumped.upper(), "still at most max.query.window.ms");
        assertTrue(first.jumpTo(null, sourceNow, LAG, MAX).isEmpty(), "no watermark ahead: the walk ends");
        // a next watermark inside the following window: an ordinary step
        assertEquals(first.next(sourceNow, LAG, MAX), first.jumpTo(first.upper().plusNanos(1_000), sourceNow, LAG, MAX));
        // near the limit the jumped window ends at source_now - lag
        Instant late = sourceNow.minus(LAG).minusSeconds(5);
        assertEquals(sourceNow.minus(LAG), first.jumpTo(late, sourceNow, LAG, MAX).orElseThrow().upper());
    }

    @Test
    void cursorIsTheLargestWatermarkSeenNotTheUpperBound() {
        Window w = Window.first(T0, T0.plusSeconds(3600), LAG, MAX).orElseThrow();
        Instant maxSeen = T0.plusSeconds(10);
        assertEquals(maxSeen, Window.advance(T0, maxSeen));
        assertFalse(Window.advance(T0, maxSeen).equals(w.upper()));
        assertEquals(T0, Window.advance(T0, T0.minusSeconds(1)), "never backwards");
        assertEquals(maxSeen, Window.advance(null, maxSeen), "from no cursor");
    }

    // ------------------------------------------------------------------------------------------ replayed polls

    private record Row(long id, Instant watermark, Instant visibleAt) {
    }

    /** Polls the modelled table like the poller does: first window, walk while empty, cursor = largest seen. */
    private static final class Replay {
        final List<Row> table = new ArrayList<>();
        final TreeSet<Long> seen = new TreeSet<>();
        final List<Long> duplicates = new ArrayList<>();
        Instant cursor;

        Replay(Instant cursor) {
            this.cursor = cursor;
        }

        void poll(Instant sourceNow) {
            Optional<Window> w = Window.first(cursor, sourceNow, LAG, MAX);
            while (w.isPresent()) {
                Instant maxSeen = null;
                int rows = 0;
                for (Row row : table) {
                    boolean inWindow = row.watermark.isAfter(w.get().lower()) && !row.watermark.isAfter(w.get().upper());
                    if (inWindow && !row.visibleAt.isAfter(sourceNow)) {
                        rows++;
                        if (!seen.add(row.id)) {
                            duplicates.add(row.id);
                        }
                        maxSeen = maxSeen == null || row.watermark.isAfter(maxSeen) ? row.watermark : maxSeen;
                    }
                }
                if (rows > 0) {
                    cursor = Window.advance(cursor, maxSeen);
                    return;
                }
                w = w.get().next(sourceNow, LAG, MAX);
            }
        }
    }

    /**
     * Row 2 is stamped after the largest watermark of the first batch but before that batch's upper bound, and
     * commits only after the first query: with the cursor at the upper bound it would be lost.
     */
    @Test
    void rowCommittedLateBelowTheUpperBoundIsCaughtByTheNextPoll() {
        Replay replay = new Replay(T0);
        Instant now1 = T0.plusSeconds(600);
        replay.table.add(new Row(1, T0.plusSeconds(100), T0.plusSeconds(100)));
        replay.table.add(new Row(2, T0.plusSeconds(300), now1.plusSeconds(5)));
        replay.poll(now1);
        assertEquals(List.of(1L), List.copyOf(replay.seen));
        assertEquals(T0.plusSeconds(100), replay.cursor);
        replay.poll(now1.plusSeconds(60));
        assertEquals(List.of(1L, 2L), List.copyOf(replay.seen));
        assertEquals(List.of(), replay.duplicates);
    }

    /** A row stamped inside the safety lag at the first poll and committed within the lag is read exactly once. */
    @Test
    void rowStampedInsideTheSafetyLagIsReadOnceVisible() {
        Replay replay = new Replay(T0);
        Instant now1 = T0.plusSeconds(600);
        replay.table.add(new Row(1, T0.plusSeconds(100), T0.plusSeconds(100)));
        replay.table.add(new Row(2, now1.minusSeconds(30), now1.plusSeconds(20)));
        replay.poll(now1);
        assertEquals(List.of(1L), List.copyOf(replay.seen));
        replay.poll(now1.plusSeconds(10));
        replay.poll(now1.plusSeconds(120));
        assertEquals(List.of(1L, 2L), List.copyOf(replay.seen));
        assertEquals(List.of(), replay.duplicates);
    }

    /**
     * Rows sharing one watermark land in one batch (a batch is a whole window, however many pages it has), and
     * the next window starts after that watermark without reading them again.
     */
    @Test
    void equalWatermarksAcrossABatchBoundaryAreReadOnce() {
        Replay replay = new Replay(T0);
        Instant same = T0.plusSeconds(200);
        for (long id = 1; id <= 5; id++) {
            replay.table.add(new Row(id, same, same));
        }
        replay.poll(T0.plusSeconds(600));
        assertEquals(5, replay.seen.size());
        assertEquals(same, replay.cursor);
        replay.table.add(new Row(6, same.plus(1, ChronoUnit.MICROS), same.plus(1, ChronoUnit.MICROS)));
        replay.poll(T0.plusSeconds(700));
        assertEquals(6, replay.seen.size());
        assertEquals(List.of(), replay.duplicates, "rows at the cursor's own watermark read again");
    }

    @Test
    void walkFindsRowsSeveralWindowsAhead() {
        Replay replay = new Replay(T0);
        replay.table.add(new Row(1, T0.plus(Duration.ofHours(50)), T0.plus(Duration.ofHours(50))));
        replay.poll(T0.plus(Duration.ofHours(100)));
        assertEquals(List.of(1L), List.copyOf(replay.seen));
        assertEquals(T0.plus(Duration.ofHours(50)), replay.cursor);
    }

    @Test
    void microsecondNeighboursAreKeptApart() {
        Instant cursor = T0;
        Instant next = T0.plus(1, ChronoUnit.MICROS);
        Window w = Window.first(cursor, next.plus(LAG), LAG, MAX).orElseThrow();
        assertEquals(next, w.upper());
        assertEquals("2024-03-01T10:00:00.123457000Z", Cursor.format(Window.advance(cursor, next)));
    }
}
