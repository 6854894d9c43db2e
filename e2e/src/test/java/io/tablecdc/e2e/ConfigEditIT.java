package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

import com.clickhouse.client.api.query.GenericRecord;
import com.fasterxml.jackson.databind.JsonNode;
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

/**
 * Issue 38 item 4, configuration edits with work in flight: a running connector's config replaced through
 * {@code PUT /connectors/<name>/config} while a table's batches are staged in the object store and not loaded
 * (ClickHouse refuses the table's rows through a {@code CHECK} constraint until the test drops it). Each edit either
 * applies without losing or doubling a row, or is refused with a message that says what to do, and the way out it
 * names loses nothing either. ClickHouse {@code FINAL} must equal the source and hold so for a few seconds once the
 * flow is quiet; without {@code FINAL} no (key, version) may be held twice. One sink serves every flow of the class,
 * on the stack's worker.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ConfigEditIT {
    private static final LocalStack stack = LocalStack.get();
    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final Duration HOLD = Duration.ofSeconds(3);
    private static final String SINK = "cfgedit-sink";
    private static final String PG_DATABASE = "cfgedit_source";
    private static final String[] PG_ROW = {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"};

    private static BigQueryFixture fx;
    private static PgChecks pg;
    private static ConnectRestClient rest;
    private static Map<String, String> sinkConfig;
    private static CdcChecks.LogCapture log;

    @BeforeAll
    static void start() throws Exception {
        fx = BigQueryFixture.create(stack, "cfgedit", "cfgedit_catalog");
        stack.postgres().createDatabase(PG_DATABASE);
        pg = new PgChecks(stack, PG_DATABASE, fx.catalogUrl, stack.clickhouse().client());
        pg.holdEqualFor(HOLD);
        rest = stack.connect().rest();
        // one sink for every flow of the class: their topics all start with cfgedit-
        sinkConfig = SinkConfigs.flowSink(stack, fx.catalogUrl, "cfgedit-stage", "cfgedit");
        sinkConfig.put("topics.regex", "cfgedit-.*");
        rest.putConfig(SINK, sinkConfig);
        rest.awaitRunning(SINK, 1, WAIT);
        // after every stack part the class uses has started (the object store's start resets logging)
        log = new CdcChecks.LogCapture();
    }

    @AfterAll
    static void stop() {
        if (log != null) {
            log.close();
        }
        if (rest != null) {
            rest.delete(SINK);
        }
        if (pg != null) {
            pg.close();
        }
    }

    /**
     * A BigQuery table removed from {@code tables} while ClickHouse refuses its rows (its batches staged), written to
     * while it is out, and added back before the sink could load them: its staged batches load, it reads on from its
     * cursor (the rows written while it was out included), and nothing arrives twice.
     */
    @Test
    @Order(1)
    void aBigQueryTableRemovedAndAddedBackWhileItsBatchesAreStagedLosesAndDoublesNothing() throws Exception {
        String flow = "cfgedit-bq-readd";
        String prefix = "cfgedit-bqreadd";
        TableId moved = fx.table("readd_moved");
        TableId kept = fx.table("readd_kept");
        BigQueryFixture.Rows movedRows = fx.rows(moved);
        BigQueryFixture.Rows keptRows = fx.rows(kept);
        movedRows.insert(1, 3);
        keptRows.insert(1, 3);
        String both = "readd_moved:ts:id, readd_kept:ts:id";
        try {
            rest.putConfig(flow, fx.source(both, 2, prefix));
            rest.awaitRunning(flow, 2, WAIT);
            fx.awaitEqual(moved, movedRows.expected(), WAIT);
            fx.awaitEqual(kept, keptRows.expected(), WAIT);

            refuse(fx.chTable(moved));
            movedRows.insert(4, 6);
            movedRows.update(List.of(2L));
            fx.awaitState(flow, moved, s -> s.syncedBatchId() > s.normalizedBatchId() && s.lastError() != null, WAIT);
            assertFalse(fx.checks.stages(flow, fx.fullName(moved)).isEmpty(), "the table's batches are staged");

            // removed while its batches are staged; rows written meanwhile
            rest.putConfig(flow, fx.source("readd_kept:ts:id", 2, prefix));
            rest.awaitRunning(flow, 1, WAIT);
            movedRows.insert(7, 8);
            movedRows.update(List.of(3L));
            keptRows.insert(4, 5);
            fx.awaitEqual(kept, keptRows.expected(), WAIT);
            assertFalse(fx.checks.stages(flow, fx.fullName(moved)).isEmpty(), "the table's batches are still staged");

            // added back before they loaded
            rest.putConfig(flow, fx.source(both, 2, prefix));
            rest.awaitRunning(flow, 2, WAIT);
            movedRows.insert(9, 9);
            movedRows.update(List.of(1L));
            allow(fx.chTable(moved));

            fx.awaitEqual(moved, movedRows.expected(), WAIT);
            fx.awaitEqual(kept, keptRows.expected(), WAIT);
            holdEqual(moved, movedRows.expected());
            fx.assertNoRowDoubled(fx.topic(prefix, moved), moved);
            fx.assertNoRowDoubled(fx.topic(prefix, kept), kept);
        } finally {
            rest.delete(flow);
        }
    }

    /**
     * {@code watermark.time.zone} changed (UTC to Asia/Tokyo) on a table with a DATETIME watermark whose cursor is
     * mid-stream and whose batches are staged: the new zone places every row nine hours earlier, so reading on from the
     * cursor would skip rows, and the versions of rows read in the new zone would be lower than those ClickHouse holds
     * (an update would lose to the row it updates). The table's task refuses with a message naming the connector, the
     * table and the setting; the staged batches load; the way out the message names, taken, ends with ClickHouse equal
     * to BigQuery, later updates included.
     */
    @Test
    @Order(2)
    void aWatermarkTimeZoneChangedMidStreamIsRefusedAndItsWayOutLosesNothing() throws Exception {
        String flow = "cfgedit-bq-zone";
        String prefix = "cfgedit-bqzone";
        TableId table = datetimeTable("zone_dt");
        DatetimeRows rows = new DatetimeRows(table);
        rows.write(List.of(1L, 2L, 3L));
        Map<String, String> utc = fx.source("zone_dt:ts:id", 1, prefix);
        try {
            rest.putConfig(flow, utc);
            rest.awaitRunning(flow, 1, WAIT);
            fx.awaitEqual(table, rows.expected, WAIT);

            refuse(fx.chTable(table));
            rows.write(List.of(4L, 5L, 2L));
            fx.awaitState(flow, table, s -> s.syncedBatchId() > s.normalizedBatchId() && s.lastError() != null, WAIT);

            Map<String, String> tokyo = new java.util.HashMap<>(utc);
            tokyo.put("watermark.time.zone", "Asia/Tokyo");
            rest.putConfig(flow, tokyo);
            JsonNode failed = rest.awaitStatus(flow, s -> s.path("tasks").size() == 1
                    && "FAILED".equals(s.path("tasks").get(0).path("state").asText()), WAIT);
            String trace = failed.path("tasks").get(0).path("trace").asText();
            assertTrue(trace.contains("table " + fx.fullName(table)) && trace.contains("watermark.time.zone is Asia/Tokyo")
                    && trace.contains("/connectors/" + flow + "/offsets") && trace.contains("TRUNCATE TABLE")
                    && trace.contains("\"offset\": null"), "the refusal names the table, the setting, the connector and"
                    + " the way out taken below: " + trace);
            System.out.println("refused: " + trace.lines().findFirst().orElse(""));

            // the staged batches load; then the way out the message names
            allow(fx.chTable(table));
            fx.awaitEqual(table, rows.expected, WAIT);
            fx.awaitState(flow, table, s -> s.normalizedBatchId() >= s.syncedBatchId(), WAIT);
            rest.stop(flow);
            rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText())
                    && s.path("tasks").isEmpty(), WAIT);
            fx.checks.execute("TRUNCATE TABLE " + fx.chTable(table));
            Map<String, Object> reset = new LinkedHashMap<>();
            reset.put("partition", Map.of("table", fx.fullName(table)));
            reset.put("offset", null);
            rest.alterOffsets(flow, List.of(reset));
            rest.resume(flow);
            rest.awaitRunning(flow, 1, WAIT);
            fx.awaitEqual(table, rows.expected, WAIT);

            // read in the new zone from now on: later writes and updates arrive, none loses to an older version
            rows.write(List.of(6L, 1L, 3L));
            fx.awaitEqual(table, rows.expected, WAIT);
            holdEqual(table, rows.expected);
            assertEquals(List.of(), fx.doubledInClickHouse(table), "(id, version) pairs held twice");
        } finally {
            rest.delete(flow);
        }
    }

    /**
     * {@code record.format} changed from rows to blocks and back on a Postgres flow while the table's batches are
     * staged and not loaded, with changes committed before, between and after the edits.
     */
    @Test
    @Order(3)
    void aRecordFormatChangedWhileBatchesAreStagedLosesAndDoublesNothing() throws Exception {
        String schema = "cfgedit_format";
        String table = schema + ".t";
        String flow = "cfgedit-pg-format";
        Map<String, String> source = pgFlow(schema, flow, "cfgedit-pgformat", List.of("t"), false);
        try {
            pg.sql("INSERT INTO " + table + " SELECT g, g FROM generate_series(1, 20) g");
            awaitLoaded(Map.of(table, PG_ROW), WAIT);

            refuse(schema + "_t");
            pg.batchEach(flow, table, "INSERT INTO " + table + " SELECT g, g FROM generate_series(21, 30) g",
                    "UPDATE " + table + " SET v = v + 100 WHERE id <= 5");
            awaitStaged(flow, table);

            source.put("record.format", "blocks");
            replacePgConfig(flow, source);
            pg.batchEach(flow, table, "INSERT INTO " + table + " SELECT g, g FROM generate_series(31, 40) g",
                    "DELETE FROM " + table + " WHERE id IN (6, 7)", "UPDATE " + table + " SET v = v + 1000 WHERE id = 21");

            source.put("record.format", "rows");
            replacePgConfig(flow, source);
            pg.batchEach(flow, table, "INSERT INTO " + table + " SELECT g, g FROM generate_series(41, 45) g",
                    "UPDATE " + table + " SET v = v + 10000 WHERE id IN (1, 31)");
            awaitStaged(flow, table);

            allow(schema + "_t");
            pg.awaitEqual(Map.of(table, PG_ROW), WAIT);
            assertEquals(List.of(), doubled(schema + "_t"), "(key, version) rows held twice without FINAL");
        } finally {
            rest.delete(flow);
        }
    }

    /**
     * A BigQuery table with a DATETIME watermark removed from {@code tables} while its batches are staged, kept in the
     * catalog until the sink loaded them, pruned from the catalog by a later start of the connector, and then added
     * back: first with another {@code watermark.time.zone}, which its task refuses (the zone its cursor was read in is
     * in its Connect offset; before, the catalog alone knew it, and the pruned table read on in the new zone), then
     * with the zone set back: it reads on from its Connect offset with batch ids above its old ones, and nothing is
     * read twice.
     */
    @Test
    @Order(4)
    void aBigQueryTableAddedBackAfterItsCatalogRowWasPrunedReadsOnFromItsCursor() throws Exception {
        String flow = "cfgedit-bq-prune";
        String prefix = "cfgedit-bqprune";
        TableId moved = datetimeTable("prune_moved");
        TableId kept = fx.table("prune_kept");
        DatetimeRows movedRows = new DatetimeRows(moved);
        BigQueryFixture.Rows keptRows = fx.rows(kept);
        movedRows.write(List.of(1L, 2L, 3L));
        keptRows.insert(1, 3);
        String both = "prune_moved:ts:id, prune_kept:ts:id";
        try {
            rest.putConfig(flow, fx.source(both, 2, prefix));
            rest.awaitRunning(flow, 2, WAIT);
            fx.awaitEqual(moved, movedRows.expected, WAIT);
            refuse(fx.chTable(moved));
            movedRows.write(List.of(4L, 5L, 1L));
            // every row written read before the table is removed (it is not read again until it is back)
            fx.awaitState(flow, moved, s -> s.syncedBatchId() > s.normalizedBatchId() && s.lastError() != null
                    && s.syncedRows() >= movedRows.sequence, WAIT);
            long syncedBefore = fx.checks.state(flow, fx.fullName(moved)).syncedBatchId();

            rest.putConfig(flow, fx.source("prune_kept:ts:id", 2, prefix));
            rest.awaitRunning(flow, 1, WAIT);
            allow(fx.chTable(moved));
            fx.awaitEqual(moved, movedRows.expected, WAIT);
            fx.awaitState(flow, moved, s -> s.normalizedBatchId() >= s.syncedBatchId(), WAIT);
            // loaded: the connector's next start prunes the table's catalog row
            rest.restart(flow, false, false);
            fx.awaitState(flow, moved, s -> !s.exists(), WAIT);
            movedRows.write(List.of(6L, 7L, 2L));

            Map<String, String> tokyo = fx.source(both, 2, prefix);
            tokyo.put("watermark.time.zone", "Asia/Tokyo");
            rest.putConfig(flow, tokyo);
            JsonNode refused = rest.awaitStatus(flow, s -> s.path("tasks").size() == 2
                    && "FAILED".equals(s.path("tasks").get(0).path("state").asText()), WAIT);
            String trace = refused.path("tasks").get(0).path("trace").asText();
            assertTrue(trace.contains("table " + fx.fullName(moved)) && trace.contains("watermark.time.zone is Asia/Tokyo")
                    && trace.contains("read in UTC"), "the refusal names the table and both zones: " + trace);

            rest.putConfig(flow, fx.source(both, 2, prefix));
            rest.awaitRunning(flow, 2, WAIT);
            movedRows.write(List.of(8L, 3L));
            keptRows.insert(4, 4);
            fx.awaitEqual(moved, movedRows.expected, WAIT);
            fx.awaitEqual(kept, keptRows.expected(), WAIT);
            holdEqual(moved, movedRows.expected);
            assertTrue(fx.checks.state(flow, fx.fullName(moved)).syncedBatchId() > syncedBefore,
                    "batch ids of the table added back are above its old ones");
            fx.assertNoRowDoubled(fx.topic(prefix, moved), moved);
        } finally {
            rest.delete(flow);
        }
    }

    /**
     * A Postgres table removed from the publication while its batches are staged, changed while it is out, and added
     * back before the sink loaded them: it leaves the flow, comes back, is copied again from scratch (the copy starts
     * with a truncate, behind the staged batches), and ClickHouse ends equal to Postgres.
     */
    @Test
    @Order(5)
    void aPostgresTableRemovedFromThePublicationAndAddedBackWhileItsBatchesAreStagedEndsEqual() throws Exception {
        String schema = "cfgedit_pub";
        String moved = schema + ".moved";
        String kept = schema + ".kept";
        String flow = "cfgedit-pg-pub";
        Map<String, String> source = pgFlow(schema, flow, "cfgedit-pgpub", List.of("moved", "kept"), true);
        Map<String, String[]> tables = Map.of(moved, PG_ROW, kept, PG_ROW);
        try {
            pg.sql("INSERT INTO " + moved + " SELECT g, g FROM generate_series(21, 30) g",
                    "INSERT INTO " + kept + " SELECT g, g FROM generate_series(21, 30) g");
            awaitLoaded(tables, WAIT);

            refuse(schema + "_moved");
            pg.batchEach(flow, moved, "INSERT INTO " + moved + " SELECT g, g FROM generate_series(31, 40) g",
                    "UPDATE " + moved + " SET v = v + 100 WHERE id <= 25");
            awaitStaged(flow, moved);

            pg.sql("ALTER PUBLICATION " + schema + "_pub DROP TABLE " + moved,
                    "UPDATE " + moved + " SET v = v + 1000 WHERE id BETWEEN 26 AND 35",
                    "DELETE FROM " + moved + " WHERE id = 2",
                    "INSERT INTO " + kept + " VALUES (41, 41)");
            pg.awaitTable(flow, moved, row -> "errored".equals(row.get("phase")), WAIT);
            pg.sql("INSERT INTO " + moved + " VALUES (41, 41)");
            pg.sql("ALTER PUBLICATION " + schema + "_pub ADD TABLE " + moved,
                    "INSERT INTO " + moved + " VALUES (42, 42)", "UPDATE " + moved + " SET v = -v WHERE id = 3");
            assertFalse(fx.checks.stages(flow, moved).isEmpty(), "the table's batches are still staged");

            allow(schema + "_moved");
            pg.awaitTable(flow, moved, row -> "ready".equals(row.get("phase")), WAIT);
            pg.sql("UPDATE " + moved + " SET v = v + 1 WHERE id IN (1, 42)", "INSERT INTO " + kept + " VALUES (42, 42)");
            pg.awaitEqual(tables, WAIT);
            assertEquals(0, pg.keyedCopies(moved) + pg.keyedCopies(kept), "(key, version) rows held twice");
        } finally {
            rest.delete(flow);
        }
    }

    /**
     * The sink's {@code tasks.max} raised and lowered while a table's batches are staged: the table moves between
     * tasks (its normalize loop with it), the staged batches load once ClickHouse takes them, nothing twice.
     */
    @Test
    @Order(6)
    void aSinkTasksMaxChangedWhileBatchesAreStagedLosesAndDoublesNothing() throws Exception {
        sinkEditWhileStaged("cfgedit_tasks", "cfgedit-pg-tasks", "cfgedit-pgtasks",
                List.of(Map.of("tasks.max", "2"), Map.of("tasks.max", "1")));
    }

    /**
     * The sink's {@code errors.tolerance} changed (none to all with a dead letter queue, and back) while a table's
     * batches are staged: they load once ClickHouse takes them, nothing lost or twice.
     */
    @Test
    @Order(7)
    void aSinkErrorsToleranceChangedWhileBatchesAreStagedLosesAndDoublesNothing() throws Exception {
        sinkEditWhileStaged("cfgedit_tolerance", "cfgedit-pg-tolerance", "cfgedit-pgtolerance",
                List.of(Map.of("errors.tolerance", "all", "errors.deadletterqueue.topic.name", "dlq-cfgedit",
                        "errors.deadletterqueue.topic.replication.factor", "1"), Map.of("errors.tolerance", "none")));
    }

    /**
     * A Postgres flow of two tables, one of whose ClickHouse table refuses its rows; the sink's config is replaced by
     * each of {@code edits} in turn (applied on top of the class's sink config) while its batches are staged, with
     * changes between the edits; then ClickHouse takes the rows again. The sink's config is set back at the end.
     */
    private static void sinkEditWhileStaged(String schema, String flow, String prefix, List<Map<String, String>> edits)
            throws Exception {
        String held = schema + ".held";
        String other = schema + ".other";
        pgFlow(schema, flow, prefix, List.of("held", "other"), false);
        Map<String, String[]> tables = Map.of(held, PG_ROW, other, PG_ROW);
        Map<String, String> sink = new java.util.HashMap<>(sinkConfig);
        try {
            pg.sql("INSERT INTO " + held + " SELECT g, g FROM generate_series(1, 20) g",
                    "INSERT INTO " + other + " SELECT g, g FROM generate_series(1, 20) g");
            awaitLoaded(tables, WAIT);
            refuse(schema + "_held");
            int round = 0;
            for (Map<String, String> edit : edits) {
                round++;
                int from = 20 * round + 1;
                pg.batchEach(flow, held, "INSERT INTO " + held + " SELECT g, g FROM generate_series(" + from + ", "
                        + (from + 9) + ") g", "UPDATE " + held + " SET v = v + 100 WHERE id % 3 = " + (round % 3));
                pg.sql("INSERT INTO " + other + " SELECT g, g FROM generate_series(" + from + ", " + (from + 9) + ") g");
                awaitStaged(flow, held);
                sink.putAll(edit);
                rest.putConfig(SINK, sink);
                rest.awaitRunning(SINK, Integer.parseInt(sink.get("tasks.max")), WAIT);
                pg.batchEach(flow, held, "UPDATE " + held + " SET v = v + 1000 WHERE id % 5 = " + (round % 5),
                        "DELETE FROM " + held + " WHERE id = " + round);
            }
            allow(schema + "_held");
            pg.awaitEqual(tables, WAIT);
            assertEquals(0, pg.keyedCopies(held) + pg.keyedCopies(other), "(key, version) rows held twice");
        } finally {
            rest.delete(flow);
            rest.putConfig(SINK, sinkConfig);
            rest.awaitRunning(SINK, 1, WAIT);
        }
    }

    // ------------------------------------------------------------------------------------------ helpers

    /**
     * A Postgres flow of {@code tables} of a new schema (streamed, or copied by a copy task beside the apply task when
     * {@code copy}), running, every table ready; its config (mutable).
     */
    private static Map<String, String> pgFlow(String schema, String flow, String prefix, List<String> tables, boolean copy)
            throws Exception {
        String publication = schema + "_pub";
        List<String> statements = new ArrayList<>(List.of("DROP PUBLICATION IF EXISTS " + publication,
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE", "CREATE SCHEMA " + schema));
        List<String> qualified = new ArrayList<>();
        for (String t : tables) {
            statements.add("CREATE TABLE " + schema + "." + t + " (id int PRIMARY KEY, v int NOT NULL)");
            qualified.add(schema + "." + t);
        }
        statements.add("CREATE PUBLICATION " + publication + " FOR TABLE " + String.join(", ", qualified));
        pg.sql(statements.toArray(String[]::new));
        Map<String, String> source = SourceConfigs.pgPipeline(stack, fx.catalogUrl, PG_DATABASE, publication, prefix);
        source.put("slot.prefix", schema);
        if (copy) {
            source.put("table.sync.copy", "all");
            source.put("tasks.max", "2");
            source.put("table.retry.delay.ms", "1000");
            pg.sql(qualified.stream().map(t -> "INSERT INTO " + t + " SELECT g, g FROM generate_series(1, 20) g")
                    .toArray(String[]::new));
        }
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, copy ? 2 : 1, WAIT);
        for (String t : qualified) {
            pg.awaitTable(flow, t, row -> "ready".equals(row.get("phase")), WAIT);
        }
        return source;
    }

    /**
     * Replaces a running Postgres flow's config and waits until an apply task started with it streams (its start line
     * in the log; the status alone can still show the old task as running). Before that, it waits until the flow's
     * slot has confirmed every change written so far: a graceful restart of the apply task sends again the changes
     * Kafka acknowledged since its last position record (at most a second's worth, under new batch ids), which hold
     * their rows twice without {@code FINAL}. That replay is the same for every setting and is reported on its own
     * (reliability.md); this wait keeps the cases to what the edit itself does.
     */
    private static void replacePgConfig(String flow, Map<String, String> source) throws Exception {
        String slot = pg.catalogValue("SELECT source_slot FROM cdc_flow WHERE flow_name = ?", flow);
        String written;
        try (java.sql.Connection c = pg.source(); java.sql.Statement st = c.createStatement();
             java.sql.ResultSet rs = st.executeQuery("SELECT pg_current_wal_lsn()::text")) {
            rs.next();
            written = rs.getString(1);
        }
        PgChecks.awaitTrue(() -> {
            try (java.sql.Connection c = pg.source(); java.sql.PreparedStatement ps = c.prepareStatement(
                    "SELECT confirmed_flush_lsn >= ?::pg_lsn FROM pg_replication_slots WHERE slot_name = ?")) {
                ps.setString(1, written);
                ps.setString(2, slot);
                try (java.sql.ResultSet rs = ps.executeQuery()) {
                    return rs.next() && rs.getBoolean(1);
                }
            }
        }, WAIT, "slot " + slot + " of flow " + flow + " never confirmed " + written);
        long started = log.count("INFO", "flow " + flow + ": apply task streaming publication");
        rest.putConfig(flow, source);
        PgChecks.awaitTrue(() -> log.count("INFO", "flow " + flow + ": apply task streaming publication") > started, WAIT,
                "no apply task of " + flow + " started with the new config");
        rest.awaitRunning(flow, 1, WAIT);
    }

    /** Waits until ClickHouse equals Postgres, without holding it: the state before the edits. */
    private static void awaitLoaded(Map<String, String[]> tables, Duration timeout) throws Exception {
        pg.holdEqualFor(Duration.ZERO);
        try {
            pg.awaitEqual(tables, timeout);
        } finally {
            pg.holdEqualFor(HOLD);
        }
    }

    /** Waits until the table has a batch staged and not loaded. */
    private static void awaitStaged(String flow, String table) throws Exception {
        fx.checks.awaitState(flow, table, s -> s.syncedBatchId() > s.normalizedBatchId() && s.lastError() != null, WAIT);
        assertFalse(fx.checks.stages(flow, table).isEmpty(), "no batch of " + table + " staged");
    }

    /** The (id, version) pairs a ClickHouse table holds more than once without {@code FINAL}, with their values. */
    private static List<String> doubled(String chTable) {
        List<String> doubled = new ArrayList<>();
        fx.checks.clickhouse().queryAll("SELECT id, toString(_tablecdc_version) AS version, toString(groupArray(v)) AS vs,"
                + " count() AS n FROM " + chTable + " GROUP BY id, version HAVING n > 1 ORDER BY id").forEach(r ->
                doubled.add(r.getLong("id") + "@" + r.getString("version") + " x" + r.getLong("n") + " "
                        + r.getString("vs")));
        return doubled;
    }

    /** ClickHouse refuses every row of the table from now on: its batches stay staged. */
    private static void refuse(String chTable) throws Exception {
        fx.checks.execute("ALTER TABLE " + chTable + " ADD CONSTRAINT cfgedit_refuse CHECK id < 0");
    }

    private static void allow(String chTable) throws Exception {
        fx.checks.execute("ALTER TABLE " + chTable + " DROP CONSTRAINT cfgedit_refuse");
    }

    /** ClickHouse FINAL stays equal to {@code expected} for {@link #HOLD}: a late stale batch would fail it. */
    private static void holdEqual(TableId table, Map<Long, String> expected) throws InterruptedException {
        long until = System.nanoTime() + HOLD.toNanos();
        do {
            Thread.sleep(500);
            Map<Long, String> actual = new TreeMap<>();
            for (GenericRecord r : fx.checks.clickhouse().queryAll("SELECT id, val FROM " + fx.chTable(table)
                    + " FINAL ORDER BY id")) {
                actual.put(r.getLong("id"), r.getString("val"));
            }
            assertEquals(expected, actual, "ClickHouse FINAL of " + table.getTable() + " no longer equals BigQuery");
        } while (System.nanoTime() < until);
    }

    /** A new, empty table {@code (id INT64 REQUIRED, val STRING, ts DATETIME)} (dropped first if it exists). */
    private static TableId datetimeTable(String name) {
        TableId table = TableId.of(fx.project, fx.dataset, name);
        fx.bigQuery.delete(table);
        fx.bigQuery.create(TableInfo.of(table, StandardTableDefinition.of(Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("val", StandardSQLTypeName.STRING),
                Field.of("ts", StandardSQLTypeName.DATETIME)))));
        return table;
    }

    /** Rows of an {@code (id, val, ts DATETIME)} table, stamped with UTC wall clocks an hour ago and rising. */
    private static final class DatetimeRows {
        private static final DateTimeFormatter WALL = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSSSS");
        private final TableId table;
        private final LocalDateTime base = LocalDateTime.ofInstant(Instant.now().minus(1, ChronoUnit.HOURS), ZoneOffset.UTC)
                .truncatedTo(ChronoUnit.SECONDS);
        private final Map<Long, String> expected = new TreeMap<>();
        private long sequence;

        DatetimeRows(TableId table) {
            this.table = table;
        }

        /** Writes each id (a new row or a new version of one) with the next stamp and a new value. */
        void write(List<Long> ids) {
            List<Map<String, Object>> batch = new ArrayList<>();
            for (long id : ids) {
                sequence++;
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("id", id);
                row.put("val", "v" + sequence);
                row.put("ts", WALL.format(base.plus(sequence, ChronoUnit.MILLIS)));
                batch.add(row);
                expected.put(id, "v" + sequence);
            }
            CdcChecks.insert(fx.bigQuery, table, batch);
        }
    }
}
