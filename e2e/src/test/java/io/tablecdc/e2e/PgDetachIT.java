package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import java.util.regex.Pattern;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.common.utils.internals.Sanitizer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.fasterxml.jackson.databind.JsonNode;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.flows.StatusScript;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Per-table detach and rejoin of streamed tables, end to end: a {@code ready} table whose ClickHouse side refuses every
 * insert (a {@code CHECK} constraint) reaches {@code max.unnormalized.batches} synced and not normalized batches and is
 * detached from the flow's shared slot ({@code lagging}, a private slot of its own in {@code pg_replication_slots}),
 * while a writer keeps changing every table and the other tables keep streaming and the shared slot keeps being
 * confirmed; once ClickHouse takes its rows again a copy task catches it up from its private slot and hands it back,
 * and ClickHouse equals Postgres row for row. Also a worker killed (SIGKILL) while the table is detached and again
 * while it rejoins, with a {@code TRUNCATE} of the detached table in between.
 */
class PgDetachIT {
    private static final LocalStack stack = LocalStack.get();
    private static final MBeanServer jmx = ManagementFactory.getPlatformMBeanServer();
    private static final String SOURCE = SourceConfigs.PG_PIPELINE;
    private static final String DATABASE = "pgdt_source";
    private static final int LIMIT = 3;
    private static final int ROWS = 200;
    private static final String PG_ROW = "id::text || '|' || v::text || '|' || coalesce(note, '-')";
    private static final String CH_ROW = "concat(toString(id), '|', toString(v), '|', ifNull(note, '-'))";

    private static String catalogUrl;
    private static Client clickhouse;
    private static PgChecks pg;

