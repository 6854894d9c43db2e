package io.tablecdc.bigquery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

import org.apache.kafka.common.config.types.Password;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.FieldList;
import com.google.cloud.bigquery.FieldValue;
import com.google.cloud.bigquery.FieldValueList;
import com.google.cloud.bigquery.QueryParameterValue;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardSQLTypeName;

import io.tablecdc.bigquery.config.BigQueryQueryCdcConfig;
import io.tablecdc.bigquery.config.TableSpec;
import io.tablecdc.bigquery.sql.CdcSql;
import io.tablecdc.common.RecordHeaders;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogConfig.CatalogSettings;
import io.tablecdc.catalog.CatalogUnavailableException;
import io.tablecdc.catalog.TableState;
import io.tablecdc.common.metrics.TableMetrics;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;

/**
 * One table's poll loop against a real catalog (embedded Postgres) and {@link FakeSourceClient}, a hand-written fake
 * of BigQuery for what the emulator cannot show: APPENDS() and CHANGES() results (the emulator parses neither) and how
 * many clock queries a table runs. The clock is a fixed {@link Clock} the tests move.
 */
class TablePollerTest {
    private static final Instant NOW = Instant.parse("2026-06-01T12:00:00Z");
    private static EmbeddedPostgres postgres;
    private static CatalogSettings settings;
    private static Catalog catalog;

    @BeforeAll
    static void start() throws Exception {
        File dir = new File("target/embedded-pg/" + TablePollerTest.class.getSimpleName());
        postgres = EmbeddedPostgres.builder().setOverrideWorkingDirectory(dir).setDataDirectory(new File(dir, "data"))
                .setCleanDataDirectory(true).start();
        try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE catalog");
            s.execute("ALTER USER postgres PASSWORD 'pw'");
        }
        settings = new CatalogSettings(postgres.getJdbcUrl("postgres", "catalog"), "postgres", new Password("pw"), true, 2, 5_000);
        catalog = Catalog.open(settings, "TablePollerTest");
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

    /** A hand-written fake of BigQuery: a fixed clock, fixed columns, and a queue of query results. */
    static final class FakeSourceClient extends SourceClient {
        final AtomicInteger clockQueries = new AtomicInteger();
        final List<String> queries = new ArrayList<>();
        final List<Map<String, QueryParameterValue>> parameters = new ArrayList<>();
        final List<List<FieldValueList>> results = new ArrayList<>();
        Instant now = NOW;
        FieldList columns;
        Schema resultSchema;

        FakeSourceClient(FieldList columns, FieldList resultFields) {
            super(null, "", 0, 100);
            this.columns = columns;
            this.resultSchema = Schema.of(resultFields);
        }

        @Override
        public Instant sourceNow() {
            clockQueries.incrementAndGet();
            return now;
        }

        @Override
        public FieldList columns(TableSpec table) {
            return columns;
        }

        @Override
        public Instant maxWatermark(TableSpec table, String watermark) {
            return null;
        }

        @Override
        public Instant nextWatermark(TableSpec table, CdcSql.Watermark watermark, Instant lower, Instant upper) {
            return null;
        }

        @Override
        public Pages query(String sql, Map<String, QueryParameterValue> params) {
            queries.add(sql);
            parameters.add(params);
            List<FieldValueList> rows = results.isEmpty() ? List.of() : results.remove(0);
            return new Pages(resultSchema, rows);
        }
    }

    /**
     * A hand-written fake of one BigQuery table in QUERY mode: rows (id, watermark) answered by the window, snapshot,
     * MIN, MAX and next-watermark queries as BigQuery would, from their parameters.
     */
    static class FakeTable extends SourceClient {
        static final FieldList FIELDS = FieldList.of(Field.of("id", StandardSQLTypeName.INT64), Field.of("ts", StandardSQLTypeName.TIMESTAMP));
        static final FieldList RESULT = FieldList.of(Field.of("id", StandardSQLTypeName.INT64), Field.of("ts", StandardSQLTypeName.TIMESTAMP),
                Field.of(CdcSql.WATERMARK, StandardSQLTypeName.TIMESTAMP));
        final java.util.TreeMap<Long, Instant> rows = new java.util.TreeMap<>();
        final List<String> queries = new ArrayList<>();
        Instant now = NOW;

        FakeTable() {
            super(null, "", 0, 100);
        }

        @Override
        public Instant sourceNow() {
            return now;
        }

        @Override
        public FieldList columns(TableSpec table) {
            return FIELDS;
        }

        @Override
        public Instant maxWatermark(TableSpec table, String watermark) {
            queries.add("MAX");
            return rows.values().stream().filter(java.util.Objects::nonNull).max(Instant::compareTo).orElse(null);
        }

        @Override
        public Instant minWatermark(TableSpec table, String watermark) {
            queries.add("MIN");
            return rows.values().stream().filter(java.util.Objects::nonNull).min(Instant::compareTo).orElse(null);
        }

        @Override
        public Instant nextWatermark(TableSpec table, CdcSql.Watermark watermark, Instant lower, Instant upper) {
            return rows.values().stream().filter(t -> t != null && t.isAfter(lower) && !t.isAfter(upper))
                    .min(Instant::compareTo).orElse(null);
        }

