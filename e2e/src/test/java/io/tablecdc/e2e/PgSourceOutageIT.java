package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.faults.FaultProxy;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.flows.StatusScript;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * The source Postgres cannot be reached (its proxy refuses every connection) while the Postgres pipeline's tasks start
 * and while a table waits to be copied, and then the catalog while the connector and its tasks start: outages, not
 * faults of the flow or of a table. The tasks stay up and try
 * again with backoff, the copy's failed connection attempts do not count against {@code max.table.retries}, and once
 * the source is back the flow streams and the table is copied. Found by the randomized run with seed 6002, where the
 * apply task failed for good at its start and three tables ended {@code errored} after an 11 s outage.
 */
class PgSourceOutageIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "pgoutage_source";

    private static String catalogUrl;
    private static PgChecks pg;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("pgoutage_catalog");
        clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
    }

    @AfterAll
    static void stop() {
        if (clickhouse != null) {
            clickhouse.close();
        }
    }

    @Test
    void tasksStartingAndACopyWaitingWhileTheSourceIsDownRideItOut() throws Exception {
        String schema = "pgoutage";
        String prefix = "pgoutage";
        String flow = prefix + "-flow";
        pg.sql("DROP PUBLICATION IF EXISTS pgoutage_pub",
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + schema + ".a (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + schema + ".a SELECT g, 0 FROM generate_series(1, 1000) g",
                "CREATE TABLE " + schema + ".b (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + schema + ".b SELECT g, 0 FROM generate_series(1, 500) g",
                "CREATE PUBLICATION pgoutage_pub FOR TABLE " + schema + ".a, " + schema + ".b");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String t : List.of("a", "b")) {
            tables.put(schema + "." + t, new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        }
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> sink = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);
        rest.putConfig(prefix + "-sink", sink);

        try (FaultProxy proxy = FaultProxy.start(prefix + "-source", stack.postgres().host(), stack.postgres().port());
             FaultProxy catalogProxy = FaultProxy.start(prefix + "-catalog", stack.postgres().host(), stack.postgres().port())) {
            String proxiedCatalog = catalogUrl.replace(stack.postgres().host() + ":" + stack.postgres().port(),
                    "127.0.0.1:" + catalogProxy.port());
            Map<String, String> source = SourceConfigs.pgPipeline(stack, proxiedCatalog, DATABASE, "pgoutage_pub", prefix);
            source.put("database.host", "127.0.0.1");
            source.put("database.port", Integer.toString(proxy.port()));
            source.put("tasks.max", "2");
            source.put("table.sync.copy", "all");
            // one retry: a copy that counted the outage's failed connection attempts would end errored
            source.put("max.table.retries", "1");
            source.put("table.retry.delay.ms", "500");
            rest.putConfig(flow, source);
            rest.awaitRunning(flow, 2, Duration.ofSeconds(60));
            for (String table : tables.keySet()) {
                pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            }
            pg.awaitEqual(tables, Duration.ofSeconds(120));

            // the flow stops; the source goes away; table b is to be copied again; the flow resumes into the outage
            awaitStopped(rest, flow);
            long before = proxy.accepted();
            proxy.refuse();
            pg.sql("UPDATE " + schema + ".a SET v = 1 WHERE id <= 100", "UPDATE " + schema + ".b SET v = 2 WHERE id <= 50");
            String reset = StatusScript.resetTable(stack, catalogUrl, flow, schema + ".b");
            assertTrue(reset != null && reset.contains("errored (reset)"), String.valueOf(reset));
            rest.resume(flow);
            // the reset table is due 10 s after the reset: its copy meets the outage for several seconds
            List<String> timeline = watch(rest, flow, Duration.ofSeconds(18));
            assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), rest.states(flow),
                    "the connector and both tasks stay up while the source cannot be reached; since the resume: "
                            + timeline);
            long refused = proxy.accepted() - before;
            proxy.pass();

            for (String table : tables.keySet()) {
                pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            }
            pg.sql("INSERT INTO " + schema + ".a VALUES (5000, 5)", "DELETE FROM " + schema + ".b WHERE id = 7");
            pg.awaitEqual(tables, Duration.ofSeconds(120));
            assertTrue(refused > 2, "the tasks tried the source during the outage (" + refused + " connections)");

            // the same with the catalog away when the connector and its tasks start
            awaitStopped(rest, flow);
            long catalogBefore = catalogProxy.accepted();
            catalogProxy.refuse();
            pg.sql("UPDATE " + schema + ".a SET v = 3 WHERE id <= 10", "INSERT INTO " + schema + ".b VALUES (6000, 6)");
            rest.resume(flow);
            timeline = watch(rest, flow, Duration.ofSeconds(8));
            assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), rest.states(flow),
                    "the connector and both tasks stay up while the catalog cannot be reached; since the resume: "
                            + timeline);
            long catalogRefused = catalogProxy.accepted() - catalogBefore;
            catalogProxy.pass();
            pg.awaitEqual(tables, Duration.ofSeconds(120));
            assertTrue(catalogRefused > 2, "the tasks tried the catalog during the outage (" + catalogRefused + " connections)");
            rest.delete(flow);
        }
        rest.delete(prefix + "-sink");
    }

    /**
     * Stops the flow and waits until its tasks are stopped too, not only the connector: a task still stopping when the
     * outage begins may wait in a call to the source or the catalog for its connection timeout (10 s), and the worker
     * handles the next request, the resume, only once its tasks stopped or its graceful timeout (10 s) ran out.
     */
    private static void awaitStopped(ConnectRestClient rest, String flow) throws InterruptedException {
        rest.stop(flow);
        rest.awaitStatus(flow, s -> {
            boolean taskRunning = false;
            for (var task : s.path("tasks")) {
                taskRunning |= "RUNNING".equals(task.path("state").asText());
            }
            return "STOPPED".equals(s.path("connector").path("state").asText()) && !taskRunning;
        }, Duration.ofSeconds(60));
    }

    /** The flow's states once a second for {@code duration}, each with the milliseconds since the call. */
    private static List<String> watch(ConnectRestClient rest, String flow, Duration duration) throws InterruptedException {
        long start = System.nanoTime();
        List<String> seen = new ArrayList<>();
        while (System.nanoTime() - start < duration.toNanos()) {
            seen.add((System.nanoTime() - start) / 1_000_000 + " ms " + rest.states(flow));
            Thread.sleep(1_000);
        }
        return seen;
    }
}
