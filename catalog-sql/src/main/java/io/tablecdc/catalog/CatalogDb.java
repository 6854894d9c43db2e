package io.tablecdc.catalog;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLRecoverableException;
import java.sql.SQLTransientException;
import java.util.Objects;
import javax.sql.DataSource;

/**
 * The catalog's connection and transaction core, which every concern class ({@link TableProgress}, {@link PgPhases},
 * {@link CopyLeases}, {@link BatchIdReservations}, {@link Stages}, {@link SinkLeases}, {@link Flows}) runs its operations on:
 * one connection per operation (autocommit, or one transaction), SQL errors turned into
 * {@link CatalogUnavailableException} (retriable) or {@link CatalogException} naming the operation, the flow and the
 * table. The statements themselves run through {@link Sql}.
 */
final class CatalogDb {

    private final DataSource dataSource;

    /** The apply epoch this client's writes carry ({@link ApplyFence#NONE} unless an apply task took its flow). */
    private volatile ApplyFence fence = ApplyFence.NONE;

    CatalogDb(DataSource dataSource) {
        this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
    }

    /** The apply fence of this client's writes. */
    ApplyFence fence() {
        return fence;
    }

    /**
     * From now on this client's writes carry {@code fence}, and every operation ends by checking that the flow's apply
     * epoch is still {@code fence}'s ({@link ApplyTakenOverException} otherwise).
     */
    void fence(ApplyFence fence) {
        this.fence = Objects.requireNonNull(fence, "fence");
    }

    /** An operation's work on its connection. */
    @FunctionalInterface
    interface Work<T> {
        T run(Connection c) throws SQLException;
    }

    /** {@code work} on one table of a flow, in autocommit. */
    <T> T onTable(String operation, String flow, String table, Work<T> work) {
        Sql.requireName(operation, "flow", flow);
        Sql.requireName(operation, "table", table);
        return run(operation, flow, table, work);
    }

    /** {@code work} on a flow, in autocommit. */
    <T> T onFlow(String operation, String flow, Work<T> work) {
        Sql.requireName(operation, "flow", flow);
        return run(operation, flow, null, work);
    }

    /** {@code work} on the whole catalog, in autocommit. */
    <T> T onCatalog(String operation, Work<T> work) {
        return run(operation, null, null, work);
    }

    /** {@code work} on a flow, in autocommit, without this client's apply fence (the take of a new epoch). */
    <T> T onFlowUnfenced(String operation, String flow, Work<T> work) {
        Sql.requireName(operation, "flow", flow);
        return run(operation, flow, null, ApplyFence.NONE, work);
    }

    private <T> T run(String operation, String flow, String table, Work<T> work) {
        return run(operation, flow, table, fence, work);
    }

    private <T> T run(String operation, String flow, String table, ApplyFence fence, Work<T> work) {
        try (Connection c = dataSource.getConnection()) {
            if (!c.getAutoCommit()) {
                c.setAutoCommit(true);
            }
            if (fence.none()) {
                return work.run(c);
            }
            T result;
            try {
                result = work.run(c);
            } catch (SQLException | RuntimeException e) {
                // a write the fence refused may read as "no row" to the operation: the fence says why
                refuseIfTakenOver(c, fence, operation, e);
                throw e;
            }
            // a write the fence refused changed nothing, which most writes report as "nothing new": the task learns
            // here that it lost the flow, and stops
            refuseIfTakenOver(c, fence, operation, null);
            return result;
        } catch (SQLException e) {
            throw translate(operation, flow, table, e);
        }
    }

    /**
     * Throws {@link ApplyTakenOverException} when the flow's apply epoch is no longer {@code fence}'s. A check that
     * fails after {@code failure} leaves {@code failure} the one reported.
     */
    private static void refuseIfTakenOver(Connection c, ApplyFence fence, String operation, Exception failure)
            throws SQLException {
        long now;
        try {
            now = Sql.first(c, "SELECT apply_epoch FROM " + Sql.FLOW + " WHERE flow_name = ?", rs -> rs.getLong(1),
                    fence.flow()).orElse(-1L);
        } catch (SQLException e) {
            if (failure == null) {
                throw e;
            }
            failure.addSuppressed(e);
            return;
        }
        if (now != fence.epoch()) {
            throw takenOver(fence, now, operation);
        }
    }

