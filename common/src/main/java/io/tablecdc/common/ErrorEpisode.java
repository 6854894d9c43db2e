package io.tablecdc.common;

import java.time.Clock;
import java.time.Instant;
import java.util.function.Supplier;

import org.slf4j.Logger;

import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.TableProgress;
import io.tablecdc.common.metrics.TableMetrics;

/**
 * One table's error episode on one side (the BigQuery source's poll, the sink's stage upload, the sink's normalize
 * loop): from the first failure to the next success.
 *
 * <p>A failure ({@link #failed}) takes the next wait from the backoff, describes the error once, logs it (the first
 * failure of an episode as a warning naming the flow and table, repeats only at debug level), counts the episode once
 * in the table's metrics, and writes the error under the side's prefix into the catalog's row of the table (a catalog
 * that cannot be reached only logs at debug level: the log line and the metric tell). A success ({@link #succeeded})
 * resets the backoff, logs the recovery once, ends the metric's episode and clears the side's error in the catalog,
 * so that a table failing for hours writes two log lines, not thousands.
 *
 * <p>The collaborators come through the constructor, so an episode is tested without a catalog or a metrics registry.
 * Not thread-safe: one loop of one table owns it.
 */
public final class ErrorEpisode {
    /** Where a side writes the table's error (the catalog's {@code last_error}, under the side's prefix). */
    public interface ErrorRecord {
        /** Records {@code error} (without the prefix) at {@code at}; {@code retryAt} is when the table is tried again. */
        void record(String error, Instant at, Instant retryAt);

        /**
         * As {@link #record(String, Instant, Instant)}; with {@code refusedBatchId}, the error is the destination
         * refusing that batch's data, and is recorded as such. This default drops the batch.
         */
        default void record(String error, Instant at, Instant retryAt, Long refusedBatchId) {
            record(error, at, retryAt);
        }

        /** Clears the side's error; a failure here propagates (the success is then not a success yet). */
        void clear();
    }

    /** The table's error-episode metric of this side's kind. */
    public interface EpisodeMetric {
        void started();

        void ended();
    }

    /** The longest description written to the log and the catalog; longer ones are cut with an ellipsis. */
    static final int MAX_DESCRIPTION = 2000;

    private final Logger log;
    private final String what;
    private final Backoff backoff;
    private final Clock clock;
    private final ErrorRecord record;
    private final EpisodeMetric metric;
    private boolean open;
    private int failures;
    /** The catalog holds this side's error although no episode of this instance is open (left by an earlier task). */
    private boolean errorLeftInCatalog;

    /**
     * @param what the subject of log lines, e.g. {@code "normalize of flow f, table t"}
     */
    public ErrorEpisode(Logger log, String what, Backoff backoff, Clock clock, ErrorRecord record, EpisodeMetric metric) {
        this.log = log;
        this.what = what;
        this.backoff = backoff;
        this.clock = clock;
        this.record = record;
        this.metric = metric;
    }

    /**
     * The table's error in the catalog: {@code prefix + error} written with {@link TableProgress#recordError}, cleared with
     * {@link TableProgress#clearError(String, String, String)} on the same prefix (a source and a sink share one error per
     * table, and each clears only its own). {@code catalog} may give null (not opened yet): nothing is written then.
     */
    public static ErrorRecord inCatalog(Supplier<Catalog> catalog, String flow, String table, String prefix) {
        return new ErrorRecord() {
            @Override
            public void record(String error, Instant at, Instant retryAt) {
                record(error, at, retryAt, null);
            }

            @Override
            public void record(String error, Instant at, Instant retryAt, Long refusedBatchId) {
                Catalog c = catalog.get();
                if (c != null) {
                    c.progress().recordError(flow, table, prefix + error, at, retryAt, refusedBatchId);
                }
            }

            @Override
            public void clear() {
                Catalog c = catalog.get();
                if (c != null) {
                    c.progress().clearError(flow, table, prefix);
                }
            }
        };
    }

    /**
     * The table's error-episode metric of {@code kind} (e.g. {@code normalize}, {@code stage}, {@code poll}), on the
     * table's metrics as {@code table} gives them when the episode starts or ends.
     */
    public static EpisodeMetric metric(Supplier<TableMetrics.Table> table, String kind) {
        return new EpisodeMetric() {
            @Override
            public void started() {
                table.get().errorEpisodeStarted(kind);
            }

            @Override
            public void ended() {
                table.get().errorEpisodeEnded(kind);
            }
        };
    }

    /**
     * Records a failure: backoff, log, metric (once per episode) and the catalog's error.
     *
     * @return how long to wait before the next attempt, in milliseconds
     */
    public long failed(Throwable error) {
        return failed(error, null);
    }

    /**
     * {@link #failed(Throwable)}; with {@code refusedBatchId}, the error is the destination refusing that batch's data
     * (not an outage or a wait), and the catalog records it as such ({@link ErrorRecord#record(String, Instant, Instant,
     * Long)}).
     */
    public long failed(Throwable error, Long refusedBatchId) {
        long delay = backoff.failed();
        String message = describe(error);
        failures++;
        if (!open) {
            open = true;
            log.warn("{} failed, retrying in {} ms (further failures of this episode are logged at debug level): {}", what, delay, message);
            metric.started();
        } else {
            log.debug("{} failed again ({} in a row), retrying in {} ms: {}", what, failures, delay, message);
        }
        try {
            Instant now = clock.instant();
            record.record(message, now, now.plusMillis(delay), refusedBatchId);
        } catch (RuntimeException catalogDown) {
            log.debug("{}: recording the error in the catalog failed: {}", what, catalogDown.toString());
        }
        return delay;
    }

    /**
     * Records a success: resets the backoff; when it ends an episode, logs the recovery and ends the metric's episode;
     * then clears the catalog's error if this episode, or an earlier task ({@link #errorLeftInCatalog}), wrote one. A
     * failure to clear propagates, and the next success clears again.
     *
     * @return true when the catalog's error was cleared now
     */
    public boolean succeeded() {
        backoff.succeeded();
        if (open) {
            log.info("{} recovered after {} failed attempts", what, failures);
            open = false;
            failures = 0;
            metric.ended();
            errorLeftInCatalog = true;
        }
        if (!errorLeftInCatalog) {
            return false;
        }
        record.clear();
        errorLeftInCatalog = false;
        return true;
    }

    /** The catalog holds this side's error from before (an earlier task's): the next success clears it. */
    public void errorLeftInCatalog() {
        errorLeftInCatalog = true;
    }

    /** Whether a failure opened an episode that no success has ended yet. */
    public boolean open() {
        return open;
    }

    /**
     * The error as one line for the log and the catalog: its message, or (when it has none) the message of the first
     * cause that has one, or the class's simple name; cut to {@value #MAX_DESCRIPTION} characters.
     */
    public static String describe(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root && root.getMessage() == null) {
            root = root.getCause();
        }
        String message = root.getMessage() == null ? root.getClass().getSimpleName() : root.getMessage();
        return message.length() > MAX_DESCRIPTION ? message.substring(0, MAX_DESCRIPTION) + "…" : message;
    }
}
