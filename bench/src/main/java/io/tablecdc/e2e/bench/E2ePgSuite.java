package io.tablecdc.e2e.bench;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import org.postgresql.PGConnection;


import io.tablecdc.e2e.flows.SinkConfigs;

/**
 * Suite 6: Postgres to the final ClickHouse table, end to end. The pipeline source copies a 10-column table (its copy
 * task) and then streams a backlog of changes (its apply task) into Kafka, the stage sink loads both into ClickHouse;
 * timed from deploying both connectors until {@code FINAL} shows every row. The baseline is the direct pipe:
 * {@code COPY (SELECT …) TO STDOUT} streamed by this JVM into one {@code INSERT … FORMAT TabSeparated} of the same
 * engine, no intermediate file, no durability: the fastest the rows get from Postgres into that table here.
 */
final class E2ePgSuite {
    static final String DATABASE = "bench_e2e";
    static final String PIPE = "direct pipe: COPY TO STDOUT into INSERT FORMAT TabSeparated";
    static final String LOAD = "tablecdc initial load";
    static final String STREAM = "tablecdc streaming backlog";
    /** What each record path adds to the names of its variants ({@link BenchOptions#E2E_PATHS}). */
    private static final Map<String, String> PATH_SUFFIX = Map.of("json", "", "avro", ", Avro converter",
            "avro-tuned", ", Avro converter, producer overrides", "blocks", ", blocks, producer overrides");
    private static final String TABLE = "bench.e2e_src";
    /** The ClickHouse table the sink derives from {@link #TABLE} ({@code table.name.format=${table}}). */
    private static final String CH_TABLE = "bench_e2e_src";
    private static final String PIPE_TABLE = "bench_e2e_pipe";
    private static final String PUBLICATION = "bench_e2e_pub";
    private static final List<String> CHECKSUM = E2e.CHECKSUM;

    private final Bench bench;
    private final SuiteReport report;
    private final E2e e2e;
    private int runs;

    E2ePgSuite(Bench bench) throws Exception {
        this.bench = bench;
        BenchOptions o = bench.options;
        this.report = new SuiteReport("e2e-pg", "6. End to end: Postgres to ClickHouse", String.format(Locale.ROOT,
                "One table `%s` of %d rows and 10 columns (bigint key, 3 texts (one in a thousand with a tab, newline and"
                        + " backslash), 2 doubles, bigint, int, numeric(18,2), timestamptz) replicated into its final"
                        + " ReplacingMergeTree table: the pipeline source (one copy task, one apply task) into one-partition"
                        + " Kafka topics, the stage sink (pull mode, zstandard Avro in the S3 store) into ClickHouse, both on"
                        + " the benchmark's Connect worker, a fresh catalog database per run. Record paths: without a suffix,"
                        + " Kafka's JsonConverter with schemas for keys and values and the worker's producer defaults;"
                        + " `Avro converter`: Apicurio's Avro converter (2.6.13.Final) for keys and values on both connectors,"
                        + " against Apicurio Registry 3.3.3 (in-memory storage, its own JVM on this machine; schemas"
                        + " registered as met, their ids in the payload); `producer overrides`: the source's producer with"
                        + " `linger.ms=20`, `batch.size=262144`, `compression.type=lz4`, as pg-pipeline.md recommends for"
                        + " copies; `blocks`: the source with `record.format=blocks` (blocks of rows of up to 256 KiB) and"
                        + " `ByteArrayConverter` for values on both connectors (keys: JsonConverter), with the same producer"
                        + " overrides. **%s**:"
                        + " from deploying both connectors until `SELECT count() … FINAL` (live rows) equals the table's rows."
                        + " **%s**: then, with the source paused, %d changes (60 %% inserts, 30 %% updates, 10 %% deletes of"
                        + " new rows, in statements of 1000 rows, and a last marker row) are committed; from resuming it until"
                        + " `FINAL` shows the marker and the table's row count (changes per second). `%s`: the moment the"
                        + " same run's records were all in the source's topic. Baseline, **%s**: `COPY (SELECT …) TO STDOUT`"
                        + " (text format, the timestamp as UTC text) read by the benchmark JVM and streamed through a pipe"
                        + " into one `INSERT INTO … FORMAT TabSeparated` of a ReplacingMergeTree table with the same columns,"
                        + " over the same HTTP front (which buffers the body before the engine reads it). After every run the"
                        + " target's count and checksum (sums of the numbers, text lengths and an MD5-derived hash of the"
                        + " texts) equal Postgres's, or the run fails. CPU: each process's CPU-seconds over the run per"
                        + " million rows (changes): the Connect worker, the benchmark JVM (Kafka broker, S3 store, the"
                        + " ClickHouse engine, its HTTP front, and the baseline's own pipe; the poll for the target's count"
                        + " too), the Postgres server with its backends (the catalog's included), and the schema registry"
                        + " when it runs.",
                TABLE, o.e2eRows, LOAD, STREAM, o.e2eChanges, E2e.KAFKA_SUFFIX.substring(2), PIPE));
        List<String> variants = new ArrayList<>(List.of(PIPE));
        for (String path : o.e2ePaths) {
            for (String v : List.of(LOAD, STREAM)) {
                variants.add(v + PATH_SUFFIX.get(path));
                variants.add(v + PATH_SUFFIX.get(path) + E2e.KAFKA_SUFFIX);
            }
        }
        List<String> processes = new ArrayList<>(List.of(Bench.CPU_WORKER, Bench.CPU_BENCH, Bench.CPU_POSTGRES));
        if (bench.registry != null && bench.registry.pid().isPresent()) {
            processes.add(Bench.CPU_REGISTRY);
        }
        this.e2e = new E2e(bench, report, "e2e-pg", "Postgres to ClickHouse", PIPE, variants, processes);
    }

