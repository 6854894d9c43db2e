package io.tablecdc.common.status;

import java.io.PrintStream;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Map;
import java.util.Optional;

/**
 * {@code tablecdc-reload-table}: lets the ClickHouse stage sink load one table again from what Kafka still holds. With
 * the sink stopped, it sets the table's normalized batch id and its insert/update/delete counts back to 0, removes its
 * staged batches (they come again from Kafka) and raises its normalize epoch, which is part of every load's
 * deduplication token, so that ClickHouse does not skip the reloaded batches as repeats. The operator then rewinds the
 * sink's offsets of the table's topic and resumes the sink (docs/operations.md). Refused while a sink task holds the
 * table's normalize lease. Plain JDBC, like {@link StatusCommand}.
 */
public final class ReloadTableCommand {
    private static final String NAME = "tablecdc-reload-table";
    private static final String USAGE = String.join("\n",
            "usage: tablecdc-reload-table [--url JDBC_URL] [--user USER] [--password-file FILE | --password-prompt]",
            "                             --flow FLOW --table TABLE",
            "",
            "Resets where the ClickHouse stage sink stands in one table, so that it loads the table again from its",
            "topic. Stop the sink first; then rewind its offsets of the table's topic and resume it",
            "(docs/operations.md, \"Reload one table into ClickHouse\"). Connection options as for tablecdc-status.",
            "",
            "exit status: 0 reset, 1 catalog unreachable, no such table or a sink still loads it, 2 bad arguments");

    private ReloadTableCommand() {
    }

    public static void main(String[] args) {
        System.exit(run(args, System.getenv(), System.out, System.err));
    }

    static int run(String[] args, Map<String, String> env, PrintStream out, PrintStream err) {
        return TableCommand.run(NAME, USAGE, args, env, out, err, TableCommand.inTransaction(out, (c, options, flow, table) -> {
            if (TableCommand.lockFromSink(c, NAME, flow, table, err).isEmpty()) {
                return Optional.empty();
            }
            int dropped;
            try (PreparedStatement ps = c.prepareStatement("DELETE FROM cdc_table_avro_stage"
                    + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                dropped = ps.executeUpdate();
            }
            long before;
            int epoch;
            try (PreparedStatement ps = c.prepareStatement("UPDATE cdc_table_replication_state AS s"
                    + " SET normalized_batch_id = 0, inserts_count = 0, updates_count = 0, deletes_count = 0,"
                    + " normalize_epoch = s.normalize_epoch + 1, normalize_lease_owner = NULL, normalize_lease_until = NULL,"
                    + " last_error = NULL, last_error_at = NULL, error_count = 0, next_retry_at = NULL"
                    + " FROM (SELECT normalized_batch_id FROM cdc_table_replication_state WHERE flow_name = ?"
                    + "   AND source_table_identifier = ?) old"
                    + " WHERE s.flow_name = ? AND s.source_table_identifier = ?"
                    + " RETURNING old.normalized_batch_id, s.normalize_epoch")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setString(3, flow);
                ps.setString(4, table);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    before = rs.getLong(1);
                    epoch = rs.getInt(2);
                }
            }
            return Optional.of("flow " + flow + ", table " + table + ": normalized batch id " + before + " -> 0, " + dropped
                    + " staged batches dropped, normalize epoch " + epoch + "; now rewind the sink's offsets of the"
                    + " table's topic and resume the sink");
        }));
    }
}
