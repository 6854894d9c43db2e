package io.tablecdc.e2e.bench;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * The benchmark runner's options. Defaults are the sizes of issue #9 where it names them (1 M copied rows, 500 k
 * streamed changes, 1/10/50 tables), and sizes that keep one repetition of a suite within minutes on 2 shared cores
 * where it does not (500 k sink rows, 200 rows per query CDC table); {@code --quick} switches every size to a small
 * one for development (and writes its report under bench/target/bench-report unless --out is given).
 */
public final class BenchOptions {
    public static final List<String> SUITES = List.of("pg-copy", "pg-stream", "sink", "query-cdc", "e2e-pg", "e2e-query");
    public static final List<String> SINK_VARIANTS = List.of("pull:zstandard", "pull:snappy", "pull:deflate", "pull:null",
            "push:zstandard", "push:snappy", "push:deflate", "push:null", "pull:zstandard:avro", "push:zstandard:avro",
            "pull:zstandard:avro:strings", "push:zstandard:avro:strings", "pull:zstandard:blocks", "push:zstandard:blocks");
    /**
     * The record paths of suite 6: JSON with schemas and the worker's producer defaults; Apicurio's Avro converter
     * with a schema registry; the same with the producer overrides recommended for copies; block records
     * ({@code record.format=blocks}) with ByteArrayConverter and those overrides.
     */
    public static final List<String> E2E_PATHS = List.of("json", "avro", "avro-tuned", "blocks");

    final List<String> args;
    Set<String> suites = new LinkedHashSet<>(SUITES);
    int reps = 3;
    boolean quick;
    boolean profile = true;
    Path out;
    String workerHeap = "1536m";
    int budgetMinutes;
    int sinkRows = 500_000;
    int sinkBatchRows = 50_000;
    List<String> sinkVariants = SINK_VARIANTS;
    int copyRows = 1_000_000;
    int streamChanges = 500_000;
    int streamTables = 10;
    int latencySamples = 10;
    List<Integer> qcdcTables = List.of(1, 10, 50);
    int qcdcRowsPerTable = 200;
    long qcdcIntervalMs = 5_000;
    int e2eRows = 1_000_000;
    int e2eChanges = 500_000;
    List<String> e2ePaths = E2E_PATHS;
    int e2eQueryRows = 1_000_000;
    int qcdcSteadySeconds = 20;

    private BenchOptions(List<String> args) {
        this.args = args;
    }

    public static String usage() {
        return """
                scripts/bench.sh [options]
                  --suites LIST          comma-separated, of: pg-copy, pg-stream, sink, query-cdc (query-cdc also measures
                                         memory, suite 5), e2e-pg, e2e-query; default all. Sections of suites not run
                                         are kept from the report already in the output folder
                  --reps N               repetitions of every variant and its baseline (default 3)
                  --quick                small sizes for development; the report goes to bench/target/bench-report
                  --out DIR              folder of benchmarks.md and benchmarks/*.png (default docs)
                  --no-profile           skip the flight recordings of the sink suite
                  --sink-rows N          rows through the sink (500000)       --sink-batch-rows N   rows per batch (50000)
                  --sink-variants LIST   mode:codec[:avro[:strings]|:blocks] entries (all 14 by default), e.g.
                                         pull:zstandard, push:null, pull:zstandard:avro (records written and read by
                                         the Avro converter), pull:zstandard:avro:strings (and header.converter=
                                         StringConverter), pull:zstandard:blocks (block records, ByteArrayConverter)
                  --copy-rows N          rows of the copied table (1000000)
                  --stream-changes N     changes of the streaming suite (500000)   --stream-tables N  tables (10)
                  --latency-samples N    single-change latency samples per run (10)
                  --qcdc-tables LIST     table counts of the query CDC suite (1,10,50)
                  --qcdc-rows N          rows per table loaded by query CDC (200)
                  --qcdc-interval-ms N   sync.interval.ms (5000)     --qcdc-steady-seconds N  idle window measured (20)
                  --e2e-rows N           rows of the end-to-end Postgres table (1000000)
                  --e2e-changes N        changes of the end-to-end streaming workload (500000)
                  --e2e-paths LIST       record paths of the end-to-end Postgres suite, of: json (JsonConverter with
                                         schemas), avro (Apicurio's Avro converter and schema registry), avro-tuned
                                         (avro and the copy's producer overrides), blocks (record.format=blocks,
                                         ByteArrayConverter, the producer overrides); default all
                  --e2e-query-rows N     rows of the end-to-end BigQuery table (1000000)
                  --worker-heap SIZE     -Xmx of the Connect worker (1536m)
                  --budget-minutes N     share N minutes among the suites: a suite starts no further repetition once
                                         its share is spent (its first always runs); default no limit
                """;
    }

