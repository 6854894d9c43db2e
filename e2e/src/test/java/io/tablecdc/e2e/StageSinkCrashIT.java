package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The Connect worker running the sink is killed with SIGKILL after batches were staged and before they were
 * normalized; a new worker takes over: every row arrives, none twice.
 */
class StageSinkCrashIT {
    private static final LocalStack stack = LocalStack.get();
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA).field("amount", Decimal.builder(2).build()).build();
    private static final int BATCHES = 20;
    private static final int ROWS_PER_BATCH = 50;

    @Test
    void killingTheWorkerBetweenStagingAndNormalizeLosesAndDoublesNothing() throws Exception {
        String flow = "flow-crash";
        String table = "crash.orders";
        String topic = "sinkcrash.orders";
        String catalogUrl = stack.postgres().createDatabase("sink_crash_catalog");
        try (Client clickhouse = stack.clickhouse().client()) {
            // normalize cannot succeed until this table is fixed, so every batch stays staged
            clickhouse.execute("CREATE TABLE crash_orders (id Int64, customer Int64, _tablecdc_version UInt64, _tablecdc_is_deleted UInt8)"
                    + " ENGINE = ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted) ORDER BY id").get().close();

            Map<Long, String> expected = new HashMap<>();
            long version = 0;
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
                for (int batch = 1; batch <= BATCHES; batch++) {
                    for (int i = 0; i < ROWS_PER_BATCH; i++) {
                        // every batch rewrites half of the previous batch's rows and adds new ones
                        long id = (batch - 1) * ROWS_PER_BATCH / 2 + i + 1;
                        String customer = "c" + id + "-b" + batch;
                        version++;
                        producer.send(topic, new Struct(KEY).put("id", id),
                                new Struct(VALUE).put("id", id).put("customer", customer).put("amount", new BigDecimal(id).movePointLeft(2)),
                                Headers.of(flow, table, expected.containsKey(id) ? "u" : "c", version, batch, i == ROWS_PER_BATCH - 1));
                        expected.put(id, customer);
                    }
                }
            }

            String group = "crash-" + System.nanoTime();
            Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(), group, stack.pluginPath());
            ConnectWorker first = ConnectWorker.startProcess(workerProps, StackPaths.workDir("crash-worker-1"), Duration.ofSeconds(120));
            try {
                first.rest().putConfig("sink-crash", sinkConfig(catalogUrl, topic));
                first.rest().awaitRunning("sink-crash", 1, Duration.ofSeconds(90));
                awaitStagedBatches(flow, table, BATCHES, Duration.ofSeconds(90));
                // offsets past the staged batches are committed every second (offset.flush.interval.ms)
                Thread.sleep(3000);
            } finally {
                first.kill();
            }

            clickhouse.execute("DROP TABLE crash_orders").get().close();
            ConnectWorker second = ConnectWorker.startProcess(workerProps, StackPaths.workDir("crash-worker-2"), Duration.ofSeconds(120));
            try {
                second.rest().awaitRunning("sink-crash", 1, Duration.ofSeconds(120));
                long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
                long count = -1;
                while (System.nanoTime() < deadline) {
                    try {
                        count = clickhouse.queryAll("SELECT count() AS n FROM crash_orders FINAL").get(0).getLong("n");
                        if (count == expected.size() && stagedBatches(flow, table) == 0) {
                            break;
                        }
                    } catch (RuntimeException notYet) {
                        // the table is created by the first normalize after the restart
                    }
                    Thread.sleep(500);
                }
                assertEquals(expected.size(), count, "rows after the crash (FINAL)");
                List<GenericRecord> rows = clickhouse.queryAll("SELECT id, customer FROM crash_orders FINAL ORDER BY id");
                java.util.Map<Long, String> actual = new java.util.HashMap<>();
                for (GenericRecord row : rows) {
                    actual.put(row.getLong("id"), row.getString("customer"));
                }
                assertEquals(expected, actual, "rows after the crash (FINAL)");
                SinkFaultIT.assertOneImagePerKeyAndVersion(clickhouse, "crash_orders", "id", "customer, amount", "");
                assertEquals(0, stagedBatches(flow, table), "stage rows left");
                second.rest().delete("sink-crash");
            } finally {
                second.close();
            }
        }
    }

    private static Map<String, String> sinkConfig(String catalogUrl, String topic) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "crash");
        config.put("topics", topic);
        config.put("normalize.buffer.batches", "100");
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "1000");
        config.put("consumer.override.max.poll.records", "60");
        // the killed worker's consumer leaves the group after this, not after the default 45 s
        config.put("consumer.override.session.timeout.ms", "6000");
        config.put("consumer.override.heartbeat.interval.ms", "1500");
        return config;
    }

    private static void awaitStagedBatches(String flow, String table, long batches, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        long staged = -1;
        while (System.nanoTime() < deadline) {
            staged = stagedBatches(flow, table);
            if (staged >= batches) {
                return;
            }
            Thread.sleep(300);
        }
        throw new AssertionError("only " + staged + " of " + batches + " batches were staged");
    }

    private static long stagedBatches(String flow, String table) throws Exception {
        try (Connection c = stack.postgres().connect("sink_crash_catalog");
             PreparedStatement ps = c.prepareStatement("SELECT count(*) FROM cdc_table_avro_stage WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }
}
