package io.tablecdc.pg;

/** Closing what a task holds when it is being dropped anyway. */
final class Resources {
    private Resources() {
    }

    /**
     * Closes each resource that is not null, in order, ignoring what closing throws: the connection is being dropped
     * (broken, or the task stops), and a failed close must not keep the next one open.
     */
    static void closeQuietly(AutoCloseable... resources) {
        for (AutoCloseable resource : resources) {
            if (resource == null) {
                continue;
            }
            try {
                resource.close();
            } catch (Exception e) {
                // nothing left to do with it
            }
        }
    }
}
