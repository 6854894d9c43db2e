package io.tablecdc.common;

import org.slf4j.Logger;

/**
 * One table's current error episode: the first failure is logged as a warning naming the flow and table,
 * repeats of it only at debug level, and the recovery once, so that a table failing for hours writes two
 * log lines, not thousands.
 */
public final class ErrorEpisode {
    private final Logger log;
    private final String what;
    private boolean open;
    private int failures;

    /** @param what the subject of log lines, e.g. {@code "normalize of flow f, table t"} */
    public ErrorEpisode(Logger log, String what) {
        this.log = log;
        this.what = what;
    }

    /** Records a failure; returns true when it opened a new episode. */
    public boolean failed(String error, long retryInMs) {
        failures++;
        if (!open) {
            open = true;
            log.warn("{} failed, retrying in {} ms (further failures of this episode are logged at debug level): {}", what, retryInMs, error);
            return true;
        }
        log.debug("{} failed again ({} in a row), retrying in {} ms: {}", what, failures, retryInMs, error);
        return false;
    }

    /** Records a success; returns true when it closed an episode. */
    public boolean succeeded() {
        if (!open) {
            return false;
        }
        log.info("{} recovered after {} failed attempts", what, failures);
        open = false;
        failures = 0;
        return true;
    }

    public boolean open() {
        return open;
    }
}
