package io.tablecdc.common.status;

import java.io.Console;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import io.tablecdc.common.JsonText;
import io.tablecdc.catalog.Flows;
import io.tablecdc.catalog.RowCounts;
import io.tablecdc.catalog.Stages;
import io.tablecdc.catalog.TableProgress;
import io.tablecdc.catalog.TableState;

/**
 * {@code tablecdc-status}: prints, per flow, one line per table from the catalog: phase, cursor,
 * synced and normalized batch ids, rows, lag of the oldest unnormalized row, pause reason, last error.
 *
 * <p>Runs from a plugin archive with {@code bin/tablecdc-status} or {@code java -jar lib/tablecdc-common-*.jar}.
 * It needs only pgjdbc: it reads through the catalog classes' operations on one plain JDBC connection (no pool) and no logging library, because the archives ship without
 * SLF4J (Connect provides it) and without Kafka's jars. Read-only.
 */
public final class StatusCommand {

    static final String ENV_URL = "TABLECDC_CATALOG_JDBC_URL";
    static final String ENV_USER = "TABLECDC_CATALOG_USER";
    static final String ENV_PASSWORD = "TABLECDC_CATALOG_PASSWORD";

    private static final String USAGE = String.join("\n",
            "usage: tablecdc-status [--url JDBC_URL] [--user USER] [--password-file FILE | --password-prompt]",
            "                       [--flow FLOW]... [--json]",
            "",
            "Prints every table of every flow (or of the given flows) from the tablecdc catalog.",
            "",
            "  --url URL            catalog JDBC URL (jdbc:postgresql://host:5432/db); env " + ENV_URL,
            "  --user USER          catalog user; env " + ENV_USER,
            "  --password-file F    read the password from the first line of file F",
            "  --password-prompt    ask for the password on the terminal (not echoed)",
            "                       otherwise the password comes from env " + ENV_PASSWORD,
            "  --flow FLOW          only this flow (repeatable)",
            "  --json               one JSON document for machines instead of tables",
            "",
            "exit status: 0 printed, 1 catalog unreachable or unreadable, 2 bad arguments");

    private StatusCommand() {
    }

    public static void main(String[] args) {
        System.exit(run(args, System.getenv(), System.out, System.err));
    }

    /** Runs the command; returns the exit status. */
    static int run(String[] args, Map<String, String> env, PrintStream out, PrintStream err) {
        Options options;
        try {
            options = Options.parse(args, env);
        } catch (IllegalArgumentException e) {
            err.println("tablecdc-status: " + e.getMessage());
            err.println(USAGE);
            return 2;
        }
        if (options.help) {
            out.println(USAGE);
            return 0;
        }
        String password;
        try {
            password = options.password(env);
        } catch (IOException | IllegalArgumentException e) {
            err.println("tablecdc-status: cannot read the password: " + e.getMessage());
            return 2;
        }
        Properties props = new Properties();
        if (options.user != null) {
            props.setProperty("user", options.user);
        }
        if (password != null) {
            props.setProperty("password", password);
        }
        props.setProperty("ApplicationName", "tablecdc-status");
        props.setProperty("connectTimeout", "10");
        props.setProperty("readOnly", "true");
        try (Connection c = DriverManager.getConnection(options.url, props)) {
            Report report = Report.read(c, options.flows);
            if (options.json) {
                out.println(report.json());
            } else {
                out.print(report.text());
            }
            return 0;
        } catch (SQLException e) {
            String message = e.getMessage() == null ? e.toString() : e.getMessage();
            if ("42P01".equals(e.getSQLState())) {
                message = "no tablecdc catalog in this database (cdc_table_replication_state is missing);"
                        + " connectors create it when they start with catalog.migrate=true";
            }
            err.println("tablecdc-status: cannot read the catalog: "
                    + message.replaceAll("(?i)(password|passwd|pwd)=[^&;\\s]*", "$1=****"));
            return 1;
        }
    }

