package io.tablecdc.e2e.bench;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.InsertAllRequest;
import com.google.cloud.bigquery.InsertAllResponse;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;

import io.tablecdc.e2e.flows.SourceConfigs;

/**
 * Suites 4 and 5: one query CDC flow (a task per table) into Kafka for 1, 10 and 50 BigQuery tables (the
 * local emulator) at a short interval. Each table starts with the same rows; measured: the initial load's rows per
 * second into Kafka and the worker's CPU per row, catalog transactions per batch, then an idle window of polling (CPU
 * and catalog transactions per table poll), and the worker's heap after a full GC with the tables flowing.
 */
final class QueryCdcSuite {
    private static final String DATASET = "bench_qcdc";

    private final Bench bench;
    private final SuiteReport scaling;
    private final SuiteReport memory;
    private final Measure rowsPerSecond;
    private final Measure cpuPerRow;
    private final Measure catalogPerBatch;
    private final Measure catalogPerPoll;
    private final Measure idleCpu;
    private final Measure heap;
    private final Measure perTable;
    private final String catalog = "bench_qcdc_catalog";
    private String catalogUrl;

    QueryCdcSuite(Bench bench) {
        this.bench = bench;
        BenchOptions o = bench.options;
        String baseline = label(o.qcdcTables.get(0));
        this.scaling = new SuiteReport("query-cdc", "4. Query CDC scaling", String.format(Locale.ROOT,
                "One BigQuery query CDC flow (`tasks.max` = tables, `sync.interval.ms=%d`, `safety.lag.ms=1000`,"
                        + " `initial.load=snapshot`) into Kafka (no sink: the source's own cost), for %s tables of %d"
                        + " rows each (id, timestamp watermark, string, double, int), against the local BigQuery emulator. Load:"
                        + " from deploying the source until every table's topic holds its rows. Catalog per batch: the catalog"
                        + " transactions from deploying the source until every snapshot batch is synced, over the batches"
                        + " synced (the tasks' start and their polls meanwhile included). Idle: the next %d s of polling with nothing new, per table and"
                        + " interval (the polls due; the emulator, one Python process answering one query at a time, serves"
                        + " fewer when many tables poll, which also bounds the load's rows per second). Catalog transactions are pg_stat_database's commits of the catalog database. Per-table figures should stay flat as tables grow; the ratio column"
                        + " compares each table count with %s.",
                o.qcdcIntervalMs, o.qcdcTables, o.qcdcRowsPerTable, o.qcdcSteadySeconds, baseline));
        this.rowsPerSecond = scaling.measure(new Measure("qcdc-rows-per-second", "Query CDC initial load: rows per second into Kafka",
                "rows/s", true, baseline));
        this.cpuPerRow = scaling.measure(new Measure("qcdc-cpu-per-1000-rows", "Query CDC initial load: worker CPU per 1000 rows",
                "CPU ms", false, baseline));
        this.catalogPerBatch = scaling.measure(new Measure("qcdc-catalog-per-batch", "Query CDC: catalog transactions per batch"
                + " (deployment and initial load, task start included)", "transactions", false, baseline));
        this.catalogPerPoll = scaling.measure(new Measure("qcdc-catalog-per-poll", "Query CDC idle: catalog transactions per table"
                + " and interval",
                "transactions", false, baseline));
        this.idleCpu = scaling.measure(new Measure("qcdc-idle-cpu-per-table", "Query CDC idle: worker CPU per table",
                "% of one core", false, baseline));
        this.memory = new SuiteReport("memory", "5. Memory", String.format(Locale.ROOT, "The Connect worker's (`-Xmx%s`, G1) used heap"
                + " after a full GC (`jcmd GC.run`, then `GC.heap_info`) at the end of suite 4's idle window, with each table count"
                + " flowing (the query CDC source's tasks); \"no tables\" is the same worker measured just before each"
                + " repetition's first deployment. Per-table overhead: (heap with N tables − heap just before deploying them) / N.", o.workerHeap));
        this.heap = memory.measure(new Measure("memory-heap-after-gc", "Worker heap after GC", "MiB", false, "no tables"));
        this.perTable = memory.measure(new Measure("memory-per-table", "Worker heap per table", "MiB per table", false, baseline));
        heap.declare("no tables");
        for (int n : o.qcdcTables) {
            for (Measure m : List.of(rowsPerSecond, cpuPerRow, catalogPerBatch, catalogPerPoll, idleCpu, heap, perTable)) {
                m.declare(label(n));
            }
        }
    }

    private static String label(int tables) {
        return tables + (tables == 1 ? " table" : " tables");
    }

    List<SuiteReport> run() throws Exception {
        BenchOptions o = bench.options;
        catalogUrl = bench.stack.postgres().createDatabase(catalog);
        BigQuery bigQuery = bench.stack.bigquery().client();
        if (bigQuery.getDataset(DATASET) == null) {
            bigQuery.create(DatasetInfo.of(DATASET));
        }
        for (int rep = 0; rep < o.reps && bench.startRepetition(scaling, rep); rep++) {
            for (int n : o.qcdcTables) {
                run(bigQuery, rep, n);
            }
        }
        return List.of(scaling, memory);
    }

