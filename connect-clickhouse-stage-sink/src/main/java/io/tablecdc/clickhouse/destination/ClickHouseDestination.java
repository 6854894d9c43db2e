package io.tablecdc.clickhouse.destination;

import java.io.InputStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.ConnectionInitiationException;
import com.clickhouse.client.api.ServerException;
import com.clickhouse.client.api.data_formats.ClickHouseBinaryFormatReader;
import com.clickhouse.client.api.command.CommandSettings;
import com.clickhouse.client.api.insert.InsertResponse;
import com.clickhouse.client.api.insert.InsertSettings;
import com.clickhouse.client.api.query.QueryResponse;
import com.clickhouse.client.api.query.QuerySettings;
import com.clickhouse.client.api.query.GenericRecord;
import com.clickhouse.data.ClickHouseFormat;

import io.tablecdc.clickhouse.schema.ClickHouseTypes;
import io.tablecdc.clickhouse.schema.StageColumn;
import io.tablecdc.clickhouse.schema.StageSchema;
import io.tablecdc.clickhouse.stage.StageStore;

/**
 * The final tables in one ClickHouse database, reached over HTTP with client-v2: creates and evolves them
 * and loads stage files into them. Every method may be called again with the same arguments after a crash.
 * On a {@link Cluster} the DDL runs {@code ON CLUSTER} and every load carries the cluster's insert quorum
 * settings, so a load either reached its quorum or fails.
 */
public final class ClickHouseDestination implements AutoCloseable {
    private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(ClickHouseDestination.class);
    private final Client client;
    private final String database;
    private final boolean autoCreate;
    private final boolean addColumns;
    private final int deduplicationWindow;
    private final long timeoutMs;
    private final Cluster cluster;
    private final FinalTableDdl ddl;
    /** Columns of tables this destination created or checked, so that most loads skip the system.columns query. */
    private final Map<String, Map<String, String>> known = new java.util.concurrent.ConcurrentHashMap<>();

    public ClickHouseDestination(Client client, String database, boolean autoCreate, boolean addColumns,
                                 int deduplicationWindow, long timeoutMs, Cluster cluster) {
        this.client = client;
        this.database = database;
        this.autoCreate = autoCreate;
        this.addColumns = addColumns;
        this.deduplicationWindow = deduplicationWindow;
        this.timeoutMs = timeoutMs;
        this.cluster = cluster;
        this.ddl = new FinalTableDdl(database, cluster);
    }

