package io.tablecdc.e2e.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.LocalSchemaRegistry;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The benchmarks' shared pieces: the local stack, one Connect worker process (so that its CPU and heap can be
 * measured and profiled apart from Kafka and the ClickHouse engine, which run in the benchmark's JVM), and helpers
 * to count records in topics and clean up slots.
 */
public final class Bench implements AutoCloseable {
    public static final String DEBEZIUM_PLUGIN_DIR = "bench/target/bench-plugins";
    public static final String DEBEZIUM_CLASS = "io.debezium.connector.postgresql.PostgresConnector";

    final BenchOptions options;
    final LocalStack stack;
    final ConnectWorker worker;
    final long workerPid;
    final Admin admin;
    final Client clickhouse;
    final Path workDir;
    final boolean debezium;
    /** The schema registry, when a suite that runs uses it (its converter is then on the worker's plugin path). */
    final LocalSchemaRegistry registry;

    private Bench(BenchOptions options, LocalStack stack, ConnectWorker worker, Admin admin, Client clickhouse, Path workDir,
                  boolean debezium, LocalSchemaRegistry registry) {
        this.options = options;
        this.stack = stack;
        this.worker = worker;
        this.workerPid = worker.pid().orElseThrow();
        this.admin = admin;
        this.clickhouse = clickhouse;
        this.workDir = workDir;
        this.debezium = debezium;
        this.registry = registry;
    }

