package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * The apply task reads the catalog for phase changes (a copy handed over, catchup passing to ready, a table joining
 * the publication, a reset) only between transactions. A writer that commits transactions of more changes than
 * {@code batch.rows}, one after another, makes every poll end inside a transaction (it ends once a batch's worth of
 * rows went out), so the next poll also starts inside one. Before: no poll ever started between transactions while
 * the writer ran, and a table added to the publication meanwhile was never even copied (found with its first change
 * at the earliest), a handed-over copy stayed in {@code catchup}; the flow looked healthy. Now a poll that found the
 * catalog read due inside a transaction ends at that transaction's commit, so the next one starts between
 * transactions and reads it. The table added while the writer runs must be copied and reach {@code ready} while the
 * writer still writes.
 */
class PgBusyStreamIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "busy_source";
    private static final String[] ROW = {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"};

    private static String catalogUrl;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        pg = PgChecks.start(stack, DATABASE, "busy_catalog");
        catalogUrl = pg.catalogUrl();
    }

    @AfterAll
    static void stop() {
        if (pg != null) {
            pg.close();
        }
    }

    @Test
    void aTableAddedWhileTransactionsLargerThanABatchFollowEachOtherIsCopiedAndReady() throws Exception {
        String flow = "busy-flow";
        pg.sql("DROP PUBLICATION IF EXISTS busy_pub",
                "DROP SCHEMA IF EXISTS busy CASCADE",
                "CREATE SCHEMA busy",
                "CREATE TABLE busy.w (id bigint PRIMARY KEY, v int NOT NULL)",
                "CREATE TABLE busy.late (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO busy.late SELECT g, g FROM generate_series(1, 500) g",
                "CREATE PUBLICATION busy_pub FOR TABLE busy.w");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("busy-sink", SinkConfigs.flowSink(stack, catalogUrl, "busy-stage", "busy"));
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "busy_pub", "busy");
        source.put("tasks.max", "2");
        source.put("table.sync.copy", "all");
        source.put("batch.rows", "50");
        rest.putConfig(flow, source);
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        pg.awaitTable(flow, "busy.w", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));

        // transactions of 250 inserts (five batches' worth) every 100 ms
        try (TransactionWriter writer = new TransactionWriter("busy-writer", pg,
                n -> List.of("INSERT INTO busy.w SELECT " + n + "::bigint * 1000 + g, " + n + " FROM generate_series(1, 250) g"),
                () -> 100)) {
            writer.awaitMore(20);
            pg.sql("ALTER PUBLICATION busy_pub ADD TABLE busy.late");
            int before = writer.written.get();
            Map<String, String> late = pg.awaitTable(flow, "busy.late", row -> "ready".equals(row.get("phase")),
                    Duration.ofSeconds(120));
            System.out.printf("busy: busy.late ready at %s after %d more transactions of the writer%n",
                    late.get("phase_lsn"), writer.written.get() - before);
            // still writing: the table got there while every transaction was larger than a batch
            writer.awaitMore(5);
        }
        pg.awaitEqual(Map.of("busy.late", ROW), Duration.ofSeconds(120));
        long rows = Long.parseLong(pg.sourceValue("SELECT count(*) FROM busy.w WHERE v > ?::int", "0"));
        PgChecks.awaitTrue(() -> pg.chLong("SELECT count() FROM busy_w FINAL") == rows, Duration.ofSeconds(180),
                "busy_w never held the " + rows + " rows of busy.w: " + pg.chLong("SELECT count() FROM busy_w FINAL"));
        assertEquals(List.of("RUNNING", "RUNNING", "RUNNING"), rest.states(flow));
        rest.delete(flow);
        rest.delete("busy-sink");
    }
}
