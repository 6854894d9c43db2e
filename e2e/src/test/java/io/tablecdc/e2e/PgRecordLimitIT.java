package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.config.ConfigResource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.flows.StatusScript;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * Rows against Kafka's record size limit (issue 45 item 1, issue 35 item 6), with row records (JsonConverter) and with
 * {@code record.format=blocks} (ByteArrayConverter), on the defaults ({@code max.request.size} 1 MiB):
 * <ul>
 * <li>a 3 MiB row in a copied table: its copy stops, the table is {@code errored} with the row's size, the table and the
 * settings that allow it, in the catalog and in {@code tablecdc-status}; no task dies, a neighbour streams on;</li>
 * <li>a 3 MiB row streamed into a ready table: only that table stops (same error), the neighbour streams on;</li>
 * <li>300 KiB rows copied and streamed, and (blocks) a transaction of 240 KiB of small rows followed by an 800 KiB row,
 * which a block closed only at {@code record.block.bytes} would have made one record above the limit: all arrive
 * exactly;</li>
 * <li>the remedy: {@code producer.override.max.request.size} and the topics' {@code max.message.bytes} raised, the
 * tables reset with {@code tablecdc-reset-table}: both arrive exactly.</li>
 * </ul>
 */
class PgRecordLimitIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "limit_source";
    private static final String BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter";
    private static final String MD5 = "id::text || '|' || length(v)::text || '|' || md5(v)";
    private static final String MD5_CH = "concat(toString(id), '|', toString(length(v)), '|', lower(hex(MD5(v))))";
    private static final int BIG = 3 * 1024 * 1024;

    private static String catalogUrl;
    private static PgChecks pg;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("limit_catalog");
        clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
    }

    @Test
    void rowRecords() throws Exception {
        limits("limr", false);
    }

    @Test
    void blocks() throws Exception {
        limits("limb", true);
    }

    /** {@code n} characters of text that do not compress away (md5s), depending on {@code seed}. */
    private static String text(String seed, int n) {
        return "(SELECT left(string_agg(md5(" + seed + "::text || '-' || i::text), ''), " + n + ") FROM generate_series(1, "
                + (n / 32 + 1) + ") i)";
    }

    private void limits(String schema, boolean blocks) throws Exception {
        String flow = schema + "-flow";
        String sink = schema + "-sink";
        String prefix = schema;
        String pub = schema + "_pub";
        pg.sql("DROP PUBLICATION IF EXISTS " + pub,
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + schema + ".huge (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE TABLE " + schema + ".late (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE TABLE " + schema + ".mid (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE TABLE " + schema + ".other (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO " + schema + ".huge SELECT g, " + text("g", 100) + " FROM generate_series(1, 3) g",
                "INSERT INTO " + schema + ".huge VALUES (4, " + text("4", BIG) + ")",
                "INSERT INTO " + schema + ".late SELECT g, 'small ' || g FROM generate_series(1, 3) g",
                "INSERT INTO " + schema + ".mid SELECT g, " + text("g", 300 * 1024) + " FROM generate_series(1, 3) g",
                "INSERT INTO " + schema + ".other SELECT g, 'o' || g FROM generate_series(1, 10) g",
                "CREATE PUBLICATION " + pub + " FOR TABLE " + schema + ".huge, " + schema + ".late, " + schema + ".mid, "
                        + schema + ".other");

        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, pub, prefix);
        source.put("table.sync.copy", "all");
        source.put("tasks.max", "2");
        source.put("max.table.retries", "0");
        Map<String, String> sinkConfig = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);
        if (blocks) {
            source.put("record.format", "blocks");
            source.put("value.converter", BYTES);
            sinkConfig.put("value.converter", BYTES);
        }
        rest.putConfig(sink, sinkConfig);
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        rest.awaitRunning(sink, 1, Duration.ofSeconds(90));

        // the copy meets the 3 MiB row: its table stops with the reason, nothing else does
        Map<String, String> huge = pg.awaitTable(flow, schema + ".huge", row -> "errored".equals(row.get("phase")),
                Duration.ofSeconds(120));
        String error = huge.get("last_error");
        System.out.printf("%s: %s errored: %s%n", schema, schema + ".huge", error);
        assertTrue(error != null && error.contains(schema + ".huge") && error.contains("producer.override.max.request.size")
                && error.contains("max.message.bytes") && error.contains("1048576"), String.valueOf(error));
        assertTrue(error.matches("(?s).*\\b3[0-9]{6}\\b.*bytes.*"), "the row's size in bytes: " + error);
        for (String table : new String[] {".late", ".mid", ".other"}) {
            pg.awaitTable(flow, schema + table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        // tablecdc-status: the table view shows the start of the error, --json all of it
        String status = StatusScript.run(stack, catalogUrl, "--flow", flow);
        System.out.println(status);
        assertTrue(status.matches("(?s).*" + schema + "\\.huge +errored .*a row of about 3[0-9]{6} bytes.*"), status);
        String json = StatusScript.run(stack, catalogUrl, "--flow", flow, "--json");
        assertTrue(json.contains("producer.override.max.request.size") && json.contains("max.message.bytes"), json);

        // streamed: 300 KiB rows (and, for blocks, 240 KiB of small rows then an 800 KiB row in one transaction); a
        // 3 MiB row into a ready table stops that table only; the neighbour streams on
        pg.sql("INSERT INTO " + schema + ".mid SELECT g, " + text("g", 300 * 1024) + " FROM generate_series(10, 12) g");
        pg.transaction("INSERT INTO " + schema + ".mid SELECT g, " + text("g", 1200) + " FROM generate_series(100, 299) g",
                "INSERT INTO " + schema + ".mid VALUES (300, " + text("300", 800 * 1024) + ")",
                "INSERT INTO " + schema + ".mid SELECT g, " + text("g", 1200) + " FROM generate_series(301, 310) g");
        pg.sql("INSERT INTO " + schema + ".late VALUES (4, " + text("44", BIG) + ")");
        Map<String, String> late = pg.awaitTable(flow, schema + ".late", row -> "errored".equals(row.get("phase")),
                Duration.ofSeconds(120));
        System.out.printf("%s: %s errored: %s%n", schema, schema + ".late", late.get("last_error"));
        assertTrue(late.get("last_error").contains(schema + ".late")
                && late.get("last_error").contains("producer.override.max.request.size"), late.toString());
        pg.sql("INSERT INTO " + schema + ".other SELECT g, 'o' || g FROM generate_series(11, 20) g",
                "INSERT INTO " + schema + ".late VALUES (5, 'after')");
        Map<String, String[]> flowing = new LinkedHashMap<>();
        flowing.put(schema + ".mid", new String[] {MD5, MD5_CH});
        flowing.put(schema + ".other", new String[] {MD5, MD5_CH});
        pg.awaitEqual(flowing, Duration.ofSeconds(120));
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), rest.states(flow), "no task of the flow died");

        // the remedy: the limits raised, both tables copied again
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", stack.kafka().bootstrapServers()))) {
            java.util.Set<String> topics = admin.listTopics().names().get();
            for (String table : new String[] {".huge", ".late"}) {
                String name = prefix + "." + schema + table;
                if (!topics.contains(name)) {
                    // nothing of the table ever reached Kafka (its copy stopped at the row before sending its batch)
                    admin.createTopics(List.of(new NewTopic(name, 1, (short) 1)
                            .configs(Map.of("max.message.bytes", "8388608")))).all().get();
                    continue;
                }
                ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, name);
                admin.incrementalAlterConfigs(Map.of(topic, List.of(new AlterConfigOp(
                        new ConfigEntry("max.message.bytes", "8388608"), AlterConfigOp.OpType.SET)))).all().get();
            }
        }
        source.put("producer.override.max.request.size", "8388608");
        rest.putConfig(flow, source);
        Thread.sleep(2_000);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        for (String table : new String[] {".huge", ".late"}) {
            String reset = StatusScript.resetTable(stack, catalogUrl, flow, schema + table);
            System.out.printf("%s: reset %s: %s%n", schema, table, reset);
        }
        Map<String, String[]> all = new LinkedHashMap<>(flowing);
        all.put(schema + ".huge", new String[] {MD5, MD5_CH});
        all.put(schema + ".late", new String[] {MD5, MD5_CH});
        pg.awaitEqual(all, Duration.ofSeconds(180));
        // catchup(m) becomes ready(m) once the flow's acknowledged position passes m, which follows the rows' arrival in
        // ClickHouse by a refresh of the apply task (a heartbeat when the flow is quiet): awaited, not sampled
        for (String table : new String[] {".huge", ".late"}) {
            pg.awaitTable(flow, schema + table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(60));
        }
        rest.delete(flow);
        rest.delete(sink);
    }

    /**
     * A copy task that Kafka kills (issue 45 item 1, "whatever kills a task must show on its table"): the table's topic
     * takes less than the producer sends (its max.message.bytes 100 kB, a 300 KiB row, max.request.size at its
     * default), so the broker refuses the record and Connect fails the copy task. Before: the table went back to pending
     * with no error. Now its row says that the copy task stopped with records Kafka did not acknowledge and where the
     * cause is; with the topic's limit raised and the task restarted, the table is copied and the note is gone.
     */
    @Test
    void aCopyTaskKafkaKillsLeavesAnErrorOnItsTable() throws Exception {
        String schema = "limk";
        String flow = schema + "-flow";
        String sink = schema + "-sink";
        String prefix = schema;
        pg.sql("DROP PUBLICATION IF EXISTS limk_pub",
                "DROP SCHEMA IF EXISTS limk CASCADE",
                "CREATE SCHEMA limk",
                "CREATE TABLE limk.big (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE TABLE limk.other (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO limk.big SELECT g, " + text("g", 300 * 1024) + " FROM generate_series(1, 2) g",
                "CREATE PUBLICATION limk_pub FOR TABLE limk.big, limk.other");
        String topic = prefix + ".limk.big";
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", stack.kafka().bootstrapServers()))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(Map.of("max.message.bytes", "100000"))))
                    .all().get();
        }
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "limk_pub", prefix);
        // the neighbour is not copied: it streams from the apply task while the flow's one copy task is down
        source.put("table.sync.copy", "except:limk.other");
        source.put("tasks.max", "2");
        rest.putConfig(sink, SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix));
        rest.putConfig(flow, source);
        rest.awaitRunning(sink, 1, Duration.ofSeconds(90));
        Map<String, String> big = pg.awaitTable(flow, "limk.big", row -> row.get("last_error") != null,
                Duration.ofSeconds(120));
        System.out.printf("%s: limk.big after its copy task failed: %s%n", schema, big);
        assertTrue(big.get("last_error").contains("not acknowledged by Kafka")
                && big.get("last_error").contains("max.message.bytes of topic " + topic), big.toString());
        // the dying task writes the table's error before Connect records the task FAILED: awaited, not sampled (a full
        // run saw the error with the task still RUNNING, and FAILED a moment later)
        rest.awaitStatus(flow, st -> {
            for (com.fasterxml.jackson.databind.JsonNode task : st.path("tasks")) {
                if ("FAILED".equals(task.path("state").asText())) {
                    return true;
                }
            }
            return false;
        }, Duration.ofSeconds(60));
        String status = StatusScript.run(stack, catalogUrl, "--flow", flow);
        System.out.println(status);
        assertTrue(status.matches("(?s).*limk\\.big .*copy task stopped with.*"), status);
        pg.awaitTable(flow, "limk.other", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        pg.sql("INSERT INTO limk.other SELECT g, 'o' || g FROM generate_series(1, 10) g");
        pg.awaitEqual(Map.of("limk.other", new String[] {MD5, MD5_CH}), Duration.ofSeconds(120));

        // the remedy: the topic takes the rows, the failed task restarted
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", stack.kafka().bootstrapServers()))) {
            admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.TOPIC, topic), List.of(
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "8388608"), AlterConfigOp.OpType.SET))))
                    .all().get();
        }
        rest.restart(flow, true, true);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        Map<String, String> ready = pg.awaitTable(flow, "limk.big", row -> "ready".equals(row.get("phase")),
                Duration.ofSeconds(120));
        assertEquals(null, ready.get("last_error"), ready.toString());
        pg.awaitEqual(Map.of("limk.big", new String[] {MD5, MD5_CH}, "limk.other", new String[] {MD5, MD5_CH}),
                Duration.ofSeconds(120));
        rest.delete(flow);
        rest.delete(sink);
    }
}