        @Override
        public Pages query(String sql, Map<String, QueryParameterValue> params) {
            Instant lower = params.containsKey(CdcSql.LOWER) ? instant(params.get(CdcSql.LOWER)) : null;
            Instant upper = params.containsKey(CdcSql.UPPER) ? instant(params.get(CdcSql.UPPER)) : null;
            queries.add(lower == null && upper == null ? "NULLS" : "WINDOW " + lower + " " + upper);
            List<FieldValueList> result = new ArrayList<>();
            rows.forEach((id, ts) -> {
                boolean match = lower == null && upper == null ? ts == null
                        : ts != null && ts.isAfter(lower) && !ts.isAfter(upper);
                if (match) {
                    String seconds = ts == null ? null : java.math.BigDecimal.valueOf(Cursor.micros(ts)).movePointLeft(6).toPlainString();
                    result.add(FieldValueList.of(List.of(FieldValue.of(FieldValue.Attribute.PRIMITIVE, Long.toString(id)),
                            FieldValue.of(FieldValue.Attribute.PRIMITIVE, seconds),
                            FieldValue.of(FieldValue.Attribute.PRIMITIVE, seconds)), RESULT));
                }
            });
            return new Pages(Schema.of(RESULT), result);
        }

        private static Instant instant(QueryParameterValue value) {
            return java.time.OffsetDateTime.parse(value.getValue(),
                    java.time.format.DateTimeFormatter.ofPattern("uuuu-MM-dd HH:mm:ss.SSSSSSxxx")).toInstant();
        }
    }

    /** A clock the test moves. */
    static final class MovableClock extends Clock {
        Instant now = NOW;

        @Override
        public java.time.ZoneId getZone() {
            return ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(java.time.ZoneId zone) {
            return this;
        }

        @Override
        public Instant instant() {
            return now;
        }
    }

    /** Polls until {@code batches} batches with records went out (acknowledging each record), at most 50 polls. */
    private static List<List<SourceRecord>> pollBatches(TablePoller poller, MovableClock clock, int batches) throws Exception {
        List<List<SourceRecord>> out = new ArrayList<>();
        for (int i = 0; i < 50 && out.size() < batches; i++) {
            clock.now = clock.now.plusSeconds(2);
            List<SourceRecord> records = poller.poll();
            if (!records.isEmpty()) {
                out.add(records);
                records.forEach(r -> poller.acknowledged());
            }
        }
        return out;
    }

    /**
     * Issue 16: the initial snapshot is read in chunks of max.query.window.ms, each a batch of snapshot records with
     * its own offset; a task started again from the offset of the second chunk continues with the third, without
     * reading the table again from the start, and ordinary windows follow the snapshot's bound.
     */
    @Test
    void theSnapshotIsReadInChunksEachCommittedAndResumable() throws Exception {
        FakeTable table = new FakeTable();
        table.rows.put(1L, NOW.minus(Duration.ofHours(5)));
        table.rows.put(2L, NOW.minus(Duration.ofMinutes(210)));
        table.rows.put(3L, NOW.minus(Duration.ofMinutes(150)));
        table.rows.put(4L, NOW.minusSeconds(30)); // inside the safety lag of 60 s, beyond the snapshot's bound
        BigQueryQueryCdcConfig config = configWithKey("QUERY", "60000", "3600000");
        MovableClock clock = new MovableClock();
        TableSpec spec = config.tables().get(0);
        TablePoller poller = new TablePoller("chunks", spec, config, table, () -> catalog, new Semaphore(1), clock, null,
                TableMetrics.forSource(() -> null, "chunks").table(spec.fullName()));
        List<List<SourceRecord>> chunks = pollBatches(poller, clock, 3);
        assertEquals(3, chunks.size(), "three one-hour chunks hold rows: " + table.queries);
        for (int i = 0; i < 3; i++) {
            List<SourceRecord> chunk = chunks.get(i);
            assertEquals(1, chunk.size());
            assertEquals((long) i + 1, ((org.apache.kafka.connect.data.Struct) chunk.get(0).value()).get("id"));
            assertEquals("r", header(chunk.get(0), RecordHeaders.OP));
            assertEquals(Cursor.format(NOW.minusSeconds(60)), chunk.get(0).sourceOffset().get("snapshot"), "the bound: the clock - lag");
        }
        assertEquals(1, table.queries.stream().filter("MAX"::equals).count());
        Map<String, ?> afterSecond = chunks.get(1).get(0).sourceOffset();
        assertEquals(Cursor.format(NOW.minus(Duration.ofMinutes(210))), afterSecond.get("cursor"));

        // a task started again from the second chunk's offset reads the third chunk, not the table from the start
        FakeTable again = new FakeTable();
        again.rows.putAll(table.rows);
        MovableClock clock2 = new MovableClock();
        @SuppressWarnings("unchecked")
        Map<String, Object> offset = (Map<String, Object>) afterSecond;
        TablePoller restarted = new TablePoller("chunks", spec, config, again, () -> catalog, new Semaphore(1), clock2, offset,
                TableMetrics.forSource(() -> null, "chunks").table(spec.fullName()));
        List<List<SourceRecord>> rest = pollBatches(restarted, clock2, 1);
        assertEquals(3L, ((org.apache.kafka.connect.data.Struct) rest.get(0).get(0).value()).get("id"));
        assertEquals("r", header(rest.get(0).get(0), RecordHeaders.OP));
        // (its one MAX query is the hourly check for watermarks ahead of the clock, not a new snapshot)
        assertEquals(0, again.queries.stream().filter(q -> q.equals("MIN") || q.equals("NULLS")).count(), again.queries.toString());
        // once the clock passed row 4 by the lag, it comes as an ordinary window
        clock2.now = NOW.plusSeconds(60);
        again.now = NOW.plusSeconds(60);
        List<List<SourceRecord>> after = pollBatches(restarted, clock2, 1);
        assertEquals(4L, ((org.apache.kafka.connect.data.Struct) after.get(0).get(0).value()).get("id"));
        assertEquals("u", header(after.get(0).get(0), RecordHeaders.OP));
        assertTrue(!after.get(0).get(0).sourceOffset().containsKey("snapshot"));
    }

