package io.tablecdc.clickhouse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;

import org.apache.kafka.common.config.types.Password;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import com.clickhouse.client.api.Client;

import io.tablecdc.clickhouse.destination.ClickHouseDestination;
import io.tablecdc.clickhouse.destination.Cluster;
import io.tablecdc.clickhouse.stage.FileStageStore;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogConfig.CatalogSettings;
import io.tablecdc.catalog.RowCounts;
import io.tablecdc.catalog.Stage;
import io.tablecdc.catalog.StageFile;
import io.tablecdc.common.metrics.TableMetrics;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;

/**
 * A worker killed after a batch's normalized id was raised and its files deleted, but before its stage row was
 * deleted, leaves a stage row at or below the normalized id whose files are gone. The next normalize removes it
 * instead of failing on the missing file forever (which blocked the table's later batches).
 */
class TableNormalizerTest {
    private static EmbeddedPostgres postgres;
    private static Catalog catalog;

    @BeforeAll
    static void start() throws Exception {
        File dir = new File("target/embedded-pg/" + TableNormalizerTest.class.getSimpleName());
        postgres = EmbeddedPostgres.builder().setOverrideWorkingDirectory(dir).setDataDirectory(new File(dir, "data"))
                .setCleanDataDirectory(true).start();
        try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE catalog");
            s.execute("ALTER USER postgres PASSWORD 'pw'");
        }
        catalog = Catalog.open(new CatalogSettings(postgres.getJdbcUrl("postgres", "catalog"), "postgres", new Password("pw"),
                true, 2, 5_000), "TableNormalizerTest");
    }

    @AfterAll
    static void stop() throws Exception {
        if (catalog != null) {
            catalog.close();
        }
        if (postgres != null) {
            postgres.close();
        }
    }

    @Test
    void aStageRowLeftBehindAnAlreadyNormalizedBatchIsRemovedNotLoaded(@TempDir Path stageDir) throws Exception {
        String flow = "f";
        String table = "p.d.t";
        FileStageStore store = new FileStageStore(stageDir.toUri());
        Path local = Files.writeString(stageDir.resolve("local.avro"), "not read");
        String gone = store.upload(local, "f/t/1/a.avro");
        String left = store.upload(local, "f/t/2/b.avro");
        catalog.progress().initTable(flow, table);
        catalog.stages().upsertStage(flow, table, new Stage(1, List.of(new StageFile(gone, 1, 8)), 1, new RowCounts(1, 0, 0)));
        catalog.stages().upsertStage(flow, table, new Stage(2, List.of(new StageFile(left, 1, 8)), 1, new RowCounts(1, 0, 0)));
        // both loaded; the crash came after batch 1's file was deleted and before either stage row was
        catalog.progress().recordNormalize(flow, table, 2, new RowCounts(2, 0, 0), Instant.now());
        store.delete(gone);

        ScheduledExecutorService pool = Executors.newSingleThreadScheduledExecutor();
        // no worker here: the values are kept without being published
        TableMetrics.Table metrics = TableMetrics.forSink(() -> null, "test").table(flow, table);
        // ClickHouse is not there: a batch that is loaded already must not be loaded again
        try (Client unreachable = new Client.Builder().addEndpoint("http://127.0.0.1:9").setUsername("default").setPassword("")
                .build()) {
            ClickHouseDestination destination = new ClickHouseDestination(unreachable, "default", true, true, 1000, 1_000,
                    Cluster.single());
            TableNormalizer normalizer = new TableNormalizer(new TableKey(flow, table, "p_d_t"), catalog, store, destination,
                    false, pool, 100, 100, metrics, "test-owner", java.time.Duration.ofSeconds(30), pool);
            normalizer.wake();
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (!catalog.stages().listStages(flow, table).isEmpty() && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            normalizer.stop();
        } finally {
            pool.shutdownNow();
        }
        assertEquals(List.of(), catalog.stages().listStages(flow, table), "stage rows left");
        assertFalse(store.exists(left), "the remaining file of an already loaded batch is deleted");
        assertNull(catalog.progress().getTable(flow, table).orElseThrow().lastError(), "no error recorded");
        assertEquals(2, catalog.progress().getTable(flow, table).orElseThrow().normalizedBatchId());
        assertEquals(2, metrics.normalizedBatchId());
        assertEquals(0, metrics.batchesWaiting(), "nothing waits");
        assertEquals(0, metrics.rowsNormalized(), "nothing was loaded by this loop");
        assertEquals(0, metrics.errorEpisodes());
    }

    /**
     * After a rebalance the table's previous owner may still hold its normalize lease for a moment (a step in flight, or
     * a killed worker's lease running out): the new owner waits for it without an error episode (no WARN, no
     * {@code last_error}, no backoff), and loads once the lease is free.
     */
    @Test
    void aNewOwnerWaitsForThePreviousOwnersLeaseWithoutAnErrorEpisode(@TempDir Path stageDir) throws Exception {
        String flow = "f";
        String table = "p.d.handover";
        FileStageStore store = new FileStageStore(stageDir.toUri());
        Path local = Files.writeString(stageDir.resolve("local.avro"), "not read");
        String file = store.upload(local, "f/handover/1/a.avro");
        catalog.progress().initTable(flow, table);
        catalog.stages().upsertStage(flow, table, new Stage(1, List.of(new StageFile(file, 1, 8)), 1, new RowCounts(1, 0, 0)));
        catalog.progress().recordNormalize(flow, table, 1, new RowCounts(1, 0, 0), Instant.now());
        // the previous owner's lease, running out in 2 s
        assertTrue(catalog.sink().claimNormalizeLease(flow, table, "previous-owner", java.time.Duration.ofSeconds(2)));

        ScheduledExecutorService pool = Executors.newSingleThreadScheduledExecutor();
        TableMetrics.Table metrics = TableMetrics.forSink(() -> null, "test").table(flow, table);
        List<String> errorsSeen = new java.util.ArrayList<>();
        try (Client unreachable = new Client.Builder().addEndpoint("http://127.0.0.1:9").setUsername("default").setPassword("")
                .build()) {
            ClickHouseDestination destination = new ClickHouseDestination(unreachable, "default", true, true, 1000, 1_000,
                    Cluster.single());
            TableNormalizer normalizer = new TableNormalizer(new TableKey(flow, table, "p_d_handover"), catalog, store, destination,
                    false, pool, 100, 100, metrics, "new-owner", java.time.Duration.ofSeconds(30), pool);
            normalizer.wake();
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (!catalog.stages().listStages(flow, table).isEmpty() && System.nanoTime() < deadline) {
                String error = catalog.progress().getTable(flow, table).orElseThrow().lastError();
                if (error != null && !errorsSeen.contains(error)) {
                    errorsSeen.add(error);
                }
                Thread.sleep(50);
            }
            assertTrue(normalizer.stopAndWait(5_000));
        } finally {
            pool.shutdownNow();
        }
        assertEquals(List.of(), catalog.stages().listStages(flow, table), "the batch is done once the lease ran out");
        assertEquals(0, metrics.errorEpisodes(), "error episodes; errors seen in the catalog: " + errorsSeen);
        assertEquals(List.of(), errorsSeen, "errors seen in the catalog while the lease was held");
    }

    /**
     * An eager rebalance takes a table from a task and gives it back: the task stops the table's loop (a step in flight
     * may outlast the wait) and makes a new one. Each loop holds the lease under an owner of its own, so that the old
     * loop's release at the end of its late step leaves the new loop's lease alone. Before, every loop of a task had
     * the task's owner name: the old loop released the new one's lease, and a third loop could run beside it.
     */
    @Test
    void eachLoopOfATaskHoldsTheNormalizeLeaseUnderAnOwnerOfItsOwn(@TempDir Path stageDir) throws Exception {
        String flow = "f";
        String table = "p.d.twice";
        catalog.progress().initTable(flow, table);
        java.util.Map<String, String> props = new java.util.HashMap<>();
        props.put("clickhouse.url", "http://127.0.0.1:9");
        props.put("stage.uri", stageDir.toUri().toString());
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:9/unused");
        io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig config = new io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig(props);
        FileStageStore store = new FileStageStore(stageDir.toUri());
        try (Client unreachable = new Client.Builder().addEndpoint("http://127.0.0.1:9").setUsername("default").setPassword("")
                .build()) {
            ClickHouseDestination destination = new ClickHouseDestination(unreachable, "default", true, true, 1000, 1_000,
                    Cluster.single());
            NormalizeLoops loops = new NormalizeLoops(config, "sink", () -> catalog, store, destination,
                    TableMetrics.forSink(() -> null, "test"));
            TableKey key = new TableKey(flow, table, "p_d_twice");
            String first;
            String second;
            try {
                first = loops.of(key).owner();
                loops.remove(key);
                second = loops.of(key).owner();
            } finally {
                // stopped before the lease calls below: a running loop makes its own (it claims, fails against the
                // unreachable ClickHouse and releases), which once released the lease the test had just claimed
                loops.stop();
            }
            assertFalse(first.equals(second), "one owner for both loops: " + first);
            // the new loop holds the lease; the old loop's step ends late and releases what it believes is its own
            assertTrue(catalog.sink().claimNormalizeLease(flow, table, second, java.time.Duration.ofSeconds(30)));
            assertFalse(catalog.sink().releaseNormalizeLease(flow, table, first));
            assertTrue(catalog.sink().normalizeLeaseHolder(flow, table).orElse("").startsWith(second + " "),
                    "the lease stays the new loop's: " + catalog.sink().normalizeLeaseHolder(flow, table));
            assertTrue(catalog.sink().releaseNormalizeLease(flow, table, second));
        }
    }

    @Test
    void aLoopTouchesNothingWhileAnotherOwnerHoldsTheTablesNormalizeLease(@TempDir Path stageDir) throws Exception {
        String flow = "f";
        String table = "p.d.leased";
        FileStageStore store = new FileStageStore(stageDir.toUri());
        Path local = Files.writeString(stageDir.resolve("local.avro"), "not read");
        String file = store.upload(local, "f/leased/1/a.avro");
        catalog.progress().initTable(flow, table);
        catalog.stages().upsertStage(flow, table, new Stage(1, List.of(new StageFile(file, 1, 8)), 1, new RowCounts(1, 0, 0)));
        catalog.progress().recordNormalize(flow, table, 1, new RowCounts(1, 0, 0), Instant.now());
        // a loop of another task is still in flight
        assertTrue(catalog.sink().claimNormalizeLease(flow, table, "other-task", java.time.Duration.ofSeconds(60)));

        ScheduledExecutorService pool = Executors.newSingleThreadScheduledExecutor();
        TableMetrics.Table metrics = TableMetrics.forSink(() -> null, "test").table(flow, table);
        try (Client unreachable = new Client.Builder().addEndpoint("http://127.0.0.1:9").setUsername("default").setPassword("")
                .build()) {
            ClickHouseDestination destination = new ClickHouseDestination(unreachable, "default", true, true, 1000, 1_000,
                    Cluster.single());
            TableNormalizer normalizer = new TableNormalizer(new TableKey(flow, table, "p_d_leased"), catalog, store, destination,
                    false, pool, 100, 100, metrics, "this-task", java.time.Duration.ofSeconds(2), pool);
            normalizer.wake();
            // held for longer than twice this loop's own lease: now an error
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (catalog.progress().getTable(flow, table).orElseThrow().lastError() == null && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            String error = catalog.progress().getTable(flow, table).orElseThrow().lastError();
            assertTrue(error != null && error.contains("normalize lease held by other-task"), String.valueOf(error));
            assertEquals(1, catalog.stages().listStages(flow, table).size(), "the stage row stays while the lease is held");
            assertTrue(store.exists(file));

            // the other loop ends: this one takes the lease at its next retry and finishes the batch
            assertTrue(catalog.sink().releaseNormalizeLease(flow, table, "other-task"));
            deadline = System.nanoTime() + 20_000_000_000L;
            while (!catalog.stages().listStages(flow, table).isEmpty() && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            assertTrue(normalizer.stopAndWait(5_000));
        } finally {
            pool.shutdownNow();
        }
        assertEquals(List.of(), catalog.stages().listStages(flow, table), "stage rows left");
        assertFalse(store.exists(file));
        assertTrue(catalog.sink().normalizeLeaseHolder(flow, table).isEmpty(), "the lease is given up after the run");
        assertFalse(catalog.sink().renewNormalizeLease(flow, table, "this-task", java.time.Duration.ofSeconds(30)),
                "a late renewal does not take a lease given up");
    }

    /**
     * A statement the client gives up on (here a truncate that gets no answer within {@code clickhouse.timeout.ms}) may
     * still run on the server. The loop cancels it there by its own query id ({@code KILL QUERY WHERE query_id =
     * {id:String}}, the id bound as a parameter); while ClickHouse does not confirm the cancel, the loop keeps the
     * table's normalize lease (renewed, for longer than the lease lasts) and records the error, so that no other loop
     * loads the table meanwhile. Once the cancel is confirmed the batch is loaded and the lease given up. ClickHouse is
     * {@link ClickHouseStandIn}, a hand-written stand-in: the test engine runs one statement at a time and cannot show
     * a statement still running while it is asked to cancel it.
     */
    @Test
    void aStatementTheClientGaveUpOnIsCancelledOnTheServerAndTheLeaseKeptUntilItIs(@TempDir Path stageDir) throws Exception {
        String flow = "f";
        String table = "p.d.cancelled";
        FileStageStore store = new FileStageStore(stageDir.toUri());
        catalog.progress().initTable(flow, table);
        // a batch that is only a truncate: its one statement is the TRUNCATE
        catalog.stages().upsertStage(flow, table, new Stage(1, List.of(), 0, new RowCounts(0, 0, 0), true));
        ScheduledExecutorService pool = Executors.newScheduledThreadPool(2);
        ScheduledExecutorService leaseTimer = Executors.newSingleThreadScheduledExecutor();
        TableMetrics.Table metrics = TableMetrics.forSink(() -> null, "test").table(flow, table);
        java.time.Duration lease = java.time.Duration.ofSeconds(3);
        try (ClickHouseStandIn server = ClickHouseStandIn.start();
             Client client = new Client.Builder().addEndpoint(server.url()).setUsername("default").setPassword("")
                     .compressServerResponse(false).setSocketTimeout(3_000).build()) {
            server.hang("TRUNCATE", "KILL");
            ClickHouseDestination destination = new ClickHouseDestination(client, "default", true, true, 1000, 1_000,
                    Cluster.single());
            TableNormalizer normalizer = new TableNormalizer(new TableKey(flow, table, "p_d_cancelled"), catalog, store,
                    destination, false, pool, 200, 500, metrics, "cancel-owner", lease, leaseTimer);
            normalizer.wake();
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (catalog.progress().getTable(flow, table).orElseThrow().lastError() == null && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            String error = catalog.progress().getTable(flow, table).orElseThrow().lastError();
            assertTrue(error != null, "the truncate's timeout is recorded");

            // held by this loop for more than twice the lease: renewed while the truncate may still run
            long heldUntil = System.nanoTime() + lease.toNanos() * 2 + 1_000_000_000L;
            while (System.nanoTime() < heldUntil) {
                String holder = catalog.sink().normalizeLeaseHolder(flow, table).orElse("nobody");
                assertTrue(holder.startsWith("cancel-owner until "), "the lease while the truncate may still run is held by "
                        + holder + "; last error: " + catalog.progress().getTable(flow, table).orElseThrow().lastError());
                Thread.sleep(50);
            }
            error = catalog.progress().getTable(flow, table).orElseThrow().lastError();
            assertTrue(error.contains("KILL QUERY was not confirmed") && error.contains("normalize lease is kept"), error);
            assertEquals(0, catalog.progress().getTable(flow, table).orElseThrow().normalizedBatchId());

            List<ClickHouseStandIn.Request> truncates = server.requests("TRUNCATE");
            List<ClickHouseStandIn.Request> kills = server.requests("KILL");
            assertEquals(1, truncates.size(), "no truncate is sent again while the first may still run");
            String truncateId = truncates.get(0).queryId();
            assertTrue(truncateId != null && truncateId.startsWith("tablecdc-"), "the truncate's query id: " + truncateId);
            assertTrue(kills.size() >= 2, "the cancel is tried again: " + kills.size());
            for (ClickHouseStandIn.Request kill : kills) {
                assertEquals("KILL QUERY WHERE query_id = {id:String} SYNC", kill.sql().strip());
                assertEquals(truncateId, kill.params().get("param_id"), "the truncate's id, bound as a parameter");
            }

            server.answerAll();
            deadline = System.nanoTime() + 20_000_000_000L;
            while ((catalog.progress().getTable(flow, table).orElseThrow().normalizedBatchId() < 1
                    || catalog.sink().normalizeLeaseHolder(flow, table).isPresent()) && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            assertEquals(1, catalog.progress().getTable(flow, table).orElseThrow().normalizedBatchId(), "loaded once cancelled");
            assertEquals(java.util.Optional.empty(), catalog.sink().normalizeLeaseHolder(flow, table), "the lease given up");
            assertNull(catalog.progress().getTable(flow, table).orElseThrow().lastError(), "recovered");
            assertEquals(2, server.requests("TRUNCATE").size(), "the truncate again, once the first was cancelled");
            normalizer.stop();
        } finally {
            pool.shutdownNow();
            leaseTimer.shutdownNow();
        }
    }
}
