package io.tablecdc.e2e.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

import io.tablecdc.e2e.stack.StackPaths;

/**
 * The benchmark runner behind {@code scripts/bench.sh}: starts the local stack and one Connect worker process, runs
 * the chosen suites, each variant next to its baseline in every repetition, and writes {@code benchmarks.md} with a
 * table and a PNG chart per measure. A suite that fails is reported as failed; the others still run.
 */
public final class BenchRunner {
    private BenchRunner() {
    }

    static void log(String format, Object... args) {
        System.out.printf(Locale.ROOT, "%s  %s%n", Instant.now().truncatedTo(ChronoUnit.SECONDS), String.format(Locale.ROOT, format, args));
        System.out.flush();
    }

    public static void main(String[] argv) throws Exception {
        System.setProperty("java.awt.headless", "true");
        BenchOptions options;
        try {
            options = BenchOptions.parse(argv);
        } catch (IllegalArgumentException e) {
            System.err.println(e.getMessage());
            System.exit(2);
            return;
        }
        Path root = StackPaths.projectRoot();
        Path out = options.out != null ? options.out : options.quick ? root.resolve("bench/target/bench-report") : root.resolve("docs");
        if (!out.isAbsolute()) {
            out = root.resolve(out);
        }
        Instant started = Instant.now();
        String machineBefore = machine();
        List<SuiteReport> reports = new ArrayList<>();
        List<String> failures = new ArrayList<>();
        try (Bench bench = Bench.start(options)) {
            log("stack up; worker pid %d; Debezium plugin %s", bench.workerPid, bench.debezium ? "present" : "absent");
            long budgetEnd = started.toEpochMilli() + options.budgetMinutes * 60_000L;
            int left = options.suites.size();
            for (String suite : options.suites) {
                long t0 = System.nanoTime();
                if (options.budgetMinutes > 0) {
                    // an equal share of what is left, so an early suite that overran does not starve the others of their first run
                    bench.suiteBudget(Math.max(0, budgetEnd - System.currentTimeMillis()) * 1_000_000L / left);
                }
                left--;
                try {
                    switch (suite) {
                        case "pg-copy" -> reports.add(new PgCopySuite(bench).run());
                        case "pg-stream" -> reports.add(new PgStreamSuite(bench).run());
                        case "sink" -> reports.add(new SinkSuite(bench).run());
                        case "query-cdc" -> reports.addAll(new QueryCdcSuite(bench).run());
                        case "e2e-pg" -> reports.add(new E2ePgSuite(bench).run());
                        case "e2e-query" -> reports.add(new E2eQuerySuite(bench).run());
                        default -> throw new IllegalArgumentException(suite);
                    }
                } catch (Exception | AssertionError e) {
                    log("suite %s failed: %s", suite, e);
                    e.printStackTrace(System.out);
                    failures.add(suite + ": " + e.toString().replace('\n', ' '));
                }
                log("suite %s took %.0f s", suite, (System.nanoTime() - t0) / 1e9);
                // written after every suite, so that an interrupted run still leaves the suites it finished
                write(options, reports, failures, started, machineBefore, out, root);
            }
        }
        write(options, reports, failures, started, machineBefore, out, root);
        System.exit(failures.isEmpty() ? 0 : 1);
    }

    private static void write(BenchOptions options, List<SuiteReport> reports, List<String> failures, Instant started,
                              String machineBefore, Path out, Path root) throws IOException {
        Path file = out.resolve("benchmarks.md");
        String previous = Files.exists(file) ? Files.readString(file, StandardCharsets.UTF_8) : null;
        String doc = document(options, reports, failures, started, Instant.now(), machineBefore, machine(), out, root, previous);
        Files.createDirectories(out.resolve("benchmarks"));
        for (SuiteReport r : reports) {
            for (Measure m : r.measures()) {
                BarChart.write(m, out.resolve("benchmarks").resolve(m.slug() + ".png"));
            }
        }
        Files.writeString(file, doc, StandardCharsets.UTF_8);
        log("wrote %s", out.resolve("benchmarks.md"));
    }

