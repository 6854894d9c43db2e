package io.tablecdc.e2e;

import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import com.clickhouse.client.api.query.GenericRecord;
import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.FieldValueList;
import com.google.cloud.bigquery.QueryJobConfiguration;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;

import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * The BigQuery side of a randomized run: one emulator table ({@code id} key, {@code v}, {@code note}, a TIMESTAMP
 * cursor {@code ts}) read by a query CDC flow, and a seeded writer that inserts rows and writes new versions of existing
 * ones (same key, later {@code ts}) every 100 to 500 ms. Every row is stamped with the writer's clock just before its
 * insert, strictly later than every earlier stamp, and the writer measures how long each insert took: a row whose
 * insert returned more than {@link #SAFETY_LAG_MS} after its stamp is outside the source's guarantee, and the check
 * says so instead of blaming the source. The check compares ClickHouse {@code FINAL} with the latest version of every
 * row the emulator holds and the table's catalog row with the last stamp.
 */
final class ChaosBigQuery implements AutoCloseable {
    static final String DATASET = "chaos_bq";
    /** The source's safety lag: rows are committed within it of their stamp (the writer checks). */
    static final long SAFETY_LAG_MS = 5_000;

    private final BigQuery bigQuery;
    private final Random random;
    final String flow;
    final TableId table;
    /** {@code project.dataset.table}, the catalog's table identifier. */
    final String name;
    final String clickhouseTable;
    /** The latest version of each key as written (a key's later version always has the later stamp). */
    private final Map<Long, String> written = new TreeMap<>();
    private final AtomicBoolean writing = new AtomicBoolean(true);
    private final AtomicReference<Exception> error = new AtomicReference<>();
    final AtomicInteger inserts = new AtomicInteger();
    final AtomicInteger versions = new AtomicInteger();
    final AtomicLong slowestInsertMs = new AtomicLong();
    private Instant lastStamp = Instant.EPOCH;
    private long nextId;
    private Thread thread;

    private ChaosBigQuery(BigQuery bigQuery, String project, Random random, String flow, String tableName) {
        this.bigQuery = bigQuery;
        this.random = random;
        this.flow = flow;
        this.table = TableId.of(project, DATASET, tableName);
        this.name = project + "." + DATASET + "." + tableName;
        this.clickhouseTable = name.replaceAll("[^A-Za-z0-9_]", "_");
    }

    /** Creates the table and fills it with 50 to 500 rows stamped an hour ago (read by the initial snapshot). */
    static ChaosBigQuery create(LocalStack stack, Random random, String flow, String tableName) {
        BigQuery bigQuery = stack.bigquery().client();
        if (bigQuery.getDataset(DATASET) == null) {
            bigQuery.create(DatasetInfo.of(DATASET));
        }
        ChaosBigQuery part = new ChaosBigQuery(bigQuery, stack.bigquery().projectId(), random, flow, tableName);
        bigQuery.delete(part.table);
        bigQuery.create(TableInfo.of(part.table, StandardTableDefinition.of(Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("v", StandardSQLTypeName.INT64),
                Field.of("note", StandardSQLTypeName.STRING),
                Field.of("ts", StandardSQLTypeName.TIMESTAMP)))));
        int seedRows = 50 + random.nextInt(450);
        Instant base = Instant.now().minus(Duration.ofHours(1)).truncatedTo(ChronoUnit.SECONDS);
        List<Map<String, Object>> rows = new ArrayList<>();
        for (long id = 1; id <= seedRows; id++) {
            rows.add(part.row(id, 0, "seed", base.plus(id, ChronoUnit.MICROS)));
            part.written.put(id, "0|seed");
            if (rows.size() == 200 || id == seedRows) {
                CdcChecks.insert(bigQuery, part.table, rows);
                rows.clear();
            }
        }
        part.nextId = seedRows + 1;
        return part;
    }

    int seedRows() {
        return (int) nextId - 1;
    }

    /** The query CDC flow's configuration: the catalog and BigQuery as given (the run's proxies), the run's topic prefix. */
    Map<String, String> source(LocalStack stack, String catalogUrl, String bigQueryEndpoint, String topicPrefix) {
        Map<String, String> source = SourceConfigs.queryCdc(stack, catalogUrl, DATASET, table.getTable() + ":ts:id", 1,
                topicPrefix);
        source.put("bigquery.endpoint", bigQueryEndpoint);
        source.put("safety.lag.ms", Long.toString(SAFETY_LAG_MS));
        // a request that met a black hole ends here, not after the default minute
        source.put("bigquery.timeout.ms", "15000");
        return source;
    }

    /** Starts the writer: every 100 to 500 ms one to five rows, each a new key or a new version of an existing one. */
    void startWriter() {
        thread = new Thread(() -> {
            int n = 0;
            while (writing.get()) {
                n++;
                try {
                    List<Map<String, Object>> rows = new ArrayList<>();
                    int count = 1 + random.nextInt(5);
                    for (int i = 0; i < count; i++) {
                        boolean fresh = random.nextInt(3) == 0;
                        long id = fresh ? nextId++ : 1 + random.nextInt((int) nextId - 1);
                        rows.add(row(id, n, "w" + n + "." + i, stamp()));
                        if (fresh) {
                            inserts.incrementAndGet();
                        } else {
                            versions.incrementAndGet();
                        }
                    }
                    Instant first = Instant.parse((String) rows.get(0).get("ts"));
                    CdcChecks.insert(bigQuery, table, rows);
                    long took = Duration.between(first, Instant.now()).toMillis();
                    slowestInsertMs.accumulateAndGet(took, Math::max);
                    synchronized (written) {
                        for (Map<String, Object> row : rows) {
                            written.put((Long) row.get("id"), row.get("v") + "|" + row.get("note"));
                        }
                    }
                    Thread.sleep(100 + random.nextInt(400));
                } catch (InterruptedException e) {
                    return;
                } catch (Exception | AssertionError e) {
                    error.set(e instanceof Exception x ? x : new RuntimeException(e));
                    return;
                }
            }
        }, "chaos-bigquery-writer");
        thread.start();
    }

    /** Stops the writer; reports its failure. */
    void stopWriter() throws Exception {
        if (writing.getAndSet(false) && thread != null) {
            thread.join();
        }
        if (error.get() != null) {
            throw new AssertionError("the BigQuery writer failed: " + error.get(), error.get());
        }
    }

    @Override
    public void close() throws Exception {
        writing.set(false);
        if (thread != null) {
            thread.interrupt();
            thread.join();
        }
    }

    /**
     * Once the writer stopped: the emulator's latest version of every row equals what the writer wrote, ClickHouse
     * {@code FINAL} holds each of them once, and the table's catalog row has its cursor at the last stamp with every
     * synced batch normalized.
     */
    void check(CdcChecks checks, Duration timeout) throws Exception {
        stopWriter();
        if (slowestInsertMs.get() >= SAFETY_LAG_MS) {
            throw new AssertionError("a BigQuery insert returned " + slowestInsertMs.get() + " ms after its rows' stamp,"
                    + " more than safety.lag.ms " + SAFETY_LAG_MS + ": the source may rightly miss such rows; the run"
                    + " cannot judge the BigQuery table");
        }
        Map<Long, String> expected = latestInEmulator();
        synchronized (written) {
            if (!written.equals(expected)) {
                throw new AssertionError("the emulator's latest version of the rows of " + name + " differs from what was"
                        + " written (" + written.size() + " rows written, " + expected.size() + " in the emulator): "
                        + difference(written, expected));
            }
        }
        String sql = "SELECT id, v, note, count() OVER (PARTITION BY id) AS copies FROM " + clickhouseTable + " FINAL ORDER BY id";
        List<GenericRecord> rows;
        try {
            rows = checks.awaitRows(sql, r -> expected.equals(asMap(r)) && r.stream().allMatch(x -> x.getLong("copies") == 1),
                    timeout);
        } catch (AssertionError notEqual) {
            rows = checks.clickhouse().queryAll(sql);
        }
        Map<Long, String> actual = asMap(rows);
        long doubled = rows.stream().filter(x -> x.getLong("copies") > 1).count();
        if (!expected.equals(actual) || doubled > 0) {
            throw new AssertionError("ClickHouse FINAL of " + clickhouseTable + " differs from the emulator (" + expected.size()
                    + " rows there, " + rows.size() + " in ClickHouse, " + doubled + " of them more than once): "
                    + difference(expected, actual));
        }
        Instant last = lastStamp;
        CdcChecks.State state = checks.awaitState(flow, name, s -> s.syncedBatchId() > 0
                && s.normalizedBatchId() == s.syncedBatchId() && s.cursor() != null && !s.cursor().isEmpty()
                && Instant.parse(s.cursor()).equals(last) && s.pausedReason() == null, timeout);
        System.out.printf("chaos bigquery %s: %d rows, %d inserted and %d new versions by the writer, slowest insert %d ms;"
                + " catalog %s%n", name, expected.size(), inserts.get(), versions.get(), slowestInsertMs.get(), state);
    }

    private Map<Long, String> latestInEmulator() throws InterruptedException {
        Map<Long, String> latest = new TreeMap<>();
        Map<Long, Instant> stamps = new TreeMap<>();
        for (FieldValueList row : bigQuery.query(QueryJobConfiguration.of("SELECT id, v, note, ts FROM `"
                + table.getProject() + "`.`" + DATASET + "`.`" + table.getTable() + "`")).iterateAll()) {
            long id = row.get("id").getLongValue();
            Instant ts = Instant.ofEpochSecond(0, row.get("ts").getTimestampValue() * 1_000);
            if (!stamps.containsKey(id) || ts.isAfter(stamps.get(id))) {
                stamps.put(id, ts);
                latest.put(id, row.get("v").getLongValue() + "|" + row.get("note").getStringValue());
            }
        }
        return latest;
    }

    /** Up to ten keys each missing, extra and with another value in {@code actual}. */
    static String difference(Map<Long, String> expected, Map<Long, String> actual) {
        List<String> missing = new ArrayList<>();
        List<String> extra = new ArrayList<>();
        List<String> other = new ArrayList<>();
        expected.forEach((k, v) -> {
            if (!actual.containsKey(k)) {
                missing.add(k + "=" + v);
            } else if (!v.equals(actual.get(k))) {
                other.add(k + ": " + v + " expected, " + actual.get(k) + " found");
            }
        });
        actual.forEach((k, v) -> {
            if (!expected.containsKey(k)) {
                extra.add(k + "=" + v);
            }
        });
        return missing.size() + " missing " + missing.stream().limit(10).toList() + ", " + extra.size() + " extra "
                + extra.stream().limit(10).toList() + ", " + other.size() + " with another value "
                + other.stream().limit(10).toList();
    }

    private static Map<Long, String> asMap(List<GenericRecord> rows) {
        Map<Long, String> map = new TreeMap<>();
        for (GenericRecord row : rows) {
            map.put(row.getLong("id"), row.getLong("v") + "|" + row.getString("note"));
        }
        return map;
    }

    /** Now on the writer's clock in microseconds, strictly after the previous stamp. */
    private Instant stamp() {
        Instant now = Instant.now().truncatedTo(ChronoUnit.MICROS);
        lastStamp = now.isAfter(lastStamp) ? now : lastStamp.plus(1, ChronoUnit.MICROS);
        return lastStamp;
    }

    private Map<String, Object> row(long id, long v, String note, Instant ts) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("id", id);
        row.put("v", v);
        row.put("note", note);
        row.put("ts", ts.toString());
        if (ts.isAfter(lastStamp)) {
            lastStamp = ts;
        }
        return row;
    }
}
