package io.tablecdc.e2e.bench;

import java.io.ByteArrayOutputStream;
import java.io.ByteArrayInputStream;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;


import com.clickhouse.data.ClickHouseFormat;

import io.tablecdc.common.TablecdcTypes;
import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.StackPaths;

import jdk.jfr.Configuration;
import jdk.jfr.Recording;

/**
 * Suite 3: rows per second the stage sink stages and normalizes (each mode and codec) for a 10-column table already
 * in Kafka, next to a plain bulk {@code INSERT … FORMAT RowBinary} of the same rows into the same ClickHouse engine.
 * All variants read one topic written once; each gets its own consumer group, catalog database and ClickHouse table.
 */
final class SinkSuite {
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("bench").field("id", Schema.INT64_SCHEMA)
            .field("name", Schema.STRING_SCHEMA).field("email", Schema.STRING_SCHEMA).field("city", Schema.OPTIONAL_STRING_SCHEMA)
            .field("score", Schema.FLOAT64_SCHEMA).field("ratio", Schema.OPTIONAL_FLOAT64_SCHEMA)
            .field("visits", Schema.INT64_SCHEMA).field("level", Schema.INT32_SCHEMA)
            .field("balance", Decimal.builder(2).parameter("connect.decimal.precision", "18").build())
            .field("updated_at", TablecdcTypes.microTimestamp().build()).build();
    private static final String BASELINE = "bulk INSERT FORMAT RowBinary";
    private static final String FLOW = "bench";
    private static final String TABLE = "bench.sink";
    /** The final table the sink derives from {@link #TABLE}. */
    private static final String CH_TABLE = "bench_sink";

    private final Bench bench;
    private final SuiteReport report;
    private final Measure rowsPerSecond;
    /** Rows per second after the first batch is loaded: without the deployment, the consumer group's join and warm-up. */
    private final Measure steadyRowsPerSecond;
    /** Seconds of the last {@link #sink} or {@link #baseline} run after its first batch was loaded. */
    private double lastSteadySeconds = Double.NaN;
    private final String topic;
    /** The same rows written by Apicurio's Avro converter, for the variants ending {@code :avro}. */
    private final String avroTopic;
    /** The same rows as block records ({@code record.format=blocks}), for the variants ending {@code :blocks}. */
    private final String blocksTopic;
    private int catalogs;

    SinkSuite(Bench bench) {
        this.bench = bench;
        BenchOptions o = bench.options;
        this.report = new SuiteReport("sink", "3. Sink: Kafka to ClickHouse", String.format(Locale.ROOT,
                "%d rows of a 10-column table (bigint key, 3 strings, 2 doubles, bigint, int, decimal(18,2), timestamp) already"
                        + " in a one-partition Kafka topic as JSON with schemas (JsonConverter; for the variants named `Avro converter`, the"
                        + " same rows written by Apicurio's Avro converter 2.6.13.Final against Apicurio Registry 3.3.3 on this"
                        + " machine, read by the sink with that converter; `StringConverter headers`: the sink with"
                        + " `header.converter=org.apache.kafka.connect.storage.StringConverter` instead of the worker's default"
                        + " SimpleHeaderConverter; `block records`: the same rows as block records of up to 256 KiB, as the"
                        + " Postgres pipeline's `record.format=blocks` writes them, read with ByteArrayConverter), in batches"
                        + " of %d rows; the time from deploying"
                        + " the sink until the catalog shows every batch normalized into the final ReplacingMergeTree table"
                        + " (staged as Avro in the S3 store, loaded with INSERT … SELECT). The baseline inserts the same rows"
                        + " into the same engine as `INSERT … FORMAT RowBinary` over HTTP (the same front the sink talks to),"
                        + " %d rows per INSERT, one after another, encoding included.",
                o.sinkRows, o.sinkBatchRows, o.sinkBatchRows));
        this.rowsPerSecond = report.measure(new Measure("sink-rows-per-second", "Sink: rows per second into ClickHouse", "rows/s",
                true, BASELINE));
        this.steadyRowsPerSecond = report.measure(new Measure("sink-steady-rows-per-second", "Sink: rows per second after the"
                + " first batch is loaded (batches 2 to the last)", "rows/s", true, BASELINE));
        for (Measure m : List.of(rowsPerSecond, steadyRowsPerSecond)) {
            m.declare(BASELINE);
            for (String v : o.sinkVariants) {
                m.declare(variantName(v));
            }
        }
        this.topic = "bench.sink." + Long.toString(System.currentTimeMillis(), 36);
        this.avroTopic = topic + ".avro";
        this.blocksTopic = topic + ".blocks";
    }

