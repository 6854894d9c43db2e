package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetId;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.Table;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;

import io.tablecdc.e2e.faults.HttpFaultProxy;
import io.tablecdc.e2e.faults.HttpFaultProxy.Action;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Issue 37: a BigQuery batch (one window, read page by page over many polls) meeting slow or failing result pages, and
 * the destination tables of failed queries and dead tasks. The emulator sits behind an {@link HttpFaultProxy} that
 * slows or fails chosen calls only (reading a result page, inserting a query job); every call it lets through is
 * answered by the emulator. Each worker runs as its own JVM (its log is read, or it is killed).
 */
class BigQueryBatchFaultsIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATASET = "bqbatch";
    private static final String DESTINATION = "bqbatch_dst";
    private static final String CATALOG = "bqbatch_catalog";

    private static BigQuery bigQuery;
    private static String project;
    private static String catalogUrl;
    private static CdcChecks checks;

    @BeforeAll
    static void start() throws Exception {
        bigQuery = stack.bigquery().client();
        project = stack.bigquery().projectId();
        for (String dataset : List.of(DATASET, DESTINATION)) {
            if (bigQuery.getDataset(dataset) == null) {
                bigQuery.create(DatasetInfo.of(dataset));
            }
        }
        catalogUrl = stack.postgres().createDatabase(CATALOG);
        checks = new CdcChecks(stack, CATALOG);
    }

    /**
     * Issue 37 item 10: under exactly-once delivery a batch is one Kafka transaction, and a window whose pages take
     * longer to read than the producer's {@code transaction.timeout.ms} had its transaction aborted by the broker: the
     * task failed, and every restart read the same window into the same abort. Here each result page takes 0.6 s and
     * the window has 60 pages (about 36 s) against a 6 s transaction timeout; a sink reading {@code read_committed}
     * must get every row, and the task must stay running.
     */
    @Test
    void anExactlyOnceWindowThatOutlastsTheTransactionTimeoutArrivesInTransactionsThatEndInTime() throws Exception {
        String table = "eos_slow";
        String flow = "bqbatch-eos";
        String prefix = "bqbatcheos";
        int rows = 300;
        TableId id = createTable(table, rows);
        String fullName = project + "." + DATASET + "." + table;
        String chTable = fullName.replaceAll("[^A-Za-z0-9_]", "_");
        Map<String, String> sink = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);
        sink.put("consumer.override.isolation.level", "read_committed");
        stack.connect().rest().putConfig(prefix + "-sink", sink);
        try (HttpFaultProxy proxy = HttpFaultProxy.start("bigquery-eos", stack.bigquery().endpoint())) {
            AtomicLong pages = new AtomicLong();
            proxy.rule((method, path) -> {
                if (isPageRead(method, path)) {
                    pages.incrementAndGet();
                    return Action.delay(600);
                }
                return Action.PASS;
            });
            Map<String, String> source = SourceConfigs.queryCdc(stack, catalogUrl, DATASET, table + ":ts:id", 1, prefix);
            source.put("bigquery.endpoint", proxy.url());
            source.put("bigquery.page.size", "5");
            source.put("exactly.once.support", "required");
            source.put("transaction.boundary", "connector");
            source.put("producer.override.transaction.timeout.ms", "6000");
            Map<String, String> workerProps = ConnectWorker.exactlyOnce(ConnectWorker.workerProperties(
                    stack.kafka().bootstrapServers(), "bqbatch-eos-" + System.nanoTime(), stack.pluginPath()));
            long started = System.nanoTime();
            try (ConnectWorker worker = ConnectWorker.startProcess(workerProps, StackPaths.workDir("bqbatch-eos/worker"),
                    Duration.ofSeconds(120))) {
                worker.rest().putConfig(flow, source);
                worker.rest().awaitRunning(flow, 1, Duration.ofSeconds(120));
                try {
                    checks.awaitRows("SELECT count() AS n FROM " + chTable + " FINAL", r -> r.get(0).getLong("n") == rows,
                            Duration.ofSeconds(240));
                } catch (AssertionError e) {
                    throw new AssertionError(e.getMessage() + "; source status " + worker.rest().status(flow)
                            + "; catalog " + checks.state(flow, fullName) + "; " + pages.get() + " page reads", e);
                }
                CdcChecks.State state = checks.state(flow, fullName);
                System.out.printf("eos window of %d rows in %d pages of 5: in ClickHouse (read_committed) after %d s;"
                        + " %d page reads; synced batch id %d; status %s%n", rows, rows / 5,
                        (System.nanoTime() - started) / 1_000_000_000L, pages.get(), state.syncedBatchId(),
                        worker.rest().status(flow));
                worker.rest().awaitRunning(flow, 1, Duration.ofSeconds(5));
                // the window went out as several batches, each its own transaction
                assertTrue(state.syncedBatchId() >= 2, "one batch only: " + state);
                worker.rest().delete(flow);
            }
        } finally {
            stack.connect().rest().delete(prefix + "-sink");
        }
        bigQuery.delete(id);
    }

    /**
     * Issue 37, one warning per episode: a result page that cannot be read (BigQuery answers 503 for 2 s, longer than
     * the client's own retries) is read again after the backoff, alone: the pages sent before it are not sent again,
     * the error episode stays open until the window is read to its end (one warning for two page failures), and the
     * catalog's error is cleared at the end. Before, the episode ended as soon as the window's query succeeded, so a
     * second page failure opened a second episode, and each failure sent the window again from its first page.
     */
    @Test
    void aResultPageThatFailsIsReadAgainAloneAndTheTableWarnsOnce() throws Exception {
        String table = "page_fail";
        String flow = "bqbatch-pages";
        String prefix = "bqbatchpages";
        int rows = 100;
        TableId id = createTable(table, rows);
        String fullName = project + "." + DATASET + "." + table;
        String chTable = fullName.replaceAll("[^A-Za-z0-9_]", "_");
        stack.connect().rest().putConfig(prefix + "-sink", SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix));
        Path workDir = StackPaths.workDir("bqbatch-pages/worker");
        Files.deleteIfExists(workDir.resolve("worker.log"));
        try (HttpFaultProxy proxy = HttpFaultProxy.start("bigquery-pages", stack.bigquery().endpoint())) {
            AtomicInteger reads = new AtomicInteger();
            long[] failingUntil = new long[1];
            proxy.rule((method, path) -> {
                if (!isPageRead(method, path)) {
                    return Action.PASS;
                }
                synchronized (failingUntil) {
                    int n = reads.incrementAndGet();
                    // the 3rd and the 12th page read start an outage of page reads of 2 s each
                    if (n == 3 || n == 12) {
                        failingUntil[0] = System.nanoTime() + 2_000_000_000L;
                    }
                    return System.nanoTime() < failingUntil[0] ? Action.fail(503) : Action.PASS;
                }
            });
            Map<String, String> source = SourceConfigs.queryCdc(stack, catalogUrl, DATASET, table + ":ts:id", 1, prefix);
            source.put("bigquery.endpoint", proxy.url());
            source.put("bigquery.page.size", "5");
            Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                    "bqbatch-pages-" + System.nanoTime(), stack.pluginPath());
            try (ConnectWorker worker = ConnectWorker.startProcess(workerProps, workDir, Duration.ofSeconds(120))) {
                worker.rest().putConfig(flow, source);
                worker.rest().awaitRunning(flow, 1, Duration.ofSeconds(120));
                checks.awaitRows("SELECT count() AS n FROM " + chTable + " FINAL", r -> r.get(0).getLong("n") == rows,
                        Duration.ofSeconds(180));
                CdcChecks.State state = checks.awaitState(flow, fullName, s -> s.lastError() == null && s.syncedBatchId() > 0,
                        Duration.ofSeconds(60));
                long records = topicRecords(prefix + "." + fullName);
                String warning = "poll of flow " + flow + ", table " + fullName + " failed, retrying";
                long warnings = Files.readAllLines(workDir.resolve("worker.log")).stream().filter(l -> l.contains(warning)).count();
                System.out.printf("page failures: %d page reads, %d answered 503; %d records in the topic for %d rows;"
                        + " %d warnings; catalog %s%n", reads.get(), proxy.failed(), records, rows, warnings, state);
                assertTrue(proxy.failed() >= 2, "the proxy failed " + proxy.failed() + " page reads");
                assertEquals(rows, records, "records in the topic: pages sent before a failed page were sent again");
                assertEquals(1, warnings, "warnings of the table's error episode in the worker's log");
                worker.rest().delete(flow);
            }
        } finally {
            stack.connect().rest().delete(prefix + "-sink");
        }
        bigQuery.delete(id);
    }

    /**
     * Issue 37, destination tables ({@code query.destination.dataset}) that leaked until they expired a day later:
     * (1) a query that fails after its destination table was created left the table behind, and every restart of the
     * failing task left one more (each task start had a name of its own); (2) a task killed while it read a result
     * left its table for good, and a crash-looping task one per restart. Now a failed query drops its table, and a task
     * drops what earlier tasks of its table left when it starts.
     */
    @Test
    void destinationTablesOfFailedQueriesAndOfKilledTasksAreDropped() throws Exception {
        String table = "dest_leak";
        String flow = "bqbatch-dst";
        String prefix = "bqbatchdst";
        int rows = 100;
        TableId id = createTable(table, rows);
        String fullName = project + "." + DATASET + "." + table;
        String chTable = fullName.replaceAll("[^A-Za-z0-9_]", "_");
        String namePrefix = "tablecdc_" + flow.replaceAll("[^A-Za-z0-9_]", "_") + "_";
        stack.connect().rest().putConfig(prefix + "-sink", SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix));
        String group = "bqbatch-dst-" + System.nanoTime();
        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(), group,
                stack.pluginPath());
        try (HttpFaultProxy proxy = HttpFaultProxy.start("bigquery-dst", stack.bigquery().endpoint())) {
            AtomicLong jobsFailed = new AtomicLong();
            AtomicLong pages = new AtomicLong();
            // (1) every query job that writes a result fails (after its destination table was created)
            proxy.rule((method, path) -> {
                if (isJobInsert(method, path)) {
                    jobsFailed.incrementAndGet();
                    return Action.fail(500);
                }
                return Action.PASS;
            });
            Map<String, String> source = SourceConfigs.queryCdc(stack, catalogUrl, DATASET, table + ":ts:id", 1, prefix);
            source.put("bigquery.endpoint", proxy.url());
            source.put("bigquery.page.size", "5");
            source.put("query.destination.dataset", DESTINATION);
            List<String> leftByFailures;
            List<String> leftAtKill;
            try (ConnectWorker first = ConnectWorker.startProcess(workerProps, StackPaths.workDir("bqbatch-dst/worker-1"),
                    Duration.ofSeconds(120))) {
                first.rest().putConfig(flow, source);
                first.rest().awaitRunning(flow, 1, Duration.ofSeconds(120));
                for (int restart = 0; restart < 3; restart++) {
                    long before = jobsFailed.get();
                    awaitTrue(() -> jobsFailed.get() > before, Duration.ofSeconds(60), "a query job of task start " + restart);
                    first.rest().restart(flow, true, false);
                    first.rest().awaitRunning(flow, 1, Duration.ofSeconds(60));
                }
                long before = jobsFailed.get();
                awaitTrue(() -> jobsFailed.get() > before, Duration.ofSeconds(60), "a query job of the last task start");
                // listed while the task waits out its backoff, not while an attempt holds its table
                awaitQuiet(jobsFailed, Duration.ofMillis(1_500));
                leftByFailures = destinationTables(namePrefix);
                // (2) queries work again, but every result page takes 0.5 s: the worker is killed while it reads one
                proxy.rule((method, path) -> {
                    if (isPageRead(method, path)) {
                        pages.incrementAndGet();
                        return Action.delay(500);
                    }
                    return Action.PASS;
                });
                awaitTrue(() -> pages.get() >= 3, Duration.ofSeconds(90), "three result pages read");
                leftAtKill = destinationTables(namePrefix);
                first.kill();
            }
            proxy.rule((method, path) -> Action.PASS);
            try (ConnectWorker second = ConnectWorker.startProcess(workerProps, StackPaths.workDir("bqbatch-dst/worker-2"),
                    Duration.ofSeconds(120))) {
                second.rest().awaitRunning(flow, 1, Duration.ofSeconds(120));
                checks.awaitRows("SELECT count() AS n FROM " + chTable + " FINAL", r -> r.get(0).getLong("n") == rows,
                        Duration.ofSeconds(180));
                checks.awaitState(flow, fullName, s -> s.syncedBatchId() > 0 && s.lastError() == null, Duration.ofSeconds(60));
                // listed once the task is gone: a running task holds a table for a moment at every window it queries
                second.rest().delete(flow);
                Thread.sleep(3_000);
                List<String> leftAtEnd = destinationTables(namePrefix);
                System.out.printf("destination tables: %d after failed queries of 4 task starts (%d jobs failed) %s;"
                        + " %d while the killed task read %s; %d at the end %s%n", leftByFailures.size(), jobsFailed.get(),
                        leftByFailures, leftAtKill.size(), leftAtKill, leftAtEnd.size(), leftAtEnd);
                assertEquals(List.of(), leftByFailures, "destination tables left by failed queries");
                assertTrue(!leftAtKill.isEmpty(), "the killed task was reading no destination table");
                List<String> stillThere = new ArrayList<>(leftAtKill);
                stillThere.retainAll(leftAtEnd);
                assertEquals(List.of(), stillThere, "the killed task's destination table is still there");
                assertEquals(List.of(), leftAtEnd, "destination tables left once the flow was deleted");
            }
        } finally {
            stack.connect().rest().delete(prefix + "-sink");
        }
        bigQuery.delete(id);
    }

    /** A result page read after the first: tabledata.list of the query's result table. */
    private static boolean isPageRead(String method, String path) {
        return "GET".equals(method) && path.contains("/tables/") && path.contains("/data");
    }

    /** jobs.insert: the query jobs that write a result (the small queries use jobs.query). */
    private static boolean isJobInsert(String method, String path) {
        return "POST".equals(method) && path.matches(".*/projects/[^/]+/jobs(\\?.*)?");
    }

    /** The destination tables in {@link #DESTINATION} whose name starts with {@code namePrefix}. */
    private static List<String> destinationTables(String namePrefix) {
        List<String> names = new ArrayList<>();
        // one page: the emulator's page token never ends a listing
        for (Table t : bigQuery.listTables(DatasetId.of(project, DESTINATION), BigQuery.TableListOption.pageSize(1000)).getValues()) {
            if (t.getTableId().getTable().startsWith(namePrefix)) {
                names.add(t.getTableId().getTable());
            }
        }
        names.sort(null);
        return names;
    }

    /** A table (id, val, ts) of {@code rows} rows stamped a second apart, an hour ago: one window. */
    private static TableId createTable(String table, int rows) {
        TableId id = TableId.of(project, DATASET, table);
        bigQuery.delete(id);
        bigQuery.create(TableInfo.of(id, StandardTableDefinition.of(Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("val", StandardSQLTypeName.STRING), Field.of("ts", StandardSQLTypeName.TIMESTAMP)))));
        Instant base = Instant.now().minus(Duration.ofHours(1)).truncatedTo(ChronoUnit.SECONDS);
        List<Map<String, Object>> batch = new ArrayList<>();
        for (long i = 1; i <= rows; i++) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("id", i);
            row.put("val", "v" + i);
            row.put("ts", base.plusSeconds(i).toString());
            batch.add(row);
        }
        CdcChecks.insert(bigQuery, id, batch);
        return id;
    }

    /** The records of {@code topic} (one partition, written without transactions): its end offset. */
    private static long topicRecords(String topic) {
        Map<String, Object> props = new HashMap<>();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, stack.kafka().bootstrapServers());
        TopicPartition partition = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            return consumer.endOffsets(List.of(partition)).get(partition);
        }
    }

    /** Waits until {@code counter} has not moved for {@code quiet}. */
    private static void awaitQuiet(AtomicLong counter, Duration quiet) throws InterruptedException {
        long seen;
        do {
            seen = counter.get();
            Thread.sleep(quiet.toMillis());
        } while (counter.get() != seen);
    }

    private static void awaitTrue(java.util.function.BooleanSupplier condition, Duration timeout, String what)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("never happened within " + timeout + ": " + what);
            }
            Thread.sleep(100);
        }
    }
}