    SuiteReport run() throws Exception {
        BenchOptions o = bench.options;
        bench.stack.postgres().createDatabase(DATABASE);
        long t0 = System.nanoTime();
        bench.createPublishedTable(DATABASE, TABLE, PUBLICATION, values("g", "g"), o.e2eRows,
                // a paused connector reads nothing from its walsender for a while: keep Postgres from ending the connection
                "ALTER SYSTEM SET wal_sender_timeout = 0",
                "SELECT pg_reload_conf()");
        BenchRunner.log("e2e-pg: %d rows loaded in %.1f s", o.e2eRows, (System.nanoTime() - t0) / 1e9);
        try {
            for (int rep = 0; rep < o.reps && bench.startRepetition(report, rep); rep++) {
                try {
                    pipe(rep);
                } catch (Exception e) {
                    e2e.skip(PIPE, e);
                }
                // the paths in a rotated order per repetition, so that none always runs first on a fresh worker
                for (int i = 0; i < o.e2ePaths.size(); i++) {
                    String path = o.e2ePaths.get((i + rep) % o.e2ePaths.size());
                    boolean profiled = rep == Math.min(1, o.reps - 1) && o.profile && (path.equals("json") || path.equals("avro-tuned") || path.equals("blocks"));
                    tablecdc(rep, path, profiled);
                }
            }
        } finally {
            bench.sql(DATABASE, "ALTER SYSTEM RESET wal_sender_timeout", "SELECT pg_reload_conf()");
        }
        return report;
    }

    /** The SELECT list of one generated row numbered {@code g} with key {@code id}. */
    private static String values(String id, String g) {
        return id + ", 'name-' || " + g + ", 'user' || " + g + " || '@example.com',"
                + " CASE WHEN " + g + " % 7 = 0 THEN NULL WHEN " + g + " % 1000 = 1 THEN E'tab\\there\\nnew line\\\\back ' || " + g
                + " ELSE 'city-' || (" + g + " % 100) END, " + g + " * 0.5,"
                + " CASE WHEN " + g + " % 5 = 0 THEN NULL ELSE 1.0 / (" + g + " + 1) END, " + g + " * 3, " + g + " % 10, "
                + g + " / 100.0, timestamptz '2023-11-14 22:13:20+00' + " + g + " * interval '1 microsecond'";
    }

    private void pipe(int rep) throws Exception {
        long rows = bench.options.e2eRows;
        bench.clickhouse.execute("DROP TABLE IF EXISTS " + PIPE_TABLE).get().close();
        bench.clickhouse.execute("CREATE TABLE " + PIPE_TABLE + " (id Int64, name String, email String, city Nullable(String),"
                + " score Float64, ratio Nullable(Float64), visits Int64, level Int32, balance Decimal(18, 2),"
                + " updated_at DateTime64(6, 'UTC')) ENGINE = ReplacingMergeTree ORDER BY id").get().close();
        AtomicLong copied = new AtomicLong(-1);
        E2e.Piped piped = e2e.pipeInto(PIPE_TABLE, "bench-copy-out", false, pipe -> {
            try (OutputStream out = new BufferedOutputStream(pipe, 1 << 20); Connection c = bench.stack.postgres().connect(DATABASE)) {
                copied.set(c.unwrap(PGConnection.class).getCopyAPI().copyOut("COPY (SELECT id, name, email, city, score, ratio,"
                        + " visits, level, balance, to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') FROM "
                        + TABLE + ") TO STDOUT", out));
            }
        });
        if (copied.get() != rows) {
            throw new IllegalStateException("COPY returned " + copied.get() + " rows, not " + rows);
        }
        E2e.sameChecksum(PIPE, CHECKSUM, pgChecksum(), e2e.chChecksum(PIPE_TABLE, ""));
        e2e.record(PIPE, rep, rows, piped.seconds(), piped.cpu());
        bench.clickhouse.execute("DROP TABLE " + PIPE_TABLE).get().close();
    }

