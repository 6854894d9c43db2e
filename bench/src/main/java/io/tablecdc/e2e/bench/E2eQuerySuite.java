package io.tablecdc.e2e.bench;

import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.FieldValue;
import com.google.cloud.bigquery.FieldValueList;
import com.google.cloud.bigquery.Job;
import com.google.cloud.bigquery.JobInfo;
import com.google.cloud.bigquery.QueryJobConfiguration;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;
import com.google.cloud.bigquery.TableResult;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;

/**
 * Suite 7: a BigQuery table (the local emulator) to its final ClickHouse table through the query CDC source's snapshot
 * and the stage sink, against a direct export: the same rows queried from the emulator, read page by page and
 * streamed as TabSeparated into one {@code INSERT} of the same engine.
 */
final class E2eQuerySuite {
    static final String DATASET = "bench_e2eq";
    static final String EXPORT = "direct export: query, pages into INSERT FORMAT TabSeparated";
    static final String SNAPSHOT = "tablecdc query CDC snapshot";
    private static final String TABLE = "e2e_src";
    private static final String EXPORT_TABLE = "bench_e2eq_export";
    private static final int PAGE_SIZE = 10_000;
    private static final DateTimeFormatter MICROS = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSSSSS").withZone(ZoneOffset.UTC);

    private final Bench bench;
    private final SuiteReport report;
    private final E2e e2e;
    private int runs;
    private List<String> sourceChecksum;

    E2eQuerySuite(Bench bench) {
        this.bench = bench;
        BenchOptions o = bench.options;
        this.report = new SuiteReport("e2e-query", "7. End to end: BigQuery query CDC to ClickHouse", String.format(Locale.ROOT,
                "One table `%s.%s` of %d rows and 10 columns (INT64 key, 3 STRINGs, 2 FLOAT64s, 2 INT64s, NUMERIC,"
                        + " TIMESTAMP watermark) in the local BigQuery emulator (local-bigquery on DuckDB, one Python process),"
                        + " replicated into its final ReplacingMergeTree table: the query CDC source (`initial.load=snapshot`,"
                        + " one task, `bigquery.page.size` %d, JsonConverter with schemas) into a one-partition Kafka topic, the"
                        + " stage sink (pull mode, zstandard Avro in the S3 store) into ClickHouse, a fresh catalog database per"
                        + " run; from deploying both connectors until `SELECT count() … FINAL` (live rows) equals the table's"
                        + " rows (`%s`: the moment the same run's records were all in the topic). Baseline, **%s**: `SELECT"
                        + " <columns> FROM` the table through the BigQuery client library, its result read in pages of %d"
                        + " rows, each row written as escaped TabSeparated into a pipe streamed into one `INSERT INTO … FORMAT"
                        + " TabSeparated` over the same HTTP front. After every run the target's count and checksum equal"
                        + " those the benchmark computed over the exported rows, or the run fails. CPU per million rows: the"
                        + " Connect worker, the benchmark JVM (Kafka, S3 store, ClickHouse engine and front, the export's own"
                        + " reading and encoding), the emulator, and Postgres (the catalog).",
                DATASET, TABLE, o.e2eQueryRows, PAGE_SIZE, E2e.KAFKA_SUFFIX.substring(2), EXPORT, PAGE_SIZE));
        this.e2e = new E2e(bench, report, "e2e-query", "BigQuery to ClickHouse", EXPORT,
                List.of(EXPORT, SNAPSHOT, SNAPSHOT + E2e.KAFKA_SUFFIX),
                List.of(Bench.CPU_WORKER, Bench.CPU_BENCH, Bench.CPU_EMULATOR, Bench.CPU_POSTGRES));
    }

