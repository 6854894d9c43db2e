package io.tablecdc.common;

import java.time.Duration;
import java.util.function.LongSupplier;

import org.slf4j.Logger;

/**
 * One table's back-pressure pause on one side (the BigQuery source's poll, a Postgres copy, the sink's partitions of
 * the table): whether the table is paused, how long its pauses lasted in all, and the level of their log lines.
 *
 * <p>A side faster than the table's normalize loop pauses and resumes batch by batch; so that it does not write two
 * log lines per batch, a pause or a resume within {@code quiet} of the table's previous resume logs at debug level
 * ({@link #log}), every other one at info ({@link Duration#ZERO}: all at info). The side keeps its own metric and
 * catalog calls, in its own order, around {@link #begin} and {@link #end}.
 *
 * <p>The clock comes through the constructor, so a pause is tested without waiting. One loop of one table changes it;
 * {@link #paused} may be read from any thread.
 */
public final class TablePause {
    private final Logger log;
    private final long quietNanos;
    private final LongSupplier nanoTime;
    private volatile boolean paused;
    private long pausedSince;
    private boolean resumedBefore;
    private long resumedAt;
    private long pausedNanos;
    /** Whether the last {@link #begin} or {@link #end} came within {@code quiet} of the previous resume. */
    private boolean quiet;

    public TablePause(Logger log, Duration quiet) {
        this(log, quiet, System::nanoTime);
    }

    public TablePause(Logger log, Duration quiet, LongSupplier nanoTime) {
        this.log = log;
        this.quietNanos = quiet.toNanos();
        this.nanoTime = nanoTime;
    }

    public boolean paused() {
        return paused;
    }

    /** Begins a pause: true when the table was not paused, false (and nothing changes) when it already was. */
    public boolean begin() {
        if (paused) {
            return false;
        }
        long now = nanoTime.getAsLong();
        quiet = withinQuiet(now);
        paused = true;
        pausedSince = now;
        return true;
    }

    /**
     * Ends the pause, a resume: returns its length in nanoseconds, added to {@link #pausedNanos}. A table that was not
     * paused returns 0 and only has its next log line at info.
     */
    public long end() {
        if (!paused) {
            quiet = false;
            return 0;
        }
        long now = nanoTime.getAsLong();
        quiet = withinQuiet(now);
        paused = false;
        resumedBefore = true;
        resumedAt = now;
        long length = now - pausedSince;
        pausedNanos += length;
        return length;
    }

    /** Drops the pause without a resume (the side stops or hands the table over): true when the table was paused. */
    public boolean abandon() {
        boolean was = paused;
        paused = false;
        return was;
    }

    /** The length of the pauses ended so far, in nanoseconds. */
    public long pausedNanos() {
        return pausedNanos;
    }

    /** Whether the last {@link #begin} or {@link #end} came within {@code quiet} of the previous resume. */
    public boolean quiet() {
        return quiet;
    }

    /** Logs a line of the last {@link #begin} or {@link #end}: at debug level when it was {@link #quiet}, else at info. */
    public void log(String message, Object... arguments) {
        if (quiet) {
            log.debug(message, arguments);
        } else {
            log.info(message, arguments);
        }
    }

    private boolean withinQuiet(long now) {
        return resumedBefore && now - resumedAt < quietNanos;
    }
}
