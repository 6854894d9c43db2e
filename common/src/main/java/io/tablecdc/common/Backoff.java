package io.tablecdc.common;

/**
 * Capped exponential backoff for one table's retries: {@code initial}, doubling per consecutive failure up
 * to {@code max}; reset by a success.
 */
public final class Backoff {
    private final long initialMs;
    private final long maxMs;
    private int failures;

    public Backoff(long initialMs, long maxMs) {
        if (initialMs <= 0 || maxMs < initialMs) {
            throw new IllegalArgumentException("backoff needs 0 < initial <= max, got " + initialMs + " and " + maxMs);
        }
        this.initialMs = initialMs;
        this.maxMs = maxMs;
    }

    /** Records a failure and returns how long to wait before the next attempt. */
    public long failed() {
        failures++;
        return delayMs(failures);
    }

    /** The wait after {@code consecutiveFailures} failures (1 → initial). */
    public long delayMs(int consecutiveFailures) {
        if (consecutiveFailures <= 0) {
            return 0;
        }
        int doublings = Math.min(consecutiveFailures - 1, 62);
        long delay = initialMs;
        for (int i = 0; i < doublings && delay < maxMs; i++) {
            delay *= 2;
        }
        return Math.min(delay, maxMs);
    }

    public void succeeded() {
        failures = 0;
    }

    public int failures() {
        return failures;
    }
}
