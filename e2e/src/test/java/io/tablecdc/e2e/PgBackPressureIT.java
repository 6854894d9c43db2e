package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.common.utils.internals.Sanitizer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.flows.StatusScript;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * Per-table back-pressure of the Postgres pipeline's copies ({@code max.unnormalized.batches}), end to end: a copied
 * table whose ClickHouse side refuses every insert (a {@code CHECK} constraint) pauses its copy once its synced batches
 * not yet normalized reach the limit, and stays paused (its lease renewed, copied once) while another table streams and
 * a third, added to the publication meanwhile, is copied; once ClickHouse takes rows again the copy goes on by itself,
 * the table is handed over and ClickHouse equals Postgres row for row.
 */
class PgBackPressureIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "pgbp_source";
    private static final MBeanServer jmx = ManagementFactory.getPlatformMBeanServer();
    private static final int STUCK_ROWS = 60_000;
    private static final int LIMIT = 4;
    private static final long LEASE_MS = 6_000;

    private static String catalogUrl;
    private static Client clickhouse;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("pgbp_catalog");
        clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
    }

    private static Map<String, String> sourceConfig(String prefix, String publication) {
        Map<String, String> config = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, prefix);
        config.put("tasks.max", "3");
        config.put("table.sync.copy", "all");
        config.put("batch.rows", "2000");
        config.put("max.unnormalized.batches", Integer.toString(LIMIT));
        config.put("copy.lease.ms", Long.toString(LEASE_MS));
        return config;
    }

    private static Map<String, String> sinkConfig(String prefix) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, prefix + "-stage");
        config.put("topics.regex", prefix + "\\..*");
        config.put("normalize.backoff.initial.ms", "300");
        config.put("normalize.backoff.max.ms", "1000");
        config.put("consumer.override.metadata.max.age.ms", "1000");
        return config;
    }

    @Test
    void aCopyWhoseTableCannotLoadPausesAtItsLimitWhileOtherTablesCopyAndStream() throws Exception {
        pg.sql("DROP PUBLICATION IF EXISTS bpc_pub",
                "DROP SCHEMA IF EXISTS bpc CASCADE",
                "CREATE SCHEMA bpc",
                "CREATE TABLE bpc.stuck (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO bpc.stuck SELECT g, 's' || g FROM generate_series(1, " + STUCK_ROWS + ") g",
                "CREATE TABLE bpc.other (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO bpc.other SELECT g, 'o' || g FROM generate_series(1, 1000) g",
                "CREATE TABLE bpc.late (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO bpc.late SELECT g, 'l' || g FROM generate_series(1, 3000) g",
                "CREATE PUBLICATION bpc_pub FOR TABLE bpc.stuck, bpc.other");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String table : List.of("bpc.stuck", "bpc.other", "bpc.late")) {
            tables.put(table, new String[] {"id::text || '|' || v", "concat(toString(id), '|', v)"});
        }
        String flow = "bpc-flow";
        String sink = "bpc-sink";
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(sink, sinkConfig("bpc"));
        rest.putConfig(flow, sourceConfig("bpc", "bpc_pub"));
        rest.awaitRunning(flow, 3, Duration.ofSeconds(90));

        // ClickHouse refuses bpc.stuck's rows once its first rows are in: its copy must stop at the limit
        awaitTrue(() -> pg.chLong("SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 'bpc_stuck'") == 1,
                Duration.ofSeconds(120), "bpc.stuck never reached ClickHouse");
        clickhouse.execute("ALTER TABLE bpc_stuck ADD CONSTRAINT bpc_refuse CHECK id < 0").get().close();
        // paused while its normalize fails: no batch of it can be loaded any more, so the pause is not a passing one
        Map<String, String> paused = pg.awaitTable(flow, "bpc.stuck",
                row -> "normalize_buffer_full".equals(row.get("paused_reason")) && row.get("last_error") != null
                        && row.get("last_error").startsWith("normalize:"), Duration.ofSeconds(120));
        long pausedAt = System.nanoTime();
        assertEquals("copying", paused.get("phase"), "the copy paused, it did not finish first: " + paused);
        assertEquals("1", paused.get("copy_attempt"), paused.toString());
        String slot = pg.catalogValue("SELECT source_slot FROM cdc_flow WHERE flow_name = ?", flow);
        String confirmedBefore = pg.sourceValue("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = ?",
                slot);

        // while bpc.stuck waits: bpc.late joins the publication and is copied, bpc.other streams (its freshness measured)
        pg.sql("ALTER PUBLICATION bpc_pub ADD TABLE bpc.late",
                "INSERT INTO bpc.late VALUES (5001, 'after the add')",
                "UPDATE bpc.stuck SET v = 'changed while paused' WHERE id % 1000 = 0",
                "DELETE FROM bpc.stuck WHERE id % 1000 = 1",
                "INSERT INTO bpc.stuck SELECT g, 'new' || g FROM generate_series(" + (STUCK_ROWS + 1) + ", "
                        + (STUCK_ROWS + 500) + ") g");
        List<Long> pausedFreshness = pg.freshness("bpc.other", 10_000, 15, "'fresh'");
        pg.awaitTable(flow, "bpc.late", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        Map<String, String> mid = pg.table(flow, "bpc.stuck");
        // the pause outlasts the copy lease three times over: the lease must be renewed all along
        long waitMore = 3 * LEASE_MS - (System.nanoTime() - pausedAt) / 1_000_000;
        if (waitMore > 0) {
            Thread.sleep(waitMore);
        }
        Map<String, String> still = pg.table(flow, "bpc.stuck");
        assertEquals("normalize_buffer_full", still.get("paused_reason"), still.toString());
        assertEquals("copying", still.get("phase"), still.toString());
        assertEquals("1", still.get("copy_attempt"), "the paused copy kept its lease: " + still);
        assertEquals(paused.get("copy_lease_owner"), still.get("copy_lease_owner"), still.toString());
        assertEquals(mid.get("synced_batch_id"), still.get("synced_batch_id"), "a paused copy syncs no batch");
        assertEquals(mid.get("copy_rows_done"), still.get("copy_rows_done"), "a paused copy copies no row");
        // one copy attempt's batch ids are consecutive (one reserved block): synced - normalized counts its batches
        long unnormalized = Long.parseLong(still.get("synced_batch_id")) - Long.parseLong(still.get("normalized_batch_id"));
        assertTrue(unnormalized == LIMIT, "the copy stops at " + LIMIT + " batches synced and not normalized: " + still);
        long rowsDone = Long.parseLong(still.get("copy_rows_done"));
        assertTrue(rowsDone < STUCK_ROWS && rowsDone >= (LIMIT - 1) * 2_000L, "the rows read when it paused: " + still);
        long staged = Long.parseLong(pg.catalogValue("SELECT count(*)::text FROM cdc_table_avro_stage WHERE flow_name = ?"
                + " AND source_table_identifier = 'bpc.stuck'", flow));
        assertTrue(staged <= LIMIT, "at most " + LIMIT + " batches wait in the stage, not " + staged);
        String confirmedAfter = pg.sourceValue("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = ?",
                slot);
        assertTrue(lsnGreater(confirmedAfter, confirmedBefore), "the flow's slot moves on while bpc.stuck waits: "
                + confirmedBefore + " -> " + confirmedAfter);
        String status = StatusScript.run(stack, catalogUrl, "--flow", flow);
        String stuckLine = status.lines().map(String::trim).filter(l -> l.startsWith("bpc.stuck")).findFirst().orElse("");
        assertTrue(stuckLine.contains("copying") && stuckLine.contains("normalize_buffer_full"), status);
        assertTrue(pausedReasons(flow, "bpc.stuck").contains("normalize_buffer_full"),
                "the copy task's MBean of bpc.stuck shows the pause: " + pausedReasons(flow, "bpc.stuck"));
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING", "RUNNING"), rest.states(flow));
        long pausedFor = (System.nanoTime() - pausedAt) / 1_000_000;

        // ClickHouse takes rows again: the copy goes on by itself, once, and hands the table over
        clickhouse.execute("ALTER TABLE bpc_stuck DROP CONSTRAINT bpc_refuse").get().close();
        Map<String, String> ready = pg.awaitTable(flow, "bpc.stuck", row -> "ready".equals(row.get("phase")),
                Duration.ofSeconds(240));
        assertEquals("1", ready.get("copy_attempt"), "copied once: " + ready);
        assertNull(ready.get("paused_reason"), ready.toString());
        assertEquals(Integer.toString(STUCK_ROWS), ready.get("copy_rows_done"), ready.toString());
        pg.sql("UPDATE bpc.stuck SET v = 'after the handover' WHERE id <= 10", "INSERT INTO bpc.other VALUES (9999, 'end')");
        pg.awaitEqual(tables, Duration.ofSeconds(180));
        List<Long> healthyFreshness = pg.freshness("bpc.other", 20_000, 15, "'fresh'");
        System.out.printf("pg back-pressure: bpc.stuck paused at %s of %d rows for %d ms (lease %d ms, %d staged);"
                        + " bpc.other insert -> visible while paused p50 %d ms p95 %d ms, healthy p50 %d ms p95 %d ms;"
                        + " slot %s -> %s%n%s%n", still.get("copy_rows_done"), STUCK_ROWS, pausedFor, LEASE_MS, staged,
                PgChecks.percentile(pausedFreshness, 50), PgChecks.percentile(pausedFreshness, 95), PgChecks.percentile(healthyFreshness, 50),
                PgChecks.percentile(healthyFreshness, 95), confirmedBefore, confirmedAfter, stuckLine);
        rest.delete(flow);
        rest.delete(sink);
    }

    /**
     * With {@code tasks.max=1} one task both streams and copies: its copy of a table ClickHouse refuses pauses at the
     * limit without holding up the table it streams (whose freshness is measured). A connector stopped while the copy
     * is paused gives the table back and clears the pause; resumed, the next copy pauses again; once ClickHouse takes
     * rows the table is handed over and ClickHouse equals Postgres.
     */
    @Test
    void oneTaskThatStreamsAndCopiesKeepsStreamingWhileItsCopyIsPaused() throws Exception {
        pg.sql("DROP PUBLICATION IF EXISTS bps_pub",
                "DROP SCHEMA IF EXISTS bps CASCADE",
                "CREATE SCHEMA bps",
                "CREATE TABLE bps.stuck (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO bps.stuck SELECT g, 's' || g FROM generate_series(1, 30000) g",
                "CREATE TABLE bps.live (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE PUBLICATION bps_pub FOR TABLE bps.stuck, bps.live");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String table : List.of("bps.stuck", "bps.live")) {
            tables.put(table, new String[] {"id::text || '|' || v", "concat(toString(id), '|', v)"});
        }
        String flow = "bps-flow";
        String sink = "bps-sink";
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> config = sourceConfig("bps", "bps_pub");
        config.put("tasks.max", "1");
        config.put("table.sync.copy", "only:bps.stuck");
        config.put("batch.rows", "1000");
        rest.putConfig(sink, sinkConfig("bps"));
        rest.putConfig(flow, config);
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));

        // bps.live streams from the start (not copied): its first row creates its ClickHouse table
        pg.sql("INSERT INTO bps.live VALUES (0, 'first')");
        for (String name : List.of("bps_stuck", "bps_live")) {
            awaitTrue(() -> pg.chLong("SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = '" + name
                    + "'") == 1, Duration.ofSeconds(120), name + " never reached ClickHouse");
        }
        clickhouse.execute("ALTER TABLE bps_stuck ADD CONSTRAINT bps_refuse CHECK id < 0").get().close();
        // a pause no normalize can end: its normalize fails, and the copy's synced batches not normalized are at the
        // limit (a pause seen earlier may be one of a copy faster than the sink, which a normalize done before the
        // constraint ends)
        Map<String, String> paused = pg.awaitTable(flow, "bps.stuck",
                row -> "normalize_buffer_full".equals(row.get("paused_reason")) && row.get("last_error") != null
                        && row.get("last_error").startsWith("normalize:") && row.get("synced_batch_id") != null
                        && Long.parseLong(row.get("synced_batch_id")) - Long.parseLong(row.get("normalized_batch_id"))
                                >= LIMIT, Duration.ofSeconds(120));
        assertEquals("copying", paused.get("phase"), paused.toString());
        List<Long> pausedFreshness = pg.freshness("bps.live", 1, 15, "'fresh'");
        Map<String, String> still = pg.table(flow, "bps.stuck");
        assertEquals("normalize_buffer_full", still.get("paused_reason"), still.toString());
        assertEquals(paused.get("copy_rows_done"), still.get("copy_rows_done"), "a paused copy copies no row");

        // stopped while paused: the table goes back to pending and its pause ends with the copy
        rest.stop(flow);
        rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText()), Duration.ofSeconds(60));
        Map<String, String> given = pg.awaitTable(flow, "bps.stuck", row -> row.get("paused_reason") == null,
                Duration.ofSeconds(30));
        assertEquals("pending", given.get("phase"), given.toString());
        rest.resume(flow);
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));
        Map<String, String> again = pg.awaitTable(flow, "bps.stuck",
                row -> "normalize_buffer_full".equals(row.get("paused_reason")) && "2".equals(row.get("copy_attempt")),
                Duration.ofSeconds(120));
        assertEquals("copying", again.get("phase"), again.toString());

        clickhouse.execute("ALTER TABLE bps_stuck DROP CONSTRAINT bps_refuse").get().close();
        Map<String, String> ready = pg.awaitTable(flow, "bps.stuck", row -> "ready".equals(row.get("phase")),
                Duration.ofSeconds(240));
        assertEquals("2", ready.get("copy_attempt"), ready.toString());
        assertNull(ready.get("paused_reason"), ready.toString());
        pg.sql("UPDATE bps.stuck SET v = 'after the handover' WHERE id <= 10");
        pg.awaitEqual(tables, Duration.ofSeconds(180));
        List<Long> healthyFreshness = pg.freshness("bps.live", 100, 15, "'fresh'");
        System.out.printf("pg back-pressure, one task: bps.live insert -> visible while bps.stuck's copy is paused p50 %d"
                        + " ms p95 %d ms, healthy p50 %d ms p95 %d ms%n", PgChecks.percentile(pausedFreshness, 50),
                PgChecks.percentile(pausedFreshness, 95), PgChecks.percentile(healthyFreshness, 50), PgChecks.percentile(healthyFreshness, 95));
        rest.delete(flow);
        rest.delete(sink);
    }
    /**
     * A copy paused for the sink longer than {@code copy.pause.max.ms} gives its snapshot up: its temporary slot is
     * dropped and no backend of the copy keeps a {@code backend_xmin} while it waits (the server's VACUUM horizon and
     * WAL are no longer held for a table whose ClickHouse side stays broken). The catalog says why the table waits;
     * the copy sends nothing and makes no new snapshot while the sink still has its batches; once ClickHouse takes
     * rows again the copy starts over, the table is handed over and ClickHouse equals Postgres.
     */
    @Test
    void aCopyPausedLongerThanItsBoundReleasesItsSnapshotAndStartsOverOnceTheSinkLoads() throws Exception {
        pg.sql("DROP PUBLICATION IF EXISTS bpr_pub",
                "DROP SCHEMA IF EXISTS bpr CASCADE",
                "CREATE SCHEMA bpr",
                "CREATE TABLE bpr.stuck (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO bpr.stuck SELECT g, 's' || g FROM generate_series(1, 20000) g",
                "CREATE TABLE bpr.other (id int PRIMARY KEY, v text NOT NULL)",
                "INSERT INTO bpr.other SELECT g, 'o' || g FROM generate_series(1, 500) g",
                "CREATE PUBLICATION bpr_pub FOR TABLE bpr.stuck, bpr.other");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String table : List.of("bpr.stuck", "bpr.other")) {
            tables.put(table, new String[] {"id::text || '|' || v", "concat(toString(id), '|', v)"});
        }
        String flow = "bpr-flow";
        String sink = "bpr-sink";
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> config = sourceConfig("bpr", "bpr_pub");
        config.put("batch.rows", "2000");
        config.put("max.unnormalized.batches", "2");
        config.put("copy.pause.max.ms", "3000");
        rest.putConfig(sink, sinkConfig("bpr"));
        rest.putConfig(flow, config);
        rest.awaitRunning(flow, 3, Duration.ofSeconds(90));

        awaitTrue(() -> pg.chLong("SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 'bpr_stuck'") == 1,
                Duration.ofSeconds(120), "bpr.stuck never reached ClickHouse");
        clickhouse.execute("ALTER TABLE bpr_stuck ADD CONSTRAINT bpr_refuse CHECK id < 0").get().close();
        // a pause no normalize can end: the copy is still copying and its batches wait behind a refused load
        Map<String, String> paused = pg.awaitTable(flow, "bpr.stuck",
                row -> "copying".equals(row.get("phase")) && row.get("paused_reason") != null
                        && row.get("last_error") != null && row.get("last_error").startsWith("normalize:"),
                Duration.ofSeconds(120));
        String owner = paused.get("copy_lease_owner");

        // past copy.pause.max.ms the copy holds no snapshot: no temporary slot, no backend of it with an xmin
        try {
            awaitTrue(() -> heldByCopies(flow).isEmpty(), Duration.ofSeconds(30), "");
        } catch (AssertionError e) {
            throw new AssertionError("the paused copy still holds its snapshot 30 s after its pause began (bound 3 s): "
                    + heldByCopies(flow) + "; " + pg.table(flow, "bpr.stuck"));
        }
        Map<String, String> released = pg.awaitTable(flow, "bpr.stuck",
                row -> "copy_snapshot_released".equals(row.get("paused_reason")), Duration.ofSeconds(30));
        assertEquals("copying", released.get("phase"), released.toString());
        assertEquals(owner, released.get("copy_lease_owner"), "the copy task keeps its table: " + released);
        String status = StatusScript.run(stack, catalogUrl, "--flow", flow);
        String stuckLine = status.lines().map(String::trim).filter(l -> l.startsWith("bpr.stuck")).findFirst().orElse("");
        assertTrue(stuckLine.contains("copy_snapshot_released"), status);
        // while the sink cannot load, the released copy stays so: no new snapshot, no batch, no new claim (sampled
        // over more than a bound)
        pg.sql("UPDATE bpr.other SET v = 'while released' WHERE id <= 50", "UPDATE bpr.stuck SET v = 'while released'"
                + " WHERE id % 1000 = 0");
        for (int i = 0; i < 10; i++) {
            Thread.sleep(500);
            List<String> held = heldByCopies(flow);
            Map<String, String> row = pg.table(flow, "bpr.stuck");
            assertEquals(List.of(), held, "a released copy waiting for the sink holds nothing: " + row);
            assertEquals("copy_snapshot_released", row.get("paused_reason"), row.toString());
            assertEquals(released.get("synced_batch_id"), row.get("synced_batch_id"), "a released copy sends nothing");
            assertEquals(released.get("copy_attempt"), row.get("copy_attempt"), row.toString());
        }
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING", "RUNNING"), rest.states(flow));

        // ClickHouse takes rows again: the sink loads the waiting batches, the copy starts over from a new snapshot
        clickhouse.execute("ALTER TABLE bpr_stuck DROP CONSTRAINT bpr_refuse").get().close();
        Map<String, String> ready = pg.awaitTable(flow, "bpr.stuck", row -> "ready".equals(row.get("phase")),
                Duration.ofSeconds(180));
        assertNull(ready.get("paused_reason"), ready.toString());
        assertEquals("20000", ready.get("copy_rows_done"), "the new snapshot copied every row: " + ready);
        pg.sql("UPDATE bpr.stuck SET v = 'after the handover' WHERE id <= 10", "INSERT INTO bpr.other VALUES (9999, 'end')");
        pg.awaitEqual(tables, Duration.ofSeconds(180));
        assertEquals(List.of(), heldByCopies(flow));
        rest.delete(flow);
        rest.delete(sink);
    }

    /**
     * What the flow's copies hold on the source: its temporary replication slots, and the backends of its copies whose
     * {@code backend_xmin} holds back the database's VACUUM horizon.
     */
    private static List<String> heldByCopies(String flow) throws SQLException {
        List<String> held = new ArrayList<>();
        try (Connection c = pg.source();
             PreparedStatement slots = c.prepareStatement("SELECT slot_name, catalog_xmin::text FROM pg_replication_slots"
                     + " WHERE database = current_database() AND temporary");
             PreparedStatement backends = c.prepareStatement("SELECT pid, application_name, backend_xmin::text, state"
                     + " FROM pg_stat_activity WHERE datname = current_database() AND backend_xmin IS NOT NULL"
                     + " AND strpos(application_name, ?) = 1")) {
            try (ResultSet rs = slots.executeQuery()) {
                while (rs.next()) {
                    held.add("slot " + rs.getString(1) + " (catalog_xmin " + rs.getString(2) + ")");
                }
            }
            backends.setString(1, "tablecdc " + flow + " copy");
            try (ResultSet rs = backends.executeQuery()) {
                while (rs.next()) {
                    held.add("backend " + rs.getInt(1) + " '" + rs.getString(2) + "' (backend_xmin " + rs.getString(3)
                            + ", " + rs.getString(4) + ")");
                }
            }
        }
        return held;
    }

    private static boolean lsnGreater(String a, String b) {
        return lsn(a) > lsn(b);
    }

    private static long lsn(String text) {
        assertNotNull(text, "no LSN");
        String[] parts = text.split("/");
        return (Long.parseLong(parts[0], 16) << 32) | Long.parseLong(parts[1], 16);
    }

    /** The {@code paused-reason} of every MBean the flow's tasks publish for {@code table}. */
    private static List<String> pausedReasons(String flow, String table) throws Exception {
        List<String> reasons = new ArrayList<>();
        for (ObjectName name : jmx.queryNames(new ObjectName("kafka.connect:type=plugins,connector="
                + Sanitizer.jmxSanitize(flow) + ",flow=" + Sanitizer.jmxSanitize(flow) + ",table="
                + Sanitizer.jmxSanitize(table) + ",*"), null)) {
            reasons.add(String.valueOf(jmx.getAttribute(name, "paused-reason")));
        }
        return reasons;
    }
}