    private void run(BigQuery bigQuery, int rep, int n) throws Exception {
        BenchOptions o = bench.options;
        String run = "r" + rep + "n" + n + "x" + Long.toString(System.currentTimeMillis() % 1_000_000, 36);
        String project = bench.stack.bigquery().projectId();
        List<String> entries = new ArrayList<>();
        List<String> topics = new ArrayList<>();
        long l0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            TableId id = TableId.of(project, DATASET, "q" + run + "_" + i);
            bigQuery.create(TableInfo.of(id, StandardTableDefinition.of(Schema.of(
                    Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                    Field.of("ts", StandardSQLTypeName.TIMESTAMP), Field.of("name", StandardSQLTypeName.STRING),
                    Field.of("score", StandardSQLTypeName.FLOAT64), Field.of("level", StandardSQLTypeName.INT64)))));
            load(bigQuery, id, o.qcdcRowsPerTable);
            entries.add(id.getTable() + ":ts:id");
            topics.add("qc" + run + "." + project + "." + DATASET + "." + id.getTable());
        }
        BenchRunner.log("query-cdc: %d tables of %d rows loaded into the emulator in %.1f s", n, o.qcdcRowsPerTable,
                (System.nanoTime() - l0) / 1e9);
        double heapBefore = Probe.heapAfterGcMb(bench.workerPid);
        if (n == o.qcdcTables.get(0)) {
            heap.add("no tables", rep, heapBefore);
        }
        String source = "bench-qcdc-" + run;
        Map<String, String> sourceConfig = SourceConfigs.queryCdc(bench.stack, catalogUrl, DATASET, String.join(", ", entries), n, "qc" + run);
        sourceConfig.put("sync.interval.ms", Long.toString(o.qcdcIntervalMs));
        sourceConfig.put("initial.load", "snapshot");
        long x0 = bench.transactions(catalog);
        double c0 = Probe.cpuSeconds(bench.workerPid);
        long t0 = System.nanoTime();
        bench.rest().putConfig(source, sourceConfig);
        bench.awaitRecords(source, topics, o.qcdcRowsPerTable, Duration.ofMinutes(20));
        double seconds = (System.nanoTime() - t0) / 1e9;
        double cpu = Probe.cpuSeconds(bench.workerPid) - c0;
        long rows = (long) n * o.qcdcRowsPerTable;
        String label = label(n);
        rowsPerSecond.add(label, rep, rows / seconds);
        cpuPerRow.add(label, rep, cpu * 1000 * 1000 / rows);
        BenchRunner.log("query-cdc run %d, %s: %d rows in %.1f s, worker CPU %.1f s", rep + 1, label, rows, seconds, cpu);

        // catalog traffic per batch over the deployment and initial load (the tasks' start included)
        String like = "%q" + run + "\\_%";
        awaitSynced(like, n, source, Duration.ofMinutes(10));
        Thread.sleep(1_500); // the statistics collector flushes about every second
        long x1 = bench.transactions(catalog);
        long batches = synced(like);
        catalogPerBatch.add(label, rep, (x1 - x0) / (double) batches);
        BenchRunner.log("query-cdc run %d, %s: %d catalog transactions for %d batches", rep + 1, label, x1 - x0, batches);

        double ic0 = Probe.cpuSeconds(bench.workerPid);
        long ix0 = bench.transactions(catalog);
        long i0 = System.nanoTime();
        Thread.sleep(o.qcdcSteadySeconds * 1000L);
        double idleSeconds = (System.nanoTime() - i0) / 1e9;
        double idle = Probe.cpuSeconds(bench.workerPid) - ic0;
        Thread.sleep(1_500);
        long ix1 = bench.transactions(catalog);
        double polls = n * idleSeconds * 1000 / o.qcdcIntervalMs;
        catalogPerPoll.add(label, rep, (ix1 - ix0) / polls);
        idleCpu.add(label, rep, 100 * idle / idleSeconds / n);
        bench.failIfTaskFailed(source);
        double heapWith = Probe.heapAfterGcMb(bench.workerPid);
        heap.add(label, rep, heapWith);
        perTable.add(label, rep, (heapWith - heapBefore) / n);
        BenchRunner.log("query-cdc run %d, %s: idle CPU %.1f s in %.0f s, %d catalog transactions; heap %.0f MiB (%.0f before)",
                rep + 1, label, idle, idleSeconds, ix1 - ix0, heapWith, heapBefore);
        bench.delete(source);
        for (int i = 0; i < n; i++) {
            bigQuery.delete(TableId.of(project, DATASET, "q" + run + "_" + i));
        }
    }

    /** Batches synced so far over the run's tables (identifiers matching {@code like}). */
    private long synced(String like) throws Exception {
        try (var c = bench.stack.postgres().connect(catalog);
             var ps = c.prepareStatement("SELECT coalesce(sum(synced_batch_id), 0) FROM cdc_table_replication_state"
                     + " WHERE source_table_identifier LIKE ?")) {
            ps.setString(1, like);
            try (var rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    /** Waits until the batches are synced; fails naming the connector after the timeout. */
    private void awaitSynced(String like, long batches, String connector, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (synced(like) < batches) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(connector + ": only " + synced(like) + " of " + batches
                        + " batches synced after " + timeout);
            }
            bench.failIfTaskFailed(connector);
            Thread.sleep(200);
        }
    }

    private static void load(BigQuery bigQuery, TableId table, int rows) {
        Instant ts = Instant.now().minusSeconds(300);
        for (int from = 0; from < rows; from += 500) {
            InsertAllRequest.Builder request = InsertAllRequest.newBuilder(table);
            for (int i = from; i < Math.min(rows, from + 500); i++) {
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("id", i);
                row.put("ts", ts.plusMillis(i).toString());
                row.put("name", "name-" + i);
                row.put("score", i * 0.5);
                row.put("level", i % 10);
                request.addRow(row);
            }
            InsertAllResponse response = bigQuery.insertAll(request.build());
            if (response.hasErrors()) {
                throw new IllegalStateException("insertAll into " + table + ": " + response.getInsertErrors());
            }
        }
    }
}
