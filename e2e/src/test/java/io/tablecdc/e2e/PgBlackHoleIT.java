package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.faults.FaultProxy;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * A black hole in front of a Postgres pipeline's dependency (the source database, its replication connections included,
 * or the catalog) while tables stream: the calls and streams in flight never answer and never fail, and the connections
 * that met the hole stay dead after the network heals (a host that froze or was cut off: no FIN, no RST). Only the
 * pipeline's own time limits can end those waits; once they do, the flow goes on by itself and ClickHouse equals
 * Postgres.
 */
class PgBlackHoleIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "pghole_source";

    private static String catalogUrl;
    private static PgChecks pg;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("pghole_catalog");
        clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
        pg.holdEqualFor(Duration.ofSeconds(5));
    }

    @AfterAll
    static void stop() {
        if (clickhouse != null) {
            clickhouse.close();
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"source", "catalog"})
    void theFlowOutlivesABlackHoleInFrontOf(String dependency) throws Exception {
        String schema = "hole_" + dependency;
        String prefix = "pghole-" + dependency;
        String flow = prefix + "-flow";
        String publication = schema + "_pub";
        pg.sql("DROP PUBLICATION IF EXISTS " + publication,
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + schema + ".a (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + schema + ".a SELECT g, 0 FROM generate_series(1, 500) g",
                "CREATE TABLE " + schema + ".b (id int PRIMARY KEY, v int NOT NULL)",
                "CREATE PUBLICATION " + publication + " FOR TABLE " + schema + ".a, " + schema + ".b");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String t : List.of("a", "b")) {
            tables.put(schema + "." + t, new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        }
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(prefix + "-sink", SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix));
        try (FaultProxy proxy = FaultProxy.start(prefix, stack.postgres().host(), stack.postgres().port())) {
            String via = "127.0.0.1:" + proxy.port();
            Map<String, String> source = SourceConfigs.pgPipeline(stack, "source".equals(dependency) ? catalogUrl
                    : catalogUrl.replace(stack.postgres().host() + ":" + stack.postgres().port(), via), DATABASE, publication, prefix);
            source.put("slot.prefix", schema);
            source.put("tasks.max", "2");
            source.put("table.sync.copy", "all");
            if ("source".equals(dependency)) {
                source.put("database.host", "127.0.0.1");
                source.put("database.port", Integer.toString(proxy.port()));
            }
            rest.putConfig(flow, source);
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            for (String table : tables.keySet()) {
                pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            }
            try (TransactionWriter writer = new TransactionWriter(prefix + "-writer", pg, n -> List.of(
                    "UPDATE " + schema + ".a SET v = v + 1 WHERE id = " + (n % 500 + 1),
                    "INSERT INTO " + schema + ".b VALUES (" + n + ", " + n + ")"), () -> 20)) {
                writer.awaitMore(20);
                long swallowedBefore = proxy.swallowed();
                proxy.blackHole();
                writer.awaitMore(50);
                Thread.sleep(5_000);
                long swallowed = proxy.swallowed() - swallowedBefore;
                proxy.pass();
                assertTrue(swallowed > 0, "the flow's calls met the black hole");
                writer.awaitMore(50);
                writer.close();
            }
            // the dead connections end by the pipeline's time limits (docs/pg-pipeline.md); a lingering walsender of
            // the dead replication connection ends by the server's wal_sender_timeout (60 s here)
            pg.awaitEqual(tables, Duration.ofSeconds(240));
            List<String> states = rest.states(flow);
            assertTrue(states.stream().allMatch("RUNNING"::equals), "connector and task states after the hole: " + states);
            rest.delete(flow);
        }
        rest.delete(prefix + "-sink");
    }
}
