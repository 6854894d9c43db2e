package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.BigQueryException;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.FieldList;
import com.google.cloud.bigquery.FieldValue;
import com.google.cloud.bigquery.FieldValueList;
import com.google.cloud.bigquery.InsertAllRequest;
import com.google.cloud.bigquery.InsertAllResponse;
import com.google.cloud.bigquery.Job;
import com.google.cloud.bigquery.JobInfo;
import com.google.cloud.bigquery.JobStatistics;
import com.google.cloud.bigquery.LegacySQLTypeName;
import com.google.cloud.bigquery.QueryJobConfiguration;
import com.google.cloud.bigquery.QueryParameterValue;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.Table;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;
import com.google.cloud.bigquery.TableResult;
import io.tablecdc.e2e.bigquery.LocalBigQuery;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Checks, against the real emulator (or {@code TABLECDC_BIGQUERY_ENDPOINT}), the BigQuery features query CDC relies on.
 * What the emulator cannot do is listed in docs/test-stack-bigquery.md and pinned by {@link #knownGapsOfTheEmulator}.
 */
class BigQuerySmokeTest {

    /** The window edges of the CDC query: (lower, upper]. Microsecond neighbours test the precision. */
    private static final Instant BASE = Instant.parse("2024-03-01T10:00:00.123456Z");
    private static final Instant LOWER = BASE.plus(1, ChronoUnit.MICROS);
    private static final Instant UPPER = BASE.plus(3, ChronoUnit.MICROS);

    private static LocalBigQuery bigQuery;
    private static BigQuery client;
    private static String dataset;

    @BeforeAll
    static void start() throws Exception {
        Path target = Files.createDirectories(Path.of("target"));
        long t0 = System.nanoTime();
        bigQuery = LocalBigQuery.start(Files.createTempDirectory(target, "bigquery-smoke-"));
        System.out.printf("BigQuery at %s (project %s) ready in %d ms%n", bigQuery.endpoint(), bigQuery.projectId(),
                Duration.ofNanos(System.nanoTime() - t0).toMillis());
        client = bigQuery.client();
        dataset = "smoke_" + Long.toString(System.currentTimeMillis(), 36);
        client.create(DatasetInfo.newBuilder(bigQuery.projectId(), dataset).build());
    }

    @AfterAll
    static void stop() {
        if (bigQuery != null) {
            bigQuery.pid().ifPresent(pid -> System.out.println("emulator RSS at the end: " + rssKiB(pid) + " KiB"));
            bigQuery.close();
            bigQuery.pid().ifPresent(pid -> assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false),
                    "the emulator process must be gone after close()"));
        }
    }

    private TableId createTable(String name, Schema schema) {
        TableId id = TableId.of(bigQuery.projectId(), dataset, name);
        client.create(TableInfo.of(id, StandardTableDefinition.of(schema)));
        return id;
    }

    private static String fq(TableId id) {
        return "`" + id.getProject() + "." + id.getDataset() + "." + id.getTable() + "`";
    }

    private static TableResult query(String sql) throws InterruptedException {
        return client.query(QueryJobConfiguration.of(sql));
    }

    @Test
    void schemaOfEveryTypeReadsBackWithTypesAndModes() {
        TableId id = createTable("schema_types", CdcChecks.allBigQueryTypes(Field.Mode.REQUIRED));
        Table table = client.getTable(id);
        assertNotNull(table, "tables.get");
        FieldList fields = table.getDefinition().getSchema().getFields();
        Map<String, String> actual = new LinkedHashMap<>();
        for (Field f : fields) {
            actual.put(f.getName(), f.getType().getStandardType() + " " + f.getMode());
        }
        Map<String, String> expected = new LinkedHashMap<>();
        expected.put("id", "INT64 REQUIRED");
        expected.put("c_numeric", "NUMERIC NULLABLE");
        expected.put("c_bignumeric", "BIGNUMERIC NULLABLE");
        expected.put("c_float", "FLOAT64 NULLABLE");
        expected.put("c_bool", "BOOL NULLABLE");
        expected.put("c_string", "STRING NULLABLE");
        expected.put("c_bytes", "BYTES NULLABLE");
        expected.put("c_date", "DATE NULLABLE");
        expected.put("c_datetime", "DATETIME NULLABLE");
        expected.put("c_time", "TIME NULLABLE");
        expected.put("c_json", "JSON NULLABLE");
        expected.put("c_array", "STRING REPEATED");
        expected.put("c_struct", "STRUCT NULLABLE");
        expected.put("c_geography", "GEOGRAPHY NULLABLE");
        expected.put("updated_at", "TIMESTAMP REQUIRED");
        assertEquals(expected, actual);
        FieldList sub = fields.get("c_struct").getSubFields();
        assertEquals(2, sub.size());
        assertEquals("x", sub.get(0).getName());
        assertEquals(LegacySQLTypeName.INTEGER, sub.get(0).getType());
        assertEquals("y", sub.get(1).getName());
        assertEquals(LegacySQLTypeName.STRING, sub.get(1).getType());
        assertNull(client.getTable(TableId.of(bigQuery.projectId(), dataset, "no_such_table")), "missing table");
    }

    @Test
    void rowsOfEveryTypeRoundTripThroughInsertAllAndDml() throws Exception {
        TableId id = createTable("value_types", CdcChecks.allBigQueryTypes(Field.Mode.REQUIRED));
        Map<String, Object> row = new HashMap<>();
        row.put("id", 1);
        row.put("c_numeric", "123456789.123456789");
        // 20 + 18 digits: the emulator stores BIGNUMERIC as DECIMAL(38, 18), not BigQuery's 76.76 (see the notes)
        row.put("c_bignumeric", "12345678901234567890.123456789012345678");
        row.put("c_float", 1.5);
        row.put("c_bool", true);
        row.put("c_string", "héllo ✓");
        row.put("c_bytes", Base64.getEncoder().encodeToString(new byte[] {0, 1, 2, (byte) 255}));
        row.put("c_date", "2024-02-29");
        row.put("c_datetime", "2024-02-29T12:34:56.123456");
        row.put("c_time", "12:34:56.654321");
        row.put("c_json", "{\"a\":[1,2]}");
        row.put("c_array", List.of("p", "q"));
        row.put("c_struct", Map.of("x", 7, "y", "why"));
        row.put("c_geography", "POINT(1 2)");
        row.put("updated_at", "2024-03-01T10:00:00.000001Z");
        InsertAllResponse response = client.insertAll(InsertAllRequest.newBuilder(id).addRow("row-1", row).build());
        assertFalse(response.hasErrors(), () -> "insertAll errors: " + response.getInsertErrors());

        Job dml = client.create(JobInfo.of(QueryJobConfiguration.of("INSERT INTO " + fq(id)
                + " (id, c_numeric, c_bignumeric, c_float, c_bool, c_string, c_bytes, c_date, c_datetime, c_time,"
                + " c_json, c_array, c_struct, c_geography, updated_at) VALUES (2, NUMERIC '-0.000000001',"
                + " BIGNUMERIC '-2.5', -0.25, false, '', FROM_BASE64('AP8='), DATE '1970-01-01',"
                + " DATETIME '1999-12-31 23:59:59.999999', TIME '00:00:00.000001', JSON '{\"b\":null}', ['r'],"
                + " STRUCT(8 AS x, 'zed' AS y), ST_GEOGPOINT(3, 4), TIMESTAMP '2024-03-01 10:00:00.999999+00')")))
                .waitFor();
        assertNull(dml.getStatus().getError(), () -> "DML INSERT: " + dml.getStatus());

        TableResult result = query("SELECT * FROM " + fq(id) + " ORDER BY id");
        List<FieldValueList> rows = new ArrayList<>();
        result.iterateAll().forEach(rows::add);
        assertEquals(2, rows.size());

        FieldValueList r1 = rows.get(0);
        assertEquals(1, r1.get("id").getLongValue());
        assertEquals(new BigDecimal("123456789.123456789"), r1.get("c_numeric").getNumericValue());
        assertEquals(new BigDecimal("12345678901234567890.123456789012345678"), r1.get("c_bignumeric").getNumericValue());
        assertEquals(1.5, r1.get("c_float").getDoubleValue());
        assertTrue(r1.get("c_bool").getBooleanValue());
        assertEquals("héllo ✓", r1.get("c_string").getStringValue());
        assertEquals(List.of((byte) 0, (byte) 1, (byte) 2, (byte) 255), bytes(r1.get("c_bytes").getBytesValue()));
        assertEquals("2024-02-29", r1.get("c_date").getStringValue());
        assertEquals("2024-02-29T12:34:56.123456", r1.get("c_datetime").getStringValue());
        assertEquals("12:34:56.654321", r1.get("c_time").getStringValue());
        assertEquals("{\"a\":[1,2]}", r1.get("c_json").getStringValue().replace(" ", ""));
        assertEquals(List.of("p", "q"), r1.get("c_array").getRepeatedValue().stream().map(FieldValue::getStringValue).toList());
        FieldValueList struct = r1.get("c_struct").getRecordValue();
        assertEquals(7, struct.get(0).getLongValue());
        assertEquals("why", struct.get(1).getStringValue());
        assertEquals("POINT(1 2)", r1.get("c_geography").getStringValue());
        assertEquals(Instant.parse("2024-03-01T10:00:00.000001Z"), r1.get("updated_at").getTimestampInstant());

        FieldValueList r2 = rows.get(1);
        assertEquals(2, r2.get("id").getLongValue());
        assertEquals(new BigDecimal("-0.000000001"), r2.get("c_numeric").getNumericValue());
        assertEquals(0, new BigDecimal("-2.5").compareTo(r2.get("c_bignumeric").getNumericValue()));
        assertEquals(-0.25, r2.get("c_float").getDoubleValue());
        assertFalse(r2.get("c_bool").getBooleanValue());
        assertEquals("", r2.get("c_string").getStringValue());
        assertEquals(List.of((byte) 0, (byte) 255), bytes(r2.get("c_bytes").getBytesValue()));
        assertEquals("1970-01-01", r2.get("c_date").getStringValue());
        assertEquals("1999-12-31T23:59:59.999999", r2.get("c_datetime").getStringValue());
        assertEquals("00:00:00.000001", r2.get("c_time").getStringValue());
        assertEquals(List.of("r"), r2.get("c_array").getRepeatedValue().stream().map(FieldValue::getStringValue).toList());
        assertEquals("zed", r2.get("c_struct").getRecordValue().get(1).getStringValue());
        assertEquals("POINT(3 4)", r2.get("c_geography").getStringValue());
        assertEquals(Instant.parse("2024-03-01T10:00:00.999999Z"), r2.get("updated_at").getTimestampInstant());
    }

    @Test
    void windowQueryWithNamedTimestampParametersReturnsExactlyTheWindow() throws Exception {
        Schema schema = Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("payload", StandardSQLTypeName.STRING),
                Field.newBuilder("updated_at", StandardSQLTypeName.TIMESTAMP).setMode(Field.Mode.REQUIRED).build());
        TableId id = createTable("window", schema);
        // ids 0..5 at BASE + 0..5 µs; the window (BASE+1µs, BASE+3µs] holds ids 2 and 3 only
        InsertAllRequest.Builder insert = InsertAllRequest.newBuilder(id);
        for (int i = 0; i <= 5; i++) {
            insert.addRow("w" + i, Map.of("id", i, "payload", "p" + i,
                    "updated_at", BASE.plus(i, ChronoUnit.MICROS).toString()));
        }
        InsertAllResponse response = client.insertAll(insert.build());
        assertFalse(response.hasErrors(), () -> "insertAll errors: " + response.getInsertErrors());

        Instant before = Instant.now();
        QueryJobConfiguration config = QueryJobConfiguration.newBuilder(
                        "SELECT id, payload, updated_at, CURRENT_TIMESTAMP() AS source_now FROM " + fq(id)
                                + " WHERE TIMESTAMP(updated_at) > @lower AND TIMESTAMP(updated_at) <= @upper")
                .addNamedParameter("lower", QueryParameterValue.timestamp(micros(LOWER)))
                .addNamedParameter("upper", QueryParameterValue.timestamp(micros(UPPER)))
                .build();
        TableResult result = client.query(config);
        Instant after = Instant.now();

        Map<Long, Instant> seen = new HashMap<>();
        Instant sourceNow = null;
        for (FieldValueList row : result.iterateAll()) {
            seen.put(row.get("id").getLongValue(), row.get("updated_at").getTimestampInstant());
            Instant now = row.get("source_now").getTimestampInstant();
            if (sourceNow != null) {
                assertEquals(sourceNow, now, "CURRENT_TIMESTAMP() is one value per query");
            }
            sourceNow = now;
        }
        assertEquals(Map.of(
                2L, BASE.plus(2, ChronoUnit.MICROS),
                3L, BASE.plus(3, ChronoUnit.MICROS)), seen);
        assertNotNull(sourceNow);
        // same machine: the emulator's clock is ours; allow for the clocks' resolution
        assertTrue(!sourceNow.isBefore(before.minusSeconds(1)) && !sourceNow.isAfter(after.plusSeconds(1)),
                () -> "CURRENT_TIMESTAMP() outside [" + before + ", " + after + "]");

        // the same parameters given as RFC 3339 strings with microseconds
        TableResult asStrings = client.query(QueryJobConfiguration.newBuilder(
                        "SELECT id FROM " + fq(id) + " WHERE TIMESTAMP(updated_at) > @lower AND TIMESTAMP(updated_at) <= @upper")
                .addNamedParameter("lower", QueryParameterValue.timestamp("2024-03-01 10:00:00.123457+00:00"))
                .addNamedParameter("upper", QueryParameterValue.timestamp("2024-03-01 10:00:00.123459+00:00"))
                .build());
        List<Long> ids = new ArrayList<>();
        asStrings.iterateAll().forEach(r -> ids.add(r.get("id").getLongValue()));
        ids.sort(null);
        assertEquals(List.of(2L, 3L), ids);

        // a standalone CURRENT_TIMESTAMP() keeps microseconds (BigQuery's precision)
        TableResult now = query("SELECT CURRENT_TIMESTAMP() AS now, MAX(updated_at) AS max_ts FROM " + fq(id));
        FieldValueList nowRow = now.getValues().iterator().next();
        assertEquals(BASE.plus(5, ChronoUnit.MICROS), nowRow.get("max_ts").getTimestampInstant());
        assertEquals(StandardSQLTypeName.TIMESTAMP, now.getSchema().getFields().get("now").getType().getStandardType());
    }

    @Test
    void resultsPageWithASmallPageSize() throws Exception {
        TableId id = createTable("paging", Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.newBuilder("updated_at", StandardSQLTypeName.TIMESTAMP).setMode(Field.Mode.REQUIRED).build()));
        Job fill = client.create(JobInfo.of(QueryJobConfiguration.of("INSERT INTO " + fq(id) + " (id, updated_at)"
                + " SELECT x, TIMESTAMP_ADD(TIMESTAMP '2024-01-01 00:00:00+00', INTERVAL x SECOND)"
                + " FROM UNNEST(GENERATE_ARRAY(1, 25)) AS x"))).waitFor();
        assertNull(fill.getStatus().getError(), () -> "INSERT ... SELECT: " + fill.getStatus());

        // jobs.query with maxResults = 10: first page from jobs.query, the rest through the client's page fetcher
        TableResult first = client.query(QueryJobConfiguration.newBuilder("SELECT id FROM " + fq(id) + " ORDER BY id")
                .setMaxResults(10L).build());
        assertEquals(25, first.getTotalRows());
        assertEquals(10, count(first.getValues()));
        assertTrue(first.hasNextPage(), "a second page");
        List<Long> ids = new ArrayList<>();
        int pages = 0;
        for (TableResult page = first; page != null; page = page.hasNextPage() ? page.getNextPage() : null) {
            pages++;
            page.getValues().forEach(r -> ids.add(r.get("id").getLongValue()));
            assertTrue(pages <= 25, "paging does not end");
        }
        assertTrue(pages >= 2, "pages: " + pages);
        assertEquals(range(1, 25), ids);

        // jobs.insert + getQueryResults with pageSize 7, parameters included
        Job job = client.create(JobInfo.of(QueryJobConfiguration.newBuilder(
                        "SELECT id FROM " + fq(id) + " WHERE TIMESTAMP(updated_at) > @lower ORDER BY id")
                .addNamedParameter("lower", QueryParameterValue.timestamp("2024-01-01 00:00:05+00:00"))
                .build())).waitFor();
        assertNull(job.getStatus().getError());
        TableResult paged = job.getQueryResults(BigQuery.QueryResultsOption.pageSize(7));
        assertEquals(20, paged.getTotalRows());
        assertEquals(7, count(paged.getValues()));
        List<Long> all = new ArrayList<>();
        paged.iterateAll().forEach(r -> all.add(r.get("id").getLongValue()));
        assertEquals(range(6, 25), all);

        // The client (2.59) sends no maxResults for the pages after the first, so the emulator returns all the rest
        // at once. Asking for each page with pageToken + pageSize keeps every page small.
        TableId results = ((QueryJobConfiguration) job.getConfiguration()).getDestinationTable();
        assertNotNull(results, "the query job's destination (anonymous results) table");
        List<Integer> sizes = new ArrayList<>();
        List<Long> viaTokens = new ArrayList<>();
        String token = null;
        do {
            TableResult page = token == null
                    ? client.listTableData(results, BigQuery.TableDataListOption.pageSize(7))
                    : client.listTableData(results, BigQuery.TableDataListOption.pageSize(7),
                            BigQuery.TableDataListOption.pageToken(token));
            int before = viaTokens.size();
            page.getValues().forEach(r -> viaTokens.add(r.get(0).getLongValue()));
            sizes.add(viaTokens.size() - before);
            token = page.getNextPageToken();
            assertTrue(sizes.size() <= 20, "paging does not end");
        } while (token != null);
        assertEquals(List.of(7, 7, 6), sizes);
        assertEquals(range(6, 25), viaTokens);
    }

    @Test
    void droppedColumnFailsWithUnrecognizedName() throws Exception {
        TableId id = createTable("dropped", Schema.of(
                Field.of("id", StandardSQLTypeName.INT64), Field.of("gone", StandardSQLTypeName.STRING)));
        query("ALTER TABLE " + fq(id) + " DROP COLUMN gone");
        BigQueryException e = assertThrows(BigQueryException.class, () -> query("SELECT id, gone FROM " + fq(id)));
        assertTrue(e.getMessage().contains("Unrecognized name"), e.getMessage());
        assertEquals(List.of("id"), client.getTable(id).getDefinition().getSchema().getFields().stream().map(Field::getName).toList());
    }

    /**
     * Pins the gaps written down in docs/test-stack-bigquery.md: if one of these starts to work after an upgrade,
     * this fails, and the notes (and the tests that skip the feature) should be updated.
     */
    @Test
    void knownGapsOfTheEmulator() throws Exception {
        if (System.getenv(LocalBigQuery.ENV_ENDPOINT) != null) {
            return; // describes the local emulator only
        }
        TableId id = createTable("gaps", Schema.of(
                Field.of("id", StandardSQLTypeName.INT64),
                Field.newBuilder("updated_at", StandardSQLTypeName.TIMESTAMP).setMode(Field.Mode.REQUIRED).build()));
        Table created = client.getTable(id);
        client.insertAll(InsertAllRequest.newBuilder(id)
                .addRow(Map.of("id", 1, "updated_at", "2024-01-01T00:00:00Z")).build());

        // APPENDS / CHANGES table functions: not parsed
        assertThrows(BigQueryException.class,
                () -> query("SELECT id, _CHANGE_TYPE, _CHANGE_TIMESTAMP FROM APPENDS(TABLE " + fq(id) + ", NULL, NULL)"));
        assertThrows(BigQueryException.class, () -> query("SELECT id, _CHANGE_TYPE, _CHANGE_TIMESTAMP FROM CHANGES(TABLE "
                + fq(id) + ", NULL, TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 10 MINUTE))"));

        // maximumBytesBilled is accepted and ignored (real BigQuery fails this query: it bills at least 10 MB)
        TableResult capped = client.query(QueryJobConfiguration.newBuilder("SELECT id FROM " + fq(id))
                .setMaximumBytesBilled(1L).build());
        assertEquals(1, capped.getTotalRows());

        // BIGNUMERIC is DECIMAL(38, 18): 20 integer digits fit, the 19th fractional digit is rounded away
        TableResult big = query("SELECT BIGNUMERIC '12345678901234567890.12345678901234567890' AS v");
        BigDecimal value = big.getValues().iterator().next().get("v").getNumericValue();
        assertFalse(new BigDecimal("12345678901234567890.12345678901234567890").compareTo(value) == 0,
                "BIGNUMERIC with 40 digits now round-trips: update the notes");

        // a streaming insert does not move the table's lastModifiedTime (BigQuery's cost guard cannot be tested)
        Table afterInsert = client.getTable(id);
        assertEquals(created.getLastModifiedTime(), afterInsert.getLastModifiedTime());
        assertEquals(1L, afterInsert.getNumRows().longValue());

        // a BYTES literal with an escape above \x7f is stored as the UTF-8 of that code point (FROM_BASE64 is exact)
        TableResult literal = query("SELECT b'\\x00\\xff' AS v");
        assertEquals(List.of((byte) 0, (byte) 0xc3, (byte) 0xbf), bytes(literal.getValues().iterator().next().get("v").getBytesValue()));

        // dry runs report 0 bytes processed
        Job dry = client.create(JobInfo.of(QueryJobConfiguration.newBuilder("SELECT * FROM " + fq(id)).setDryRun(true).build()));
        assertEquals(0L, ((JobStatistics.QueryStatistics) dry.getStatistics()).getTotalBytesProcessed().longValue());
    }

    // ---------------------------------------------------------------------------------------------------------

    private static long micros(Instant instant) {
        return ChronoUnit.MICROS.between(Instant.EPOCH, instant);
    }

    private static int count(Iterable<FieldValueList> rows) {
        int n = 0;
        for (FieldValueList ignored : rows) {
            n++;
        }
        return n;
    }

    private static List<Long> range(long from, long to) {
        List<Long> list = new ArrayList<>();
        for (long i = from; i <= to; i++) {
            list.add(i);
        }
        return list;
    }

    private static List<Byte> bytes(byte[] array) {
        List<Byte> list = new ArrayList<>();
        for (byte b : array) {
            list.add(b);
        }
        return list;
    }

    private static long rssKiB(long pid) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", ""));
                }
            }
        } catch (Exception e) {
            // not Linux or gone
        }
        return -1;
    }
}
