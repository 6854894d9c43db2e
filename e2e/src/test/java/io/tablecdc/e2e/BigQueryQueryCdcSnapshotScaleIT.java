package io.tablecdc.e2e;

import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.QueryJobConfiguration;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * A snapshot of many rows read in chunks, end to end in a worker of its own JVM: the time until ClickHouse holds every
 * row and the worker's heap in use (sampled with jstat every second), once undisturbed and once with the worker killed
 * when half the rows are recorded. The rows are spread over twelve days, so the snapshot is twelve chunks of a day
 * whatever their number. {@code -Drows=N} sets the number of rows per table (24,000 by default; the figures in
 * docs/bigquery-query-cdc.md are for 1,000,000). Asserted: every row arrives, and after the kill at most the chunk in
 * flight is read again (the catalog's synced rows end within one day's rows of N), never the snapshot from its start.
 */
class BigQueryQueryCdcSnapshotScaleIT {
    private static final LocalStack stack = LocalStack.get();
    private static final int ROWS = Integer.getInteger("rows", 24_000);
    /** Seconds between two rows: the rows always span the same twelve days. */
    private static final long STEP = 1_000_000L / ROWS;

    @Test
    void aSnapshotInChunksArrivesWholeAndResumesAfterAKill() throws Exception {
        BigQuery bq = stack.bigquery().client();
        String project = stack.bigquery().projectId();
        if (bq.getDataset("snapm") == null) {
            bq.create(DatasetInfo.of("snapm"));
        }
        String catalogUrl = stack.postgres().createDatabase("snapm_catalog");
        CdcChecks checks = new CdcChecks(stack, "snapm_catalog");
        // twelve days ending well in the past
        Instant base = Instant.now().minus(Duration.ofDays(30)).truncatedTo(java.time.temporal.ChronoUnit.DAYS);
        String lastCursor = base.plusSeconds(ROWS * STEP).toString().replace("Z", ".000000000Z");
        for (String t : new String[] {"plain", "killed"}) {
            TableId id = TableId.of(project, "snapm", t);
            bq.delete(id);
            bq.create(TableInfo.of(id, StandardTableDefinition.of(Schema.of(
                    Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                    Field.of("val", StandardSQLTypeName.STRING), Field.of("ts", StandardSQLTypeName.TIMESTAMP)))));
            long t0 = System.nanoTime();
            bq.query(QueryJobConfiguration.newBuilder("INSERT INTO `" + project + "`.snapm." + t + " (id, val, ts)"
                    + " SELECT x, CONCAT('v', CAST(x AS STRING)), TIMESTAMP_ADD(TIMESTAMP '" + base.toString().replace('T', ' ').replace("Z", "+00") + "', INTERVAL x * " + STEP + " SECOND)"
                    + " FROM UNNEST(GENERATE_ARRAY(1, " + ROWS + ")) AS x").setUseLegacySql(false).build());
            System.out.println("MEASURE insert " + t + " " + (System.nanoTime() - t0) / 1_000_000 + " ms");
        }
        Map<String, String> props = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(), "snapm-" + System.nanoTime(),
                stack.pluginPath());
        ConnectWorker worker = ConnectWorker.startProcess(props, StackPaths.workDir("snapm-0"), Duration.ofSeconds(90));
        try {
            Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, "snapm");
            sink.put("topics.regex", "snapm\\..*");
            sink.put("stage.local.dir", StackPaths.workDir("snapm-local").toString());
            sink.put("consumer.override.metadata.max.age.ms", "1000");
            worker.rest().putConfig("snapm-sink", sink);
            worker.rest().awaitRunning("snapm-sink", 1, Duration.ofSeconds(90));
            for (String t : new String[] {"plain", "killed"}) {
                String flow = "snapm-" + t;
                AtomicLong maxHeap = new AtomicLong();
                long pid = worker.pid().getAsLong();
                Thread sampler = sampler(pid, maxHeap);
                long t0 = System.nanoTime();
                Map<String, String> source = SourceConfigs.queryCdc(stack, catalogUrl, "snapm", t + ":ts:id", 1, "snapm");
                worker.rest().putConfig(flow, source);
                String ch = (project + ".snapm." + t).replaceAll("[^A-Za-z0-9_]", "_");
                if (t.equals("killed")) {
                    String name = project + ".snapm." + t;
                    checks.awaitState(flow, name, s -> s.syncedRows() >= ROWS / 2, Duration.ofMinutes(20));
                    Thread.sleep(1_500); // offsets flush every second
                    sampler.interrupt();
                    worker.kill();
                    System.out.println("MEASURE killed " + t + " after " + (System.nanoTime() - t0) / 1_000_000 + " ms, synced rows "
                            + checks.state(flow, name).syncedRows());
                    worker = ConnectWorker.startProcess(props, StackPaths.workDir("snapm-1"), Duration.ofSeconds(90));
                    sampler = sampler(worker.pid().getAsLong(), maxHeap);
                }
                checks.awaitRows("SELECT count() AS n FROM " + ch + " FINAL", r -> r.get(0).getLong("n") == ROWS, Duration.ofMinutes(30));
                long ms = (System.nanoTime() - t0) / 1_000_000;
                sampler.interrupt();
                CdcChecks.State state = checks.awaitState(flow, project + ".snapm." + t,
                        s -> s.normalizedBatchId() >= s.syncedBatchId() && lastCursor.equals(s.cursor()), Duration.ofMinutes(5));
                System.out.println("MEASURE " + t + " " + ROWS + " rows in ClickHouse after " + ms + " ms; max worker heap used "
                        + maxHeap.get() / 1024 + " MiB; catalog " + state);
                // the chunk in flight at the kill may be read again, or sent but never recorded; a snapshot started
                // over would record at least half the rows twice
                // a chunk is one day of rows: 86,400 / STEP of them (2,108 at 24,000 rows), the twelfth day partly
                long chunk = (86_400 + STEP - 1) / STEP;
                org.junit.jupiter.api.Assertions.assertTrue(Math.abs(state.syncedRows() - ROWS) <= chunk,
                        "at most one chunk read again after the kill: " + state);
                org.junit.jupiter.api.Assertions.assertTrue(state.syncedBatchId() >= 12, "twelve chunks: " + state);
            }
        } finally {
            worker.close();
        }
    }

    private static Thread sampler(long pid, AtomicLong maxHeap) {
        Thread thread = new Thread(() -> {
            Path jstat = Path.of(System.getProperty("java.home"), "bin", "jstat");
            while (!Thread.currentThread().isInterrupted()) {
                try {
                    Process p = new ProcessBuilder(jstat.toString(), "-gc", Long.toString(pid)).start();
                    String[] lines = new String(p.getInputStream().readAllBytes()).trim().split("\n");
                    if (lines.length == 2) {
                        String[] h = lines[0].trim().split("\\s+");
                        String[] v = lines[1].trim().split("\\s+");
                        double used = 0;
                        for (int i = 0; i < h.length; i++) {
                            if (h[i].equals("S0U") || h[i].equals("S1U") || h[i].equals("EU") || h[i].equals("OU")) {
                                used += Double.parseDouble(v[i]);
                            }
                        }
                        maxHeap.accumulateAndGet((long) used, Math::max);
                    }
                    Thread.sleep(1_000);
                } catch (InterruptedException e) {
                    return;
                } catch (Exception e) {
                    // the worker is gone
                }
            }
        });
        thread.setDaemon(true);
        thread.start();
        return thread;
    }
}