    private void tablecdc(int rep, String path, boolean profile) throws Exception {
        BenchOptions o = bench.options;
        String load = LOAD + PATH_SUFFIX.get(path);
        String streamed = STREAM + PATH_SUFFIX.get(path);
        int run = ++runs;
        String name = "benche2e" + run;
        String catalog = "bench_e2e_catalog_" + run + "_" + Long.toString(System.currentTimeMillis(), 36);
        String catalogUrl = bench.stack.postgres().createDatabase(catalog);
        String sinkName = name + "-sink";
        String topic = name + "." + TABLE;
        bench.clickhouse.execute("DROP TABLE IF EXISTS " + CH_TABLE).get().close();
        Map<String, String> sink = SinkConfigs.flowSink(bench.stack, catalogUrl, name + "-stage", name);
        sink.put("consumer.override.max.poll.records", "5000");
        Map<String, String> source = bench.pgPipeline(DATABASE, catalogUrl, PUBLICATION, name, name);
        source.put("table.sync.copy", "all");
        source.put("tasks.max", "2");
        source.put("copy.connections.per.table", "1");
        if (path.startsWith("avro")) {
            bench.registry.withAvroConverters(sink);
            bench.registry.withAvroConverters(source);
        }
        if (path.equals("blocks")) {
            source.put("record.format", "blocks");
            source.put("value.converter", "org.apache.kafka.connect.converters.ByteArrayConverter");
            sink.put("value.converter", "org.apache.kafka.connect.converters.ByteArrayConverter");
        }
        if (path.equals("avro-tuned") || path.equals("blocks")) {
            source.put("producer.override.linger.ms", "20");
            source.put("producer.override.batch.size", "262144");
            source.put("producer.override.compression.type", "lz4");
        }
        Map<String, Long> processes = bench.processes(false);
        E2e.Profiling profiling = profile ? e2e.new Profiling(path.equals("json") ? "e2e-pg" : "e2e-pg-" + path) : null;
        try {
            Map<String, Double> c0 = Bench.cpu(processes);
            long start = System.nanoTime();
            try {
                bench.rest().putConfig(sinkName, sink);
                bench.rest().putConfig(name, source);
                E2e.Delivered d = e2e.await(List.of(name, sinkName), start, topic, o.e2eRows, CH_TABLE,
                        "SELECT count() AS n FROM " + CH_TABLE, o.e2eRows, o.e2eRows, Duration.ofMinutes(30));
                Map<String, Double> cpu = Bench.cpuSince(c0, Bench.cpu(processes));
                E2e.sameChecksum(load, CHECKSUM, pgChecksum(), e2e.chChecksum(CH_TABLE, " FINAL WHERE _tablecdc_is_deleted = 0"));
                e2e.record(load, rep, o.e2eRows, d.finalSeconds(), cpu);
                e2e.rowsPerSecond.add(load + E2e.KAFKA_SUFFIX, rep, o.e2eRows / d.kafkaSeconds());
            } catch (Exception e) {
                e2e.skip(load, e);
                e2e.skip(streamed, new IllegalStateException("not run: the initial load failed"));
                return;
            }
            try {
                stream(rep, run, name, sinkName, topic, processes, streamed);
            } catch (Exception e) {
                e2e.skip(streamed, e);
            }
            if (profiling != null) {
                profiling.report(load + " and " + streamed, "CPU-seconds and rates of that run are in the tables above.");
            }
        } finally {
            if (profiling != null) {
                profiling.close();
            }
            bench.delete(name);
            bench.delete(sinkName);
            bench.dropSlots(DATABASE, name);
            e2e.deleteTopic(topic);
            bench.sql(DATABASE, "DELETE FROM " + TABLE + " WHERE id > " + o.e2eRows, "VACUUM ANALYZE " + TABLE);
            bench.clickhouse.execute("DROP TABLE IF EXISTS " + CH_TABLE).get().close();
        }
    }

