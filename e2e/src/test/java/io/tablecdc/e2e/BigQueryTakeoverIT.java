package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.cloud.bigquery.TableId;

import io.tablecdc.e2e.faults.HttpFaultProxy;
import io.tablecdc.e2e.faults.HttpFaultProxy.Action;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Issue 37, a BigQuery table whose task changes hands: its worker frozen while another worker takes the table over and
 * then thawed (two owners of one table), its worker killed right after an {@code initial.load=skip} sent its first
 * batch, and the table removed from the connector's config while the sink still has its batches staged. Against the
 * emulator, Kafka, the stage sink, ClickHouse and the catalog. A worker runs as its own JVM only where it is frozen or
 * killed; the sink and the worker that takes over run in the test JVM.
 */
class BigQueryTakeoverIT {
    private static final LocalStack stack = LocalStack.get();
    private static final Duration WAIT = Duration.ofSeconds(90);

    private static BigQueryFixture fx;

    @BeforeAll
    static void start() throws Exception {
        fx = BigQueryFixture.create(stack, "bqtakeover", "bqtakeover_catalog");
    }

    /**
     * Issue 37 item 1, two owners of one table: the worker running the table's task freezes (SIGSTOP) in the middle of
     * a poll, waiting for a BigQuery answer (held by a proxy); a second worker of its group takes the task over and
     * reads on; then the first thaws, gets its answer and goes on with a window the second has sent already, while
     * rows keep changing. The old task must send nothing more (the catalog refuses its batch id, and it stops), so no
     * row version reaches the topic or ClickHouse twice, and ClickHouse equals the table.
     */
    @Test
    void aFrozenWorkerThatThawsAfterItsTableMovedSendsNothingMore() throws Exception {
        String flow = "bqt-zombie";
        String prefix = "bqtzombie";
        TableId table = fx.table("zombie");
        BigQueryFixture.Rows rows = fx.rows(table);
        rows.insert(1, 20);
        ConnectRestClient shared = stack.connect().rest();
        shared.putConfig(prefix + "-sink", fx.sink(prefix));
        Map<String, String> props = fx.workerProps("bqt-zombie-" + System.nanoTime());
        Path zombieDir = StackPaths.workDir("bqt-zombie/worker-1");
        Files.deleteIfExists(zombieDir.resolve("worker.log"));
        try (HttpFaultProxy proxy = HttpFaultProxy.start("bigquery-zombie", stack.bigquery().endpoint());
             BigQueryFixture.Writer writer = rows.background(150);
             ConnectWorker zombie = ConnectWorker.startProcess(props, zombieDir, WAIT)) {
            Map<String, String> source = fx.source(table.getTable() + ":ts:id", 1, prefix);
            source.put("bigquery.endpoint", proxy.url());
            zombie.rest().putConfig(flow, source);
            zombie.rest().awaitRunning(flow, 1, WAIT);
            fx.awaitState(flow, table, s -> s.syncedBatchId() >= 3, WAIT);

            // the next BigQuery call (only the first worker's task calls it now) is held until the first worker thaws
            AtomicBoolean armed = new AtomicBoolean(true);
            CountDownLatch held = new CountDownLatch(1);
            CountDownLatch release = new CountDownLatch(1);
            proxy.rule((method, path) -> {
                if (armed.compareAndSet(true, false)) {
                    held.countDown();
                    try {
                        release.await(120, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                return Action.PASS;
            });
            assertTrue(held.await(60, TimeUnit.SECONDS), "the first worker's task never called BigQuery");
            zombie.freeze();
            boolean thawed = false;
            try (ConnectWorker second = ConnectWorker.startInProcess(props)) {
                String secondId = second.restUrl().getHost() + ":" + second.restUrl().getPort();
                long syncedAtFreeze = fx.checks.state(flow, fx.fullName(table)).syncedBatchId();
                awaitTaskOn(second.rest(), flow, secondId);
                // the second worker's task owns the table and sends what the first had not
                fx.awaitState(flow, table, s -> s.syncedBatchId() >= syncedAtFreeze + 2, WAIT);
                zombie.thaw();
                thawed = true;
                release.countDown();
                // the old task goes on with its poll: with nothing to stop it, it sends that window's rows again
                String lost = "another task took this table over";
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (!Files.readString(zombieDir.resolve("worker.log")).contains(lost)) {
                    List<String> doubled = fx.doubledInTopic(fx.topic(prefix, table));
                    assertEquals(List.of(), doubled, "row versions sent twice after the first worker thawed");
                    assertTrue(System.nanoTime() < deadline, "the thawed worker's task never said '" + lost + "'");
                    Thread.sleep(300);
                }
                writer.awaitMore(20, WAIT);
                writer.close();
                fx.awaitEqual(table, rows.expected(), WAIT);
                CdcChecks.State done = fx.awaitState(flow, table, s -> s.normalizedBatchId() >= s.syncedBatchId(), WAIT);
                awaitNoStages(flow);
                System.out.printf("frozen worker: %d rows and versions written; catalog %s%n", rows.written(), done);
                fx.assertNoRowDoubled(fx.topic(prefix, table), table);
                second.rest().delete(flow);
            } finally {
                if (!thawed) {
                    zombie.thaw();
                }
                release.countDown();
            }
        } finally {
            shared.delete(prefix + "-sink");
        }
    }

    /**
     * Issue 37 item 3: with {@code initial.load=skip} the table's first batch is sent, acknowledged and recorded in
     * the catalog, and the worker is killed before Connect ever flushed the task's offset. The next task has no offset;
     * it must read on from the catalog's cursor rather than skip again past the rows written meanwhile.
     */
    @Test
    void anInitialLoadSkipIsNotTakenAgainAfterAKillBeforeTheOffsetFlush() throws Exception {
        String flow = "bqt-skip";
        String prefix = "bqtskip";
        TableId table = fx.table("skip");
        BigQueryFixture.Rows rows = fx.rows(table);
        rows.insert(1, 5);
        ConnectRestClient shared = stack.connect().rest();
        shared.putConfig(prefix + "-sink", fx.sink(prefix));
        Map<String, String> props = fx.workerProps("bqt-skip-" + System.nanoTime());
        Map<String, String> noFlush = new HashMap<>(props);
        noFlush.put("offset.flush.interval.ms", "600000");
        try {
            ConnectWorker first = ConnectWorker.startProcess(noFlush, StackPaths.workDir("bqt-skip/worker-1"), WAIT);
            try {
                Map<String, String> source = fx.source(table.getTable() + ":ts:id", 1, prefix);
                source.put("initial.load", "skip");
                first.rest().putConfig(flow, source);
                first.rest().awaitRunning(flow, 1, WAIT);
                // rows 1-5 are skipped: the cursor is placed after them
                fx.awaitState(flow, table, s -> !s.cursor().isEmpty(), WAIT);
                rows.insert(6, 8);
                fx.awaitEqual(table, rows.expected().tailMap(6L), WAIT);
                CdcChecks.State sent = fx.awaitState(flow, table, s -> s.syncedBatchId() >= 1, WAIT);
                JsonNode offsets = first.rest().offsets(flow).path("offsets");
                System.out.printf("initial.load=skip: first batch recorded (%s); Connect offsets before the kill %s%n",
                        sent, offsets);
                assertEquals(0, offsets.size(), "Connect flushed an offset before the kill: " + offsets);
            } finally {
                first.kill();
            }
            rows.insert(9, 10);
            try (ConnectWorker second = ConnectWorker.startInProcess(props)) {
                second.rest().awaitRunning(flow, 1, WAIT);
                // rows 9 and 10 come after the point the first task skipped to: they arrive, 1-5 never do
                fx.awaitEqual(table, rows.expected().tailMap(6L), WAIT);
                fx.assertNoRowDoubled(fx.topic(prefix, table), table);
                second.rest().delete(flow);
            }
        } finally {
            shared.delete(prefix + "-sink");
        }
    }

    /**
     * Issue 37 item 5: a table removed from the connector's config (stop, new config, resume, as operators do) while
     * ClickHouse refuses its rows, so that its latest batches are staged and not loaded. The removal keeps them (and
     * the table's catalog row) until they are loaded; once ClickHouse takes rows again they load, nothing is lost, and
     * the connector's next start prunes the table.
     */
    @Test
    void aTableRemovedWhileItsBatchesAreStagedKeepsThemUntilTheyLoad() throws Exception {
        String flow = "bqt-remove";
        String prefix = "bqtremove";
        TableId gone = fx.table("removed");
        TableId kept = fx.table("kept");
        BigQueryFixture.Rows goneRows = fx.rows(gone);
        BigQueryFixture.Rows keptRows = fx.rows(kept);
        goneRows.insert(1, 3);
        keptRows.insert(1, 3);
        ConnectRestClient rest = stack.connect().rest();
        try {
            rest.putConfig(prefix + "-sink", fx.sink(prefix));
            rest.putConfig(flow, fx.source("removed:ts:id, kept:ts:id", 2, prefix));
            rest.awaitRunning(flow, 2, WAIT);
            fx.awaitEqual(gone, goneRows.expected(), WAIT);
            fx.awaitEqual(kept, keptRows.expected(), WAIT);

            // ClickHouse refuses the table's rows: its next batches are staged and stay so
            fx.checks.execute("ALTER TABLE " + fx.chTable(gone) + " ADD CONSTRAINT bqt_hold CHECK id < 0");
            goneRows.insert(4, 6);
            goneRows.update(List.of(2L));
            // every row written read (the update may come a window after the inserts), and a batch of them staged
            CdcChecks.State staged = fx.awaitState(flow, gone, s -> s.syncedBatchId() > s.normalizedBatchId()
                    && s.lastError() != null && s.syncedRows() >= goneRows.written(), WAIT);
            List<String> stagesBefore = fx.checks.stages(flow, fx.fullName(gone));
            assertFalse(stagesBefore.isEmpty(), "no staged batch of the table: " + staged);

            rest.stop(flow);
            rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText()), WAIT);
            rest.putConfig(flow, fx.source("kept:ts:id", 2, prefix));
            rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText()), WAIT);
            rest.resume(flow);
            rest.awaitRunning(flow, 1, WAIT);
            // the connector's start (which prunes removed tables) has run
            CdcChecks.State afterRemoval = fx.checks.state(flow, fx.fullName(gone));
            List<String> stagesAfter = fx.checks.stages(flow, fx.fullName(gone));
            System.out.printf("removed with batches staged: before %s %s; after the connector's start %s %s%n", staged,
                    stagesBefore, afterRemoval, stagesAfter);

            fx.checks.execute("ALTER TABLE " + fx.chTable(gone) + " DROP CONSTRAINT bqt_hold");
            fx.awaitEqual(gone, goneRows.expected(), WAIT);
            keptRows.insert(4, 5);
            fx.awaitEqual(kept, keptRows.expected(), WAIT);
            fx.awaitState(flow, gone, s -> s.normalizedBatchId() >= s.syncedBatchId(), WAIT);
            awaitNoStages(flow);
            // loaded now: the connector's next start prunes the table
            rest.restart(flow, false, false);
            fx.awaitState(flow, gone, s -> !s.exists(), WAIT);
            assertTrue(fx.checks.state(flow, fx.fullName(kept)).exists(), "the kept table's catalog row");
        } finally {
            rest.delete(flow);
            rest.delete(prefix + "-sink");
        }
    }

    // ------------------------------------------------------------------------------------------ helpers

    /** Waits until the connector's task runs on the worker {@code workerId}. */
    private static void awaitTaskOn(ConnectRestClient rest, String connector, String workerId) throws InterruptedException {
        rest.awaitStatus(connector, status -> {
            JsonNode tasks = status.path("tasks");
            return tasks.size() == 1 && "RUNNING".equals(tasks.get(0).path("state").asText())
                    && workerId.equals(tasks.get(0).path("worker_id").asText());
        }, WAIT);
    }

    private static void awaitNoStages(String flow) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!fx.checks.stages(flow, null).isEmpty()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("stage rows left: " + fx.checks.stages(flow, null));
            }
            Thread.sleep(200);
        }
    }
}
