package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;
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
        clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user())
                .setPassword(stack.clickhouse().password()).compressServerResponse(false).build();
        // sessions that print intervals as ISO 8601, as the types table says they arrive
        pg = new PgChecks(stack, () -> {
            Connection c = stack.postgres().connect(DATABASE);
            try (Statement s = c.createStatement()) {
                s.execute("SET IntervalStyle = iso_8601");
            }
            return c;
        }, catalogUrl, clickhouse);
    }

    private static final String KEYED_PG = "trim_scale(k_n)::text || '|' || to_char(k_ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
            + " || '|' || k_u::text || '|' || coalesce(v, '-')";
    private static final String KEYED_CH = "concat(toString(k_n), '|', toString(k_ts), '|', toString(k_u), '|', ifNull(v, '-'))";

    @Test
    void everyTypeSurvivesTheAvroConverterAndTheRegistryCopiedAndStreamed() throws Exception {
        String prefix = "pgrc";
        String flow = "pgrc-flow";
        String sink = "pgrc-sink";
        PgTypesIT.AllTypes all = PgTypesIT.AllTypes.in("rc");
        pg.sql("DROP PUBLICATION IF EXISTS pgrc_pub",
                "DROP SCHEMA IF EXISTS rc CASCADE",
                "CREATE SCHEMA rc",
                "CREATE TYPE rc.pair AS (a int, b text)",
                "CREATE DOMAIN rc.posint AS int CHECK (VALUE > 0)",
                "CREATE TYPE rc.mood AS ENUM ('happy', 'sad')",
                all.ddl(),
                all.insert(),
                "INSERT INTO rc.all (id) VALUES (3)",
                "CREATE TABLE rc.keyed (k_n numeric(12,3), k_ts timestamptz, k_u uuid, v text, PRIMARY KEY (k_n, k_ts, k_u))",
                "INSERT INTO rc.keyed VALUES (-1.5, '2024-02-29 12:34:56.123456+05:30', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'a'),"
                        + " (123456789.001, '1970-01-01 00:00:00+00', '00000000-0000-0000-0000-000000000000', NULL)",
                "CREATE PUBLICATION pgrc_pub FOR TABLE rc.all, rc.keyed");

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
        Map<String, String[]> tables = new LinkedHashMap<>();
        tables.put("rc.all", new String[] {all.pgRow(), all.chRow()});
        tables.put("rc.keyed", new String[] {KEYED_PG, KEYED_CH});
        pg.awaitEqual(tables, Duration.ofSeconds(120));

        // streamed: the same values again under new keys, updates (a key column too), deletes
        pg.transaction("INSERT INTO rc.all SELECT id + 100" + all.names() + " FROM rc.all",
                "UPDATE rc.all SET t = t || '!', i4 = i4 - 1, n = 0.01, ai = ai || 4, f8i = '-Infinity', af8 = af8 || 'NaN'::float8"
                        + " WHERE id = 101",
                "UPDATE rc.all SET tz = NULL, j = NULL, by = '\\xdeadbeef' WHERE id = 102",
                "DELETE FROM rc.all WHERE id IN (2, 103)",
                "INSERT INTO rc.keyed VALUES (0.001, '2299-12-31 23:59:59.999999+00', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'c')",
                "UPDATE rc.keyed SET v = 'b' WHERE k_n = -1.5",
                "UPDATE rc.keyed SET k_n = 7.25 WHERE k_n = 123456789.001",
                "DELETE FROM rc.keyed WHERE k_n = -1.5");
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
        Map<String, String> expectedTypes = new LinkedHashMap<>();
        expectedTypes.put("rc_all.id", "Int32");
        expectedTypes.put("rc_all.n", "Nullable(Decimal(10, 2))");
        expectedTypes.put("rc_all.nfree", "Nullable(String)");
        expectedTypes.put("rc_all.nwide", "Nullable(String)");
        expectedTypes.put("rc_all.f4", "Nullable(Float32)");
        expectedTypes.put("rc_all.f8", "Nullable(Float64)");
        expectedTypes.put("rc_all.i2", "Nullable(Int16)");
        expectedTypes.put("rc_all.o", "Nullable(Int64)");
        expectedTypes.put("rc_all.b", "Nullable(Bool)");
        expectedTypes.put("rc_all.by", "Nullable(String)");
        expectedTypes.put("rc_all.u", "Nullable(UUID)");
        expectedTypes.put("rc_all.j", "Nullable(String)");
        expectedTypes.put("rc_all.jb", "Nullable(String)");
        expectedTypes.put("rc_all.d", "Nullable(Date32)");
        expectedTypes.put("rc_all.ts", "Nullable(DateTime64(6, 'UTC'))");
        expectedTypes.put("rc_all.tz", "Nullable(DateTime64(6, 'UTC'))");
        expectedTypes.put("rc_all.tm", "Nullable(Int64)");
        expectedTypes.put("rc_all.ai", "Array(Nullable(Int32))");
        expectedTypes.put("rc_all.af8", "Array(Nullable(Float64))");
        expectedTypes.put("rc_keyed.k_n", "Decimal(12, 3)");
        expectedTypes.put("rc_keyed.k_ts", "DateTime64(6, 'UTC')");
        expectedTypes.put("rc_keyed.k_u", "UUID");
        Map<String, String> actualTypes = new LinkedHashMap<>();
        for (GenericRecord r : clickhouse.queryAll("SELECT concat(table, '.', name) AS c, type FROM system.columns"
                + " WHERE database = currentDatabase() AND table IN ('rc_all', 'rc_keyed')")) {
            if (expectedTypes.containsKey(r.getString("c"))) {
                actualTypes.put(r.getString("c"), r.getString("type"));
            }
        }
        assertEquals(new java.util.TreeMap<>(expectedTypes), new java.util.TreeMap<>(actualTypes));

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
