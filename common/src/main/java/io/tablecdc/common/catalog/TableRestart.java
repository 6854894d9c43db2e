package io.tablecdc.common.catalog;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Optional;

/**
 * Starts a Postgres pipeline table over with a new copy while its flow runs: the table becomes {@code errored} with a
 * reason and a retry after a delay, with a fresh retry budget. The apply task stops sending its changes at its next
 * catalog read; once the delay has passed a copy task claims it, truncates it in ClickHouse, copies it from a new
 * snapshot, catches it up and hands it over. The delay lets the apply task's last records of the table reach Kafka
 * before the copy's first one. Used by {@code tablecdc-reset-table} and by the apply task when a table came back to its
 * publication.
 */
public final class TableRestart {
    private TableRestart() {
    }

    /**
     * Restarts {@code table} of {@code flow} on the caller's connection.
     *
     * @return the table's phase before, or empty when the flow has no Postgres pipeline table of that name
     */
    public static Optional<String> restart(Connection c, String flow, String table, String reason, int delaySeconds)
            throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("UPDATE cdc_table_replication_state AS s SET phase = 'errored',"
                + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL, copy_attempt = 0,"
                + " copy_failures = 0, error_count = 0, last_error = ?, last_error_at = now(),"
                + " next_retry_at = now() + make_interval(secs => ?)"
                + " FROM (SELECT phase FROM cdc_table_replication_state WHERE flow_name = ?"
                + "   AND source_table_identifier = ? FOR UPDATE) before"
                + " WHERE s.flow_name = ? AND s.source_table_identifier = ? AND s.phase IS NOT NULL"
                + " RETURNING before.phase")) {
            ps.setString(1, reason);
            ps.setInt(2, delaySeconds);
            ps.setString(3, flow);
            ps.setString(4, table);
            ps.setString(5, flow);
            ps.setString(6, table);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? Optional.of(rs.getString(1)) : Optional.empty();
            }
        }
    }
}