    @AfterAll
    static void stop() {
        if (clickhouse != null) {
            clickhouse.close();
        }
    }

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("pgdt_catalog");
        clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
    }

    private static Map<String, String> sourceConfig(String prefix, String publication, int tasks) {
        Map<String, String> config = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, prefix);
        config.put("tasks.max", Integer.toString(tasks));
        config.put("table.sync.copy", "all");
        config.put("batch.rows", "100");
        config.put("max.unnormalized.batches", Integer.toString(LIMIT));
        config.put("copy.lease.ms", "5000");
        // detached once its batches have waited at the limit, none loaded, for this long (the default is a minute)
        config.put("detach.after.ms", "3000");
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

    /** Creates {@code schema} with {@code tables} ({@value #ROWS} rows each) and a publication of them. */
    private static Map<String, String[]> createTables(String schema, String publication, List<String> tables)
            throws SQLException {
        List<String> setup = new ArrayList<>(List.of("DROP PUBLICATION IF EXISTS " + publication,
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE", "CREATE SCHEMA " + schema));
        Map<String, String[]> compared = new LinkedHashMap<>();
        for (String table : tables) {
            setup.add("CREATE TABLE " + table + " (id int PRIMARY KEY, v int NOT NULL, note text)");
            setup.add("INSERT INTO " + table + " SELECT g, g % 7, CASE WHEN g % 5 = 0 THEN NULL ELSE 'r' || g END"
                    + " FROM generate_series(1, " + ROWS + ") g");
            compared.put(table, new String[] {PG_ROW, CH_ROW});
        }
        setup.add("CREATE PUBLICATION " + publication + " FOR TABLE " + String.join(", ", tables));
        pg.sql(setup.toArray(new String[0]));
        return compared;
    }

    /** An insert, an update and (every other time) a delete of {@code table} for the writer's n-th transaction. */
    private static List<String> changes(String table, int n) {
        List<String> s = new ArrayList<>();
        s.add("INSERT INTO " + table + " VALUES (" + (10_000 + n) + ", " + n + ", 'new')");
        s.add("UPDATE " + table + " SET v = v + 1, note = 'w" + n + "' WHERE id = " + ((n * 37) % ROWS + 1));
        if (n % 2 == 0) {
            s.add("DELETE FROM " + table + " WHERE id = " + ((n * 53) % ROWS + 1));
        }
        return s;
    }

    /**
     * Ten tables stream; one's ClickHouse side refuses inserts while a writer changes all ten (every transaction
     * changes the stuck table and two others): it is detached, the shared slot moves on, the others stay fresh; healed,
     * it rejoins and ClickHouse equals Postgres.
     */
    @Test
    void aTableWhoseClickHouseSideIsStuckLeavesTheSharedSlotAndRejoinsOnceItHeals() throws Exception {
        List<String> names = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            names.add("dt.t" + i);
        }
        String stuck = "dt.t0";
        String fresh = "dt.t1";
        Map<String, String[]> tables = createTables("dt", "dt_pub", names);
        String flow = "dt-flow";
        String sink = "dt-sink";
        String prefix = "dt1";
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> source = sourceConfig(prefix, "dt_pub", 3);
        Map<String, String> validated = new HashMap<>(source);
        validated.put("name", flow);
        JsonNode validation = rest.validate(SOURCE, validated);
        assertEquals(List.of(), ConnectRestClient.validationErrors(validation));
        Map<String, String> defaults = new HashMap<>();
        validation.path("configs").forEach(c -> defaults.put(c.path("definition").path("name").asText(),
                c.path("definition").path("default_value").asText()));
        assertEquals("4", defaults.get("detach.max.tables"), "detach.max.tables and its default: " + defaults.keySet());
        assertTrue(defaults.containsKey("detach.max.retained.wal.bytes"), defaults.keySet().toString());

        rest.putConfig(sink, sinkConfig(prefix));
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 3, Duration.ofSeconds(90));
        for (String table : names) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        String mainSlot = pg.catalogValue("SELECT source_slot FROM cdc_flow WHERE flow_name = ?", flow);
        assertNotNull(mainSlot);

        try (PhaseLog phases = new PhaseLog(flow);
             TransactionWriter writer = new TransactionWriter("dt-writer", pg, n -> {
                 List<String> s = new ArrayList<>(changes(stuck, n));
                 s.addAll(changes("dt.t" + (1 + n % 9), n));
                 s.addAll(changes("dt.t" + (1 + (n + 4) % 9), n));
                 return s;
             }, () -> 200)) {
            writer.awaitMore(10);
            // the baseline: every table healthy, the writer running
            List<Long> healthy = pg.freshness(fresh, 900_000, 15, "0, 'fresh'");

            clickhouse.execute("ALTER TABLE dt_t0 ADD CONSTRAINT dt_refuse CHECK id < 0").get().close();
            long constrained = System.nanoTime();
            // detached because its normalize fails (not a passing detach of a sink slower than the writer)
            Map<String, String> lagging = awaitState(flow, stuck, PgDetachIT::detachedWhileFailing, Duration.ofSeconds(120));
            long detachedAfter = (System.nanoTime() - constrained) / 1_000_000;
            String slot = lagging.get("detach_slot");
            String detachLsn = lagging.get("detach_lsn");
            assertNotNull(slot, lagging.toString());
            assertTrue(Pattern.matches(Pattern.quote(prefix) + "_detach_[0-9a-f]{8}_[0-9a-f]{6}", slot), slot);
            assertEquals(detachLsn, lagging.get("phase_lsn"), "lagging(m) at the detach marker: " + lagging);
            assertNotNull(lagging.get("detached_at"), lagging.toString());
            assertTrue(unnormalized(lagging) >= LIMIT, "detached at " + LIMIT + " batches not normalized: " + lagging);
            Map<String, String> privateSlot = slot(slot);
            assertNotNull(privateSlot, "the private slot " + slot + " is not in pg_replication_slots");
            assertEquals("logical", privateSlot.get("slot_type"), privateSlot.toString());
            assertEquals("f", privateSlot.get("temporary"), "a persistent slot: " + privateSlot);
            assertEquals(DATABASE, privateSlot.get("database"), privateSlot.toString());
            assertTrue(lsn(privateSlot.get("confirmed_flush_lsn")) <= lsn(detachLsn),
                    "the private slot keeps the changes from the marker on: " + privateSlot + ", marker " + detachLsn);
            String status = StatusScript.run(stack, catalogUrl, "--flow", flow);
            String stuckLine = status.lines().map(String::trim).filter(l -> l.startsWith(stuck)).findFirst()
                    .orElse("");
            assertTrue(stuckLine.contains("lagging(" + detachLsn + ")"), status);
            String confirmedAtDetach = slot(mainSlot).get("confirmed_flush_lsn");

            // while it is detached: the others stream (freshness of one of them), the shared slot is confirmed past
            // the marker, and no batch of the detached table is sent
            writer.awaitMore(5);
            Map<String, String> early = state(flow, stuck);
            List<Long> detached = pg.freshness(fresh, 910_000, 15, "0, 'fresh'");
            writer.awaitMore(10);
            Map<String, String> late = state(flow, stuck);
            assertEquals("lagging", late.get("phase"), late.toString());
            assertEquals(slot, late.get("detach_slot"), late.toString());
            assertEquals(early.get("synced_batch_id"), late.get("synced_batch_id"),
                    "a detached table's changes are not sent: " + early + " then " + late);
            String confirmedDetached = slot(mainSlot).get("confirmed_flush_lsn");
            assertTrue(lsn(confirmedDetached) > lsn(confirmedAtDetach) && lsn(confirmedDetached) > lsn(detachLsn),
                    "the shared slot moves on past the marker " + detachLsn + ": " + confirmedAtDetach + " -> "
                            + confirmedDetached);
            assertNotNull(slot(slot), "the private slot stays while the table is detached");
            // the apply task's metrics of the table: paused (detached), and the WAL its private slot keeps (read every
            // 10 s)
            assertTrue(metric(flow, stuck, "paused-reason").contains("detached"), metric(flow, stuck, "paused-reason")
                    .toString());
            awaitTrue(() -> metric(flow, stuck, "detached-wal-bytes").stream().anyMatch(b -> ((Number) b).longValue() > 0),
                    Duration.ofSeconds(20), "no detached-wal-bytes of " + stuck);
            long detachedFor = (System.nanoTime() - constrained) / 1_000_000 - detachedAfter;

            // healed: the table drains, a copy task catches it up from its private slot and hands it back
            clickhouse.execute("ALTER TABLE dt_t0 DROP CONSTRAINT dt_refuse").get().close();
            long healed = System.nanoTime();
            Map<String, String> back = awaitState(flow, stuck, row -> "ready".equals(row.get("phase"))
                    && row.get("detach_slot") == null && lsn(row.get("phase_lsn")) > lsn(detachLsn), Duration.ofSeconds(180));
            long rejoinedAfter = (System.nanoTime() - healed) / 1_000_000;
            // caught up from its private slot, not copied again from scratch (sampled: a copy would show as copying
            // without a private slot, after pending or errored)
            List<String> seen = phases.of(stuck);
            assertTrue(seen.stream().noneMatch(p -> p.equals("copying") || p.startsWith("pending")
                    || p.startsWith("errored")), "rejoined without a copy: " + seen);
            assertTrue(seen.contains("lagging[" + slot + "]"), seen.toString());
            awaitTrue(() -> slot(slot) == null, Duration.ofSeconds(60), "the private slot " + slot + " was not dropped");
            writer.awaitMore(10);
            writer.close();
            awaitSettled(flow, names, prefix);
            pg.awaitEqual(tables, Duration.ofSeconds(180));
            phases.close();
            System.out.printf("pg detach: %s detached %d ms after its ClickHouse side refused inserts, at %s (slot %s);"
                            + " lagging for %d ms while %s insert -> visible (%d rows) p50 %d ms p95 %d ms max %d ms,"
                            + " before anything was stuck p50 %d ms p95 %d ms max %d ms; shared slot %s confirmed %s ->"
                            + " %s; healed, ready(%s) again %d ms later; %d writer transactions; ClickHouse equals"
                            + " Postgres for ten tables%n%s%n%s%n",
                    stuck, detachedAfter, detachLsn, slot, detachedFor, fresh, detached.size(), PgChecks.percentile(detached, 50),
                    PgChecks.percentile(detached, 95), PgChecks.percentile(detached, 100), PgChecks.percentile(healthy, 50),
                    PgChecks.percentile(healthy, 95), PgChecks.percentile(healthy, 100), mainSlot,
                    confirmedAtDetach, confirmedDetached, back.get("phase_lsn"), rejoinedAfter, writer.written.get(),
                    stuckLine, phases.report());
        }
        rest.delete(flow);
        rest.delete(sink);
    }

    /**
     * The flow's worker (its own process) is killed while a table is detached, and again while that table rejoins
     * ({@code copying} with its private slot); the detached table is truncated (and refilled) meanwhile. Each time a
     * new worker takes over; every table ends ready and ClickHouse equals Postgres.
     */
    @Test
    void killingTheWorkerWhileATableIsDetachedAndWhileItRejoinsLosesNothing() throws Exception {
        List<String> names = List.of("dk.stuck", "dk.a", "dk.b");
        Map<String, String[]> tables = createTables("dk", "dk_pub", names);
        String flow = "dk-flow";
        String prefix = "dk1";
        Map<String, String> source = sourceConfig(prefix, "dk_pub", 2);
        source.put("batch.rows", "2000");
        stack.connect().rest().putConfig("dk-sink", sinkConfig(prefix));
        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                "dk-" + System.nanoTime(), stack.pluginPath());
        workerProps.put("session.timeout.ms", "6000");
        workerProps.put("heartbeat.interval.ms", "1500");
        workerProps.put("scheduled.rebalance.max.delay.ms", "2000");
        String mainSlot;
        String slot;
        String detachLsn;
        Map<String, String> killedRejoining;
        try (PhaseLog phases = new PhaseLog(flow);
             TransactionWriter writer = new TransactionWriter("dk-writer", pg, n -> {
                 // every other transaction changes the stuck table too: fewer of its batches wait for its rejoin
                 List<String> s = new ArrayList<>(n % 2 == 0 ? changes("dk.stuck", n) : List.of());
                 s.addAll(changes(n % 4 < 2 ? "dk.a" : "dk.b", n));
                 return s;
             }, () -> 200)) {
            ConnectWorker first = ConnectWorker.startProcess(workerProps, StackPaths.workDir("dk-worker-1"),
                    Duration.ofSeconds(120));
            Map<String, String> lagging;
            try {
                first.rest().putConfig(flow, source);
                first.rest().awaitRunning(flow, 2, Duration.ofSeconds(90));
                for (String table : names) {
                    pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
                }
                mainSlot = pg.catalogValue("SELECT source_slot FROM cdc_flow WHERE flow_name = ?", flow);
                writer.awaitMore(10);
                clickhouse.execute("ALTER TABLE dk_stuck ADD CONSTRAINT dk_refuse CHECK id < 0").get().close();
                lagging = awaitState(flow, "dk.stuck", PgDetachIT::detachedWhileFailing, Duration.ofSeconds(120));
                slot = lagging.get("detach_slot");
                detachLsn = lagging.get("detach_lsn");
                assertNotNull(slot(slot), "the private slot " + slot + " is not in pg_replication_slots");
                // while detached: a TRUNCATE of it in a transaction with another table's change, rows after it, and
                // enough rows that catching it up from its private slot takes a while (the second kill lands then)
                pg.transaction("INSERT INTO dk.a VALUES (500000, 1, 'with the truncate')",
                        "TRUNCATE dk.stuck",
                        "INSERT INTO dk.stuck VALUES (500000, 1, 'after the truncate')");
                pg.sql("INSERT INTO dk.stuck SELECT g, g % 11, 'bulk' FROM generate_series(600000, 660000) g");
                writer.awaitMore(10);
            } finally {
                first.kill();
            }
            assertEquals("lagging", state(flow, "dk.stuck").get("phase"), "the first kill lands while it is detached");

            ConnectWorker second = ConnectWorker.startProcess(workerProps, StackPaths.workDir("dk-worker-2"),
                    Duration.ofSeconds(120));
            try {
                second.rest().awaitRunning(flow, 2, Duration.ofSeconds(120));
                String confirmedBefore = slot(mainSlot).get("confirmed_flush_lsn");
                writer.awaitMore(10);
                // the new worker's apply task goes on without the detached table, which keeps its private slot
                Map<String, String> still = state(flow, "dk.stuck");
                assertEquals("lagging", still.get("phase"), still.toString());
                assertEquals(slot, still.get("detach_slot"), still.toString());
                assertEquals(detachLsn, still.get("detach_lsn"), still.toString());
                assertNotNull(slot(slot), "the private slot survives the kill");
                awaitTrue(() -> lsn(slot(mainSlot).get("confirmed_flush_lsn")) > lsn(confirmedBefore),
                        Duration.ofSeconds(60), "the shared slot is not confirmed after the restart");
                pg.freshness("dk.a", 900_000, 3, "0, 'fresh'");

                clickhouse.execute("ALTER TABLE dk_stuck DROP CONSTRAINT dk_refuse").get().close();
                Map<String, String> rejoining = awaitState(flow, "dk.stuck", row -> "copying".equals(row.get("phase"))
                        && row.get("detach_slot") != null, Duration.ofSeconds(120));
                second.kill();
                killedRejoining = state(flow, "dk.stuck");
                assertEquals(slot, rejoining.get("detach_slot"), rejoining.toString());
            } finally {
                second.kill();
            }
            assertEquals("copying", killedRejoining.get("phase"), "the second kill was meant to land while it rejoins: "
                    + killedRejoining);
            assertEquals(slot, killedRejoining.get("detach_slot"), killedRejoining.toString());
            // no task of the flow runs now: the status shows the rejoin the kill interrupted
            String status = StatusScript.run(stack, catalogUrl, "--flow", flow);
            assertTrue(status.lines().anyMatch(l -> l.trim().startsWith("dk.stuck") && l.contains("rejoining(" + detachLsn
                    + ")")), status);

            ConnectWorker third = ConnectWorker.startProcess(workerProps, StackPaths.workDir("dk-worker-3"),
                    Duration.ofSeconds(120));
            try {
                third.rest().awaitRunning(flow, 2, Duration.ofSeconds(120));
                Map<String, String> back = awaitState(flow, "dk.stuck", row -> "ready".equals(row.get("phase"))
                        && row.get("detach_slot") == null && lsn(row.get("phase_lsn")) > lsn(detachLsn),
                        Duration.ofSeconds(180));
                awaitTrue(() -> slot(slot) == null, Duration.ofSeconds(60), "the private slot " + slot + " was not dropped");
                // its private slot outlived both kills: the rejoin started again from it, no copy from scratch
                List<String> seen = phases.of("dk.stuck");
                List<String> sinceDetached = seen.subList(Math.max(0, seen.indexOf("lagging[" + slot + "]")), seen.size());
                assertTrue(seen.contains("lagging[" + slot + "]") && sinceDetached.stream().noneMatch(p ->
                        p.equals("copying") || p.startsWith("pending") || p.startsWith("errored")),
                        "rejoined without a copy: " + seen);
                writer.awaitMore(10);
                writer.close();
                awaitSettled(flow, names, prefix);
                pg.awaitEqual(tables, Duration.ofSeconds(180));
                phases.close();
                System.out.printf("pg detach, kills: detached at %s (slot %s); SIGKILL while lagging, then while"
                                + " rejoining (%s); ready(%s) after a third worker took over; %d writer transactions;"
                                + " ClickHouse equals Postgres%n%s%n", detachLsn, slot, killedRejoining,
                        back.get("phase_lsn"), writer.written.get(), phases.report());
                third.rest().delete(flow);
            } finally {
                third.close();
            }
        }
        stack.connect().rest().delete("dk-sink");
    }

    /** Waits until every table is {@code ready} without a private slot, and no private slot of the flow is left. */
    private static void awaitSettled(String flow, List<String> names, String prefix) throws Exception {
        AtomicReference<String> last = new AtomicReference<>();
        awaitTrue(() -> {
            StringBuilder seen = new StringBuilder();
            boolean settled = true;
            for (String table : names) {
                Map<String, String> row = state(flow, table);
                if (!"ready".equals(row.get("phase")) || row.get("detach_slot") != null) {
                    settled = false;
                    seen.append(table).append(' ').append(row).append("; ");
                }
            }
            String slots = pg.sourceValue("SELECT string_agg(slot_name, ', ') FROM pg_replication_slots WHERE slot_name"
                    + " LIKE ?", prefix.replace("_", "\\_") + "\\_detach\\_%");
            if (slots != null) {
                settled = false;
                seen.append("private slots ").append(slots);
            }
            last.set(seen.toString());
            return settled;
        }, Duration.ofSeconds(180), "the flow never settled with every table ready: " + last);
    }

    /**
     * Phase changes of the flow's tables (and their private slots) as the catalog shows them, read every 200 ms; the
     * tests print them.
     */
    private static final class PhaseLog implements AutoCloseable {
        private final List<String> changes = Collections.synchronizedList(new ArrayList<>());
        private final Thread thread;
        private volatile boolean running = true;

        PhaseLog(String flow) {
            long start = System.nanoTime();
            thread = new Thread(() -> {
                Map<String, String> last = new HashMap<>();
                while (running) {
                    try (Connection c = pg.catalog(); PreparedStatement ps = c.prepareStatement("SELECT"
                            + " source_table_identifier, phase, detach_slot FROM cdc_table_replication_state"
                            + " WHERE flow_name = ? ORDER BY 1")) {
                        ps.setString(1, flow);
                        try (ResultSet rs = ps.executeQuery()) {
                            while (rs.next()) {
                                String now = rs.getString(2) + (rs.getString(3) == null ? "" : "[" + rs.getString(3) + "]");
                                String before = last.put(rs.getString(1), now);
                                if (!now.equals(before)) {
                                    changes.add(String.format("%6.1f s %s %s -> %s", (System.nanoTime() - start) / 1e9,
                                            rs.getString(1), before, now));
                                }
                            }
                        }
                        Thread.sleep(200);
                    } catch (InterruptedException e) {
                        return;
                    } catch (SQLException e) {
                        // e.g. before the flow's first start made the catalog's tables
                        String error = "catalog unreadable: " + e.getMessage();
                        if (!error.equals(last.put("", error))) {
                            changes.add(error);
                        }
                        try {
                            Thread.sleep(200);
                        } catch (InterruptedException stop) {
                            return;
                        }
                    }
                }
            }, "phase-log");
            thread.setDaemon(true);
            thread.start();
        }

        /** The states seen of {@code table}, in order ({@code phase} or {@code phase[private slot]}). */
        List<String> of(String table) {
            List<String> states = new ArrayList<>();
            synchronized (changes) {
                for (String change : changes) {
                    String[] parts = change.trim().split(" ");
                    if (parts.length == 6 && parts[2].equals(table)) {
                        states.add(parts[5]);
                    }
                }
            }
            return states;
        }

        String report() {
            synchronized (changes) {
                return String.join("\n", changes);
            }
        }

        @Override
        public void close() throws InterruptedException {
            running = false;
            thread.join(5_000);
        }
    }

    /** {@code attribute} of every MBean the flow's tasks publish for {@code table}. */
    private static List<Object> metric(String flow, String table, String attribute) throws Exception {
        List<Object> values = new ArrayList<>();
        for (ObjectName name : jmx.queryNames(new ObjectName("kafka.connect:type=plugins,connector="
                + Sanitizer.jmxSanitize(flow) + ",flow=" + Sanitizer.jmxSanitize(flow) + ",table="
                + Sanitizer.jmxSanitize(table) + ",*"), null)) {
            values.add(jmx.getAttribute(name, attribute));
        }
        return values;
    }

    /** The catalog row of {@code table} with the detach columns; null when there is none. */
    private static Map<String, String> state(String flow, String table) throws SQLException {
        try (Connection c = pg.catalog(); PreparedStatement ps = c.prepareStatement("SELECT phase, phase_lsn, detach_slot,"
                + " detach_lsn, detached_at::text, synced_batch_id::text, normalized_batch_id::text, copy_attempt::text,"
                + " copy_lease_owner, last_error FROM cdc_table_replication_state"
                + " WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return null;
                }
                Map<String, String> row = new LinkedHashMap<>();
                String[] names = {"phase", "phase_lsn", "detach_slot", "detach_lsn", "detached_at", "synced_batch_id",
                    "normalized_batch_id", "copy_attempt", "copy_lease_owner", "last_error"};
                for (int i = 0; i < names.length; i++) {
                    row.put(names[i], rs.getString(i + 1));
                }
                return row;
            }
        }
    }

    private static Map<String, String> awaitState(String flow, String table, Predicate<Map<String, String>> done,
                                                  Duration timeout) throws Exception {
        AtomicReference<Map<String, String>> seen = new AtomicReference<>();
        try {
            awaitTrue(() -> {
                seen.set(state(flow, table));
                return seen.get() != null && done.test(seen.get());
            }, timeout, "");
        } catch (AssertionError e) {
            throw new AssertionError("catalog row of " + table + " never as expected; last seen " + seen.get());
        }
        return seen.get();
    }

    /** Lagging at a recorded marker while the sink's normalize of the table fails. */
    private static boolean detachedWhileFailing(Map<String, String> row) {
        return "lagging".equals(row.get("phase")) && row.get("detach_lsn") != null && row.get("last_error") != null
                && row.get("last_error").startsWith("normalize:");
    }

    private static long unnormalized(Map<String, String> row) {
        return Long.parseLong(row.get("synced_batch_id")) - Long.parseLong(row.get("normalized_batch_id"));
    }

    /** The slot's row in pg_replication_slots (type, database, temporary, confirmed_flush_lsn), or null. */
    private static Map<String, String> slot(String name) throws SQLException {
        try (Connection c = pg.source(); PreparedStatement ps = c.prepareStatement("SELECT slot_type, database,"
                + " temporary::text, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = ?")) {
            ps.setString(1, name);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return null;
                }
                Map<String, String> row = new HashMap<>();
                row.put("slot_type", rs.getString(1));
                row.put("database", rs.getString(2));
                row.put("temporary", rs.getString(3).substring(0, 1));
                row.put("confirmed_flush_lsn", rs.getString(4));
                return row;
            }
        }
    }







    private static long lsn(String text) {
        assertNotNull(text, "no LSN");
        String[] parts = text.split("/");
        return (Long.parseLong(parts[0], 16) << 32) | Long.parseLong(parts[1], 16);
    }
}