    /** Command line options. */
    static final class Options {
        String url;
        String user;
        Path passwordFile;
        boolean passwordPrompt;
        final List<String> flows = new ArrayList<>();
        /** Only for the commands on one table ({@link TableCommand}). */
        final List<String> tables = new ArrayList<>();
        /** Only for tablecdc-quarantine-batch: the batch id, or null for the table's first staged batch. */
        Long batch;
        /** Only for tablecdc-retire-flow: the JDBC URL and user of a Postgres flow's source database (its slots). */
        String sourceUrl;
        String sourceUser;
        boolean json;
        boolean help;

        static Options parse(String[] args, Map<String, String> env) {
            Options o = new Options();
            o.url = env.get(ENV_URL);
            o.user = env.get(ENV_USER);
            for (int i = 0; i < args.length; i++) {
                String arg = args[i];
                switch (arg) {
                    case "--url" -> o.url = value(args, ++i, arg);
                    case "--user" -> o.user = value(args, ++i, arg);
                    case "--password-file" -> o.passwordFile = Path.of(value(args, ++i, arg));
                    case "--password-prompt" -> o.passwordPrompt = true;
                    case "--flow" -> o.flows.add(value(args, ++i, arg));
                    case "--table" -> o.tables.add(value(args, ++i, arg));
                    case "--json" -> o.json = true;
                    case "--source-url" -> o.sourceUrl = value(args, ++i, arg);
                    case "--source-user" -> o.sourceUser = value(args, ++i, arg);
                    case "--batch" -> {
                        String text = value(args, ++i, arg);
                        try {
                            o.batch = Long.parseLong(text);
                        } catch (NumberFormatException e) {
                            throw new IllegalArgumentException("--batch needs a batch id (a positive integer), not " + text);
                        }
                        if (o.batch < 1) {
                            throw new IllegalArgumentException("--batch needs a batch id (a positive integer), not " + text);
                        }
                    }
                    case "-h", "--help" -> o.help = true;
                    case "--password" -> throw new IllegalArgumentException("--password is not accepted (it would"
                            + " show in the process list); use " + ENV_PASSWORD + ", --password-file or"
                            + " --password-prompt");
                    default -> throw new IllegalArgumentException("unknown argument " + arg);
                }
            }
            if (!o.help && (o.url == null || o.url.isEmpty())) {
                throw new IllegalArgumentException("the catalog JDBC URL is missing: --url or " + ENV_URL);
            }
            if (!o.help && !o.url.startsWith("jdbc:postgresql:")) {
                throw new IllegalArgumentException("the catalog JDBC URL must start with jdbc:postgresql:");
            }
            return o;
        }

        private static String value(String[] args, int i, String flag) {
            if (i >= args.length) {
                throw new IllegalArgumentException(flag + " needs a value");
            }
            return args[i];
        }

        String password(Map<String, String> env) throws IOException {
            if (passwordFile != null) {
                List<String> lines = Files.readAllLines(passwordFile, StandardCharsets.UTF_8);
                return lines.isEmpty() ? "" : lines.get(0);
            }
            if (passwordPrompt) {
                Console console = System.console();
                if (console == null) {
                    throw new IllegalArgumentException("--password-prompt needs a terminal");
                }
                char[] typed = console.readPassword("catalog password: ");
                return typed == null ? null : new String(typed);
            }
            return env.get(ENV_PASSWORD);
        }
    }

