package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.tablecdc.e2e.faults.FaultProxy;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * A black hole between a Connect worker and Kafka (issue 38 item 1) while a Postgres flow and its sink stream: the
 * worker reaches the broker only through the proxy in front of the broker's second listener
 * ({@code LocalKafka#proxiedBootstrapServers}), which then accepts connections and never answers, and swallows what open
 * ones carry without closing them, for 15 s: nothing tells the clients, and a request in flight on a connection that
 * met it never gets an answer. The broker itself runs on. Producers, consumers, the group membership and Connect's own topics
 * all wait on their clients' time limits; once the network heals the dead connections stay dead, the clients end them by
 * those limits and connect again, and the flow goes on by itself: ClickHouse equals Postgres, and the connectors and
 * tasks run.
 */
class KafkaBlackHoleIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "kafkahole_source";

    private static PgChecks pg;
    private static String catalogUrl;

    @BeforeAll
    static void start() throws Exception {
        pg = PgChecks.start(stack, DATABASE, "kafkahole_catalog");
        catalogUrl = pg.catalogUrl();
        pg.holdEqualFor(Duration.ofSeconds(5));
    }

    @AfterAll
    static void stop() {
        if (pg != null) {
            pg.close();
        }
    }

    @Test
    void aWorkerCutOffFromKafkaByABlackHoleGoesOnOnceItHeals() throws Exception {
        String schema = "kafka_hole";
        String prefix = "kafkahole";
        String flow = prefix + "-flow";
        String sink = prefix + "-sink";
        String publication = schema + "_pub";
        pg.sql("DROP PUBLICATION IF EXISTS " + publication,
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + schema + ".a (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + schema + ".a SELECT g, 0 FROM generate_series(1, 500) g",
                "CREATE TABLE " + schema + ".b (id int PRIMARY KEY, v int NOT NULL)",
                "CREATE PUBLICATION " + publication + " FOR TABLE " + schema + ".a, " + schema + ".b");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String t : List.of("a", "b")) {
            tables.put(schema + "." + t, new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        }
        FaultProxy kafka = stack.kafka().proxy();
        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().proxiedBootstrapServers(),
                prefix + "-" + System.nanoTime(), stack.pluginPath());
        ConnectWorker worker = ConnectWorker.startProcess(workerProps, StackPaths.workDir(prefix + "/worker"),
                Duration.ofSeconds(120));
        try {
            ConnectRestClient rest = worker.rest();
            Map<String, String> sinkConfig = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);
            rest.putConfig(sink, sinkConfig);
            Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, prefix);
            source.put("slot.prefix", schema);
            source.put("tasks.max", "2");
            source.put("table.sync.copy", "all");
            rest.putConfig(flow, source);
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            rest.awaitRunning(sink, 1, Duration.ofSeconds(90));
            for (String table : tables.keySet()) {
                pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            }
            long swallowed;
            try (TransactionWriter writer = new TransactionWriter(prefix + "-writer", pg, n -> List.of(
                    "UPDATE " + schema + ".a SET v = v + 1 WHERE id = " + (n % 500 + 1),
                    "INSERT INTO " + schema + ".b VALUES (" + n + ", " + n + ")"), () -> 20)) {
                writer.awaitMore(20);
                long swallowedBefore = kafka.swallowed();
                kafka.blackHole();
                try {
                    // the source keeps reading Postgres and sending, the sink keeps polling: nothing reaches Kafka
                    Thread.sleep(15_000);
                    swallowed = kafka.swallowed() - swallowedBefore;
                } finally {
                    kafka.pass();
                }
                writer.awaitMore(50);
                writer.close();
            }
            assertTrue(swallowed > 0, "the worker's Kafka connections met the black hole");
            // the dead connections end by the Kafka clients' own limits (request.timeout.ms, 30 s by default; the
            // group's session and rebalance timeouts), then the clients connect again
            pg.awaitEqual(tables, Duration.ofSeconds(240));
            for (String connector : List.of(flow, sink)) {
                List<String> states = rest.states(connector);
                assertTrue(states.stream().allMatch("RUNNING"::equals), connector + " after the hole: " + states);
            }
            System.out.printf("kafka black hole for 15 s: %d chunks swallowed; the flow went on, ClickHouse equals"
                    + " Postgres%n", swallowed);
            rest.delete(flow);
            rest.delete(sink);
        } finally {
            worker.close();
        }
    }
}
