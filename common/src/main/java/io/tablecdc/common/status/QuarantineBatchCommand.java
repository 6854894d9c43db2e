package io.tablecdc.common.status;

import java.io.PrintStream;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.Map;
import java.util.Optional;

import io.tablecdc.catalog.SinkLeases;
import io.tablecdc.catalog.Stages;
import io.tablecdc.catalog.TableProgress;

/**
 * {@code tablecdc-quarantine-batch}: the way forward for a table whose next batch ClickHouse refuses (a value it
 * cannot take, a constraint it violates) and which therefore retries that batch for ever. With no sink task loading
 * the table, it moves the batch (the one the sink recorded as refused, or the one {@code --batch} names) from
 * {@code cdc_table_avro_stage} to {@code cdc_table_quarantined_batch}, with its stage files, row counts and the table's
 * last error, and closes the table's error episode. Without {@code --batch} it acts only while the table's last error
 * is the sink's record that ClickHouse refused a batch's data ({@code refused_batch_id}, written by the normalize loop
 * with that error), and then on exactly that batch: never after an outage, a timeout or a lease wait, and never twice,
 * so a repeated run never sets aside a second, good batch. The sink then loads the table's later batches; the quarantined
 * batch's files stay in the stage store (the sink never deletes them), and {@code tablecdc-status} lists the batch.
 * Runs {@link Stages#quarantine} on one plain JDBC connection, like {@link StatusCommand}.
 */
public final class QuarantineBatchCommand {
    private static final String NAME = "tablecdc-quarantine-batch";
    private static final String USAGE = TableCommand.usage("tablecdc-quarantine-batch", "--flow FLOW --table TABLE [--batch BATCH_ID]",
            "",
            "Sets aside the staged batch of one table that ClickHouse refuses, so that the sink loads the batches",
            "after it. Without --batch, only the batch the sink recorded as refused by ClickHouse (a server error",
            "about its data), and only while that refusal is the table's last error; after an outage, a timeout or",
            "a wait for another sink task nothing is set aside. --batch sets that batch aside whatever the error.",
            "Its stage files stay where they are and are listed in the catalog (cdc_table_quarantined_batch) and",
            "by tablecdc-status.",
            "Stop the sink first, or run it while the table waits for its next retry; resume the sink after it",
            "(docs/operations.md, \"A batch ClickHouse refuses\"). Connection options as for tablecdc-status.",
            "",
            "exit status: 0 set aside, 1 catalog unreachable, no such table or batch, no refused batch, or a sink",
            "still loads it, 2 bad arguments");

    /** The prefix of the errors the sink's normalize loop records. */
    private static final String NORMALIZE_ERROR_PREFIX = "normalize: ";

    private QuarantineBatchCommand() {
    }

    public static void main(String[] args) {
        System.exit(run(args, System.getenv(), System.out, System.err));
    }

    static int run(String[] args, Map<String, String> env, PrintStream out, PrintStream err) {
        return TableCommand.run(NAME, USAGE, args, env, out, err, TableCommand.inTransaction(out,
                (c, options, flow, table) -> quarantine(c, flow, table, options.batch, err)));
    }

    private static Optional<String> quarantine(Connection c, String flow, String table, Long batch, PrintStream err)
            throws SQLException {
        Optional<SinkLeases.LockedTable> locked = TableCommand.lockFromSink(c, NAME, flow, table, err);
        if (locked.isEmpty()) {
            return Optional.empty();
        }
        String error = locked.get().lastError();
        Long refused = locked.get().refusedBatchId();
        if (batch == null && refused == null) {
            // no refusal recorded as the last error: the refused batch was set aside already (a repeated run), the
            // last error is an outage, a timeout or a wait the sink gets over by retrying, or nothing failed; any batch
            // set aside now would be a good one, so never guess
            err.println(NAME + ": flow " + flow + ", table " + table + " has no batch that ClickHouse refuses, so no batch"
                    + " is set aside: " + (error == null ? "its sink records no error"
                    : "its last error is not ClickHouse refusing a batch's data but: " + error + (error.startsWith(NORMALIZE_ERROR_PREFIX)
                    ? " (an outage, a timeout or a wait for another sink task passes, and the sink then loads the batch;"
                    + " a batch ClickHouse refuses is recorded at the sink's next attempt: resume it and run this again"
                    + " if the error stays)" : "")) + "; name a batch with --batch to set it aside anyway");
            return Optional.empty();
        }
        if (batch == null) {
            batch = refused;
        }
        Optional<Stages.QuarantinedBatch> moved = Stages.quarantine(c, flow, table, locked.get().normalizedBatchId(),
                batch, error);
        if (moved.isEmpty()) {
            err.println(NAME + ": flow " + flow + ", table " + table + " has no staged batch "
                    + (batch == null ? "waiting to be loaded" : batch + " waiting to be loaded (tablecdc-status shows"
                    + " the normalized batch id; batches at or below it are loaded already)"));
            return Optional.empty();
        }
        TableProgress.clearError(c, flow, table);
        Stages.QuarantinedBatch q = moved.get();
        return Optional.of("flow " + flow + ", table " + table + ": batch " + q.batchId() + " (" + q.rows() + " rows, "
                + q.files() + (q.files() == 1 ? " stage file" : " stage files") + (q.truncateBefore() ? ", with a truncate" : "")
                + ") set aside in cdc_table_quarantined_batch; the sink loads the batches after it"
                + " (resume it if it is stopped)");
    }
}
