package io.tablecdc.common;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Closing what a task holds when it is being dropped anyway. */
public final class Resources {
    private static final Logger log = LoggerFactory.getLogger(Resources.class);

    private Resources() {
    }

    /**
     * Closes {@code resource} unless it is null, ignoring what closing throws (logged at debug level as the failure
     * to close {@code name}): the resource is being dropped (broken, or the task stops), and a failed close must not
     * keep the next one open.
     */
    public static void closeQuietly(AutoCloseable resource, String name) {
        if (resource == null) {
            return;
        }
        try {
            resource.close();
        } catch (Exception e) {
            log.debug("closing {} failed: {}", name, e.toString());
        }
    }
}
