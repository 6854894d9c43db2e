package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * {@code record.format=blocks}: the Postgres pipeline sends blocks of rows with {@code ByteArrayConverter} and the stage
 * sink unpacks them, on the stack's worker whose default converter is JsonConverter (set per connector, as a user
 * does). Every type of docs/types.md (the columns of {@link PgTypesIT}), a table keyed by a decimal, a timestamptz and a
 * uuid, a table of 600 rows whose batches span several blocks, and a table with unchanged TOAST values are copied, then
 * streamed (inserts, updates, deletes, a truncate, updates that leave a TOAST value untouched); ClickHouse
 * ({@code FINAL}) equals Postgres row for row, with the column types the row records give.
 */
class RecordBlocksIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "blocks_source";
    private static final String BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter";

    private static String catalogUrl;
    private static PgChecks pg;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("blocks_catalog");
        clickhouse = stack.clickhouse().client();
        pg = TypedTables.checks(stack, DATABASE, catalogUrl, clickhouse);
    }
    private static final String BULK = "id::text || '|' || v";
    private static final String BULK_CH = "concat(toString(id), '|', v)";
    private static final String TOAST_PG = "id::text || '|' || n::text || '|' || md5(body)";
    private static final String TOAST_CH = "concat(toString(id), '|', toString(n), '|', lower(hex(MD5(body))))";

    /** About 40 KB of text that depends on {@code seed}, stored out of line: a TOAST value. */
    private static String body(String seed) {
        return "(SELECT string_agg(md5(" + seed + "::text || '-' || i::text), '') FROM generate_series(1, 1250) i)";
    }

    @Test
    void blocksOfRowsArriveAsTheRowsTheyHoldCopiedAndStreamed() throws Exception {
        String prefix = "pgblk";
        String flow = "pgblk-flow";
        String sink = "pgblk-sink";
        TypedTables typed = new TypedTables("blk");
        pg.sql("DROP PUBLICATION IF EXISTS pgblk_pub");
        pg.sql(typed.create().toArray(String[]::new));
        pg.sql("CREATE TABLE blk.bulk (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO blk.bulk SELECT g, repeat(md5(g::text), 2) FROM generate_series(1, 600) g",
                "CREATE TABLE blk.toast (id bigint PRIMARY KEY, n int NOT NULL, body text)",
                "ALTER TABLE blk.toast ALTER COLUMN body SET STORAGE EXTERNAL",
                "INSERT INTO blk.toast SELECT g, 0, " + body("g") + " FROM generate_series(1, 5) g",
                "CREATE PUBLICATION pgblk_pub FOR TABLE blk.all, blk.keyed, blk.bulk, blk.toast");

        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "pgblk_pub", prefix);
        source.put("table.sync.copy", "all");
        source.put("batch.rows", "250");
        source.put("record.format", "blocks");
        source.put("record.block.bytes", "4096");
        source.put("value.converter", BYTES);
        Map<String, String> sinkConfig = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);
        sinkConfig.put("value.converter", BYTES);
        rest.putConfig(sink, sinkConfig);
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        rest.awaitRunning(sink, 1, Duration.ofSeconds(90));
        for (String table : new String[] {"blk.all", "blk.keyed", "blk.bulk", "blk.toast"}) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        Map<String, String[]> tables = typed.rows();
        tables.put("blk.bulk", new String[] {BULK, BULK_CH});
        tables.put("blk.toast", new String[] {TOAST_PG, TOAST_CH});
        pg.awaitEqual(tables, Duration.ofSeconds(120));

        // streamed: the same values again under new keys, updates (a key column too), deletes, a truncate and rows after
        // it, and updates that leave the TOAST value untouched (the sink takes it from the rows loaded before)
        List<String> changes = typed.changes();
        changes.addAll(List.of("UPDATE blk.bulk SET v = 'updated ' || id WHERE id % 3 = 0",
                "DELETE FROM blk.bulk WHERE id % 7 = 0",
                "UPDATE blk.toast SET n = n + 1",
                "UPDATE blk.toast SET n = n + 1 WHERE id <= 2"));
        pg.transaction(changes.toArray(String[]::new));
        pg.transaction("TRUNCATE blk.bulk",
                "INSERT INTO blk.bulk SELECT g, 'after ' || g FROM generate_series(1000, 1400) g");
        pg.sql("UPDATE blk.toast SET body = " + body("(id + 10)") + " WHERE id = 3",
                "UPDATE blk.toast SET n = 9 WHERE id = 3");
        pg.awaitEqual(tables, Duration.ofSeconds(120));
        assertEquals(4, pg.postgresRows("blk.all", "id").size());
        assertEquals(401, pg.postgresRows("blk.bulk", "id").size());
        assertEquals(List.of("1|2", "2|2", "3|9", "4|1", "5|1"),
                pg.clickHouseRows("blk.toast", "concat(toString(id), '|', toString(n))"));

        // the topics hold blocks: values in the block form, marked, several rows each, the last of a batch marked
        BlockCount bulk = blocks(prefix + ".blk.bulk");
        assertTrue(bulk.records > 0 && bulk.records == bulk.marked, prefix + ".blk.bulk: " + bulk);
        assertTrue(bulk.records < 600 / 10, "600 copied rows in " + bulk.records + " records: " + bulk);
        assertTrue(bulk.lastOfBatch >= 4, "the copy's 600 rows make 3 batches, the stream more: " + bulk);
        // the sink chose the ClickHouse types the row records give (docs/types.md)
        assertEquals(typed.expectedTypes(), typed.actualTypes(clickhouse));

        rest.delete(flow);
        rest.delete(sink);
    }

    private record BlockCount(int records, int marked, int lastOfBatch) {
    }

    /** The records of {@code topic}: how many, how many start with the block form and are marked, how many end a batch. */
    private static BlockCount blocks(String topic) {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", stack.kafka().bootstrapServers());
        int records = 0;
        int marked = 0;
        int last = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (consumer.position(partition) < end && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    records++;
                    Header block = record.headers().lastHeader("tablecdc.block");
                    byte[] v = record.value();
                    if (block != null && "1".equals(new String(block.value(), java.nio.charset.StandardCharsets.UTF_8))
                            && v != null && v.length > 4 && v[0] == 'T' && v[1] == 'C' && v[2] == 'B') {
                        marked++;
                    }
                    if (record.headers().lastHeader("tablecdc.batch.last") != null) {
                        last++;
                    }
                }
            }
        }
        return new BlockCount(records, marked, last);
    }
}