    /** A final table's schema problem that retrying cannot fix: it stops only that table. */
    public static final class IncompatibleSchemaException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        IncompatibleSchemaException(String message) {
            super(message);
        }
    }

    /** The UUID ClickHouse reports for a database without one (engines {@code Ordinary}, {@code Memory}). */
    static final String NO_UUID = "00000000-0000-0000-0000-000000000000";

    /**
     * The identity of this destination's database: its UUID as {@code system.databases} reports it, the same under
     * every address of the server (and on every server of a cluster for a database created {@code ON CLUSTER}), and
     * another for a database dropped and created again under the same name. Empty when the database has none (engine
     * {@code Ordinary} or {@code Memory}) or does not exist. Read-only.
     */
    public java.util.Optional<String> databaseUuid() {
        Map<String, Object> params = new HashMap<>();
        params.put("db", database);
        List<GenericRecord> rows = client.queryAll("SELECT toString(uuid) AS uuid FROM system.databases WHERE name = {db:String}",
                params);
        return rows.stream().map(r -> r.getString("uuid")).filter(u -> u != null && !u.isEmpty() && !NO_UUID.equals(u))
                .findFirst();
    }

    /** The database this destination loads into. */
    public String database() {
        return database;
    }

    /** Column name → ClickHouse type of an existing table, in order; empty when the table does not exist. */
    public Map<String, String> columns(String table) throws Exception {
        Map<String, Object> params = new HashMap<>();
        params.put("db", database);
        params.put("tbl", table);
        Map<String, String> columns = new LinkedHashMap<>();
        for (GenericRecord row : client.queryAll(
                "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {tbl:String} ORDER BY position", params)) {
            columns.put(row.getString("name"), row.getString("type"));
        }
        return columns;
    }

    /**
     * Makes {@code table} able to take rows of {@code schema}: creates it (and its {@code _current} view)
     * when missing and auto-create is on, adds new nullable columns when schema evolution is on, and fails
     * with {@link IncompatibleSchemaException} naming the column for anything else.
     */
    public void ensureTable(String sourceTable, String table, List<StageColumn> stageColumns) throws Exception {
        Map<String, String> cached = known.get(table);
        if (cached != null && stageColumns.stream().allMatch(c -> cached.containsKey(c.column())
                && compatible(cached.get(c.column()), c.type()))) {
            return;
        }
        known.remove(table);
        Map<String, String> existing = columns(table);
        if (existing.isEmpty()) {
            if (!autoCreate) {
                throw new IncompatibleSchemaException("table " + sourceTable + ": ClickHouse table " + database + "." + table
                        + " does not exist and table.auto.create=false");
            }
            for (String statement : ddl.createTable(table, stageColumns, deduplicationWindow)) {
                execute(statement, Map.of());
            }
            execute(ddl.createCurrentView(table, keyless(stageColumns)), Map.of());
            Map<String, String> created = new LinkedHashMap<>();
            stageColumns.forEach(c -> created.put(c.column(), c.type()));
            known.put(table, created);
            return;
        }
        List<StageColumn> missing = new ArrayList<>();
        for (StageColumn column : stageColumns) {
            String present = existing.get(column.column());
            if (present == null) {
                missing.add(column);
            } else if (!compatible(present, column.type())) {
                throw new IncompatibleSchemaException("table " + sourceTable + ", column " + column.column() + ": ClickHouse has "
                        + present + " in " + database + "." + table + " but the records need " + column.type());
            }
        }
        for (StageColumn column : missing) {
            boolean nullable = column.type().startsWith("Nullable(") || column.type().startsWith("Array(");
            if (!addColumns || !nullable) {
                throw new IncompatibleSchemaException("table " + sourceTable + ", column " + column.column() + ": not in "
                        + database + "." + table + (addColumns ? " and a new column must be optional (it is " + column.type() + ")"
                        : " and schema.evolution=none"));
            }
            for (String statement : ddl.addColumn(table, column)) {
                execute(statement, Map.of());
            }
        }
        if (autoCreate) {
            // the view again whenever the table is met here without matching what this process knew of it: first sight
            // in this process, columns added above, or a column's type changed by an operator (as the error above
            // advises): a view keeps the column types its SELECT * had when it was created, and would read a widened
            // column through its old type; also a crash between CREATE TABLE and CREATE VIEW left no view, and the view
            // of a table without a key must not use FINAL (earlier releases created it so)
            execute(ddl.replaceCurrentView(table, keyless(stageColumns)), Map.of());
            if (missing.isEmpty() && cached == null) {
                checkDeduplicationWindow(sourceTable, table);
            }
        }
        known.put(table, missing.isEmpty() ? existing : columns(table));
    }

    private static boolean keyless(List<StageColumn> columns) {
        return columns.stream().noneMatch(StageColumn::key);
    }

    /**
     * A table the sink did not create may lack a deduplication window, and then a batch loaded again after a crash
     * adds its rows again (a table without a key keeps both copies): warned about once per table and process.
     */
    private void checkDeduplicationWindow(String sourceTable, String table) {
        if (cluster.enabled()) {
            return;
        }
        try {
            Map<String, Object> params = new HashMap<>();
            params.put("db", database);
            params.put("tbl", cluster.storageTable(table));
            List<GenericRecord> rows = client.queryAll("SELECT engine, engine_full FROM system.tables"
                    + " WHERE database = {db:String} AND name = {tbl:String}", params);
            if (!rows.isEmpty() && rows.get(0).getString("engine").endsWith("MergeTree")
                    && !rows.get(0).getString("engine").startsWith("Replicated")
                    && !rows.get(0).getString("engine_full").contains("non_replicated_deduplication_window")) {
                log.warn("table {}: ClickHouse table {}.{} has no non_replicated_deduplication_window setting, so a batch"
                        + " loaded again after a crash is not recognised as a repeat (a table without a key keeps both copies);"
                        + " set it with ALTER TABLE … MODIFY SETTING non_replicated_deduplication_window = {}",
                        sourceTable, database, table, deduplicationWindow);
            }
        } catch (RuntimeException e) {
            log.debug("checking the deduplication window of {} failed: {}", table, e.toString());
        }
    }

    /** Forgets what this destination knows of {@code table}'s columns (after a failed load: it may have changed). */
    public void forget(String table) {
        known.remove(table);
    }

    /** Empties {@code table} if it exists (its columns and its view stay). May be called again after a crash. */
    public void truncate(String table) throws Exception {
        execute(ddl.truncate(table), Map.of());
    }

    static boolean compatible(String present, String needed) {
        return present.equals(needed) || present.equals("Nullable(" + needed + ")")
                // a table created before versions became UInt128 keeps loading the versions its column takes
                || needed.equals(ClickHouseTypes.VERSION_TYPE) && present.equals(ClickHouseTypes.LEGACY_VERSION_TYPE);
    }

    /** Whether the table's version column is the UInt64 of tables created by earlier releases. */
    private boolean legacyVersion(String table) {
        Map<String, String> columns = known.get(table);
        return columns != null && ClickHouseTypes.LEGACY_VERSION_TYPE.equals(columns.get(StageSchema.VERSION_COLUMN));
    }

    /**
     * Pull mode: ClickHouse reads the stage file itself. {@code deduplicationToken} makes a second load of
     * the same file a no-op within the table's deduplication window.
     *
     * @return the rows ClickHouse reports written ({@code written_rows} of the answer's summary); see {@link #rowsIn}
     */
    public long loadPull(String table, List<StageColumn> columns, StageStore.PullSource source, String deduplicationToken)
            throws Exception {
        CommandSettings settings = new CommandSettings();
        settings.serverSetting("insert_deduplicate", "1");
        settings.serverSetting("insert_deduplication_token", deduplicationToken);
        cluster.insertSettings().forEach(settings::serverSetting);
        Map<String, Object> params = new HashMap<>(source.parameters());
        boolean legacy = legacyVersion(table);
        if (legacy) {
            params.put("version_error", LegacyVersions.error(database, table));
        }
        String queryId = newQueryId();
        settings.setQueryId(queryId);
        return await(() -> client.query(ddl.insertSelect(table, columns, source.tableFunction(), legacy), params, settings),
                "the load into " + table, queryId);
    }

    /**
     * Pull mode, for a stage file whose rows may keep unchanged values ({@link FinalTableDdl#insertSelectFilling}):
     * the values are taken from the final table in the same statement, so it never shows such a row without them.
     *
     * @return the rows ClickHouse reports written
     */
    public long loadPullFilling(String sourceTable, String table, List<StageColumn> columns, List<StageColumn> lookupColumns,
                                StageStore.PullSource source, String deduplicationToken) throws Exception {
        CommandSettings settings = new CommandSettings();
        settings.serverSetting("insert_deduplicate", "1");
        settings.serverSetting("insert_deduplication_token", deduplicationToken);
        cluster.insertSettings().forEach(settings::serverSetting);
        Map<String, Object> params = new HashMap<>(source.parameters());
        String queryId = newQueryId();
        settings.setQueryId(queryId);
        return await(() -> client.query(ddl.insertSelectFilling(sourceTable, table, columns, lookupColumns, source.tableFunction()),
                params, settings), "the load into " + table, queryId);
    }

    /** Push mode: streams the stage file as {@code INSERT … FORMAT Avro}; returns the rows ClickHouse reports written. */
    public long loadPush(String table, List<StageColumn> columns, InputStream avroFile, String deduplicationToken) throws Exception {
        List<String> names = new ArrayList<>();
        for (StageColumn column : columns) {
            if (!column.avroName().equals(column.column())) {
                throw new IncompatibleSchemaException("column " + column.column() + " is not a valid Avro field name;"
                        + " normalize.mode=push needs Avro names equal to column names, use normalize.mode=pull");
            }
            names.add(column.column());
        }
        InsertSettings settings = new InsertSettings();
        settings.setDatabase(database);
        settings.serverSetting("insert_deduplicate", "1");
        settings.serverSetting("insert_deduplication_token", deduplicationToken);
        cluster.insertSettings().forEach(settings::serverSetting);
        String queryId = newQueryId();
        settings.setQueryId(queryId);
        if (legacyVersion(table)) {
            // a UInt64 version column takes Avro long: the file is rewritten with its versions as longs
            try (InputStream converted = LegacyVersions.asLongs(avroFile, database, table)) {
                return await(() -> client.insert(table, names, converted, ClickHouseFormat.Avro, settings), "the load into " + table,
                        queryId);
            }
        }
        return await(() -> client.insert(table, names, avroFile, ClickHouseFormat.Avro, settings), "the load into " + table, queryId);
    }

    /**
     * The rows the stage files of {@code source} hold, as ClickHouse reads them now ({@code SELECT count()}): what a
     * load that reported fewer rows written than staged is checked against. The summary's {@code written_rows} counts
     * the rows the INSERT passed on to the table (measured on the test engine, ClickHouse 26.5: a repeat deduplicated by
     * its token reports them all, a glob that matched one file of two reports that file's rows); a server or proxy that
     * reports fewer, or none, is told apart from missing files by this count.
     */
    public long rowsIn(StageStore.PullSource source) throws Exception {
        List<GenericRecord> rows = client.queryAll("SELECT count() AS n FROM " + source.tableFunction(),
                new HashMap<>(source.parameters()));
        return rows.isEmpty() ? 0 : rows.get(0).getLong("n");
    }

    /** A statement that writes (DDL, a truncate), under a query id of its own. */
    private void execute(String sql, Map<String, Object> params) throws Exception {
        CommandSettings settings = new CommandSettings();
        String queryId = newQueryId();
        settings.setQueryId(queryId);
        await(() -> client.query(sql, params, settings), sql, queryId);
    }

    /** A query id of a statement of this sink: {@code tablecdc-} and a random UUID. */
    static String newQueryId() {
        return "tablecdc-" + UUID.randomUUID();
    }

    /** How long a cancel ({@link #cancel}) waits for ClickHouse's answer at most. */
    static final long CANCEL_WAIT_MS = 30_000;

    /**
     * A statement that writes was given up on (no answer in time, or the answer lost with its connection) and may still
     * run on the server; cancelling it with {@code KILL QUERY} was not confirmed. Until {@link #cancel} confirms it, the
     * caller must not let anything else write the table (it keeps the table's normalize lease).
     */
    public static final class StatementMayRun extends Exception {
        private static final long serialVersionUID = 1L;
        private final String what;
        private final String queryId;
        private final String why;

        StatementMayRun(String what, String queryId, String why, Throwable cause) {
            super("ClickHouse may still run " + what + " (query id " + queryId + "): " + why + "; cancelling it with KILL QUERY"
                    + " was not confirmed (" + io.tablecdc.common.ErrorEpisode.describe(cause) + "); the table's normalize lease"
                    + " is kept, and the next attempt cancels it first and writes only once ClickHouse confirms it", cause);
            this.what = what;
            this.queryId = queryId;
            this.why = why;
        }

        /** The query id of the statement that may still run. */
        public String queryId() {
            return queryId;
        }
    }

    /**
     * Cancels the statement of {@code queryId} on the server ({@code KILL QUERY WHERE query_id = … SYNC}, the id bound
     * as a parameter: a user may cancel its own statements) and waits up to {@value #CANCEL_WAIT_MS} ms (at most
     * {@code clickhouse.timeout.ms}) for the answer.
     *
     * @return null when ClickHouse answered that the statement stopped or that no such statement runs; otherwise why the
     *         cancel is not confirmed
     */
    public Throwable cancel(String queryId) {
        Map<String, Object> params = new HashMap<>();
        params.put("id", queryId);
        long waitMs = Math.min(CANCEL_WAIT_MS, timeoutMs);
        java.util.concurrent.CompletableFuture<QueryResponse> response = null;
        // the client may run the call in this thread and throw its failure here rather than through the future
        try (QueryResponse answer = (response = client.query("KILL QUERY WHERE query_id = {id:String} SYNC", params,
                new QuerySettings())).get(waitMs, TimeUnit.MILLISECONDS);
             ClickHouseBinaryFormatReader reader = client.newBinaryFormatReader(answer)) {
            while (reader.hasNext()) {
                reader.next();
                String status = reader.getString("kill_status");
                if (!"finished".equals(status)) {
                    return new IllegalStateException("KILL QUERY answered kill_status " + status);
                }
            }
            log.info("ClickHouse confirmed that statement {} is not running (KILL QUERY)", queryId);
            return null;
        } catch (TimeoutException e) {
            if (response != null) {
                response.cancel(true);
            }
            return new TimeoutException("no answer within " + waitMs + " ms");
        } catch (ExecutionException e) {
            return e.getCause() != null ? e.getCause() : e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return e;
        } catch (Exception e) {
            return e;
        }
    }

    /**
     * Cancels the statement {@code pending} names again ({@link #cancel}).
     *
     * @throws StatementMayRun when the cancel is still not confirmed
     */
    public void cancelAgain(StatementMayRun pending) throws StatementMayRun {
        Throwable notConfirmed = cancel(pending.queryId);
        if (notConfirmed != null) {
            throw new StatementMayRun(pending.what, pending.queryId, pending.why, notConfirmed);
        }
    }

    /**
     * Whether a statement whose call failed with {@code failure} may still run on the server: not when ClickHouse
     * answered (an error of the server ends its statement), nor when no connection was made (the request was not sent).
     */
    static boolean mayStillRun(Throwable failure) {
        for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof ServerException || t instanceof ConnectionInitiationException
                    || t instanceof java.net.ConnectException || t instanceof java.net.UnknownHostException
                    // the HTTP client's connect timeout (org.apache.hc.client5.http.ConnectTimeoutException)
                    || t.getClass().getSimpleName().equals("ConnectTimeoutException")) {
                return false;
            }
        }
        return true;
    }

    /**
     * Waits for a call's answer. Statements go through {@code Client.query}, not {@code Client.execute}: the latter
     * completes its answer with {@code thenApplyAsync} on the JVM's common fork-join pool (one thread on a worker of two
     * cores), so a load waited for whatever else in the worker ran there (found by {@code SinkOutageIT}: a task on
     * that pool held every load of the sink for 20 s). A statement given up on (no answer within
     * {@code clickhouse.timeout.ms}, or the answer lost) is cancelled on the server by its query id before the failure
     * is thrown; {@link StatementMayRun} when that cancel is not confirmed.
     */
    private long await(java.util.function.Supplier<java.util.concurrent.CompletableFuture<? extends AutoCloseable>> call,
                       String what, String queryId) throws Exception {
        Exception failure;
        java.util.concurrent.CompletableFuture<? extends AutoCloseable> response = null;
        try {
            // the client may run the call in this thread and throw its failure here rather than through the future
            response = call.get();
            try (AutoCloseable answer = response.get(timeoutMs, TimeUnit.MILLISECONDS)) {
                // the summary header: rows the statement wrote
                return answer instanceof QueryResponse q ? q.getWrittenRows()
                        : answer instanceof InsertResponse i ? i.getWrittenRows() : 0;
            }
        } catch (ExecutionException e) {
            failure = e.getCause() instanceof Exception cause ? cause : e;
        } catch (TimeoutException e) {
            response.cancel(true);
            failure = new TimeoutException("ClickHouse did not answer within " + timeoutMs + " ms: " + what);
        } catch (RuntimeException e) {
            failure = e;
        }
        if (!mayStillRun(failure)) {
            throw failure;
        }
        log.warn("gave up waiting for {} (query id {}): {}; cancelling it on the server", what, queryId, failure.toString());
        Throwable notConfirmed = cancel(queryId);
        if (notConfirmed != null) {
            throw new StatementMayRun(what, queryId, io.tablecdc.common.ErrorEpisode.describe(failure), notConfirmed);
        }
        throw failure;
    }

    @Override
    public void close() {
        client.close();
    }
}
