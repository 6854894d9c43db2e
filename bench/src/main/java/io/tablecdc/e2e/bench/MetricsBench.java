package io.tablecdc.e2e.bench;

import java.lang.management.ManagementFactory;
import java.time.Instant;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;

import javax.management.MBeanAttributeInfo;
import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.common.metrics.JmxReporter;
import org.apache.kafka.common.metrics.KafkaMetricsContext;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.internals.PluginMetricsImpl;
import org.apache.kafka.common.utils.Time;

import io.tablecdc.common.metrics.TableMetrics;

/**
 * What per-table metrics cost: registering a sink task's tables, one JMX scrape of all their attributes (what a
 * Prometheus JMX exporter does on every scrape), and the updates a batch makes on the task's threads. Runs on
 * Kafka's own metrics registry and JMX reporter set up as a Connect worker sets them up for one task; no stack.
 * {@code MetricsBench [tables (1000)] [batches per round (2000000)]}.
 */
public final class MetricsBench {
    private MetricsBench() {
    }

    public static void main(String[] args) throws Exception {
        int tables = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        int batches = args.length > 1 ? Integer.parseInt(args[1]) : 2_000_000;
        MBeanServer jmx = ManagementFactory.getPlatformMBeanServer();
        LinkedHashMap<String, String> taskTags = new LinkedHashMap<>();
        taskTags.put("connector", "bench-sink");
        taskTags.put("task", "0");
        try (Metrics metrics = new Metrics(new MetricConfig(), List.of(new JmxReporter()), Time.SYSTEM,
                new KafkaMetricsContext("kafka.connect"));
             PluginMetricsImpl plugin = new PluginMetricsImpl(metrics, taskTags);
             TableMetrics sink = TableMetrics.forSink(() -> plugin, "bench-sink")) {
            long start = System.nanoTime();
            for (int i = 0; i < tables; i++) {
                sink.table("bench", "s.t" + i).batchStaged(1, 10, Instant.now());
            }
            System.out.printf(Locale.ROOT, "registering %d tables: %.1f ms (%.3f ms per table)%n", tables,
                    ms(System.nanoTime() - start), ms(System.nanoTime() - start) / tables);

            ObjectName all = new ObjectName("kafka.connect:type=plugins,connector=bench-sink,*");
            for (int round = 1; round <= 5; round++) {
                start = System.nanoTime();
                int attributes = 0;
                for (ObjectName name : jmx.queryNames(all, null)) {
                    String[] names = Arrays.stream(jmx.getMBeanInfo(name).getAttributes()).map(MBeanAttributeInfo::getName)
                            .toArray(String[]::new);
                    attributes += jmx.getAttributes(name, names).size();
                }
                System.out.printf(Locale.ROOT, "scrape %d: %d MBeans, %d attributes in %.1f ms%n", round,
                        jmx.queryNames(all, null).size(), attributes, ms(System.nanoTime() - start));
            }

            TableMetrics.Table table = sink.table("bench", "s.t0");
            Instant stagedAt = Instant.now();
            long id = 10;
            for (int round = 1; round <= 3; round++) {
                start = System.nanoTime();
                for (int i = 0; i < batches; i++) {
                    id++;
                    table.batchStaged(id, 100, stagedAt);
                    table.batchNormalized(id, 100);
                }
                System.out.printf(Locale.ROOT, "updates %d: one batch staged and normalized in %.0f ns%n", round,
                        (double) (System.nanoTime() - start) / batches);
            }
        }
    }

    private static double ms(long nanos) {
        return nanos / 1_000_000.0;
    }
}
