package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgFaultIT.catalogUrl;
import static io.tablecdc.e2e.PgFaultIT.pg;
import static io.tablecdc.e2e.PgFaultIT.stack;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.tablecdc.e2e.faults.Fault;
import io.tablecdc.e2e.faults.FaultInjector;
import io.tablecdc.e2e.faults.NamedFaults;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * {@link PgFaultIT}'s cases at the steps of a copy's handover: the Postgres pipeline's worker process dies (Byteman halts
 * it, as SIGKILL would) once a copy wrote its marker and before the table is in {@code catchup}, and once the apply task
 * sent the held changes and before the table is {@code ready}; a second worker takes over without faults. Also a copy
 * started over while the restarted apply task pauses inside a transaction it holds for the dead copy. (Split from
 * {@link PgFaultIT}, whose databases it shares, so that the two run side by side in the suite's forks.)
 */
class PgFaultHandoverIT {

    @BeforeAll
    static void start() throws Exception {
        PgFaultIT.start();
    }

    @AfterAll
    static void stop() {
        PgFaultIT.stop();
    }

    static Stream<Fault> steps() {
        return Stream.of(
                NamedFaults.pgMarkerWrittenNotHandedOver().kill(),
                NamedFaults.pgCaughtUpNotReady().kill());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("steps")
    void aWorkerKilledAtTheStepLosesAndDoublesNothing(Fault fault) throws Exception {
        PgFaultIT.killAtStepAndTakeOver(fault);
    }

    /**
     * The copy task dies after writing its handover marker; after it, one transaction changes more rows of the table
     * than the apply task may hold (20 x {@code batch.rows}), so the restarted apply task, holding the table's changes
     * from the dead copy's marker, pauses its reading in the middle of that transaction. The table is copied again and
     * handed over at a new marker, which the paused apply task cannot reach: it must drop what it held for the dead
     * copy (the new copy covers it) and read on. Before that fix the table stayed in {@code catchup} for ever (found by
     * the randomized run with seed 3008).
     */
    @Test
    void aCopyStartedOverWhileTheApplyTaskPausesInAHeldTransactionIsHandedOver() throws Exception {
        Fault fault = NamedFaults.pgMarkerWrittenNotHandedOver().kill();
        String schema = "f_held_restart";
        String publication = schema + "_pub";
        String prefix = "pgfault-held";
        String flow = prefix + "-flow";
        pg.sql("DROP PUBLICATION IF EXISTS " + publication,
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + schema + ".t (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + schema + ".t SELECT g, 0 FROM generate_series(1, 1000) g",
                "CREATE PUBLICATION " + publication + " FOR TABLE " + schema + ".t");
        Map<String, String[]> tables = Map.of(schema + ".t",
                new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        // holds at most 20 x 20 = 400 changes: the 1,000-row transaction below fills that in its middle
        Map<String, String> source = PgFaultIT.source(publication, prefix, schema, 20);
        Map<String, String> sink = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);
        stack.connect().rest().putConfig(prefix + "-sink", sink);

        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                prefix + "-" + System.nanoTime(), stack.pluginPath());
        FaultInjector injector = FaultInjector.of(StackPaths.workDir(prefix + "/faults"), fault);
        List<String> jvmArgs = injector.jvmArgs(ConnectWorker.TEST_JVM_ARGS.toArray(String[]::new));
        ConnectWorker first = ConnectWorker.startProcess(workerProps, StackPaths.workDir(prefix + "/worker-1"),
                Duration.ofSeconds(120), jvmArgs);
        try {
            first.rest().putConfig(flow, source);
            injector.awaitFired(fault, Duration.ofSeconds(120));
        } finally {
            first.kill();
        }
        pg.sql("UPDATE " + schema + ".t SET v = v + 1");
        java.nio.file.Path secondDir = StackPaths.workDir(prefix + "/worker-2");
        ConnectWorker second = ConnectWorker.startProcess(workerProps, secondDir, Duration.ofSeconds(120));
        try {
            second.rest().awaitRunning(flow, 2, Duration.ofSeconds(120));
            pg.awaitTable(flow, schema + ".t", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            String log = java.nio.file.Files.readString(secondDir.resolve("worker.log"));
            org.junit.jupiter.api.Assertions.assertTrue(log.contains("reading pauses until their copy tasks finish")
                    && log.contains("dropping the changes held for it"), "the second worker's apply task paused holding"
                    + " the dead copy's changes, and dropped them: see " + secondDir.resolve("worker.log"));
            pg.sql("UPDATE " + schema + ".t SET v = v + 10 WHERE id % 7 = 0", "DELETE FROM " + schema + ".t WHERE id % 11 = 0",
                    "INSERT INTO " + schema + ".t VALUES (5000, 5)");
            pg.awaitEqual(tables, Duration.ofSeconds(120));
            second.rest().delete(flow);
        } finally {
            second.close();
        }
        stack.connect().rest().delete(prefix + "-sink");
    }
}