    private static ApplyTakenOverException takenOver(ApplyFence fence, long now, String operation) {
        String epochs = now < 0 ? "the flow's cdc_flow row is gone; this one's is " + fence.epoch()
                : "epoch " + now + (now > fence.epoch() ? " > " : ", the flow's row written again, not ") + fence.epoch();
        return new ApplyTakenOverException("flow " + fence.flow() + ": another apply task took over (" + epochs
                + "); this one stops (its " + operation + " was refused and changed nothing)");
    }

    /** {@code work} on a flow in one transaction: committed when it returns, rolled back when it throws. */
    <T> T inTransaction(String operation, String flow, Work<T> work) {
        Sql.requireName(operation, "flow", flow);
        try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(false);
            Exception failure = null;
            ApplyFence fence = this.fence;
            try {
                if (!fence.none()) {
                    // the flow's row stays locked until the commit: no take comes between the check and the writes
                    long now = Sql.first(c, "SELECT apply_epoch FROM " + Sql.FLOW + " WHERE flow_name = ? FOR UPDATE",
                            rs -> rs.getLong(1), fence.flow()).orElse(-1L);
                    if (now != fence.epoch()) {
                        throw takenOver(fence, now, operation);
                    }
                }
                T result = work.run(c);
                c.commit();
                return result;
            } catch (SQLException | RuntimeException e) {
                failure = e;
                try {
                    c.rollback();
                } catch (SQLException suppressed) {
                    e.addSuppressed(suppressed);
                }
                throw e;
            } finally {
                // a failure that made the pool close the connection (SQLSTATE class 57, 08) stays the one reported: the
                // reset's "Connection is closed" would replace it, hide its cause and read as a broken catalog
                try {
                    c.setAutoCommit(true);
                } catch (SQLException reset) {
                    if (failure == null) {
                        throw reset;
                    }
                    failure.addSuppressed(reset);
                }
            }
        } catch (SQLException e) {
            throw translate(operation, flow, null, e);
        }
    }

    // ---------------------------------------------------------------- errors

    /**
     * A {@link FlowIdentityMismatchException}, made here so that {@link Flows}, whose reads the operator commands run
     * without Kafka's jars, never names that Kafka exception where the JVM checks it on loading (see {@link Sql}).
     */
    static RuntimeException flowMismatch(String message) {
        return new FlowIdentityMismatchException(message);
    }

    static RuntimeException translate(String operation, String flow, String table, SQLException e) {
        String where = operation + (flow == null ? "" : " for flow '" + flow + "'")
                + (table == null ? "" : " table '" + table + "'");
        if (isTransient(e)) {
            return new CatalogUnavailableException("catalog unavailable during " + where + ", will retry: "
                    + causeText(e), e);
        }
        return new CatalogException("catalog " + where + " failed: " + causeText(e), e);
    }

    /** Wrong password, unknown user or database: retrying will not help. */
    static boolean isRefusal(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLException sql && sql.getSQLState() != null
                    && (sql.getSQLState().startsWith("28") || sql.getSQLState().equals("3D000"))) {
                return true;
            }
        }
        return false;
    }

    /** Whether {@code e} has an SQL cause that says the catalog could not be reached (see {@link #isTransient}). */
    static boolean causedByOutage(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLException sql && isTransient(sql)) {
                return true;
            }
        }
        return false;
    }

    static boolean isTransient(SQLException e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLTransientException || t instanceof SQLRecoverableException) {
                return true;
            }
            if (t instanceof SQLException sql && sql.getSQLState() != null) {
                String state = sql.getSQLState();
                // 57014: statement_timeout ended it; 55P03: lock_timeout, or the migration lock still held
                if (state.startsWith("08") || state.startsWith("53") || state.startsWith("57P")
                        || state.equals("40001") || state.equals("40P01") || state.equals("57014")
                        || state.equals("55P03")) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The cause's message without anything that looks like a credential. */
    static String causeText(Throwable e) {
        String text = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        return text.replaceAll("(?i)(password|passwd|pwd)=[^&;\\s]*", "$1=****");
    }
}
