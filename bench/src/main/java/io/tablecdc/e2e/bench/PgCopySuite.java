package io.tablecdc.e2e.bench;

import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.postgresql.PGConnection;

import io.tablecdc.e2e.stack.ConnectRestClient;

/**
 * Suite 1: the initial copy of one 10-column Postgres table into Kafka. tablecdc's copy tasks (1 and 2 tasks, 1 and 2
 * connections per table) and Debezium's initial snapshot, against {@code COPY … TO STDOUT} read by this JVM into
 * nothing, the ceiling of reading the table on this machine.
 */
final class PgCopySuite {
    static final String DATABASE = "bench_pg";
    private static final String BASELINE = "COPY TO STDOUT into /dev/null";
    private static final String DEBEZIUM = "Debezium 3.6.1 initial snapshot";
    private static final String TABLE = "bench.copy_src";
    private static final String PUBLICATION = "bench_copy_pub";

    private final Bench bench;
    private final SuiteReport report;
    private final Measure rowsPerSecond;
    private final String catalogUrl;
    private int runs;

    PgCopySuite(Bench bench) throws Exception {
        this.bench = bench;
        BenchOptions o = bench.options;
        this.report = new SuiteReport("pg-copy", "1. Postgres initial copy into Kafka", String.format(Locale.ROOT,
                "One table `%s` of %d rows and 10 columns (bigint key, 3 texts, 2 doubles, bigint, int, numeric(18,2),"
                        + " timestamptz), copied into a one-partition Kafka topic by a connector on the benchmark's Connect"
                        + " worker (JsonConverter with schemas for every connector); the time from deploying the connector until"
                        + " the topic holds every row. The baseline reads the same table with `COPY … TO STDOUT` (text format)"
                        + " into a discarding stream in the benchmark JVM: the fastest the rows leave Postgres here.",
                TABLE, o.copyRows));
        this.rowsPerSecond = report.measure(new Measure("pg-copy-rows-per-second", "Postgres initial copy: rows per second",
                "rows/s", true, BASELINE));
        rowsPerSecond.declare(BASELINE);
        for (int tasks : new int[] {1, 2}) {
            for (int connections : new int[] {1, 2}) {
                rowsPerSecond.declare(tablecdcName(tasks, connections));
            }
        }
        rowsPerSecond.declare(DEBEZIUM);
        this.catalogUrl = bench.stack.postgres().createDatabase("bench_pg_catalog");
    }

    private static String tablecdcName(int tasks, int connections) {
        return "tablecdc, " + tasks + " copy task" + (tasks > 1 ? "s" : "") + ", " + connections + " connection"
                + (connections > 1 ? "s" : "") + " per table";
    }

    SuiteReport run() throws Exception {
        BenchOptions o = bench.options;
        bench.stack.postgres().createDatabase(DATABASE);
        long t0 = System.nanoTime();
        bench.createPublishedTable(DATABASE, TABLE, PUBLICATION, Bench.PG_COPY_ROW, o.copyRows);
        BenchRunner.log("pg-copy: %d rows loaded in %.1f s", o.copyRows, (System.nanoTime() - t0) / 1e9);
        String unavailable = tablecdcUnavailable();
        for (int rep = 0; rep < o.reps && bench.startRepetition(report, rep); rep++) {
            double base = copyOut();
            rowsPerSecond.add(BASELINE, rep, o.copyRows / base);
            BenchRunner.log("pg-copy run %d: %s %.1f s", rep + 1, BASELINE, base);
            for (int tasks : new int[] {1, 2}) {
                for (int connections : new int[] {1, 2}) {
                    String name = tablecdcName(tasks, connections);
                    if (unavailable != null) {
                        rowsPerSecond.skip(name, "not available in this build (the connector's validate() refuses"
                                + " table.sync.copy=all, see below)");
                        continue;
                    }
                    try {
                        double seconds = tablecdc(tasks, connections);
                        rowsPerSecond.add(name, rep, o.copyRows / seconds);
                        BenchRunner.log("pg-copy run %d: %s %.1f s", rep + 1, name, seconds);
                    } catch (Exception e) {
                        failed(name, e);
                    }
                }
            }
            if (!bench.debezium) {
                rowsPerSecond.skip(DEBEZIUM, "the Debezium plugin is not in " + Bench.DEBEZIUM_PLUGIN_DIR + " (scripts/bench.sh resolves it)");
            } else {
                try {
                    double seconds = debezium();
                    rowsPerSecond.add(DEBEZIUM, rep, o.copyRows / seconds);
                    BenchRunner.log("pg-copy run %d: %s %.1f s", rep + 1, DEBEZIUM, seconds);
                } catch (Exception e) {
                    failed(DEBEZIUM, e);
                }
            }
        }
        if (unavailable != null) {
            report.note("tablecdc's copy variants: not available in this build — the connector's validate() refuses"
                    + " `table.sync.copy=all`: " + unavailable);
        } else if (o.profile) {
            try {
                profile(1, 1);
            } catch (Exception e) {
                BenchRunner.log("pg-copy profile failed: %s", e);
            }
        }
        return report;
    }

