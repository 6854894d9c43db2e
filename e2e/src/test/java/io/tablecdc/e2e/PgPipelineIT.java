package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The Postgres pipeline source (apply task, no copy) deployed through the Connect REST API from its Hub archive,
 * streaming a publication of three tables, with the stage sink loading its batches into ClickHouse; both share one
 * catalog. ClickHouse ({@code FINAL}) must equal Postgres row for row, also across a restart mid-stream.
 */
class PgPipelineIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String SOURCE = SourceConfigs.PG_PIPELINE;
    private static final String DATABASE = "pgit_source";
    private static final String FLOW = "pgit-flow";
    private static final String SINK = "pgit-sink";

    /** Each table with its row as text, the same on both sides. */
    private static final Map<String, String[]> TABLES = Map.of(
            "shop.orders", new String[] {
                    "id::text || '|' || coalesce(customer, '-') || '|' || coalesce(amount::text, '-') || '|' || paid::text",
                    "concat(toString(id), '|', ifNull(customer, '-'), '|', ifNull(toString(amount), '-'), '|',"
                            + " if(paid, 'true', 'false'))"},
            "shop.items", new String[] {
                    "order_id::text || '|' || line::text || '|' || sku || '|' || qty::text",
                    "concat(toString(order_id), '|', toString(line), '|', sku, '|', toString(qty))"},
            "public.notes", new String[] {
                    "id::text || '|' || coalesce(body, '-')",
                    "concat(toString(id), '|', ifNull(body, '-'))"});

    private static String catalogUrl;
    private static Client clickhouse;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("pgit_catalog");
        clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                .compressServerResponse(false).build();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
        sql("DROP PUBLICATION IF EXISTS pgit_pub",
                "DROP SCHEMA IF EXISTS shop CASCADE",
                "DROP TABLE IF EXISTS public.notes",
                "CREATE SCHEMA shop",
                "CREATE TABLE shop.orders (id bigint PRIMARY KEY, customer text, amount numeric(12, 2), paid boolean NOT NULL)",
                "CREATE TABLE shop.items (order_id int, line int, sku text NOT NULL, qty int NOT NULL,"
                        + " PRIMARY KEY (order_id, line))",
                "CREATE TABLE public.notes (id int PRIMARY KEY, body text)",
                // full replica identity: the key comes from the primary key, not from the wire flags
                "ALTER TABLE public.notes REPLICA IDENTITY FULL",
                "CREATE PUBLICATION pgit_pub FOR TABLE shop.orders, shop.items, public.notes");
    }

    private static Connection source() throws SQLException {
        return pg.source();
    }

    private static void sql(String... statements) throws SQLException {
        pg.sql(statements);
    }

    /** Runs the statements as one transaction. */
    private static void transaction(String... statements) throws SQLException {
        pg.transaction(statements);
    }

    private static Map<String, String> sourceConfig() {
        Map<String, String> config = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "pgit_pub", "pgit");
        // small batches: a transaction of one table is cut into several
        config.put("batch.rows", "7");
        return config;
    }

    private static Map<String, String> sinkConfig() {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "pgit-stage");
        config.put("topics.regex", "pgit\\..*");
        config.put("stage.local.dir", StackPaths.workDir("pgit-sink-local").toString());
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "2000");
        // the source creates its topics after the sink subscribed: see new topics within a second
        config.put("consumer.override.metadata.max.age.ms", "1000");
        return config;
    }

    @Test
    void streamsInsertsUpdatesAndDeletesOfSeveralTablesAndSurvivesARestart() throws Exception {
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> valid = sourceConfig();
        valid.put("name", FLOW);
        assertEquals(List.of(), ConnectRestClient.validationErrors(rest.validate(SOURCE, valid)));
        Map<String, String> copying = new HashMap<>(valid);
        copying.put("table.sync.copy", "all");
        copying.put("publication.name", "no_such_pub");
        String refused = String.join("; ", ConnectRestClient.validationErrors(rest.validate(SOURCE, copying)));
        // copying with one task is accepted (that task applies and copies in turn)
        assertTrue(!refused.contains("tasks.max"), refused);
        assertTrue(refused.contains("publication no_such_pub does not exist"), refused);

        rest.putConfig(SINK, sinkConfig());
        rest.putConfig(FLOW, sourceConfig());
        rest.awaitRunning(FLOW, 1, Duration.ofSeconds(90));
        rest.awaitRunning(SINK, 1, Duration.ofSeconds(90));
        String slot = flowSlot();
        assertTrue(slot.matches("pgit_[0-9a-f]{16}"), slot);
        String startConfirmed = confirmedFlush(slot);

        // several transactions over several tables
        StringBuilder orders = new StringBuilder("INSERT INTO shop.orders VALUES ");
        for (int i = 1; i <= 30; i++) {
            orders.append(i == 1 ? "" : ", ").append("(").append(i).append(", 'c").append(i).append("', ")
                    .append(i).append(".25, false)");
        }
        transaction(orders.toString(),
                "INSERT INTO shop.items SELECT o, l, 'sku' || o || '-' || l, l FROM generate_series(1, 10) o,"
                        + " generate_series(1, 3) l");
        transaction("INSERT INTO public.notes VALUES (1, 'first'), (2, 'second'), (3, null)");
        // one row changed several times in one transaction: the ordinal orders them
        transaction("UPDATE shop.orders SET customer = 'x1' WHERE id = 5",
                "UPDATE shop.orders SET customer = 'x2', amount = 99.99 WHERE id = 5",
                "UPDATE shop.orders SET paid = true WHERE id = 5",
                "DELETE FROM shop.items WHERE order_id = 2",
                "UPDATE public.notes SET body = 'changed' WHERE id = 1");
        transaction("DELETE FROM shop.orders WHERE id BETWEEN 20 AND 25",
                "INSERT INTO shop.orders VALUES (20, 'back', 1.75, true)");
        // a key that changes: the old key's row is gone from ClickHouse too
        transaction("UPDATE shop.items SET line = 9 WHERE order_id = 3 AND line = 1",
                "UPDATE public.notes SET id = 30 WHERE id = 3");
        sql("DELETE FROM public.notes WHERE id = 2");
        awaitEqual(Duration.ofSeconds(120));

        // the position is confirmed to the slot once Connect stored it
        awaitTrue(() -> lsnValue(confirmedFlush(slot)) > lsnValue(startConfirmed), Duration.ofSeconds(60),
                "the slot's confirmed_flush_lsn never moved past " + startConfirmed);
        assertCatalog(slot);

        // restart mid-stream: a writer keeps committing while the connector restarts
        AtomicBoolean writing = new AtomicBoolean(true);
        AtomicInteger written = new AtomicInteger();
        AtomicReference<Exception> writerError = new AtomicReference<>();
        Thread writer = new Thread(() -> {
            int id = 1000;
            while (writing.get()) {
                try {
                    id++;
                    transaction("INSERT INTO shop.orders VALUES (" + id + ", 'w', " + id + ".25, false)",
                            "UPDATE shop.orders SET amount = amount + 1 WHERE id = " + (id - 1),
                            "INSERT INTO shop.items VALUES (" + id + ", 1, 'w', 1)",
                            "DELETE FROM shop.items WHERE order_id = " + (id - 1));
                    written.incrementAndGet();
                    Thread.sleep(20);
                } catch (Exception e) {
                    writerError.set(e);
                    return;
                }
            }
        }, "pgit-writer");
        writer.start();
        awaitTrue(() -> written.get() >= 20, Duration.ofSeconds(30), "the writer did not write");
        rest.restart(FLOW, true, false);
        Thread.sleep(2_000);
        rest.awaitRunning(FLOW, 1, Duration.ofSeconds(120));
        int atRestart = written.get();
        awaitTrue(() -> written.get() >= atRestart + 50, Duration.ofSeconds(60), "the writer stalled");
        writing.set(false);
        writer.join();
        assertEquals(null, writerError.get());
        awaitEqual(Duration.ofSeconds(180));
        assertEquals(slot, flowSlot(), "the restart resumed the same slot");
        assertEquals(List.of("RUNNING", "RUNNING"), rest.states(FLOW));
        System.out.printf("pg pipeline: %d writer transactions across a restart, ClickHouse equals Postgres%n", written.get());

        rest.delete(FLOW);
        rest.delete(SINK);
    }

    /**
     * One table fails (a key value the converter cannot represent: a numeric key of 'NaN' becomes null): it is marked errored
     * and skipped while its neighbours keep streaming (tables are not copied here, so it stays errored); an UPDATE that
     * leaves a TOAST value untouched keeps it. A TRUNCATE empties the table in ClickHouse; a table added to the
     * publication while the flow runs streams from then on.
     */
    @Test
    void oneFailingTableLeavesTheOthersStreaming() throws Exception {
        sql("DROP PUBLICATION IF EXISTS pgiso_pub",
                "DROP SCHEMA IF EXISTS iso CASCADE",
                "CREATE SCHEMA iso",
                "CREATE TABLE iso.good (id int PRIMARY KEY, v text)",
                "CREATE TABLE iso.toasty (id int PRIMARY KEY, big text, n int)",
                "CREATE TABLE iso.later (id int PRIMARY KEY, v text)",
                "CREATE TABLE iso.bad (d numeric(10, 0) PRIMARY KEY, n int)",
                "CREATE PUBLICATION pgiso_pub FOR TABLE iso.good, iso.toasty, iso.bad");
        String flow = "pgiso-flow";
        String sink = "pgiso-sink";
        Map<String, String> source = sourceConfig();
        source.put("publication.name", "pgiso_pub");
        source.put("slot.prefix", "pgiso");
        source.put("topic.prefix", "pgiso");
        Map<String, String> sinkConfig = sinkConfig();
        sinkConfig.put("topics.regex", "pgiso\\..*");
        sinkConfig.put("stage.uri", sinkConfig.get("stage.uri") + "-iso");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(sink, sinkConfig);
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 1, Duration.ofSeconds(90));

        // 32000 characters of md5 hex: stored out of line (TOAST)
        transaction("INSERT INTO iso.toasty VALUES (1, (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 1000) g), 1)",
                "INSERT INTO iso.good VALUES (1, 'a')");
        awaitCount("iso_toasty", 1);
        awaitCount("iso_good", 1);
        assertEquals(32000L, clickhouse.queryAll("SELECT length(big) AS n FROM iso_toasty FINAL").get(0).getLong("n"));

        transaction("UPDATE iso.toasty SET n = 2 WHERE id = 1", "INSERT INTO iso.good VALUES (2, 'b')",
                "INSERT INTO iso.bad VALUES (1, 1)");
        awaitCount("iso_bad", 1);
        sql("INSERT INTO iso.bad VALUES ('NaN', 2)", "INSERT INTO iso.good VALUES (3, 'c')");
        awaitCount("iso_good", 3);
        String[] bad = awaitTable(flow, "iso.bad", row -> "errored".equals(row[0]));
        assertTrue(bad[1].contains("key column d is null"), bad[1]);
        sql("INSERT INTO iso.bad VALUES (3, 3)", "INSERT INTO iso.good VALUES (4, 'd')");
        awaitCount("iso_good", 4);
        Thread.sleep(2_000);
        assertEquals(1L, clickhouse.queryAll("SELECT count() AS n FROM iso_bad FINAL").get(0).getLong("n"),
                "the errored table's later changes are skipped");
        // the untouched TOAST value is kept: the table stays ready
        awaitTrue(() -> clickhouse.queryAll("SELECT n FROM iso_toasty FINAL WHERE id = 1").get(0).getLong("n") == 2,
                Duration.ofSeconds(60), "the update of iso.toasty never reached ClickHouse");
        assertEquals(32000L, clickhouse.queryAll("SELECT length(big) AS n FROM iso_toasty FINAL").get(0).getLong("n"));
        assertEquals("ready", awaitTable(flow, "iso.toasty", row -> true)[0]);
        assertEquals(List.of("RUNNING", "RUNNING"), rest.states(flow), "one table's failure does not fail the task");

        // TRUNCATE: the rows before it leave ClickHouse, the ones after it arrive
        transaction("INSERT INTO iso.good VALUES (9, 'before truncate')", "TRUNCATE iso.good",
                "INSERT INTO iso.good VALUES (10, 'after truncate')");
        awaitTrue(() -> clickhouse.queryAll("SELECT groupArray(id) AS ids FROM (SELECT id FROM iso_good FINAL"
                + " WHERE _tablecdc_is_deleted = 0 ORDER BY id)").get(0).getString("ids").equals("[10]"),
                Duration.ofSeconds(90), "iso_good never held only the row inserted after the TRUNCATE");
        assertEquals("ready", awaitTable(flow, "iso.good", row -> true)[0]);

        // a column added while the flow runs: a new Relation message, a new value schema, a new ClickHouse column
        sql("ALTER TABLE iso.good ADD COLUMN extra text", "INSERT INTO iso.good VALUES (11, 'with extra', 'x')");
        awaitCount("iso_good", 2);
        assertEquals("x", clickhouse.queryAll("SELECT extra FROM iso_good FINAL WHERE id = 11").get(0).getString("extra"));

        // a table added to the publication while the flow runs
        sql("ALTER PUBLICATION pgiso_pub ADD TABLE iso.later", "INSERT INTO iso.later VALUES (1, 'late')");
        awaitCount("iso_later", 1);
        assertEquals("ready", awaitTable(flow, "iso.later", row -> "ready".equals(row[0]))[0]);
        rest.delete(flow);
        rest.delete(sink);
    }

    /**
     * The worker running the source is killed (SIGKILL: no offset flush, no graceful stop) while a writer commits;
     * a second worker of the same Connect cluster resumes the flow from its stored offsets and slot: nothing is lost.
     */
    @Test
    void killingTheSourceWorkerLosesNothing() throws Exception {
        sql("DROP PUBLICATION IF EXISTS pgcrash_pub",
                "DROP SCHEMA IF EXISTS crash CASCADE",
                "CREATE SCHEMA crash",
                "CREATE TABLE crash.events (id int PRIMARY KEY, v int NOT NULL, note text)",
                "CREATE PUBLICATION pgcrash_pub FOR TABLE crash.events");
        Map<String, String[]> tables = Map.of("crash.events", new String[] {
                "id::text || '|' || v::text || '|' || coalesce(note, '-')",
                "concat(toString(id), '|', toString(v), '|', ifNull(note, '-'))"});
        String flow = "pgcrash-flow";
        Map<String, String> source = sourceConfig();
        source.put("publication.name", "pgcrash_pub");
        source.put("slot.prefix", "pgcrash");
        source.put("topic.prefix", "pgcrash");
        Map<String, String> sinkConfig = sinkConfig();
        sinkConfig.put("topics.regex", "pgcrash\\..*");
        sinkConfig.put("stage.uri", sinkConfig.get("stage.uri") + "-crash");
        stack.connect().rest().putConfig("pgcrash-sink", sinkConfig);

        AtomicBoolean writing = new AtomicBoolean(true);
        AtomicInteger written = new AtomicInteger();
        AtomicReference<Exception> writerError = new AtomicReference<>();
        Thread writer = new Thread(() -> {
            int id = 0;
            while (writing.get()) {
                try {
                    id++;
                    List<String> statements = new ArrayList<>();
                    statements.add("INSERT INTO crash.events VALUES (" + id + ", 0, 'n" + id + "')");
                    statements.add("UPDATE crash.events SET v = v + 1 WHERE id > " + (id - 5));
                    if (id % 3 == 0) {
                        statements.add("DELETE FROM crash.events WHERE id = " + (id - 2));
                    }
                    transaction(statements.toArray(new String[0]));
                    written.incrementAndGet();
                    Thread.sleep(10);
                } catch (Exception e) {
                    writerError.set(e);
                    return;
                }
            }
        }, "pgcrash-writer");

        String group = "pgcrash-" + System.nanoTime();
        Map<String, String> workerProps = io.tablecdc.e2e.stack.ConnectWorker.workerProperties(
                stack.kafka().bootstrapServers(), group, stack.pluginPath());
        io.tablecdc.e2e.stack.ConnectWorker first = io.tablecdc.e2e.stack.ConnectWorker.startProcess(workerProps,
                StackPaths.workDir("pgcrash-worker-1"), Duration.ofSeconds(120));
        String slot;
        try {
            first.rest().putConfig(flow, source);
            first.rest().awaitRunning(flow, 1, Duration.ofSeconds(90));
            writer.start();
            awaitTrue(() -> written.get() >= 100, Duration.ofSeconds(60), "the writer did not write");
            slot = flowSlot(flow);
        } finally {
            first.kill();
        }
        int atKill = written.get();
        io.tablecdc.e2e.stack.ConnectWorker second = io.tablecdc.e2e.stack.ConnectWorker.startProcess(workerProps,
                StackPaths.workDir("pgcrash-worker-2"), Duration.ofSeconds(120));
        try {
            second.rest().awaitRunning(flow, 1, Duration.ofSeconds(120));
            awaitTrue(() -> written.get() >= atKill + 100, Duration.ofSeconds(60), "the writer stalled");
            writing.set(false);
            writer.join();
            assertEquals(null, writerError.get());
            awaitEqual(tables, Duration.ofSeconds(180));
            assertEquals(slot, flowSlot(flow), "the second worker resumed the same slot");
            System.out.printf("pg pipeline: %d writer transactions across a SIGKILL of the source's worker (%d before),"
                    + " ClickHouse equals Postgres%n", written.get(), atKill);
            second.rest().delete(flow);
        } finally {
            writing.set(false);
            second.close();
        }
        stack.connect().rest().delete("pgcrash-sink");
    }

    private static void awaitCount(String clickHouseTable, long rows) throws Exception {
        awaitTrue(() -> {
            try {
                return clickhouse.queryAll("SELECT count() AS n FROM " + clickHouseTable + " FINAL WHERE _tablecdc_is_deleted = 0")
                        .get(0).getLong("n") == rows;
            } catch (RuntimeException e) {
                return false;
            }
        }, Duration.ofSeconds(90), clickHouseTable + " never had " + rows + " rows");
    }

    /** The table's {phase, last_error} once {@code done} holds. */
    private static String[] awaitTable(String flow, String table, java.util.function.Predicate<String[]> done) throws Exception {
        AtomicReference<String[]> seen = new AtomicReference<>();
        awaitTrue(() -> {
            try (Connection c = java.sql.DriverManager.getConnection(catalogUrl, stack.postgres().user(), stack.postgres().password());
                 PreparedStatement ps = c.prepareStatement("SELECT phase, last_error FROM cdc_table_replication_state"
                         + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                try (ResultSet rs = ps.executeQuery()) {
                    if (!rs.next()) {
                        return false;
                    }
                    seen.set(new String[] {rs.getString(1), rs.getString(2)});
                    return done.test(seen.get());
                }
            }
        }, Duration.ofSeconds(60), "catalog row of " + table + " never as expected");
        return seen.get();
    }

    private static void assertCatalog(String slot) throws SQLException {
        try (Connection c = java.sql.DriverManager.getConnection(catalogUrl, stack.postgres().user(), stack.postgres().password())) {
            try (PreparedStatement ps = c.prepareStatement("SELECT source_kind, source_system_identifier, source_timeline,"
                    + " source_publication FROM cdc_flow WHERE flow_name = ?")) {
                ps.setString(1, FLOW);
                try (ResultSet rs = ps.executeQuery()) {
                    assertTrue(rs.next());
                    assertEquals("pg_pipeline", rs.getString(1));
                    assertNotNull(rs.getString(2));
                    assertTrue(rs.getLong(3) >= 1);
                    assertEquals("pgit_pub", rs.getString(4));
                }
            }
            try (PreparedStatement ps = c.prepareStatement("SELECT source_table_identifier, phase, synced_batch_id"
                    + " FROM cdc_table_replication_state WHERE flow_name = ? ORDER BY 1")) {
                ps.setString(1, FLOW);
                List<String> rows = new ArrayList<>();
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        rows.add(rs.getString(1) + ":" + rs.getString(2));
                        assertTrue(rs.getLong(3) >= 1, rs.getString(1) + " has no synced batch");
                    }
                }
                assertEquals(List.of("public.notes:ready", "shop.items:ready", "shop.orders:ready"), rows);
            }
        }
    }

    private static String flowSlot() throws SQLException {
        return flowSlot(FLOW);
    }

    private static String flowSlot(String flow) throws SQLException {
        try (Connection c = java.sql.DriverManager.getConnection(catalogUrl, stack.postgres().user(), stack.postgres().password());
             PreparedStatement ps = c.prepareStatement("SELECT source_slot FROM cdc_flow WHERE flow_name = ?")) {
            ps.setString(1, flow);
            try (ResultSet rs = ps.executeQuery()) {
                assertTrue(rs.next(), "flow " + flow + " is not in cdc_flow");
                return rs.getString(1);
            }
        }
    }

    private static String confirmedFlush(String slot) throws SQLException {
        try (Connection c = source();
             PreparedStatement ps = c.prepareStatement("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = ?")) {
            ps.setString(1, slot);
            try (ResultSet rs = ps.executeQuery()) {
                assertTrue(rs.next(), "slot " + slot + " does not exist");
                return rs.getString(1);
            }
        }
    }

    private static long lsnValue(String lsn) {
        String[] parts = lsn.split("/");
        return (Long.parseLong(parts[0], 16) << 32) | Long.parseLong(parts[1], 16);
    }

    private static void awaitTrue(PgChecks.Check check, Duration timeout, String message) throws Exception {
        PgChecks.awaitTrue(check, timeout, message);
    }

    /** Waits until every table's rows in ClickHouse (FINAL, without deletes) equal Postgres's, row for row. */
    private static void awaitEqual(Duration timeout) throws Exception {
        pg.awaitEqual(TABLES, timeout);
    }

    private static void awaitEqual(Map<String, String[]> tables, Duration timeout) throws Exception {
        pg.awaitEqual(tables, timeout);
    }
}
