package io.tablecdc.e2e.bench;

import java.io.PrintStream;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;
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

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Freshness with one table stalled: N tables replicated by one query CDC flow and one stage sink on the local stack,
 * rows written to every table all along; the time from a row's insert into BigQuery (its watermark) to the moment it is
 * visible in ClickHouse, for the healthy tables, once with every table healthy and once with table 0's ClickHouse
 * table refusing every insert (its normalize fails and backs off, its batches pile up in the stage).
 *
 * <pre>FreshnessBench [tables (10)] [sync.interval.ms (5000)] [measured seconds per run (60)] [safety.lag.ms (1000)]</pre>
 */
public final class FreshnessBench {
    private static final String DATASET = "freshness";
    /** The writer's pause between two inserts (each insert goes to the next table). */
    private static final long WRITE_PAUSE_MS = 200;

    private FreshnessBench() {
    }

    public static void main(String[] args) throws Exception {
        int tables = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        long intervalMs = args.length > 1 ? Long.parseLong(args[1]) : 5_000;
        int seconds = args.length > 2 ? Integer.parseInt(args[2]) : 60;
        long lagMs = args.length > 3 ? Long.parseLong(args[3]) : 1_000;
        PrintStream out = System.out;
        LocalStack stack = LocalStack.get();
        String catalogUrl = stack.postgres().createDatabase("freshness_catalog");
        BigQuery bigQuery = stack.bigquery().client();
        if (bigQuery.getDataset(DATASET) == null) {
            bigQuery.create(DatasetInfo.of(DATASET));
        }
        List<Result> results = new ArrayList<>();
        try (Client clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                .compressServerResponse(false).build()) {
            for (boolean stalled : new boolean[] {false, true}) {
                results.add(run(stack, catalogUrl, bigQuery, clickhouse, stalled ? "stalled" : "healthy", tables, intervalMs,
                        seconds, lagMs, stalled));
            }
        }
        out.println();
        out.printf("%d tables, sync.interval.ms=%d, safety.lag.ms=%d, %d s measured per run; one writer cycles through the"
                + " tables, one row per insert, %d ms between inserts (plus the emulator's own insert time)%n%n",
                tables, intervalMs, lagMs, seconds, WRITE_PAUSE_MS);
        out.println("| run | healthy tables | rows measured | p50 insert → visible | p95 | max | stalled table |");
        out.println("|---|---|---|---|---|---|---|");
        for (Result r : results) {
            out.printf("| %s | %d | %d | %.1f s | %.1f s | %.1f s | %s |%n", r.name, r.healthyTables, r.latenciesMs.size(),
                    percentile(r.latenciesMs, 50) / 1000.0, percentile(r.latenciesMs, 95) / 1000.0,
                    percentile(r.latenciesMs, 100) / 1000.0, r.stalledNote);
        }
        System.exit(0);
    }

    private record Result(String name, int healthyTables, List<Long> latenciesMs, String stalledNote) {
    }


