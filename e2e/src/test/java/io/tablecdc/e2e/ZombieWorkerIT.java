package io.tablecdc.e2e;

import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.fasterxml.jackson.databind.JsonNode;

import io.tablecdc.e2e.faults.Fault;
import io.tablecdc.e2e.faults.FaultInjector;
import io.tablecdc.e2e.faults.NamedFaults;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Two owners of one table at once: the worker running a Postgres flow and its sink freezes (SIGSTOP: a long GC pause, a
 * suspended VM) with its connections to Postgres, the catalog, ClickHouse and the object store open, a second worker
 * joins, and once the group has handed every task to it the first worker thaws and runs on, its tasks still believing
 * for a while that they own their tables, until the group tells it otherwise. Nothing the old tasks write after they
 * lost their tables may change the result: ClickHouse equals Postgres, stays equal, and holds no two images of one key
 * and version.
 */
class ZombieWorkerIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "zombie_source";
    private static final int ROWS = 20_000;

    private static String catalogUrl;
    private static PgChecks pg;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("zombie_catalog");
        clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
        pg.holdEqualFor(Duration.ofSeconds(8));
    }

    @AfterAll
    static void stop() {
        if (clickhouse != null) {
            clickhouse.close();
        }
    }

    @Test
    void aFrozenWorkerThatThawsAfterItsTasksMovedChangesNothing() throws Exception {
        String schema = "zombie";
        String publication = "zombie_pub";
        String prefix = "zombie";
        String flow = prefix + "-flow";
        String sinkName = prefix + "-sink";
        pg.sql("DROP PUBLICATION IF EXISTS " + publication,
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + schema + ".copied (id int PRIMARY KEY, v int NOT NULL, note text)",
                "INSERT INTO " + schema + ".copied SELECT g, 0, 'seed' FROM generate_series(1, " + ROWS + ") g",
                "CREATE TABLE " + schema + ".streamed (id int PRIMARY KEY, v int NOT NULL)",
                "CREATE PUBLICATION " + publication + " FOR TABLE " + schema + ".copied, " + schema + ".streamed");
        Map<String, String[]> tables = new LinkedHashMap<>();
        tables.put(schema + ".copied", new String[] {"id::text || '|' || v::text || '|' || coalesce(note, '-')",
                "concat(toString(id), '|', toString(v), '|', ifNull(note, '-'))"});
        tables.put(schema + ".streamed", new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});

        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, prefix);
        source.put("slot.prefix", schema);
        source.put("tasks.max", "2");
        source.put("table.sync.copy", "all");
        source.put("batch.rows", "200");
        source.put("table.retry.delay.ms", "1000");
        Map<String, String> sink = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);

        String group = "zombie-" + System.nanoTime();
        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(), group, stack.pluginPath());
        try (TransactionWriter writer = writer(schema);
             ConnectWorker first = ConnectWorker.startProcess(workerProps, StackPaths.workDir("zombie/worker-1"),
                     Duration.ofSeconds(120), ConnectWorker.TEST_JVM_ARGS)) {
            first.rest().putConfig(sinkName, sink);
            first.rest().putConfig(flow, source);
            first.rest().awaitRunning(flow, 2, Duration.ofSeconds(120));
            first.rest().awaitRunning(sinkName, 1, Duration.ofSeconds(120));
            // the copy has begun and the writer's changes stream: the first worker is in the middle of its work
            pg.awaitTable(flow, schema + ".streamed", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            writer.awaitMore(20);
            first.freeze();
            boolean thawed = false;
            try (ConnectWorker second = ConnectWorker.startProcess(workerProps, StackPaths.workDir("zombie/worker-2"),
                    Duration.ofSeconds(120), ConnectWorker.TEST_JVM_ARGS)) {
                String secondId = workerId(second.restUrl());
                // the group evicts the frozen worker after its session timeout and gives every task to the second
                awaitAllOn(second, List.of(flow, sinkName), secondId, Duration.ofSeconds(120));
                writer.awaitMore(20);
                first.thaw();
                thawed = true;
                writer.awaitMore(40);
                writer.close();
                for (String table : tables.keySet()) {
                    pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(180));
                }
                pg.awaitEqual(tables, Duration.ofSeconds(180));
                // after the thaw the first worker rejoins the group: whatever it runs now, it runs as an owner again
                System.out.printf("zombie worker: %d writer transactions; ClickHouse equals Postgres, keyed copies %d%n",
                        writer.written.get(), pg.keyedCopies(schema + ".copied") + pg.keyedCopies(schema + ".streamed"));
                second.rest().delete(flow);
                second.rest().delete(sinkName);
            } finally {
                if (!thawed) {
                    first.thaw();
                }
            }
        }
    }

    /**
     * A zombie apply task: the Postgres flow's apply task is blocked between Kafka's acknowledgement of a batch and the
     * catalog write that records it (Byteman holds it 30 s there, as a long GC pause or a stalled call would) while the
     * task is restarted. Connect gives up waiting for the old instance after {@code task.shutdown.graceful.timeout.ms}
     * and starts a new one, which takes the flow (its apply epoch) and waits for the slot the old one still holds. When
     * the old instance wakes, its late catalog write is refused, it stops and lets the slot go; the new instance streams
     * on, and ClickHouse equals Postgres.
     */
    @Test
    void anApplyTaskBlockedBeforeItsCatalogWriteWhileItWasRestartedIsFenced() throws Exception {
        String schema = "zapply";
        String publication = "zapply_pub";
        String flow = "zapply-flow";
        String sinkName = "zapply-sink";
        pg.sql("DROP PUBLICATION IF EXISTS " + publication,
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + schema + ".t (id int PRIMARY KEY, v int NOT NULL)",
                "CREATE PUBLICATION " + publication + " FOR TABLE " + schema + ".t");
        Map<String, String[]> tables = Map.of(schema + ".t",
                new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, "zapply");
        source.put("slot.prefix", schema);
        source.put("tasks.max", "1");
        source.put("table.sync.copy", "none");
        Map<String, String> sink = SinkConfigs.flowSink(stack, catalogUrl, "zapply-stage", "zapply");

        Fault blocked = NamedFaults.pgAckedNotRecorded().hang(30_000).disarmed();
        FaultInjector injector = FaultInjector.of(StackPaths.workDir("zapply/faults"), blocked);
        Path workDir = StackPaths.workDir("zapply/worker");
        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                "zapply-" + System.nanoTime(), stack.pluginPath());
        try (ConnectWorker worker = ConnectWorker.startProcess(workerProps, workDir, Duration.ofSeconds(120),
                injector.jvmArgs(ConnectWorker.TEST_JVM_ARGS.toArray(String[]::new)))) {
            worker.rest().putConfig(sinkName, sink);
            worker.rest().putConfig(flow, source);
            worker.rest().awaitRunning(flow, 1, Duration.ofSeconds(120));
            pg.awaitTable(flow, schema + ".t", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            pg.sql("INSERT INTO " + schema + ".t SELECT g, 0 FROM generate_series(1, 100) g");
            pg.awaitEqual(tables, Duration.ofSeconds(120));

            // the old instance sends a batch and blocks before recording it; the task is restarted meanwhile
            injector.arm(blocked);
            pg.sql("UPDATE " + schema + ".t SET v = v + 1 WHERE id <= 50");
            injector.awaitFired(blocked, Duration.ofSeconds(60));
            worker.rest().restart(flow, true, false);
            pg.sql("UPDATE " + schema + ".t SET v = v + 10 WHERE id > 40", "DELETE FROM " + schema + ".t WHERE id % 7 = 0",
                    "INSERT INTO " + schema + ".t SELECT g, g FROM generate_series(101, 150) g");
            pg.awaitEqual(tables, Duration.ofSeconds(180));
            worker.rest().awaitRunning(flow, 1, Duration.ofSeconds(60));

            // the old instance woke up after the new one took the flow: its catalog write was refused
            Path log = workDir.resolve("worker.log");
            PgChecks.awaitTrue(() -> Files.readString(log).contains("flow " + flow + ": another apply task took over"),
                    Duration.ofSeconds(60), "the old apply task's late catalog write was not refused: see " + log);
            try (Connection c = pg.catalog(); PreparedStatement ps = c.prepareStatement(
                    "SELECT apply_epoch FROM cdc_flow WHERE flow_name = ?")) {
                ps.setString(1, flow);
                try (ResultSet rs = ps.executeQuery()) {
                    assertTrue(rs.next() && rs.getLong(1) >= 2, "the restarted task took the flow over");
                }
            }
            pg.sql("UPDATE " + schema + ".t SET v = v + 100 WHERE id % 3 = 0");
            pg.awaitEqual(tables, Duration.ofSeconds(120));
            worker.rest().delete(flow);
            worker.rest().delete(sinkName);
        }
    }

    private static String workerId(URI rest) {
        return rest.getHost() + ":" + rest.getPort();
    }

    /** Waits until the connectors and every task of them run on the worker {@code workerId}. */
    private static void awaitAllOn(ConnectWorker worker, List<String> connectors, String workerId, Duration timeout)
            throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = "";
        while (System.nanoTime() < deadline) {
            boolean all = true;
            StringBuilder seen = new StringBuilder();
            for (String connector : connectors) {
                JsonNode status;
                try {
                    status = worker.rest().status(connector);
                } catch (RuntimeException notYet) {
                    all = false;
                    continue;
                }
                seen.append(connector).append(": ").append(status).append("; ");
                all &= "RUNNING".equals(status.path("connector").path("state").asText())
                        && workerId.equals(status.path("connector").path("worker_id").asText())
                        && status.path("tasks").size() > 0;
                for (JsonNode task : status.path("tasks")) {
                    all &= "RUNNING".equals(task.path("state").asText()) && workerId.equals(task.path("worker_id").asText());
                }
            }
            last = seen.toString();
            if (all) {
                return;
            }
            Thread.sleep(500);
        }
        throw new AssertionError("the tasks never all moved to " + workerId + ": " + last);
    }

    private static TransactionWriter writer(String schema) {
        return new TransactionWriter("zombie-writer", pg, n -> List.of(
                "INSERT INTO " + schema + ".copied VALUES (" + (100_000 + n) + ", " + n + ", 'new')",
                "UPDATE " + schema + ".copied SET v = v + 1, note = 'w" + n + "' WHERE id = " + ((n * 37) % ROWS + 1),
                "DELETE FROM " + schema + ".copied WHERE id = " + ((n * 53) % ROWS + 1),
                "INSERT INTO " + schema + ".streamed VALUES (" + n + ", 0)",
                "UPDATE " + schema + ".streamed SET v = v + 1 WHERE id = " + Math.max(1, n / 2),
                "DELETE FROM " + schema + ".streamed WHERE id = " + Math.max(1, n / 3) + " AND id % 5 = 0"), () -> 10);
    }
}