    private static String variantName(String variant) {
        String[] mc = variant.split(":");
        return "tablecdc " + mc[0] + ", " + mc[1] + (avro(variant) ? ", Avro converter" : "")
                + (stringHeaders(variant) ? ", StringConverter headers" : "") + (blocks(variant) ? ", block records" : "");
    }

    /** Variants that read block records ({@code record.format=blocks}) with ByteArrayConverter. */
    private static boolean blocks(String variant) {
        return List.of(variant.split(":")).contains("blocks");
    }

    private static boolean avro(String variant) {
        return List.of(variant.split(":")).contains("avro");
    }

    /** Variants whose sink reads the headers with {@code header.converter=StringConverter} (no parsing). */
    private static boolean stringHeaders(String variant) {
        return List.of(variant.split(":")).contains("strings");
    }

    SuiteReport run() throws Exception {
        BenchOptions o = bench.options;
        long t0 = System.nanoTime();
        boolean avro = o.sinkVariants.stream().anyMatch(SinkSuite::avro);
        produce(topic, o.sinkRows, o.sinkBatchRows, false);
        BenchRunner.log("sink: produced %d rows to %s in %.1f s", o.sinkRows, topic, (System.nanoTime() - t0) / 1e9);
        if (avro) {
            produce(avroTopic, o.sinkRows, o.sinkBatchRows, true);
        }
        boolean blocks = o.sinkVariants.stream().anyMatch(SinkSuite::blocks);
        if (blocks) {
            produceBlocks(blocksTopic, o.sinkRows, o.sinkBatchRows);
        }
        // warm-up, not measured: the worker's first sink of each mode (and converter) loads and compiles its classes
        String warmup = topic + ".warmup";
        produce(warmup, 1_000, 1_000, false);
        for (String mode : new String[] {"pull", "push"}) {
            double seconds = sink(mode + ":zstandard", warmup, 1);
            BenchRunner.log("sink: warm-up %s %.1f s", mode, seconds);
        }
        if (avro) {
            produce(warmup + ".avro", 1_000, 1_000, true);
            double seconds = sink("pull:zstandard:avro", warmup + ".avro", 1);
            BenchRunner.log("sink: warm-up Avro converter %.1f s", seconds);
        }
        if (blocks) {
            produceBlocks(warmup + ".blocks", 1_000, 1_000);
            double seconds = sink("pull:zstandard:blocks", warmup + ".blocks", 1);
            BenchRunner.log("sink: warm-up block records %.1f s", seconds);
        }
        for (int rep = 0; rep < o.reps && bench.startRepetition(report, rep); rep++) {
            double base = baseline(o.sinkRows, o.sinkBatchRows);
            long laterRows = o.sinkRows - Math.min(o.sinkRows, o.sinkBatchRows);
            rowsPerSecond.add(BASELINE, rep, o.sinkRows / base);
            steadyRowsPerSecond.add(BASELINE, rep, laterRows / lastSteadySeconds);
            BenchRunner.log("sink run %d: %s %.1f s (%.0f rows/s; after the first batch %.0f rows/s)", rep + 1, BASELINE, base,
                    o.sinkRows / base, laterRows / lastSteadySeconds);
            for (String v : o.sinkVariants) {
                double seconds = sink(v);
                rowsPerSecond.add(variantName(v), rep, o.sinkRows / seconds);
                steadyRowsPerSecond.add(variantName(v), rep, laterRows / lastSteadySeconds);
                BenchRunner.log("sink run %d: %s %.1f s (%.0f rows/s; after the first batch %.0f rows/s)", rep + 1, variantName(v),
                        seconds, o.sinkRows / seconds, laterRows / lastSteadySeconds);
            }
        }
        if (o.profile && !o.sinkVariants.isEmpty()) {
            // the first variant, and the first of each converter choice after it
            java.util.Set<String> profiled = new java.util.LinkedHashSet<>();
            profiled.add(o.sinkVariants.get(0));
            o.sinkVariants.stream().filter(v -> avro(v) && !stringHeaders(v)).findFirst().ifPresent(profiled::add);
            o.sinkVariants.stream().filter(SinkSuite::stringHeaders).findFirst().ifPresent(profiled::add);
            o.sinkVariants.stream().filter(SinkSuite::blocks).findFirst().ifPresent(profiled::add);
            for (String v : profiled) {
                profile(v);
            }
        }
        return report;
    }

