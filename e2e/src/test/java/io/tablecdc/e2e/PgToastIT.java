package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Unchanged TOAST values: a table with a ~40 KB text column stored out of line, under the default replica identity,
 * receives thousands of updates to its other columns, which pgoutput sends without the large value. The table stays
 * {@code ready} (never errored, never copied again) and ClickHouse ({@code FINAL}) equals Postgres at every check,
 * through several updates of one row in one transaction, an insert and its update in one transaction, key-changing
 * updates (also followed by more updates of the moved row), deletes and updates of the large value itself, with small
 * batches so that a row's changes fall in the same batch, in the same stage file and in earlier batches. A twin table
 * under {@code REPLICA IDENTITY FULL} takes the same changes.
 */
class PgToastIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "pgtoast_source";
    private static final String FLOW = "pgtoast-flow";
    private static final String SINK = "pgtoast-sink";
    private static final String[] ROW = {
        "id::text || '|' || n::text || '|' || coalesce(note, '-') || '|' || coalesce(md5(body), '-') || '|'"
                + " || coalesce(length(body)::text, '-')",
        "concat(toString(id), '|', toString(n), '|', ifNull(note, '-'), '|', ifNull(lower(hex(MD5(body))), '-'), '|',"
                + " ifNull(toString(length(body)), '-'))"};
    private static final Map<String, String[]> TABLES = new LinkedHashMap<>();

    static {
        TABLES.put("toast.docs", ROW);
        TABLES.put("toast.docs_full", ROW);
    }

    private static final Map<String, String> COPY_ATTEMPTS = new LinkedHashMap<>();
    private static String catalogUrl;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("pgtoast_catalog");
        Client clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
        pg.sql("DROP PUBLICATION IF EXISTS pgtoast_pub",
                "DROP SCHEMA IF EXISTS toast CASCADE",
                "CREATE SCHEMA toast");
        for (String table : TABLES.keySet()) {
            pg.sql("CREATE TABLE " + table + " (id bigint PRIMARY KEY, n int NOT NULL, note text, body text)",
                    // out of line and uncompressed: every body is a TOAST value
                    "ALTER TABLE " + table + " ALTER COLUMN body SET STORAGE EXTERNAL",
                    "INSERT INTO " + table + " SELECT g, 0, 'copied', " + body("g") + " FROM generate_series(1, 40) g");
        }
        pg.sql("ALTER TABLE toast.docs_full REPLICA IDENTITY FULL",
                "CREATE PUBLICATION pgtoast_pub FOR TABLE toast.docs, toast.docs_full");
    }

    /** About 40 KB of text (1250 md5 digests) that depends on {@code seed}, an SQL expression. */
    private static String body(String seed) {
        return "(SELECT string_agg(md5(" + seed + "::text || '-' || i::text), '') FROM generate_series(1, 1250) i)";
    }

    @Test
    void untouchedToastColumnsAreKeptThroughThousandsOfUpdates() throws Exception {
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "pgtoast_pub", "pgtoast");
        source.put("table.sync.copy", "all");
        // small batches: a row's changes fall in one batch, one stage file, and in earlier batches
        source.put("batch.rows", "7");
        Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, "pgtoast-stage");
        sink.put("topics.regex", "pgtoast\\..*");
        sink.put("stage.local.dir", StackPaths.workDir("pgtoast-sink-local").toString());
        sink.put("normalize.backoff.initial.ms", "500");
        sink.put("normalize.backoff.max.ms", "2000");
        sink.put("consumer.override.metadata.max.age.ms", "1000");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(SINK, sink);
        rest.putConfig(FLOW, source);
        rest.awaitRunning(FLOW, 1, Duration.ofSeconds(90));
        for (String table : TABLES.keySet()) {
            pg.awaitTable(FLOW, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        check(1);

        Random random = new Random(18);
        long nextId = 1000;
        int updates = 0;
        // three rounds of 60 transactions: each kind of transaction below comes 30 times per table (about 4,000 updates)
        int rounds = 3;
        for (int round = 1; round <= rounds; round++) {
            for (int txn = 0; txn < 60; txn++) {
                List<String> statements = new ArrayList<>();
                for (String table : TABLES.keySet()) {
                    long id = 1 + random.nextInt(40);
                    // several updates of one row in one transaction, none touching the large value
                    statements.add("UPDATE " + table + " SET n = n + 1 WHERE id = " + id);
                    statements.add("UPDATE " + table + " SET note = 'r" + round + "t" + txn + "' WHERE id = " + id);
                    statements.add("UPDATE " + table + " SET n = n + 1 WHERE id % 40 = " + random.nextInt(40));
                    updates += 3;
                    switch (txn % 6) {
                        case 0 -> {
                            // an insert and its update in one transaction
                            statements.add("INSERT INTO " + table + " VALUES (" + nextId + ", 1, 'new', " + body(Long.toString(nextId)) + ")");
                            statements.add("UPDATE " + table + " SET n = n + 10 WHERE id = " + nextId);
                            updates++;
                        }
                        case 1 -> {
                            // a key-changing update, then more updates of the moved row
                            statements.add("UPDATE " + table + " SET id = id + 100000, n = n + 1 WHERE id = (SELECT max(id) FROM "
                                    + table + " WHERE id BETWEEN 1000 AND 99999)");
                            statements.add("UPDATE " + table + " SET note = 'moved' WHERE id = (SELECT max(id) FROM " + table + ")");
                            updates += 2;
                        }
                        case 2 -> {
                            // the large value itself changes, then an update leaves it untouched
                            statements.add("UPDATE " + table + " SET body = " + body("'r" + round + "t" + txn + "'") + " WHERE id = " + id);
                            statements.add("UPDATE " + table + " SET n = n + 1 WHERE id = " + id);
                            updates += 2;
                        }
                        case 3 -> statements.add("DELETE FROM " + table + " WHERE id = (SELECT min(id) FROM " + table
                                + " WHERE id >= 1000)");
                        case 4 -> {
                            // set to null, then untouched: null is kept, not a TOAST value
                            statements.add("UPDATE " + table + " SET body = NULL WHERE id = (SELECT max(id) FROM " + table
                                    + " WHERE id >= 1000)");
                            statements.add("UPDATE " + table + " SET n = n + 1 WHERE id = (SELECT max(id) FROM " + table
                                    + " WHERE id >= 1000)");
                            updates += 2;
                        }
                        default -> {
                            // a bulk update touching every row once
                            statements.add("UPDATE " + table + " SET n = n + 1 WHERE id <= 40");
                            updates += 40;
                        }
                    }
                }
                pg.transaction(statements.toArray(new String[0]));
                if (txn % 6 == 0) {
                    nextId++;
                }
            }
            check(round + 1);
        }
        // the untouched values did travel as marks (not as values) under DEFAULT, and never under FULL
        int[] marked = markedRecords("pgtoast.toast.docs");
        int[] markedFull = markedRecords("pgtoast.toast.docs_full");
        System.out.printf("pg toast: %d updates over two tables, %d checks, both tables ready; records with"
                + " tablecdc.unchanged: %d under DEFAULT (%d of them moved their row), %d under FULL%n", updates, rounds + 1,
                marked[0], marked[1], markedFull[0]);
        assertTrue(updates > 2000, "updates " + updates);
        assertTrue(marked[0] > 500, "records with unchanged values: " + marked[0]);
        assertEquals(0, markedFull[0]);
        rest.delete(FLOW);
        rest.delete(SINK);
    }

    /** {records with a tablecdc.unchanged header, those of them with tablecdc.key.changed} in {@code topic}. */
    private static int[] markedRecords(String topic) {
        Properties props = new Properties();
        props.put("bootstrap.servers", stack.kafka().bootstrapServers());
        props.put("group.id", "pgtoast-check-" + System.nanoTime());
        props.put("auto.offset.reset", "earliest");
        int[] counts = new int[2];
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            while (consumer.position(partition) < end) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    if (record.headers().lastHeader("tablecdc.unchanged") != null) {
                        counts[0]++;
                        if (record.headers().lastHeader("tablecdc.key.changed") != null) {
                            counts[1]++;
                        }
                    }
                }
            }
        }
        return counts;
    }

    /** ClickHouse equals Postgres, and neither table was ever errored or copied again. */
    private static void check(int n) throws Exception {
        pg.awaitEqual(TABLES, Duration.ofSeconds(180));
        for (String table : TABLES.keySet()) {
            Map<String, String> row = pg.table(FLOW, table);
            assertEquals("ready", row.get("phase"), "check " + n + ", " + table + ": " + row);
            COPY_ATTEMPTS.putIfAbsent(table, row.get("copy_attempt"));
            assertEquals(COPY_ATTEMPTS.get(table), row.get("copy_attempt"), "check " + n + ", " + table + " was copied again: " + row);
            assertEquals(null, row.get("last_error"), "check " + n + ", " + table + ": " + row);
        }
    }
}