    /** One table's line. */
    record TableLine(String table, String phase, String phaseLsn, String cursor, long syncedBatchId,
                     long normalizedBatchId, long syncedRows, long inserts, long updates, long deletes,
                     Instant lastAttemptAt, Instant lastSyncedAt, Instant lastNormalizedAt,
                     Instant firstRowReceivedAt, Instant firstRowCommitTime, String pausedReason, Instant pausedAt,
                     String lastError, Instant lastErrorAt, int errorCount, Instant nextRetryAt,
                     Long copyRowsDone, Long copyRowsTotal, long clampedValues, String detachSlot,
                     String detachLsn, Instant detachedAt) {

        static TableLine of(TableState t) {
            RowCounts n = t.normalizedCounts();
            return new TableLine(t.table(), t.phase() == null ? null : t.phase().sqlName(), t.phaseLsn(), t.cursor(),
                    t.syncedBatchId(), t.normalizedBatchId(), t.syncedRows(), n.inserts(), n.updates(), n.deletes(),
                    t.lastAttemptAt(), t.lastSyncedAt(), t.lastNormalizedAt(), t.firstRowReceivedAt(),
                    t.firstRowCommitTime(), t.pausedReason(), t.pausedAt(), t.lastError(), t.lastErrorAt(),
                    t.errorCount(), t.nextRetryAt(), t.copyRowsDone(), t.copyRowsTotal(), n.clampedValues(),
                    t.detachSlot(), t.detachLsn(), t.detachedAt());
        }

        /**
         * {@code copying 1200/20000 (6%)} while a copy runs, {@code rejoining(lsn)} while a detached table is caught up
         * from its private slot; the phase and its LSN otherwise.
         */
        String phaseText() {
            if (phase == null) {
                return "-";
            }
            if ("copying".equals(phase) && detachLsn != null) {
                return "rejoining(" + detachLsn + ")";
            }
            if ("copying".equals(phase) && copyRowsDone != null) {
                long total = Math.max(copyRowsTotal == null ? 0 : copyRowsTotal, copyRowsDone);
                return phase + " " + copyRowsDone + "/" + total + " (" + (total == 0 ? 100 : copyRowsDone * 100 / total) + "%)";
            }
            return phase + (phaseLsn == null ? "" : "(" + phaseLsn + ")");
        }

        Duration lag(Instant now) {
            return firstRowReceivedAt == null ? null : Duration.between(firstRowReceivedAt, now);
        }

        Duration endToEndLag(Instant now) {
            return firstRowCommitTime == null ? null : Duration.between(firstRowCommitTime, now);
        }

        long normalizedRows() {
            return inserts + updates + deletes;
        }
    }

    /** A batch set aside with tablecdc-quarantine-batch. */
    record Quarantined(long batchId, long rows, Instant at, String error) {
    }