    public static BenchOptions parse(String[] argv) {
        BenchOptions o = new BenchOptions(List.of(argv));
        List<String> a = Arrays.asList(argv);
        if (a.contains("--quick")) {
            o.quick = true;
            o.sinkRows = 20_000;
            o.sinkBatchRows = 5_000;
            o.copyRows = 20_000;
            o.streamChanges = 20_000;
            o.latencySamples = 5;
            o.qcdcTables = List.of(1, 5);
            o.qcdcRowsPerTable = 100;
            o.qcdcSteadySeconds = 8;
            o.e2eRows = 20_000;
            o.e2eChanges = 10_000;
            o.e2eQueryRows = 10_000;
            o.reps = 2;
        }
        for (int i = 0; i < argv.length; i++) {
            String arg = argv[i];
            switch (arg) {
                case "--quick" -> { }
                case "--no-profile" -> o.profile = false;
                case "--help", "-h" -> throw new IllegalArgumentException(usage());
                default -> {
                    if (i + 1 >= argv.length) {
                        throw new IllegalArgumentException("option " + arg + " needs a value (or is unknown)\n" + usage());
                    }
                    String v = argv[++i];
                    switch (arg) {
                        case "--suites" -> o.suites = suites(v);
                        case "--reps" -> o.reps = positive(arg, v);
                        case "--out" -> o.out = Path.of(v);
                        case "--sink-rows" -> o.sinkRows = positive(arg, v);
                        case "--sink-batch-rows" -> o.sinkBatchRows = positive(arg, v);
                        case "--sink-variants" -> o.sinkVariants = sinkVariants(v);
                        case "--copy-rows" -> o.copyRows = positive(arg, v);
                        case "--stream-changes" -> o.streamChanges = positive(arg, v);
                        case "--stream-tables" -> o.streamTables = positive(arg, v);
                        case "--latency-samples" -> o.latencySamples = positive(arg, v);
                        case "--qcdc-tables" -> o.qcdcTables = Arrays.stream(v.split(",")).map(s -> positive(arg, s.trim())).toList();
                        case "--qcdc-rows" -> o.qcdcRowsPerTable = positive(arg, v);
                        case "--qcdc-interval-ms" -> o.qcdcIntervalMs = positive(arg, v);
                        case "--qcdc-steady-seconds" -> o.qcdcSteadySeconds = positive(arg, v);
                        case "--e2e-rows" -> o.e2eRows = positive(arg, v);
                        case "--e2e-changes" -> o.e2eChanges = positive(arg, v);
                        case "--e2e-paths" -> o.e2ePaths = e2ePaths(v);
                        case "--e2e-query-rows" -> o.e2eQueryRows = positive(arg, v);
                        case "--worker-heap" -> o.workerHeap = v;
                        case "--budget-minutes" -> o.budgetMinutes = positive(arg, v);
                        default -> throw new IllegalArgumentException("unknown option " + arg + "\n" + usage());
                    }
                }
            }
        }
        if (o.e2eChanges < 10) {
            throw new IllegalArgumentException("--e2e-changes must be at least 10");
        }
        if (o.streamChanges < o.streamTables * 10) {
            throw new IllegalArgumentException("--stream-changes must be at least 10 per table");
        }
        return o;
    }

    private static Set<String> suites(String v) {
        Set<String> out = new LinkedHashSet<>();
        for (String s : v.split(",")) {
            String name = s.trim().equals("memory") ? "query-cdc" : s.trim();
            if (!SUITES.contains(name)) {
                throw new IllegalArgumentException("unknown suite " + s + "; suites are " + SUITES + " (memory runs with query-cdc)");
            }
            out.add(name);
        }
        // keep the report's order whatever the order given
        Set<String> ordered = new LinkedHashSet<>();
        for (String s : SUITES) {
            if (out.contains(s)) {
                ordered.add(s);
            }
        }
        return ordered;
    }

    private static List<String> sinkVariants(String v) {
        return oneOf(v, SINK_VARIANTS, "sink variant");
    }

    private static List<String> e2ePaths(String v) {
        return oneOf(v, E2E_PATHS, "record path");
    }

    /** The comma-separated entries of {@code v}, each one of {@code allowed}. */
    private static List<String> oneOf(String v, List<String> allowed, String what) {
        List<String> out = new ArrayList<>();
        for (String s : v.split(",")) {
            if (!allowed.contains(s.trim())) {
                throw new IllegalArgumentException("unknown " + what + " " + s + "; they are " + allowed);
            }
            out.add(s.trim());
        }
        return out;
    }

    /** Whether a suite that runs uses the schema registry. */
    boolean needsRegistry() {
        return suites.contains("e2e-pg") && e2ePaths.stream().anyMatch(p -> p.startsWith("avro"))
                || suites.contains("sink") && sinkVariants.stream().anyMatch(v -> v.contains(":avro"));
    }

    private static int positive(String option, String v) {
        try {
            int n = Integer.parseInt(v);
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException notANumber) {
            // reported below
        }
        throw new IllegalArgumentException(option + " takes a positive whole number, not " + v);
    }

    /** The command line as given, for the report. */
    public String command() {
        return ("scripts/bench.sh " + String.join(" ", args)).trim();
    }
}
