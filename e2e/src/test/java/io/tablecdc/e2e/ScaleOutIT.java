package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.query.GenericRecord;
import com.fasterxml.jackson.databind.JsonNode;
import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.FieldValueList;
import com.google.cloud.bigquery.QueryJobConfiguration;
import com.google.cloud.bigquery.QueryParameterValue;
import com.google.cloud.bigquery.TableId;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Connect's distributed mode with two worker processes in one cluster: a query CDC flow of four tables (one task per
 * table) and its stage sink (two tasks) spread their tasks over both workers; one worker is killed with SIGKILL while
 * rows are inserted and updated in the emulator; its tasks move to the survivor, and ClickHouse (FINAL) ends equal to
 * the source, row for row, each row once.
 */
class ScaleOutIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATASET = "scale_it";
    private static final String CATALOG = "scale_catalog";
    private static final String FLOW = "scale";
    private static final String SINK = "scale-sink";
    private static final List<String> TABLES = List.of("s1", "s2", "s3", "s4");
    private static final Duration WAIT = Duration.ofSeconds(90);

    private BigQuery bigQuery;
    private String project;
    private CdcChecks checks;

    @Test
    void tasksSpreadOverTwoWorkersMoveToTheSurvivorWhenOneIsKilledAndNoRowIsLostOrDoubled() throws Exception {
        bigQuery = stack.bigquery().client();
        project = stack.bigquery().projectId();
        if (bigQuery.getDataset(DATASET) == null) {
            bigQuery.create(DatasetInfo.of(DATASET));
        }
        String catalogUrl = stack.postgres().createDatabase(CATALOG);
        checks = new CdcChecks(stack, CATALOG);
        List<TableId> tables = new ArrayList<>();
        for (String t : TABLES) {
            tables.add(createTable(t));
        }

        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                "scale-" + System.nanoTime(), stack.pluginPath());
        // the group notices a dead member after the session timeout (10 s by default), then holds its tasks for
        // scheduled.rebalance.max.delay.ms in case it comes back; both short so that the test stays short
        workerProps.put("session.timeout.ms", "6000");
        workerProps.put("heartbeat.interval.ms", "1500");
        workerProps.put("scheduled.rebalance.max.delay.ms", "5000");
        ConnectWorker a = ConnectWorker.startProcess(workerProps, StackPaths.workDir("scale-a"), WAIT);
        ConnectWorker b = null;
        Writer writer = new Writer(tables);
        try {
            b = ConnectWorker.startProcess(workerProps, StackPaths.workDir("scale-b"), WAIT);
            String idA = workerId(a);
            String idB = workerId(b);
            ConnectRestClient rest = a.rest();

            for (TableId t : tables) {
                writer.insert(t);
            }
            Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, "scale");
            sink.put("tasks.max", "2");
            sink.put("topics.regex", "scale\\..*");
            sink.put("stage.local.dir", StackPaths.workDir("scale-local").toString());
            sink.put("normalize.backoff.initial.ms", "300");
            sink.put("normalize.backoff.max.ms", "1000");
            // a new topic is picked up within a second, and a dead worker's consumer leaves the sink's group in 6 s
            sink.put("consumer.override.metadata.max.age.ms", "1000");
            sink.put("consumer.override.session.timeout.ms", "6000");
            sink.put("consumer.override.heartbeat.interval.ms", "1500");
            rest.putConfig(SINK, sink);
            Map<String, String> source = SourceConfigs.queryCdc(stack, catalogUrl, DATASET,
                    "s1:ts:id, s2:ts:id, s3:ts:id, s4:ts:id", 4, "scale");
            // inserts and updates are stamped in Java before the emulator has them; on a loaded machine that can take
            // seconds, and a row stamped further back than the safety lag could be passed by the cursor unseen
            source.put("safety.lag.ms", "5000");
            rest.putConfig(FLOW, source);

            // both workers hold tasks of the flow (with incremental cooperative rebalancing the second worker may get
            // its share in a rebalance after the first assignment)
            JsonNode spread = rest.awaitStatus(FLOW, s -> allRunning(s, 4) && workers(s).size() == 2, WAIT);
            JsonNode sinkSpread = rest.awaitStatus(SINK, s -> allRunning(s, 2), WAIT);
            Set<String> used = new TreeSet<>(workers(spread));
            used.addAll(workers(sinkSpread));
            assertEquals(new TreeSet<>(List.of(idA, idB)), used, "workers of the tasks: " + spread + " " + sinkSpread);
            System.out.println("tasks before the kill: " + assignment(spread) + " " + assignment(sinkSpread));
            for (TableId t : tables) {
                checks.awaitRows("SELECT count() AS n FROM " + chTable(t) + " FINAL", r -> r.get(0).getLong("n") >= 1, WAIT);
            }

            writer.start(200);
            Thread.sleep(3_000);
            // the worker holding more tasks of the flow dies, so that most of the work has to move
            ConnectWorker victim = b;
            ConnectWorker survivor = a;
            String survivorId = idA;
            if (taskCount(rest.status(FLOW), idA) > taskCount(rest.status(FLOW), idB)) {
                victim = a;
                survivor = b;
                survivorId = idB;
            }
            String victimId = workerId(victim);
            ConnectRestClient survivorRest = survivor.rest();
            int victimTasks = taskCount(survivorRest.status(FLOW), victimId) + taskCount(survivorRest.status(SINK), victimId);
            long writesAtKill = writer.inserts.get() + writer.updates.get();
            long killedAt = System.nanoTime();
            victim.kill();
            String survivorFinal = survivorId;
            survivorRest.awaitStatus(FLOW, s -> allRunning(s, 4) && Set.of(survivorFinal).equals(workers(s))
                    && survivorFinal.equals(s.path("connector").path("worker_id").asText()), WAIT);
            long flowMovedMs = (System.nanoTime() - killedAt) / 1_000_000;
            survivorRest.awaitStatus(SINK, s -> allRunning(s, 2) && Set.of(survivorFinal).equals(workers(s))
                    && survivorFinal.equals(s.path("connector").path("worker_id").asText()), WAIT);
            long sinkMovedMs = (System.nanoTime() - killedAt) / 1_000_000;
            long writesWhileMoving = writer.inserts.get() + writer.updates.get() - writesAtKill;
            assertTrue(writesWhileMoving > 0, "rows were written while the tasks moved");
            System.out.printf("killed worker %s holding %d tasks; every task RUNNING on %s %d ms (flow) and %d ms (sink)"
                    + " after the kill; %d writes meanwhile%n", victimId, victimTasks, survivorId, flowMovedMs, sinkMovedMs,
                    writesWhileMoving);

            // rows keep flowing through the survivor alone
            for (TableId t : tables) {
                long before = checks.countFinal(chTable(t));
                checks.awaitRows("SELECT count() AS n FROM " + chTable(t) + " FINAL", r -> r.get(0).getLong("n") > before, WAIT);
            }
            writer.stop();
            long catchUp = System.nanoTime();
            for (TableId t : tables) {
                awaitEqualToSource(t);
            }
            System.out.printf("writer: %d inserts, %d updates, longest write %d ms; ClickHouse equal to the source %d ms"
                            + " after the writer stopped%n", writer.inserts.get(), writer.updates.get(), writer.maxWriteMs.get(),
                    (System.nanoTime() - catchUp) / 1_000_000);
            assertTrue(writer.updates.get() > 0, "rows were updated while the worker died");
            survivorRest.delete(FLOW);
            survivorRest.delete(SINK);
        } finally {
            writer.stop();
            a.close();
            if (b != null) {
                b.close();
            }
        }
    }

    /** The worker id Connect reports in a status: the REST listener's {@code host:port}. */
    private static String workerId(ConnectWorker worker) {
        return worker.restUrl().getHost() + ":" + worker.restUrl().getPort();
    }

    private static boolean allRunning(JsonNode status, int tasks) {
        if (!"RUNNING".equals(status.path("connector").path("state").asText()) || status.path("tasks").size() != tasks) {
            return false;
        }
        for (JsonNode task : status.path("tasks")) {
            if (!"RUNNING".equals(task.path("state").asText())) {
                return false;
            }
        }
        return true;
    }

    private static Set<String> workers(JsonNode status) {
        Set<String> ids = new TreeSet<>();
        status.path("tasks").forEach(t -> ids.add(t.path("worker_id").asText()));
        return ids;
    }

    private static int taskCount(JsonNode status, String workerId) {
        int n = 0;
        for (JsonNode task : status.path("tasks")) {
            if (workerId.equals(task.path("worker_id").asText())) {
                n++;
            }
        }
        return n;
    }

    private static String assignment(JsonNode status) {
        Map<Integer, String> tasks = new TreeMap<>();
        status.path("tasks").forEach(t -> tasks.put(t.path("id").asInt(), t.path("worker_id").asText()));
        return status.path("name").asText() + " " + tasks;
    }

    private TableId createTable(String table) {
        return BigQueryFixture.idValTsTable(bigQuery, TableId.of(project, DATASET, table));
    }

    private String name(TableId id) {
        return project + "." + DATASET + "." + id.getTable();
    }

    private String chTable(TableId id) {
        return name(id).replaceAll("[^A-Za-z0-9_]", "_");
    }

    /** ClickHouse's rows of the table after FINAL are the source's rows (read from the emulator), each once. */
    private void awaitEqualToSource(TableId table) throws InterruptedException {
        Map<Long, String> source = new TreeMap<>();
        for (FieldValueList row : bigQuery.query(QueryJobConfiguration.of("SELECT id, val FROM `" + name(table) + "`")).iterateAll()) {
            source.put(row.get("id").getLongValue(), row.get("val").getStringValue());
        }
        String sql = "SELECT id, val, count() OVER (PARTITION BY id) AS copies FROM " + chTable(table) + " FINAL ORDER BY id";
        List<GenericRecord> rows;
        try {
            rows = checks.awaitRows(sql, r -> r.size() == source.size() && r.stream()
                    .allMatch(row -> row.getString("val").equals(source.get(row.getLong("id")))), WAIT);
        } catch (AssertionError e) {
            Map<Long, String> actual = new TreeMap<>();
            checks.clickhouse().queryAll("SELECT id, val FROM " + chTable(table) + " FINAL")
                    .forEach(r -> actual.put(r.getLong("id"), r.getString("val")));
            List<String> differences = new ArrayList<>();
            source.forEach((id, val) -> {
                if (!val.equals(actual.get(id))) {
                    differences.add(id + ": source " + val + ", ClickHouse " + actual.get(id));
                }
            });
            actual.keySet().stream().filter(id -> !source.containsKey(id)).forEach(id -> differences.add(id + ": not in the source"));
            throw new AssertionError(table.getTable() + ": " + source.size() + " rows in the source, " + actual.size()
                    + " in ClickHouse; differences " + differences, e);
        }
        for (GenericRecord row : rows) {
            assertEquals(1, row.getLong("copies"), "copies of " + table.getTable() + " row " + row.getLong("id"));
        }
    }

    /**
     * Inserts a row into every table and updates an earlier row of one table (round robin) per round, each stamped
     * with the time in Java, until stopped.
     */
    private final class Writer {
        private final List<TableId> tables;
        private final Map<String, AtomicLong> lastIds = new java.util.concurrent.ConcurrentHashMap<>();
        private final AtomicLong sequence = new AtomicLong();
        private final AtomicLong inserts = new AtomicLong();
        private final AtomicLong updates = new AtomicLong();
        private final AtomicLong maxWriteMs = new AtomicLong();
        private volatile Background loop;

        Writer(List<TableId> tables) {
            this.tables = tables;
        }

        void insert(TableId table) {
            long id = lastIds.computeIfAbsent(table.getTable(), t -> new AtomicLong()).incrementAndGet();
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("id", id);
            row.put("val", "v" + sequence.incrementAndGet());
            row.put("ts", Instant.now().truncatedTo(ChronoUnit.MICROS).toString());
            long started = System.nanoTime();
            CdcChecks.insert(bigQuery, table, List.of(row));
            maxWriteMs.accumulateAndGet((System.nanoTime() - started) / 1_000_000, Math::max);
            inserts.incrementAndGet();
        }

        void update(TableId table) throws InterruptedException {
            long last = lastIds.get(table.getTable()).get();
            long id = 1 + (sequence.get() * 7) % last;
            Instant now = Instant.now().truncatedTo(ChronoUnit.MICROS);
            long micros = ChronoUnit.MICROS.between(Instant.EPOCH, now);
            long started = System.nanoTime();
            bigQuery.query(QueryJobConfiguration.newBuilder("UPDATE `" + name(table) + "` SET val = @val, ts = @ts WHERE id = @id")
                    .addNamedParameter("val", QueryParameterValue.string("u" + sequence.incrementAndGet()))
                    .addNamedParameter("ts", QueryParameterValue.timestamp(micros))
                    .addNamedParameter("id", QueryParameterValue.int64(id))
                    .build());
            maxWriteMs.accumulateAndGet((System.nanoTime() - started) / 1_000_000, Math::max);
            updates.incrementAndGet();
        }

        void start(long periodMs) {
            int[] round = {0};
            loop = new Background("scale-writer", () -> {
                for (TableId t : tables) {
                    insert(t);
                }
                update(tables.get(round[0]++ % tables.size()));
            }, periodMs);
        }

        /** Stops the writer (if it runs) and reports its failure. */
        void stop() throws InterruptedException {
            Background running = loop;
            loop = null;
            if (running != null) {
                running.stop();
            }
        }
    }
}
