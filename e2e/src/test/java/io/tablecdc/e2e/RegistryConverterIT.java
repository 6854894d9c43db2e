package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalSchemaRegistry;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * The record path production workers use: the Postgres pipeline and the stage sink both with Apicurio's Avro converter
 * (keys and values) against a schema registry, on a worker of their own. Every type of docs/types.md (the columns of
 * {@link PgTypesIT}) and a table keyed by a decimal, a timestamptz and a uuid are copied, then streamed (inserts,
 * updates, deletes); ClickHouse ({@code FINAL}) equals Postgres row for row.
 */
class RegistryConverterIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "regconv_source";

    private static String catalogUrl;
    private static PgChecks pg;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("regconv_catalog");
        clickhouse = stack.clickhouse().client();
        pg = TypedTables.checks(stack, DATABASE, catalogUrl, clickhouse);
    }

    @Test
    void everyTypeSurvivesTheAvroConverterAndTheRegistryCopiedAndStreamed() throws Exception {
        String prefix = "pgrc";
        String flow = "pgrc-flow";
        String sink = "pgrc-sink";
        TypedTables typed = new TypedTables("rc");
        pg.sql("DROP PUBLICATION IF EXISTS pgrc_pub");
        pg.sql(typed.create().toArray(String[]::new));
        pg.sql("CREATE PUBLICATION pgrc_pub FOR TABLE rc.all, rc.keyed");

        LocalSchemaRegistry registry = stack.schemaRegistry();
        ConnectRestClient rest = stack.connectWithSchemaRegistry().rest();
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "pgrc_pub", prefix);
        source.put("table.sync.copy", "all");
        source.put("batch.rows", "3");
        rest.putConfig(sink, registry.withAvroConverters(SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix)));
        rest.putConfig(flow, registry.withAvroConverters(source));
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        rest.awaitRunning(sink, 1, Duration.ofSeconds(90));
        for (String table : new String[] {"rc.all", "rc.keyed"}) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        Map<String, String[]> tables = typed.rows();
        pg.awaitEqual(tables, Duration.ofSeconds(120));

        // streamed: the same values again under new keys, updates (a key column too), deletes
        pg.transaction(typed.changes().toArray(String[]::new));
        pg.awaitEqual(tables, Duration.ofSeconds(120));
        assertEquals(4, pg.postgresRows("rc.all", "id").size());
        assertEquals(2, pg.postgresRows("rc.keyed", "k_n").size());

        // the records went through the registry: the topics' keys and values are Avro with a schema id, not JSON, and
        // the registry holds the schemas the converters registered
        for (String topic : new String[] {prefix + ".rc.all", prefix + ".rc.keyed"}) {
            for (byte[] payload : firstPayloads(topic)) {
                assertEquals(0, payload[0], "a record of " + topic + " does not start with the registry's magic byte");
            }
        }
        // the sink chose the same ClickHouse types as with Kafka's JsonConverter (docs/types.md): the Connect schemas'
        // logical names (Decimal with its scale and precision, io.tablecdc.MicroTimestamp, io.tablecdc.Uuid, …) came
        // through the Avro round trip
        assertEquals(typed.expectedTypes(), typed.actualTypes(clickhouse));

        List<String> artifacts = registryArtifacts(registry);
        for (String expected : new String[] {prefix + ".rc.all-key", prefix + ".rc.all-value", prefix + ".rc.keyed-key",
                prefix + ".rc.keyed-value"}) {
            assertTrue(artifacts.contains(expected), "the registry holds no " + expected + ": " + artifacts);
        }

        rest.delete(flow);
        rest.delete(sink);
    }

    /** The keys and values of the first records of {@code topic} (partition 0), as bytes. */
    private static List<byte[]> firstPayloads(String topic) {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", stack.kafka().bootstrapServers());
        List<byte[]> payloads = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (payloads.size() < 6 && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    if (record.key() != null) {
                        payloads.add(record.key());
                    }
                    if (record.value() != null) {
                        payloads.add(record.value());
                    }
                }
            }
        }
        assertTrue(payloads.size() >= 6, "fewer than 6 keys and values read from " + topic);
        return payloads;
    }

    private static List<String> registryArtifacts(LocalSchemaRegistry registry) throws Exception {
        URI uri = URI.create(registry.url() + "/apis/registry/v3/search/artifacts?limit=1000");
        try (HttpClient http = HttpClient.newHttpClient()) {
            HttpResponse<String> response = http.send(HttpRequest.newBuilder(uri).GET().build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, response.statusCode(), response.body());
            JsonNode found = new ObjectMapper().readTree(response.body()).path("artifacts");
            List<String> ids = new ArrayList<>();
            found.forEach(a -> ids.add(a.path("artifactId").asText()));
            return ids;
        }
    }
}
