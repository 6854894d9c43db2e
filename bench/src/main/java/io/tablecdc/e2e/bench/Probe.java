package io.tablecdc.e2e.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordingFile;

/**
 * What the benchmarks read off processes: CPU time from /proc, the heap after a full GC and flight recordings
 * through jcmd, and a summary of a recording's execution samples.
 */
public final class Probe {
    private static final Pattern HEAP_USED = Pattern.compile("used (\\d+)K");
    private static final long TICKS_PER_SECOND = 100;

    private Probe() {
    }

    /**
     * CPU seconds (user + system) a process has used so far, with those of its children that it has reaped (a
     * Postgres postmaster collects its finished backends' time that way); 0 when the process is gone.
     */
    public static double cpuSeconds(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
            // the command name in parentheses may hold spaces: count fields after the closing parenthesis
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            long ticks = Long.parseLong(f[11]) + Long.parseLong(f[12]) + Long.parseLong(f[13]) + Long.parseLong(f[14]);
            return ticks / (double) TICKS_PER_SECOND;
        } catch (IOException | RuntimeException gone) {
            return 0;
        }
    }

    /** CPU seconds of a process and all its live descendants (a Postgres server and its backends). */
    public static double treeCpuSeconds(long pid) {
        double total = cpuSeconds(pid);
        for (long child : descendants(pid)) {
            total += cpuSeconds(child);
        }
        return total;
    }

    private static List<Long> descendants(long pid) {
        List<Long> out = new ArrayList<>();
        ProcessHandle.of(pid).ifPresent(p -> p.descendants().forEach(d -> out.add(d.pid())));
        return out;
    }

    /** Runs a full GC in a JVM and returns its used heap afterwards in MiB. */
    public static double heapAfterGcMb(long pid) throws IOException, InterruptedException {
        jcmd(pid, "GC.run");
        String info = jcmd(pid, "GC.heap_info");
        Matcher m = HEAP_USED.matcher(info);
        if (!m.find()) {
            throw new IllegalStateException("jcmd GC.heap_info of " + pid + " printed no used heap: " + info);
        }
        return Long.parseLong(m.group(1)) / 1024.0;
    }

    public static void startRecording(long pid, String name) throws IOException, InterruptedException {
        jcmd(pid, "JFR.start", "name=" + name, "settings=profile");
    }

    public static void stopRecording(long pid, String name, Path file) throws IOException, InterruptedException {
        Files.createDirectories(file.toAbsolutePath().getParent());
        jcmd(pid, "JFR.stop", "name=" + name, "filename=" + file.toAbsolutePath());
    }

    public static String jcmd(long pid, String... command) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "jcmd").toString());
        cmd.add(Long.toString(pid));
        cmd.addAll(List.of(command));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IllegalStateException(String.join(" ", cmd) + " failed: " + new String(out, StandardCharsets.UTF_8));
        }
        return new String(out, StandardCharsets.UTF_8);
    }

    /** The execution samples of a recording: per-thread-group counts and the hottest methods, self and total. */
    public record Profile(long samples, long nativeSamples, Map<String, Long> byThread, Map<String, Long> self,
                          Map<String, Long> selfByPackage, Map<String, Long> total, Map<String, Long> nativeTop) {
        /** A markdown summary with the {@code top} methods of each kind. */
        public String markdown(int top) {
            StringBuilder md = new StringBuilder();
            md.append(String.format(Locale.ROOT, "%d Java execution samples, %d native-method samples (threads blocked in"
                    + " native code: sockets, the engine's calls).%n%n", samples, nativeSamples));
            md.append(table("threads (by name, digits folded)", byThread, samples, top));
            md.append(table("self time by package (top frame's package)", selfByPackage, samples, top));
            md.append(table("hottest methods, self (top frame)", self, samples, top));
            md.append(table("hottest methods, total (anywhere on the stack; JDK and Connect runtime plumbing left out)", total,
                    samples, top));
            if (!nativeTop.isEmpty()) {
                md.append(table("native-method samples, top Java frame (idle socket waits left out)", nativeTop, nativeSamples,
                        Math.min(top, 8)));
            }
            return md.toString();
        }

        private static String table(String title, Map<String, Long> counts, long of, int top) {
            StringBuilder md = new StringBuilder("| ").append(title).append(" | samples | share |\n|---|---|---|\n");
            counts.entrySet().stream().sorted(Map.Entry.<String, Long>comparingByValue().reversed()).limit(top)
                    .forEach(e -> md.append("| `").append(e.getKey().replace('|', '/')).append("` | ").append(e.getValue())
                            .append(" | ").append(String.format(Locale.ROOT, "%.1f %%", 100.0 * e.getValue() / Math.max(1, of)))
                            .append(" |\n"));
            return md.append('\n').toString();
        }
    }

    public static Profile profile(Path recording) throws IOException {
        long samples = 0;
        long nativeSamples = 0;
        Map<String, Long> byThread = new HashMap<>();
        Map<String, Long> self = new HashMap<>();
        Map<String, Long> selfByPackage = new HashMap<>();
        Map<String, Long> total = new HashMap<>();
        Map<String, Long> nativeTop = new HashMap<>();
        try (RecordingFile file = new RecordingFile(recording)) {
            while (file.hasMoreEvents()) {
                RecordedEvent e = file.readEvent();
                String type = e.getEventType().getName();
                boolean execution = type.equals("jdk.ExecutionSample");
                if (!execution && !type.equals("jdk.NativeMethodSample")) {
                    continue;
                }
                RecordedStackTrace stack = e.getStackTrace();
                if (stack == null || stack.getFrames().isEmpty()) {
                    continue;
                }
                List<RecordedFrame> frames = stack.getFrames();
                if (!execution) {
                    nativeSamples++;
                    String top = method(frames.get(0));
                    if (!IDLE_NATIVE.contains(top)) {
                        nativeTop.merge(top, 1L, Long::sum);
                    }
                    continue;
                }
                samples++;
                String thread = e.getThread("sampledThread") == null ? "?" : e.getThread("sampledThread").getJavaName();
                byThread.merge(thread == null ? "?" : thread.replaceAll("\\d+", "N"), 1L, Long::sum);
                self.merge(method(frames.get(0)), 1L, Long::sum);
                selfByPackage.merge(packageOf(frames.get(0)), 1L, Long::sum);
                Set<String> seen = new HashSet<>();
                for (RecordedFrame f : frames) {
                    String m = method(f);
                    if (!plumbing(m) && seen.add(m)) {
                        total.merge(m, 1L, Long::sum);
                    }
                }
            }
        }
        return new Profile(samples, nativeSamples, sorted(byThread), sorted(self), sorted(selfByPackage), sorted(total),
                sorted(nativeTop));
    }

    /** Native frames where a thread only waits for work. */
    private static final Set<String> IDLE_NATIVE = Set.of("sun.nio.ch.EPoll.wait", "sun.nio.ch.Net.accept", "sun.nio.ch.Net.poll",
            "java.lang.Thread.sleep0", "jdk.internal.misc.Unsafe.park");

    /** Frames on nearly every stack (thread start, executors, the Connect task loop) that say nothing about the cost. */
    static boolean plumbing(String method) {
        return method.startsWith("java.") || method.startsWith("jdk.") || method.startsWith("sun.")
                || method.startsWith("org.apache.kafka.connect.runtime.") || method.equals("?");
    }

    /** The first three parts of the top frame's package (io.tablecdc.clickhouse, com.fasterxml.jackson, ...). */
    private static String packageOf(RecordedFrame f) {
        if (f.getMethod() == null) {
            return "?";
        }
        String type = f.getMethod().getType().getName();
        String[] parts = type.split("\\.");
        int n = Math.min(3, Math.max(1, parts.length - 1));
        return String.join(".", java.util.Arrays.copyOf(parts, n));
    }

    private static Map<String, Long> sorted(Map<String, Long> counts) {
        Map<String, Long> out = new LinkedHashMap<>();
        counts.entrySet().stream().sorted(Map.Entry.<String, Long>comparingByValue().reversed()).forEach(e -> out.put(e.getKey(), e.getValue()));
        return out;
    }

    private static String method(RecordedFrame f) {
        if (f.getMethod() == null) {
            return "?";
        }
        return f.getMethod().getType().getName() + "." + f.getMethod().getName();
    }
}