    private void produce(String topic, int rows, int batchRows, boolean avro) throws Exception {
        String bootstrap = bench.stack.kafka().bootstrapServers();
        try (RecordProducer producer = (avro ? new RecordProducer(bootstrap, bench.registry.avroConverter(true),
                bench.registry.avroConverter(false)) : new RecordProducer(bootstrap)).topic(topic)) {
            for (int i = 0; i < rows; i++) {
                int batch = i / batchRows + 1;
                boolean last = (i + 1) % batchRows == 0 || i == rows - 1;
                producer.sendAsync(topic, new Struct(KEY).put("id", (long) i), row(i), Headers.of(FLOW, TABLE, "r", 1, batch, last));
            }
            producer.flush();
        }
    }

    /** The rows of {@link #produce} as block records of up to 256 KiB, as {@code record.format=blocks} writes them. */
    private void produceBlocks(String topic, int rows, int batchRows) throws Exception {
        try (RecordProducer producer = new RecordProducer(bench.stack.kafka().bootstrapServers()).topic(topic)) {
            io.tablecdc.common.RowBlock.Writer writer = new io.tablecdc.common.RowBlock.Writer(VALUE, KEY);
            for (int i = 0; i < rows; i++) {
                int batch = i / batchRows + 1;
                boolean last = (i + 1) % batchRows == 0 || i == rows - 1;
                writer.add(io.tablecdc.common.RecordHeaders.Op.SNAPSHOT, java.math.BigInteger.ONE, row(i), List.of(), false,
                        List.of(), null);
                if (last || writer.bytes() >= 262_144) {
                    Map<String, String> headers = new java.util.HashMap<>();
                    headers.put("tablecdc.flow", FLOW);
                    headers.put("tablecdc.table", TABLE);
                    headers.put("tablecdc.batch", Integer.toString(batch));
                    headers.put(io.tablecdc.common.RowBlock.HEADER, io.tablecdc.common.RowBlock.FORMAT);
                    if (last) {
                        headers.put("tablecdc.batch.last", "true");
                    }
                    producer.sendRaw(topic, null, writer.finish(), headers);
                }
            }
        }
    }

    private static Struct row(int i) {
        return new Struct(VALUE).put("id", (long) i).put("name", "name-" + i).put("email", "user" + i + "@example.com")
                .put("city", i % 7 == 0 ? null : "city-" + (i % 100)).put("score", i * 0.5).put("ratio", i % 5 == 0 ? null : 1.0 / (i + 1))
                .put("visits", i * 3L).put("level", i % 10).put("balance", new BigDecimal(i).movePointLeft(2))
                .put("updated_at", 1_700_000_000_000_000L + i);
    }

    /** Seconds the sink takes from deployment to every batch normalized. */
    private double sink(String variant) throws Exception {
        BenchOptions o = bench.options;
        return sink(variant, avro(variant) ? avroTopic : blocks(variant) ? blocksTopic : topic,
                (o.sinkRows + o.sinkBatchRows - 1) / o.sinkBatchRows);
    }

    private double sink(String variant, String topic, long batches) throws Exception {
        String[] mc = variant.split(":");
        bench.clickhouse.execute("DROP TABLE IF EXISTS " + CH_TABLE).get().close();
        String catalog = "bench_sink_catalog_" + (++catalogs) + "_" + Long.toString(System.currentTimeMillis(), 36);
        String catalogUrl = bench.stack.postgres().createDatabase(catalog);
        String name = "bench-sink-" + catalogs + "-" + mc[0] + "-" + mc[1];
        Map<String, String> config = SinkConfigs.stageSink(bench.stack, catalogUrl, name);
        config.put("topics", topic);
        config.put("normalize.mode", mc[0]);
        config.put("avro.codec", mc[1]);
        config.put("consumer.override.max.poll.records", "5000");
        if (avro(variant)) {
            bench.registry.withAvroConverters(config);
        }
        if (stringHeaders(variant)) {
            config.put("header.converter", "org.apache.kafka.connect.storage.StringConverter");
        }
        if (blocks(variant)) {
            config.put("value.converter", "org.apache.kafka.connect.converters.ByteArrayConverter");
        }
        long start = System.nanoTime();
        bench.rest().putConfig(name, config);
        long firstBatch = awaitNormalized(name, catalog, batches, Duration.ofMinutes(30));
        long end = System.nanoTime();
        double seconds = (end - start) / 1e9;
        lastSteadySeconds = (end - firstBatch) / 1e9;
        bench.delete(name);
        bench.clickhouse.execute("DROP TABLE IF EXISTS " + CH_TABLE).get().close();
        return seconds;
    }

