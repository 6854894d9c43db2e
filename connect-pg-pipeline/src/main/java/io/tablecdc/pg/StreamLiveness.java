package io.tablecdc.pg;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

import org.postgresql.PGConnection;
import org.postgresql.replication.PGReplicationStream;

/**
 * Tells a replication stream whose connection died without a word: a host that froze, or a network cut that closed
 * nothing, leaves the stream with nothing to read and its status updates going nowhere, and no read or write fails
 * (only the kernel gives up, after about 15 minutes of unanswered sends). Every {@link #CHECK_INTERVAL_SECONDS} the
 * task forces a status update on the stream and, on its regular connection, asks the server whether that update
 * arrived: the slot's reader must be this stream's backend, and the server must have heard from it since (its
 * {@code pg_stat_replication.reply_time}). Either answer otherwise, or the question unanswered within
 * {@link #PROBE_TIMEOUT_MS}, and the stream is dead: an {@link SQLException} sends the task through its reconnect.
 * Durations are compared, never clocks: the server's time since the reply, against this task's since it sent one.
 * Used on the poll thread only.
 */
final class StreamLiveness {
    /** How often a status update is forced and checked. */
    static final long CHECK_INTERVAL_SECONDS = 10;
    /** How long the check's query may take on the regular connection before that connection counts as dead too. */
    static final int PROBE_TIMEOUT_MS = 15_000;
    /** Leeway between a status update sent and the server's record of it (a loaded server, a slow network). */
    private static final long LEEWAY_SECONDS = 10;
    private static final Executor DIRECT = Runnable::run;

    private long forcedAt;
    private long nextCheck;

    /** The stream was (re)opened: the next check forces an update first and judges only the one after. */
    void streamOpened() {
        forcedAt = 0;
        nextCheck = 0;
    }

    /**
     * Checks the stream when due; throws {@link SQLException} (state 08006) when it is dead, after ending the dead
     * stream's backend on the server, so that the slot is free for the reconnect at once instead of after
     * {@code wal_sender_timeout}.
     */
    void check(Connection sql, Connection replication, PGReplicationStream stream, String slot) throws SQLException {
        long now = System.nanoTime();
        if (now < nextCheck) {
            return;
        }
        nextCheck = now + TimeUnit.SECONDS.toNanos(CHECK_INTERVAL_SECONDS);
        long sinceForced = forcedAt == 0 ? -1 : TimeUnit.NANOSECONDS.toSeconds(now - forcedAt);
        // judged only while this task has been forcing updates regularly (a long gap between polls is no silence)
        if (sinceForced >= 0 && sinceForced <= 3 * CHECK_INTERVAL_SECONDS) {
            judge(sql, replication.unwrap(PGConnection.class).getBackendPID(), slot, sinceForced);
        }
        stream.forceUpdateStatus();
        forcedAt = System.nanoTime();
    }

    private static void judge(Connection sql, int pid, String slot, long sinceForced) throws SQLException {
        int before = sql.getNetworkTimeout();
        sql.setNetworkTimeout(DIRECT, PROBE_TIMEOUT_MS);
        try (PreparedStatement ps = sql.prepareStatement("SELECT s.active_pid,"
                + " EXTRACT(EPOCH FROM clock_timestamp() - r.reply_time)::bigint"
                + " FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid"
                + " WHERE s.slot_name = ?")) {
            ps.setString(1, slot);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    // the slot is gone: the reconnect's checks say so when the stream fails
                    return;
                }
                int active = rs.getInt(1);
                boolean reading = !rs.wasNull();
                long silentSeconds = rs.getLong(2);
                boolean heard = !rs.wasNull();
                if (!reading || active != pid) {
                    throw new SQLException("the replication connection is gone without closing: slot " + slot + " is read by "
                            + (reading ? "backend " + active : "no one") + ", not by this task's backend " + pid, "08006");
                }
                if (heard && silentSeconds > sinceForced + LEEWAY_SECONDS) {
                    terminate(sql, pid);
                    throw new SQLException("the replication connection stopped carrying data without closing (a network"
                            + " cut or a frozen host): the server last heard from it " + silentSeconds + " s ago, though a"
                            + " status update was sent " + sinceForced + " s ago; its backend " + pid + " was ended", "08006");
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

    /** Ends this task's own dead walsender, which would hold the slot until {@code wal_sender_timeout}. */
    private static void terminate(Connection sql, int pid) {
        try (PreparedStatement ps = sql.prepareStatement("SELECT pg_terminate_backend(?)")) {
            ps.setInt(1, pid);
            ps.execute();
        } catch (SQLException e) {
            // the server ends it after wal_sender_timeout anyway; the reconnect waits for the slot until then
        }
    }
}
