package io.tablecdc.e2e.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The pipeline's initial copy with the Connect producer's batching overridden per connector
 * ({@code producer.override.linger.ms}, {@code producer.override.batch.size}, {@code producer.override.compression.type})
 * against the worker's defaults: the same table as suite 1 ({@link PgCopySuite}), one copy task with one connection,
 * timed from deploying the connector until the topic holds every row. The variants run in a rotated order in each
 * repetition; each run's rows per second is compared with the defaults' run of the same repetition (issue 20).
 * {@code CopyOverridesBench [rows] [reps]}.
 */
public final class CopyOverridesBench {
    private static final String DATABASE = "bench_overrides";
    private static final String TABLE = "bench.copy_src";
    private static final String PUBLICATION = "bench_overrides_pub";

    private CopyOverridesBench() {
    }

    public static void main(String[] args) throws Exception {
        int rows = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
        int reps = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        Map<String, Map<String, String>> variants = new LinkedHashMap<>();
        variants.put("worker defaults", Map.of());
        variants.put("linger.ms=20, batch.size=262144", Map.of("producer.override.linger.ms", "20",
                "producer.override.batch.size", "262144"));
        variants.put("linger.ms=20, batch.size=262144, lz4", Map.of("producer.override.linger.ms", "20",
                "producer.override.batch.size", "262144", "producer.override.compression.type", "lz4"));
        variants.put("linger.ms=20, batch.size=262144, zstd", Map.of("producer.override.linger.ms", "20",
                "producer.override.batch.size", "262144", "producer.override.compression.type", "zstd"));
        List<String> names = new ArrayList<>(variants.keySet());
        Map<String, double[]> rowsPerSecond = new LinkedHashMap<>();
        names.forEach(n -> rowsPerSecond.put(n, new double[reps]));
        int runs = 0;
        try (Bench bench = Bench.start(BenchOptions.parse(new String[] {"--copy-rows", Integer.toString(rows)}))) {
            String catalogUrl = bench.stack.postgres().createDatabase("bench_overrides_catalog");
            bench.stack.postgres().createDatabase(DATABASE);
            // suite 1's table
            bench.createPublishedTable(DATABASE, TABLE, PUBLICATION, Bench.PG_COPY_ROW, rows);
            for (int rep = 0; rep < reps; rep++) {
                for (int v = 0; v < names.size(); v++) {
                    String variant = names.get((v + rep) % names.size());
                    String name = "benchoverrides" + (++runs);
                    Map<String, String> config = bench.pgPipeline(DATABASE, catalogUrl, PUBLICATION, name, name);
                    config.put("table.sync.copy", "all");
                    config.put("tasks.max", "2");
                    config.put("copy.connections.per.table", "1");
                    // no sink runs here: the copy must not wait for batches to be normalized
                    config.put("max.unnormalized.batches", "1000000");
                    config.put("name", name);
                    config.putAll(variants.get(variant));
                    long start = System.nanoTime();
                    try {
                        bench.rest().putConfig(name, config);
                        bench.awaitRecords(name, List.of(name + "." + TABLE), rows, Duration.ofMinutes(30));
                    } finally {
                        bench.delete(name);
                        bench.dropSlots(DATABASE, name + "_");
                    }
                    double seconds = (System.nanoTime() - start) / 1e9;
                    rowsPerSecond.get(variant)[rep] = rows / seconds;
                    System.out.printf(Locale.ROOT, "rep %d, %s: %.1f s, %.0f rows/s%n", rep + 1, variant, seconds, rows / seconds);
                }
            }
        }
        System.out.println();
        System.out.printf(Locale.ROOT, "%d rows, 1 copy task, 1 connection, %d repetitions%n", rows, reps);
        System.out.println("| producer overrides | rows/s per repetition | median | median ratio vs worker defaults (per-run min–max) |");
        System.out.println("|---|---|---|---|");
        double[] base = rowsPerSecond.get(names.get(0));
        for (String variant : names) {
            double[] r = rowsPerSecond.get(variant);
            double[] ratios = new double[reps];
            for (int i = 0; i < reps; i++) {
                ratios[i] = r[i] / base[i];
            }
            double[] sortedRatios = ratios.clone();
            Arrays.sort(sortedRatios);
            System.out.printf(Locale.ROOT, "| %s | %s | %.0f | %.2f (%.2f–%.2f) |%n", variant,
                    String.join(", ", Arrays.stream(r).mapToObj(x -> String.format(Locale.ROOT, "%.0f", x)).toList()),
                    median(r), median(ratios), sortedRatios[0], sortedRatios[reps - 1]);
        }
        System.exit(0);
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted.length % 2 == 1 ? sorted[sorted.length / 2] : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2;
    }
}
