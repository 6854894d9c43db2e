package io.tablecdc.common.status;

import java.io.PrintStream;
import java.util.Map;
import java.util.Optional;

import io.tablecdc.catalog.PgPhases;

/**
 * {@code tablecdc-reset-table}: makes a Postgres pipeline table start over while its flow runs. The table is marked
 * {@code errored} ("reset by an operator") with a retry {@value #DELAY_SECONDS} s from now and a fresh retry budget:
 * the apply task stops sending its changes at its next catalog read (within seconds), and once the delay has passed a
 * copy task claims it, truncates it in ClickHouse, copies it from a new snapshot, catches it up and hands it over.
 * The delay lets the apply task's last records of the table reach Kafka before the copy's first one.
 *
 * <p>Needs copy tasks ({@code tasks.max} of 2 or more and {@code table.sync.copy} other than {@code none}); a table
 * that {@code table.sync.copy} excludes is caught up and handed over again without a copy. Runs
 * {@link PgPhases#restartTable(java.sql.Connection, String, String, String, int)} on one plain JDBC connection, like
 * {@link StatusCommand}.
 */
public final class ResetTableCommand {
    static final int DELAY_SECONDS = 10;

    private static final String USAGE = TableCommand.usage("tablecdc-reset-table", "--flow FLOW --table SCHEMA.TABLE",
            "",
            "Copies one table of a running Postgres pipeline flow again from scratch (its ClickHouse table is",
            "truncated first). Connection options as for tablecdc-status.",
            "",
            "exit status: 0 reset, 1 catalog unreachable or no such table, 2 bad arguments");

    private ResetTableCommand() {
    }

    public static void main(String[] args) {
        System.exit(run(args, System.getenv(), System.out, System.err));
    }

    static int run(String[] args, Map<String, String> env, PrintStream out, PrintStream err) {
        return TableCommand.run("tablecdc-reset-table", USAGE, args, env, out, err, (c, options, flow, table) -> {
            Optional<String> before = PgPhases.restartTable(c, flow, table,
                    "reset by an operator: copied again from scratch", DELAY_SECONDS);
            if (before.isEmpty()) {
                err.println("tablecdc-reset-table: flow " + flow + " has no Postgres pipeline table " + table
                        + " in this catalog (tablecdc-status lists them)");
                return 1;
            }
            out.println("flow " + flow + ", table " + table + ": " + before.get() + " -> errored (reset); a copy"
                    + " task copies it again from scratch in " + DELAY_SECONDS + " s");
            return 0;
        });
    }
}
