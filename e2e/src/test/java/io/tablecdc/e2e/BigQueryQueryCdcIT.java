package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;
import com.fasterxml.jackson.databind.JsonNode;
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
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The BigQuery query CDC source deployed through the Connect REST API from its Hub archive, reading the BigQuery
 * emulator, with the stage sink loading its batches into ClickHouse, both sharing one catalog.
 */
class BigQueryQueryCdcIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String SOURCE = SourceConfigs.QUERY_CDC;
    private static final String DATASET = "bqcdc_it";
    /** Rows are stamped in the past, so that the safety lag never holds them back. */
    private static final Instant BASE = Instant.now().minus(Duration.ofHours(1)).truncatedTo(ChronoUnit.SECONDS)
            .plus(123_456, ChronoUnit.MICROS);

    private static BigQuery bigQuery;
    private static String project;
    private static String catalogUrl;
    private static Client clickhouse;
    private static CdcChecks checks;

    @BeforeAll
    static void start() throws Exception {
        bigQuery = stack.bigquery().client();
        project = stack.bigquery().projectId();
        if (bigQuery.getDataset(DATASET) == null) {
            bigQuery.create(DatasetInfo.of(DATASET));
        }
        catalogUrl = stack.postgres().createDatabase("bqcdc_catalog");
        checks = new CdcChecks(stack, "bqcdc_catalog");
        clickhouse = checks.clickhouse();
    }

    private static Map<String, String> sourceConfig(String tables, String topicPrefix) {
        Map<String, String> config = SourceConfigs.queryCdc(stack, catalogUrl, DATASET, tables, 4, topicPrefix);
        config.put("bigquery.page.size", "7");
        return config;
    }

    private static Map<String, String> sinkConfig(String topicsRegex) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "bqcdc-stage");
        config.put("topics.regex", topicsRegex);
        config.put("stage.local.dir", StackPaths.workDir("bqcdc-sink-local").toString());
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "2000");
        // the sources create their topics after the sink subscribed: see new topics within a second
        config.put("consumer.override.metadata.max.age.ms", "1000");
        return config;
    }

    private static TableId createTable(String name, Schema schema) {
        TableId id = TableId.of(project, DATASET, name);
        bigQuery.delete(id);
        bigQuery.create(TableInfo.of(id, StandardTableDefinition.of(schema)));
        return id;
    }

    private static Schema ordersSchema() {
        return Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("customer", StandardSQLTypeName.STRING),
                Field.of("amount", StandardSQLTypeName.NUMERIC),
                Field.of("tags", StandardSQLTypeName.STRING) .toBuilder().setMode(Field.Mode.REPEATED).build(),
                Field.of("updated_at", StandardSQLTypeName.TIMESTAMP));
    }

    private static void insert(TableId id, List<Map<String, Object>> rows) {
        CdcChecks.insert(bigQuery, id, rows);
    }

    private static Map<String, Object> order(long id, String customer, String amount, Instant updatedAt) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("id", id);
        row.put("customer", customer);
        row.put("amount", amount);
        row.put("tags", List.of("t" + id));
        row.put("updated_at", updatedAt.toString());
        return row;
    }

    private static String clickHouseTable(String table) {
        return (project + "." + DATASET + "." + table).replaceAll("[^A-Za-z0-9_]", "_");
    }

    @Test
    void rowsFlowIntoClickHouseAndOneTablesCursorRewindsAlone() throws Exception {
        TableId orders = createTable("orders", ordersSchema());
        TableId customers = createTable("customers", Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("name", StandardSQLTypeName.STRING),
                Field.of("modified_at", StandardSQLTypeName.DATETIME)));
        List<Map<String, Object>> rows = new ArrayList<>();
        for (int i = 1; i <= 20; i++) {
            rows.add(order(i, "c" + i, i + ".5", BASE.plus(i, ChronoUnit.MICROS)));
        }
        insert(orders, rows);
        insert(customers, List.of(Map.of("id", 1, "name", "ada", "modified_at", "2024-02-29T12:34:56.654321")));

        String flow = "bqcdc-flow";
        ConnectRestClient rest = stack.connect().rest();
        long t0 = System.nanoTime();
        rest.putConfig("bqcdc-sink", sinkConfig("bqcdc\\..*"));
        rest.putConfig(flow, sourceConfig("orders:updated_at:id, customers:modified_at:id", "bqcdc"));
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        rest.awaitRunning("bqcdc-sink", 1, Duration.ofSeconds(90));

        String ordersTable = clickHouseTable("orders") + "_current";
        awaitRows("SELECT count() AS n FROM " + ordersTable, r -> r.get(0).getLong("n") == 20, Duration.ofSeconds(120));
        System.out.printf("initial snapshot of 20 rows in ClickHouse %d ms after deploying%n",
                Duration.ofNanos(System.nanoTime() - t0).toMillis());
        List<GenericRecord> first = clickhouse.queryAll("SELECT id, customer, toString(amount) AS amount,"
                + " toString(updated_at) AS updated_at, arrayStringConcat(tags, ',') AS tags FROM " + ordersTable + " WHERE id = 7");
        assertEquals("c7", first.get(0).getString("customer"));
        assertEquals("7.5", first.get(0).getString("amount"));
        assertEquals("t7", first.get(0).getString("tags"));
        // microseconds kept end to end
        assertEquals(BASE.plus(7, ChronoUnit.MICROS).toString().replace('T', ' ').replace("Z", ""),
                first.get(0).getString("updated_at"));
        awaitRows("SELECT toString(modified_at) AS m FROM " + clickHouseTable("customers") + "_current",
                r -> r.size() == 1 && r.get(0).getString("m").equals("2024-02-29 12:34:56.654321"), Duration.ofSeconds(60));

        // changes: an update (its watermark moves) and a new row, both stamped below the upper bound of the windows
        // already read (now - 1 s) but above their largest watermark: a cursor at the upper bound would miss them
        long t1 = System.nanoTime();
        Instant later = BASE.plusSeconds(60);
        bigQuery.query(QueryJobConfiguration.newBuilder("UPDATE `" + project + "`.`" + DATASET + "`.`orders`"
                        + " SET customer = 'changed', updated_at = @at WHERE id = 3")
                .addNamedParameter("at", com.google.cloud.bigquery.QueryParameterValue.timestamp(micros(later))).build());
        insert(orders, List.of(order(21, "new", "0.001", later.plus(1, ChronoUnit.MICROS))));
        awaitRows("SELECT count() AS n, countIf(customer = 'changed') AS changed FROM " + ordersTable,
                r -> r.get(0).getLong("n") == 21 && r.get(0).getLong("changed") == 1, Duration.ofSeconds(60));
        System.out.printf("an update and an insert reached ClickHouse in %d ms%n", Duration.ofNanos(System.nanoTime() - t1).toMillis());

        String ordersName = project + "." + DATASET + ".orders";
        String customersName = project + "." + DATASET + ".customers";
        awaitCatalog(flow, ordersName, s -> s.cursor().equals(format(later.plus(1, ChronoUnit.MICROS))), Duration.ofSeconds(30));
        CdcChecks.State ordersBefore = state(flow, ordersName);
        CdcChecks.State customersBefore = state(flow, customersName);
        assertNull(ordersBefore.pausedReason());
        assertEquals(22, ordersBefore.syncedRows(), "20 snapshot rows, then the update and the insert");

        // rewind orders to just after row 10: rows 11..21 are read again; customers is untouched
        rest.stop(flow);
        rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText()), Duration.ofSeconds(60));
        String rewound = format(BASE.plus(10, ChronoUnit.MICROS));
        Map<String, Object> entry = new HashMap<>();
        entry.put("partition", Map.of("table", ordersName));
        entry.put("offset", Map.of("cursor", rewound, "batch", 1));
        rest.alterOffsets(flow, List.of(entry));
        JsonNode offsets = rest.offsets(flow);
        Map<String, JsonNode> byTable = new HashMap<>();
        offsets.path("offsets").forEach(o -> byTable.put(o.path("partition").path("table").asText(), o.path("offset")));
        assertEquals(rewound, byTable.get(ordersName).path("cursor").asText());
        assertEquals(format(Instant.parse("2024-02-29T12:34:56.654321Z")), byTable.get(customersName).path("cursor").asText());

        rest.resume(flow);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        CdcChecks.State ordersAfter = awaitCatalog(flow, ordersName, s -> s.syncedRows() >= ordersBefore.syncedRows() + 11, Duration.ofSeconds(60));
        assertEquals(format(later.plus(1, ChronoUnit.MICROS)), ordersAfter.cursor());
        assertTrue(ordersAfter.syncedBatchId() > ordersBefore.syncedBatchId(), "batch ids only grow, whatever the offset says");
        CdcChecks.State customersAfter = state(flow, customersName);
        assertEquals(customersBefore.syncedRows(), customersAfter.syncedRows(), "customers read again");
        assertEquals(customersBefore.cursor(), customersAfter.cursor());
        // re-reading is idempotent at the destination
        awaitRows("SELECT count() AS n, countIf(customer = 'changed') AS changed FROM " + ordersTable,
                r -> r.get(0).getLong("n") == 21 && r.get(0).getLong("changed") == 1, Duration.ofSeconds(30));

        // a malformed offset is refused with the reason
        rest.stop(flow);
        rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText()), Duration.ofSeconds(60));
        Map<String, Object> bad = new HashMap<>();
        bad.put("partition", Map.of("table", ordersName));
        bad.put("offset", Map.of("cursor", "yesterday", "batch", 1));
        ConnectRestClient.ConnectRestException refused = org.junit.jupiter.api.Assertions.assertThrows(
                ConnectRestClient.ConnectRestException.class, () -> rest.alterOffsets(flow, List.of(bad)));
        assertTrue(refused.getMessage().contains("cursor 'yesterday' is not an RFC 3339"), refused.getMessage());
        rest.delete(flow);
        rest.delete("bqcdc-sink");
    }

    @Test
    void newColumnsFlowThroughAndADroppedColumnRefreshesTheSchema() throws Exception {
        TableId events = createTable("events", Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("gone", StandardSQLTypeName.STRING),
                Field.of("ts", StandardSQLTypeName.TIMESTAMP)));
        insert(events, List.of(Map.of("id", 1, "gone", "x", "ts", BASE.toString())));
        String flow = "bqcdc-schema";
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("bqcdc-schema-sink", sinkConfig("bqcdcs\\..*"));
        rest.putConfig(flow, sourceConfig("events:ts:id", "bqcdcs"));
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        String table = clickHouseTable("events") + "_current";
        awaitRows("SELECT count() AS n FROM " + table, r -> r.get(0).getLong("n") == 1, Duration.ofSeconds(120));

        bigQuery.query(QueryJobConfiguration.of("ALTER TABLE `" + project + "`.`" + DATASET + "`.`events` DROP COLUMN gone"));
        bigQuery.query(QueryJobConfiguration.of("ALTER TABLE `" + project + "`.`" + DATASET + "`.`events` ADD COLUMN extra STRING"));
        insert(events, List.of(Map.of("id", 2, "extra", "new column", "ts", BASE.plusSeconds(1).toString())));
        awaitRows("SELECT extra FROM " + table + " WHERE id = 2",
                r -> r.size() == 1 && "new column".equals(r.get(0).getString("extra")), Duration.ofSeconds(60));
        assertEquals(List.of("RUNNING", "RUNNING"), rest.states(flow));
        rest.delete(flow);
        rest.delete("bqcdc-schema-sink");
    }

    /**
     * Two tables of one flow, the sink reading only one of them: the other one's batches are never normalized, so
     * it pauses at normalize.buffer.batches while its neighbour keeps flowing. Then a third table is dropped: its
     * task retries with backoff (the table may come back), the catalog names the table, and all tasks keep running.
     */
    @Test
    void oneTablesBackPressureAndFailureLeaveItsNeighbourAlone() throws Exception {
        TableId fast = createTable("fast", ordersSchema());
        TableId stuck = createTable("stuck", ordersSchema());
        TableId doomed = createTable("doomed", ordersSchema());
        insert(doomed, List.of(order(1, "a", "1", BASE.plus(1, ChronoUnit.MICROS))));
        insert(fast, List.of(order(1, "a", "1", BASE.plus(1, ChronoUnit.MICROS))));
        insert(stuck, List.of(order(1, "a", "1", BASE.plus(1, ChronoUnit.MICROS))));
        String flow = "bqcdc-independent";
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("bqcdc-independent-sink", sinkConfig("bqcdci\\..*\\.(fast|doomed)"));
        Map<String, String> config = sourceConfig("fast:updated_at:id, stuck:updated_at:id, doomed:updated_at:id", "bqcdci");
        // ids are reserved in the catalog from 1: the third unnormalized batch pauses the table
        config.put("normalize.buffer.batches", "3");
        rest.putConfig(flow, config);
        rest.awaitRunning(flow, 3, Duration.ofSeconds(90));

        String stuckName = project + "." + DATASET + ".stuck";
        String fastName = project + "." + DATASET + ".fast";
        // stuck: snapshot (batch 1), two more batches (2, 3), then paused: synced 3 - normalized 0 >= 3
        awaitCatalog(flow, stuckName, st -> st.syncedBatchId() == 1, Duration.ofSeconds(60));
        insert(stuck, List.of(order(2, "b", "2", BASE.plus(2, ChronoUnit.MICROS))));
        awaitCatalog(flow, stuckName, st -> st.syncedBatchId() == 2, Duration.ofSeconds(60));
        insert(stuck, List.of(order(3, "c", "3", BASE.plus(3, ChronoUnit.MICROS))));
        CdcChecks.State paused = awaitCatalog(flow, stuckName, st -> "normalize_buffer_full".equals(st.pausedReason()), Duration.ofSeconds(60));
        Thread.sleep(3_000);
        assertEquals(3, state(flow, stuckName).syncedBatchId(), "a paused table polls no further batch");
        assertEquals(0, paused.normalizedBatchId());

        // fast keeps flowing meanwhile
        for (int i = 2; i <= 4; i++) {
            insert(fast, List.of(order(i, "x" + i, "1", BASE.plus(i, ChronoUnit.MICROS))));
            final int n = i;
            awaitRows("SELECT count() AS n FROM " + clickHouseTable("fast") + "_current", r -> r.get(0).getLong("n") == n,
                    Duration.ofSeconds(60));
        }
        assertNull(state(flow, fastName).pausedReason());

        // another table disappears: its task retries with backoff and says why in the catalog; no task fails
        String doomedName = project + "." + DATASET + ".doomed";
        awaitCatalog(flow, doomedName, st -> st.syncedBatchId() == 1, Duration.ofSeconds(60));
        bigQuery.delete(doomed);
        CdcChecks.State missing = awaitCatalog(flow, doomedName,
                st -> st.lastError() != null && st.lastError().contains("table " + doomedName + " does not exist"),
                Duration.ofSeconds(60));
        assertTrue(missing.errorCount() >= 1, missing.toString());
        JsonNode status = rest.status(flow);
        List<String> states = new ArrayList<>();
        for (JsonNode task : status.path("tasks")) {
            states.add(task.path("state").asText());
        }
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), states, status.toString());
        assertEquals("normalize_buffer_full", state(flow, stuckName).pausedReason(), "the paused table stays paused");
        insert(fast, List.of(order(5, "after", "1", BASE.plus(5, ChronoUnit.MICROS))));
        awaitRows("SELECT count() AS n FROM " + clickHouseTable("fast") + "_current", r -> r.get(0).getLong("n") == 5,
                Duration.ofSeconds(60));
        rest.delete(flow);
        rest.delete("bqcdc-independent-sink");
    }

    /** One row with every BigQuery type, through the source's mapping and the sink, into ClickHouse. */
    @Test
    void everyTypeArrivesInClickHouse() throws Exception {
        TableId types = createTable("types", CdcChecks.allBigQueryTypes(Field.Mode.NULLABLE));
        Map<String, Object> row = new HashMap<>();
        row.put("id", 1);
        row.put("c_numeric", "123456789.123456789");
        // within the emulator's BIGNUMERIC, DECIMAL(38, 18) (docs/test-stack-bigquery.md)
        row.put("c_bignumeric", "12345678901234567890.123456789012345678");
        row.put("c_float", 1.5);
        row.put("c_bool", true);
        row.put("c_string", "héllo ✓");
        row.put("c_bytes", java.util.Base64.getEncoder().encodeToString(new byte[] {0, 1, 2, (byte) 255}));
        row.put("c_date", "2024-02-29");
        row.put("c_datetime", "2024-02-29T12:34:56.123456");
        row.put("c_time", "12:34:56.654321");
        row.put("c_json", "{\"a\":[1,2]}");
        row.put("c_array", List.of("p", "q"));
        row.put("c_struct", Map.of("x", 7, "y", "why"));
        row.put("c_geography", "POINT(1 2)");
        row.put("updated_at", BASE.plus(1, ChronoUnit.MICROS).toString());
        insert(types, List.of(row));

        String flow = "bqcdc-types";
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("bqcdc-types-sink", sinkConfig("bqcdct\\..*"));
        rest.putConfig(flow, sourceConfig("types:updated_at:id", "bqcdct"));
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        String table = clickHouseTable("types") + "_current";
        List<GenericRecord> rows = awaitRows("SELECT toString(c_numeric) AS n, toString(c_bignumeric) AS bn, c_float, c_bool,"
                + " c_string, hex(c_bytes) AS b, toString(c_date) AS d, toString(c_datetime) AS dt, toString(c_time) AS t,"
                + " c_json, arrayStringConcat(c_array, ',') AS arr, c_struct, c_geography, toString(updated_at) AS u,"
                + " toTypeName(c_bignumeric) AS bn_type FROM " + table, r -> r.size() == 1, Duration.ofSeconds(120));
        GenericRecord r = rows.get(0);
        Map<String, String> got = new LinkedHashMap<>();
        for (String column : List.of("n", "bn", "c_float", "c_bool", "c_string", "b", "d", "dt", "t", "c_json", "arr",
                "c_struct", "c_geography", "u", "bn_type")) {
            got.put(column, r.getString(column));
        }
        System.out.println("every type in ClickHouse: " + got);
        assertEquals("123456789.123456789", got.get("n"));
        assertEquals("12345678901234567890.123456789012345678", got.get("bn"));
        assertEquals("Nullable(Decimal(76, 38))", got.get("bn_type"));
        assertEquals("1.5", got.get("c_float"));
        assertTrue(got.get("c_bool").equals("true") || got.get("c_bool").equals("1"), got.get("c_bool"));
        assertEquals("héllo ✓", got.get("c_string"));
        assertEquals("000102FF", got.get("b"));
        assertEquals("2024-02-29", got.get("d"));
        assertEquals("2024-02-29 12:34:56.123456", got.get("dt"));
        // TIME is io.tablecdc.MicroTime: the sink keeps it as microseconds since midnight
        assertEquals(Long.toString(((12 * 60 + 34) * 60 + 56) * 1_000_000L + 654_321L), got.get("t"));
        assertEquals("{\"a\":[1,2]}", got.get("c_json").replace(" ", ""));
        assertEquals("p,q", got.get("arr"));
        assertEquals("{\"x\":7,\"y\":\"why\"}", got.get("c_struct"));
        assertEquals("POINT(1 2)", got.get("c_geography"));
        assertEquals(BASE.plus(1, ChronoUnit.MICROS).toString().replace('T', ' ').replace("Z", ""), got.get("u"));
        rest.delete(flow);
        rest.delete("bqcdc-types-sink");
    }

    /**
     * FLOAT64 NaN, Infinity and -Infinity, also inside an ARRAY, arrive exactly: the stack's JsonConverter alone would
     * read them back as 0; the source names them in tablecdc.nonfinite headers and the sink puts them back.
     */
    @Test
    void nonFiniteFloat64ValuesArriveExactly() throws Exception {
        createTable("floats", Schema.of(Field.of("id", StandardSQLTypeName.INT64), Field.of("x", StandardSQLTypeName.FLOAT64),
                Field.newBuilder("xs", StandardSQLTypeName.FLOAT64).setMode(Field.Mode.REPEATED).build(),
                Field.of("updated_at", StandardSQLTypeName.TIMESTAMP)));
        String at = "TIMESTAMP '" + java.time.format.DateTimeFormatter.ofPattern("uuuu-MM-dd HH:mm:ss.SSSSSS'+00'")
                .withZone(java.time.ZoneOffset.UTC).format(BASE.plus(1, ChronoUnit.MICROS)) + "'";
        bigQuery.query(QueryJobConfiguration.of("INSERT INTO `" + project + "`.`" + DATASET + "`.`floats` VALUES"
                + " (1, CAST('NaN' AS FLOAT64), [CAST('inf' AS FLOAT64), 2.5], " + at + "),"
                + " (2, CAST('-inf' AS FLOAT64), [CAST('-inf' AS FLOAT64), CAST('NaN' AS FLOAT64)], " + at + "),"
                + " (3, 1.5, [], " + at + ")"));

        String flow = "bqcdc-floats";
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("bqcdc-floats-sink", sinkConfig("bqcdcf\\..*"));
        rest.putConfig(flow, sourceConfig("floats:updated_at:id", "bqcdcf"));
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        String text = "multiIf(isNaN(%s), 'NaN', isInfinite(%s) AND %s > 0, 'Infinity', isInfinite(%s), '-Infinity', toString(%s))";
        List<GenericRecord> rows = awaitRows("SELECT concat(toString(id), '|', " + text.replace("%s", "x") + ", '|',"
                + " arrayStringConcat(arrayMap(v -> " + text.replace("%s", "v") + ", xs), '~')) AS r FROM "
                + clickHouseTable("floats") + "_current ORDER BY id", r -> r.size() == 3, Duration.ofSeconds(120));
        assertEquals(List.of("1|NaN|Infinity~2.5", "2|-Infinity|-Infinity~NaN", "3|1.5|"),
                rows.stream().map(r -> r.getString("r")).toList());
        rest.delete(flow);
        rest.delete("bqcdc-floats-sink");
    }

    /** initial.load=skip: rows already in the table are not read, rows after them are. */
    @Test
    void stoppingAndResumingTheSourceReadsNothingTwiceThatChangesTheResultAndMissesNothing() throws Exception {
        List<String> names = List.of("restart_a", "restart_b", "restart_c");
        Instant before = Instant.now().minusSeconds(30).truncatedTo(ChronoUnit.MICROS);
        for (String name : names) {
            insert(createTable(name, ordersSchema()), List.of(order(1, "first", "1", before)));
        }
        String flow = "bqcdc-restart";
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("bqcdc-restart-sink", sinkConfig("bqcdcr\\..*"));
        rest.putConfig(flow, sourceConfig("restart_a:updated_at:id, restart_b:updated_at:id, restart_c:updated_at:id", "bqcdcr"));
        rest.awaitRunning(flow, 3, Duration.ofSeconds(90));
        for (String name : names) {
            awaitRows("SELECT id, customer FROM " + clickHouseTable(name) + "_current", r -> r.size() == 1, Duration.ofSeconds(120));
        }

        rest.stop(flow);
        rest.awaitStatus(flow, st -> "STOPPED".equals(st.path("connector").path("state").asText()), Duration.ofSeconds(60));
        // while the source is stopped: an update and an insert in every table
        for (String name : names) {
            bigQuery.query(com.google.cloud.bigquery.QueryJobConfiguration.newBuilder("UPDATE `" + project + "." + DATASET + "." + name
                    + "` SET customer = 'second', updated_at = CURRENT_TIMESTAMP() WHERE id = 1").build());
            insert(TableId.of(project, DATASET, name), List.of(order(2, "new", "2", Instant.now().truncatedTo(ChronoUnit.MICROS))));
        }
        rest.resume(flow);
        rest.awaitRunning(flow, 3, Duration.ofSeconds(90));
        for (String name : names) {
            List<GenericRecord> rows = awaitRows("SELECT id, customer FROM " + clickHouseTable(name) + "_current ORDER BY id",
                    r -> r.size() == 2 && "second".equals(r.get(0).getString("customer")), Duration.ofSeconds(120));
            assertEquals("new", rows.get(1).getString("customer"), name);
            // FINAL collapses what was read twice; what remains must be exactly the source's rows
            assertEquals(2, clickhouse.queryAll("SELECT id FROM " + clickHouseTable(name) + " FINAL WHERE _tablecdc_is_deleted = 0").size(), name);
        }
        rest.delete(flow);
        rest.delete("bqcdc-restart-sink");
    }

    @Test
    void skipStartsFromTheLargestWatermark() throws Exception {
        TableId table = createTable("skipped", ordersSchema());
        insert(table, List.of(order(1, "old", "1", BASE.plus(1, ChronoUnit.MICROS))));
        String flow = "bqcdc-skip";
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("bqcdc-skip-sink", sinkConfig("bqcdck\\..*"));
        Map<String, String> config = sourceConfig("skipped:updated_at:id", "bqcdck");
        config.put("initial.load", "skip");
        rest.putConfig(flow, config);
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        String name = project + "." + DATASET + ".skipped";
        awaitCatalog(flow, name, st -> st.cursor().equals(format(BASE.plus(1, ChronoUnit.MICROS))), Duration.ofSeconds(60));
        insert(table, List.of(order(2, "new", "2", BASE.plus(2, ChronoUnit.MICROS))));
        List<GenericRecord> rows = awaitRows("SELECT id, customer FROM " + clickHouseTable("skipped") + "_current",
                r -> r.size() == 1, Duration.ofSeconds(120));
        assertEquals("new", rows.get(0).getString("customer"));
        Thread.sleep(3_000);
        assertEquals(1, clickhouse.queryAll("SELECT id FROM " + clickHouseTable("skipped") + "_current").size());
        rest.delete(flow);
        rest.delete("bqcdc-skip-sink");
    }

    @Test
    void validateNamesTheFieldOfEveryError() throws Exception {
        createTable("valid", Schema.of(Field.of("id", StandardSQLTypeName.INT64), Field.of("note", StandardSQLTypeName.STRING),
                Field.of("ts", StandardSQLTypeName.TIMESTAMP)));
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> config = sourceConfig("valid:ts:id, valid2:ts", "bqcdcv");
        config.put("name", "bqcdc-validate");
        config.put("tasks.max", "1");
        List<String> errors = ConnectRestClient.validationErrors(rest.validate(SOURCE, config));
        assertTrue(errors.contains("tasks.max: tasks.max is 1 but 2 tables are configured; each table needs its own task:"
                + " set tasks.max to at least 2"), errors.toString());
        assertTrue(errors.contains("tables: table " + project + "." + DATASET + ".valid2 does not exist"), errors.toString());

        config.put("tasks.max", "3");
        config.put("tables", "valid:note, valid:missing, valid:ts:nokey");
        errors = ConnectRestClient.validationErrors(rest.validate(SOURCE, config));
        assertTrue(errors.stream().anyMatch(e -> e.startsWith("tables:") && e.contains("listed twice")), errors.toString());

        config.put("tables", "valid:note:id");
        errors = ConnectRestClient.validationErrors(rest.validate(SOURCE, config));
        assertEquals(List.of("tables: table " + project + "." + DATASET + ".valid: watermark column note is STRING;"
                + " it must be TIMESTAMP, DATETIME or DATE"), errors);
        config.put("tables", "valid:missing:id");
        errors = ConnectRestClient.validationErrors(rest.validate(SOURCE, config));
        assertEquals(List.of("tables: table " + project + "." + DATASET + ".valid has no watermark column missing"), errors);
        config.put("tables", "valid:ts:nokey");
        errors = ConnectRestClient.validationErrors(rest.validate(SOURCE, config));
        assertEquals(List.of("tables: table " + project + "." + DATASET + ".valid has no key column nokey"), errors);
        config.put("tables", "valid:ts:id");
        config.put("replication.mode", "CHANGES");
        errors = ConnectRestClient.validationErrors(rest.validate(SOURCE, config));
        assertEquals(1, errors.size(), errors.toString());
        assertTrue(errors.get(0).startsWith("safety.lag.ms:"), errors.toString());
    }

    // ------------------------------------------------------------------------------------------ helpers

    private static long micros(Instant instant) {
        return ChronoUnit.MICROS.between(Instant.EPOCH, instant);
    }

    private static String format(Instant instant) {
        return java.time.format.DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSSSSSSSS'Z'")
                .withZone(java.time.ZoneOffset.UTC).format(instant);
    }

    private static CdcChecks.State state(String flow, String table) throws Exception {
        return checks.state(flow, table);
    }

    private static CdcChecks.State awaitCatalog(String flow, String table, Predicate<CdcChecks.State> done, Duration timeout)
            throws Exception {
        return checks.awaitState(flow, table, done, timeout);
    }

    private static List<GenericRecord> awaitRows(String sql, Predicate<List<GenericRecord>> done, Duration timeout)
            throws InterruptedException {
        return checks.awaitRows(sql, rows -> !rows.isEmpty() && done.test(rows), timeout);
    }
}
