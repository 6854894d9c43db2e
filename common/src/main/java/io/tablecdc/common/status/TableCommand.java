package io.tablecdc.common.status;

import java.io.IOException;
import java.io.PrintStream;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import io.tablecdc.catalog.SinkLeases;

/**
 * What the operator commands on one table share ({@code tablecdc-reset-table}, {@code tablecdc-reload-table},
 * {@code tablecdc-quarantine-batch}): the arguments of {@link StatusCommand} with exactly one {@code --flow} and one
 * {@code --table}, one catalog connection, and errors that never show a password. Exit status: what the work returns,
 * 1 when the catalog cannot be read or written, 2 for bad arguments.
 */
final class TableCommand {
    private TableCommand() {
    }

    /** The command's work on one table of the catalog; returns its exit status. */
    @FunctionalInterface
    interface Work {
        int run(Connection catalog, StatusCommand.Options options, String flow, String table) throws SQLException;
    }

    /**
     * A table command's usage text: its name with the connection options of {@code tablecdc-status}, its
     * {@code arguments} on the next line under them, then {@code text}, line by line.
     */
    static String usage(String name, String arguments, String... text) {
        String usage = "usage: " + name + " ";
        return String.join("\n", usage + "[--url JDBC_URL] [--user USER] [--password-file FILE | --password-prompt]",
                " ".repeat(usage.length()) + arguments, String.join("\n", text));
    }

    static int run(String name, String usage, String[] args, Map<String, String> env, PrintStream out, PrintStream err,
                   Work work) {
        return run(name, usage, args, env, out, err, true, work);
    }

    /** As above; {@code oneTable} false for a command on a whole flow (no {@code --table}; the work gets null). */
    static int run(String name, String usage, String[] args, Map<String, String> env, PrintStream out, PrintStream err,
                   boolean oneTable, Work work) {
        StatusCommand.Options options;
        String password;
        try {
            options = StatusCommand.Options.parse(args, env);
            if (options.help) {
                out.println(usage);
                return 0;
            }
            if (oneTable && (options.flows.size() != 1 || options.tables.size() != 1)) {
                throw new IllegalArgumentException("name exactly one --flow and one --table");
            }
            if (!oneTable && (options.flows.size() != 1 || !options.tables.isEmpty())) {
                throw new IllegalArgumentException("name exactly one --flow (and no --table)");
            }
            if (options.sourceUrl != null && !options.sourceUrl.startsWith("jdbc:postgresql:")) {
                throw new IllegalArgumentException("the source database's JDBC URL must start with jdbc:postgresql:");
            }
            password = options.password(env);
        } catch (IllegalArgumentException | IOException e) {
            err.println(name + ": " + e.getMessage());
            err.println(usage);
            return 2;
        }
        Properties props = new Properties();
        if (options.user != null) {
            props.setProperty("user", options.user);
        }
        if (password != null) {
            props.setProperty("password", password);
        }
        props.setProperty("ApplicationName", name);
        props.setProperty("connectTimeout", "10");
        try (Connection c = DriverManager.getConnection(options.url, props)) {
            return work.run(c, options, options.flows.get(0), oneTable ? options.tables.get(0) : null);
        } catch (SQLException e) {
            String message = e.getMessage() == null ? e.toString() : e.getMessage();
            err.println(name + ": cannot update the catalog: " + withoutPassword(message));
            return 1;
        }
    }

    /** {@code message} with any password in it (a JDBC URL's {@code password=…}) masked. */
    static String withoutPassword(String message) {
        return message.replaceAll("(?i)(password|passwd|pwd)=[^&;\\s]*", "$1=****");
    }

    /**
     * Work done in one catalog transaction: returns what to print once it is committed, or empty when it refused
     * (having printed why to the error stream), which rolls it back.
     */
    @FunctionalInterface
    interface TransactionWork {
        Optional<String> run(Connection catalog, StatusCommand.Options options, String flow, String table) throws SQLException;
    }

    /** {@code work} in one transaction: committed and its message printed (exit status 0), or rolled back (1). */
    static Work inTransaction(PrintStream out, TransactionWork work) {
        return (c, options, flow, table) -> {
            c.setAutoCommit(false);
            try {
                Optional<String> done = work.run(c, options, flow, table);
                if (done.isEmpty()) {
                    c.rollback();
                    return 1;
                }
                c.commit();
                out.println(done.get());
                return 0;
            } catch (SQLException | RuntimeException e) {
                c.rollback();
                throw e;
            }
        };
    }

    /**
     * Locks the table's catalog row for this transaction and checks that no sink task is loading the table now (holds
     * an unexpired normalize lease) and that no running sink holds it (a sink that loads it, even while idle: its staged
     * batches would be dropped under it). Prints why and returns empty when the command must not go on: no such table,
     * or a sink loads or holds it.
     */
    static Optional<SinkLeases.LockedTable> lockFromSink(Connection c, String name, String flow, String table,
                                                         PrintStream err) throws SQLException {
        Optional<SinkLeases.LockedTable> row = SinkLeases.lockForOperator(c, flow, table);
        if (row.isEmpty()) {
            err.println(name + ": flow " + flow + " has no table " + table + " in this catalog (tablecdc-status lists them)");
            return Optional.empty();
        }
        if (row.get().leaseHolder() != null) {
            err.println(name + ": flow " + flow + ", table " + table + ": sink task " + row.get().leaseHolder()
                    + " is loading it; stop the sink (PUT /connectors/<sink>/stop) and run this again");
            return Optional.empty();
        }
        String sink = row.get().holdingSink();
        if (sink != null) {
            err.println(name + ": flow " + flow + ", table " + table + ": sink " + sink + " holds it (until "
                    + row.get().holdUntil() + "; a running sink renews its hold, a stopped one gives it up): stop that sink"
                    + " (PUT /connectors/" + sink + "/stop) and run this again. If another sink was refused this table"
                    + " because that sink loads it, this command does not help: give the other sink its own catalog, or"
                    + " delete the sink that holds it first (docs/operations.md, \"Two sinks on one table\")");
            return Optional.empty();
        }
        return row;
    }
}
