package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.types.Password;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogConfig.CatalogSettings;
import io.tablecdc.catalog.FlowIdentity;
import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * A flow started over (operations.md: its catalog rows gone, its source's offsets deleted) counts its batch ids from 1
 * again. ClickHouse remembers the deduplication tokens of the last {@code clickhouse.deduplication.window} loads of a
 * table; before, a token was the flow, the table, the batch id, the part and the row count, so the new flow's batch 1
 * of as many rows as the old flow's batch 1 was skipped as a repeat of it: recorded as loaded, its rows never in
 * ClickHouse. Tokens now carry the flow's incarnation (when its catalog row was made).
 */
class StageSinkStartOverIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DB = "sink_startover_catalog";
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
            .field("note", Schema.STRING_SCHEMA).build();
    private static String catalogUrl;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase(DB);
        clickhouse = stack.clickhouse().client();
    }

    @AfterAll
    static void stop() {
        if (clickhouse != null) {
            clickhouse.close();
        }
    }

    @Test
    void aFlowStartedOverIsLoadedThoughItsBatchIdsCountFromOneAgain() throws Exception {
        String flow = "flow-startover";
        String table = "startover.t";
        String topic = "startover.t";
        String connector = "sink-startover";
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "startover");
        config.put("topics", topic);
        config.put("stage.local.dir", StackPaths.workDir("sink-startover-local").toString());
        CatalogSettings settings = new CatalogSettings(catalogUrl, stack.postgres().user(),
                new Password(stack.postgres().password()), true, 2, 5_000);
        ConnectRestClient rest = stack.connect().rest();
        try (Catalog catalog = Catalog.open(settings, "startover-test")) {
            // the source registers its flow, then sends batch 1
            catalog.flows().registerFlow(flow, FlowIdentity.ofKind("postgres_pipeline"), null);
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
                producer.send(topic, new Struct(KEY).put("id", 1L), new Struct(VALUE).put("id", 1L).put("note", "first flow"),
                        Headers.of(flow, table, "c", 1, 1, true));
            }
            rest.putConfig(connector, config);
            rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
            awaitRows(List.of("1|first flow"), Duration.ofSeconds(60));
            rest.delete(connector);

            // started over: the flow's catalog rows are gone; the source registers it again and sends its batch 1
            try (Connection c = stack.postgres().connect(DB)) {
                for (String sql : new String[] {"DELETE FROM cdc_table_avro_stage WHERE flow_name = ?",
                    "DELETE FROM cdc_table_replication_state WHERE flow_name = ?", "DELETE FROM cdc_flow WHERE flow_name = ?"}) {
                    try (PreparedStatement ps = c.prepareStatement(sql)) {
                        ps.setString(1, flow);
                        ps.executeUpdate();
                    }
                }
            }
            catalog.flows().registerFlow(flow, FlowIdentity.ofKind("postgres_pipeline"), null);
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
                producer.send(topic, new Struct(KEY).put("id", 2L), new Struct(VALUE).put("id", 2L).put("note", "started over"),
                        Headers.of(flow, table, "c", 1, 1, true));
            }
            rest.putConfig(connector, config);
            rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
            try {
                awaitRows(List.of("1|first flow", "2|started over"), Duration.ofSeconds(90));
            } finally {
                System.out.println("startover: catalog row " + catalog.progress().getTable(flow, table).orElse(null));
            }
            assertEquals(List.of("RUNNING", "RUNNING"), rest.states(connector));
            rest.delete(connector);
        }
    }

    private static void awaitRows(List<String> expected, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        List<String> last = null;
        while (System.nanoTime() < deadline) {
            try {
                last = clickhouse.queryAll("SELECT concat(toString(id), '|', note) AS r FROM startover_t FINAL ORDER BY id")
                        .stream().map(r -> r.getString("r")).toList();
                if (last.equals(expected)) {
                    return;
                }
            } catch (RuntimeException e) {
                last = List.of(e.getMessage());
            }
            Thread.sleep(300);
        }
        throw new AssertionError("startover_t never held " + expected + "; last " + last);
    }
}
