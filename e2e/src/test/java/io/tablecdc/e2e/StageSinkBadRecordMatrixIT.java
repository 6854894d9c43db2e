package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import com.clickhouse.client.api.Client;
import com.fasterxml.jackson.databind.JsonNode;

import io.tablecdc.common.RecordHeaders.Op;
import io.tablecdc.common.RowBlock;
import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * A record the sink cannot turn into a row, under every error setting (issue 38 item 5): {@code errors.tolerance}
 * none/all × a dead letter queue or none × row records or block records ({@code record.format=blocks}) × the bad row in
 * the middle of its batch or as its last row. Each cell has a topic and a table of its own: batch 1 holds four good rows
 * and the bad one, batch 2 an update of a row of batch 1 and a new row.
 *
 * <ul>
 *   <li>{@code errors.tolerance=all}: the bad record goes to the dead letter queue, whose headers name the error, when
 *   one is configured; without one the sink logs it (a WARN naming the sink, the record and the error) and drops it:
 *   Connect gives a sink no errant record reporter when neither {@code errors.deadletterqueue.topic.name} nor
 *   {@code errors.log.enable} is set. Every good row of both batches is loaded once, the task keeps running.</li>
 *   <li>{@code errors.tolerance=none}: the task fails with an error naming the sink, the table and the column, and the bad
 *   row's batch is neither staged nor loaded without it. With a dead letter queue configured as well (a legal Connect
 *   config) Connect still sends the record there, and then fails the task ("Tolerance exceeded in error handler"): each
 *   failing attempt leaves a copy in the queue. The remedy docs/operations.md gives, {@code errors.tolerance=all} with a
 *   dead letter queue, then replays the batch: its good rows arrive exactly once, the bad record is in the queue (a
 *   second time where the failing attempt put it there already).</li>
 * </ul>
 *
 * <p>All sinks start together in {@link #start}: one per (dead letter queue, format) under {@code errors.tolerance=all},
 * reading the middle and the last cell's topics, and one per cell under {@code none}, since a failed task stops at its
 * first bad record. The failures are recorded there, the remedy applied, and each cell's test checks what its failure
 * showed and the final state.
 */
class StageSinkBadRecordMatrixIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String CATALOG = "sink_bad_matrix_catalog";
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA).build();
    /** A row record's bad value: without the key's column it cannot become a row. */
    private static final Schema KEYLESS_VALUE = SchemaBuilder.struct().name("bad").field("customer", Schema.STRING_SCHEMA).build();
    /** What ClickHouse must hold at the end, {@code FINAL}: batch 1's good rows, row 1 updated by batch 2, row 6 of batch 2. */
    private static final List<String> EXPECTED = List.of("1 c1-b", "2 c2", "4 c4", "5 c5", "6 c6");

    enum Format { ROWS, BLOCKS }

    enum Position { MIDDLE, LAST }

    record Cell(boolean tolerateAll, boolean deadLetters, Format format, Position position) {
        String id() {
            return format.name().toLowerCase() + "_" + (tolerateAll ? "all" : "none") + "_" + (deadLetters ? "dlq" : "nodlq") + "_"
                    + position.name().toLowerCase();
        }

        String flow() {
            return "bm-" + id();
        }

        String table() {
            return "bm." + id();
        }

        String clickHouseTable() {
            return "bm_" + id();
        }

        String topic() {
            return "sinkmatrix." + id();
        }

        /** The sink that reads the cell's topic. */
        String connector() {
            return tolerateAll ? "sink-bm-" + format.name().toLowerCase() + "-all-" + (deadLetters ? "dlq" : "nodlq") : "sink-" + flow();
        }

        /** The dead letter queue of the cell's sink (under errors.tolerance=none without one: the one the remedy adds). */
        String deadLetterTopic() {
            return connector() + ".dlq";
        }

        /** The bad record's offset in the cell's topic (a block's: the block holding the bad row). */
        long badOffset() {
            return format == Format.ROWS ? (position == Position.MIDDLE ? 2 : 4) : (position == Position.MIDDLE ? 0 : 1);
        }

        /** What the error says about the column at fault. */
        String fault() {
            return format == Format.ROWS ? "key column id is not in the record value" : "unchanged column id is a key column";
        }

        @Override
        public String toString() {
            return id();
        }
    }

    /** What a cell under errors.tolerance=none showed when its task had failed: the task's trace, [stage rows, normalized id], rows in ClickHouse. */
    record Failure(String trace, List<Long> catalog, long clickHouseRows) {
    }

    private static String catalogUrl;
    private static Client clickhouse;
    private static CdcChecks.LogCapture logs;
    private static final Map<String, Map<String, String>> connectors = new LinkedHashMap<>();
    private static final Map<Cell, Failure> failures = new HashMap<>();

    static Stream<Cell> cells() {
        List<Cell> cells = new ArrayList<>();
        for (Format format : Format.values()) {
            for (boolean all : new boolean[] {true, false}) {
                for (boolean dlq : new boolean[] {true, false}) {
                    for (Position position : Position.values()) {
                        cells.add(new Cell(all, dlq, format, position));
                    }
                }
            }
        }
        return cells.stream();
    }

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase(CATALOG);
        clickhouse = stack.clickhouse().client();
        stack.objectStore();
        ConnectRestClient rest = stack.connect().rest();
        // after every stack part this class uses has started (the object store's start resets logging)
        logs = new CdcChecks.LogCapture();
        try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(
                Map.<String, Object>of("bootstrap.servers", stack.kafka().bootstrapServers()))) {
            admin.createTopics(cells().map(c -> new org.apache.kafka.clients.admin.NewTopic(c.topic(), 1, (short) 1)).toList())
                    .all().get(30, java.util.concurrent.TimeUnit.SECONDS);
        }
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers())) {
            for (Cell cell : cells().toList()) {
                if (cell.format == Format.ROWS) {
                    produceRows(producer, cell);
                } else {
                    produceBlocks(producer, cell);
                }
                Map<String, String> config = connectors.computeIfAbsent(cell.connector(), name -> config(cell));
                config.merge("topics", cell.topic(), (a, b) -> a + "," + b);
            }
            producer.flush();
        }
        connectors.forEach(rest::putConfig);
        List<Cell> none = cells().filter(c -> !c.tolerateAll).toList();
        for (Cell cell : none) {
            JsonNode status = rest.awaitStatus(cell.connector(), s -> "FAILED".equals(s.path("tasks").path(0).path("state").asText()),
                    Duration.ofSeconds(60));
            // the task failed in put(): nothing runs for its table any more, so this is the state it left
            failures.put(cell, new Failure(status.path("tasks").path(0).path("trace").asText(), stageRowsAndNormalizedId(cell),
                    clickHouseRows(cell)));
        }
        // the remedy of docs/operations.md: errors.tolerance=all with a dead letter queue; Connect restarts a connector's
        // tasks, the failed one too, with a config that changes them
        for (Cell cell : none) {
            Map<String, String> tolerant = new HashMap<>(connectors.get(cell.connector()));
            tolerant.put("errors.tolerance", "all");
            tolerant.put("errors.deadletterqueue.topic.name", cell.deadLetterTopic());
            tolerant.put("errors.deadletterqueue.topic.replication.factor", "1");
            tolerant.put("errors.deadletterqueue.context.headers.enable", "true");
            rest.putConfig(cell.connector(), tolerant);
        }
    }

    @AfterAll
    static void stop() {
        ConnectRestClient rest = stack.connect().rest();
        for (String name : connectors.keySet()) {
            try {
                rest.delete(name);
            } catch (RuntimeException e) {
                // already gone
            }
        }
        if (logs != null) {
            logs.close();
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cells")
    void aBadRecordEndsAsItsErrorSettingPromises(Cell cell) throws Exception {
        if (!cell.tolerateAll) {
            Failure failure = failures.get(cell);
            assertTrue(failure.trace.contains("sink " + cell.connector()) && failure.trace.contains("table " + cell.table())
                    && failure.trace.contains(cell.fault()) && failure.trace.contains("set errors.tolerance=all"), failure.trace);
            assertEquals(List.of(0L, 0L), failure.catalog, "[stage rows, normalized batch id] once the task had failed");
            assertEquals(0L, failure.clickHouseRows, "rows in ClickHouse once the task had failed");
        }
        ConnectRestClient rest = stack.connect().rest();
        awaitLoaded(cell, () -> rest.status(cell.connector()).toString());
        // the catalog records the load just after ClickHouse shows it
        awaitCatalog(cell, List.of(0L, 2L));
        List<String> copies = clickhouse.queryAll("SELECT id, toString(_tablecdc_version) AS v, count() AS n FROM "
                + cell.clickHouseTable() + " GROUP BY id, v HAVING n > 1 ORDER BY id").stream()
                .map(r -> r.getLong("id") + "@" + r.getString("v") + " x" + r.getLong("n")).toList();
        assertEquals(List.of(), copies, "row versions loaded more than once (without FINAL)");
        if (cell.tolerateAll && !cell.deadLetters) {
            // no errant record reporter: the sink logs the record it drops, once
            assertEquals(1, logs.count("WARN", "sink " + cell.connector(), cell.topic() + "-0@" + cell.badOffset(), cell.fault()),
                    "WARN lines of the dropped record");
        } else {
            List<ConsumerRecord<byte[], byte[]>> letters = deadLetters(cell.deadLetterTopic()).stream()
                    .filter(r -> cell.topic().equals(header(r, "__connect.errors.topic"))).toList();
            // under errors.tolerance=none with a queue, the failing attempt put the record there before failing the task
            int expected = !cell.tolerateAll && cell.deadLetters ? 2 : 1;
            assertEquals(expected, letters.size(), "dead letters of " + cell.topic());
            for (ConsumerRecord<byte[], byte[]> letter : letters) {
                assertEquals(Long.toString(cell.badOffset()), header(letter, "__connect.errors.offset"));
                assertEquals(cell.connector(), header(letter, "__connect.errors.connector.name"));
                String message = header(letter, "__connect.errors.exception.message");
                assertTrue(message != null && message.contains("sink " + cell.connector()) && message.contains(cell.table())
                        && message.contains(cell.fault()), String.valueOf(message));
            }
        }
        assertEquals(List.of("RUNNING", "RUNNING"), rest.states(cell.connector()));
    }

    private static Map<String, String> config(Cell cell) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, cell.connector());
        config.put("stage.local.dir", StackPaths.workDir("sink-bad-matrix-" + cell.connector()).toString());
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "1000");
        if (cell.format == Format.BLOCKS) {
            config.put("value.converter", "org.apache.kafka.connect.converters.ByteArrayConverter");
        }
        if (cell.tolerateAll) {
            config.put("errors.tolerance", "all");
        }
        if (cell.deadLetters) {
            config.put("errors.deadletterqueue.topic.name", cell.deadLetterTopic());
            config.put("errors.deadletterqueue.topic.replication.factor", "1");
            config.put("errors.deadletterqueue.context.headers.enable", "true");
        }
        return config;
    }

    private static Struct key(long id) {
        return new Struct(KEY).put("id", id);
    }

    private static Struct row(long id, String customer) {
        return new Struct(VALUE).put("id", id).put("customer", customer);
    }

    /** Batch 1: rows 1, 2, 4 and 5 with the bad record (a value without the key column) third or last; batch 2. */
    private static void produceRows(RecordProducer producer, Cell cell) {
        String topic = cell.topic();
        List<Long> ids = cell.position == Position.MIDDLE ? List.of(1L, 2L, 3L, 4L, 5L) : List.of(1L, 2L, 4L, 5L, 3L);
        for (int i = 0; i < ids.size(); i++) {
            long id = ids.get(i);
            Map<String, String> headers = Headers.of(cell.flow(), cell.table(), "c", id, 1, i == ids.size() - 1);
            Struct value = id == 3 ? new Struct(KEYLESS_VALUE).put("customer", "no id") : row(id, "c" + id);
            producer.sendAsync(topic, key(id), value, headers);
        }
        producer.sendAsync(topic, key(1), row(1, "c1-b"), Headers.of(cell.flow(), cell.table(), "u", 11, 2, false));
        producer.sendAsync(topic, key(6), row(6, "c6"), Headers.of(cell.flow(), cell.table(), "c", 12, 2, true));
    }

    /**
     * Batch 1 as two blocks: [1, 2, bad, 4] and [5] (middle), or [1, 2] and [4, 5, bad] (last); batch 2 as one block.
     * The bad row: an update that marks its key column as unchanged (a block has one value schema for all its rows, so
     * none of them can lack the key column).
     */
    private static void produceBlocks(RecordProducer producer, Cell cell) {
        String topic = cell.topic();
        RowBlock.Writer writer = new RowBlock.Writer(VALUE, KEY);
        List<List<Long>> blocks = cell.position == Position.MIDDLE ? List.of(List.of(1L, 2L, 3L, 4L), List.of(5L))
                : List.of(List.of(1L, 2L), List.of(4L, 5L, 3L));
        for (int b = 0; b < blocks.size(); b++) {
            for (long id : blocks.get(b)) {
                if (id == 3) {
                    writer.add(Op.UPDATE, BigInteger.valueOf(id), row(id, "c" + id), Set.of("id"), false, List.of(), null);
                } else {
                    writer.add(Op.CREATE, BigInteger.valueOf(id), row(id, "c" + id), Set.of(), false, List.of(), null);
                }
            }
            producer.sendRawAsync(topic, null, writer.finish(), blockHeaders(cell, 1, b == blocks.size() - 1));
        }
        writer.add(Op.UPDATE, BigInteger.valueOf(11), row(1, "c1-b"), Set.of(), false, List.of(), null);
        writer.add(Op.CREATE, BigInteger.valueOf(12), row(6, "c6"), Set.of(), false, List.of(), null);
        producer.sendRawAsync(topic, null, writer.finish(), blockHeaders(cell, 2, true));
    }

    private static Map<String, String> blockHeaders(Cell cell, long batch, boolean last) {
        Map<String, String> headers = new HashMap<>();
        headers.put("tablecdc.flow", cell.flow());
        headers.put("tablecdc.table", cell.table());
        headers.put("tablecdc.batch", Long.toString(batch));
        headers.put(RowBlock.HEADER, RowBlock.FORMAT);
        if (last) {
            headers.put("tablecdc.batch.last", "true");
        }
        return headers;
    }

    /** Waits until ClickHouse {@code FINAL} holds {@link #EXPECTED}. */
    private static void awaitLoaded(Cell cell, java.util.function.Supplier<String> state) throws InterruptedException {
        String sql = "SELECT id, customer FROM " + cell.clickHouseTable() + " FINAL ORDER BY id";
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        List<String> rows = List.of();
        String lastError = null;
        while (System.nanoTime() < deadline) {
            try {
                rows = clickhouse.queryAll(sql).stream().map(r -> r.getLong("id") + " " + r.getString("customer")).toList();
                if (rows.equals(EXPECTED)) {
                    return;
                }
            } catch (RuntimeException e) {
                lastError = e.getMessage();
            }
            Thread.sleep(200);
        }
        throw new AssertionError(cell + ": ClickHouse FINAL holds " + rows + ", expected " + EXPECTED
                + (lastError == null ? "" : "; last error " + lastError) + "; sink " + state.get());
    }

    private static void awaitCatalog(Cell cell, List<Long> expected) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        List<Long> last = stageRowsAndNormalizedId(cell);
        while (!last.equals(expected) && System.nanoTime() < deadline) {
            Thread.sleep(200);
            last = stageRowsAndNormalizedId(cell);
        }
        assertEquals(expected, last, cell + ": [stage rows, normalized batch id]");
    }

    /** The cell's stage rows in the catalog and its normalized batch id (0 when none). */
    private static List<Long> stageRowsAndNormalizedId(Cell cell) throws Exception {
        try (java.sql.Connection c = stack.postgres().connect(CATALOG);
             java.sql.PreparedStatement ps = c.prepareStatement("SELECT (SELECT count(*) FROM cdc_table_avro_stage"
                     + "   WHERE flow_name = ? AND source_table_identifier = ?),"
                     + " (SELECT coalesce(max(normalized_batch_id), 0) FROM cdc_table_replication_state"
                     + "   WHERE flow_name = ? AND source_table_identifier = ?)")) {
            ps.setString(1, cell.flow());
            ps.setString(2, cell.table());
            ps.setString(3, cell.flow());
            ps.setString(4, cell.table());
            try (java.sql.ResultSet rs = ps.executeQuery()) {
                rs.next();
                return List.of(rs.getLong(1), rs.getLong(2));
            }
        }
    }

    /** Rows of the cell's ClickHouse table, 0 when it does not exist. */
    private static long clickHouseRows(Cell cell) {
        long tables = clickhouse.queryAll("SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND name = '"
                + cell.clickHouseTable() + "'").get(0).getLong("n");
        return tables == 0 ? 0 : clickhouse.queryAll("SELECT count() AS n FROM " + cell.clickHouseTable()).get(0).getLong("n");
    }

    /** Every record of a dead letter queue up to its end offset now. */
    private static List<ConsumerRecord<byte[], byte[]>> deadLetters(String topic) {
        Map<String, Object> props = Map.of("bootstrap.servers", stack.kafka().bootstrapServers(), "enable.auto.commit", "false");
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (var consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp), Duration.ofSeconds(30)).get(tp);
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (consumer.position(tp, Duration.ofSeconds(30)) < end && System.nanoTime() < deadline) {
                consumer.poll(Duration.ofMillis(300)).forEach(out::add);
            }
            assertTrue(consumer.position(tp, Duration.ofSeconds(30)) >= end, "read " + topic + " to its end offset " + end);
        }
        return out;
    }

    private static String header(ConsumerRecord<byte[], byte[]> record, String name) {
        var header = record.headers().lastHeader(name);
        return header == null ? null : new String(header.value(), StandardCharsets.UTF_8);
    }
}
