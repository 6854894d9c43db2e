package io.tablecdc.e2e.bench;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Suite 2: streaming. Each connector is deployed on an empty stream, paused, then a workload of inserts, updates and
 * deletes over several tables is committed, followed by one marker row; the connector is resumed and timed until the
 * marker reaches Kafka (changes per second from a backlog, the same WAL for both). Then single-row changes one at a
 * time: end-to-end latency from commit to the record being readable in Kafka.
 */
final class PgStreamSuite {
    private static final String DATABASE = PgCopySuite.DATABASE;
    private static final String PUBLICATION = "bench_stream_pub";
    private static final String DEBEZIUM = "Debezium 3.6.1 streaming";
    private static final String TABLECDC = "tablecdc apply task";
    /** The apply task with {@code record.format=blocks}, ByteArrayConverter and the copy's producer overrides. */
    private static final String TABLECDC_BLOCKS = "tablecdc apply task, blocks, producer overrides";
    private static final int CHUNK = 1_000;

    private final Bench bench;
    private final SuiteReport report;
    private final Measure changesPerSecond;
    private final Measure latency;
    private final String catalogUrl;
    private final List<Double> writerRates = new ArrayList<>();
    private int runs;

    PgStreamSuite(Bench bench) throws Exception {
        this.bench = bench;
        BenchOptions o = bench.options;
        this.report = new SuiteReport("pg-stream", "2. Postgres streaming into Kafka", String.format(Locale.ROOT,
                "%d changes over %d tables of 10 columns (60 %% inserts, 30 %% updates, 10 %% deletes, %d rows per transaction,"
                        + " tables interleaved), committed while the connector is paused on its slot; then the connector is"
                        + " resumed and timed until a marker row committed after the workload is in Kafka. Debezium runs with"
                        + " `snapshot.mode=no_data`, `tombstones.on.delete=false` (one record per change, like tablecdc),"
                        + " the tablecdc source with `table.sync.copy=none`; both with pgoutput, JsonConverter with schemas,"
                        + " the same worker; `blocks, producer overrides`: the tablecdc source with `record.format=blocks` and"
                        + " ByteArrayConverter for values, `linger.ms=20`, `batch.size=262144`, `compression.type=lz4`. Latency: %d single-row inserts, one at a time, each timed from its commit until"
                        + " the record is read from Kafka (median per run).",
                o.streamChanges, o.streamTables, CHUNK, o.latencySamples));
        this.changesPerSecond = report.measure(new Measure("pg-stream-changes-per-second", "Postgres streaming: changes per second",
                "changes/s", true, DEBEZIUM));
        this.latency = report.measure(new Measure("pg-stream-latency", "Postgres streaming: commit to Kafka latency, median", "ms",
                false, DEBEZIUM));
        for (Measure m : List.of(changesPerSecond, latency)) {
            m.declare(TABLECDC);
            m.declare(TABLECDC_BLOCKS);
            m.declare(DEBEZIUM);
        }
        this.catalogUrl = bench.stack.postgres().createDatabase("bench_pg_catalog");
    }

