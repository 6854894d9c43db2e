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
import java.time.Duration;
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
import io.tablecdc.common.FlowSlots;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;

/**
 * {@code tablecdc-retire-flow} on a real (embedded) Postgres catalog: it removes one flow's rows and no other's, frees
 * its tables' destinations, refuses while a task of the flow holds a lease, and refuses a Postgres flow's retirement
 * without its source database (its slot would keep WAL).
 */
class RetireFlowCommandTest {
    private static EmbeddedPostgres postgres;
    private static String url;
    private static Catalog catalog;

    @BeforeAll
    static void start() throws Exception {
        File dir = new File("target/embedded-pg/" + RetireFlowCommandTest.class.getSimpleName());
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
    }

    @AfterAll
    static void stop() throws Exception {
        if (postgres != null) {
            postgres.close();
        }
    }

    private record Result(int status, String out, String err) {
    }

    private static Result run(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int status = RetireFlowCommand.run(args, Map.of(StatusCommand.ENV_URL, url),
                new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Result(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static long rows(String flow) throws Exception {
        try (Connection c = postgres.getDatabase("postgres", "catalog").getConnection();
             PreparedStatement ps = c.prepareStatement("SELECT (SELECT count(*) FROM cdc_table_replication_state WHERE"
                     + " flow_name = ?) + (SELECT count(*) FROM cdc_table_avro_stage WHERE flow_name = ?)"
                     + " + (SELECT count(*) FROM cdc_flow WHERE flow_name = ?)")) {
            ps.setString(1, flow);
            ps.setString(2, flow);
            ps.setString(3, flow);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    @Test
    void aRetiredFlowLeavesTheCatalogAndItsDestinationsGoToTheFlowUnderItsNewName() throws Exception {
        catalog.flows().registerFlow("bq-old", FlowIdentity.ofKind("bigquery_query_cdc"), null);
        catalog.progress().initTable("bq-old", "shop.orders");
        assertEquals(java.util.Optional.empty(), catalog.sink().claimDestination("bq-old", "shop.orders", "db.orders in X"));
        catalog.stages().upsertStage("bq-old", "shop.orders", new Stage(1,
                List.of(new StageFile("s3://bucket/stage/1.avro", 1, 100)), 1, new RowCounts(1, 0, 0), false));
        catalog.progress().initTable("bq-other", "shop.orders");
        catalog.progress().initTable("bq-new", "shop.orders");
        assertTrue(catalog.sink().claimDestination("bq-new", "shop.orders", "db.orders in X").isPresent(), "held by bq-old");

        Result retired = run("--flow", "bq-old");
        assertEquals(0, retired.status(), retired.err());
        assertTrue(retired.out().contains("flow bq-old retired: 1 tables, 1 staged and 0 quarantined batches"), retired.out());
        assertEquals(0, rows("bq-old"));
        assertEquals(1, rows("bq-other"), "another flow is left alone");
        assertEquals(java.util.Optional.empty(), catalog.sink().claimDestination("bq-new", "shop.orders", "db.orders in X"));

        Result again = run("--flow", "bq-old");
        assertEquals(1, again.status());
        assertTrue(again.err().contains("this catalog has no flow bq-old"), again.err());
        assertEquals(2, run("--flow", "bq-old", "--table", "shop.orders").status(), "a flow, not a table");
    }

    @Test
    void aFlowWhoseTaskHoldsALeaseOrWhoseSlotIsNotGivenIsNotRetired() throws Exception {
        catalog.progress().initTable("pg-running", "shop.items");
        catalog.phases().setPending("pg-running", "shop.items");
        assertTrue(catalog.copies().claimCopy("pg-running", "copy-0", Duration.ofMinutes(1)).isPresent());
        Result running = run("--flow", "pg-running");
        assertEquals(1, running.status());
        assertTrue(running.err().contains("flow pg-running still runs (table shop.items: copy task copy-0 holds its copy lease)"),
                running.err());
        assertEquals(1, rows("pg-running"));

        String slot = "tablecdc_0123456789abcdef";
        catalog.flows().registerFlow("pg-stopped", new FlowIdentity("postgres_pipeline", "7311111111111111111", 1L, slot,
                "pub", null), null);
        catalog.progress().initTable("pg-stopped", "shop.items");
        Result withoutSource = run("--flow", "pg-stopped");
        assertEquals(1, withoutSource.status());
        assertTrue(withoutSource.err().contains("replication slot " + slot) && withoutSource.err().contains("--source-url"),
                withoutSource.err());
        assertEquals(2, rows("pg-stopped"), "nothing removed");
        assertEquals("tablecdc_copy_", FlowSlots.copySlotPrefix("tablecdc", slot).substring(0, 14));
        assertEquals(java.util.Optional.of("tablecdc"), FlowSlots.slotPrefixOf(slot));
    }
}