    private static Result run(LocalStack stack, String catalogUrl, BigQuery bigQuery, Client clickhouse, String name, int tables,
                              long intervalMs, int seconds, long lagMs, boolean stalled) throws Exception {
        String flow = "fresh-" + name;
        String prefix = "fresh" + name;
        List<TableId> ids = new ArrayList<>();
        List<String> entries = new ArrayList<>();
        String project = stack.bigquery().projectId();
        for (int i = 0; i < tables; i++) {
            TableId id = TableId.of(project, DATASET, name + "_" + i);
            bigQuery.delete(id);
            bigQuery.create(TableInfo.of(id, StandardTableDefinition.of(Schema.of(
                    Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                    Field.of("ts", StandardSQLTypeName.TIMESTAMP)))));
            ids.add(id);
            entries.add(id.getTable() + ":ts:id");
            insert(bigQuery, id, 0, Instant.now().minusSeconds(60));
        }
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, flow);
        sink.put("topics.regex", prefix + "\\..*");
        sink.put("stage.local.dir", StackPaths.workDir(flow + "-local").toString());
        sink.put("consumer.override.metadata.max.age.ms", "1000");
        sink.put("normalize.backoff.initial.ms", "1000");
        sink.put("normalize.backoff.max.ms", "5000");
        rest.putConfig(flow + "-sink", sink);
        Map<String, String> source = SourceConfigs.queryCdc(stack, catalogUrl, DATASET, String.join(", ", entries), tables, prefix);
        source.put("sync.interval.ms", Long.toString(intervalMs));
        source.put("safety.lag.ms", Long.toString(lagMs));
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, tables, Duration.ofSeconds(180));
        List<String> chTables = new ArrayList<>();
        for (TableId id : ids) {
            chTables.add((project + "." + DATASET + "." + id.getTable()).replaceAll("[^A-Za-z0-9_]", "_"));
        }
        // every table's first row is in ClickHouse before measuring
        long deadline = System.nanoTime() + Duration.ofSeconds(180).toNanos();
        for (String t : chTables) {
            while (maxId(clickhouse, t) < 0) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(t + " never appeared in ClickHouse");
                }
                Thread.sleep(200);
            }
        }
        if (stalled) {
            clickhouse.execute("ALTER TABLE " + chTables.get(0) + " ADD CONSTRAINT stalled CHECK id < 0").get().close();
        }
        System.out.printf("%s: %d tables deployed%s; measuring for %d s%n", name, tables,
                stalled ? ", " + ids.get(0).getTable() + " stalled (its ClickHouse table refuses inserts)" : "", seconds);

        // writer: one insert at a time, cycling through the tables; remembers each row's watermark
        Map<String, Map<Long, Long>> stampedMs = new ConcurrentHashMap<>();
        Map<String, Map<Long, Long>> visibleMs = new HashMap<>();
        for (String t : chTables) {
            stampedMs.put(t, new ConcurrentHashMap<>());
            visibleMs.put(t, new HashMap<>());
        }
        long end = System.currentTimeMillis() + seconds * 1000L;
        Thread writer = new Thread(() -> {
            long[] next = new long[tables];
            int i = 0;
            while (System.currentTimeMillis() < end) {
                int table = i++ % tables;
                long id = ++next[table];
                Instant now = Instant.now().truncatedTo(ChronoUnit.MICROS);
                insert(bigQuery, ids.get(table), id, now);
                stampedMs.get(chTables.get(table)).put(id, now.toEpochMilli());
                try {
                    Thread.sleep(WRITE_PAUSE_MS);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "freshness-writer");
        writer.start();

        // observer: every 200 ms, the largest id visible in each healthy table
        List<String> healthy = stalled ? chTables.subList(1, chTables.size()) : chTables;
        StringBuilder union = new StringBuilder();
        for (String t : healthy) {
            union.append(union.isEmpty() ? "" : " UNION ALL ").append("SELECT '").append(t).append("' AS t, max(id) AS m FROM ").append(t);
        }
        long drainUntil = end + Duration.ofSeconds(30).toMillis();
        while (System.currentTimeMillis() < drainUntil) {
            long now = System.currentTimeMillis();
            for (GenericRecord r : clickhouse.queryAll(union.toString())) {
                String t = r.getString("t");
                long max = r.getLong("m");
                Map<Long, Long> seen = visibleMs.get(t);
                for (long id = 1; id <= max; id++) {
                    seen.putIfAbsent(id, now);
                }
            }
            if (!writer.isAlive() && allVisible(healthy, stampedMs, visibleMs)) {
                break;
            }
            Thread.sleep(200);
        }
        writer.join();
        List<Long> latencies = new ArrayList<>();
        for (String t : healthy) {
            for (Map.Entry<Long, Long> stamped : stampedMs.get(t).entrySet()) {
                Long seen = visibleMs.get(t).get(stamped.getKey());
                if (seen == null) {
                    throw new IllegalStateException(t + " row " + stamped.getKey() + " never became visible");
                }
                latencies.add(seen - stamped.getValue());
            }
        }
        String note = "-";
        if (stalled) {
            long stalledRows = stampedMs.get(chTables.get(0)).size();
            note = ids.get(0).getTable() + ": " + stalledRows + " rows written, " + Math.max(0, maxId(clickhouse, chTables.get(0)))
                    + " visible";
            clickhouse.execute("ALTER TABLE " + chTables.get(0) + " DROP CONSTRAINT stalled").get().close();
        }
        rest.delete(flow);
        rest.delete(flow + "-sink");
        return new Result(name, healthy.size(), latencies, note);
    }

    private static boolean allVisible(List<String> healthy, Map<String, Map<Long, Long>> stamped, Map<String, Map<Long, Long>> visible) {
        for (String t : healthy) {
            if (!visible.get(t).keySet().containsAll(stamped.get(t).keySet())) {
                return false;
            }
        }
        return true;
    }

    private static long maxId(Client clickhouse, String table) {
        try {
            List<GenericRecord> rows = clickhouse.queryAll("SELECT count() AS n, max(id) AS m FROM " + table);
            return rows.get(0).getLong("n") == 0 ? -1 : rows.get(0).getLong("m");
        } catch (RuntimeException notYet) {
            return -1;
        }
    }

    private static void insert(BigQuery bigQuery, TableId table, long id, Instant ts) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("id", id);
        row.put("ts", ts.toString());
        InsertAllResponse response = bigQuery.insertAll(InsertAllRequest.newBuilder(table).addRow(row).build());
        if (response.hasErrors()) {
            throw new IllegalStateException("insertAll into " + table + ": " + response.getInsertErrors());
        }
    }

    private static long percentile(List<Long> values, int p) {
        if (values.isEmpty()) {
            return 0;
        }
        List<Long> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        int index = (int) Math.ceil(p / 100.0 * sorted.size()) - 1;
        return sorted.get(Math.max(0, Math.min(sorted.size() - 1, index)));
    }
}
