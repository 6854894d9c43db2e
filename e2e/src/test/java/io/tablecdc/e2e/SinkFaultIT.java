package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.e2e.faults.Fault;
import io.tablecdc.e2e.faults.FaultInjector;
import io.tablecdc.e2e.faults.NamedFaults;
import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The sink's worker process dies (Byteman halts it, as SIGKILL would) at each named step between two of its state
 * changes, while batches of inserts and updates flow; a second worker takes over without faults. ClickHouse
 * {@code FINAL} ends equal to what was produced, every row once, no stage row left.
 */
class SinkFaultIT {
    static final LocalStack stack = LocalStack.get();
    static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    static final Schema VALUE = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA).field("amount", Decimal.builder(2).build()).build();
    private static final int BATCHES = 12;
    static final int ROWS_PER_BATCH = 40;

    static Stream<Fault> steps() {
        return Stream.of(
                // the third load, so that earlier batches are complete and later ones still staged (these cases load
                // one batch per INSERT: see Case.perBatch)
                NamedFaults.sinkLoadedNotRecorded().kill().onOccurrence(3),
                NamedFaults.sinkRecordedNotCleaned().kill().onOccurrence(3),
                NamedFaults.sinkUploadedNotStaged().kill().onOccurrence(4),
                NamedFaults.sinkStagedNotCommitted().kill().onOccurrence(4));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("steps")
    void aWorkerKilledAtTheStepLosesAndDoublesNothing(Fault fault) throws Exception {
        Case.of(fault).killAndTakeOver();
    }

    /** One case: its catalog, flow, table and topic named after the fault, the records produced, a worker group. */
    record Case(Fault fault, String name, String database, String flow, String table, String topic,
                        String clickhouseTable, String catalogUrl, Map<Long, String> expected,
                        Map<String, String> workerProps, FaultInjector injector, boolean perBatch) {
        /** A case whose sink loads one batch per INSERT, so that the n-th load is the n-th batch. */
        static Case of(Fault fault, Fault... more) throws Exception {
            return of(true, fault, more);
        }

        /** A case whose sink loads batches that wait together in one INSERT; its first load is slowed for 3 s. */
        static Case grouped(Fault fault) throws Exception {
            return of(false, fault, Fault.at("sink-first-load-slow", "io.tablecdc.clickhouse.TableNormalizer", "load", "AT ENTRY")
                    .hang(3_000));
        }

        private static Case of(boolean perBatch, Fault fault, Fault... more) throws Exception {
            String name = fault.name() + (perBatch ? "" : "-grouped");
            String database = ("sinkfault_" + name).replace('-', '_');
            String flow = "flow-" + name;
            String table = "fault." + name.replace('-', '_');
            String topic = "sinkfault." + name;
            String catalogUrl = stack.postgres().createDatabase(database);
            Map<Long, String> expected = produce(flow, table, topic);
            String group = "sinkfault-" + name + "-" + System.nanoTime();
            return new Case(fault, name, database, flow, table, topic, "fault_" + name.replace('-', '_'), catalogUrl,
                    expected, ConnectWorker.workerProperties(stack.kafka().bootstrapServers(), group, stack.pluginPath()),
                    FaultInjector.of(StackPaths.workDir("sinkfault-" + name + "/faults"),
                            Stream.concat(Stream.of(fault), Stream.of(more)).toArray(Fault[]::new)), perBatch);
        }

        /** A worker process with the fault armed (the Byteman agent attached). */
        ConnectWorker startWorkerWithFault(String workerName) throws Exception {
            List<String> jvmArgs = injector.jvmArgs(ConnectWorker.TEST_JVM_ARGS.toArray(String[]::new));
            return ConnectWorker.startProcess(workerProps, StackPaths.workDir("sinkfault-" + name + "/" + workerName),
                    Duration.ofSeconds(120), jvmArgs);
        }

        void deployAndAwaitFault(ConnectWorker worker) throws Exception {
            Map<String, String> config = sinkConfig(catalogUrl, topic);
            if (perBatch) {
                config.put("normalize.batches.per.load", "1");
            }
            worker.rest().putConfig("sink-" + name, config);
            injector.awaitFired(fault, Duration.ofSeconds(120));
        }

        /** A worker with the fault armed dies at it; a second worker without faults takes over and loads every row once. */
        void killAndTakeOver() throws Exception {
            ConnectWorker first = startWorkerWithFault("worker-1");
            try {
                deployAndAwaitFault(first);
            } finally {
                first.kill();
            }
            ConnectWorker second = ConnectWorker.startProcess(workerProps, StackPaths.workDir("sinkfault-" + name + "/worker-2"),
                    Duration.ofSeconds(120));
            try {
                assertLoadedOnce(second);
            } finally {
                second.close();
            }
        }

        void assertLoadedOnce(ConnectWorker worker) throws Exception {
            SinkFaultIT.assertLoadedOnce(worker, name, database, flow, table, clickhouseTable, expected);
        }
    }

    /** ClickHouse FINAL holds every row once with its last value, every batch is normalized, no stage row is left. */
    static void assertLoadedOnce(ConnectWorker worker, String name, String database, String flow, String table,
                                         String clickhouseTable, Map<Long, String> expected) throws Exception {
        try (Client clickhouse = stack.clickhouse().client()) {
            worker.rest().awaitRunning("sink-" + name, 1, Duration.ofSeconds(120));
            long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
            long count = -1;
            long staged = -1;
            while (System.nanoTime() < deadline) {
                staged = stagedBatches(database, flow, table);
                try {
                    count = clickhouse.queryAll("SELECT count() AS n FROM " + clickhouseTable + " FINAL").get(0).getLong("n");
                } catch (RuntimeException notYet) {
                    count = -1;
                }
                if (count == expected.size() && staged == 0 && normalizedBatch(database, flow, table) == BATCHES) {
                    break;
                }
                Thread.sleep(500);
            }
            String state = catalogState(database, flow, table) + "; ClickHouse rows per batch: "
                    + clickhouse.queryAll("SELECT intDiv(id - 1, " + ROWS_PER_BATCH / 2 + ") AS b, count() AS n FROM " + clickhouseTable
                    + " FINAL GROUP BY b ORDER BY b").stream().map(r -> r.getLong("b") + ":" + r.getLong("n")).toList();
            assertEquals(expected.size(), count, "rows after the fault (FINAL); " + state);
            assertEquals(0, staged, "stage rows left; " + state);
            assertEquals(BATCHES, normalizedBatch(database, flow, table), "normalized batch id; " + state);
            List<GenericRecord> rows = clickhouse.queryAll("SELECT id, customer FROM " + clickhouseTable + " FINAL ORDER BY id");
            Map<Long, String> actual = new HashMap<>();
            for (GenericRecord row : rows) {
                actual.put(row.getLong("id"), row.getString("customer"));
            }
            assertEquals(expected, actual, "rows after the fault (FINAL); " + state);
            assertOneImagePerKeyAndVersion(clickhouse, clickhouseTable, "id", "customer, amount", state);
            worker.rest().delete("sink-" + name);
        }
    }

    /**
     * What {@code FINAL} hides: the rows loaded for one key and one version, read without {@code FINAL} (deleted rows
     * too), must be one image. A batch loaded twice gives identical copies, which {@code FINAL} folds; two images of one
     * (key, version) leave {@code FINAL} to keep either. A background merge may already have folded rows together, so
     * this can miss a pair, never invent one.
     */
    static void assertOneImagePerKeyAndVersion(Client clickhouse, String clickhouseTable, String key, String columns, String state) {
        List<String> conflicts = clickhouse.queryAll("SELECT toString(" + key + ") AS _tc_key, toString(_tablecdc_version) AS _tc_version,"
                + " uniqExact(tuple(" + columns + ", _tablecdc_is_deleted)) AS _tc_images FROM " + clickhouseTable
                + " GROUP BY " + key + ", _tablecdc_version HAVING _tc_images > 1 ORDER BY _tc_key LIMIT 20").stream()
                .map(r -> "key " + r.getString("_tc_key") + " version " + r.getString("_tc_version") + ": "
                        + r.getLong("_tc_images") + " images").toList();
        assertEquals(List.of(), conflicts, "rows of one key and version with different values in " + clickhouseTable + "; " + state);
    }

    private static Map<Long, String> produce(String flow, String table, String topic) throws Exception {
        Map<Long, String> expected = new HashMap<>();
        long version = 0;
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            for (int batch = 1; batch <= BATCHES; batch++) {
                for (int i = 0; i < ROWS_PER_BATCH; i++) {
                    // every batch rewrites half of the previous batch's rows and adds new ones
                    long id = (long) (batch - 1) * ROWS_PER_BATCH / 2 + i + 1;
                    String customer = "c" + id + "-b" + batch;
                    version++;
                    producer.send(topic, new Struct(KEY).put("id", id),
                            new Struct(VALUE).put("id", id).put("customer", customer).put("amount", new BigDecimal(id).movePointLeft(2)),
                            Headers.of(flow, table, expected.containsKey(id) ? "u" : "c", version, batch, i == ROWS_PER_BATCH - 1));
                    expected.put(id, customer);
                }
            }
        }
        return expected;
    }

    static Map<String, String> sinkConfig(String catalogUrl, String topic) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "sinkfault");
        config.put("topics", topic);
        config.put("table.name.format", "${table}");
        config.put("normalize.buffer.batches", "100");
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "1000");
        // the killed worker's normalize lease runs out after this long
        config.put("normalize.lease.ms", "5000");
        // one batch and a bit per poll, so that uploads and loads interleave with consumption
        config.put("consumer.override.max.poll.records", "50");
        config.put("consumer.override.session.timeout.ms", "6000");
        config.put("consumer.override.heartbeat.interval.ms", "1500");
        return config;
    }

    static long stagedBatches(String database, String flow, String table) throws Exception {
        return catalogLong(database, "SELECT count(*) FROM cdc_table_avro_stage WHERE flow_name = ? AND source_table_identifier = ?",
                flow, table);
    }

    /** The rows of one batch's stage row, -1 when it has none. */
    static long stagedRows(String database, String flow, String table, long batch) throws Exception {
        try (Connection c = stack.postgres().connect(database); PreparedStatement ps = c.prepareStatement("SELECT rows"
                + " FROM cdc_table_avro_stage WHERE flow_name = ? AND source_table_identifier = ? AND batch_id = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            ps.setLong(3, batch);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getLong(1) : -1;
            }
        }
    }

    static String lastError(String database, String flow, String table) throws Exception {
        try (Connection c = stack.postgres().connect(database); PreparedStatement ps = c.prepareStatement("SELECT last_error"
                + " FROM cdc_table_replication_state WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : null;
            }
        }
    }

    static long normalizedBatch(String database, String flow, String table) throws Exception {
        return catalogLong(database, "SELECT coalesce(max(normalized_batch_id), 0) FROM cdc_table_replication_state"
                + " WHERE flow_name = ? AND source_table_identifier = ?", flow, table);
    }

    /** The table's catalog row and its stage rows, for failure messages. */
    private static String catalogState(String database, String flow, String table) throws Exception {
        StringBuilder text = new StringBuilder("catalog:");
        try (Connection c = stack.postgres().connect(database)) {
            for (String sql : List.of(
                    "SELECT synced_batch_id, normalized_batch_id, last_error FROM cdc_table_replication_state"
                            + " WHERE flow_name = ? AND source_table_identifier = ?",
                    "SELECT batch_id, rows FROM cdc_table_avro_stage WHERE flow_name = ? AND source_table_identifier = ?"
                            + " ORDER BY batch_id")) {
                try (PreparedStatement ps = c.prepareStatement(sql)) {
                    ps.setString(1, flow);
                    ps.setString(2, table);
                    try (ResultSet rs = ps.executeQuery()) {
                        while (rs.next()) {
                            text.append(" [");
                            for (int i = 1; i <= rs.getMetaData().getColumnCount(); i++) {
                                text.append(i > 1 ? ", " : "").append(rs.getMetaData().getColumnName(i)).append('=').append(rs.getString(i));
                            }
                            text.append(']');
                        }
                    }
                }
            }
        }
        return text.toString();
    }

    private static long catalogLong(String database, String sql, String flow, String table) throws Exception {
        try (Connection c = stack.postgres().connect(database); PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        } catch (java.sql.SQLException notYet) {
            // the catalog's tables are created by the sink's first start
            return -1;
        }
    }
}