    private void stream(int rep, int run, String name, String sinkName, String topic, Map<String, Long> processes,
                        String variant) throws Exception {
        BenchOptions o = bench.options;
        bench.rest().pause(name);
        bench.rest().awaitStatus(name, s -> s.path("connector").path("state").asText().equals("PAUSED")
                && s.path("tasks").size() > 0 && stream(s.path("tasks")).allMatch(t -> t.path("state").asText().equals("PAUSED")),
                Duration.ofMinutes(1));
        long base = (long) o.e2eRows + (long) run * 10_000_000L;
        long changes = workload(base, o.e2eChanges);
        long marker = base + 9_999_999L;
        bench.sql(DATABASE, "INSERT INTO " + TABLE + " SELECT " + values(Long.toString(marker), "1"));
        changes++;
        long expected = pgCount();
        long records = bench.count(topic) + changes;
        Map<String, Double> c0 = Bench.cpu(processes);
        long start = System.nanoTime();
        bench.rest().resume(name);
        E2e.Delivered d = e2e.await(List.of(name, sinkName), start, topic, records, CH_TABLE,
                "SELECT count() AS n FROM " + CH_TABLE + " WHERE id = " + marker, 1, expected, Duration.ofMinutes(30));
        Map<String, Double> cpu = Bench.cpuSince(c0, Bench.cpu(processes));
        E2e.sameChecksum(variant, CHECKSUM, pgChecksum(), e2e.chChecksum(CH_TABLE, " FINAL WHERE _tablecdc_is_deleted = 0"));
        e2e.record(variant, rep, changes, d.finalSeconds(), cpu);
        e2e.rowsPerSecond.add(variant + E2e.KAFKA_SUFFIX, rep, changes / d.kafkaSeconds());
    }

    private static java.util.stream.Stream<com.fasterxml.jackson.databind.JsonNode> stream(com.fasterxml.jackson.databind.JsonNode array) {
        List<com.fasterxml.jackson.databind.JsonNode> out = new ArrayList<>();
        array.forEach(out::add);
        return out.stream();
    }

    /** Commits inserts, updates and deletes of new rows (ids above {@code base}); returns the rows changed. */
    private long workload(long base, int total) throws Exception {
        int inserts = total * 6 / 10;
        int updates = total * 3 / 10;
        int deletes = total - inserts - updates;
        int chunk = 1000;
        long changes = 0;
        long t0 = System.nanoTime();
        try (Connection c = bench.stack.postgres().connect(DATABASE); Statement s = c.createStatement()) {
            for (int from = 1; from <= inserts; from += chunk) {
                int to = Math.min(inserts, from + chunk - 1);
                changes += s.executeUpdate("INSERT INTO " + TABLE + " SELECT " + values(base + " + g", "g")
                        + " FROM generate_series(" + from + ", " + to + ") g");
            }
            for (int from = 1; from <= updates; from += chunk) {
                int to = Math.min(updates, from + chunk - 1);
                changes += s.executeUpdate("UPDATE " + TABLE + " SET visits = visits + 1, score = score * 2,"
                        + " updated_at = updated_at + interval '1 second' WHERE id BETWEEN " + (base + from) + " AND " + (base + to));
            }
            for (int from = updates + 1; from <= updates + deletes; from += chunk) {
                int to = Math.min(updates + deletes, from + chunk - 1);
                changes += s.executeUpdate("DELETE FROM " + TABLE + " WHERE id BETWEEN " + (base + from) + " AND " + (base + to));
            }
        }
        BenchRunner.log("e2e-pg: %d changes committed in %.1f s", changes, (System.nanoTime() - t0) / 1e9);
        return changes;
    }

    private long pgCount() throws Exception {
        try (Connection c = bench.stack.postgres().connect(DATABASE); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT count(*) FROM " + TABLE)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    /** The table's checksum in Postgres, as {@link #CHECKSUM} names its parts. */
    private List<String> pgChecksum() throws Exception {
        String text = "name || '|' || email || '|' || coalesce(city, '~')";
        try (Connection c = bench.stack.postgres().connect(DATABASE); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT count(*), sum(id), sum(visits), sum(level), sum(balance), count(city), count(ratio),"
                     + " sum(octet_length(name) + octet_length(email) + coalesce(octet_length(city), 0)),"
                     + " sum(('x' || lpad(substr(md5(" + text + "), 1, 7), 16, '0'))::bit(64)::bigint),"
                     + " sum((extract(epoch FROM updated_at) * 1000000)::bigint), sum(score), coalesce(sum(ratio), 0) FROM " + TABLE)) {
            rs.next();
            List<String> out = new ArrayList<>();
            for (int i = 1; i <= CHECKSUM.size(); i++) {
                out.add(rs.getString(i));
            }
            return out;
        }
    }

}
