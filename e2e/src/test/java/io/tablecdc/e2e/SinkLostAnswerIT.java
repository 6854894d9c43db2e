package io.tablecdc.e2e;

import java.time.Duration;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.tablecdc.e2e.faults.Fault;
import io.tablecdc.e2e.faults.NamedFaults;
import io.tablecdc.e2e.stack.ConnectWorker;

/**
 * The sink's calls at its named steps fail on a worker that lives on (their answer lost after they took effect, so the
 * sink repeats a call that already happened), and a hold at the normalize buffer races its drain. The cases of
 * {@link SinkFaultIT} (its table, records and checks), in a class of their own so that the two run side by side.
 * ClickHouse {@code FINAL} ends equal to what was produced, every row once, no stage row left.
 */
class SinkLostAnswerIT {

    /** The answer of a load of several batches is lost twice (the INSERT took effect); the sink repeats it. */
    @Test
    void aLoadOfSeveralBatchesWhoseAnswerIsLostLosesAndDoublesNothing() throws Exception {
        SinkFaultIT.Case c = SinkFaultIT.Case.grouped(NamedFaults.failedCall(NamedFaults.sinkGroupLoadedNotRecorded()).times(2));
        ConnectWorker worker = c.startWorkerWithFault("worker");
        try {
            c.deployAndAwaitFault(worker);
            c.assertLoadedOnce(worker);
        } finally {
            worker.close();
        }
    }

    static Stream<Fault> failedCalls() {
        return Stream.of(
                // the fourth stage row written and its answer lost twice: the failed attempt's files are the row's
                // (found by the randomized runs, seed 8200)
                NamedFaults.failedCall(NamedFaults.sinkStagedNotCommitted()).onOccurrence(4).times(2),
                NamedFaults.failedCall(NamedFaults.sinkUploadedNotStaged()).onOccurrence(4).times(2),
                NamedFaults.failedCall(NamedFaults.sinkLoadedNotRecorded()).onOccurrence(3).times(2),
                NamedFaults.failedCall(NamedFaults.sinkRecordedNotCleaned()).onOccurrence(3).times(2));
    }

    /**
     * The step's call fails on one worker that lives on: its answer is lost after it took effect (the stage row, the
     * normalize record and the upload are in place, the ClickHouse insert is done), so the sink repeats a call that
     * already happened.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("failedCalls")
    void aCallWhoseAnswerIsLostLosesAndDoublesNothing(Fault fault) throws Exception {
        SinkFaultIT.Case c = SinkFaultIT.Case.of(fault);
        ConnectWorker worker = c.startWorkerWithFault("worker");
        try {
            c.deployAndAwaitFault(worker);
            c.assertLoadedOnce(worker);
        } finally {
            worker.close();
        }
    }

    /**
     * A table's staged batches fill its normalize buffer and its partitions are held; the put() that decided so is
     * slowed at the hold (a hang at its entry), while the table's normalize loop, slowed at its first load, drains.
     * The hold still begins and ends: the table resumes and loads every batch. Before the fix, the hold read the count
     * again, found it drained and began nothing, while the partitions stayed paused for good (randomized run seed
     * 8752, where a ClickHouse outage had filled the buffer and the table stopped at its recovery).
     */
    @Test
    void aTableHeldAtItsBufferWhileItsNormalizeDrainsResumes() throws Exception {
        Fault hold = Fault.at("sink-held-at-buffer", "io.tablecdc.clickhouse.TableSink", "holdForBuffer", "AT ENTRY")
                .hang(8_000);
        Fault slowLoad = Fault.at("sink-first-load-slow", "io.tablecdc.clickhouse.TableNormalizer", "load", "AT ENTRY")
                .hang(3_000);
        SinkFaultIT.Case c = SinkFaultIT.Case.of(hold, slowLoad);
        ConnectWorker worker = c.startWorkerWithFault("worker");
        try {
            Map<String, String> config = SinkFaultIT.sinkConfig(c.catalogUrl(), c.topic());
            config.put("normalize.buffer.batches", "2");
            worker.rest().putConfig("sink-" + c.name(), config);
            c.injector().awaitFired(slowLoad, Duration.ofSeconds(120));
            c.injector().awaitFired(hold, Duration.ofSeconds(120));
            c.assertLoadedOnce(worker);
        } finally {
            worker.close();
        }
    }
}
