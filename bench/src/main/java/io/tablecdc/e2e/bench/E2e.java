package io.tablecdc.e2e.bench;

import java.io.OutputStream;
import java.io.PipedInputStream;
import java.io.PipedOutputStream;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;

import com.clickhouse.client.api.query.GenericRecord;
import com.clickhouse.data.ClickHouseFormat;

import jdk.jfr.Configuration;
import jdk.jfr.Recording;

/**
 * What the end-to-end suites share: their measures (rows per second against a direct pipe, CPU-seconds per million
 * rows of each process), the wait until ClickHouse shows every row after {@code FINAL}, the comparison of a
 * source's checksum with ClickHouse's, and a flight recording of the worker and this JVM over one run.
 */
final class E2e {
    final Bench bench;
    final SuiteReport report;
    final String baseline;
    final Measure rowsPerSecond;
    final Map<String, Measure> cpu = new LinkedHashMap<>();
    private final String slug;

    E2e(Bench bench, SuiteReport report, String slug, String what, String baseline, List<String> variants, List<String> processes) {
        this.bench = bench;
        this.report = report;
        this.slug = slug;
        this.baseline = baseline;
        this.rowsPerSecond = report.measure(new Measure(slug + "-rows-per-second", what + ": rows (changes) per second into"
                + " the final table", "rows/s", true, baseline));
        for (String p : processes) {
            cpu.put(p, report.measure(new Measure(slug + "-cpu-" + p.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9]+", "-"),
                    what + ": CPU-seconds per million rows, " + p, "CPU-s per M rows", false, baseline)));
        }
        for (String v : variants) {
            rowsPerSecond.declare(v);
            for (Measure m : cpu.values()) {
                if (!v.endsWith(KAFKA_SUFFIX)) {
                    m.declare(v);
                }
            }
        }
    }

    /** What a writer does with the pipe's sending end (it is closed afterwards in any case). */
    interface PipeWriter {
        void write(OutputStream pipe) throws Exception;
    }

    /** The time and each process's CPU-seconds of one {@link #pipeInto}. */
    record Piped(double seconds, Map<String, Double> cpu) {
    }

    /**
     * A direct baseline: what {@code writer} writes, on a thread named {@code thread}, streamed through a pipe into one
     * {@code INSERT INTO table FORMAT TabSeparated}; timed, with the CPU of the processes ({@code emulator}: the
     * BigQuery emulator's too). The writer's failure is thrown after the insert ends.
     */
    Piped pipeInto(String table, String thread, boolean emulator, PipeWriter writer) throws Exception {
        Map<String, Long> processes = bench.processes(emulator);
        Map<String, Double> c0 = Bench.cpu(processes);
        long start = System.nanoTime();
        PipedInputStream in = new PipedInputStream(4 << 20);
        PipedOutputStream pipe = new PipedOutputStream(in);
        AtomicReference<Exception> failure = new AtomicReference<>();
        Thread writing = Thread.ofPlatform().name(thread).start(() -> {
            try (OutputStream out = pipe) {
                writer.write(out);
            } catch (Exception e) {
                failure.set(e);
            }
        });
        try {
            bench.clickhouse.insert(table, in, ClickHouseFormat.TabSeparated).get().close();
        } finally {
            in.close();
            writing.join();
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        Map<String, Double> cpu = Bench.cpuSince(c0, Bench.cpu(processes));
        if (failure.get() != null) {
            throw failure.get();
        }
        return new Piped(seconds, cpu);
    }

    /** Variants named so are the moment the same run's records were all in Kafka: no CPU of their own. */
    static final String KAFKA_SUFFIX = ", into Kafka";

    /** Records a run: its rate, and each process's CPU per million rows. */
    void record(String variant, int rep, long rows, double seconds, Map<String, Double> cpuSeconds) {
        rowsPerSecond.add(variant, rep, rows / seconds);
        cpuSeconds.forEach((p, s) -> {
            Measure m = cpu.get(p);
            if (m != null) {
                m.add(variant, rep, s * 1_000_000 / rows);
            }
        });
        BenchRunner.log("%s run %d: %s %d rows in %.1f s (%.0f rows/s), CPU s %s", slug, rep + 1, variant, rows, seconds,
                rows / seconds, format(cpuSeconds));
    }

    void skip(String variant, Exception e) {
        BenchRunner.log("%s: %s failed: %s", slug, variant, e);
        e.printStackTrace(System.out);
        String reason = "failed: " + Bench.firstLine(e.getMessage() == null ? e.toString() : e.getMessage());
        rowsPerSecond.skip(variant, reason);
        cpu.values().forEach(m -> m.skip(variant, reason));
    }

    static String format(Map<String, Double> cpuSeconds) {
        List<String> parts = new ArrayList<>();
        cpuSeconds.forEach((p, s) -> parts.add(p + " " + String.format(Locale.ROOT, "%.1f", s)));
        return String.join(", ", parts);
    }

    /** The moments a run's records were all in Kafka and all in ClickHouse, in seconds from its start. */
    record Delivered(double kafkaSeconds, double finalSeconds) {
    }

    /**
     * Waits until {@code topic} holds {@code records} and then until ClickHouse's {@code table} shows {@code rows}
     * live rows after {@code FINAL}. Between, a cheap query ({@code cheapSql}, answering {@code n}) must reach
     * {@code cheapTarget} before the {@code FINAL} count is asked, so that polling does not load the engine.
     */
    Delivered await(List<String> connectors, long start, String topic, long records, String table, String cheapSql,
                    long cheapTarget, long rows, Duration timeout) throws Exception {
        long deadline = start + timeout.toNanos();
        double kafka = Double.NaN;
        long lastCount = -1;
        while (System.nanoTime() < deadline) {
            if (Double.isNaN(kafka) && bench.count(topic) >= records) {
                kafka = (System.nanoTime() - start) / 1e9;
            }
            long cheap = chCount(cheapSql);
            if (cheap >= cheapTarget) {
                lastCount = chCount("SELECT count() AS n FROM " + table + " FINAL WHERE _tablecdc_is_deleted = 0");
                if (lastCount == rows) {
                    double seconds = (System.nanoTime() - start) / 1e9;
                    if (Double.isNaN(kafka)) {
                        kafka = seconds;
                    }
                    return new Delivered(kafka, seconds);
                }
            }
            for (String c : connectors) {
                bench.failIfTaskFailed(c);
            }
            Thread.sleep(200);
        }
        throw new IllegalStateException(connectors + ": " + table + " did not show " + rows + " rows after FINAL within "
                + timeout + " (last FINAL count " + lastCount + ", topic " + topic + " " + bench.count(topic) + " records)");
    }

    /** The first column of a count query; -1 while the table does not exist yet. */
    long chCount(String sql) {
        try {
            List<GenericRecord> rows = bench.clickhouse.queryAll(sql);
            return rows.isEmpty() ? 0 : rows.get(0).getLong(1);
        } catch (RuntimeException notYet) {
            for (Throwable t = notYet; t != null; t = t.getCause()) {
                if (String.valueOf(t.getMessage()).contains("UNKNOWN_TABLE")) {
                    return -1;
                }
            }
            throw notYet;
        }
    }

    /**
     * The parts of a table's checksum: its rows, sums of its numbers, counts of its nullable columns, the bytes of its
     * texts and a hash of them (the first 28 bits of the MD5 of {@code name|email|city}, summed); {@code ~} marks sums
     * of doubles, compared within a relative 1e-9.
     */
    static final List<String> CHECKSUM = List.of("rows", "sum(id)", "sum(visits)", "sum(level)", "sum(balance)",
            "cities", "ratios", "text bytes", "text hash", "sum(updated_at µs)", "~sum(score)", "~sum(ratio)");

    /** The same checksum of a ClickHouse table ({@code from} follows the table's name: FINAL and a filter). */
    List<String> chChecksum(String table, String from) {
        String text = "concat(name, '|', email, '|', ifNull(city, '~'))";
        return chRow("SELECT toString(count()), toString(sum(id)), toString(sum(visits)), toString(sum(level)),"
                + " toString(sum(toDecimal128(balance, 2))), toString(count(city)), toString(count(ratio)),"
                + " toString(sum(length(name) + length(email) + length(ifNull(city, '')))),"
                + " toString(sum(reinterpretAsUInt32(reverse(unhex(concat('0', substring(hex(MD5(" + text + ")), 1, 7))))))),"
                + " toString(sum(toInt128(toUnixTimestamp64Micro(updated_at)))), toString(sum(score)), toString(ifNull(sum(ratio), 0))"
                + " FROM " + table + from);
    }

    /** Deletes a run's topic (its records would only fill the broker's disk); a failure is logged, not thrown. */
    void deleteTopic(String topic) {
        try {
            bench.admin.deleteTopics(List.of(topic)).all().get(60, java.util.concurrent.TimeUnit.SECONDS);
        } catch (Exception e) {
            BenchRunner.log("%s: could not delete topic %s: %s", slug, topic, e);
        }
    }

    /** One row of a ClickHouse query as strings, by position. */
    List<String> chRow(String sql) {
        GenericRecord r = bench.clickhouse.queryAll(sql).get(0);
        List<String> out = new ArrayList<>();
        for (int i = 1; i <= r.getSchema().getColumns().size(); i++) {
            out.add(r.getString(i));
        }
        return out;
    }

    /**
     * Fails unless two checksums (lists of numbers as text, named by {@code names}) agree: exactly, or within a
     * relative 1e-9 for the names marked {@code ~} (sums of doubles, added up in another order).
     */
    static void sameChecksum(String what, List<String> names, List<String> source, List<String> target) {
        List<String> differ = new ArrayList<>();
        for (int i = 0; i < names.size(); i++) {
            String name = names.get(i);
            BigDecimal a = new BigDecimal(source.get(i).trim());
            BigDecimal b = new BigDecimal(target.get(i).trim());
            boolean same = name.startsWith("~")
                    ? Math.abs(a.doubleValue() - b.doubleValue()) <= 1e-9 * Math.max(1, Math.abs(a.doubleValue()))
                    : a.compareTo(b) == 0;
            if (!same) {
                differ.add(name + ": source " + source.get(i) + ", ClickHouse " + target.get(i));
            }
        }
        if (!differ.isEmpty()) {
            throw new IllegalStateException(what + ": ClickHouse's rows differ from the source's: " + differ);
        }
    }

    /** A flight recording of the worker and of this JVM over one run, and each process's CPU then. */
    final class Profiling implements AutoCloseable {
        private final String name;
        private final Path workerJfr;
        private final Path selfJfr;
        private final Recording recording;
        private boolean stopped;

        Profiling(String name) throws Exception {
            this.name = name;
            Path dir = bench.workDir.resolve("jfr");
            Files.createDirectories(dir);
            this.workerJfr = dir.resolve(name + "-worker.jfr");
            this.selfJfr = dir.resolve(name + "-stack.jfr");
            Probe.startRecording(bench.workerPid, "bench-" + name);
            this.recording = new Recording(Configuration.getConfiguration("profile"));
            recording.start();
        }

        /** Stops the recordings and adds their summary to the report under {@code title}. */
        void report(String title, String cpuLine) throws Exception {
            stop();
            Probe.Profile worker = Probe.profile(workerJfr);
            Probe.Profile self = Probe.profile(selfJfr);
            StringBuilder md = new StringBuilder();
            md.append("**Profile of ").append(title).append("** (JDK Flight Recorder, `settings=profile`, on the worker and on the"
                    + " benchmark JVM, recorded during the second repetition's run (or the only one), which the tables include). ").append(cpuLine)
                    .append("\n\n");
            md.append(nextBottleneck(worker)).append("\n\n");
            md.append("Connect worker (").append(bench.root().relativize(workerJfr)).append("):\n\n").append(worker.markdown(10));
            md.append("Benchmark JVM: Kafka broker, S3 store, the ClickHouse engine's HTTP front; the engine's own work shows as"
                    + " native-method samples (").append(bench.root().relativize(selfJfr)).append("):\n\n").append(self.markdown(8));
            report.note(md.toString());
        }

        private void stop() throws Exception {
            if (!stopped) {
                stopped = true;
                recording.stop();
                recording.dump(selfJfr);
                recording.close();
                Probe.stopRecording(bench.workerPid, "bench-" + name, workerJfr);
            }
        }

        @Override
        public void close() throws Exception {
            stop();
        }
    }

    /** A sentence naming where the worker's samples went most: the thread group and the package of its top frames. */
    static String nextBottleneck(Probe.Profile worker) {
        if (worker.samples() == 0) {
            return "The worker's recording holds no execution samples.";
        }
        Map.Entry<String, Long> thread = worker.byThread().entrySet().iterator().next();
        Map.Entry<String, Long> pkg = worker.selfByPackage().entrySet().iterator().next();
        Map.Entry<String, Long> method = worker.self().entrySet().iterator().next();
        return String.format(Locale.ROOT, "In the worker, the busiest thread group is `%s` (%.0f %% of the Java samples); the"
                        + " package with the most self time is `%s` (%.0f %%), the hottest method `%s` (%.0f %%).",
                thread.getKey(), 100.0 * thread.getValue() / worker.samples(), pkg.getKey(), 100.0 * pkg.getValue() / worker.samples(),
                method.getKey(), 100.0 * method.getValue() / worker.samples());
    }
}
