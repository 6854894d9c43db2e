package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.faults.Fault;
import io.tablecdc.e2e.faults.FaultInjector;
import io.tablecdc.e2e.faults.NamedFaults;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Exactly-once source support (KIP-618) for the Postgres pipeline: on a worker with
 * {@code exactly.once.source.support=enabled}, a flow with {@code exactly.once.support=required} and
 * {@code transaction.boundary=connector} ends its Kafka transactions at batch ends. The worker process is halted (as by
 * SIGKILL) in the middle of a batch of a large Postgres transaction, after Kafka wrote part of that batch in the open
 * Kafka transaction: a {@code read_uncommitted} consumer sees that part (the premise), a {@code read_committed} one
 * sees only whole batches and never any record of the cut batch, the catalog recorded no batch Kafka did not commit,
 * and after a second worker takes over ClickHouse equals Postgres. The sink runs unchanged on the stack's own worker
 * (its consumer reads uncommitted records, as by default).
 */
class ExactlyOnceSourceIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "eos_source";
    private static final String PREFIX = "eosit";
    private static final String FLOW = "eosit-flow";
    private static final String SINK = "eosit-sink";
    private static final String TABLE = "eos.big";
    private static final String TOPIC = PREFIX + "." + TABLE;
    private static final int BATCH_ROWS = 1_000;
    private static final int BIG_ROWS = 5_000;
    /** The record Kafka acknowledged when the worker halts: the middle of the third batch of the big transaction. */
    private static final int KILL_AT = 2 * BATCH_ROWS + BATCH_ROWS / 2;
    private static final Map<String, String[]> TABLES = Map.of(TABLE, new String[] {
            "id::text || '|' || v::text || '|' || coalesce(note, '-')",
            "concat(toString(id), '|', toString(v), '|', ifNull(note, '-'))"});

    private static String catalogUrl;
    private static PgChecks pg;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("eos_catalog");
        clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
        // the sources are quiet when these tests compare: a late stale batch must fail them
        pg.holdEqualFor(Duration.ofSeconds(5));
        pg.sql("DROP PUBLICATION IF EXISTS eos_pub",
                "DROP SCHEMA IF EXISTS eos CASCADE",
                "CREATE SCHEMA eos",
                "CREATE TABLE eos.big (id int PRIMARY KEY, v int NOT NULL, note text)",
                "CREATE PUBLICATION eos_pub FOR TABLE eos.big");
    }

    @AfterAll
    static void stop() {
        if (clickhouse != null) {
            clickhouse.close();
        }
    }

    @Test
    void aWorkerKilledMidBatchLeavesNoPartOfTheBatchToReadCommittedConsumers() throws Exception {
        Map<String, String> sink = SinkConfigs.flowSink(stack, catalogUrl, PREFIX + "-stage", PREFIX);
        stack.connect().rest().putConfig(SINK, sink);

        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "eos_pub", PREFIX);
        source.put("batch.rows", Integer.toString(BATCH_ROWS));
        source.put("exactly.once.support", "required");
        source.put("transaction.boundary", "connector");

        String group = "eosit-" + System.nanoTime();
        Map<String, String> workerProps = ConnectWorker.exactlyOnce(
                ConnectWorker.workerProperties(stack.kafka().bootstrapServers(), group, stack.pluginPath()));
        Fault fault = NamedFaults.eosRecordWrittenNotCommitted().kill().onOccurrence(KILL_AT).disarmed();
        FaultInjector injector = FaultInjector.of(StackPaths.workDir("eosit/faults"), fault);
        List<String> jvmArgs = injector.jvmArgs(ConnectWorker.TEST_JVM_ARGS.toArray(String[]::new));

        ConnectWorker first = ConnectWorker.startProcess(workerProps, StackPaths.workDir("eosit/worker-1"),
                Duration.ofSeconds(120), jvmArgs);
        String syncedAtKill;
        Batches committedAtKill;
        Batches uncommittedAtKill;
        try {
            ConnectRestClient rest = first.rest();
            // an exactly-once worker asks the connector (exactlyOnceSupport, canDefineTransactionBoundaries) when it
            // validates: a connector that answered "unsupported" would be refused here
            Map<String, String> named = new HashMap<>(source);
            named.put("name", FLOW);
            List<String> errors = ConnectRestClient.validationErrors(rest.validate(SourceConfigs.PG_PIPELINE, named));
            assertEquals(List.of(), errors, "validation on an exactly-once worker");
            rest.putConfig(FLOW, source);
            rest.awaitRunning(FLOW, 1, Duration.ofSeconds(90));
            pg.sql("INSERT INTO eos.big SELECT g, 0, 'warm' FROM generate_series(1, 10) g");
            pg.awaitEqual(TABLES, Duration.ofSeconds(120));

            injector.arm(fault);
            pg.sql("INSERT INTO eos.big SELECT g, 1, 'big' FROM generate_series(1001, " + (1000 + BIG_ROWS) + ") g");
            injector.awaitFired(fault, Duration.ofSeconds(120));
        } finally {
            first.kill();
        }
        syncedAtKill = pg.table(FLOW, TABLE).get("synced_batch_id");
        committedAtKill = read("read_committed");
        uncommittedAtKill = read("read_uncommitted");

        // the premise: the worker died with part of a batch written in its open Kafka transaction
        List<Long> cut = uncommittedAtKill.incomplete();
        assertFalse(cut.isEmpty(), "a read_uncommitted consumer sees a batch without its last record: " + uncommittedAtKill);
        // what read_committed consumers see: whole batches only, none of the cut batch
        assertEquals(List.of(), committedAtKill.incomplete(), "read_committed: every batch whole " + committedAtKill);
        for (long id : cut) {
            assertFalse(committedAtKill.ids().contains(id), "read_committed sees no record of cut batch " + id);
        }
        // progress outside Kafka: the catalog recorded no batch Kafka had not committed
        long synced = syncedAtKill == null ? 0 : Long.parseLong(syncedAtKill);
        assertTrue(synced == 0 || committedAtKill.ids().contains(synced),
                "the catalog's synced batch " + synced + " is one Kafka committed: " + committedAtKill.ids());

        ConnectWorker second = ConnectWorker.startProcess(workerProps, StackPaths.workDir("eosit/worker-2"),
                Duration.ofSeconds(120));
        try {
            second.rest().awaitRunning(FLOW, 1, Duration.ofSeconds(120));
            pg.sql("UPDATE eos.big SET v = v + 1, note = 'after' WHERE id % 7 = 0",
                    "DELETE FROM eos.big WHERE id % 11 = 0");
            pg.awaitEqual(TABLES, Duration.ofSeconds(180));
            Batches after = read("read_committed");
            assertEquals(List.of(), after.incomplete(), "read_committed after the restart: every batch whole " + after);
            for (long id : cut) {
                assertFalse(after.ids().contains(id), "the cut batch " + id + " never commits");
            }
            System.out.printf("eos: worker halted at record %d of the big transaction; read_uncommitted saw cut batch(es)"
                            + " %s (%d records), read_committed %d whole batches then, %d after the restart; catalog synced"
                            + " %d at the kill; ClickHouse equals Postgres%n", KILL_AT, cut,
                    uncommittedAtKill.records() - committedAtKill.records(), committedAtKill.ids().size(),
                    after.ids().size(), synced);
            second.rest().delete(FLOW);
        } finally {
            second.close();
        }
        stack.connect().rest().delete(SINK);
    }

    /**
     * The BigQuery source on an exactly-once worker: its snapshot of 605 rows (five of them twice, identical) is one
     * batch read in pages of 50 rows, one poll each, so one Kafka transaction spans 13 polls. The worker halts after
     * Kafka wrote 275 of its records: nothing of the batch is committed (a {@code read_uncommitted} consumer sees the
     * cut batch, a {@code read_committed} one none of it), the catalog recorded no batch, and the next worker reads the
     * table again: the batch commits once, whole, the catalog records it (every record acknowledged, the identical
     * ones too) and the table polls on.
     */
    @Test
    void aBigQueryBatchOfManyPagesIsOneTransaction() throws Exception {
        String dataset = "eos_bq";
        String flow = "eosbq-flow";
        String prefix = "eosbq";
        String bqCatalog = "eos_bq_catalog";
        String bqCatalogUrl = stack.postgres().createDatabase(bqCatalog);
        CdcChecks checks = new CdcChecks(stack, bqCatalog);
        com.google.cloud.bigquery.BigQuery bigQuery = stack.bigquery().client();
        String project = stack.bigquery().projectId();
        if (bigQuery.getDataset(dataset) == null) {
            bigQuery.create(com.google.cloud.bigquery.DatasetInfo.of(dataset));
        }
        com.google.cloud.bigquery.TableId table = com.google.cloud.bigquery.TableId.of(project, dataset, "big");
        bigQuery.delete(table);
        bigQuery.create(com.google.cloud.bigquery.TableInfo.of(table, com.google.cloud.bigquery.StandardTableDefinition.of(
                com.google.cloud.bigquery.Schema.of(
                        com.google.cloud.bigquery.Field.newBuilder("id", com.google.cloud.bigquery.StandardSQLTypeName.INT64)
                                .setMode(com.google.cloud.bigquery.Field.Mode.REQUIRED).build(),
                        com.google.cloud.bigquery.Field.of("val", com.google.cloud.bigquery.StandardSQLTypeName.STRING),
                        com.google.cloud.bigquery.Field.of("ts", com.google.cloud.bigquery.StandardSQLTypeName.TIMESTAMP)))));
        int rows = 600;
        java.time.Instant base = java.time.Instant.now().minus(Duration.ofHours(1)).truncatedTo(java.time.temporal.ChronoUnit.SECONDS);
        List<Map<String, Object>> inserted = new ArrayList<>();
        for (long id = 1; id <= rows; id++) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("id", id);
            row.put("val", "v" + id);
            row.put("ts", base.plusSeconds(id).toString());
            inserted.add(row);
        }
        // five rows twice, identical: equal records in one batch, which an exactly-once worker reports committed once
        for (int i = 0; i < 5; i++) {
            inserted.add(new LinkedHashMap<>(inserted.get(i)));
        }
        CdcChecks.insert(bigQuery, table, inserted);
        String fullName = project + "." + dataset + ".big";
        String topic = prefix + "." + fullName;
        String chTable = fullName.replaceAll("[^A-Za-z0-9_]", "_");

        Map<String, String> sink = SinkConfigs.flowSink(stack, bqCatalogUrl, prefix + "-stage", prefix);
        stack.connect().rest().putConfig(prefix + "-sink", sink);

        Map<String, String> source = SourceConfigs.queryCdc(stack, bqCatalogUrl, dataset, "big:ts:id", 1, prefix);
        source.put("bigquery.page.size", "50");
        source.put("exactly.once.support", "required");
        source.put("transaction.boundary", "connector");
        Map<String, String> workerProps = ConnectWorker.exactlyOnce(ConnectWorker.workerProperties(
                stack.kafka().bootstrapServers(), "eosbq-" + System.nanoTime(), stack.pluginPath()));
        Fault fault = NamedFaults.eosRecordWrittenNotCommitted().kill().onOccurrence(275);
        FaultInjector injector = FaultInjector.of(StackPaths.workDir("eosbq/faults"), fault);
        List<String> jvmArgs = injector.jvmArgs(ConnectWorker.TEST_JVM_ARGS.toArray(String[]::new));

        ConnectWorker first = ConnectWorker.startProcess(workerProps, StackPaths.workDir("eosbq/worker-1"),
                Duration.ofSeconds(120), jvmArgs);
        try {
            Map<String, String> named = new HashMap<>(source);
            named.put("name", flow);
            assertEquals(List.of(), ConnectRestClient.validationErrors(first.rest().validate(SourceConfigs.QUERY_CDC, named)),
                    "validation on an exactly-once worker");
            first.rest().putConfig(flow, source);
            injector.awaitFired(fault, Duration.ofSeconds(120));
        } finally {
            first.kill();
        }
        long syncedAtKill = checks.state(flow, fullName).syncedBatchId();
        Batches committed = read(topic, "read_committed");
        Batches uncommitted = read(topic, "read_uncommitted");
        List<Long> cut = uncommitted.incomplete();
        assertFalse(cut.isEmpty(), "a read_uncommitted consumer sees the cut batch: " + uncommitted);
        assertTrue(uncommitted.records() >= 275, "Kafka wrote the records before the halt: " + uncommitted);
        assertEquals(List.of(), committed.incomplete(), "read_committed: every batch whole " + committed);
        for (long id : cut) {
            assertFalse(committed.ids().contains(id), "read_committed sees no record of cut batch " + id);
        }
        assertTrue(syncedAtKill == 0 || committed.ids().contains(syncedAtKill),
                "the catalog's synced batch " + syncedAtKill + " is one Kafka committed: " + committed.ids());

        ConnectWorker second = ConnectWorker.startProcess(workerProps, StackPaths.workDir("eosbq/worker-2"),
                Duration.ofSeconds(120));
        try {
            second.rest().awaitRunning(flow, 1, Duration.ofSeconds(120));
            checks.awaitRows("SELECT count() AS n FROM " + chTable + " FINAL",
                    r -> r.get(0).getLong("n") == rows, Duration.ofSeconds(180));
            Batches after = read(topic, "read_committed");
            assertEquals(List.of(), after.incomplete(), "read_committed after the restart: every batch whole " + after);
            for (long id : cut) {
                assertFalse(after.ids().contains(id), "the cut batch " + id + " never commits");
            }
            assertEquals(rows + 5, after.records(), "the table's snapshot committed once: " + after);
            // the batch's records, the equal ones too, were acknowledged: the catalog mirror recorded it and the
            // table polls on
            CdcChecks.State state = checks.awaitState(flow, fullName, st -> st.syncedBatchId() > 0, Duration.ofSeconds(60));
            assertTrue(after.ids().contains(state.syncedBatchId()), "the catalog's synced batch committed: " + state);
            List<Map<String, Object>> more = new ArrayList<>();
            for (long id = rows + 1; id <= rows + 10; id++) {
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("id", id);
                row.put("val", "v" + id);
                row.put("ts", base.plusSeconds(id).toString());
                more.add(row);
            }
            CdcChecks.insert(bigQuery, table, more);
            checks.awaitRows("SELECT count() AS n FROM " + chTable + " FINAL",
                    r -> r.get(0).getLong("n") == rows + 10, Duration.ofSeconds(120));
            System.out.printf("eos bigquery: worker halted at record 275 of a 605-row batch in pages of 50; read_uncommitted"
                    + " saw cut batch(es) %s (%d records), read_committed none; after the restart %s; ClickHouse holds"
                    + " every row%n", cut, uncommitted.records(), after);
            second.rest().delete(flow);
        } finally {
            second.close();
        }
        stack.connect().rest().delete(prefix + "-sink");
    }

    /** The Postgres table's topic as a consumer with {@code isolation} reads it, grouped into batches. */
    private static Batches read(String isolation) {
        return read(TOPIC, isolation);
    }

    /** {@code topic}'s records (one partition) as a consumer with {@code isolation} reads them, grouped into batches. */
    private static Batches read(String topic, String isolation) {
        Map<String, Object> props = new HashMap<>();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, stack.kafka().bootstrapServers());
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        TopicPartition partition = new TopicPartition(topic, 0);
        Batches batches = new Batches();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            // read_committed: up to the last stable offset, before any open transaction
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (consumer.position(partition) < end) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError(isolation + ": could not read " + topic + " up to offset " + end);
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    batches.add(header(record, "tablecdc.batch"), "true".equals(header(record, "tablecdc.batch.last")));
                }
            }
        }
        return batches;
    }

    private static String header(ConsumerRecord<byte[], byte[]> record, String name) {
        Header header = record.headers().lastHeader(name);
        return header == null || header.value() == null ? null : new String(header.value(), StandardCharsets.UTF_8);
    }

    /**
     * Batches in topic order. A batch is whole when its records are consecutive and the last of them, and only it,
     * carries {@code tablecdc.batch.last}; the same batch id appearing again after another batch is not whole.
     */
    private static final class Batches {
        private final Map<Long, int[]> counts = new LinkedHashMap<>();
        private final Set<Long> broken = new TreeSet<>();
        private Long current;
        private boolean currentClosed = true;
        private int records;

        void add(String batch, boolean last) {
            long id = Long.parseLong(batch);
            records++;
            if (current == null || current != id) {
                if (!currentClosed) {
                    broken.add(current);
                }
                if (counts.containsKey(id)) {
                    broken.add(id);
                }
                current = id;
                currentClosed = false;
            } else if (currentClosed) {
                broken.add(id);
            }
            counts.computeIfAbsent(id, k -> new int[1])[0]++;
            if (last) {
                currentClosed = true;
            }
        }

        /** Batch ids that are not whole, in id order. */
        List<Long> incomplete() {
            Set<Long> out = new TreeSet<>(broken);
            if (!currentClosed) {
                out.add(current);
            }
            return new ArrayList<>(out);
        }

        Set<Long> ids() {
            return counts.keySet();
        }

        int records() {
            return records;
        }

        @Override
        public String toString() {
            Map<Long, Integer> sizes = new LinkedHashMap<>();
            counts.forEach((id, n) -> sizes.put(id, n[0]));
            return records + " records in batches " + sizes;
        }
    }
}
