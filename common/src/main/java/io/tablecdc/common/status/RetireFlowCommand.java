package io.tablecdc.common.status;

import java.io.PrintStream;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import io.tablecdc.catalog.Flows;
import io.tablecdc.common.FlowSlots;

/**
 * {@code tablecdc-retire-flow}: removes a flow whose connector was deleted (retired, or renamed: created again under
 * another name) from the catalog, so that a flow under another name may load its ClickHouse tables, and drops a
 * Postgres pipeline flow's replication slots (its main slot, its copy slots and its tables' private slots) on its source
 * database, which would otherwise keep its WAL. Refused while a task of the flow still runs (a copy lease or a sink
 * loading one of its tables; a slot still streamed). The catalog rows go in one transaction, after the slots were
 * dropped; a run that failed half-way can be run again. Runs {@link Flows#lockForRetire} and {@link Flows#retire} on one
 * plain JDBC connection, like {@link StatusCommand}.
 */
public final class RetireFlowCommand {
    private static final String NAME = "tablecdc-retire-flow";
    /** The source database user's password for {@code --source-user}. */
    static final String ENV_SOURCE_PASSWORD = "TABLECDC_SOURCE_PASSWORD";
    private static final String USAGE = TableCommand.usage(NAME, "--flow FLOW [--source-url JDBC_URL --source-user USER]",
            "",
            "Removes a flow whose connector was deleted from the catalog (its tables, their staged batches and",
            "destinations), so that a flow under another name can load its ClickHouse tables; its ClickHouse tables",
            "are kept. A Postgres pipeline flow's replication slots are dropped on its source database, given with",
            "--source-url and --source-user (password in " + ENV_SOURCE_PASSWORD + "). Delete the flow's connector",
            "first (docs/operations.md, \"Rename, retire or restart a flow\"). Connection options as for tablecdc-status.",
            "",
            "exit status: 0 retired, 1 catalog or source unreachable, no such flow or the flow still runs, 2 bad arguments");

    private RetireFlowCommand() {
    }

    public static void main(String[] args) {
        System.exit(run(args, System.getenv(), System.out, System.err));
    }

    static int run(String[] args, Map<String, String> env, PrintStream out, PrintStream err) {
        return TableCommand.run(NAME, USAGE, args, env, out, err, false, TableCommand.inTransaction(out, (c, options, flow, none) -> {
            Optional<Flows.RetiringFlow> found = Flows.lockForRetire(c, flow);
            if (found.isEmpty()) {
                err.println(NAME + ": this catalog has no flow " + flow + " (tablecdc-status lists the flows)");
                return Optional.empty();
            }
            Flows.RetiringFlow retiring = found.get();
            if (!retiring.running().isEmpty()) {
                err.println(NAME + ": flow " + flow + " still runs (" + String.join("; ", retiring.running()) + "): delete"
                        + " its connector (DELETE /connectors/" + flow + ") and run this again once its tasks stopped");
                return Optional.empty();
            }
            List<String> dropped = List.of();
            if (retiring.mainSlot() != null) {
                if (options.sourceUrl == null) {
                    err.println(NAME + ": flow " + flow + " is a Postgres pipeline flow with replication slot "
                            + retiring.mainSlot() + " on its source database, which keeps WAL until it is dropped: give"
                            + " --source-url jdbc:postgresql://HOST:PORT/DATABASE and --source-user USER (password in "
                            + ENV_SOURCE_PASSWORD + "), a user allowed to drop replication slots, and run this again");
                    return Optional.empty();
                }
                Optional<List<String>> slots = dropSlots(flow, retiring, options, env, err);
                if (slots.isEmpty()) {
                    return Optional.empty();
                }
                dropped = slots.get();
            }
            Flows.Retired retired = Flows.retire(c, flow);
            return Optional.of("flow " + flow + " retired: " + retired.tables() + " tables, " + retired.stagedBatches()
                    + " staged and " + retired.quarantinedBatches() + " quarantined batches removed from the catalog"
                    + (retiring.mainSlot() == null ? "" : "; replication slots dropped: "
                            + (dropped.isEmpty() ? "none (already gone)" : String.join(", ", dropped)))
                    + "; its ClickHouse tables are kept (stage files stay in the object store)");
        }));
    }

    /**
     * Drops the flow's slots on its source database: its main slot, its tables' private slots and every slot named with
     * its copy or private slot prefix. Empty (having printed why) when one of them is still streamed or the source
     * cannot be reached; otherwise the slots dropped.
     */
    private static Optional<List<String>> dropSlots(String flow, Flows.RetiringFlow retiring, StatusCommand.Options options,
                                                    Map<String, String> env, PrintStream err) {
        String main = retiring.mainSlot();
        String slotPrefix = FlowSlots.slotPrefixOf(main).orElse(null);
        String copy = slotPrefix == null ? main : FlowSlots.copySlotPrefix(slotPrefix, main);
        String detach = slotPrefix == null ? main : FlowSlots.detachSlotPrefix(slotPrefix, main);
        Properties props = new Properties();
        if (options.sourceUser != null) {
            props.setProperty("user", options.sourceUser);
        }
        String password = env.get(ENV_SOURCE_PASSWORD);
        if (password != null) {
            props.setProperty("password", password);
        }
        props.setProperty("ApplicationName", NAME);
        props.setProperty("connectTimeout", "10");
        try (Connection source = DriverManager.getConnection(options.sourceUrl, props)) {
            List<String> slots = new ArrayList<>();
            List<String> active = new ArrayList<>();
            try (PreparedStatement ps = source.prepareStatement("SELECT slot_name, active, active_pid FROM pg_replication_slots"
                    + " WHERE database = current_database() AND (slot_name = ? OR slot_name = ANY (?)"
                    + " OR left(slot_name, length(?)) = ? OR left(slot_name, length(?)) = ?) ORDER BY slot_name")) {
                ps.setString(1, main);
                ps.setArray(2, source.createArrayOf("text", retiring.detachSlots().toArray(new String[0])));
                ps.setString(3, copy);
                ps.setString(4, copy);
                ps.setString(5, detach);
                ps.setString(6, detach);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        slots.add(rs.getString(1));
                        if (rs.getBoolean(2)) {
                            active.add(rs.getString(1) + " (pid " + rs.getString(3) + ")");
                        }
                    }
                }
            }
            if (!active.isEmpty()) {
                err.println(NAME + ": flow " + flow + " still streams from its slots " + String.join(", ", active)
                        + ": delete its connector (DELETE /connectors/" + flow + ") and run this again once its tasks stopped");
                return Optional.empty();
            }
            List<String> dropped = new ArrayList<>();
            for (String slot : slots) {
                try (PreparedStatement ps = source.prepareStatement("SELECT pg_drop_replication_slot(slot_name)"
                        + " FROM pg_replication_slots WHERE slot_name = ? AND NOT active")) {
                    ps.setString(1, slot);
                    try (ResultSet rs = ps.executeQuery()) {
                        if (rs.next()) {
                            dropped.add(slot);
                        }
                    }
                }
            }
            return Optional.of(dropped);
        } catch (SQLException e) {
            String message = e.getMessage() == null ? e.toString() : e.getMessage();
            err.println(NAME + ": cannot drop the replication slots of flow " + flow + " on its source database "
                    + "(nothing was removed from the catalog): " + TableCommand.withoutPassword(message));
            return Optional.empty();
        }
    }
}
