package io.tablecdc.bigquery;

import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.Optional;

/**
 * One query window {@code (lower, upper]} of a table, and the rules that place windows: pure functions of the
 * cursor, BigQuery's clock ({@code CURRENT_TIMESTAMP()}, never the worker's), the safety lag and the maximum
 * window, so that a worker whose clock runs ahead or behind BigQuery's reads the same windows.
 *
 * @param lower exclusive
 * @param upper inclusive
 */
public record Window(Instant lower, Instant upper) {

    public Window {
        Objects.requireNonNull(lower, "lower");
        Objects.requireNonNull(upper, "upper");
        if (!upper.isAfter(lower)) {
            throw new IllegalArgumentException("an empty window (" + lower + ", " + upper + "]");
        }
    }

    /** The latest instant any window may reach: {@code sourceNow - safetyLag}. */
    public static Instant limit(Instant sourceNow, Duration safetyLag) {
        return sourceNow.minus(safetyLag);
    }

    /**
     * The upper bound (inclusive) of an initial snapshot, and the cursor it leaves: the table's largest watermark, but
     * never later than {@code sourceNow - safetyLag}, like every window. Rows above it are read by the windows after it.
     */
    public static Instant snapshotUpper(Instant maxWatermark, Instant sourceNow, Duration safetyLag) {
        Instant limit = limit(sourceNow, safetyLag);
        return maxWatermark.isAfter(limit) ? limit : maxWatermark;
    }

    /**
     * The first window of a poll: {@code (cursor, min(cursor + maxWindow, sourceNow - safetyLag)]}, or empty when that
     * upper bound is not after the cursor (nothing can be read yet: skip without recording an attempt).
     */
    public static Optional<Window> first(Instant cursor, Instant sourceNow, Duration safetyLag, Duration maxWindow) {
        return after(cursor, limit(sourceNow, safetyLag), maxWindow);
    }

    /**
     * The window after {@code this} one turned out empty: it starts where this one ended, with the same limits; empty
     * when this one already reached {@code sourceNow - safetyLag}. Walking on keeps the cursor where it was: only rows
     * move it.
     */
    public Optional<Window> next(Instant sourceNow, Duration safetyLag, Duration maxWindow) {
        return after(upper, limit(sourceNow, safetyLag), maxWindow);
    }

    /**
     * The window after {@code this} empty one when the next watermark above it is known to be {@code next}: the
     * windows before {@code next} hold no rows, so the walk goes straight to the window that starts just below it
     * (same maximum size, same limit). Empty when {@code next} is null (every window up to the limit is empty).
     */
    public Optional<Window> jumpTo(Instant next, Instant sourceNow, Duration safetyLag, Duration maxWindow) {
        if (next == null) {
            return Optional.empty();
        }
        Instant lower = next.minusNanos(1_000);
        if (!lower.isAfter(upper)) {
            return next(sourceNow, safetyLag, maxWindow);
        }
        return after(lower, limit(sourceNow, safetyLag), maxWindow);
    }

    private static Optional<Window> after(Instant lower, Instant limit, Duration maxWindow) {
        Instant upper = lower.plus(maxWindow);
        if (upper.isAfter(limit)) {
            upper = limit;
        }
        return upper.isAfter(lower) ? Optional.of(new Window(lower, upper)) : Optional.empty();
    }

    /**
     * The cursor after a batch: the largest watermark value seen, never {@code upper} (a row stamped inside the window
     * but committed after the query would be skipped), and never below the old cursor.
     *
     * @param maxSeen the largest watermark of the batch, or null when it had none
     */
    public static Instant advance(Instant cursor, Instant maxSeen) {
        if (maxSeen == null) {
            return cursor;
        }
        return cursor == null || maxSeen.isAfter(cursor) ? maxSeen : cursor;
    }
}
