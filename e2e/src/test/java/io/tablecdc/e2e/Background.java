package io.tablecdc.e2e;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A step run again and again on a thread of its own (a test's writer), {@code periodMs} apart, until stopped; a step
 * that throws ends the loop, and {@link #stop()} reports it.
 */
class Background implements AutoCloseable {
    /** A step that may throw anything. */
    interface Step {
        void run() throws Exception;
    }

    private final AtomicBoolean running = new AtomicBoolean(true);
    private final Thread thread;
    private volatile Throwable failure;

    Background(String name, Step step, long periodMs) {
        thread = new Thread(() -> {
            while (running.get()) {
                try {
                    step.run();
                    Thread.sleep(periodMs);
                } catch (InterruptedException e) {
                    return;
                } catch (Throwable t) {
                    failure = t;
                    return;
                }
            }
        }, name);
        thread.setDaemon(true);
        thread.start();
    }

    /** The step's failure so far, or null. */
    Throwable failure() {
        return failure;
    }

    /** Ends the loop after its current step (waiting up to 30 s) and throws the step's failure, if any. */
    void stop() throws InterruptedException {
        running.set(false);
        thread.join(30_000);
        if (failure != null) {
            throw new AssertionError("the writer failed", failure);
        }
    }

    /** Ends the loop after its current step (waiting up to 30 s); a failure is not reported. */
    @Override
    public void close() throws InterruptedException {
        running.set(false);
        thread.join(30_000);
    }
}