    /**
     * Waits until the catalog shows {@code batches} batches normalized, polling every 20 ms; returns the moment the
     * first was seen normalized.
     */
    private long awaitNormalized(String connector, String catalog, long batches, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        long first = -1;
        long nextStatus = 0;
        // one connection for all the polls: a new one every 20 ms would start as many Postgres backends
        try (Connection c = bench.stack.postgres().connect(catalog)) {
            while (System.nanoTime() < deadline) {
                try {
                    long normalized = normalizedBatchId(c, FLOW, TABLE);
                    if (normalized >= 1 && first < 0) {
                        first = System.nanoTime();
                    }
                    if (normalized >= batches) {
                        return first;
                    }
                } catch (java.sql.SQLException notYet) {
                    // the catalog's tables appear once the sink has migrated it
                }
                if (System.nanoTime() >= nextStatus) {
                    bench.failIfTaskFailed(connector);
                    nextStatus = System.nanoTime() + 500_000_000L;
                }
                Thread.sleep(20);
            }
        }
        throw new IllegalStateException(connector + " did not normalize " + batches + " batches within " + timeout);
    }

    /** The table's normalized batch id in the catalog behind {@code c} (0 before its row exists). */
    static long normalizedBatchId(Connection c, String flow, String table) throws java.sql.SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT normalized_batch_id FROM cdc_table_replication_state"
                + " WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getLong(1) : 0;
            }
        }
    }

    /** Seconds for the bulk RowBinary inserts of the same rows (encoding included, as the sink's is). */
    private double baseline(int rows, int batchRows) throws Exception {
        String table = "bench_sink_baseline";
        bench.clickhouse.execute("DROP TABLE IF EXISTS " + table).get().close();
        bench.clickhouse.execute("CREATE TABLE " + table + " (id Int64, name String, email String, city Nullable(String), score Float64,"
                + " ratio Nullable(Float64), visits Int64, level Int32, balance Decimal(18, 2), updated_at DateTime64(6, 'UTC'),"
                + " _tablecdc_version UInt64, _tablecdc_is_deleted UInt8)"
                + " ENGINE = ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted) ORDER BY id").get().close();
        long start = System.nanoTime();
        long firstBatch = -1;
        for (int from = 0; from < rows; from += batchRows) {
            byte[] body = rowBinary(from, Math.min(rows, from + batchRows));
            bench.clickhouse.insert(table, new ByteArrayInputStream(body), ClickHouseFormat.RowBinary).get().close();
            if (firstBatch < 0) {
                firstBatch = System.nanoTime();
            }
        }
        long end = System.nanoTime();
        double seconds = (end - start) / 1e9;
        lastSteadySeconds = (end - firstBatch) / 1e9;
        long inserted = bench.clickhouse.queryAll("SELECT count() AS n FROM " + table).get(0).getLong("n");
        if (inserted != rows) {
            throw new IllegalStateException("the RowBinary baseline inserted " + inserted + " rows, not " + rows);
        }
        bench.clickhouse.execute("DROP TABLE " + table).get().close();
        return seconds;
    }

    /** Rows {@code from} (inclusive) to {@code to} as RowBinary, the same values {@link #row} sends through Kafka. */
    static byte[] rowBinary(int from, int to) {
        ByteArrayOutputStream out = new ByteArrayOutputStream((to - from) * 96);
        ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = from; i < to; i++) {
            int64(out, b, i);
            string(out, "name-" + i);
            string(out, "user" + i + "@example.com");
            if (i % 7 == 0) {
                out.write(1);
            } else {
                out.write(0);
                string(out, "city-" + (i % 100));
            }
            int64(out, b, Double.doubleToRawLongBits(i * 0.5));
            if (i % 5 == 0) {
                out.write(1);
            } else {
                out.write(0);
                int64(out, b, Double.doubleToRawLongBits(1.0 / (i + 1)));
            }
            int64(out, b, i * 3L);
            b.clear();
            b.putInt(i % 10);
            out.write(b.array(), 0, 4);
            // Decimal(18, 2) is an Int64 of the unscaled value
            int64(out, b, i);
            int64(out, b, 1_700_000_000_000_000L + i);
            int64(out, b, 1);
            out.write(0);
        }
        return out.toByteArray();
    }

    private static void int64(ByteArrayOutputStream out, ByteBuffer b, long v) {
        b.clear();
        b.putLong(v);
        out.write(b.array(), 0, 8);
    }

    private static void string(ByteArrayOutputStream out, String s) {
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        int n = bytes.length;
        while ((n & ~0x7F) != 0) {
            out.write((n & 0x7F) | 0x80);
            n >>>= 7;
        }
        out.write(n);
        out.write(bytes, 0, bytes.length);
    }

    /**
     * One more run of a variant (not counted in the table) with flight recordings of the worker and of the
     * benchmark's own JVM (Kafka broker, S3 store, ClickHouse engine's HTTP front), and each process's CPU time.
     */
    private void profile(String variant) throws Exception {
        Path dir = bench.workDir.resolve("jfr");
        Files.createDirectories(dir);
        String suffix = (avro(variant) ? "-avro" : "") + (stringHeaders(variant) ? "-strings" : "") + (blocks(variant) ? "-blocks" : "");
        Path workerJfr = dir.resolve("sink" + suffix + "-worker.jfr");
        Path selfJfr = dir.resolve("sink" + suffix + "-stack.jfr");
        long postgresPid = Bench.postgresPid();
        long self = ProcessHandle.current().pid();
        double w0 = Probe.cpuSeconds(bench.workerPid);
        double s0 = Probe.cpuSeconds(self);
        double p0 = postgresPid > 0 ? Probe.treeCpuSeconds(postgresPid) : 0;
        Probe.startRecording(bench.workerPid, "bench-sink");
        Recording recording = new Recording(Configuration.getConfiguration("profile"));
        recording.start();
        double seconds = sink(variant);
        recording.stop();
        recording.dump(selfJfr);
        recording.close();
        Probe.stopRecording(bench.workerPid, "bench-sink", workerJfr);
        double w = Probe.cpuSeconds(bench.workerPid) - w0;
        double s = Probe.cpuSeconds(self) - s0;
        double p = postgresPid > 0 ? Probe.treeCpuSeconds(postgresPid) - p0 : Double.NaN;
        // the same accounting for the baseline
        double bs0 = Probe.cpuSeconds(self);
        double bw0 = Probe.cpuSeconds(bench.workerPid);
        double baseSeconds = baseline(bench.options.sinkRows, bench.options.sinkBatchRows);
        double bs = Probe.cpuSeconds(self) - bs0;
        double bw = Probe.cpuSeconds(bench.workerPid) - bw0;
        Probe.Profile workerProfile = Probe.profile(workerJfr);
        Probe.Profile stackProfile = Probe.profile(selfJfr);
        StringBuilder md = new StringBuilder();
        md.append(String.format(Locale.ROOT, "**Profile of %s** (one extra run with JDK Flight Recorder, `settings=profile`, on both"
                + " JVMs; not counted in the table): %.1f s wall for %d rows. CPU seconds used meanwhile: Connect worker %.1f,"
                + " the benchmark JVM (Kafka broker, S3 store, ClickHouse engine and its HTTP front) %.1f, Postgres (catalog) %s"
                + " — %.0f %% of the 2 cores' %.0f CPU-seconds of wall time. The RowBinary baseline took %.1f s and %.1f CPU-seconds"
                + " in the benchmark JVM (worker %.1f).%n%n", variantName(variant), seconds, bench.options.sinkRows, w, s,
                Double.isNaN(p) ? "not measured" : Measure.format(p), 100 * (w + s + (Double.isNaN(p) ? 0 : p)) / (2 * seconds),
                2 * seconds, baseSeconds, bs, bw));
        md.append("Connect worker (").append(bench.root().relativize(workerJfr)).append("):\n\n").append(workerProfile.markdown(12));
        md.append("Benchmark JVM (").append(bench.root().relativize(selfJfr)).append("):\n\n").append(stackProfile.markdown(12));
        report.note(md.toString());
        BenchRunner.log("sink profile: %s %.1f s, worker CPU %.1f s, stack JVM CPU %.1f s, postgres CPU %s", variantName(variant),
                seconds, w, s, Measure.format(p));
    }
}