    public static Bench start(BenchOptions options) throws Exception {
        LocalStack stack = LocalStack.get();
        Path root = StackPaths.projectRoot();
        Path workDir = root.resolve("bench/target/bench");
        Files.createDirectories(workDir);
        Path debeziumDir = root.resolve(DEBEZIUM_PLUGIN_DIR);
        boolean debezium = Files.isDirectory(debeziumDir.resolve("debezium-connector-postgres"));
        LocalSchemaRegistry registry = options.needsRegistry() ? stack.schemaRegistry() : null;
        String pluginPath = stack.pluginPath().toAbsolutePath() + (debezium ? "," + debeziumDir.toAbsolutePath() : "")
                + (registry != null ? "," + registry.converterPluginPath().toAbsolutePath() : "");
        Map<String, String> props = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(), "bench-connect", stack.pluginPath());
        props.put("plugin.path", pluginPath);
        Path workerDir = StackPaths.workDir("bench-worker");
        List<String> jvm = List.of("-Xmx" + options.workerHeap, "-XX:+UseG1GC",
                "-Dlogback.configurationFile=" + root.resolve("bench/src/main/resources/logback-bench-worker.xml"),
                "-Dtablecdc.log.file=" + root.resolve("bench/target/bench-worker.log"));
        ConnectWorker worker = stack.track(ConnectWorker.startProcess(props, workerDir, Duration.ofMinutes(3), jvm));
        Admin admin = Admin.create(Map.<String, Object>of("bootstrap.servers", stack.kafka().bootstrapServers()));
        Client clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername("default").setPassword("")
                .compressServerResponse(false).build();
        stack.objectStore();
        return new Bench(options, stack, worker, admin, clickhouse, workDir, debezium, registry);
    }

    public Path root() {
        return StackPaths.projectRoot();
    }

    private long suiteDeadline = Long.MAX_VALUE;

    /** Sets the time the current suite may use, from now (the runner shares the --budget-minutes among suites). */
    void suiteBudget(long nanos) {
        suiteDeadline = nanos <= 0 ? Long.MAX_VALUE : System.nanoTime() + nanos;
    }

    /**
     * Whether repetition {@code rep} may start: the first always does; a later one only while the suite's share of
     * the time budget lasts, else the report says how many ran.
     */
    boolean startRepetition(SuiteReport report, int rep) {
        if (rep == 0 || System.nanoTime() < suiteDeadline) {
            return true;
        }
        report.note(String.format(java.util.Locale.ROOT, "Time budget: %d of %d repetitions ran (`--budget-minutes` %d, shared"
                + " among the suites).", rep, options.reps, options.budgetMinutes));
        BenchRunner.log("%s: time budget reached after %d repetitions", report.id(), rep);
        return false;
    }

    public ConnectRestClient rest() {
        return worker.rest();
    }

    /** Records in a topic (the sum of its partitions' end offsets; no compaction or transactions here); 0 if missing. */
    public long count(String topic) throws Exception {
        return count(List.of(topic)).getOrDefault(topic, 0L);
    }

    public Map<String, Long> count(Collection<String> topics) throws Exception {
        Map<String, Long> out = new HashMap<>();
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        for (String topic : topics) {
            out.put(topic, 0L);
            try {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
                d.partitions().forEach(p -> request.put(new TopicPartition(topic, p.partition()), OffsetSpec.latest()));
            } catch (java.util.concurrent.ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                    throw e;
                }
            }
        }
        if (!request.isEmpty()) {
            ListOffsetsResult result = admin.listOffsets(request);
            for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e : result.all().get(30, TimeUnit.SECONDS).entrySet()) {
                out.merge(e.getKey().topic(), e.getValue().offset(), Long::sum);
            }
        }
        return out;
    }

    /** Waits until every topic holds at least {@code records}; fails naming the connector and the short topics. */
    public void awaitRecords(String connector, Collection<String> topics, long records, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            Map<String, Long> counts = count(topics);
            List<String> shortTopics = new ArrayList<>();
            counts.forEach((t, n) -> {
                if (n < records) {
                    shortTopics.add(t + "=" + n);
                }
            });
            if (shortTopics.isEmpty()) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(connector + ": topics still short of " + records + " records after " + timeout
                        + ": " + shortTopics.subList(0, Math.min(5, shortTopics.size())) + "; connector status "
                        + rest().status(connector));
            }
            failIfTaskFailed(connector);
            Thread.sleep(topics.size() > 10 ? 500 : 100);
        }
    }

    /** Waits until the connector and its {@code tasks} tasks run; fails at once when one of them failed. */
    public void awaitRunning(String connector, int tasks, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            List<String> states;
            try {
                states = rest().states(connector);
            } catch (ConnectRestClient.ConnectRestException notYet) {
                states = List.of();
            }
            if (states.contains("FAILED")) {
                throw new IllegalStateException(connector + " failed: " + firstLine(rest().status(connector).toString()));
            }
            if (states.size() == tasks + 1 && states.stream().allMatch("RUNNING"::equals)) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(connector + " not running after " + timeout + ": " + states);
            }
            Thread.sleep(100);
        }
    }

    /** The start of a status or trace, short enough for a table cell. */
    public static String firstLine(String text) {
        int cut = text.indexOf("\\n");
        String head = cut > 0 ? text.substring(0, cut) : text;
        return head.length() > 400 ? head.substring(0, 400) + "…" : head;
    }

    /** Fails with the task's trace when a task of the connector has failed. */
    public void failIfTaskFailed(String connector) {
        List<String> states;
        try {
            states = rest().states(connector);
        } catch (ConnectRestClient.ConnectRestException e) {
            if (e.status() == 404) {
                // just deployed: no status yet
                return;
            }
            throw e;
        }
        if (states.contains("FAILED")) {
            throw new IllegalStateException(connector + " failed: " + rest().status(connector));
        }
    }

    /** Deletes a connector and waits until the worker no longer lists it. */
    public void delete(String connector) throws InterruptedException {
        try {
            rest().delete(connector);
        } catch (ConnectRestClient.ConnectRestException e) {
            if (e.status() != 404) {
                throw e;
            }
        }
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (rest().connectors().contains(connector) && System.nanoTime() < deadline) {
            Thread.sleep(100);
        }
    }

    /** Drops the database's replication slots named {@code prefix%} once their connector let go of them. */
    public void dropSlots(String database, String prefix) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (true) {
            try (Connection c = stack.postgres().connect(database);
                 PreparedStatement ps = c.prepareStatement("SELECT slot_name, active FROM pg_replication_slots WHERE slot_name LIKE ?")) {
                ps.setString(1, prefix.replace("_", "\\_") + "%");
                boolean busy = false;
                List<String> idle = new ArrayList<>();
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        if (rs.getBoolean(2)) {
                            busy = true;
                        } else {
                            idle.add(rs.getString(1));
                        }
                    }
                }
                for (String slot : idle) {
                    try (PreparedStatement drop = c.prepareStatement("SELECT pg_drop_replication_slot(?)")) {
                        drop.setString(1, slot);
                        drop.execute();
                    }
                }
                if (!busy) {
                    return;
                }
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("replication slots " + prefix + "% still active a minute after their connector was deleted");
            }
            Thread.sleep(250);
        }
    }

    /** The columns of the benchmarks' Postgres tables: bigint key, 3 texts, 2 doubles, bigint, int, numeric(18,2), timestamptz. */
    static final String PG_COLUMNS = "(id bigint PRIMARY KEY, name text NOT NULL, email text NOT NULL, city text,"
            + " score double precision NOT NULL, ratio double precision, visits bigint NOT NULL, level int NOT NULL,"
            + " balance numeric(18, 2) NOT NULL, updated_at timestamptz NOT NULL)";

    /** The SELECT list of generated row {@code g} of the copy benchmark's table (keyed by {@code g}). */
    static final String PG_COPY_ROW = "g, 'name-' || g, 'user' || g || '@example.com',"
            + " CASE WHEN g % 7 = 0 THEN NULL ELSE 'city-' || (g % 100) END, g * 0.5,"
            + " CASE WHEN g % 5 = 0 THEN NULL ELSE 1.0 / (g + 1) END, g * 3, g % 10, g / 100.0,"
            + " timestamptz '2023-11-14 22:13:20+00' + g * interval '1 microsecond'";

    /**
     * Creates schema {@code bench} in a database, (re)creates {@code table} of {@link #PG_COLUMNS} holding rows 1 to
     * {@code rows} selected by {@code selectList} (over {@code generate_series(1, rows) g}), analyzes it, publishes it
     * alone in {@code publication} (dropped first), then runs {@code more}.
     */
    void createPublishedTable(String database, String table, String publication, String selectList, long rows,
            String... more) throws SQLException {
        List<String> statements = new ArrayList<>(List.of("CREATE SCHEMA IF NOT EXISTS bench",
                "DROP PUBLICATION IF EXISTS " + publication,
                "DROP TABLE IF EXISTS " + table,
                "CREATE TABLE " + table + " " + PG_COLUMNS,
                "INSERT INTO " + table + " SELECT " + selectList + " FROM generate_series(1, " + rows + ") g",
                "VACUUM ANALYZE " + table,
                "CREATE PUBLICATION " + publication + " FOR TABLE " + table));
        statements.addAll(List.of(more));
        sql(database, statements.toArray(String[]::new));
    }

    public void sql(String database, String... statements) throws SQLException {
        try (Connection c = stack.postgres().connect(database); Statement s = c.createStatement()) {
            for (String statement : statements) {
                s.execute(statement);
            }
        }
    }

    /** Transactions committed and rolled back in a database so far (pg_stat_database; flushed within a second or so). */
    public long transactions(String database) throws SQLException {
        try (Connection c = stack.postgres().connect("postgres")) {
            try (Statement s = c.createStatement()) {
                // the statistics snapshot of a transaction is cached: read the counters fresh
                s.execute("SELECT pg_stat_clear_snapshot()");
            }
            try (PreparedStatement ps = c.prepareStatement("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = ?")) {
                ps.setString(1, database);
                try (ResultSet rs = ps.executeQuery()) {
                    return rs.next() ? rs.getLong(1) : 0;
                }
            }
        }
    }

    /** The Postgres pipeline source's connection settings for {@code database}. */
    public Map<String, String> pgPipeline(String database, String catalogUrl, String publication, String slotPrefix, String topicPrefix) {
        Map<String, String> config = io.tablecdc.e2e.flows.SourceConfigs.pgPipeline(stack, catalogUrl, database, publication,
                slotPrefix);
        config.put("topic.prefix", topicPrefix);
        // the connector's default heartbeat, as the benchmarks were measured with
        config.remove("heartbeat.interval.ms");
        return config;
    }

    /** Debezium's Postgres connector on the same database, pgoutput, an existing publication and a named slot. */
    public Map<String, String> debezium(String database, String publication, String slot, String topicPrefix, String tables,
                                        String snapshotMode) {
        Map<String, String> config = new HashMap<>();
        config.put("connector.class", DEBEZIUM_CLASS);
        config.put("tasks.max", "1");
        config.put("database.hostname", stack.postgres().host());
        config.put("database.port", Integer.toString(stack.postgres().port()));
        config.put("database.dbname", database);
        config.put("database.user", stack.postgres().user());
        config.put("database.password", stack.postgres().password());
        config.put("plugin.name", "pgoutput");
        config.put("publication.name", publication);
        config.put("publication.autocreate.mode", "disabled");
        config.put("slot.name", slot);
        config.put("topic.prefix", topicPrefix);
        config.put("table.include.list", tables);
        config.put("snapshot.mode", snapshotMode);
        // one record per change, as the tablecdc source writes
        config.put("tombstones.on.delete", "false");
        config.put("topic.creation.default.partitions", "1");
        config.put("topic.creation.default.replication.factor", "1");
        return config;
    }

    /** The local Postgres server's postmaster (from its data folder's postmaster.pid), or -1. */
    public static long postgresPid() throws java.io.IOException {
        Path stackDir = StackPaths.stackRoot();
        try (java.nio.file.DirectoryStream<Path> dirs = Files.newDirectoryStream(stackDir, "postgres-" + ProcessHandle.current().pid() + "-*")) {
            for (Path d : dirs) {
                Path pidFile = d.resolve("data/postmaster.pid");
                if (Files.exists(pidFile)) {
                    return Long.parseLong(Files.readAllLines(pidFile).get(0).trim());
                }
            }
        }
        return -1;
    }

    /**
     * The processes whose CPU the end-to-end suites report, by label: the Connect worker, this JVM (Kafka broker, S3
     * store, ClickHouse engine and its HTTP front, and the baselines' own code), the Postgres server with its
     * backends, and with {@code emulator} the BigQuery emulator.
     */
    public Map<String, Long> processes(boolean emulator) throws java.io.IOException {
        Map<String, Long> out = new java.util.LinkedHashMap<>();
        out.put(CPU_WORKER, workerPid);
        out.put(CPU_BENCH, ProcessHandle.current().pid());
        long pg = postgresPid();
        if (pg > 0) {
            out.put(CPU_POSTGRES, pg);
        }
        if (emulator) {
            stack.bigquery().pid().ifPresent(pid -> out.put(CPU_EMULATOR, pid));
        }
        if (registry != null) {
            registry.pid().ifPresent(pid -> out.put(CPU_REGISTRY, pid));
        }
        return out;
    }

    public static final String CPU_WORKER = "Connect worker";
    public static final String CPU_BENCH = "benchmark JVM";
    public static final String CPU_POSTGRES = "Postgres";
    public static final String CPU_EMULATOR = "BigQuery emulator";
    public static final String CPU_REGISTRY = "schema registry";

    /** CPU seconds used so far by each process and its live descendants. */
    public static Map<String, Double> cpu(Map<String, Long> processes) {
        Map<String, Double> out = new java.util.LinkedHashMap<>();
        processes.forEach((label, pid) -> out.put(label, label.equals(CPU_WORKER) || label.equals(CPU_BENCH)
                ? Probe.cpuSeconds(pid) : Probe.treeCpuSeconds(pid)));
        return out;
    }

    /** {@code after − before} per process. */
    public static Map<String, Double> cpuSince(Map<String, Double> before, Map<String, Double> after) {
        Map<String, Double> out = new java.util.LinkedHashMap<>();
        before.forEach((label, b) -> out.put(label, after.getOrDefault(label, b) - b));
        return out;
    }

    @Override
    public void close() {
        admin.close();
        clickhouse.close();
    }
}
