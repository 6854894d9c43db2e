package io.tablecdc.e2e;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.tablecdc.e2e.faults.Fault;
import io.tablecdc.e2e.faults.FaultInjector;
import io.tablecdc.e2e.faults.NamedFaults;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The BigQuery source at its named steps, on the BigQuery emulator: a table with a snapshot of rows and a writer that
 * inserts rows and new versions of rows every few hundred milliseconds ({@link ChaosBigQuery}) flows through a query
 * CDC flow on a worker process of its own. Either the worker dies (Byteman halts it, as SIGKILL would) at the step and
 * a second worker takes over, or the step's call fails twice and the worker lives on. ClickHouse {@code FINAL} ends
 * holding each row of the emulator once with its latest version, and the catalog's cursor is at the last row written.
 * The sink runs on the stack's own worker, untouched.
 */
class BigQueryFaultIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String CATALOG = "bqfault_catalog";

    private static String catalogUrl;
    private static CdcChecks checks;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase(CATALOG);
        checks = new CdcChecks(stack, CATALOG);
    }

    static Stream<Fault> faults() {
        return Stream.of(
                NamedFaults.bigQueryAckedNotRecorded().kill().onOccurrence(3),
                NamedFaults.bigQueryQueryRunNotRead().kill().onOccurrence(3),
                // inside the initial snapshot's first batch: the table starts with 50 rows or more
                NamedFaults.bigQueryMidBatch().kill().onOccurrence(25),
                // the catalog refuses the batch's sync record twice: the batch stays closing and is recorded later
                NamedFaults.failedCall(NamedFaults.bigQueryAckedNotRecorded()).onOccurrence(3).times(2).disarmed(),
                // a window's query ran and wrote its result table, its answer is lost twice: the window is queried again
                NamedFaults.failedCall(NamedFaults.bigQueryQueryRunNotRead()).onOccurrence(3).times(2).disarmed());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("faults")
    void theSourceAtTheStepLosesAndDoublesNothing(Fault fault) throws Exception {
        boolean lives = fault.action().kind() != Fault.Kind.KILL;
        String name = fault.name() + (lives ? "" : "-kill");
        String prefix = "bqfault-" + name;
        Map<String, String> sink = SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix);
        stack.connect().rest().putConfig(prefix + "-sink", sink);

        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                prefix + "-" + System.nanoTime(), stack.pluginPath());
        FaultInjector injector = FaultInjector.of(StackPaths.workDir(prefix + "/faults"), fault);
        List<String> jvmArgs = injector.jvmArgs(ConnectWorker.TEST_JVM_ARGS.toArray(String[]::new));
        try (ChaosBigQuery bigQuery = ChaosBigQuery.create(stack, new Random(name.hashCode()), prefix + "-flow",
                "t_" + name.replace('-', '_'))) {
            Map<String, String> source = bigQuery.source(stack, catalogUrl, stack.bigquery().endpoint(), prefix);
            ConnectWorker first = ConnectWorker.startProcess(workerProps, StackPaths.workDir(prefix + "/worker-1"),
                    Duration.ofSeconds(120), jvmArgs);
            ConnectWorker survivor = first;
            try {
                first.rest().putConfig(bigQuery.flow, source);
                if (lives) {
                    // armed once the connector is deployed: its validate() runs queries of its own
                    injector.arm(fault);
                }
                bigQuery.startWriter();
                injector.awaitFired(fault, Duration.ofSeconds(120));
                if (!lives) {
                    first.kill();
                    survivor = ConnectWorker.startProcess(workerProps, StackPaths.workDir(prefix + "/worker-2"),
                            Duration.ofSeconds(120));
                }
                survivor.rest().awaitRunning(bigQuery.flow, 1, Duration.ofSeconds(120));
                // the writer goes on for a while after the fault, through the restart or the retries
                Thread.sleep(8_000);
                bigQuery.check(checks, Duration.ofSeconds(120));
                survivor.rest().delete(bigQuery.flow);
            } finally {
                if (survivor != first) {
                    survivor.close();
                }
                first.close();
            }
        }
        stack.connect().rest().delete(prefix + "-sink");
    }
}
