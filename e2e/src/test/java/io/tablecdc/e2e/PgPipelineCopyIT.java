package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
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
import io.tablecdc.e2e.flows.StatusScript;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Copy tasks and the handover, end to end through the Connect REST API into ClickHouse: tables with rows are copied
 * while a writer keeps inserting, updating and deleting in all of them, handed over to the apply task, and from
 * then on streamed; ClickHouse ({@code FINAL}) must equal Postgres row for row. Also a table added to the
 * publication while the flow runs, a multi-table TRUNCATE, a restart while streaming and a SIGKILL of the worker in
 * the middle of a copy.
 */
class PgPipelineCopyIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String SOURCE = SourceConfigs.PG_PIPELINE;
    private static final String DATABASE = "pgcopy_source";

    /** Table → {Postgres row text, ClickHouse row text}. */
    private static final Map<String, String[]> TABLES = new LinkedHashMap<>();

    static {
        TABLES.put("cp.big", new String[] {"id::text || '|' || v::text || '|' || coalesce(note, '-')",
                "concat(toString(id), '|', toString(v), '|', ifNull(note, '-'))"});
        TABLES.put("cp.pairs", new String[] {"a::text || '|' || b::text || '|' || s",
                "concat(toString(a), '|', toString(b), '|', s)"});
        TABLES.put("cp.money", new String[] {"id::text || '|' || coalesce(amount::text, '-')",
                "concat(toString(id), '|', ifNull(toString(amount), '-'))"});
        TABLES.put("cp.full", new String[] {"id::text || '|' || coalesce(body, '-')",
                "concat(toString(id), '|', ifNull(body, '-'))"});
        TABLES.put("cp.ids", new String[] {"id::text || '|' || label", "concat(toString(id), '|', label)"});
    }

    private static String catalogUrl;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("pgcopy_catalog");
        Client clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
    }

    private static Map<String, String> sourceConfig(String prefix, String publication) {
        Map<String, String> config = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, prefix);
        config.put("tasks.max", "3");
        config.put("table.sync.copy", "all");
        config.put("copy.connections.per.table", "2");
        config.put("batch.rows", "500");
        return config;
    }

    private static Map<String, String> sinkConfig(String prefix) {
        Map<String, String> config = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);
        return config;
    }

    /** A writer touching every table of {@code tables} in each transaction until stopped. */
    private static final class Writer implements AutoCloseable {
        final AtomicBoolean writing = new AtomicBoolean(true);
        final AtomicInteger written = new AtomicInteger();
        final AtomicReference<Exception> error = new AtomicReference<>();
        final Thread thread;

        Writer(String name, java.util.function.IntFunction<List<String>> transaction) {
            thread = new Thread(() -> {
                int n = 0;
                while (writing.get()) {
                    try {
                        n++;
                        pg.transaction(transaction.apply(n).toArray(new String[0]));
                        written.incrementAndGet();
                        Thread.sleep(15);
                    } catch (Exception e) {
                        error.set(e);
                        return;
                    }
                }
            }, name);
            thread.start();
        }

        void awaitMore(int transactions) throws Exception {
            int from = written.get();
            awaitTrue(() -> written.get() >= from + transactions || error.get() != null, Duration.ofSeconds(60),
                    "the writer stalled");
            assertNull(error.get());
        }

        @Override
        public void close() throws Exception {
            writing.set(false);
            thread.join();
            assertNull(error.get(), () -> "writer failed: " + error.get());
        }
    }

    private static List<String> fiveTableTransaction(int n) {
        List<String> s = new ArrayList<>();
        s.add("INSERT INTO cp.big VALUES (" + (100_000 + n) + ", " + n + ", 'new')");
        s.add("UPDATE cp.big SET v = v + 1, note = 'w" + n + "' WHERE id = " + ((n * 37) % 20_000 + 1));
        s.add("DELETE FROM cp.big WHERE id = " + ((n * 53) % 20_000 + 1));
        s.add("INSERT INTO cp.pairs VALUES (" + (10_000 + n) + ", 1, 'new')");
        s.add("UPDATE cp.pairs SET s = 'w" + n + "' WHERE a = " + ((n * 7) % 1000 + 1) + " AND b = 2");
        s.add("DELETE FROM cp.pairs WHERE a = " + ((n * 11) % 1000 + 1) + " AND b = 3");
        s.add("INSERT INTO cp.money VALUES (" + (10_000 + n) + ", " + n + " * 1.25 + 0.01)");
        s.add("UPDATE cp.money SET amount = amount + 1 WHERE id = " + ((n * 13) % 3000 + 1));
        s.add("INSERT INTO cp.full VALUES (" + (10_000 + n) + ", 'new')");
        s.add("UPDATE cp.full SET body = 'w" + n + "' WHERE id = " + ((n * 17) % 2000 + 1));
        s.add("DELETE FROM cp.full WHERE id = " + ((n * 19) % 2000 + 1));
        s.add("INSERT INTO cp.ids SELECT gen_random_uuid(), 'new" + n + "'");
        s.add("UPDATE cp.ids SET label = 'w" + n + "' WHERE id = (SELECT id FROM cp.ids ORDER BY id LIMIT 1 OFFSET "
                + (n % 500) + ")");
        if (n % 4 == 0) {
            s.add("INSERT INTO cp.extra VALUES (" + (10_000 + n) + ", 'new')");
            s.add("UPDATE cp.extra SET v = 'w" + n + "' WHERE id = " + ((n * 3) % 500 + 1));
        }
        return s;
    }

    @Test
    void copiesTablesWhileAWriterRunsAndHandsThemOver() throws Exception {
        pg.sql("DROP PUBLICATION IF EXISTS pgcopy_pub",
                "DROP SCHEMA IF EXISTS cp CASCADE",
                "CREATE SCHEMA cp",
                "CREATE TABLE cp.big (id bigint PRIMARY KEY, v int NOT NULL, note text)",
                "INSERT INTO cp.big SELECT g, g % 97, CASE WHEN g % 5 = 0 THEN NULL ELSE 'row ' || g END"
                        + " FROM generate_series(1, 20000) g",
                "CREATE TABLE cp.pairs (a int, b int, s text NOT NULL, PRIMARY KEY (a, b))",
                "INSERT INTO cp.pairs SELECT a, b, 'p' || a || '-' || b FROM generate_series(1, 1000) a, generate_series(1, 4) b",
                "CREATE TABLE cp.money (id int PRIMARY KEY, amount numeric(12, 2))",
                "INSERT INTO cp.money SELECT g, g * 1.25 + 0.01 FROM generate_series(1, 3000) g",
                "CREATE TABLE cp.full (id int PRIMARY KEY, body text)",
                "ALTER TABLE cp.full REPLICA IDENTITY FULL",
                "INSERT INTO cp.full SELECT g, 'tab\tand\nnewline\\\\ ' || g FROM generate_series(1, 2000) g",
                "CREATE TABLE cp.ids (id uuid PRIMARY KEY, label varchar(20) NOT NULL)",
                "INSERT INTO cp.ids SELECT gen_random_uuid(), 'l' || g FROM generate_series(1, 1000) g",
                // not published yet: added while the flow runs
                "CREATE TABLE cp.extra (id int PRIMARY KEY, v text)",
                "INSERT INTO cp.extra SELECT g, 'e' || g FROM generate_series(1, 500) g",
                "CREATE PUBLICATION pgcopy_pub FOR TABLE cp.big, cp.pairs, cp.money, cp.full, cp.ids");
        String flow = "pgcopy-flow";
        String sink = "pgcopy-sink";
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> source = sourceConfig("pgcopy", "pgcopy_pub");
        source.put("name", flow);
        assertEquals(List.of(), ConnectRestClient.validationErrors(rest.validate(SOURCE, source)));
        Map<String, String> oneTask = new HashMap<>(source);
        oneTask.put("tasks.max", "1");
        // one task applies and copies in turn
        assertEquals(List.of(), ConnectRestClient.validationErrors(rest.validate(SOURCE, oneTask)));

        rest.putConfig(sink, sinkConfig("pgcopy"));
        long started = System.nanoTime();
        try (Writer writer = new Writer("pgcopy-writer", PgPipelineCopyIT::fiveTableTransaction)) {
            rest.putConfig(flow, sourceConfig("pgcopy", "pgcopy_pub"));
            rest.awaitRunning(flow, 3, Duration.ofSeconds(90));
            // progress is visible while the biggest table copies (or it was already done)
            Map<String, String> big = pg.awaitTable(flow, "cp.big", row -> "ready".equals(row.get("phase"))
                    || "catchup".equals(row.get("phase"))
                    || row.get("copy_rows_done") != null && Long.parseLong(row.get("copy_rows_done")) > 0,
                    Duration.ofSeconds(90));
            System.out.printf("pg copy: cp.big seen at %s, %s of %s rows%n", big.get("phase"), big.get("copy_rows_done"),
                    big.get("copy_rows_total"));
            for (String table : TABLES.keySet()) {
                pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(180));
            }
            System.out.printf("pg copy: five tables copied and handed over in %d s while %d writer transactions ran%n",
                    (System.nanoTime() - started) / 1_000_000_000, writer.written.get());
            writer.awaitMore(50);

            // a table added to the publication while the flow runs is copied and handed over; the others keep going
            pg.sql("ALTER PUBLICATION pgcopy_pub ADD TABLE cp.extra");
            pg.awaitTable(flow, "cp.extra", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            writer.awaitMore(30);

            // one TRUNCATE of two tables empties exactly those two; the writer fills them again
            pg.sql("TRUNCATE cp.pairs, cp.full");
            writer.awaitMore(30);

            // an operator resets one streaming table: it is copied again from scratch while the others stream
            Map<String, String> before = pg.table(flow, "cp.money");
            String reset = StatusScript.resetTable(stack, catalogUrl, flow, "cp.money");
            assertTrue(reset.contains("ready -> errored (reset)"), reset);
            pg.awaitTable(flow, "cp.money", row -> "ready".equals(row.get("phase"))
                    && !row.get("phase_lsn").equals(before.get("phase_lsn")), Duration.ofSeconds(120));
            writer.awaitMore(30);

            // a restart while streaming
            rest.restart(flow, true, false);
            Thread.sleep(2_000);
            rest.awaitRunning(flow, 3, Duration.ofSeconds(120));
            writer.awaitMore(50);
        }
        Map<String, String[]> all = new LinkedHashMap<>(TABLES);
        all.put("cp.extra", new String[] {"id::text || '|' || coalesce(v, '-')", "concat(toString(id), '|', ifNull(v, '-'))"});
        pg.awaitEqual(all, Duration.ofSeconds(240));
        Map<String, String> big = pg.table(flow, "cp.big");
        assertEquals("ready", big.get("phase"));
        assertEquals(big.get("copy_rows_total"), big.get("copy_rows_done"));
        assertTrue(Long.parseLong(big.get("copy_rows_done")) >= 19_000, big.toString());
        String status = StatusScript.run(stack, catalogUrl, "--flow", flow);
        assertTrue(status.contains("cp.extra") && status.contains("ready("), status);
        System.out.printf("pg copy: ClickHouse equals Postgres for six tables after copy, handover, a new table, a"
                + " TRUNCATE of two tables and a restart%n%s", status);
        rest.delete(flow);
        rest.delete(sink);
    }

    /**
     * The worker running the copy is killed (SIGKILL) in the middle of a table's copy while a writer commits; a
     * second worker resumes: the table's lease runs out, another copy attempt starts over (its truncate first) and
     * ClickHouse again equals Postgres.
     */
    @Test
    void killingTheWorkerDuringACopyLosesNothing() throws Exception {
        pg.sql("DROP PUBLICATION IF EXISTS pgkill_pub",
                "DROP SCHEMA IF EXISTS ck CASCADE",
                "CREATE SCHEMA ck",
                "CREATE TABLE ck.large (id int PRIMARY KEY, v int NOT NULL, pad text)",
                "INSERT INTO ck.large SELECT g, 0, repeat('x', 40) FROM generate_series(1, 100000) g",
                "CREATE PUBLICATION pgkill_pub FOR TABLE ck.large");
        Map<String, String[]> tables = Map.of("ck.large", new String[] {"id::text || '|' || v::text || '|' || coalesce(pad, '-')",
                "concat(toString(id), '|', toString(v), '|', ifNull(pad, '-'))"});
        String flow = "pgkill-flow";
        Map<String, String> source = sourceConfig("pgkill", "pgkill_pub");
        source.put("tasks.max", "2");
        source.put("copy.connections.per.table", "1");
        // 20 batches a copy attempt: each batch costs the sink one load, so smaller batches only make the test slower
        source.put("batch.rows", "5000");
        // the killed worker's hold on the table runs out after this long. Not 5 s: the surviving copy renews its lease
        // at a poll once a third of it has passed, and on two saturated cores Connect took up to 3.5 s to convert and
        // send one poll's 10,000 records (the batch size then), so a third of 5 s plus such a gap outlasted the lease
        // and the copy lost its own table and started over, up to four times in a row (logged as "spent N ms between
        // two polls")
        source.put("copy.lease.ms", "15000");
        stack.connect().rest().putConfig("pgkill-sink", sinkConfig("pgkill"));
        String group = "pgkill-" + System.nanoTime();
        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(), group,
                stack.pluginPath());
        try (Writer writer = new Writer("pgkill-writer", n -> List.of(
                "INSERT INTO ck.large VALUES (" + (1_000_000 + n) + ", 1, 'w')",
                "UPDATE ck.large SET v = v + 1 WHERE id = " + ((n * 7919) % 100_000 + 1),
                "DELETE FROM ck.large WHERE id = " + ((n * 104_729) % 100_000 + 1)))) {
            ConnectWorker first = ConnectWorker.startProcess(workerProps, StackPaths.workDir("pgkill-worker-1"),
                    Duration.ofSeconds(120));
            Map<String, String> during;
            try {
                first.rest().putConfig(flow, source);
                first.rest().awaitRunning(flow, 2, Duration.ofSeconds(90));
                during = pg.awaitTable(flow, "ck.large", row -> row.get("copy_rows_done") != null
                        && Long.parseLong(row.get("copy_rows_done")) >= 10_000, Duration.ofSeconds(120));
            } finally {
                first.kill();
            }
            assertEquals("copying", during.get("phase"), "the kill was meant to land in the middle of the copy");
            ConnectWorker second = ConnectWorker.startProcess(workerProps, StackPaths.workDir("pgkill-worker-2"),
                    Duration.ofSeconds(120));
            try {
                second.rest().awaitRunning(flow, 2, Duration.ofSeconds(120));
                Map<String, String> done = pg.awaitTable(flow, "ck.large", row -> "ready".equals(row.get("phase")),
                        Duration.ofSeconds(240));
                assertTrue(Integer.parseInt(done.get("copy_attempt")) >= 2, done.toString());
                writer.awaitMore(50);
                writer.close();
                pg.awaitEqual(tables, Duration.ofSeconds(180));
                System.out.printf("pg copy: SIGKILL at %s of %s copied rows; attempt %s finished; %d writer transactions;"
                        + " ClickHouse equals Postgres%n", during.get("copy_rows_done"), during.get("copy_rows_total"),
                        done.get("copy_attempt"), writer.written.get());
                second.rest().delete(flow);
            } finally {
                second.close();
            }
        }
        stack.connect().rest().delete("pgkill-sink");
    }

    /**
     * Two worker processes in one Connect cluster run one flow with four copy tasks: Connect spreads the tasks over
     * both workers, so copy tasks on both copy tables at the same time (seen in the catalog's leases), and ClickHouse
     * ends equal to Postgres.
     */
    @Test
    void copyTasksRunOnBothWorkersOfOneClusterAtOnce() throws Exception {
        List<String> names = List.of("sp.t1", "sp.t2", "sp.t3", "sp.t4");
        List<String> setup = new ArrayList<>(List.of("DROP PUBLICATION IF EXISTS pgspread_pub",
                "DROP SCHEMA IF EXISTS sp CASCADE", "CREATE SCHEMA sp"));
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String name : names) {
            setup.add("CREATE TABLE " + name + " (id int PRIMARY KEY, v text NOT NULL)");
            setup.add("INSERT INTO " + name + " SELECT g, md5(g::text) FROM generate_series(1, 30000) g");
            tables.put(name, new String[] {"id::text || '|' || v", "concat(toString(id), '|', v)"});
        }
        setup.add("CREATE PUBLICATION pgspread_pub FOR TABLE " + String.join(", ", names));
        pg.sql(setup.toArray(new String[0]));
        String flow = "pgspread-flow";
        Map<String, String> source = sourceConfig("pgspread", "pgspread_pub");
        source.put("tasks.max", "5");
        source.put("copy.connections.per.table", "1");
        source.put("batch.rows", "2000");
        stack.connect().rest().putConfig("pgspread-sink", sinkConfig("pgspread"));
        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                "pgspread-" + System.nanoTime(), stack.pluginPath());
        try (ConnectWorker first = ConnectWorker.startProcess(workerProps, StackPaths.workDir("pgspread-worker-1"),
                Duration.ofSeconds(120));
             ConnectWorker second = ConnectWorker.startProcess(workerProps, StackPaths.workDir("pgspread-worker-2"),
                     Duration.ofSeconds(120))) {
            ConnectRestClient rest = first.rest();
            rest.putConfig(flow, source);
            // three tasks on one worker, two on the other (once the second worker took its share)
            com.fasterxml.jackson.databind.JsonNode status = rest.awaitStatus(flow, st -> {
                java.util.Set<String> workers = new java.util.HashSet<>();
                int running = 0;
                for (com.fasterxml.jackson.databind.JsonNode task : st.path("tasks")) {
                    if ("RUNNING".equals(task.path("state").asText())) {
                        running++;
                        if (task.path("id").asInt() > 0) {
                            workers.add(task.path("worker_id").asText());
                        }
                    }
                }
                return running == 5 && workers.size() == 2;
            }, Duration.ofSeconds(120));
            Map<String, String> workerOfCopy = new HashMap<>();
            for (com.fasterxml.jackson.databind.JsonNode task : status.get("tasks")) {
                if (task.get("id").asInt() > 0) {
                    workerOfCopy.put("copy-" + task.get("id").asInt(), task.get("worker_id").asText());
                }
            }
            java.util.Set<String> concurrentWorkers = new java.util.HashSet<>();
            awaitTrue(() -> {
                java.util.Set<String> copyingOn = new java.util.HashSet<>();
                try (java.sql.Connection c = pg.catalog(); java.sql.PreparedStatement ps = c.prepareStatement(
                        "SELECT copy_lease_owner FROM cdc_table_replication_state WHERE flow_name = ? AND phase = 'copying'")) {
                    ps.setString(1, flow);
                    try (java.sql.ResultSet rs = ps.executeQuery()) {
                        while (rs.next()) {
                            java.util.regex.Matcher m = java.util.regex.Pattern.compile("/(copy-\\d+)-").matcher(rs.getString(1));
                            if (m.find()) {
                                copyingOn.add(workerOfCopy.get(m.group(1)));
                            }
                        }
                    }
                }
                if (copyingOn.size() >= 2) {
                    concurrentWorkers.addAll(copyingOn);
                    return true;
                }
                return names.stream().allMatch(t -> {
                    try {
                        return "ready".equals(pg.table(flow, t).get("phase"));
                    } catch (java.sql.SQLException e) {
                        return false;
                    }
                });
            }, Duration.ofSeconds(120), "the tables were never copied");
            assertEquals(2, concurrentWorkers.size(), "no moment with copies running on both workers at once");
            for (String name : names) {
                pg.awaitTable(flow, name, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            }
            pg.sql("UPDATE sp.t1 SET v = 'after' WHERE id <= 10", "DELETE FROM sp.t4 WHERE id <= 10");
            pg.awaitEqual(tables, Duration.ofSeconds(180));
            System.out.printf("pg copy: copies ran on two workers at once (%s); ClickHouse equals Postgres%n",
                    concurrentWorkers);
            rest.delete(flow);
        }
        stack.connect().rest().delete("pgspread-sink");
    }
}
