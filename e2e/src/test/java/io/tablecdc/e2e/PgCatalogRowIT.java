package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.flows.StatusScript;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * Issue 46 item 2: a Postgres table's catalog row deleted by hand (as "start over" advice suggests) is written again by
 * the next upsert of another writer (the apply task's synced batch, the sink's normalize) without a phase. Before: the
 * apply task failed with a NullPointerException for a copied table (every table of the flow stopped), and a table not
 * copied recursed until a StackOverflowError at every start; tablecdc-reset-table refused a row without a phase. Now:
 * a row without a phase is taken as pending, with a warning (a copied table is copied again, one not copied streams
 * on), the flow's tasks stay up, and the reset tool accepts such a row.
 */
class PgCatalogRowIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "catrow_source";
    private static final String ROWS = "id::text || '|' || v";
    private static final String ROWS_CH = "concat(toString(id), '|', v)";

    private static String catalogUrl;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("catrow_catalog");
        Client clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
    }

    @Test
    void aDeletedCatalogRowComesBackAsPendingAndTheFlowStreamsOn() throws Exception {
        String flow = "catrow-flow";
        String sink = "catrow-sink";
        String prefix = "catrow";
        pg.sql("DROP PUBLICATION IF EXISTS catrow_pub",
                "DROP SCHEMA IF EXISTS cr CASCADE",
                "CREATE SCHEMA cr",
                "CREATE TABLE cr.copied (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE TABLE cr.plain (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE TABLE cr.other (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO cr.copied SELECT g, 'c' || g FROM generate_series(1, 20) g",
                "INSERT INTO cr.other SELECT g, 'o' || g FROM generate_series(1, 20) g",
                "CREATE PUBLICATION catrow_pub FOR TABLE cr.copied, cr.plain, cr.other");
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "catrow_pub", prefix);
        source.put("table.sync.copy", "except:cr.plain");
        source.put("tasks.max", "2");
        rest.putConfig(sink, SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix));
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        rest.awaitRunning(sink, 1, Duration.ofSeconds(90));
        for (String table : List.of("cr.copied", "cr.plain", "cr.other")) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        pg.sql("INSERT INTO cr.plain SELECT g, 'p' || g FROM generate_series(1, 10) g");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String table : List.of("cr.copied", "cr.plain", "cr.other")) {
            tables.put(table, new String[] {ROWS, ROWS_CH});
        }
        pg.awaitEqual(tables, Duration.ofSeconds(120));

        // the rows of a copied and of a not copied table deleted by hand while the flow runs; the next changes make the
        // apply task's and the sink's upserts write them again, without a phase
        // a recreated row's batch ids are floored by Connect's stored offset of the table (besides the catalog): the
        // rows are deleted once that offset holds every batch synced, as a restore or a hand delete after the flow
        // was quiet would find it. Batches sent after the last offset commit are above that floor only through the
        // row this test deletes; ids reused then would load under an earlier batch's token (issue 46 item 1, open)
        for (String table : List.of("cr.copied", "cr.plain")) {
            String synced = pg.table(flow, table).get("synced_batch_id");
            long expected = synced == null ? 0 : Long.parseLong(synced);
            PgChecks.awaitTrue(() -> storedBatch(rest, flow, table) >= expected, Duration.ofSeconds(90),
                    "Connect never stored the offset of " + table + "'s batch " + expected + ": " + rest.offsets(flow));
        }
        pg.sql("INSERT INTO cr.other VALUES (100, 'before the delete')");
        try (var c = pg.catalog(); var s = c.createStatement()) {
            s.execute("DELETE FROM cdc_table_replication_state WHERE flow_name = '" + flow
                    + "' AND source_table_identifier IN ('cr.copied', 'cr.plain')");
        }
        pg.sql("INSERT INTO cr.copied SELECT g, 'c' || g FROM generate_series(21, 30) g",
                "INSERT INTO cr.plain SELECT g, 'p' || g FROM generate_series(11, 20) g");
        for (String table : List.of("cr.copied", "cr.plain")) {
            Map<String, String> row = pg.awaitTable(flow, table, r -> "ready".equals(r.get("phase")), Duration.ofSeconds(120));
            System.out.printf("catalog row of %s after its delete: %s%n", table, row);
        }
        // the changes come once the copied table is copied again: updates committed while that copy starts were seen
        // lost (an update of a row missing in ClickHouse, 2 of 2 runs on 6 Dec 2026), an open finding not explained yet
        for (int i = 0; i < 5; i++) {
            pg.sql("INSERT INTO cr.other VALUES (" + (200 + i) + ", 'o')", "UPDATE cr.copied SET v = v || '+' WHERE id = " + (i + 1),
                    "UPDATE cr.plain SET v = v || '+' WHERE id = " + (i + 1));
            Thread.sleep(500);
        }
        pg.awaitEqual(tables, Duration.ofSeconds(120));
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), rest.states(flow), "no task of the flow failed");

        // a row without a phase met at the apply task's start (a table not copied: before, a StackOverflowError at every
        // start), and the reset tool on a row without a phase
        rest.stop(flow);
        rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText()), Duration.ofSeconds(60));
        try (var c = pg.catalog(); var s = c.createStatement()) {
            s.execute("UPDATE cdc_table_replication_state SET phase = NULL, phase_lsn = NULL WHERE flow_name = '" + flow
                    + "' AND source_table_identifier IN ('cr.plain', 'cr.copied')");
        }
        String reset = StatusScript.resetTable(stack, catalogUrl, flow, "cr.copied");
        System.out.printf("reset of a row without a phase: %s%n", reset);
        assertTrue(reset != null && reset.contains("-> errored (reset)"), String.valueOf(reset));
        String status = StatusScript.run(stack, catalogUrl, "--flow", flow);
        assertTrue(status.contains("cr.plain"), status);
        rest.resume(flow);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        pg.sql("INSERT INTO cr.plain SELECT g, 'p' || g FROM generate_series(21, 30) g",
                "INSERT INTO cr.copied SELECT g, 'c' || g FROM generate_series(31, 40) g");
        for (String table : List.of("cr.copied", "cr.plain")) {
            pg.awaitTable(flow, table, r -> "ready".equals(r.get("phase")), Duration.ofSeconds(120));
        }
        pg.awaitEqual(tables, Duration.ofSeconds(120));
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), rest.states(flow), "no task of the flow failed");
        rest.delete(flow);
        rest.delete(sink);
    }

    /**
     * Issue 46 item 1, third bullet: the catalog goes back in time (a backup restored) while Kafka keeps what was sent
     * since. Batch ids are reserved in blocks of 100 at each task start; the backup is taken after the first block,
     * two restarts later the table's batches carry ids of the third block, and the restored row says the first. Before:
     * the next start reserved the second block again, and its batches took ids that batches in Kafka already have (the
     * sink drops such a batch as staged or loaded already, or ClickHouse skips its deduplication token). Now ids are
     * floored by the batch id of the table's offset in Kafka too.
     */
    @Test
    void batchIdsStayAboveWhatKafkaHoldsWhenTheCatalogGoesBack() throws Exception {
        String flow = "catback-flow";
        String sink = "catback-sink";
        String prefix = "catback";
        pg.sql("DROP PUBLICATION IF EXISTS catback_pub",
                "DROP SCHEMA IF EXISTS cb CASCADE",
                "CREATE SCHEMA cb",
                "CREATE TABLE cb.t (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE PUBLICATION catback_pub FOR TABLE cb.t");
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "catback_pub", prefix);
        source.put("table.sync.copy", "none");
        rest.putConfig(sink, SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix));
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        rest.awaitRunning(sink, 1, Duration.ofSeconds(90));
        pg.awaitTable(flow, "cb.t", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        Map<String, String[]> tables = Map.of("cb.t", new String[] {ROWS, ROWS_CH});
        int id = 0;
        for (int i = 0; i < 3; i++) {
            pg.sql("INSERT INTO cb.t VALUES (" + (++id) + ", 'a')");
        }
        pg.awaitEqual(tables, Duration.ofSeconds(120));
        String backup = "SELECT reserved_batch_id, synced_batch_id, normalized_batch_id FROM cdc_table_replication_state"
                + " WHERE flow_name = '" + flow + "' AND source_table_identifier = 'cb.t'";
        long[] saved = new long[3];
        try (var c = pg.catalog(); var s = c.createStatement(); var rs = s.executeQuery(backup)) {
            assertTrue(rs.next());
            for (int i = 0; i < 3; i++) {
                saved[i] = rs.getLong(i + 1);
            }
        }
        System.out.printf("backup of cb.t: reserved %d, synced %d, normalized %d%n", saved[0], saved[1], saved[2]);
        for (int restart = 0; restart < 2; restart++) {
            rest.restart(flow, true, false);
            Thread.sleep(2_000);
            rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
            for (int i = 0; i < 2; i++) {
                pg.sql("INSERT INTO cb.t VALUES (" + (++id) + ", 'b')");
            }
            pg.awaitEqual(tables, Duration.ofSeconds(120));
        }
        List<Long> before = batchIds(prefix + ".cb.t");
        long highest = before.stream().mapToLong(Long::longValue).max().orElseThrow();
        rest.stop(flow);
        rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText()), Duration.ofSeconds(60));
        // the catalog restored from the backup: the table's counters go back
        try (var c = pg.catalog(); var ps = c.prepareStatement("UPDATE cdc_table_replication_state SET reserved_batch_id = ?,"
                + " synced_batch_id = ?, normalized_batch_id = ? WHERE flow_name = ? AND source_table_identifier = 'cb.t'")) {
            ps.setLong(1, saved[0]);
            ps.setLong(2, saved[1]);
            ps.setLong(3, saved[2]);
            ps.setString(4, flow);
            assertEquals(1, ps.executeUpdate());
        }
        rest.resume(flow);
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        for (int i = 0; i < 3; i++) {
            pg.sql("INSERT INTO cb.t VALUES (" + (++id) + ", 'c')");
        }
        int sent = before.size();
        PgChecks.awaitTrue(() -> batchIds(prefix + ".cb.t").size() >= sent + 3, Duration.ofSeconds(60),
                "the three new batches reach Kafka");
        List<Long> after = batchIds(prefix + ".cb.t").subList(sent, sent + 3);
        System.out.printf("batch ids before the restore %s; after %s%n", before, after);
        assertTrue(after.stream().allMatch(b -> b > highest), "batch ids after the restore " + after
                + " must be above every id Kafka holds (" + highest + "): " + before);
        pg.awaitEqual(tables, Duration.ofSeconds(120));
        rest.delete(flow);
        rest.delete(sink);
    }

    /** The batch id header of each record of {@code topic}, in order. */
    private static List<Long> batchIds(String topic) {
        Map<String, Object> props = new java.util.HashMap<>();
        props.put("bootstrap.servers", stack.kafka().bootstrapServers());
        List<Long> ids = new java.util.ArrayList<>();
        try (var consumer = new org.apache.kafka.clients.consumer.KafkaConsumer<byte[], byte[]>(props,
                new org.apache.kafka.common.serialization.ByteArrayDeserializer(),
                new org.apache.kafka.common.serialization.ByteArrayDeserializer())) {
            var partition = new org.apache.kafka.common.TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (consumer.position(partition) < end && System.nanoTime() < deadline) {
                for (var record : consumer.poll(Duration.ofMillis(500))) {
                    var header = record.headers().lastHeader("tablecdc.batch");
                    if (header != null) {
                        ids.add(Long.parseLong(new String(header.value(), java.nio.charset.StandardCharsets.UTF_8)));
                    }
                }
            }
        }
        return ids;
    }

    /** The batch id of Connect's stored offset of {@code table}'s partition of {@code flow}; -1 when there is none. */
    private static long storedBatch(ConnectRestClient rest, String flow, String table) {
        long batch = -1;
        for (var entry : rest.offsets(flow).path("offsets")) {
            var partition = entry.path("partition");
            if (flow.equals(partition.path("flow").asText()) && table.equals(partition.path("table").asText())) {
                batch = Math.max(batch, entry.path("offset").path("batch").asLong(-1));
            }
        }
        return batch;
    }
}
