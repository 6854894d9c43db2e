package io.tablecdc.common.status;

import java.io.PrintStream;
import java.util.Map;
import java.util.Optional;

import io.tablecdc.catalog.SinkLeases;
import io.tablecdc.catalog.Stages;

/**
 * {@code tablecdc-reload-table}: lets the ClickHouse stage sink load one table again from what Kafka still holds. With
 * the sink stopped, it sets the table's normalized batch id and its insert/update/delete counts back to 0, removes its
 * staged batches (they come again from Kafka) and raises its normalize epoch, which is part of every load's
 * deduplication token, so that ClickHouse does not skip the reloaded batches as repeats. The operator then rewinds the
 * sink's offsets of the table's topic and resumes the sink (docs/operations.md). Refused while a sink task holds the
 * table's normalize lease. Runs {@link SinkLeases#reload} and {@link Stages#dropStages} on one plain JDBC connection,
 * like {@link StatusCommand}.
 */
public final class ReloadTableCommand {
    private static final String NAME = "tablecdc-reload-table";
    private static final String USAGE = TableCommand.usage("tablecdc-reload-table", "--flow FLOW --table TABLE",
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
            int dropped = Stages.dropStages(c, flow, table);
            SinkLeases.Reloaded reloaded = SinkLeases.reload(c, flow, table);
            long before = reloaded.normalizedBatchIdBefore();
            int epoch = reloaded.normalizeEpoch();
            return Optional.of("flow " + flow + ", table " + table + ": normalized batch id " + before + " -> 0, " + dropped
                    + " staged batches dropped, normalize epoch " + epoch + "; now rewind the sink's offsets of the"
                    + " table's topic and resume the sink");
        }));
    }
}
