package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.common.config.types.Password;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogConfig.CatalogSettings;
import io.tablecdc.catalog.CatalogUnavailableException;
import io.tablecdc.catalog.SyncedBatch;
import io.tablecdc.e2e.faults.FaultProxy;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * Every catalog call ends within a bound (issue 37 item 9): a catalog that stops answering in the middle of a
 * statement (a black hole), a row lock another session keeps, and the migration lock another session keeps (a dead
 * host's session can keep it for hours). Each would hold the calling task's thread for ever; each must end as a
 * failure of that call, which the caller retries. The bounds are operations.md's (statement 30 s, row lock 10 s, 45 s
 * without a byte, the migration lock 30 s); {@link #HANG} only tells an unbounded wait from a bounded one.
 */
class CatalogBoundsIT {
    private static final LocalStack stack = LocalStack.get();
    /** Far above every bound the catalog client sets: a call still waiting then would wait for ever. */
    private static final Duration HANG = Duration.ofSeconds(150);
    private static final long MIGRATION_LOCK_KEY = 0x7461626C65636463L;
    private static final ExecutorService calls = Executors.newCachedThreadPool();

    @AfterAll
    static void stop() {
        calls.shutdownNow();
    }

    private static CatalogSettings settings(String url) {
        return new CatalogSettings(url, stack.postgres().user(), new Password(stack.postgres().password()), true, 2,
                5_000);
    }

    /** What {@code call} threw, failing if it returned or was still waiting after {@link #HANG}. */
    private static Throwable failureOf(String what, Callable<?> call) throws Exception {
        Future<?> f = calls.submit(call);
        try {
            f.get(HANG.toSeconds(), TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (TimeoutException e) {
            f.cancel(true);
            fail(what + " was still waiting after " + HANG.toSeconds() + " s: the catalog call has no bound");
        }
        return fail(what + " succeeded");
    }

    private static void awaitLockWait(Connection admin, String application) throws Exception {
        long deadline = System.nanoTime() + HANG.toNanos();
        while (System.nanoTime() < deadline) {
            try (PreparedStatement ps = admin.prepareStatement("SELECT count(*) FROM pg_stat_activity"
                    + " WHERE application_name = ? AND wait_event_type = 'Lock'")) {
                ps.setString(1, application);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    if (rs.getLong(1) > 0) {
                        return;
                    }
                }
            }
            Thread.sleep(100);
        }
        fail("no session of " + application + " ever waited for the lock");
    }

    /** A row lock kept by another session: the write waits for it, then fails within lock_timeout. */
    @Test
    void aWriteWaitingForARowLockAnotherSessionKeepsFails() throws Exception {
        String url = stack.postgres().createDatabase("bounds_rowlock");
        try (Catalog catalog = Catalog.open(settings(url), "bounds-rowlock");
             Connection holder = stack.postgres().connect("bounds_rowlock")) {
            catalog.progress().initTable("flow-rowlock", "t");
            holder.setAutoCommit(false);
            try (Statement s = holder.createStatement()) {
                s.execute("SELECT * FROM cdc_table_replication_state WHERE flow_name = 'flow-rowlock' FOR UPDATE");
            }
            Instant began = Instant.now();
            Throwable failure = failureOf("recordSync behind a row lock", () -> catalog.progress().recordSync(
                    "flow-rowlock", "t", SyncedBatch.cursorOnly("c1", 1), Instant.now()));
            assertInstanceOf(CatalogUnavailableException.class, failure, failure::toString);
            assertTrue(failure.getMessage().contains("recordSync") && failure.getMessage().contains("flow-rowlock"),
                    failure.getMessage());
            System.out.println("row lock: failed after " + Duration.between(began, Instant.now()).toMillis()
                    + " ms: " + failure.getMessage());
            holder.rollback();
        }
    }

    /**
     * The catalog stops answering while a statement runs (the proxy swallows everything from then on): the call
     * fails once no byte came back for the socket timeout, instead of holding the task's thread until the OS gives up
     * on the connection.
     */
    @Test
    void aStatementOnABlackHoledCatalogFails() throws Exception {
        String url = stack.postgres().createDatabase("bounds_hole");
        try (FaultProxy proxy = FaultProxy.start("catalog-hole", stack.postgres().host(), stack.postgres().port());
             Catalog catalog = Catalog.open(settings("jdbc:postgresql://127.0.0.1:" + proxy.port() + "/bounds_hole"),
                     "bounds-hole");
             Connection holder = stack.postgres().connect("bounds_hole");
             Connection admin = stack.postgres().connect("bounds_hole")) {
            catalog.progress().initTable("flow-hole", "t");
            holder.setAutoCommit(false);
            try (Statement s = holder.createStatement()) {
                s.execute("SELECT * FROM cdc_table_replication_state WHERE flow_name = 'flow-hole' FOR UPDATE");
            }
            Future<?> waiting = calls.submit(() -> catalog.progress().recordSync("flow-hole", "t",
                    SyncedBatch.cursorOnly("c1", 1), Instant.now()));
            // the write is on the server, waiting for the row: now nothing comes back any more
            awaitLockWait(admin, "tablecdc bounds-hole");
            proxy.blackHole();
            holder.rollback();
            Instant began = Instant.now();
            Throwable failure = failureOf("recordSync on a black-holed catalog", () -> waiting.get());
            failure = failure instanceof ExecutionException e ? e.getCause() : failure;
            assertInstanceOf(CatalogUnavailableException.class, failure, failure::toString);
            System.out.println("black hole: failed after " + Duration.between(began, Instant.now()).toMillis()
                    + " ms: " + failure.getMessage());
        }
    }

    /**
     * Another session keeps the migration lock (a connector whose host died while it migrated keeps it until the
     * server notices): a start waits for it within a bound, then fails naming the session that holds it and how to end
     * it.
     */
    @Test
    void aStartWaitingForTheMigrationLockFailsNamingItsHolder() throws Exception {
        String url = stack.postgres().createDatabase("bounds_migration");
        try (Connection holder = stack.postgres().connect("bounds_migration")) {
            int pid;
            try (Statement s = holder.createStatement();
                 ResultSet rs = s.executeQuery("SELECT pg_advisory_lock(" + MIGRATION_LOCK_KEY + "), pg_backend_pid()")) {
                rs.next();
                pid = rs.getInt(2);
            }
            Instant began = Instant.now();
            Throwable failure = failureOf("a start behind the migration lock",
                    () -> { Catalog.open(settings(url), "bounds-migration").close(); return null; });
            System.out.println("migration lock: failed after " + Duration.between(began, Instant.now()).toMillis()
                    + " ms: " + failure.getMessage());
            assertInstanceOf(CatalogUnavailableException.class, failure, failure::toString);
            assertTrue(failure.getMessage().contains("migration lock")
                    && failure.getMessage().contains("pid " + pid)
                    && failure.getMessage().contains("pg_terminate_backend"), failure.getMessage());
        }
    }
}
