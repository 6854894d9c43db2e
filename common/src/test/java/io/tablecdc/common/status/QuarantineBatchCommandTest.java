package io.tablecdc.common.status;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogMigrations;
import io.tablecdc.catalog.FlowIdentity;
import io.tablecdc.catalog.RowCounts;
import io.tablecdc.catalog.Stage;
import io.tablecdc.catalog.StageFile;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;

/**
 * {@code tablecdc-quarantine-batch} on a real (embedded) Postgres catalog: without {@code --batch} it sets aside only
 * the batch the sink recorded as refused by ClickHouse, and only while that refusal is the table's last error.
 */
class QuarantineBatchCommandTest {
    private static final String FLOW = "bq_shop";
    private static EmbeddedPostgres postgres;
    private static String url;
    private static Catalog catalog;

    @BeforeAll
    static void start() throws Exception {
        File dir = new File("target/embedded-pg/" + QuarantineBatchCommandTest.class.getSimpleName());
        postgres = EmbeddedPostgres.builder()
                .setOverrideWorkingDirectory(dir)
                .setDataDirectory(new File(dir, "data"))
                .setCleanDataDirectory(true)
                .start();
        try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE catalog");
        }
        url = postgres.getJdbcUrl("postgres", "catalog");
        CatalogMigrations.migrate(postgres.getDatabase("postgres", "catalog"));
        catalog = new Catalog(postgres.getDatabase("postgres", "catalog"));
        catalog.flows().registerFlow(FLOW, FlowIdentity.ofKind("bigquery_query_cdc"), null);
    }

    @AfterAll
    static void stop() throws Exception {
        if (postgres != null) {
            postgres.close();
        }
    }

    /** A table with batch 1 loaded and batches 2, 3 and 4 staged, waiting to be loaded. */
    private static void table(String table) {
        catalog.progress().initTable(FLOW, table);
        catalog.progress().recordNormalize(FLOW, table, 1, new RowCounts(1, 0, 0), Instant.now());
        for (long batch = 2; batch <= 4; batch++) {
            catalog.stages().upsertStage(FLOW, table, new Stage(batch,
                    List.of(new StageFile("s3://bucket/stage/" + table + "/" + batch + ".avro", 1, 100)), 1,
                    new RowCounts(1, 0, 0), false));
        }
    }

    private record Result(int status, String out, String err) {
    }

    private static Result run(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int status = QuarantineBatchCommand.run(args, Map.of(StatusCommand.ENV_URL, url),
                new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Result(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static String batchIds(String catalogTable, String table) throws Exception {
        List<Long> ids = new ArrayList<>();
        try (Connection c = postgres.getDatabase("postgres", "catalog").getConnection();
             PreparedStatement ps = c.prepareStatement("SELECT batch_id FROM \"" + catalogTable + "\""
                     + " WHERE flow_name = ? AND source_table_identifier = ? ORDER BY batch_id")) {
            ps.setString(1, FLOW);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    ids.add(rs.getLong(1));
                }
            }
        }
        return ids.toString();
    }

    private static String quarantined(String table) throws Exception {
        return batchIds("cdc_table_quarantined_batch", table);
    }

    private static String staged(String table) throws Exception {
        return batchIds("cdc_table_avro_stage", table);
    }

    @Test
    void aTransientNormalizeErrorSetsNoBatchAside() throws Exception {
        // the sink's own texts for an unreachable ClickHouse, a statement timeout and a lease wait that outlasted its bound
        List<String> transients = List.of(
                "Connect to http://127.0.0.1:8123 [/127.0.0.1] failed: Connection refused",
                "ClickHouse did not answer within 300000 ms: load into shop_orders",
                "another sink task still loads this table (normalize lease held by sink-0 for more than 120000 ms)");
        for (int i = 0; i < transients.size(); i++) {
            String table = "shop.transient" + i;
            table(table);
            Instant at = Instant.now();
            catalog.progress().recordError(FLOW, table, "normalize: " + transients.get(i), at, at.plusSeconds(60));

            Result r = run("--flow", FLOW, "--table", table);
            assertEquals(1, r.status(), r.out() + r.err());
            assertTrue(r.err().contains("flow " + FLOW + ", table " + table + " has no batch that ClickHouse refuses")
                    && r.err().contains("its last error is not ClickHouse refusing a batch's data but: normalize: "
                    + transients.get(i)), r.err());
            assertEquals("[]", quarantined(table), "nothing set aside after: " + transients.get(i));
            assertEquals("[2, 3, 4]", staged(table));
        }
    }

    @Test
    void aRecordedRefusalSetsAsideExactlyThatBatchOnce() throws Exception {
        String table = "shop.refused";
        table(table);
        Instant at = Instant.now();
        catalog.progress().recordError(FLOW, table, "normalize: ClickHouse refused batch 2: Code: 469. DB::Exception:"
                + " Constraint `not_two` for table shop_refused is violated. (VIOLATED_CONSTRAINT)", at, at.plusSeconds(60), 2L);

        Result r = run("--flow", FLOW, "--table", table);
        assertEquals(0, r.status(), r.out() + r.err());
        assertTrue(r.out().contains("flow " + FLOW + ", table " + table + ": batch 2 (1 rows, 1 stage file) set aside"), r.out());
        assertEquals("[2]", quarantined(table));
        assertEquals("[3, 4]", staged(table));

        Result again = run("--flow", FLOW, "--table", table);
        assertEquals(1, again.status(), again.out() + again.err());
        assertTrue(again.err().contains("has no batch that ClickHouse refuses") && again.err().contains("its sink records no error"),
                again.err());
        assertEquals("[2]", quarantined(table), "a second run sets no good batch aside");
        assertEquals("[3, 4]", staged(table));
    }

    @Test
    void aLaterErrorReplacesTheRefusal() throws Exception {
        String table = "shop.later";
        table(table);
        Instant at = Instant.now();
        catalog.progress().recordError(FLOW, table, "normalize: ClickHouse refused batch 2: Code: 53. (TYPE_MISMATCH)",
                at, at.plusSeconds(60), 2L);
        catalog.progress().recordError(FLOW, table, "normalize: Connect to http://127.0.0.1:8123 failed: Connection refused",
                at.plusSeconds(60), at.plusSeconds(180));

        Result r = run("--flow", FLOW, "--table", table);
        assertEquals(1, r.status(), r.out() + r.err());
        assertTrue(r.err().contains("has no batch that ClickHouse refuses") && r.err().contains("Connection refused"), r.err());
        assertEquals("[]", quarantined(table));

        // the sink's next attempt meets the refusal again: the command acts on it
        catalog.progress().recordError(FLOW, table, "normalize: ClickHouse refused batch 2: Code: 53. (TYPE_MISMATCH)",
                at.plusSeconds(180), at.plusSeconds(480), 2L);
        Result now = run("--flow", FLOW, "--table", table);
        assertEquals(0, now.status(), now.out() + now.err());
        assertEquals("[2]", quarantined(table));
    }

    @Test
    void withBatchTheCommandSetsThatBatchAsideWhateverTheError() throws Exception {
        String table = "shop.named";
        table(table);
        Instant at = Instant.now();
        catalog.progress().recordError(FLOW, table, "normalize: ClickHouse did not answer within 300000 ms", at,
                at.plusSeconds(60));

        Result r = run("--flow", FLOW, "--table", table, "--batch", "3");
        assertEquals(0, r.status(), r.out() + r.err());
        assertTrue(r.out().contains("batch 3 (1 rows, 1 stage file) set aside"), r.out());
        assertEquals("[3]", quarantined(table));
        assertEquals("[2, 4]", staged(table));
    }
}