    /**
     * The report: how it was produced, the machine, then each suite's tables, charts and notes, each section opened by
     * a line naming its run. The sections of {@code previous} (the report already in the output folder, or null) whose
     * suites this run did not measure are kept, with their own run lines, in the order of their numbers.
     */
    static String document(BenchOptions options, List<SuiteReport> reports, List<String> failures, Instant started, Instant ended,
                           String machineBefore, String machineAfter, Path out, Path root, String previous) throws IOException {
        StringBuilder md = new StringBuilder();
        md.append("# Benchmarks\n\n");
        md.append("<!-- generated by scripts/bench.sh (io.tablecdc.e2e.bench.BenchRunner); the reading at the end is kept from"
                + " docs/benchmarks/reading.md -->\n\n");
        md.append("Produced by:\n\n```\n").append(options.command()).append("\n```\n\n");
        md.append(String.format(Locale.ROOT, "Run from %s to %s (%d min), %d repetition%s of every variant. Each repetition measures"
                        + " the baseline and every variant one after another on the same local stack, so **ratios pair a variant"
                        + " with the baseline of the same repetition**; the tables give min, median and max over the repetitions"
                        + " and the median of those per-repetition ratios (with their spread). Charts: bar = median, whisker ="
                        + " min–max.%n%n", started.truncatedTo(ChronoUnit.SECONDS), ended.truncatedTo(ChronoUnit.SECONDS),
                java.time.Duration.between(started, ended).toMinutes(), options.reps, options.reps == 1 ? "" : "s"));
        md.append("Machine: ").append(platform()).append("; at the start: ").append(machineBefore).append("; at the end: ")
                .append(machineAfter).append(". Absolute figures depend on that load; each ratio pairs a variant with its")
                .append(" baseline of the same repetition. Kafka, the S3 store and the ClickHouse engine (chDB) run inside the")
                .append(" benchmark's JVM, Postgres as its own server, the Connect worker as its own JVM (the one measured and")
                .append(" profiled).\n\n");
        if (!failures.isEmpty()) {
            md.append("**Suites that failed in this run** (a section of theirs below is from an earlier run):\n\n");
            for (String f : failures) {
                md.append("- ").append(f).append('\n');
            }
            md.append('\n');
        }
        String runLine = String.format(Locale.ROOT, "%s %s to %s, `%s`, %d repetition%s; load average at the start %s, at the end %s._",
                RUN_LINE, started.truncatedTo(ChronoUnit.SECONDS), ended.truncatedTo(ChronoUnit.SECONDS), options.command(),
                options.reps, options.reps == 1 ? "" : "s", loadAverage(machineBefore), loadAverage(machineAfter));
        List<Section> fresh = new ArrayList<>();
        for (SuiteReport r : reports) {
            StringBuilder section = new StringBuilder();
            section.append(runLine).append("\n\n").append(r.description()).append("\n\n");
            for (Measure m : r.measures()) {
                section.append("### ").append(m.title()).append(" (").append(m.unit()).append(", ")
                        .append(m.higherIsBetter() ? "higher is better" : "lower is better").append(")\n\n");
                section.append(m.markdown()).append('\n');
                section.append("![").append(m.title()).append("](benchmarks/").append(m.slug()).append(".png)\n\n");
            }
            for (String note : r.notes()) {
                section.append(note).append("\n\n");
            }
            fresh.add(new Section(r.title(), section.toString()));
        }
        List<Section> sections = merge(previous == null ? List.of() : sections(previous), fresh);
        if (sections.size() > fresh.size()) {
            md.append("Sections of suites this run did not measure are kept from the report that was in the output folder;"
                    + " the first line of every section names the run that measured it.\n\n");
        }
        for (Section section : sections) {
            md.append("## ").append(section.title()).append("\n\n").append(section.body().strip()).append("\n\n");
        }
        Path reading = out.resolve("benchmarks").resolve("reading.md");
        if (Files.exists(reading)) {
            md.append(Files.readString(reading, StandardCharsets.UTF_8).strip()).append('\n');
        }
        return md.toString();
    }

    /** The first line of a section generated by this runner: which run measured it. */
    static final String RUN_LINE = "_Run:";

    /** A report's section: its title (the heading without {@code ## }) and what follows up to the next one. */
    record Section(String title, String body) {
    }