    /** What the command prints, read in one transaction-free pass. */
    record Report(Instant now, Map<String, String> flowKinds, Map<String, List<TableLine>> flows,
                  Map<List<String>, List<Quarantined>> quarantined) {

        static Report read(Connection c, List<String> onlyFlows) throws SQLException {
            Instant now;
            try (PreparedStatement ps = c.prepareStatement("SELECT now()"); ResultSet rs = ps.executeQuery()) {
                rs.next();
                now = rs.getTimestamp(1).toInstant();
            }
            Map<String, String> kinds = Flows.flowKinds(c, onlyFlows);
            Map<String, List<TableLine>> flows = new LinkedHashMap<>();
            for (String f : kinds.keySet()) {
                flows.put(f, new ArrayList<>());
            }
            for (String f : onlyFlows) {
                flows.putIfAbsent(f, new ArrayList<>());
            }
            for (TableState t : TableProgress.listTables(c, onlyFlows)) {
                flows.computeIfAbsent(t.flow(), k -> new ArrayList<>()).add(TableLine.of(t));
            }
            Map<List<String>, List<Quarantined>> quarantined = new LinkedHashMap<>();
            for (Stages.Quarantined q : Stages.listQuarantined(c, onlyFlows)) {
                quarantined.computeIfAbsent(List.of(q.flow(), q.table()), k -> new ArrayList<>())
                        .add(new Quarantined(q.batchId(), q.rows(), q.at(), q.error()));
            }
            return new Report(now, kinds, flows, quarantined);
        }

        String text() {
            StringBuilder sb = new StringBuilder();
            if (flows.isEmpty()) {
                sb.append("no flows in the catalog\n");
            }
            String[] header = {"TABLE", "PHASE", "CURSOR", "SYNCED", "NORMALIZED", "ROWS", "CLAMPED", "LAG", "PAUSED",
                    "LAST ERROR"};
            for (Map.Entry<String, List<TableLine>> flow : flows.entrySet()) {
                String kind = flowKinds.get(flow.getKey());
                sb.append("flow ").append(flow.getKey());
                if (kind != null) {
                    sb.append(" (").append(kind).append(')');
                }
                sb.append(": ").append(flow.getValue().size()).append(flow.getValue().size() == 1 ? " table" : " tables")
                        .append('\n');
                if (flow.getValue().isEmpty()) {
                    sb.append('\n');
                    continue;
                }
                List<String[]> rows = new ArrayList<>();
                rows.add(header);
                for (TableLine t : flow.getValue()) {
                    rows.add(new String[] {
                        t.table(),
                        t.phaseText(),
                        t.cursor().isEmpty() ? "-" : t.cursor(),
                        Long.toString(t.syncedBatchId()),
                        Long.toString(t.normalizedBatchId()),
                        Long.toString(t.normalizedRows()),
                        Long.toString(t.clampedValues()),
                        t.lag(now) == null ? "-" : human(t.lag(now)),
                        t.pausedReason() == null ? "-"
                                : t.pausedReason() + (t.pausedAt() == null ? "" : " (" + human(Duration.between(
                                        t.pausedAt(), now)) + " ago)"),
                        errorText(t),
                    });
                }
                int[] widths = new int[header.length];
                for (String[] row : rows) {
                    for (int i = 0; i < row.length; i++) {
                        widths[i] = Math.max(widths[i], row[i].length());
                    }
                }
                for (String[] row : rows) {
                    StringBuilder line = new StringBuilder("  ");
                    for (int i = 0; i < row.length; i++) {
                        line.append(row[i]);
                        if (i < row.length - 1) {
                            line.append(" ".repeat(widths[i] - row[i].length() + 2));
                        }
                    }
                    sb.append(line.toString().stripTrailing()).append('\n');
                }
                for (TableLine t : flow.getValue()) {
                    for (Quarantined q : quarantined.getOrDefault(List.of(flow.getKey(), t.table()), List.of())) {
                        sb.append("  ").append(t.table()).append(": batch ").append(q.batchId()).append(" (")
                                .append(q.rows()).append(" rows) quarantined ")
                                .append(q.at() == null ? "" : human(Duration.between(q.at(), now)) + " ago")
                                .append(q.error() == null ? "" : ": " + shorten(q.error())).append('\n');
                    }
                }
                sb.append('\n');
            }
            return sb.toString();
        }

        private static String shorten(String text) {
            String error = text.replaceAll("\\s+", " ").strip();
            return error.length() > 80 ? error.substring(0, 77) + "..." : error;
        }

        private String errorText(TableLine t) {
            if (t.lastError() == null) {
                return "-";
            }
            String error = shorten(t.lastError());
            StringBuilder sb = new StringBuilder();
            if (t.lastErrorAt() != null) {
                sb.append(human(Duration.between(t.lastErrorAt(), now))).append(" ago");
            }
            if (t.errorCount() > 1) {
                sb.append(sb.length() > 0 ? ", " : "").append(t.errorCount()).append(" errors");
            }
            if (t.nextRetryAt() != null) {
                Duration untilRetry = Duration.between(now, t.nextRetryAt());
                sb.append(sb.length() > 0 ? ", " : "").append("retry ")
                        .append(untilRetry.isNegative() ? "due" : "in " + human(untilRetry));
            }
            return sb.length() == 0 ? error : "[" + sb + "] " + error;
        }

        String json() {
            StringBuilder sb = new StringBuilder();
            sb.append("{\"generated_at\":").append(jsonValue(now)).append(",\"flows\":[");
            boolean firstFlow = true;
            for (Map.Entry<String, List<TableLine>> flow : flows.entrySet()) {
                sb.append(firstFlow ? "" : ",");
                firstFlow = false;
                sb.append("{\"flow\":").append(jsonValue(flow.getKey()))
                        .append(",\"source_kind\":").append(jsonValue(flowKinds.get(flow.getKey())))
                        .append(",\"tables\":[");
                boolean firstTable = true;
                for (TableLine t : flow.getValue()) {
                    sb.append(firstTable ? "" : ",");
                    firstTable = false;
                    Map<String, Object> o = new LinkedHashMap<>();
                    o.put("table", t.table());
                    o.put("phase", t.phase());
                    o.put("phase_lsn", t.phaseLsn());
                    o.put("copy_rows_done", t.copyRowsDone());
                    o.put("copy_rows_total", t.copyRowsTotal());
                    o.put("detach_slot", t.detachSlot());
                    o.put("detach_lsn", t.detachLsn());
                    o.put("detached_at", t.detachedAt());
                    o.put("cursor", t.cursor());
                    o.put("synced_batch_id", t.syncedBatchId());
                    o.put("normalized_batch_id", t.normalizedBatchId());
                    o.put("unnormalized_batches", Math.max(0, t.syncedBatchId() - t.normalizedBatchId()));
                    o.put("synced_rows", t.syncedRows());
                    o.put("inserts", t.inserts());
                    o.put("updates", t.updates());
                    o.put("deletes", t.deletes());
                    o.put("clamped_values", t.clampedValues());
                    o.put("last_attempt_at", t.lastAttemptAt());
                    o.put("last_synced_at", t.lastSyncedAt());
                    o.put("last_normalized_at", t.lastNormalizedAt());
                    o.put("first_row_received_at", t.firstRowReceivedAt());
                    o.put("first_row_commit_time", t.firstRowCommitTime());
                    Duration lag = t.lag(now);
                    Duration e2e = t.endToEndLag(now);
                    o.put("lag_ms", lag == null ? null : lag.toMillis());
                    o.put("end_to_end_lag_ms", e2e == null ? null : e2e.toMillis());
                    o.put("paused_reason", t.pausedReason());
                    o.put("paused_at", t.pausedAt());
                    o.put("last_error", t.lastError());
                    o.put("last_error_at", t.lastErrorAt());
                    o.put("error_count", t.errorCount());
                    o.put("next_retry_at", t.nextRetryAt());
                    o.put("quarantined_batches", quarantined.getOrDefault(List.of(flow.getKey(), t.table()), List.of())
                            .stream().map(q -> q.batchId()).toList());
                    sb.append('{');
                    boolean firstField = true;
                    for (Map.Entry<String, Object> field : o.entrySet()) {
                        sb.append(firstField ? "" : ",");
                        firstField = false;
                        sb.append(jsonValue(field.getKey())).append(':').append(jsonValue(field.getValue()));
                    }
                    sb.append('}');
                }
                sb.append("]}");
            }
            return sb.append("]}").toString();
        }
    }

    static String human(Duration d) {
        long s = Math.max(0, d.getSeconds());
        if (s < 60) {
            return s + "s";
        }
        if (s < 3600) {
            return (s / 60) + "m" + pad(s % 60) + "s";
        }
        if (s < 86_400) {
            return (s / 3600) + "h" + pad(s % 3600 / 60) + "m";
        }
        return (s / 86_400) + "d" + pad(s % 86_400 / 3600) + "h";
    }

    private static String pad(long v) {
        return v < 10 ? "0" + v : Long.toString(v);
    }

    static String jsonValue(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Number || v instanceof Boolean) {
            return v.toString();
        }
        if (v instanceof List<?> list) {
            StringBuilder sb = new StringBuilder("[");
            for (Object e : list) {
                sb.append(sb.length() > 1 ? "," : "").append(jsonValue(e));
            }
            return sb.append(']').toString();
        }
        String s = v.toString();
        StringBuilder sb = new StringBuilder(s.length() + 2);
        JsonText.appendString(sb, s);
        return sb.toString();
    }

}
