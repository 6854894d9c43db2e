package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Issue 37 item 6: the BigQuery source on an exactly-once worker with {@code transaction.boundary=poll} (Kafka's
 * default boundary). Such a worker reports committed records ({@code commitRecord}) from a map keyed by record
 * equality, so two identical rows of one page were acknowledged once: the task waited for the second acknowledgement
 * for ever, the catalog never recorded the batch and the table never polled again, while the task showed RUNNING.
 * Every record must be acknowledged, so the table polls on.
 */
class BigQueryExactlyOnceBoundaryIT {
    private static final LocalStack stack = LocalStack.get();

    @Test
    void identicalRowsOnAPollBoundaryWorkerAreEachAcknowledgedAndTheTablePollsOn() throws Exception {
        String dataset = "eos_poll";
        String flow = "eospoll-flow";
        String prefix = "eospoll";
        String catalogDb = "eos_poll_catalog";
        String catalogUrl = stack.postgres().createDatabase(catalogDb);
        CdcChecks checks = new CdcChecks(stack, catalogDb);
        BigQuery bigQuery = stack.bigquery().client();
        String project = stack.bigquery().projectId();
        if (bigQuery.getDataset(dataset) == null) {
            bigQuery.create(DatasetInfo.of(dataset));
        }
        TableId table = TableId.of(project, dataset, "dups");
        bigQuery.delete(table);
        bigQuery.create(TableInfo.of(table, StandardTableDefinition.of(Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("val", StandardSQLTypeName.STRING), Field.of("ts", StandardSQLTypeName.TIMESTAMP)))));
        Instant base = Instant.now().minus(Duration.ofHours(1)).truncatedTo(ChronoUnit.SECONDS);
        List<Map<String, Object>> rows = new ArrayList<>();
        for (long id = 1; id <= 20; id++) {
            rows.add(row(id, base.plusSeconds(id)));
        }
        // three rows twice, identical: equal records on one page
        for (int i = 0; i < 3; i++) {
            rows.add(new LinkedHashMap<>(rows.get(i)));
        }
        CdcChecks.insert(bigQuery, table, rows);
        String fullName = project + "." + dataset + ".dups";
        String chTable = fullName.replaceAll("[^A-Za-z0-9_]", "_");

        stack.connect().rest().putConfig(prefix + "-sink", SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix));
        Map<String, String> source = SourceConfigs.queryCdc(stack, catalogUrl, dataset, "dups:ts:id", 1, prefix);
        source.put("sync.interval.ms", "1000");
        source.put("transaction.boundary", "poll");
        Map<String, String> workerProps = ConnectWorker.exactlyOnce(ConnectWorker.workerProperties(
                stack.kafka().bootstrapServers(), "eospoll-" + System.nanoTime(), stack.pluginPath()));
        try (ConnectWorker worker = ConnectWorker.startProcess(workerProps, StackPaths.workDir("eospoll/worker"),
                Duration.ofSeconds(120))) {
            worker.rest().putConfig(flow, source);
            worker.rest().awaitRunning(flow, 1, Duration.ofSeconds(120));
            checks.awaitRows("SELECT count() AS n FROM " + chTable + " FINAL", r -> r.get(0).getLong("n") == 20,
                    Duration.ofSeconds(120));
            // the snapshot batch must be recorded (every record acknowledged) before the table polls again
            CdcChecks.State state = checks.awaitState(flow, fullName, st -> st.syncedBatchId() > 0, Duration.ofSeconds(60));
            assertTrue(state.syncedBatchId() > 0, state.toString());
            List<Map<String, Object>> more = new ArrayList<>();
            for (long id = 21; id <= 25; id++) {
                more.add(row(id, base.plusSeconds(id)));
            }
            CdcChecks.insert(bigQuery, table, more);
            checks.awaitRows("SELECT count() AS n FROM " + chTable + " FINAL", r -> r.get(0).getLong("n") == 25,
                    Duration.ofSeconds(120));
            worker.rest().delete(flow);
        } finally {
            stack.connect().rest().delete(prefix + "-sink");
        }
    }

    private static Map<String, Object> row(long id, Instant ts) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("id", id);
        row.put("val", "v" + id);
        row.put("ts", ts.toString());
        return row;
    }
}
