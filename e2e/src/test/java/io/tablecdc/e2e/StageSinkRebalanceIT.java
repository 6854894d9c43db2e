package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * A table's partition moves from one sink task to another (a rebalance of their consumer group) while its batches,
 * a truncate batch among them, wait to be normalized. Two sink connectors share one consumer group here, so that the
 * move is decided by Kafka's range assignor (the member whose id sorts first takes a single-partition topic) rather
 * than by chance: {@code sink-rebal-z} owns the partition until {@code sink-rebal-a} joins its group. From then on
 * exactly one normalize loop may load the table: the one of the task that owns its partition.
 */
class StageSinkRebalanceIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DB = "sink_rebalance_catalog";
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA).build();
    private static String catalogUrl;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase(DB);
        clickhouse = stack.clickhouse().client();
    }

    private static Struct key(long id) {
        return new Struct(KEY).put("id", id);
    }

    private static Struct row(long id) {
        return new Struct(VALUE).put("id", id).put("customer", "c" + id);
    }

    private static Map<String, String> config(String group) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "rebalance");
        config.put("topics", "sinkrebal.x,sinkrebal.y");
        config.put("stage.local.dir", StackPaths.workDir("sink-rebalance-local").toString());
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "1000");
        config.put("consumer.override.group.id", group);
        return config;
    }

    @Test
    void aTableMovedToAnotherTaskDuringATruncateBatchIsLoadedByOneLoopOnly() throws Exception {
        String flow = "flow-rebal";
        List<String> names = List.of("x", "y");
        for (String name : names) {
            // the table cannot be loaded until this test drops this one: every batch waits staged
            clickhouse.execute("CREATE TABLE rebal_" + name + " (id Int64, customer Int64, _tablecdc_version UInt64,"
                    + " _tablecdc_is_deleted UInt8) ENGINE = ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted) ORDER BY id")
                    .get().close();
            String topic = "sinkrebal." + name;
            String table = "rebal." + name;
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
                producer.send(topic, key(1), row(1), Headers.of(flow, table, "c", 1, 1, false));
                producer.send(topic, key(2), row(2), Headers.of(flow, table, "c", 2, 1, true));
                producer.send(topic, null, null, Headers.of(flow, table, "t", 3, 2, false));
                producer.send(topic, key(3), row(3), Headers.of(flow, table, "c", 4, 2, true));
                producer.send(topic, key(4), row(4), Headers.of(flow, table, "c", 5, 3, true));
            }
        }
        // the worker and the object store (S3Mock, a Spring Boot application) start before the capture: starting them
        // configures logging anew, which drops appenders added before
        ConnectRestClient rest = stack.connect().rest();
        String group = "sink-rebal-group";
        Map<String, String> first = config(group);
        Map<String, String> second = config(group);
        try (CdcChecks.LogCapture logs = new CdcChecks.LogCapture()) {
            rest.putConfig("sink-rebal-z", first);
            rest.awaitRunning("sink-rebal-z", 1, Duration.ofSeconds(60));
            for (String name : names) {
                awaitStaged(flow, "rebal." + name, 3, Duration.ofSeconds(60));
                logs.await(1, "WARN", Duration.ofSeconds(60), "normalize of flow " + flow + ", table rebal." + name, "failed");
            }

            // the second connector's task joins the group and takes one partition or both (which depends on the
            // group's assignor); the first one's task loses them while their batches wait
            rest.putConfig("sink-rebal-a", second);
            rest.awaitRunning("sink-rebal-a", 1, Duration.ofSeconds(60));
            List<String> moved = awaitOwned(group, "connector-consumer-sink-rebal-a-0");
            for (String topic : moved) {
                String table = "rebal." + topic.substring("sinkrebal.".length());
                try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers())) {
                    producer.send(topic, key(5), row(5), Headers.of(flow, table, "c", 6, 4, true));
                }
                awaitStaged(flow, table, 4, Duration.ofSeconds(60));
                // the new owner's loop fails at least once before the table is dropped (one WARN per loop's episode,
                // the first owner's was the first): otherwise it may load at its first try and never log "recovered"
                // (a run under load did: recovered 0 times)
                logs.await(2, "WARN", Duration.ofSeconds(60), "normalize of flow " + flow + ", table " + table, "failed");
            }

            for (String name : names) {
                clickhouse.execute("DROP TABLE rebal_" + name).get().close();
            }
            for (String topic : moved) {
                String name = topic.substring("sinkrebal.".length());
                String table = "rebal." + name;
                awaitCatalog(flow, table, "normalized_batch_id::text || '/' || (SELECT count(*) FROM cdc_table_avro_stage s"
                        + " WHERE s.flow_name = r.flow_name AND s.source_table_identifier = r.source_table_identifier)::text",
                        "4/0", Duration.ofSeconds(60));
                // every loop of the table retries within a second (normalize.backoff.max.ms): give a second loop, if
                // there is one, three chances to show itself
                Thread.sleep(3_000);
                assertEquals(1, logs.count("INFO", "normalize of flow " + flow + ", table " + table, "recovered"),
                        "normalize loops of " + table + " that ran and recovered");
                List<String> ids = new ArrayList<>();
                for (GenericRecord r : clickhouse.queryAll("SELECT id FROM rebal_" + name + " FINAL ORDER BY id")) {
                    ids.add(Long.toString(r.getLong("id")));
                }
                assertEquals(List.of("3", "4", "5"), ids, "rows of " + table + " after its truncate batch");
                assertEquals("5", catalogValue(flow, table, "inserts_count::text"), "rows counted (a truncate counts none)");
            }
        } finally {
            for (String connector : List.of("sink-rebal-a", "sink-rebal-z")) {
                if (rest.connectors().contains(connector)) {
                    rest.delete(connector);
                }
            }
        }
    }

    /** Waits until the group member with client id {@code clientId} is assigned a partition; its topics. */
    private static List<String> awaitOwned(String group, String clientId) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        String last = null;
        try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(
                Map.<String, Object>of("bootstrap.servers", stack.kafka().bootstrapServers()))) {
            while (System.nanoTime() < deadline) {
                var description = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                last = description.toString();
                for (var member : description.members()) {
                    if (member.clientId().equals(clientId) && !member.assignment().topicPartitions().isEmpty()) {
                        List<String> topics = new ArrayList<>();
                        member.assignment().topicPartitions().forEach(tp -> topics.add(tp.topic()));
                        return topics;
                    }
                }
                Thread.sleep(300);
            }
        }
        throw new AssertionError(clientId + " never owned a partition in group " + group + "; last " + last);
    }

    private static void awaitStaged(String flow, String table, long batches, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            last = catalogValue(flow, table, "(SELECT count(*) FROM cdc_table_avro_stage s WHERE s.flow_name = r.flow_name"
                    + " AND s.source_table_identifier = r.source_table_identifier)::text");
            if (Long.toString(batches).equals(last)) {
                return;
            }
            Thread.sleep(300);
        }
        throw new AssertionError("staged batches of " + table + " never became " + batches + "; last " + last);
    }

    private static String catalogValue(String flow, String table, String expression) throws Exception {
        try (Connection c = stack.postgres().connect(DB);
             PreparedStatement ps = c.prepareStatement("SELECT " + expression + " FROM cdc_table_replication_state r"
                     + " WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : "(no row)";
            }
        }
    }

    private static void awaitCatalog(String flow, String table, String expression, String expected, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            last = catalogValue(flow, table, expression);
            if (expected.equals(last)) {
                return;
            }
            Thread.sleep(300);
        }
        throw new AssertionError(expression + " of " + flow + "/" + table + " never became '" + expected + "'; last '" + last + "'");
    }
}
