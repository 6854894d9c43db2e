package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
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
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Connect's common single message transforms on the stage sink, end to end on the local stack: a {@code RegexRouter}
 * renaming the topic, a {@code Filter} dropping records (with a {@code HasHeaderKey} predicate), and header
 * manipulation ({@code InsertHeader}, {@code DropHeaders}). The rows that pass reach ClickHouse, the dropped one does
 * not, and the sink commits its offsets on the topic it consumes (not the renamed one).
 */
class SmtIT {
    private static final LocalStack stack = LocalStack.get();
    private static final Schema KEY = SchemaBuilder.struct().name("smt_key").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("smt_value")
            .field("id", Schema.INT64_SCHEMA).field("name", Schema.STRING_SCHEMA).build();
    private static String catalogUrl;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase("smt_catalog");
    }

    private static void send(RecordProducer producer, String topic, long id, long batch, boolean last, boolean drop) throws Exception {
        Map<String, String> headers = new HashMap<>(Headers.of("flow-smt", "smtit.items", "c", id, batch, last));
        if (drop) {
            headers.put("smt.drop", "yes");
        }
        producer.send(topic, new Struct(KEY).put("id", id), new Struct(VALUE).put("id", id).put("name", "n" + id), headers);
    }

    @Test
    void routedFilteredAndHeaderTransformedRecordsLoadAndTheirOffsetsCommit() throws Exception {
        String topic = "smtit.src.items";
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            send(producer, topic, 1, 1, false, false);
            send(producer, topic, 2, 1, false, true);   // dropped by the Filter
            send(producer, topic, 3, 1, true, false);
            send(producer, topic, 4, 2, true, false);
        }
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "smt-stage");
        config.put("topics", topic);
        config.put("stage.local.dir", StackPaths.workDir("smt-sink-local").toString());
        config.put("transforms", "route,drop,tag,untag");
        config.put("transforms.route.type", "org.apache.kafka.connect.transforms.RegexRouter");
        config.put("transforms.route.regex", "smtit\\.src\\.(.*)");
        config.put("transforms.route.replacement", "renamed.$1");
        config.put("transforms.drop.type", "org.apache.kafka.connect.transforms.Filter");
        config.put("transforms.drop.predicate", "hasDrop");
        config.put("transforms.tag.type", "org.apache.kafka.connect.transforms.InsertHeader");
        config.put("transforms.tag.header", "smt.tag");
        config.put("transforms.tag.value.literal", "tagged");
        config.put("transforms.untag.type", "org.apache.kafka.connect.transforms.DropHeaders");
        config.put("transforms.untag.headers", "smt.tag");
        config.put("predicates", "hasDrop");
        config.put("predicates.hasDrop.type", "org.apache.kafka.connect.transforms.predicates.HasHeaderKey");
        config.put("predicates.hasDrop.name", "smt.drop");
        stack.connect().rest().putConfig("smt-sink", config);
        stack.connect().rest().awaitRunning("smt-sink", 1, Duration.ofSeconds(60));

        awaitCatalog("normalized_batch_id::text", "2", Duration.ofSeconds(90));
        assertEquals(topic, catalog("sink_topic"), "the catalog names the consumed topic");
        try (Client clickhouse = stack.clickhouse().client()) {
            List<String> ids = new ArrayList<>();
            for (GenericRecord row : clickhouse.queryAll("SELECT id FROM smtit_items_current ORDER BY id")) {
                ids.add(Long.toString(row.getLong("id")));
            }
            assertEquals(List.of("1", "3", "4"), ids);
        }
        // every record is staged and loaded: the sink's committed offset of the consumed partition reaches its end (4)
        Properties admin = new Properties();
        admin.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, stack.kafka().bootstrapServers());
        try (Admin a = Admin.create(admin)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
            Long committed = null;
            while (System.nanoTime() < deadline) {
                OffsetAndMetadata o = a.listConsumerGroupOffsets("connect-smt-sink").partitionsToOffsetAndMetadata().get().get(tp);
                committed = o == null ? null : o.offset();
                if (committed != null && committed == 4) {
                    break;
                }
                Thread.sleep(500);
            }
            assertEquals(Long.valueOf(4), committed, "committed offset of " + tp);
        } finally {
            stack.connect().rest().delete("smt-sink");
        }
    }

    private static String catalog(String column) throws Exception {
        try (Connection c = stack.postgres().connect("smt_catalog");
             PreparedStatement ps = c.prepareStatement("SELECT " + column + " FROM cdc_table_replication_state"
                     + " WHERE flow_name = 'flow-smt' AND source_table_identifier = 'smtit.items'");
             ResultSet rs = ps.executeQuery()) {
            return rs.next() ? rs.getString(1) : "(no row)";
        }
    }

    private static void awaitCatalog(String column, String expected, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            last = catalog(column);
            if (expected.equals(last)) {
                return;
            }
            Thread.sleep(300);
        }
        throw new AssertionError(column + " never became '" + expected + "'; last '" + last + "'");
    }
}
