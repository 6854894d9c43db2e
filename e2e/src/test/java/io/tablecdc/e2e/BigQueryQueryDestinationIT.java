package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.junit.jupiter.api.Test;

import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetId;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.FieldValueList;
import com.google.cloud.bigquery.Job;
import com.google.cloud.bigquery.JobInfo;
import com.google.cloud.bigquery.QueryJobConfiguration;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.Table;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Issue 16, large query results: with {@code query.destination.dataset} the snapshot chunks and the change windows are
 * written into a table of the task in that dataset and read from it page by page. End to end on the emulator, Kafka,
 * the stage sink and ClickHouse: a snapshot of three chunks of many pages and a change window arrive equal to BigQuery;
 * every such query job wrote into the destination with WRITE_TRUNCATE; a destination table seen while a batch is read
 * expires within a day; none is left once the connector is gone; validate() names a missing dataset on the setting.
 */
class BigQueryQueryDestinationIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATASET = "bqdest_it";
    private static final String SCRATCH = "bqdest_scratch";
    private static final Duration WAIT = Duration.ofSeconds(180);
    private static final int ROWS = 600;

    @Test
    void aSnapshotAndAChangeWindowAreReadThroughADestinationTable() throws Exception {
        BigQuery bq = stack.bigquery().client();
        String project = stack.bigquery().projectId();
        for (String dataset : new String[] {DATASET, SCRATCH}) {
            if (bq.getDataset(dataset) == null) {
                bq.create(DatasetInfo.of(dataset));
            }
        }
        String catalogUrl = stack.postgres().createDatabase("bqdest_catalog");
        CdcChecks checks = new CdcChecks(stack, "bqdest_catalog");
        ConnectRestClient rest = stack.connect().rest();

        TableId orders = TableId.of(project, DATASET, "orders");
        bq.delete(orders);
        bq.create(TableInfo.of(orders, StandardTableDefinition.of(Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("val", StandardSQLTypeName.STRING), Field.of("ts", StandardSQLTypeName.TIMESTAMP)))));
        // three days of rows ten days ago: the snapshot is three chunks of max.query.window.ms (a day)
        Instant base = Instant.now().minus(Duration.ofDays(10)).truncatedTo(ChronoUnit.DAYS);
        long step = 3L * 86_400 / ROWS;
        bq.query(QueryJobConfiguration.newBuilder("INSERT INTO `" + project + "`." + DATASET + ".orders (id, val, ts)"
                + " SELECT x, CONCAT('v', CAST(x AS STRING)), TIMESTAMP_ADD(TIMESTAMP '"
                + base.toString().replace('T', ' ').replace("Z", "+00") + "', INTERVAL x * " + step + " SECOND)"
                + " FROM UNNEST(GENERATE_ARRAY(1, " + ROWS + ")) AS x").setUseLegacySql(false).build());

        String flow = "bqdest-src";
        Map<String, String> source = SourceConfigs.queryCdc(stack, catalogUrl, DATASET, "orders:ts:id", 1, "bqdest");
        source.put("bigquery.page.size", "25");
        source.put("query.destination.dataset", SCRATCH);

        // validate(): a dataset that does not exist is named on the setting, with the connector; the real one passes
        Map<String, String> missing = new LinkedHashMap<>(source);
        missing.put("name", flow);
        missing.put("query.destination.dataset", "bqdest_missing");
        assertEquals(List.of("query.destination.dataset: connector " + flow + ": query.destination.dataset: dataset "
                        + project + ".bqdest_missing does not exist; create it in the location of the tables (a default"
                        + " table expiration of a day keeps it clean) or leave the setting empty"),
                ConnectRestClient.validationErrors(rest.validate(source.get("connector.class"), missing)));
        Map<String, String> good = new LinkedHashMap<>(source);
        good.put("name", flow);
        assertEquals(List.of(), ConnectRestClient.validationErrors(rest.validate(source.get("connector.class"), good)));
        assertEquals(List.of(), tables(bq, project), "validate()'s probe table is dropped");

        Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, "bqdest");
        sink.put("topics.regex", "bqdest\\..*");
        sink.put("stage.local.dir", StackPaths.workDir("bqdest-local").toString());
        sink.put("consumer.override.metadata.max.age.ms", "1000");
        rest.putConfig("bqdest-sink", sink);
        rest.awaitRunning("bqdest-sink", 1, WAIT);

        // what the destination dataset holds while the flow runs: each table seen, with its expiration
        Map<String, Long> seen = new ConcurrentHashMap<>();
        Thread watcher = new Thread(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                try {
                    for (Table t : bq.listTables(DatasetId.of(project, SCRATCH), BigQuery.TableListOption.pageSize(1_000)).getValues()) {
                        if (t.getTableId().getTable().startsWith("tablecdc_probe_")) {
                            // the PUT's own validate() creates and drops a probe table (checked above): not a batch's
                            continue;
                        }
                        Table full = bq.getTable(t.getTableId());
                        if (full != null) {
                            seen.put(t.getTableId().getTable(), full.getExpirationTime() == null ? -1L : full.getExpirationTime());
                        }
                    }
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                } catch (RuntimeException gone) {
                    // a table dropped between the listing and the get
                }
            }
        });
        watcher.setDaemon(true);
        String ch = (project + "." + DATASET + ".orders").replaceAll("[^A-Za-z0-9_]", "_");
        try {
            long t0 = System.currentTimeMillis();
            watcher.start();
            rest.putConfig(flow, source);
            rest.awaitRunning(flow, 1, WAIT);
            awaitEqual(bq, checks, project, ch, ROWS);
            // a change window after the snapshot
            List<Map<String, Object>> rows = new ArrayList<>();
            Instant now = Instant.now().truncatedTo(ChronoUnit.MICROS);
            for (int i = 1; i <= 40; i++) {
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("id", (long) (ROWS + i));
                row.put("val", "w" + i);
                row.put("ts", now.toString());
                rows.add(row);
            }
            CdcChecks.insert(bq, orders, rows);
            awaitEqual(bq, checks, project, ch, ROWS + 40);
            watcher.interrupt();

            // every result query wrote into the task's destination table, replacing its rows
            List<QueryJobConfiguration> written = new ArrayList<>();
            for (Job job : bq.listJobs(BigQuery.JobListOption.pageSize(100_000)).getValues()) {
                if (job.getConfiguration() instanceof QueryJobConfiguration q && q.getDestinationTable() != null
                        && SCRATCH.equals(q.getDestinationTable().getDataset())) {
                    written.add(q);
                }
            }
            assertTrue(written.size() >= 4, "the three snapshot chunks and the window: " + written.size() + " jobs");
            Set<String> names = new java.util.HashSet<>();
            for (QueryJobConfiguration q : written) {
                assertEquals(JobInfo.WriteDisposition.WRITE_TRUNCATE, q.getWriteDisposition(), q.getQuery());
                assertTrue(q.getQuery().contains("`orders`") || q.getQuery().contains(".orders"), q.getQuery());
                names.add(q.getDestinationTable().getTable());
            }
            assertEquals(1, names.size(), "one destination table per task start: " + names);
            String name = names.iterator().next();
            assertTrue(name.startsWith("tablecdc_bqdest_src_bqdest_it_orders_"), name);

            // a destination seen while its rows were read expires within a day of the flow's start
            assertFalse(seen.isEmpty(), "the destination table was seen while a batch was read");
            for (Map.Entry<String, Long> e : seen.entrySet()) {
                assertEquals(name, e.getKey());
                assertTrue(e.getValue() > t0 + Duration.ofHours(23).toMillis()
                        && e.getValue() < System.currentTimeMillis() + Duration.ofHours(25).toMillis(),
                        "expiration " + e.getValue() + " of " + e.getKey() + " is about a day after the query");
            }
        } finally {
            watcher.interrupt();
            rest.delete(flow);
            rest.delete("bqdest-sink");
        }
        // once the task is gone, so is its destination table
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (!tables(bq, project).isEmpty() && System.nanoTime() < deadline) {
            Thread.sleep(200);
        }
        assertEquals(List.of(), tables(bq, project), "no destination table is left");
    }

    /**
     * The tables of the destination dataset: the first page only. The emulator answers {@code "nextPageToken": null},
     * which the Java client reads as a token (a non-null "null" string), so iterating the pages never ends.
     */
    private static List<String> tables(BigQuery bq, String project) {
        List<String> names = new ArrayList<>();
        bq.listTables(DatasetId.of(project, SCRATCH), BigQuery.TableListOption.pageSize(1_000)).getValues()
                .forEach(t -> names.add(t.getTableId().getTable()));
        return names;
    }

    /** Waits until ClickHouse holds exactly BigQuery's rows (id and val), {@code count} of them. */
    private static void awaitEqual(BigQuery bq, CdcChecks checks, String project, String ch, int count) throws Exception {
        List<String> expected = new ArrayList<>();
        for (FieldValueList row : bq.query(QueryJobConfiguration.newBuilder("SELECT id, val FROM `" + project + "`."
                + DATASET + ".orders ORDER BY id").setUseLegacySql(false).build()).iterateAll()) {
            expected.add(row.get("id").getLongValue() + "=" + row.get("val").getStringValue());
        }
        assertEquals(count, expected.size());
        List<String> found = new ArrayList<>();
        checks.awaitRows("SELECT id, val FROM " + ch + " FINAL ORDER BY id", r -> {
            found.clear();
            r.forEach(g -> found.add(g.getLong("id") + "=" + g.getString("val")));
            return found.equals(expected);
        }, WAIT);
    }
}