    /**
     * One more run of a tablecdc variant (not counted in the table) with a flight recording of the Connect worker and
     * the CPU time of the worker and of Postgres: where one copy task's time goes.
     */
    private void profile(int tasks, int connections) throws Exception {
        Path dir = bench.workDir.resolve("jfr");
        Files.createDirectories(dir);
        Path workerJfr = dir.resolve("pg-copy-worker.jfr");
        double w0 = Probe.cpuSeconds(bench.workerPid);
        double s0 = Probe.cpuSeconds(ProcessHandle.current().pid());
        Probe.startRecording(bench.workerPid, "bench-pg-copy");
        double seconds = tablecdc(tasks, connections);
        Probe.stopRecording(bench.workerPid, "bench-pg-copy", workerJfr);
        double w = Probe.cpuSeconds(bench.workerPid) - w0;
        double s = Probe.cpuSeconds(ProcessHandle.current().pid()) - s0;
        Probe.Profile profile = Probe.profile(workerJfr);
        report.note(String.format(Locale.ROOT, "**Profile of %s** (one extra run with JDK Flight Recorder, `settings=profile`,"
                + " on the Connect worker; not counted in the table): %.1f s wall for %d rows. CPU seconds used meanwhile:"
                + " Connect worker %.1f, the benchmark JVM (Kafka broker and the rest of the stack) %.1f.%n%n",
                tablecdcName(tasks, connections), seconds, bench.options.copyRows, w, s)
                + "Connect worker (" + bench.root().relativize(workerJfr) + "):\n\n" + profile.markdown(12));
        BenchRunner.log("pg-copy profile: %.1f s, worker CPU %.1f s, stack JVM CPU %.1f s", seconds, w, s);
    }

    private void failed(String variant, Exception e) {
        BenchRunner.log("pg-copy: %s failed: %s", variant, e);
        rowsPerSecond.skip(variant, "failed: " + Bench.firstLine(e.getMessage() == null ? e.toString() : e.getMessage()));
    }

    private double copyOut() throws Exception {
        try (Connection c = bench.stack.postgres().connect(DATABASE)) {
            long start = System.nanoTime();
            long rows = c.unwrap(PGConnection.class).getCopyAPI().copyOut("COPY " + TABLE + " TO STDOUT", OutputStream.nullOutputStream());
            double seconds = (System.nanoTime() - start) / 1e9;
            if (rows != bench.options.copyRows) {
                throw new IllegalStateException("COPY returned " + rows + " rows, not " + bench.options.copyRows);
            }
            return seconds;
        }
    }

    private Map<String, String> tablecdcConfig(String name, int tasks, int connections) {
        Map<String, String> config = bench.pgPipeline(DATABASE, catalogUrl, PUBLICATION, name.replace('-', '_'), name);
        config.put("table.sync.copy", "all");
        config.put("tasks.max", Integer.toString(1 + tasks));
        config.put("copy.connections.per.table", Integer.toString(connections));
        // this suite runs no sink: a copy waiting for its batches to be normalized (100 by default) would wait for good
        config.put("max.unnormalized.batches", "1000000");
        config.put("name", name);
        return config;
    }

    /** Null when this build's pipeline source accepts a copying config, else the reasons it gives. */
    private String tablecdcUnavailable() {
        Map<String, String> config = tablecdcConfig("benchcopyprobe", 1, 1);
        List<String> errors = ConnectRestClient.validationErrors(bench.rest().validate(config.get("connector.class"), config));
        return errors.isEmpty() ? null : String.join("; ", errors);
    }

    private double tablecdc(int tasks, int connections) throws Exception {
        String name = "benchcopy" + (++runs);
        Map<String, String> config = tablecdcConfig(name, tasks, connections);
        long start = System.nanoTime();
        try {
            bench.rest().putConfig(name, config);
            bench.awaitRecords(name, List.of(name + "." + TABLE), bench.options.copyRows, Duration.ofMinutes(30));
            return (System.nanoTime() - start) / 1e9;
        } finally {
            bench.delete(name);
            bench.dropSlots(DATABASE, name + "_");
        }
    }

    private double debezium() throws Exception {
        String name = "dbzcopy" + (++runs);
        Map<String, String> config = bench.debezium(DATABASE, PUBLICATION, name, name, TABLE, "initial");
        long start = System.nanoTime();
        try {
            bench.rest().putConfig(name, config);
            bench.awaitRecords(name, List.of(name + "." + TABLE), bench.options.copyRows, Duration.ofMinutes(30));
            return (System.nanoTime() - start) / 1e9;
        } finally {
            bench.delete(name);
            bench.dropSlots(DATABASE, name);
        }
    }
}