    private static BigQueryQueryCdcConfig configWithKey(String mode, String lagMs, String maxWindowMs) {
        Map<String, String> props = new HashMap<>();
        props.put("bigquery.project", "p");
        props.put("bigquery.dataset", "d");
        props.put("tables", "t:ts:id");
        props.put("topic.prefix", "x");
        props.put("replication.mode", mode);
        props.put("safety.lag.ms", lagMs);
        props.put("sync.interval.ms", "1000");
        props.put("max.query.window.ms", maxWindowMs);
        props.put("catalog.jdbc.url", settings.jdbcUrl());
        props.put("catalog.user", "postgres");
        props.put("catalog.password", "pw");
        return new BigQueryQueryCdcConfig(props);
    }

    private static BigQueryQueryCdcConfig config(String mode, String lagMs, String maxWindowMs) {
        Map<String, String> props = new HashMap<>();
        props.put("bigquery.project", "p");
        props.put("bigquery.dataset", "d");
        props.put("tables", "t::id");
        props.put("topic.prefix", "x");
        props.put("replication.mode", mode);
        props.put("safety.lag.ms", lagMs);
        props.put("sync.interval.ms", "1000");
        props.put("max.query.window.ms", maxWindowMs);
        props.put("catalog.jdbc.url", settings.jdbcUrl());
        props.put("catalog.user", "postgres");
        props.put("catalog.password", "pw");
        return new BigQueryQueryCdcConfig(props);
    }

    private static TablePoller poller(String flow, BigQueryQueryCdcConfig config, SourceClient client, Semaphore permits,
                                      Supplier<Catalog> opener, Instant cursor) {
        TableSpec table = config.tables().get(0);
        Map<String, Object> offset = cursor == null ? null : Map.of("cursor", Cursor.format(cursor), "batch", 0L);
        TableMetrics metrics = TableMetrics.forSource(() -> null, flow);
        return new TablePoller(flow, table, config, client, opener, permits, Clock.fixed(NOW, ZoneOffset.UTC), offset,
                metrics.table(table.fullName()));
    }

    private static final FieldList KEYED = FieldList.of(Field.of("id", StandardSQLTypeName.INT64), Field.of("name", StandardSQLTypeName.STRING));

    private static FieldList changeFields() {
        return FieldList.of(Field.of("id", StandardSQLTypeName.INT64), Field.of("name", StandardSQLTypeName.STRING),
                Field.of(CdcSql.CHANGE_TYPE, StandardSQLTypeName.STRING),
                Field.of(CdcSql.CHANGE_TIMESTAMP, StandardSQLTypeName.TIMESTAMP),
                Field.of(CdcSql.CHANGE_IS_FOR_UPDATE, StandardSQLTypeName.BOOL));
    }