    SuiteReport run() throws Exception {
        BenchOptions o = bench.options;
        bench.stack.postgres().createDatabase(DATABASE);
        List<String> statements = new ArrayList<>(List.of("CREATE SCHEMA IF NOT EXISTS bench",
                "DROP PUBLICATION IF EXISTS " + PUBLICATION,
                "DROP TABLE IF EXISTS bench.marker",
                "CREATE TABLE bench.marker (id bigint PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())"));
        List<String> tables = new ArrayList<>();
        for (int t = 0; t < o.streamTables; t++) {
            String table = "bench.s" + t;
            tables.add(table);
            statements.add("DROP TABLE IF EXISTS " + table);
            statements.add("CREATE TABLE " + table + " " + Bench.PG_COLUMNS);
        }
        statements.add("CREATE PUBLICATION " + PUBLICATION + " FOR TABLE bench.marker, " + String.join(", ", tables));
        // a paused connector reads nothing from its walsender for a while: keep Postgres from ending the connection
        statements.add("ALTER SYSTEM SET wal_sender_timeout = 0");
        statements.add("SELECT pg_reload_conf()");
        bench.sql(DATABASE, statements.toArray(String[]::new));
        try {
            for (int rep = 0; rep < o.reps && bench.startRepetition(report, rep); rep++) {
                runOrSkip(rep, TABLECDC, tables);
                runOrSkip(rep, TABLECDC_BLOCKS, tables);
                if (bench.debezium) {
                    runOrSkip(rep, DEBEZIUM, tables);
                } else {
                    for (Measure m : List.of(changesPerSecond, latency)) {
                        m.skip(DEBEZIUM, "the Debezium plugin is not in " + Bench.DEBEZIUM_PLUGIN_DIR + " (scripts/bench.sh resolves it)");
                    }
                }
            }
        } finally {
            bench.sql(DATABASE, "ALTER SYSTEM RESET wal_sender_timeout", "SELECT pg_reload_conf()");
        }
        report.note(String.format(Locale.ROOT, "For scale: the workload's own commit rate (one writer connection, while the"
                + " connector is paused) was %s changes/s (median of %d runs).", Measure.format(Measure.median(writerRates)),
                writerRates.size()));
        return report;
    }

    private void runOrSkip(int rep, String variant, List<String> tables) throws Exception {
        int run = ++runs;
        String name = (variant.equals(DEBEZIUM) ? "dbzstream" : "benchstream") + run;
        try {
            run(rep, run, name, variant, tables);
        } catch (Exception e) {
            BenchRunner.log("pg-stream: %s failed: %s", variant, e);
            String reason = "failed: " + Bench.firstLine(e.getMessage() == null ? e.toString() : e.getMessage());
            changesPerSecond.skip(variant, reason);
            latency.skip(variant, reason);
        } finally {
            bench.delete(name);
            bench.dropSlots(DATABASE, name);
        }
    }

    private void run(int rep, int run, String name, String variant, List<String> tables) throws Exception {
        BenchOptions o = bench.options;
        Map<String, String> config = variant.equals(DEBEZIUM)
                ? bench.debezium(DATABASE, PUBLICATION, name, name, "bench.*", "no_data")
                : bench.pgPipeline(DATABASE, catalogUrl, PUBLICATION, name, name);
        if (!variant.equals(DEBEZIUM)) {
            config.put("table.sync.copy", "none");
        }
        if (variant.equals(TABLECDC_BLOCKS)) {
            config.put("record.format", "blocks");
            config.put("value.converter", "org.apache.kafka.connect.converters.ByteArrayConverter");
            config.put("producer.override.linger.ms", "20");
            config.put("producer.override.batch.size", "262144");
            config.put("producer.override.compression.type", "lz4");
        }
        bench.rest().putConfig(name, config);
        bench.awaitRunning(name, 1, Duration.ofMinutes(3));
        awaitActiveSlot(name, Duration.ofMinutes(2));
        bench.rest().pause(name);
        bench.rest().awaitStatus(name, s -> s.path("connector").path("state").asText().equals("PAUSED")
                && s.path("tasks").size() > 0 && s.path("tasks").get(0).path("state").asText().equals("PAUSED"), Duration.ofMinutes(1));
        long base = (long) run * 10_000_000L;
        long w0 = System.nanoTime();
        long changes = workload(tables, base, o.streamChanges);
        double writeSeconds = (System.nanoTime() - w0) / 1e9;
        writerRates.add(changes / writeSeconds);
        String markerTopic = name + ".bench.marker";
        bench.sql(DATABASE, "INSERT INTO bench.marker (id) VALUES (" + base + ")");
        long start = System.nanoTime();
        bench.rest().resume(name);
        bench.awaitRecords(name, List.of(markerTopic), 1, Duration.ofMinutes(30));
        double seconds = (System.nanoTime() - start) / 1e9;
        changesPerSecond.add(variant, rep, (changes + 1) / seconds);
        BenchRunner.log("pg-stream run %d: %s %d changes in %.1f s (written in %.1f s)", rep + 1, variant, changes + 1, seconds, writeSeconds);
        latency.add(variant, rep, latencyMs(markerTopic, base));
        BenchRunner.log("pg-stream run %d: %s latency median %.0f ms", rep + 1, variant, Measure.median(List.copyOf(lastLatencies)));
    }

