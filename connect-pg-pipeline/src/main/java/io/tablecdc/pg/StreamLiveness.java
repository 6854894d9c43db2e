package io.tablecdc.pg;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

import org.postgresql.PGConnection;

/**
 * Tells a replication stream whose connection died without a word: a host that froze, or a network cut that closed
 * nothing, leaves the stream with nothing to read and its status updates going nowhere, and no read or write fails
 * (only the kernel gives up, after about 15 minutes of unanswered sends). Every {@link #CHECK_INTERVAL_SECONDS} the
 * task asks the server, on its regular connection, who reads the slot: it must be this stream's own backend. The server
 * ends a reader it has not heard from for {@code wal_sender_timeout}, so a dead stream shows within that and one
 * interval; a question not answered within {@link #PROBE_TIMEOUT_MS} (the regular connection died too) shows it sooner.
 * Either sends the task through its reconnect ({@link SQLException}, state 08006). ({@code pg_stat_replication.reply_time}
 * cannot tell it sooner: it is the client's clock as the client wrote it, not when the server heard it.) Used on the
 * poll thread only.
 */
final class StreamLiveness {
    /** How often the slot's reader is checked. */
    static final long CHECK_INTERVAL_SECONDS = 10;
    /** How long the check's query may take on the regular connection before that connection counts as dead too. */
    static final int PROBE_TIMEOUT_MS = 15_000;
    private static final Executor DIRECT = Runnable::run;

    private long nextCheck;

    /** The stream was (re)opened: the first check comes one interval later. */
    void streamOpened() {
        nextCheck = System.nanoTime() + TimeUnit.SECONDS.toNanos(CHECK_INTERVAL_SECONDS);
    }

    /** Checks the stream when due; throws {@link SQLException} (state 08006) when it is dead. */
    void check(Connection sql, Connection replication, String slot) throws SQLException {
        long now = System.nanoTime();
        if (now < nextCheck) {
            return;
        }
        nextCheck = now + TimeUnit.SECONDS.toNanos(CHECK_INTERVAL_SECONDS);
        int pid = replication.unwrap(PGConnection.class).getBackendPID();
        int before = sql.getNetworkTimeout();
        sql.setNetworkTimeout(DIRECT, PROBE_TIMEOUT_MS);
        try (PreparedStatement ps = sql.prepareStatement("SELECT active_pid FROM pg_replication_slots WHERE slot_name = ?")) {
            ps.setString(1, slot);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    // the slot is gone: the reconnect's checks say so when the stream fails
                    return;
                }
                int active = rs.getInt(1);
                boolean reading = !rs.wasNull();
                if (!reading || active != pid) {
                    throw new SQLException("the replication connection is gone without closing: slot " + slot + " is read by "
                            + (reading ? "backend " + active : "no one") + ", not by this task's backend " + pid, "08006");
                }
            }
        } finally {
            sql.setNetworkTimeout(DIRECT, before);
        }
    }

    /** Bounds every later wait on {@code connection} (null or closed: nothing to do) to {@link #PROBE_TIMEOUT_MS}. */
    static void boundWaits(Connection connection) {
        try {
            if (connection != null && !connection.isClosed()) {
                connection.setNetworkTimeout(DIRECT, PROBE_TIMEOUT_MS);
            }
        } catch (SQLException e) {
            // a connection that cannot take the bound is closed right after anyway
        }
    }
}