    private static FieldValueList change(FieldList fields, long id, String name, String type, Instant at, Boolean forUpdate) {
        List<FieldValue> values = List.of(
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, Long.toString(id)),
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, name),
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, type),
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, java.math.BigDecimal.valueOf(Cursor.micros(at)).movePointLeft(6).toPlainString()),
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, forUpdate == null ? null : forUpdate.toString()));
        return FieldValueList.of(values, fields);
    }

    private static String header(SourceRecord record, String key) {
        return record.headers().lastWithName(key).value().toString();
    }

    /** Issue 16: a table waiting for a pull permit runs no query at all, not even BigQuery's clock. */
    @Test
    void aTableWithoutAPullPermitRunsNoClockQuery() throws Exception {
        FakeSourceClient client = new FakeSourceClient(KEYED, KEYED);
        TablePoller poller = poller("permit", config("APPENDS", "1000", "3600000"), client, new Semaphore(0), () -> catalog,
                NOW.minus(Duration.ofMinutes(5)));
        assertTrue(poller.poll().isEmpty());
        assertTrue(poller.poll().isEmpty());
        assertEquals(0, client.clockQueries.get(), "clock queries while no permit was free");
        assertTrue(client.queries.isEmpty());
    }

    /** Issue 16: the catalog down when the task starts is retried by the poll loop, not a failed task. */
    @Test
    void theCatalogDownAtStartIsRetriedNotFatal() throws Exception {
        FakeSourceClient client = new FakeSourceClient(KEYED, KEYED);
        AtomicInteger opens = new AtomicInteger();
        Supplier<Catalog> opener = () -> {
            if (opens.incrementAndGet() == 1) {
                throw new CatalogUnavailableException("catalog unreachable when source start started (fake outage)", null);
            }
            return Catalog.open(settings, "TablePollerTest-retry");
        };
        Clock[] clock = {Clock.fixed(NOW, ZoneOffset.UTC)};
        BigQueryQueryCdcConfig config = config("APPENDS", "1000", "3600000");
        TableSpec table = config.tables().get(0);
        TablePoller poller = new TablePoller("catalog-down", table, config, client, opener, new Semaphore(1),
                new Clock() {
                    @Override
                    public java.time.ZoneId getZone() {
                        return ZoneOffset.UTC;
                    }

                    @Override
                    public Clock withZone(java.time.ZoneId zone) {
                        return this;
                    }

                    @Override
                    public Instant instant() {
                        return clock[0].instant();
                    }
                },
                Map.of("cursor", Cursor.format(NOW.minusSeconds(30)), "batch", 0L),
                TableMetrics.forSource(() -> null, "catalog-down").table(table.fullName()));
        assertTrue(poller.poll().isEmpty(), "the failed open is an error episode, not an exception");
        assertEquals(1, opens.get());
        clock[0] = Clock.fixed(NOW.plusSeconds(10), ZoneOffset.UTC);
        poller.poll();
        assertEquals(2, opens.get(), "opened again after the backoff");
        assertTrue(catalog.progress().getTable("catalog-down", table.fullName()).isPresent(), "the table's row exists once it opened");
        poller.close();
    }

    private static long id(SourceRecord record) {
        return (Long) ((org.apache.kafka.connect.data.Struct) record.value()).get("id");
    }

    private static TablePoller pollerAt(String flow, BigQueryQueryCdcConfig config, SourceClient client, Clock clock,
                                        Map<String, Object> offset) {
        TableSpec spec = config.tables().get(0);
        return new TablePoller(flow, spec, config, client, () -> catalog, new Semaphore(1), clock, offset,
                TableMetrics.forSource(() -> null, flow).table(spec.fullName()));
    }

    /**
     * Issue 37 item 3: with initial.load=skip, the first batch after the skip reached Kafka (and the catalog), but the
     * worker died before Connect stored its offset. The task started again has no offset: before, it skipped again, to
     * the clock of its own start, and the rows written meanwhile (row 3) were never read; it must continue from the
     * catalog's cursor, the later of the two.
     */
    @Test
    void initialLoadSkipContinuesFromTheCatalogCursorWhenTheOffsetWasNotStored() throws Exception {
        FakeTable table = new FakeTable();
        table.rows.put(1L, NOW.minus(Duration.ofHours(2)));
        Map<String, String> props = new HashMap<>(configWithKey("QUERY", "1000", "3600000").originalsStrings());
        props.put("initial.load", "skip");
        BigQueryQueryCdcConfig config = new BigQueryQueryCdcConfig(props);
        MovableClock clock = new MovableClock();
        TablePoller first = pollerAt("skip-restart", config, table, clock, null);
        assertTrue(first.poll().isEmpty());
        Instant skippedTo = first.cursor();
        assertEquals(NOW.minus(Duration.ofHours(2)), skippedTo, "skipped up to the largest watermark");
        table.rows.put(2L, skippedTo.plusSeconds(60));
        table.now = NOW.plus(Duration.ofMinutes(30));
        clock.now = table.now;
        List<List<SourceRecord>> delivered = pollBatches(first, clock, 1);
        assertEquals(List.of(2L), delivered.get(0).stream().map(TablePollerTest::id).toList());
        clock.now = clock.now.plusSeconds(5);
        first.poll(); // Kafka acknowledged the batch: the catalog records it; Connect never stores its offset
        assertEquals(Cursor.format(skippedTo.plusSeconds(60)),
                catalog.progress().getTable("skip-restart", "p.d.t").orElseThrow().cursor());

        table.rows.put(3L, skippedTo.plusSeconds(120)); // written while the worker was down
        table.now = NOW.plus(Duration.ofHours(1));
        clock.now = table.now;
        TablePoller again = pollerAt("skip-restart", config, table, clock, null);
        List<List<SourceRecord>> after = pollBatches(again, clock, 1);
        assertEquals(1, after.size(), "row 3 was never read: " + table.queries);
        assertEquals(List.of(3L), after.get(0).stream().map(TablePollerTest::id).toList(),
                "the restarted task reads on from the catalog's cursor, without reading row 2 again or skipping row 3");
    }

    /**
     * Issue 37 item 4: a DATETIME watermark is read in watermark.time.zone; the cursor is an instant. Changing the zone
     * moves every row relative to the cursor (here by two hours: rows of those two hours would never be read). The
     * task records the zone with the cursor and refuses a change, saying how to go back or to load the table again (a
     * rewind alone would give rows lower versions than ClickHouse holds: ConfigEditIT); before, it read on.
     */
    @Test
    void aChangedWatermarkTimeZoneIsRefusedWithTheWayOut() throws Exception {
        FieldList columns = FieldList.of(Field.of("id", StandardSQLTypeName.INT64), Field.of("ts", StandardSQLTypeName.DATETIME));
        FieldList result = FieldList.of(Field.of("id", StandardSQLTypeName.INT64), Field.of("ts", StandardSQLTypeName.DATETIME),
                Field.of(CdcSql.WATERMARK, StandardSQLTypeName.TIMESTAMP));
        Map<String, Object> offset = Map.of("cursor", Cursor.format(NOW.minus(Duration.ofHours(1))), "batch", 0L);
        Map<String, String> props = new HashMap<>(configWithKey("QUERY", "1000", "3600000").originalsStrings());
        props.put("watermark.time.zone", "UTC");
        MovableClock clock = new MovableClock();
        TablePoller utc = pollerAt("zone-change", new BigQueryQueryCdcConfig(props), new FakeSourceClient(columns, result), clock, offset);
        assertTrue(utc.poll().isEmpty());
        assertEquals(java.util.Optional.of("UTC"), catalog.progress().watermarkZone("zone-change", "p.d.t"));

        props.put("watermark.time.zone", "+02:00");
        clock.now = clock.now.plusSeconds(10);
        TablePoller moved = pollerAt("zone-change", new BigQueryQueryCdcConfig(props), new FakeSourceClient(columns, result), clock, offset);
        ConnectException e = assertThrows(ConnectException.class, moved::poll);
        assertTrue(e.getMessage().contains("watermark.time.zone is +02:00") && e.getMessage().contains("read in UTC")
                && e.getMessage().contains("set watermark.time.zone back to UTC")
                && e.getMessage().contains("PATCH /connectors/zone-change/offsets")
                && e.getMessage().contains("\"offset\": null") && e.getMessage().contains("TRUNCATE TABLE"), e.getMessage());
        assertEquals(java.util.Optional.of("UTC"), catalog.progress().watermarkZone("zone-change", "p.d.t"));

        // a TIMESTAMP watermark does not depend on the zone: a change is recorded, not refused
        FieldList stamped = FieldList.of(Field.of("id", StandardSQLTypeName.INT64), Field.of("ts", StandardSQLTypeName.TIMESTAMP));
        TablePoller timestamps = pollerAt("zone-change-ts", new BigQueryQueryCdcConfig(props),
                new FakeSourceClient(stamped, FakeTable.RESULT), clock, offset);
        assertTrue(timestamps.poll().isEmpty());
        assertEquals(java.util.Optional.of("+02:00"), catalog.progress().watermarkZone("zone-change-ts", "p.d.t"));
    }

    /**
     * Issue 38 item 4: a table removed from the config loses its catalog row once its batches are loaded (a later start
     * prunes it), zone included, while Connect keeps its offset. Added back in another zone, it read on from the
     * offset's cursor in the new zone: nothing remembered the old one. Records carry the zone in their offset now, and
     * the task refuses as for a zone changed in place; an offset without one (written before) changes nothing.
     */
    @Test
    void aZoneChangedWhileTheTablesCatalogRowWasPrunedIsRefusedFromItsOffset() throws Exception {
        FieldList columns = FieldList.of(Field.of("id", StandardSQLTypeName.INT64), Field.of("ts", StandardSQLTypeName.DATETIME));
        FieldList result = FieldList.of(Field.of("id", StandardSQLTypeName.INT64), Field.of("ts", StandardSQLTypeName.DATETIME),
                Field.of(CdcSql.WATERMARK, StandardSQLTypeName.TIMESTAMP));
        Map<String, String> props = new HashMap<>(configWithKey("QUERY", "1000", "3600000").originalsStrings());
        props.put("watermark.time.zone", "+02:00");
        String cursor = Cursor.format(NOW.minus(Duration.ofHours(1)));
        MovableClock clock = new MovableClock();
        TablePoller moved = pollerAt("zone-pruned", new BigQueryQueryCdcConfig(props), new FakeSourceClient(columns, result),
                clock, Map.of("cursor", cursor, "batch", 4L, "zone", "UTC"));
        assertEquals(java.util.Optional.empty(), catalog.progress().watermarkZone("zone-pruned", "p.d.t"), "no catalog row");
        ConnectException e = assertThrows(ConnectException.class, moved::poll);
        assertTrue(e.getMessage().contains("watermark.time.zone is +02:00") && e.getMessage().contains("read in UTC"),
                e.getMessage());

        TablePoller older = pollerAt("zone-pruned-old", new BigQueryQueryCdcConfig(props), new FakeSourceClient(columns, result),
                clock, Map.of("cursor", cursor, "batch", 4L));
        assertTrue(older.poll().isEmpty());
        assertEquals(java.util.Optional.of("+02:00"), catalog.progress().watermarkZone("zone-pruned-old", "p.d.t"));
    }

    /**
     * Issue 37 item 8: the hourly MAX(watermark) check (for watermarks ahead of BigQuery's clock) fails, e.g. because
     * it would scan more than maximum.bytes.billed. Before, it ran in the poll path and its next time was set only when
     * it succeeded: every poll failed on it and no window was read again. It must neither fail the poll nor run again
     * before the hour is over.
     */
    @Test
    void aFailingHourlyWatermarkCheckDoesNotStopTheWindows() throws Exception {
        AtomicInteger maxQueries = new AtomicInteger();
        FakeTable table = new FakeTable() {
            @Override
            public Instant maxWatermark(TableSpec spec, String watermark) {
                maxQueries.incrementAndGet();
                throw new com.google.cloud.bigquery.BigQueryException(400,
                        "Query exceeded limit for bytes billed: 10000000. 20000000 or higher required.");
            }
        };
        table.rows.put(1L, NOW.minus(Duration.ofMinutes(30)));
        table.rows.put(2L, NOW.minus(Duration.ofMinutes(20)));
        Map<String, Object> offset = Map.of("cursor", Cursor.format(NOW.minus(Duration.ofHours(1))), "batch", 0L);
        MovableClock clock = new MovableClock();
        TablePoller poller = pollerAt("ahead-check-fails", configWithKey("QUERY", "1000", "3600000"), table, clock, offset);
        List<List<SourceRecord>> batches = pollBatches(poller, clock, 1);
        assertEquals(1, batches.size(), "no window was read: " + table.queries);
        assertEquals(List.of(1L, 2L), batches.get(0).stream().map(TablePollerTest::id).toList());
        assertEquals(1, maxQueries.get(), "the check runs once an hour, also when it fails");
    }

    /**
     * Issue 37 item 1: two tasks on one table, as when a worker cut off from its Connect group keeps its task running
     * while the group gives the table to another worker. The task that started last owns the table; the other one's
     * next catalog write is refused and it stops sending. Before, both read and sent every new row (doubles, and two
     * writers of one cursor and one id sequence).
     */
    @Test
    void aTaskWhoseTableAnotherTaskTookStopsSending() throws Exception {
        FakeTable table = new FakeTable();
        table.rows.put(1L, NOW.minus(Duration.ofMinutes(30)));
        Map<String, Object> offset = Map.of("cursor", Cursor.format(NOW.minus(Duration.ofHours(1))), "batch", 0L);
        BigQueryQueryCdcConfig config = configWithKey("QUERY", "1000", "3600000");
        MovableClock clock = new MovableClock();
        TablePoller zombie = pollerAt("two-owners", config, table, clock, offset);
        assertEquals(List.of(1L), pollBatches(zombie, clock, 1).get(0).stream().map(TablePollerTest::id).toList());
        clock.now = clock.now.plusSeconds(5);
        zombie.poll(); // the batch is recorded

        // the group gives the table to another task, which starts from the same offset (the zombie's was not flushed)
        TablePoller successor = pollerAt("two-owners", config, table, clock, offset);
        table.rows.put(2L, NOW.minus(Duration.ofMinutes(10)));
        List<List<SourceRecord>> successorBatches = pollBatches(successor, clock, 1);
        assertEquals(List.of(2L), successorBatches.get(0).stream().map(TablePollerTest::id).toList(),
                "the successor reads on from the catalog's cursor");

        table.rows.put(3L, NOW.minus(Duration.ofMinutes(5)));
        List<SourceRecord> sentByZombie = new ArrayList<>();
        ConnectException lost = null;
        for (int i = 0; i < 20 && lost == null; i++) {
            clock.now = clock.now.plusSeconds(2);
            try {
                List<SourceRecord> records = zombie.poll();
                sentByZombie.addAll(records);
                records.forEach(r -> zombie.acknowledged());
            } catch (ConnectException e) {
                lost = e;
            }
        }
        assertEquals(List.of(), sentByZombie.stream().map(TablePollerTest::id).toList(), "the zombie sent rows");
        assertTrue(lost != null && lost.getMessage().contains("another task took this table over"), String.valueOf(lost));
    }

    /**
     * Issue 37 item 5: a table removed from the connector's config while the sink has not loaded what it staged (and
     * what was synced) of it. Before, the connector's start deleted the table's staged batches and its row at once:
     * the sink lost them. They stay until the sink has loaded them; a table with nothing left to load is pruned.
     */
    @Test
    void removingATableKeepsWhatTheSinkHasNotLoaded() throws Exception {
        String flow = "prune-unloaded";
        catalog.progress().initTable(flow, "p.d.t");
        catalog.progress().initTable(flow, "p.d.staged");
        catalog.progress().initTable(flow, "p.d.loaded");
        catalog.progress().recordSync(flow, "p.d.staged", new io.tablecdc.catalog.SyncedBatch("", 1, 5, NOW, NOW), NOW);
        catalog.stages().upsertStage(flow, "p.d.staged", new io.tablecdc.catalog.Stage(1,
                List.of(new io.tablecdc.catalog.StageFile("file:///s/1.avro", 5, 500)), 5, io.tablecdc.catalog.RowCounts.ZERO));
        catalog.progress().recordSync(flow, "p.d.loaded", new io.tablecdc.catalog.SyncedBatch("", 1, 5, NOW, NOW), NOW);
        catalog.progress().recordNormalize(flow, "p.d.loaded", 1, io.tablecdc.catalog.RowCounts.ZERO, NOW);

        Map<String, String> props = new HashMap<>(configWithKey("QUERY", "1000", "3600000").originalsStrings());
        props.put("name", flow);
        BigQueryQueryCdcSourceConnector connector = new BigQueryQueryCdcSourceConnector();
        connector.start(props); // only p.d.t is configured now
        assertEquals(1, catalog.stages().listStages(flow, "p.d.staged").size(), "the staged batch was deleted");
        assertTrue(catalog.progress().getTable(flow, "p.d.staged").isPresent());
        assertTrue(catalog.progress().getTable(flow, "p.d.loaded").isEmpty(), "a table with nothing left is pruned");

        // once the sink loaded it, the next start prunes it
        catalog.progress().recordNormalize(flow, "p.d.staged", 1, io.tablecdc.catalog.RowCounts.ZERO, NOW);
        catalog.stages().deleteStage(flow, "p.d.staged", 1);
        connector.start(props);
        assertTrue(catalog.progress().getTable(flow, "p.d.staged").isEmpty());
    }

    /**
     * Issue 37 item 2: a CHANGES (or APPENDS) table snapshotted again (its offset reset, as the time travel error tells
     * the operator) after batches of it were sent. Its snapshot rows carry version 0 (no change timestamp), so
     * ClickHouse kept the older images it had, and rows deleted meanwhile stayed. A re-snapshot first sends a truncate
     * batch (one record, op t), so the snapshot replaces the table's rows; a first snapshot sends none.
     */
    @Test
    void aChangeHistoryReSnapshotFirstTruncatesTheTable() throws Exception {
        String flow = "changes-resnapshot";
        catalog.progress().initTable(flow, "p.d.t");
        catalog.progress().recordSync(flow, "p.d.t", new io.tablecdc.catalog.SyncedBatch("", 3, 7, NOW, NOW), NOW);
        FakeSourceClient client = new FakeSourceClient(KEYED, KEYED);
        client.results.add(List.of(FieldValueList.of(List.of(FieldValue.of(FieldValue.Attribute.PRIMITIVE, "1"),
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, "one")), KEYED)));
        MovableClock clock = new MovableClock();
        TablePoller poller = pollerAt(flow, config("CHANGES", "700000", "3600000"), client, clock, null);
        List<List<SourceRecord>> batches = pollBatches(poller, clock, 2);
        assertEquals(2, batches.size(), batches.toString());
        SourceRecord truncate = batches.get(0).get(0);
        assertEquals(1, batches.get(0).size());
        assertEquals("t", header(truncate, RecordHeaders.OP), "the re-snapshot starts with a truncate batch");
        assertEquals("true", header(truncate, RecordHeaders.BATCH_LAST));
        assertEquals(null, truncate.value());
        assertEquals("r", header(batches.get(1).get(0), RecordHeaders.OP));
        assertTrue(Long.parseLong(header(batches.get(1).get(0), RecordHeaders.BATCH))
                > Long.parseLong(header(truncate, RecordHeaders.BATCH)), "the snapshot comes after the truncate");

        // a first snapshot (nothing sent of the table before) sends no truncate
        FakeSourceClient fresh = new FakeSourceClient(KEYED, KEYED);
        fresh.results.add(List.of(FieldValueList.of(List.of(FieldValue.of(FieldValue.Attribute.PRIMITIVE, "1"),
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, "one")), KEYED)));
        TablePoller first = pollerAt("changes-first-snapshot", config("CHANGES", "700000", "3600000"), fresh, clock, null);
        assertEquals("r", header(pollBatches(first, clock, 1).get(0).get(0), RecordHeaders.OP));
    }

    /**
     * Issue 37 item 7: an APPENDS table idle for longer than BigQuery's time travel window. Its empty windows move the
     * cursor in the catalog only (Connect stores an offset only with a record), so a task started again took the
     * Connect offset of its last batch, more than 7 days back, and failed for good; it must take the catalog's later
     * cursor.
     */
    @Test
    void anIdleChangeHistoryTableRestartsFromTheCatalogCursorNotItsOldOffset() throws Exception {
        BigQueryQueryCdcConfig config = config("APPENDS", "1000", "86400000");
        Instant lastBatch = NOW.minus(Duration.ofHours(3));
        Map<String, Object> offset = Map.of("cursor", Cursor.format(lastBatch), "batch", 0L);
        MovableClock clock = new MovableClock();
        FakeSourceClient client = new FakeSourceClient(KEYED, KEYED);
        TablePoller idle = pollerAt("appends-idle", config, client, clock, offset);
        for (int day = 0; day <= 8; day++) {
            clock.now = NOW.plus(Duration.ofDays(day));
            client.now = clock.now;
            assertTrue(idle.poll().isEmpty());
        }
        assertEquals(NOW.plus(Duration.ofDays(8)).minusSeconds(1), idle.cursor());
        FakeSourceClient later = new FakeSourceClient(KEYED, KEYED);
        later.now = NOW.plus(Duration.ofDays(8)).plusSeconds(30);
        clock.now = later.now;
        TablePoller restarted = pollerAt("appends-idle", config, later, clock, offset);
        assertTrue(restarted.poll().isEmpty());
        assertEquals(later.now.minusSeconds(1), restarted.cursor());
        assertEquals(1, later.queries.size(), "one window from the catalog's cursor: " + later.queries);
    }

    /**
     * Issue 16: in APPENDS (and CHANGES) mode an empty window moves the cursor to its upper bound
     * ({@code _CHANGE_TIMESTAMP} is the commit time), so an idle table never falls behind the time travel window.
     */
    @Test
    void changeHistoryEmptyWindowsMoveTheCursorToTheirEnd() throws Exception {
        FakeSourceClient client = new FakeSourceClient(KEYED, KEYED);
        Instant start = NOW.minus(Duration.ofHours(3));
        TablePoller poller = poller("appends-empty", config("APPENDS", "1000", "3600000"), client, new Semaphore(1), () -> catalog, start);
        assertTrue(poller.poll().isEmpty());
        // three one-hour windows up to NOW - 1 s, all empty
        assertEquals(3, client.queries.size());
        assertEquals(NOW.minusSeconds(1), poller.cursor());
        TableState state = catalog.progress().getTable("appends-empty", "p.d.t").orElseThrow();
        assertEquals(Cursor.format(NOW.minusSeconds(1)), state.cursor());
        assertEquals(0, state.syncedBatchId(), "an empty window is no batch");
    }

    /**
     * Issue 16: a cursor before BigQuery's time travel window (7 days) cannot be read by APPENDS() or CHANGES() any
     * more: the table's task fails with the way out (re-snapshot), before any query. Seven days exactly still reads.
     */
    @Test
    void aCursorOutsideTimeTravelFailsTheTableWithTheWayOut() throws Exception {
        FakeSourceClient client = new FakeSourceClient(KEYED, KEYED);
        Instant tooOld = NOW.minus(Duration.ofDays(7)).minusNanos(1_000);
        TablePoller poller = poller("appends-old", config("APPENDS", "1000", "86400000"), client, new Semaphore(1), () -> catalog, tooOld);
        ConnectException e = assertThrows(ConnectException.class, poller::poll);
        assertTrue(e.getMessage().contains("table p.d.t: the cursor " + Cursor.format(tooOld) + " is more than 7 days before"
                + " BigQuery's clock"), e.getMessage());
        assertTrue(e.getMessage().contains("Re-snapshot the table"), e.getMessage());
        assertTrue(client.queries.isEmpty());
        assertTrue(catalog.progress().getTable("appends-old", "p.d.t").orElseThrow().lastError().contains("time travel"));

        FakeSourceClient atTheEdge = new FakeSourceClient(KEYED, KEYED);
        TablePoller edge = poller("appends-edge", config("APPENDS", "1000", "86400000"), atTheEdge, new Semaphore(1),
                () -> catalog, NOW.minus(Duration.ofDays(7)));
        edge.poll();
        assertEquals(7, atTheEdge.queries.size(), "seven one-day windows (the last one ends a safety lag before now), all read");
    }

    /**
     * Issue 16: in CHANGES mode an UPDATE that changed the key sends the delete of the old key (the DELETE half of the
     * update) besides the new row; the delete is one nanosecond older than the update, so the update of an unchanged
     * key always wins over its own delete half.
     */
    @Test
    void changesModeSendsTheDeleteOfTheOldKeyOfAnUpdate() throws Exception {
        FieldList fields = changeFields();
        FakeSourceClient client = new FakeSourceClient(KEYED, fields);
        Instant at = NOW.minus(Duration.ofMinutes(30));
        client.results.add(List.of(
                change(fields, 1, "old key", "DELETE", at, true),
                change(fields, 2, "new key", "UPDATE", at, null),
                change(fields, 3, "same key", "DELETE", at, true),
                change(fields, 3, "same key, new name", "UPDATE", at, null)));
        TablePoller poller = poller("changes-key", config("CHANGES", "600001", "86400000"), client, new Semaphore(1), () -> catalog,
                NOW.minus(Duration.ofHours(1)));
        List<SourceRecord> records = poller.poll();
        assertEquals(4, records.size());
        String version = Long.toString(Cursor.micros(at) * 1_000);
        String before = Long.toString(Cursor.micros(at) * 1_000 - 1);
        assertEquals(List.of("d", "u", "d", "u"), records.stream().map(r -> header(r, RecordHeaders.OP)).toList());
        assertEquals(List.of(before, version, before, version), records.stream().map(r -> header(r, RecordHeaders.VERSION)).toList());
        assertEquals(1L, ((org.apache.kafka.connect.data.Struct) records.get(0).key()).get("id"));
    }

    /**
     * FLOAT64 NaN and ±Infinity (BigQuery sends them as these strings) leave with a tablecdc.nonfinite header each,
     * which the sink puts back: Kafka's JsonConverter alone reads them as 0.
     */
    @Test
    void nonFiniteFloatsAreNamedInHeaders() throws Exception {
        FieldList columns = FieldList.of(Field.of("id", StandardSQLTypeName.INT64), Field.of("score", StandardSQLTypeName.FLOAT64),
                Field.newBuilder("scores", StandardSQLTypeName.FLOAT64).setMode(Field.Mode.REPEATED).build());
        FieldList fields = FieldList.of(columns.get(0), columns.get(1), columns.get(2),
                Field.of(CdcSql.CHANGE_TYPE, StandardSQLTypeName.STRING),
                Field.of(CdcSql.CHANGE_TIMESTAMP, StandardSQLTypeName.TIMESTAMP),
                Field.of(CdcSql.CHANGE_IS_FOR_UPDATE, StandardSQLTypeName.BOOL));
        FakeSourceClient client = new FakeSourceClient(columns, fields);
        Instant at = NOW.minus(Duration.ofMinutes(30));
        String micros = java.math.BigDecimal.valueOf(Cursor.micros(at)).movePointLeft(6).toPlainString();
        java.util.function.BiFunction<String, List<String>, FieldValueList> row = (score, scores) -> FieldValueList.of(List.of(
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, "1"),
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, score),
                FieldValue.of(FieldValue.Attribute.REPEATED, FieldValueList.of(scores.stream()
                        .map(x -> FieldValue.of(FieldValue.Attribute.PRIMITIVE, x)).toList())),
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, "INSERT"),
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, micros),
                FieldValue.of(FieldValue.Attribute.PRIMITIVE, null)), fields);
        client.results.add(List.of(row.apply("NaN", List.of("1.5", "Infinity", "-Infinity")), row.apply("2.5", List.of())));
        TablePoller poller = poller("nonfinite", config("CHANGES", "600001", "86400000"), client, new Semaphore(1), () -> catalog,
                NOW.minus(Duration.ofHours(1)));
        List<SourceRecord> records = poller.poll();
        assertEquals(2, records.size());
        List<String> marks = new ArrayList<>();
        records.get(0).headers().allWithName(RecordHeaders.NON_FINITE).forEachRemaining(h -> marks.add((String) h.value()));
        assertEquals(List.of("score=NaN", "scores[1]=Infinity", "scores[2]=-Infinity"), marks);
        assertEquals(null, records.get(1).headers().lastWithName(RecordHeaders.NON_FINITE));
    }
}
