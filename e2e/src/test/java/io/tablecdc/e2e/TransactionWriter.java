package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertNull;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.IntFunction;
import java.util.function.IntSupplier;

/**
 * The workload of the fault tests: one Postgres transaction after another on its own thread, the n-th made of the
 * statements {@code transaction} gives for n (from 1), with a pause between them, until closed. The first failing
 * transaction stops it; {@link #awaitMore} and {@link #close} report that failure.
 */
final class TransactionWriter implements AutoCloseable {
    final AtomicInteger written = new AtomicInteger();
    private final AtomicBoolean writing = new AtomicBoolean(true);
    private final AtomicReference<Exception> error = new AtomicReference<>();
    private final Thread thread;

    TransactionWriter(String name, PgChecks pg, IntFunction<List<String>> transaction, IntSupplier pauseMillis) {
        this(name, pg, transaction, pauseMillis, new ReentrantLock());
    }

    /**
     * As above, each transaction made and committed while holding {@code between}: whoever holds it (a failover of the
     * source) stands between two transactions.
     */
    TransactionWriter(String name, PgChecks pg, IntFunction<List<String>> transaction, IntSupplier pauseMillis, Lock between) {
        thread = new Thread(() -> {
            int n = 0;
            while (writing.get()) {
                n++;
                try {
                    between.lockInterruptibly();
                    try {
                        pg.transaction(transaction.apply(n).toArray(new String[0]));
                    } finally {
                        between.unlock();
                    }
                    written.incrementAndGet();
                    Thread.sleep(pauseMillis.getAsInt());
                } catch (Exception e) {
                    error.set(e);
                    return;
                }
            }
        }, name);
        thread.start();
    }

    /** Waits until {@code transactions} more committed. */
    void awaitMore(int transactions) throws Exception {
        int from = written.get();
        PgChecks.awaitTrue(() -> written.get() >= from + transactions || error.get() != null, Duration.ofSeconds(60),
                "the writer stalled");
        assertNull(error.get());
    }

    @Override
    public void close() throws Exception {
        if (writing.getAndSet(false)) {
            thread.join();
        }
        assertNull(error.get(), () -> "writer failed: " + error.get());
    }
}
