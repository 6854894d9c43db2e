package io.tablecdc.e2e;

import java.time.Duration;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * One transaction that inserts 150,000 rows of a table and then updates each of them: 300,000 changes of one table in
 * one transaction, sent as 30 batches that the sink loads several at a time in one {@code INSERT … SELECT} (whose rows
 * arrive in no fixed order). Every update must win over its row's insert: the versions of one transaction's changes
 * are ordered by their ordinal, which must not run out (before: it saturated at 65535, so the insert and the update
 * of every row past the 65,535th change shared a version and ClickHouse kept either image). Checked with
 * {@link PgChecks#awaitEqual} (FINAL equal to Postgres, held for 5 s) and its version check (without FINAL, no key
 * and version with two images).
 */
class PgBigTransactionIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "bigtxn_source";
    private static final String[] ROW = {"id::text || '|' || v", "concat(toString(id), '|', v)"};

    private static String catalogUrl;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        pg = PgChecks.start(stack, DATABASE, "bigtxn_catalog");
        catalogUrl = pg.catalogUrl();
        pg.holdEqualFor(Duration.ofSeconds(5));
    }

    @AfterAll
    static void stop() {
        if (pg != null) {
            pg.close();
        }
    }

    @Test
    void aTransactionOf300000ChangesOfOneTableEndsOnEveryRowsLastImage() throws Exception {
        String flow = "bigtxn-flow";
        String table = "bt.t";
        pg.sql("DROP PUBLICATION IF EXISTS bt_pub",
                "DROP SCHEMA IF EXISTS bt CASCADE",
                "CREATE SCHEMA bt",
                "CREATE TABLE bt.t (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE PUBLICATION bt_pub FOR TABLE bt.t");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("bigtxn-sink", SinkConfigs.flowSink(stack, catalogUrl, "bigtxn-stage", "bigtxn"));
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "bt_pub", "bigtxn");
        source.put("tasks.max", "2");
        source.put("table.sync.copy", "all");
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));

        // ordinals 1..150000 insert, 150001..300000 update the same rows
        pg.transaction("INSERT INTO bt.t SELECT g, 'inserted ' || g FROM generate_series(1, 150000) g",
                "UPDATE bt.t SET v = 'updated ' || id");
        // a count first: comparing 150,000 rows as text twice a second while the sink loads would take the cores
        // the flow needs
        try {
            PgChecks.awaitTrue(() -> pg.chLong("SELECT count() FROM bt_t FINAL WHERE startsWith(v, 'updated ')")
                    >= 150_000, Duration.ofSeconds(240), "");
        } catch (AssertionError e) {
            throw new AssertionError("bt_t never showed 150,000 rows on their updated image in 240 s; catalog: "
                    + pg.table(flow, table));
        }
        pg.awaitEqual(Map.of(table, ROW), Duration.ofSeconds(120));
        rest.delete(flow);
        rest.delete("bigtxn-sink");
    }
}
