package io.tablecdc.e2e.bench;

import java.io.ByteArrayInputStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;

import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;

import com.clickhouse.client.api.Client;
import com.clickhouse.data.ClickHouseFormat;

import io.tablecdc.common.TablecdcTypes;
import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * Rows per second the stage sink stages and normalizes for a 10-column table, next to a plain bulk insert
 * of the same rows into the same ClickHouse engine (JSONEachRow over HTTP), measured in one run.
 * {@code SinkBench [rows] [batch rows] [pull|push] [codec]}.
 */
public final class SinkBench {
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("bench").field("id", Schema.INT64_SCHEMA)
            .field("name", Schema.STRING_SCHEMA).field("email", Schema.STRING_SCHEMA).field("city", Schema.OPTIONAL_STRING_SCHEMA)
            .field("score", Schema.FLOAT64_SCHEMA).field("ratio", Schema.OPTIONAL_FLOAT64_SCHEMA)
            .field("visits", Schema.INT64_SCHEMA).field("level", Schema.INT32_SCHEMA)
            .field("balance", Decimal.builder(2).parameter("connect.decimal.precision", "18").build())
            .field("updated_at", TablecdcTypes.microTimestamp().build()).build();

    private SinkBench() {
    }

    public static void main(String[] args) throws Exception {
        int rows = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
        int batchRows = args.length > 1 ? Integer.parseInt(args[1]) : 50_000;
        String mode = args.length > 2 ? args[2] : "pull";
        String codec = args.length > 3 ? args[3] : "zstandard";
        LocalStack stack = LocalStack.get();
        String run = Long.toString(System.currentTimeMillis(), 36);
        String topic = "bench.sink." + run;
        String table = "bench.t" + run;
        String flow = "bench";

        long t0 = System.nanoTime();
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            int batches = (rows + batchRows - 1) / batchRows;
            for (int i = 0; i < rows; i++) {
                int batch = i / batchRows + 1;
                boolean last = (i + 1) % batchRows == 0 || i == rows - 1;
                producer.sendAsync(topic, new Struct(KEY).put("id", (long) i), row(i), Headers.of(flow, table, "r", 1, batch, last));
            }
            producer.flush();
            System.out.printf(Locale.ROOT, "produced %d rows in %d batches to Kafka in %.1f s%n", rows, batches, secondsSince(t0));
        }

        String catalogUrl = stack.postgres().createDatabase("bench_catalog");
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "bench");
        config.put("topics", topic);
        config.put("normalize.mode", mode);
        config.put("avro.codec", codec);
        config.put("consumer.override.max.poll.records", "5000");
        long expectedBatches = (rows + batchRows - 1) / batchRows;
        long start = System.nanoTime();
        stack.connect().rest().putConfig("bench-sink-" + run, config);
        awaitNormalized(stack, flow, table, expectedBatches, Duration.ofMinutes(20));
        double sinkSeconds = secondsSince(start);

        String baselineTable = "bench_baseline_" + run;
        double baselineSeconds;
        try (Client client = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                .compressServerResponse(false).build()) {
            client.execute("CREATE TABLE " + baselineTable + " (id Int64, name String, email String, city Nullable(String), score Float64,"
                    + " ratio Nullable(Float64), visits Int64, level Int32, balance Decimal(18, 2), updated_at DateTime64(6, 'UTC'),"
                    + " _tablecdc_version UInt64, _tablecdc_is_deleted UInt8)"
                    + " ENGINE = ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted) ORDER BY id").get().close();
            long b0 = System.nanoTime();
            for (int from = 0; from < rows; from += batchRows) {
                StringBuilder json = new StringBuilder();
                for (int i = from; i < Math.min(rows, from + batchRows); i++) {
                    json.append(String.format(Locale.ROOT, "{\"id\":%d,\"name\":\"name-%d\",\"email\":\"user%d@example.com\",\"city\":%s,"
                                    + "\"score\":%s,\"ratio\":%s,\"visits\":%d,\"level\":%d,\"balance\":%s,\"updated_at\":%d,"
                                    + "\"_tablecdc_version\":1,\"_tablecdc_is_deleted\":0}\n",
                            i, i, i, i % 7 == 0 ? "null" : "\"city-" + (i % 100) + "\"", Double.toString(i * 0.5),
                            i % 5 == 0 ? "null" : Double.toString(1.0 / (i + 1)), i * 3L, i % 10, new BigDecimal(i).movePointLeft(2).toPlainString(),
                            1_700_000_000_000_000L + i));
                }
                client.insert(baselineTable, new ByteArrayInputStream(json.toString().getBytes(StandardCharsets.UTF_8)),
                        ClickHouseFormat.JSONEachRow).get().close();
            }
            baselineSeconds = secondsSince(b0);
        }
        System.out.println();
        System.out.printf(Locale.ROOT, "| what | rows | seconds | rows/s | vs bulk insert |%n|---|---|---|---|---|%n");
        System.out.printf(Locale.ROOT, "| stage sink (%s, %s, batches of %d), Kafka to ClickHouse | %d | %.1f | %.0f | %.2f |%n",
                mode, codec, batchRows, rows, sinkSeconds, rows / sinkSeconds, baselineSeconds / sinkSeconds);
        System.out.printf(Locale.ROOT, "| bulk INSERT FORMAT JSONEachRow, same rows, same engine | %d | %.1f | %.0f | 1.00 |%n",
                rows, baselineSeconds, rows / baselineSeconds);
        System.exit(0);
    }

    private static Struct row(int i) {
        return new Struct(VALUE).put("id", (long) i).put("name", "name-" + i).put("email", "user" + i + "@example.com")
                .put("city", i % 7 == 0 ? null : "city-" + (i % 100)).put("score", i * 0.5).put("ratio", i % 5 == 0 ? null : 1.0 / (i + 1))
                .put("visits", i * 3L).put("level", i % 10).put("balance", new BigDecimal(i).movePointLeft(2))
                .put("updated_at", 1_700_000_000_000_000L + i);
    }

    private static void awaitNormalized(LocalStack stack, String flow, String table, long batches, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            try (Connection c = stack.postgres().connect("bench_catalog");
                 PreparedStatement ps = c.prepareStatement("SELECT normalized_batch_id FROM cdc_table_replication_state"
                         + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                try (ResultSet rs = ps.executeQuery()) {
                    if (rs.next() && rs.getLong(1) >= batches) {
                        return;
                    }
                }
            } catch (java.sql.SQLException notYet) {
                // the catalog tables appear when the sink starts
            }
            Thread.sleep(200);
        }
        throw new IllegalStateException("the sink did not normalize " + batches + " batches within " + timeout);
    }

    private static double secondsSince(long startNanos) {
        return (System.nanoTime() - startNanos) / 1e9;
    }
}