    /** The sections of a report (the part before the first {@code ## } heading left out). */
    static List<Section> sections(String doc) {
        List<Section> out = new ArrayList<>();
        String title = null;
        StringBuilder body = new StringBuilder();
        boolean fence = false;
        for (String line : doc.split("\n", -1)) {
            if (line.startsWith("```")) {
                fence = !fence;
            }
            if (!fence && line.startsWith("## ")) {
                if (title != null) {
                    out.add(new Section(title, body.toString()));
                }
                title = line.substring(3).trim();
                body.setLength(0);
            } else if (title != null) {
                body.append(line).append('\n');
            }
        }
        if (title != null) {
            out.add(new Section(title, body.toString()));
        }
        return out;
    }

    /**
     * This run's sections and the previous report's sections of suites not run now (the reading, regenerated from
     * docs/benchmarks/reading.md, left out), ordered by the number their titles start with; a kept section without a
     * run line gets one saying its run was not recorded.
     */
    static List<Section> merge(List<Section> previous, List<Section> fresh) {
        java.util.Set<String> now = new java.util.HashSet<>();
        fresh.forEach(f -> now.add(f.title()));
        List<Section> out = new ArrayList<>(fresh);
        for (Section p : previous) {
            if (now.contains(p.title()) || p.title().equals("Reading")) {
                continue;
            }
            String body = p.body().strip();
            if (!body.startsWith(RUN_LINE)) {
                body = RUN_LINE + " kept from an earlier report, which did not name the run of each section._\n\n" + body;
            }
            out.add(new Section(p.title(), body));
        }
        out.sort(java.util.Comparator.comparingInt(BenchRunner::number));
        return out;
    }

    /** The number a section's title starts with ("6. End to end" is 6); sections without one go last. */
    static int number(Section s) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("^(\\d+)\\.").matcher(s.title());
        return m.find() ? Integer.parseInt(m.group(1)) : Integer.MAX_VALUE;
    }

    /** The load average in a {@link #machine()} line, or "unknown". */
    static String loadAverage(String machine) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("load average ([0-9.]+)").matcher(machine);
        return m.find() ? m.group(1) : "unknown";
    }

    /** Operating system, architecture, CPU model, memory and JVM, as one line: what the figures were measured on. */
    static String platform() {
        StringBuilder s = new StringBuilder();
        s.append(System.getProperty("os.name")).append(' ').append(System.getProperty("os.arch"));
        try {
            Files.readAllLines(Path.of("/proc/cpuinfo")).stream().filter(l -> l.startsWith("model name")).findFirst()
                    .ifPresent(l -> s.append(", ").append(l.substring(l.indexOf(':') + 1).trim()));
            Files.readAllLines(Path.of("/proc/meminfo")).stream().filter(l -> l.startsWith("MemTotal:")).findFirst()
                    .ifPresent(l -> s.append(String.format(Locale.ROOT, ", %.1f GiB memory",
                            Long.parseLong(l.replaceAll("[^0-9]", "")) / 1024.0 / 1024.0)));
        } catch (IOException | RuntimeException unavailable) {
            // not Linux: the OS and architecture above stay
        }
        s.append(", Java ").append(System.getProperty("java.vendor")).append(' ').append(Runtime.version());
        return s.toString();
    }

    /** Cores, load average and the busiest processes, as one line. */
    static String machine() {
        StringBuilder s = new StringBuilder();
        s.append(Runtime.getRuntime().availableProcessors()).append(" cores");
        try {
            String load = Files.readString(Path.of("/proc/loadavg")).trim().split(" ", 4)[0];
            s.append(", load average ").append(load);
            Process ps = new ProcessBuilder("ps", "-eo", "pcpu,comm", "--sort=-pcpu").redirectErrorStream(true).start();
            List<String> lines = new String(ps.getInputStream().readAllBytes(), StandardCharsets.UTF_8).lines().skip(1).limit(4).toList();
            ps.waitFor(10, TimeUnit.SECONDS);
            s.append(", busiest processes (%CPU since start) ").append(String.join(", ", lines.stream().map(String::trim).toList()));
        } catch (IOException | RuntimeException | InterruptedException unavailable) {
            s.append(", load unknown");
        }
        return s.toString();
    }
}