    private final List<Double> lastLatencies = new ArrayList<>();

    /** Median commit-to-Kafka time of single-row inserts, one at a time. */
    private double latencyMs(String topic, long base) throws Exception {
        lastLatencies.clear();
        TopicPartition partition = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(Map.<String, Object>of(
                "bootstrap.servers", bench.stack.kafka().bootstrapServers(), "enable.auto.commit", "false",
                "fetch.max.wait.ms", "5"), new ByteArrayDeserializer(), new ByteArrayDeserializer());
             Connection c = bench.stack.postgres().connect(DATABASE);
             PreparedStatement insert = c.prepareStatement("INSERT INTO bench.marker (id) VALUES (?)")) {
            consumer.assign(List.of(partition));
            consumer.seekToEnd(List.of(partition));
            consumer.position(partition);
            for (int i = 1; i <= bench.options.latencySamples; i++) {
                insert.setLong(1, base + i);
                insert.executeUpdate();
                long committed = System.nanoTime();
                long deadline = committed + Duration.ofMinutes(2).toNanos();
                while (true) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(5));
                    if (!records.isEmpty()) {
                        lastLatencies.add((System.nanoTime() - committed) / 1e6);
                        break;
                    }
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("marker " + (base + i) + " did not reach " + topic + " within 2 minutes");
                    }
                }
                // a pause so that each change travels alone, as in a quiet OLTP database
                Thread.sleep(100);
            }
        }
        return Measure.median(lastLatencies);
    }

    /** Commits the workload (inserts, updates, deletes over every table) and returns the number of changed rows. */
    private long workload(List<String> tables, long base, int total) throws Exception {
        int perTable = total / tables.size();
        int inserts = perTable * 6 / 10;
        int updates = perTable * 3 / 10;
        int deletes = perTable - inserts - updates;
        long changes = 0;
        try (Connection c = bench.stack.postgres().connect(DATABASE); Statement s = c.createStatement()) {
            for (int from = 1; from <= inserts; from += CHUNK) {
                int to = Math.min(inserts, from + CHUNK - 1);
                for (String table : tables) {
                    changes += s.executeUpdate("INSERT INTO " + table + " SELECT " + base + " + g, 'name-' || g, 'user' || g || '@example.com',"
                            + " CASE WHEN g % 7 = 0 THEN NULL ELSE 'city-' || (g % 100) END, g * 0.5,"
                            + " CASE WHEN g % 5 = 0 THEN NULL ELSE 1.0 / (g + 1) END, g * 3, g % 10, g / 100.0, now()"
                            + " FROM generate_series(" + from + ", " + to + ") g");
                }
            }
            for (int from = 1; from <= updates; from += CHUNK) {
                int to = Math.min(updates, from + CHUNK - 1);
                for (String table : tables) {
                    changes += s.executeUpdate("UPDATE " + table + " SET visits = visits + 1, score = score * 2, updated_at = now()"
                            + " WHERE id BETWEEN " + (base + from) + " AND " + (base + to));
                }
            }
            for (int from = updates + 1; from <= updates + deletes; from += CHUNK) {
                int to = Math.min(updates + deletes, from + CHUNK - 1);
                for (String table : tables) {
                    changes += s.executeUpdate("DELETE FROM " + table + " WHERE id BETWEEN " + (base + from) + " AND " + (base + to));
                }
            }
        }
        return changes;
    }

    private void awaitActiveSlot(String prefix, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            try (Connection c = bench.stack.postgres().connect(DATABASE);
                 PreparedStatement ps = c.prepareStatement("SELECT 1 FROM pg_replication_slots WHERE slot_name LIKE ? AND active")) {
                ps.setString(1, prefix + "%");
                try (ResultSet rs = ps.executeQuery()) {
                    if (rs.next()) {
                        return;
                    }
                }
            }
            bench.failIfTaskFailed(prefix);
            Thread.sleep(200);
        }
        throw new IllegalStateException(prefix + ": no active replication slot after " + timeout);
    }
}
