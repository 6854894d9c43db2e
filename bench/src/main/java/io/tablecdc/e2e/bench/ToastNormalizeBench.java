package io.tablecdc.e2e.bench;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * The stage sink's normalize cost for batches of updates to a table with a large text column, where 10 % of the
 * updates leave the large value untouched ({@code tablecdc.unchanged}: the sink takes it from the final table in the
 * loading statement), against the same batches where every update carries its value. Each variant: one batch of
 * {@code rows} inserts, then {@code batches} batches that update every row once; the time the table's normalize loop
 * spends on the update batches (see {@link #normalizeSeconds}). The final table is checked: every row has its large
 * value and its last update. Variants alternate order per repetition.
 * {@code ToastNormalizeBench [rows] [batches] [reps] [body bytes]}.
 */
public final class ToastNormalizeBench {
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("doc").field("id", Schema.INT64_SCHEMA)
            .field("n", Schema.OPTIONAL_INT32_SCHEMA).field("note", Schema.OPTIONAL_STRING_SCHEMA)
            .field("body", Schema.OPTIONAL_STRING_SCHEMA).build();
    private static final String FLOW = "bench-toast";

    private ToastNormalizeBench() {
    }

    public static void main(String[] args) throws Exception {
        int rows = args.length > 0 ? Integer.parseInt(args[0]) : 500;
        int batches = args.length > 1 ? Integer.parseInt(args[1]) : 4;
        int reps = args.length > 2 ? Integer.parseInt(args[2]) : 2;
        int bodyBytes = args.length > 3 ? Integer.parseInt(args[3]) : 40_000;
        LocalStack stack = LocalStack.get();
        String catalogUrl = stack.postgres().createDatabase("bench_toast_catalog");
        String run = Long.toString(System.currentTimeMillis(), 36);
        List<double[]> results = new ArrayList<>();
        try (Client clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user())
                .setPassword(stack.clickhouse().password()).compressServerResponse(false).build()) {
            for (int rep = 1; rep <= reps; rep++) {
                double[] seconds = new double[2];
                for (int v = 0; v < 2; v++) {
                    int variant = rep % 2 == 1 ? v : 1 - v;
                    seconds[variant] = measure(stack, clickhouse, catalogUrl, run + "_" + rep + "_" + variant, variant == 1, rows,
                            batches, bodyBytes);
                    System.out.printf(Locale.ROOT, "rep %d, %s: %.2f s for %d update batches%n", rep,
                            variant == 1 ? "10 % untouched" : "all values sent", seconds[variant], batches);
                }
                results.add(seconds);
            }
        }
        System.out.println();
        System.out.printf(Locale.ROOT, "%d rows with a %d-byte text column, %d batches updating every row once, %d repetitions%n",
                rows, bodyBytes, batches, reps);
        System.out.println("| repetition | every update carries its value: s per batch | 10 % leave it untouched: s per batch | ratio |");
        System.out.println("|---|---|---|---|");
        for (int i = 0; i < results.size(); i++) {
            double[] s = results.get(i);
            System.out.printf(Locale.ROOT, "| %d | %.2f | %.2f | %.2f |%n", i + 1, s[0] / batches, s[1] / batches, s[1] / s[0]);
        }
        System.exit(0);
    }

    private static double measure(LocalStack stack, Client clickhouse, String catalogUrl, String id, boolean untouched, int rows,
                                  int batches, int bodyBytes) throws Exception {
        String topic = "bench.toast." + id;
        String table = "bench.toast_" + id;
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            for (int i = 0; i < rows; i++) {
                producer.sendAsync(topic, key(i), value(i, 0, body(i, bodyBytes)), Headers.of(FLOW, table, "c", i + 1, 1, i == rows - 1));
            }
            for (int b = 2; b <= batches + 1; b++) {
                for (int i = 0; i < rows; i++) {
                    boolean keep = untouched && i % 10 == 0;
                    Map<String, String> headers = Headers.of(FLOW, table, "u", (long) b * 1_000_000 + i, b, i == rows - 1);
                    if (keep) {
                        headers.put("tablecdc.unchanged", "body");
                    }
                    producer.sendAsync(topic, key(i), value(i, b, keep ? null : body(i, bodyBytes)), headers);
                }
            }
            producer.flush();
        }
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "bench-toast-" + id);
        config.put("topics", topic);
        config.put("normalize.mode", "pull");
        config.put("consumer.override.max.poll.records", "500");
        String connector = "bench-toast-sink-" + id;
        stack.connect().rest().putConfig(connector, config);
        double seconds = normalizeSeconds(stack, table, batches + 1, Duration.ofMinutes(20));
        stack.connect().rest().delete(connector);
        String clickHouseTable = table.replaceAll("[^A-Za-z0-9_]", "_");
        long complete = clickhouse.queryAll("SELECT count() AS c FROM " + clickHouseTable + " FINAL WHERE length(body) = " + bodyBytes
                + " AND n = " + (batches + 1)).get(0).getLong("c");
        if (complete != rows) {
            throw new IllegalStateException(clickHouseTable + ": " + complete + " of " + rows + " rows have their value and the last update");
        }
        return seconds;
    }

    private static Struct key(long id) {
        return new Struct(KEY).put("id", id);
    }

    private static Struct value(long id, int n, String body) {
        return new Struct(VALUE).put("id", id).put("n", n).put("note", "note " + id + "/" + n).put("body", body);
    }

    private static String body(int id, int bytes) {
        StringBuilder out = new StringBuilder(bytes);
        long x = id * 0x9E3779B97F4A7C15L + 1;
        while (out.length() < bytes) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            out.append(Long.toHexString(x));
        }
        out.setLength(bytes);
        return out.toString();
    }

    /**
     * Seconds the table's normalize loop spent on batches 2 to {@code lastBatch}: for each, from the later of its stage
     * row's creation and the previous batch's normalize, until its own normalize (seen by polling the catalog every
     * 20 ms; a batch normalized within one poll of the previous one counts from the previous one's sighting).
     */
    private static double normalizeSeconds(LocalStack stack, String table, long lastBatch, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        Map<Long, Long> stagedAt = new java.util.HashMap<>();
        Map<Long, Long> normalizedAt = new java.util.HashMap<>();
        long normalized = 0;
        while (normalized < lastBatch) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(table + ": batch " + lastBatch + " was not normalized within " + timeout);
            }
            try (Connection c = stack.postgres().connect("bench_toast_catalog")) {
                try (PreparedStatement ps = c.prepareStatement("SELECT batch_id, (extract(epoch FROM created_at) * 1000)::bigint"
                        + " FROM cdc_table_avro_stage WHERE flow_name = ? AND source_table_identifier = ?")) {
                    ps.setString(1, FLOW);
                    ps.setString(2, table);
                    try (ResultSet rs = ps.executeQuery()) {
                        while (rs.next()) {
                            stagedAt.putIfAbsent(rs.getLong(1), rs.getLong(2));
                        }
                    }
                }
                try (PreparedStatement ps = c.prepareStatement("SELECT normalized_batch_id FROM cdc_table_replication_state"
                        + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                    ps.setString(1, FLOW);
                    ps.setString(2, table);
                    try (ResultSet rs = ps.executeQuery()) {
                        if (rs.next()) {
                            long now = System.currentTimeMillis();
                            for (long b = normalized + 1; b <= rs.getLong(1); b++) {
                                normalizedAt.put(b, now);
                            }
                            normalized = Math.max(normalized, rs.getLong(1));
                        }
                    }
                }
            } catch (java.sql.SQLException notYet) {
                // the catalog tables appear when the sink starts
            }
            Thread.sleep(20);
        }
        long busy = 0;
        for (long b = 2; b <= lastBatch; b++) {
            long start = Math.max(stagedAt.getOrDefault(b, 0L), normalizedAt.get(b - 1));
            busy += Math.max(0, normalizedAt.get(b) - start);
        }
        return busy / 1e3;
    }
}
