package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.query.GenericRecord;
import com.fasterxml.jackson.databind.JsonNode;
import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
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
 * The query CDC source at the edges of its window rule, end to end on the emulator, Kafka, the stage sink and
 * ClickHouse: the snapshot's upper bound, watermarks far ahead of the source clock, DATETIME watermarks in a zone
 * other than UTC, DATE watermarks, and a table that is briefly missing. Rows are stamped explicitly.
 */
class BigQueryQueryCdcEdgesIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATASET = "bqedge_it";
    private static final String CATALOG = "bqedge_catalog";
    private static final Duration WAIT = Duration.ofSeconds(120);
    private static final String SINK = "bqedge-sink";

    private static BigQuery bigQuery;
    private static String project;
    private static String catalogUrl;
    private static CdcChecks checks;
    private static ConnectRestClient rest;

    @BeforeAll
    static void start() throws Exception {
        bigQuery = stack.bigquery().client();
        project = stack.bigquery().projectId();
        if (bigQuery.getDataset(DATASET) == null) {
            bigQuery.create(DatasetInfo.of(DATASET));
        }
        catalogUrl = stack.postgres().createDatabase(CATALOG);
        checks = new CdcChecks(stack, CATALOG);
        rest = stack.connect().rest();
        Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, "bqedge");
        sink.put("topics.regex", "bqedge\\..*");
        sink.put("stage.local.dir", StackPaths.workDir("bqedge-local").toString());
        sink.put("normalize.backoff.initial.ms", "300");
        sink.put("normalize.backoff.max.ms", "1000");
        sink.put("consumer.override.metadata.max.age.ms", "1000");
        rest.putConfig(SINK, sink);
        rest.awaitRunning(SINK, 1, WAIT);
    }

    @AfterAll
    static void stop() {
        rest.delete(SINK);
    }

    private static Map<String, String> source(String table, String lagMs) {
        Map<String, String> config = SourceConfigs.queryCdc(stack, catalogUrl, DATASET, table, 1, "bqedge");
        config.put("safety.lag.ms", lagMs);
        return config;
    }

    /**
     * Issue 16: the initial snapshot is bounded by the safety lag like every window. A row stamped just below the
     * table's largest watermark and committed after the snapshot (a slow transaction) is read by a later window;
     * before, the snapshot's cursor was the largest watermark and that row was never read.
     */
    @Test
    void aRowStampedJustBelowTheLargestWatermarkAndCommittedAfterTheSnapshotIsRead() throws Exception {
        String flow = "bqedge-snap";
        TableId table = createTable("snap", StandardSQLTypeName.TIMESTAMP);
        Instant t0 = Instant.now().truncatedTo(ChronoUnit.MICROS);
        insert(table, List.of(row(1, t0.minus(1, ChronoUnit.HOURS).toString()), row(2, t0.toString())));
        try {
            // the snapshot runs well within 45 s of t0, so its bound (BigQuery's clock - 45 s) is below t0
            rest.putConfig(flow, source("snap:ts:id", "45000"));
            rest.awaitRunning(flow, 1, WAIT);
            CdcChecks.State snapshot = checks.awaitState(flow, name(table), s -> !s.cursor().isEmpty(), WAIT);
            assertTrue(Instant.parse(snapshot.cursor()).isBefore(t0.minusNanos(1_000)),
                    "the snapshot's cursor stays a safety lag behind BigQuery's clock, below the largest watermark " + t0
                            + ": " + snapshot);
            // the slow transaction commits now: its row is stamped 1 µs below the largest watermark
            insert(table, List.of(row(3, t0.minusNanos(1_000).toString())));
            awaitIds(table, List.of(1L, 2L, 3L));
        } finally {
            rest.delete(flow);
        }
    }

    /**
     * Issue 16: watermarks far ahead of BigQuery's clock (2099, and the largest TIMESTAMP, 9999-12-31) neither move the
     * cursor nor break the version: the rows up to the clock arrive, later rows keep arriving, and the table reports
     * the watermark ahead in the catalog (and so in tablecdc-status).
     */
    @Test
    void watermarksFarAheadOfTheSourceClockNeitherStopTheTableNorOverflowTheVersion() throws Exception {
        String flow = "bqedge-future";
        TableId table = createTable("future", StandardSQLTypeName.TIMESTAMP);
        Instant t0 = Instant.now().truncatedTo(ChronoUnit.MICROS);
        insert(table, List.of(row(1, t0.minus(1, ChronoUnit.HOURS).toString()), row(2, "2099-01-01T00:00:00Z"),
                row(3, "9999-12-31T23:59:59.999999Z")));
        try {
            rest.putConfig(flow, source("future:ts:id", "1000"));
            rest.awaitRunning(flow, 1, WAIT);
            awaitIds(table, List.of(1L));
            CdcChecks.State reported = checks.awaitState(flow, name(table),
                    s -> s.lastError() != null && s.lastError().startsWith("watermark ahead: "), WAIT);
            // the largest watermark, 9999-12-31T23:59:59.999999Z (the emulator answers it rounded to the second)
            assertTrue(reported.lastError().contains("more than 1 h ahead of BigQuery's clock"), reported.lastError());
            assertTrue(Instant.parse(reported.cursor()).isBefore(Instant.parse("2099-01-01T00:00:00Z")), reported.toString());
            // later rows keep coming
            insert(table, List.of(row(4, Instant.now().truncatedTo(ChronoUnit.MICROS).toString())));
            awaitIds(table, List.of(1L, 4L));
            assertEquals("RUNNING", rest.states(flow).get(1), "the task keeps running");
        } finally {
            rest.delete(flow);
        }
    }

    /**
     * Issue 16: a DATETIME watermark written in another zone than UTC ({@code watermark.time.zone=Asia/Tokyo}, UTC+9
     * without daylight saving) is placed on BigQuery's clock in that zone, in the query and in the connector. Read as
     * UTC (before), a wall clock nine hours east lies nine hours in the future: the snapshot's cursor went there and a
     * row written after it waited nine hours. The value itself is the wall clock, unchanged.
     */
    @Test
    void datetimeWatermarksInAnotherZoneArePlacedInThatZone() throws Exception {
        String flow = "bqedge-zone";
        TableId table = createTable("zone", StandardSQLTypeName.DATETIME);
        java.time.ZoneId zone = java.time.ZoneId.of("Asia/Tokyo");
        DateTimeFormatter wall = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSSSS");
        LocalDateTime hourAgo = LocalDateTime.ofInstant(Instant.now().minus(1, ChronoUnit.HOURS), zone).truncatedTo(ChronoUnit.MICROS);
        insert(table, List.of(row(1, wall.format(hourAgo))));
        try {
            Map<String, String> config = source("zone:ts:id", "2000");
            config.put("watermark.time.zone", "Asia/Tokyo");
            rest.putConfig(flow, config);
            rest.awaitRunning(flow, 1, WAIT);
            awaitIds(table, List.of(1L));
            CdcChecks.State afterSnapshot = checks.awaitState(flow, name(table), s -> !s.cursor().isEmpty(), WAIT);
            assertEquals(hourAgo.atZone(zone).toInstant(), Instant.parse(afterSnapshot.cursor()),
                    "the cursor is the wall clock placed in Asia/Tokyo");
            LocalDateTime now = LocalDateTime.ofInstant(Instant.now(), zone).truncatedTo(ChronoUnit.MICROS);
            insert(table, List.of(row(2, wall.format(now))));
            awaitIds(table, List.of(1L, 2L));
            List<GenericRecord> stored = checks.clickhouse().queryAll("SELECT toString(ts) AS ts FROM " + chTable(table)
                    + " FINAL WHERE id = 1");
            assertTrue(stored.get(0).getString("ts").startsWith(wall.format(hourAgo).replace('T', ' ')),
                    "the value is the wall clock: " + stored.get(0).getString("ts") + " for " + hourAgo);
        } finally {
            rest.delete(flow);
        }
    }

    /**
     * Issue 16: a DATE watermark has one value for the whole day, so a window may only reach a day once it is over;
     * validate() refuses a shorter safety lag on safety.lag.ms, naming the table and the column.
     */
    @Test
    void validateRefusesADateWatermarkWithASafetyLagShorterThanADay() {
        TableId table = createTable("dated", StandardSQLTypeName.DATE);
        Map<String, String> config = source("dated:ts:id", "1000");
        config.put("name", "bqedge-date");
        JsonNode validation = rest.validate(SourceConfigs.QUERY_CDC, config);
        List<String> errors = ConnectRestClient.validationErrors(validation);
        assertTrue(errors.stream().anyMatch(e -> e.startsWith("safety.lag.ms: table " + name(table)
                + ": watermark column ts is DATE") && e.contains("must be at least 86400000")), errors.toString());
        config.put("safety.lag.ms", "86400000");
        assertFalse(ConnectRestClient.validationErrors(rest.validate(SourceConfigs.QUERY_CDC, config)).stream()
                .anyMatch(e -> e.startsWith("safety.lag.ms")), "a day is enough in UTC");
        config.put("watermark.time.zone", "Europe/Berlin");
        assertTrue(ConnectRestClient.validationErrors(rest.validate(SourceConfigs.QUERY_CDC, config)).stream()
                .anyMatch(e -> e.contains("at least 90000000")), "25 hours in a zone with daylight-saving changes");
    }

    /**
     * Issue 16: a table dropped and created again (a job that rebuilds it) is retried with backoff, its task keeps
     * running and the catalog says why meanwhile; before, the task failed and stayed failed.
     */
    @Test
    void aTableBrieflyMissingIsRetriedAndShownNotFailed() throws Exception {
        String flow = "bqedge-gone";
        TableId table = createTable("gone", StandardSQLTypeName.TIMESTAMP);
        insert(table, List.of(row(1, Instant.now().minus(1, ChronoUnit.HOURS).truncatedTo(ChronoUnit.MICROS).toString())));
        try {
            rest.putConfig(flow, source("gone:ts:id", "1000"));
            rest.awaitRunning(flow, 1, WAIT);
            awaitIds(table, List.of(1L));
            bigQuery.delete(table);
            CdcChecks.State missing = checks.awaitState(flow, name(table),
                    s -> s.lastError() != null && s.lastError().contains("does not exist"), WAIT);
            assertNotNull(missing.lastError());
            createTable("gone", StandardSQLTypeName.TIMESTAMP);
            insert(table, List.of(row(2, Instant.now().truncatedTo(ChronoUnit.MICROS).toString())));
            awaitIds(table, List.of(1L, 2L));
            checks.awaitState(flow, name(table), s -> s.lastError() == null, WAIT);
            assertEquals("RUNNING", rest.states(flow).get(1), "the task kept running while the table was missing");
        } finally {
            rest.delete(flow);
        }
    }

    /**
     * Issue 16: a source allowed one unnormalized batch ({@code normalize.buffer.batches=1}, the former name of
     * max.unnormalized.batches) never waits for a batch the sink cannot load. Before, initial.load=skip recorded the id
     * it skipped at start as synced, without records: synced - normalized stayed 1 and the table paused for good.
     */
    @Test
    void oneUnnormalizedBatchAllowedNeverDeadlocks() throws Exception {
        String flow = "bqedge-buffer";
        TableId table = createTable("buffer1", StandardSQLTypeName.TIMESTAMP);
        insert(table, List.of(row(1, Instant.now().minus(1, ChronoUnit.HOURS).truncatedTo(ChronoUnit.MICROS).toString())));
        try {
            Map<String, String> config = source("buffer1:ts:id", "1000");
            config.put("initial.load", "skip");
            config.put("normalize.buffer.batches", "1");
            rest.putConfig(flow, config);
            rest.awaitRunning(flow, 1, WAIT);
            checks.awaitState(flow, name(table), s -> !s.cursor().isEmpty(), WAIT);
            for (long id = 2; id <= 4; id++) {
                insert(table, List.of(row(id, Instant.now().truncatedTo(ChronoUnit.MICROS).toString())));
                List<Long> expected = new ArrayList<>();
                for (long i = 2; i <= id; i++) {
                    expected.add(i);
                }
                awaitIds(table, expected);
            }
        } finally {
            rest.delete(flow);
        }
    }

    // ------------------------------------------------------------------------------------------ helpers

    private static TableId createTable(String table, StandardSQLTypeName watermarkType) {
        TableId id = TableId.of(project, DATASET, table);
        bigQuery.delete(id);
        bigQuery.create(TableInfo.of(id, StandardTableDefinition.of(Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("ts", watermarkType)))));
        return id;
    }

    private static Map<String, Object> row(long id, String ts) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("id", id);
        row.put("ts", ts);
        return row;
    }

    private static void insert(TableId table, List<Map<String, Object>> rows) {
        CdcChecks.insert(bigQuery, table, rows);
    }

    /** Waits until ClickHouse holds exactly these ids of the table (after FINAL). */
    private static void awaitIds(TableId table, List<Long> ids) throws InterruptedException {
        checks.awaitRows("SELECT id FROM " + chTable(table) + " FINAL ORDER BY id", r -> {
            List<Long> found = new ArrayList<>();
            r.forEach(g -> found.add(g.getLong("id")));
            return found.equals(ids);
        }, WAIT);
    }

    private static String name(TableId id) {
        return project + "." + DATASET + "." + id.getTable();
    }

    private static String chTable(TableId id) {
        return name(id).replaceAll("[^A-Za-z0-9_]", "_");
    }
}
