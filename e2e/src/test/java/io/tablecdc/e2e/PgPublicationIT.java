package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * Tables that leave the publication while the flow runs, and come back. The stream carries nothing of a table while it
 * is out of the publication, so a table that comes back holds changes ClickHouse never saw: it must be copied again
 * (it used to stream on from where it came back, and the changes in between were missing for good). A table that
 * leaves for good leaves the flow once the stream has read past its removal, with every change before it in
 * ClickHouse and none after.
 */
class PgPublicationIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "pgpub_source";
    private static final String ROWS = "id::text || '|' || v::text";
    private static final String CH_ROWS = "concat(toString(id), '|', toString(v))";

    private static String catalogUrl;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("pgpub_catalog");
        Client clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl())
                .setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                .compressServerResponse(false).build();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
    }

    /** Writes a few inserts, updates and deletes to {@code table}, with values that tell the round apart. */
    private static void write(String table, int round) throws Exception {
        pg.transaction("INSERT INTO " + table + " SELECT g, " + round + " FROM generate_series(" + (round * 100 + 1)
                        + ", " + (round * 100 + 20) + ") g",
                "UPDATE " + table + " SET v = v + 1000 WHERE id % 7 = " + (round % 7),
                "DELETE FROM " + table + " WHERE id % 11 = " + (round % 11));
    }

    private static List<String> sorted(List<String> rows) {
        return rows.stream().sorted().toList();
    }

    @Test
    void aTableThatLeavesThePublicationAndComesBackIsCopiedAgain() throws Exception {
        String flow = "pgpub-flow";
        String sink = "pgpub-sink";
        pg.sql("CREATE SCHEMA pub",
                "CREATE TABLE pub.a (id int PRIMARY KEY, v int NOT NULL)",
                "CREATE TABLE pub.b (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO pub.a SELECT g, 0 FROM generate_series(1, 50) g",
                "INSERT INTO pub.b SELECT g, 0 FROM generate_series(1, 50) g",
                "CREATE PUBLICATION pgpub_pub FOR TABLE pub.a, pub.b");
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "pgpub_pub", flow);
        source.put("slot.prefix", "pgpub");
        source.put("tasks.max", "2");
        source.put("table.sync.copy", "all");
        source.put("table.retry.delay.ms", "1000");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(sink, SinkConfigs.flowSink(stack, catalogUrl, "pgpub-stage", flow));
        rest.putConfig(flow, source);
        rest.awaitRunning(sink, 1, Duration.ofSeconds(120));
        rest.awaitRunning(flow, 2, Duration.ofSeconds(120));
        Map<String, String[]> both = Map.of("pub.a", new String[] {ROWS, CH_ROWS}, "pub.b", new String[] {ROWS, CH_ROWS});
        for (String table : both.keySet()) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        write("pub.a", 1);
        write("pub.b", 1);
        pg.awaitEqual(both, Duration.ofSeconds(90));

        // out and back between two publication checks (10 s apart): only the entry tells it ever left
        pg.sql("ALTER PUBLICATION pgpub_pub DROP TABLE pub.a");
        write("pub.a", 2);
        pg.sql("ALTER PUBLICATION pgpub_pub ADD TABLE pub.a");
        write("pub.a", 3);
        write("pub.b", 2);
        // the rows of round 2 (ids 201-220) reach ClickHouse only through a new copy
        pg.awaitEqual(both, Duration.ofSeconds(120));
        pg.awaitTable(flow, "pub.a", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));

        // out for good: every change before the removal reaches ClickHouse, then the table leaves the flow
        write("pub.b", 3);
        pg.sql("ALTER PUBLICATION pgpub_pub DROP TABLE pub.b");
        List<String> atRemoval = sorted(pg.postgresRows("pub.b", ROWS));
        write("pub.b", 4);
        write("pub.a", 4);
        // the other table keeps changing meanwhile, so the stream reads on past the removal
        awaitTrue(() -> {
            pg.sql("UPDATE pub.a SET v = v + 1 WHERE id = 1");
            Map<String, String> row = pg.table(flow, "pub.b");
            return "errored".equals(row.get("phase")) && row.get("last_error").startsWith("left publication pgpub_pub");
        }, Duration.ofSeconds(60), "pub.b never left the flow");
        awaitTrue(() -> atRemoval.equals(sorted(pg.clickHouseRows("pub.b", CH_ROWS))), Duration.ofSeconds(90),
                "ClickHouse never held pub.b as it was at its removal");
        write("pub.a", 5);
        pg.awaitEqual(Map.of("pub.a", new String[] {ROWS, CH_ROWS}), Duration.ofSeconds(90));
        assertEquals(atRemoval, sorted(pg.clickHouseRows("pub.b", CH_ROWS)),
                "ClickHouse holds pub.b as it was at its removal: every change before, none after");
        // and back: copied again with the changes it missed
        pg.sql("ALTER PUBLICATION pgpub_pub ADD TABLE pub.b");
        pg.awaitTable(flow, "pub.b", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        write("pub.b", 6);
        pg.awaitEqual(both, Duration.ofSeconds(90));

        // out and back while the flow is stopped: the start finds the new entry recorded in the catalog
        rest.pause(flow);
        awaitTrue(() -> rest.states(flow).stream().allMatch("PAUSED"::equals), Duration.ofSeconds(60), "never paused");
        pg.sql("ALTER PUBLICATION pgpub_pub DROP TABLE pub.a");
        write("pub.a", 7);
        pg.sql("ALTER PUBLICATION pgpub_pub ADD TABLE pub.a");
        rest.resume(flow);
        write("pub.a", 8);
        // the rows of round 7 (ids 701-720) reach ClickHouse only through a new copy
        pg.awaitEqual(both, Duration.ofSeconds(120));
        pg.awaitTable(flow, "pub.a", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), rest.states(flow), "the connector and both tasks run");
        rest.delete(flow);
        rest.delete(sink);
    }

    /**
     * A table of a schema published {@code FOR TABLES IN SCHEMA} moves to another schema (it leaves the publication)
     * and back: it comes back by the same publication entry, and the catalog's "left" alone tells it must be copied
     * again (the changes written while it was away never reached the stream). The same holds for a table whose entry
     * was never recorded because the task that saw it first died before recording it (randomized run seed 8731: the
     * table stayed errored, "left publication", for good).
     */
    @Test
    void aTableThatLeavesAndComesBackByTheSameEntryIsCopiedAgain() throws Exception {
        String flow = "pgpub-schema-flow";
        String sink = "pgpub-schema-sink";
        pg.sql("CREATE SCHEMA pubs",
                "CREATE SCHEMA pubs_away",
                "CREATE TABLE pubs.c (id int PRIMARY KEY, v int NOT NULL)",
                "CREATE TABLE pubs.d (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO pubs.c SELECT g, 0 FROM generate_series(1, 50) g",
                "INSERT INTO pubs.d SELECT g, 0 FROM generate_series(1, 50) g",
                "CREATE PUBLICATION pgpub_schema_pub FOR TABLES IN SCHEMA pubs");
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "pgpub_schema_pub", flow);
        source.put("slot.prefix", "pgpubs");
        source.put("tasks.max", "2");
        source.put("table.sync.copy", "all");
        source.put("table.retry.delay.ms", "1000");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(sink, SinkConfigs.flowSink(stack, catalogUrl, "pgpub-schema-stage", flow));
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(120));
        Map<String, String[]> both = Map.of("pubs.c", new String[] {ROWS, CH_ROWS}, "pubs.d", new String[] {ROWS, CH_ROWS});
        for (String table : both.keySet()) {
            pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        }
        write("pubs.c", 1);
        pg.awaitEqual(both, Duration.ofSeconds(90));

        pg.sql("ALTER TABLE pubs.c SET SCHEMA pubs_away");
        write("pubs_away.c", 2);
        awaitTrue(() -> {
            pg.sql("UPDATE pubs.d SET v = v + 1 WHERE id = 1");
            Map<String, String> row = pg.table(flow, "pubs.c");
            return "errored".equals(row.get("phase")) && row.get("last_error").startsWith("left publication pgpub_schema_pub:");
        }, Duration.ofSeconds(60), "pubs.c never left the flow");
        write("pubs_away.c", 3);
        pg.sql("ALTER TABLE pubs_away.c SET SCHEMA pubs");
        write("pubs.c", 4);
        // the rows of rounds 2 and 3 (ids 201-220, 301-320) reach ClickHouse only through a new copy
        pg.awaitTable(flow, "pubs.c", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        pg.awaitEqual(both, Duration.ofSeconds(120));
        rest.delete(flow);
        rest.delete(sink);
    }
}