    SuiteReport run() throws Exception {
        BenchOptions o = bench.options;
        BigQuery bq = bench.stack.bigquery().client();
        String project = bench.stack.bigquery().projectId();
        if (bq.getDataset(DATASET) == null) {
            bq.create(DatasetInfo.of(DATASET));
        }
        TableId id = TableId.of(project, DATASET, TABLE);
        bq.delete(id);
        bq.create(TableInfo.of(id, StandardTableDefinition.of(Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("name", StandardSQLTypeName.STRING), Field.of("email", StandardSQLTypeName.STRING),
                Field.of("city", StandardSQLTypeName.STRING), Field.of("score", StandardSQLTypeName.FLOAT64),
                Field.of("ratio", StandardSQLTypeName.FLOAT64), Field.of("visits", StandardSQLTypeName.INT64),
                Field.of("level", StandardSQLTypeName.INT64), Field.of("balance", StandardSQLTypeName.NUMERIC),
                Field.of("updated_at", StandardSQLTypeName.TIMESTAMP)))));
        long t0 = System.nanoTime();
        bq.query(QueryJobConfiguration.newBuilder("INSERT INTO `" + project + "`." + DATASET + "." + TABLE
                + " (id, name, email, city, score, ratio, visits, level, balance, updated_at)"
                + " SELECT x, CONCAT('name-', CAST(x AS STRING)), CONCAT('user', CAST(x AS STRING), '@example.com'),"
                + " CASE WHEN MOD(x, 7) = 0 THEN NULL WHEN MOD(x, 1000) = 1 THEN CONCAT('tab', CHR(9), 'here', CHR(10), 'new line',"
                + " CHR(92), 'back ', CAST(x AS STRING)) ELSE CONCAT('city-', CAST(MOD(x, 100) AS STRING)) END,"
                + " x * 0.5, CASE WHEN MOD(x, 5) = 0 THEN NULL ELSE 1.0 / (x + 1) END, x * 3, MOD(x, 10),"
                + " CAST(x AS NUMERIC) / 100, TIMESTAMP_ADD(TIMESTAMP '2023-11-14 22:13:20+00', INTERVAL x MICROSECOND)"
                + " FROM UNNEST(GENERATE_ARRAY(1, " + o.e2eQueryRows + ")) AS x").setUseLegacySql(false).build());
        BenchRunner.log("e2e-query: %d rows loaded into the emulator in %.1f s", o.e2eQueryRows, (System.nanoTime() - t0) / 1e9);
        for (int rep = 0; rep < o.reps && bench.startRepetition(report, rep); rep++) {
            try {
                export(bq, project, rep);
            } catch (Exception e) {
                e2e.skip(EXPORT, e);
            }
            try {
                snapshot(project, rep, rep == Math.min(1, o.reps - 1) && o.profile);
            } catch (Exception e) {
                e2e.skip(SNAPSHOT, e);
            }
        }
        return report;
    }

    private void export(BigQuery bq, String project, int rep) throws Exception {
        long rows = bench.options.e2eQueryRows;
        bench.clickhouse.execute("DROP TABLE IF EXISTS " + EXPORT_TABLE).get().close();
        bench.clickhouse.execute("CREATE TABLE " + EXPORT_TABLE + " (id Int64, name Nullable(String), email Nullable(String),"
                + " city Nullable(String), score Nullable(Float64), ratio Nullable(Float64), visits Nullable(Int64),"
                + " level Nullable(Int64), balance Nullable(Decimal(38, 9)), updated_at Nullable(DateTime64(6, 'UTC')))"
                + " ENGINE = ReplacingMergeTree ORDER BY id").get().close();
        Checksum checksum = new Checksum();
        E2e.Piped piped = e2e.pipeInto(EXPORT_TABLE, "bench-export", true, pipe -> {
            try (Writer out = new BufferedWriter(new OutputStreamWriter(pipe, StandardCharsets.UTF_8), 1 << 20)) {
                Job job = bq.create(JobInfo.of(QueryJobConfiguration.newBuilder("SELECT id, name, email, city, score, ratio, visits,"
                        + " level, balance, updated_at FROM `" + project + "`." + DATASET + "." + TABLE)
                        .setUseLegacySql(false).build())).waitFor();
                TableResult result = job.getQueryResults(BigQuery.QueryResultsOption.pageSize(PAGE_SIZE));
                StringBuilder line = new StringBuilder(256);
                // page by page, PAGE_SIZE rows each, as the source reads
                for (TableResult page = result; page != null; page = page.hasNextPage() ? page.getNextPage() : null) {
                    for (FieldValueList row : page.getValues()) {
                        line.setLength(0);
                        String[] v = new String[10];
                        v[0] = row.get(0).getStringValue();
                        for (int i = 1; i <= 3; i++) {
                            v[i] = text(row.get(i));
                        }
                        v[4] = text(row.get(4));
                        v[5] = text(row.get(5));
                        v[6] = text(row.get(6));
                        v[7] = text(row.get(7));
                        v[8] = row.get(8).isNull() ? null : row.get(8).getNumericValue().toPlainString();
                        v[9] = row.get(9).isNull() ? null : MICROS.format(Instant.EPOCH.plusNanos(row.get(9).getTimestampValue() * 1000));
                        checksum.add(v, row.get(9).isNull() ? 0 : row.get(9).getTimestampValue());
                        out.append(Tsv.row(line, v));
                    }
                }
            }
        });
        if (checksum.rows != rows) {
            throw new IllegalStateException("the export read " + checksum.rows + " rows, not " + rows);
        }
        sourceChecksum = checksum.values();
        E2e.sameChecksum(EXPORT, Checksum.NAMES, sourceChecksum, e2e.chChecksum(EXPORT_TABLE, ""));
        e2e.record(EXPORT, rep, rows, piped.seconds(), piped.cpu());
        bench.clickhouse.execute("DROP TABLE " + EXPORT_TABLE).get().close();
    }

    private static String text(FieldValue v) {
        return v.isNull() ? null : v.getStringValue();
    }

    private void snapshot(String project, int rep, boolean profile) throws Exception {
        BenchOptions o = bench.options;
        int run = ++runs;
        String name = "benche2eq" + run;
        String catalog = "bench_e2eq_catalog_" + run + "_" + Long.toString(System.currentTimeMillis(), 36);
        String catalogUrl = bench.stack.postgres().createDatabase(catalog);
        String sinkName = name + "-sink";
        String fullName = project + "." + DATASET + "." + TABLE;
        String topic = name + "." + fullName;
        String chTable = fullName.replaceAll("[^A-Za-z0-9_]", "_");
        bench.clickhouse.execute("DROP TABLE IF EXISTS " + chTable).get().close();
        Map<String, String> sink = SinkConfigs.flowSink(bench.stack, catalogUrl, name + "-stage", name);
        sink.put("consumer.override.max.poll.records", "5000");
        Map<String, String> source = SourceConfigs.queryCdc(bench.stack, catalogUrl, DATASET, TABLE + ":updated_at:id", 1, name);
        source.put("initial.load", "snapshot");
        source.put("bigquery.page.size", Integer.toString(PAGE_SIZE));
        Map<String, Long> processes = bench.processes(true);
        E2e.Profiling profiling = profile ? e2e.new Profiling("e2e-query") : null;
        try {
            Map<String, Double> c0 = Bench.cpu(processes);
            long start = System.nanoTime();
            bench.rest().putConfig(sinkName, sink);
            bench.rest().putConfig(name, source);
            E2e.Delivered d = e2e.await(List.of(name, sinkName), start, topic, o.e2eQueryRows, chTable,
                    "SELECT count() AS n FROM " + chTable, o.e2eQueryRows, o.e2eQueryRows, Duration.ofMinutes(30));
            Map<String, Double> cpu = Bench.cpuSince(c0, Bench.cpu(processes));
            if (sourceChecksum != null) {
                E2e.sameChecksum(SNAPSHOT, Checksum.NAMES, sourceChecksum, e2e.chChecksum(chTable, " FINAL WHERE _tablecdc_is_deleted = 0"));
            }
            e2e.record(SNAPSHOT, rep, o.e2eQueryRows, d.finalSeconds(), cpu);
            e2e.rowsPerSecond.add(SNAPSHOT + E2e.KAFKA_SUFFIX, rep, o.e2eQueryRows / d.kafkaSeconds());
            if (profiling != null) {
                profiling.report(SNAPSHOT, "CPU-seconds and rates of that run are in the tables above.");
            }
        } finally {
            if (profiling != null) {
                profiling.close();
            }
            bench.delete(name);
            bench.delete(sinkName);
            e2e.deleteTopic(topic);
            bench.clickhouse.execute("DROP TABLE IF EXISTS " + chTable).get().close();
        }
    }

    /** The checksum {@link E2e#chChecksum} computes in ClickHouse, added up here over the exported rows. */
    static final class Checksum {
        static final List<String> NAMES = E2e.CHECKSUM;
        long rows;
        long ids;
        long visits;
        long levels;
        BigDecimal balance = BigDecimal.ZERO;
        long cities;
        long ratios;
        long textBytes;
        long textHash;
        java.math.BigInteger micros = java.math.BigInteger.ZERO;
        double score;
        double ratio;
        private final MessageDigest md5;

        Checksum() {
            try {
                md5 = MessageDigest.getInstance("MD5");
            } catch (java.security.NoSuchAlgorithmException e) {
                throw new IllegalStateException(e);
            }
        }

        /** Adds one row: the values as text (null for NULL) in the table's column order, and its timestamp in µs. */
        void add(String[] v, long timestampMicros) {
            rows++;
            ids += Long.parseLong(v[0]);
            visits += Long.parseLong(v[6]);
            levels += Long.parseLong(v[7]);
            balance = balance.add(new BigDecimal(v[8]));
            if (v[3] != null) {
                cities++;
            }
            if (v[5] != null) {
                ratios++;
                ratio += Double.parseDouble(v[5]);
            }
            byte[] name = v[1].getBytes(StandardCharsets.UTF_8);
            byte[] email = v[2].getBytes(StandardCharsets.UTF_8);
            byte[] city = v[3] == null ? new byte[0] : v[3].getBytes(StandardCharsets.UTF_8);
            textBytes += name.length + email.length + city.length;
            String text = v[1] + "|" + v[2] + "|" + (v[3] == null ? "~" : v[3]);
            String hex = HexFormat.of().formatHex(md5.digest(text.getBytes(StandardCharsets.UTF_8)));
            textHash += Long.parseLong(hex.substring(0, 7), 16);
            micros = micros.add(java.math.BigInteger.valueOf(timestampMicros));
            score += Double.parseDouble(v[4]);
        }

        List<String> values() {
            return List.of(Long.toString(rows), Long.toString(ids), Long.toString(visits), Long.toString(levels),
                    balance.toPlainString(), Long.toString(cities), Long.toString(ratios), Long.toString(textBytes),
                    Long.toString(textHash), micros.toString(), Double.toString(score), Double.toString(ratio));
        }
    }
}
