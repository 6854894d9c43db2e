package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
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

/** Records the sink cannot take must reach the dead letter queue without blocking their table. */
class StageSinkBadInputIT {
    private static final LocalStack stack = LocalStack.get();
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA).build();
    /** A value without the key's column: such a record cannot become a row. */
    private static final Schema KEYLESS_VALUE = SchemaBuilder.struct().name("bad").field("customer", Schema.STRING_SCHEMA).build();
    private static String catalogUrl;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase("sink_bad_input_catalog");
        clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user())
                .setPassword(stack.clickhouse().password()).compressServerResponse(false).build();
    }

    private static Struct key(long id) {
        return new Struct(KEY).put("id", id);
    }

    private static Struct row(long id) {
        return new Struct(VALUE).put("id", id).put("customer", "c" + id);
    }

    private static Map<String, String> config(String name, String topic, String dlq) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, name);
        config.put("topics", topic);
        config.put("stage.local.dir", StackPaths.workDir("sink-bad-input-local").toString());
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "1000");
        config.put("errors.tolerance", "all");
        config.put("errors.deadletterqueue.topic.name", dlq);
        config.put("errors.deadletterqueue.topic.replication.factor", "1");
        config.put("errors.deadletterqueue.context.headers.enable", "true");
        return config;
    }

    @Test
    void aBadLastRecordOfABatchGoesToTheDeadLetterQueueAndItsBatchIsStagedWithoutIt() throws Exception {
        String flow = "flow-badlast";
        String topic = "sinkbad.last";
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, key(1), row(1), Headers.of(flow, "badlast.t", "c", 1, 1, false));
            producer.send(topic, key(2), new Struct(KEYLESS_VALUE).put("customer", "no id"), Headers.of(flow, "badlast.t", "c", 2, 1, true));
        }
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-badlast", config("badlast", topic, "sinkbad.last.dlq"));
        rest.awaitRunning("sink-badlast", 1, Duration.ofSeconds(60));
        // no later batch comes: batch 1 must be staged and loaded on its own
        awaitRows("SELECT id FROM badlast_t FINAL ORDER BY id", rows -> rows.size() == 1, Duration.ofSeconds(60));
        List<String> errors = deadLetters("sinkbad.last.dlq");
        assertEquals(1, errors.size(), errors.toString());
        assertTrue(errors.get(0).contains("key column id"), errors.get(0));
        rest.delete("sink-badlast");
    }

    @Test
    void aBatchHeaderThatIsNotAPositiveIntegerGoesToTheDeadLetterQueueAndTheTableGoesOn() throws Exception {
        String flow = "flow-badbatch";
        String topic = "sinkbad.batch";
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, key(1), row(1), Headers.of(flow, "badbatch.t", "c", 1, 0, true));
            Map<String, String> notANumber = Headers.of(flow, "badbatch.t", "c", 2, 1, true);
            notANumber.put("tablecdc.batch", "one");
            producer.send(topic, key(2), row(2), notANumber);
            producer.send(topic, key(3), row(3), Headers.of(flow, "badbatch.t", "c", 3, 2, true));
        }
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-badbatch", config("badbatch", topic, "sinkbad.batch.dlq"));
        rest.awaitRunning("sink-badbatch", 1, Duration.ofSeconds(60));
        awaitRows("SELECT id FROM badbatch_t FINAL ORDER BY id", rows -> rows.size() == 1 && rows.get(0).getLong("id") == 3,
                Duration.ofSeconds(60));
        List<String> errors = deadLetters("sinkbad.batch.dlq");
        assertEquals(2, errors.size(), errors.toString());
        assertTrue(errors.get(0).contains("tablecdc.batch") && errors.get(0).contains("'0'"), errors.get(0));
        assertTrue(errors.get(1).contains("tablecdc.batch") && errors.get(1).contains("'one'"), errors.get(1));
        assertEquals(List.of("RUNNING", "RUNNING"), rest.states("sink-badbatch"));
        rest.delete("sink-badbatch");
    }

    @Test
    void aTopicWithSeveralPartitionsIsRefusedNamingTheTopic() throws Exception {
        String topic = "sinkbad.parts";
        try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(
                Map.<String, Object>of("bootstrap.servers", stack.kafka().bootstrapServers()))) {
            admin.createTopics(List.of(new org.apache.kafka.clients.admin.NewTopic(topic, 2, (short) 1))).all()
                    .get(30, java.util.concurrent.TimeUnit.SECONDS);
        }
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers())) {
            producer.send(topic, key(1), row(1), Headers.of("flow-parts", "parts.t", "c", 1, 1, true));
        }
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("sink-parts", config("parts", topic, "sinkbad.parts.dlq"));
        com.fasterxml.jackson.databind.JsonNode status = rest.awaitStatus("sink-parts", s -> {
            for (com.fasterxml.jackson.databind.JsonNode task : s.path("tasks")) {
                if ("FAILED".equals(task.path("state").asText())) {
                    return true;
                }
            }
            return false;
        }, Duration.ofSeconds(60));
        String trace = status.path("tasks").get(0).path("trace").asText();
        assertTrue(trace.contains("topic sinkbad.parts has more than one partition") && trace.contains("Recreate sinkbad.parts with one partition"),
                trace);
        rest.delete("sink-parts");
    }

    private static List<GenericRecord> awaitRows(String sql, java.util.function.Predicate<List<GenericRecord>> done, Duration timeout)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        List<GenericRecord> rows = new ArrayList<>();
        String lastError = null;
        while (System.nanoTime() < deadline) {
            try {
                rows = clickhouse.queryAll(sql);
                if (done.test(rows)) {
                    return rows;
                }
            } catch (RuntimeException e) {
                lastError = e.getMessage();
            }
            Thread.sleep(300);
        }
        throw new AssertionError("ClickHouse never answered as expected: " + sql + "; last rows " + rows.size()
                + (lastError == null ? "" : "; last error " + lastError));
    }

    /** The error messages of the records in a dead letter queue, read once it has any (or after 30 s). */
    private static List<String> deadLetters(String topic) {
        Properties props = new Properties();
        props.put("bootstrap.servers", stack.kafka().bootstrapServers());
        props.put("group.id", "dlq-reader-" + System.nanoTime());
        props.put("auto.offset.reset", "earliest");
        List<String> errors = new ArrayList<>();
        try (var consumer = new KafkaConsumer<byte[], byte[]>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            boolean seen = false;
            while (System.nanoTime() < deadline) {
                var records = consumer.poll(Duration.ofMillis(300));
                for (var record : records) {
                    var header = record.headers().lastHeader("__connect.errors.exception.message");
                    errors.add(header == null ? "(no message)" : new String(header.value(), StandardCharsets.UTF_8));
                }
                if (seen && records.isEmpty()) {
                    break;
                }
                seen = !errors.isEmpty();
            }
        }
        return errors;
    }
}
