package io.tablecdc.bigquery;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;

/**
 * The pull permits of one connector in one worker ({@code pull.parallelism}): its tasks run in the same JVM and share
 * them, so that a connector with many tables never has more than that many queries running at once from a worker.
 */
final class PullLimiter {
    private static final Map<String, Semaphore> PERMITS = new ConcurrentHashMap<>();

    private PullLimiter() {
    }

    /** The permits of {@code connector} with {@code parallelism} (a changed parallelism gets new permits). */
    static Semaphore of(String connector, int parallelism) {
        return PERMITS.computeIfAbsent(connector + "/" + parallelism, k -> new Semaphore(parallelism, true));
    }
}
