package io.tablecdc.e2e.bench;

import java.lang.management.ManagementFactory;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.common.utils.internals.Sanitizer;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * The stage sink on many small batches (a source committing small transactions one by one): {@code batches} batches of
 * {@code rows} rows of one keyed table, already in Kafka, loaded with {@code normalize.batches.per.load=1} (one
 * {@code INSERT} per batch) and with the default (batches that wait together loaded in one {@code INSERT}). Each
 * variant: its own consumer group, catalog database and a fresh ClickHouse table; the time from deploying the sink
 * until the catalog shows every batch normalized, and the loads it took (the table's {@code normalize-loads-total}).
 * The final table is checked: every key once, with its last value. Variants alternate order per repetition.
 * {@code SmallBatchSinkBench [batches (2000)] [rows per batch (5)] [reps (3)]}.
 */
public final class SmallBatchSinkBench {
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("row").field("id", Schema.INT64_SCHEMA)
            .field("name", Schema.STRING_SCHEMA).field("visits", Schema.INT64_SCHEMA).build();
    private static final String FLOW = "bench-small";
    private static final String TABLE = "bench.small_batches";
    private static final String CH_TABLE = "bench_small_batches";
    private static final String[] VARIANTS = {"1", "100"};

    private SmallBatchSinkBench() {
    }

    public static void main(String[] args) throws Exception {
        int batches = args.length > 0 ? Integer.parseInt(args[0]) : 2000;
        int rows = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        int reps = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        LocalStack stack = LocalStack.get();
        String run = Long.toString(System.currentTimeMillis(), 36);
        String topic = "bench.small." + run;
        // every key is written twice: inserted, then updated by a later batch
        long keys = (long) batches * rows / 2;
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            for (int b = 1; b <= batches; b++) {
                for (int i = 0; i < rows; i++) {
                    long n = (long) (b - 1) * rows + i;
                    long id = n % keys;
                    producer.sendAsync(topic, new Struct(KEY).put("id", id),
                            new Struct(VALUE).put("id", id).put("name", "name-" + id).put("visits", n),
                            Headers.of(FLOW, TABLE, n < keys ? "c" : "u", n + 1, b, i == rows - 1));
                }
            }
            producer.flush();
        }
        List<double[]> seconds = new ArrayList<>();
        List<long[]> loads = new ArrayList<>();
        try (Client clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user())
                .setPassword(stack.clickhouse().password()).compressServerResponse(false).build()) {
            for (int rep = 1; rep <= reps; rep++) {
                double[] s = new double[VARIANTS.length];
                long[] l = new long[VARIANTS.length];
                for (int k = 0; k < VARIANTS.length; k++) {
                    int v = rep % 2 == 1 ? k : VARIANTS.length - 1 - k;
                    String id = run + "_" + rep + "_" + v;
                    clickhouse.execute("DROP TABLE IF EXISTS " + CH_TABLE).get().close();
                    String catalog = "bench_small_" + id;
                    String catalogUrl = stack.postgres().createDatabase(catalog);
                    Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "bench-small-" + id);
                    config.put("topics", topic);
                    config.put("normalize.batches.per.load", VARIANTS[v]);
                    config.put("consumer.override.max.poll.records", "5000");
                    String connector = "bench-small-sink-" + id.replace('_', '-');
                    long start = System.nanoTime();
                    stack.connect().rest().putConfig(connector, config);
                    awaitNormalized(stack, catalog, batches, Duration.ofMinutes(30));
                    s[v] = (System.nanoTime() - start) / 1e9;
                    l[v] = loads(connector);
                    stack.connect().rest().delete(connector);
                    long right = clickhouse.queryAll("SELECT count() AS c FROM " + CH_TABLE + " FINAL WHERE visits >= " + keys
                            + " AND name = concat('name-', toString(id))").get(0).getLong("c");
                    if (right != keys) {
                        throw new IllegalStateException(CH_TABLE + ": " + right + " of " + keys + " keys hold their last value");
                    }
                    System.out.printf(Locale.ROOT, "rep %d, normalize.batches.per.load=%s: %.1f s, %d loads%n", rep, VARIANTS[v],
                            s[v], l[v]);
                }
                seconds.add(s);
                loads.add(l);
            }
            clickhouse.execute("DROP TABLE IF EXISTS " + CH_TABLE).get().close();
        }
        System.out.println();
        System.out.printf(Locale.ROOT, "%d batches of %d rows (%d rows, %d keys written twice), %d repetitions%n", batches, rows,
                (long) batches * rows, keys, reps);
        System.out.println("| repetition | one load per batch: s (rows/s, loads) | batches that wait loaded together: s (rows/s, loads)"
                + " | speed-up |");
        System.out.println("|---|---|---|---|");
        double total = (double) batches * rows;
        for (int i = 0; i < seconds.size(); i++) {
            double[] s = seconds.get(i);
            long[] l = loads.get(i);
            System.out.printf(Locale.ROOT, "| %d | %.1f (%.0f, %d) | %.1f (%.0f, %d) | %.2f |%n", i + 1, s[0], total / s[0], l[0],
                    s[1], total / s[1], l[1], s[0] / s[1]);
        }
        System.exit(0);
    }

    /** Polls the catalog every 20 ms (one connection) until {@code batches} batches are normalized. */
    private static void awaitNormalized(LocalStack stack, String catalog, long batches, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        try (Connection c = stack.postgres().connect(catalog)) {
            while (System.nanoTime() < deadline) {
                try {
                    if (SinkSuite.normalizedBatchId(c, FLOW, TABLE) >= batches) {
                        return;
                    }
                } catch (java.sql.SQLException notYet) {
                    // the catalog's tables appear once the sink has migrated it
                }
                Thread.sleep(20);
            }
        }
        throw new IllegalStateException(catalog + ": " + batches + " batches were not normalized within " + timeout);
    }

    /** The table's {@code normalize-loads-total} in the sink task (an MBean of the in-process worker). */
    private static long loads(String connector) throws Exception {
        MBeanServer jmx = ManagementFactory.getPlatformMBeanServer();
        Set<ObjectName> names = jmx.queryNames(new ObjectName("kafka.connect:type=plugins,connector="
                + Sanitizer.jmxSanitize(connector) + ",flow=" + Sanitizer.jmxSanitize(FLOW) + ",table="
                + Sanitizer.jmxSanitize(TABLE) + ",*"), null);
        if (names.size() != 1) {
            return -1;
        }
        return ((Number) jmx.getAttribute(names.iterator().next(), "normalize-loads-total")).longValue();
    }
}
