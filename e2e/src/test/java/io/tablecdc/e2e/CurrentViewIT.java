package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * A final table's {@code <table>_current} view after the table's columns change: ClickHouse fixes a view's column types
 * when it is created, so a view left as it was reads a widened column through its old type. A streamed Postgres column
 * goes from {@code integer} to {@code bigint} and takes values above 2^31 while rows flow; the sink stops that table
 * with the error that tells the operator to widen the ClickHouse column, the operator does, and from then on the view
 * must equal {@code FINAL} row by row (before the fix it kept {@code Int32} and showed the large values wrapped).
 */
class CurrentViewIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "currentview_source";
    private static final String[] ROW = {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"};

    private static String catalogUrl;
    private static PgChecks pg;

    @BeforeAll
    static void start() throws Exception {
        pg = PgChecks.start(stack, DATABASE, "currentview_catalog");
        catalogUrl = pg.catalogUrl();
    }

    @AfterAll
    static void stop() {
        if (pg != null) {
            pg.close();
        }
    }

    @Test
    void theCurrentViewFollowsAColumnWidenedWhileRowsFlow() throws Exception {
        String flow = "currentview-flow";
        String table = "cv.t";
        pg.sql("DROP PUBLICATION IF EXISTS cv_pub",
                "DROP SCHEMA IF EXISTS cv CASCADE",
                "CREATE SCHEMA cv",
                "CREATE TABLE cv.t (id int PRIMARY KEY, v integer NOT NULL)",
                "INSERT INTO cv.t SELECT g, g * 1000 FROM generate_series(1, 50) g",
                "CREATE PUBLICATION cv_pub FOR TABLE cv.t");
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("currentview-sink", SinkConfigs.flowSink(stack, catalogUrl, "currentview-stage", "currentview"));
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, "cv_pub", "currentview");
        source.put("tasks.max", "2");
        source.put("table.sync.copy", "all");
        rest.putConfig(flow, source);
        // the tasks make the catalog's tables as they start
        rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
        pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
        pg.awaitEqual(Map.of(table, ROW), Duration.ofSeconds(120));
        assertTrue(viewEqualsFinal(), "the view equals FINAL before the change");

        // the column widens in Postgres and takes values an Int32 cannot hold
        pg.sql("ALTER TABLE cv.t ALTER COLUMN v TYPE bigint",
                "INSERT INTO cv.t VALUES (1000, 5000000000)",
                "UPDATE cv.t SET v = v + 4000000000 WHERE id <= 10");
        String error = pg.awaitTable(flow, table, row -> row.get("last_error") != null
                && row.get("last_error").contains("Int32") && row.get("last_error").contains("Int64"),
                Duration.ofSeconds(120)).get("last_error");
        // the operator widens the ClickHouse column, as the error says; the sink's next retry loads the rows
        pg.clickhouse().execute("ALTER TABLE cv_t MODIFY COLUMN v Nullable(Int64)").get().close();
        pg.sql("UPDATE cv.t SET v = v + 1 WHERE id IN (2, 20, 1000)");
        pg.awaitEqual(Map.of(table, ROW), Duration.ofSeconds(120));
        PgChecks.awaitTrue(CurrentViewIT::viewEqualsFinal, Duration.ofSeconds(60),
                "cv_t_current equals cv_t FINAL row by row after the widening (the error was: " + error + "); view: "
                        + rows("SELECT toString(id) AS r, toString(v) AS s FROM cv_t_current ORDER BY id LIMIT 3"));
        rest.delete(flow);
        rest.delete("currentview-sink");
    }

    private static boolean viewEqualsFinal() {
        List<String> view = rows("SELECT toString(id) AS r, toString(v) AS s FROM cv_t_current ORDER BY id");
        List<String> fin = rows("SELECT toString(id) AS r, toString(v) AS s FROM cv_t FINAL WHERE _tablecdc_is_deleted = 0 ORDER BY id");
        return !fin.isEmpty() && view.equals(fin);
    }

    private static List<String> rows(String sql) {
        List<String> rows = new ArrayList<>();
        for (GenericRecord r : pg.clickhouse().queryAll(sql)) {
            rows.add(r.getString("r") + "|" + r.getString("s"));
        }
        return rows;
    }
}
