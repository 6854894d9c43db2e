package io.tablecdc.e2e.faults;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.tablecdc.e2e.stack.StackPaths;

/** The Byteman rules {@link FaultInjector} writes really kill, fail and delay a child JVM at the named step. */
class FaultInjectorTest {
    private static final String TARGET = FaultTarget.class.getName();

    @Test
    void killHaltsTheProcessAtTheNthOccurrenceAndLeavesItsMarker() throws Exception {
        Fault kill = Fault.at("kill-third-step", TARGET, "step", "AT EXIT").kill().onOccurrence(3);
        FaultInjector injector = FaultInjector.of(StackPaths.workDir("faults-kill"), kill);
        Run run = run(injector);
        assertEquals(137, run.exit, run.output);
        assertTrue(run.output.contains("step 2 returned 20"), run.output);
        assertFalse(run.output.contains("step 3 returned"), "the process died inside step 3: " + run.output);
        assertTrue(injector.fired(kill));
    }

    @Test
    void failThrowsForTheChosenOccurrencesOnly() throws Exception {
        Fault fail = Fault.at("fail-steps", TARGET, "step", "AT ENTRY").fail("java.lang.IllegalStateException")
                .onOccurrence(2).times(2);
        FaultInjector injector = FaultInjector.of(StackPaths.workDir("faults-fail"), fail);
        Run run = run(injector);
        assertEquals(0, run.exit, run.output);
        assertTrue(run.output.contains("step 1 returned 10"), run.output);
        assertTrue(run.output.contains("step 2 threw tablecdc fault fail-steps"), run.output);
        assertTrue(run.output.contains("step 3 threw tablecdc fault fail-steps"), run.output);
        assertTrue(run.output.contains("step 4 returned 40"), run.output);
        assertTrue(injector.fired(fail));
    }

    @Test
    void failWithCausePassesANullCauseToTheExceptionsTwoArgumentConstructor() throws Exception {
        Fault fail = Fault.at("fail-with-cause", TARGET, "step", "AT EXIT").failWithCause(CauseOnlyException.class.getName())
                .onOccurrence(4);
        FaultInjector injector = FaultInjector.of(StackPaths.workDir("faults-cause"), fail);
        Run run = run(injector);
        assertEquals(0, run.exit, run.output);
        assertTrue(run.output.contains("step 3 returned 30"), run.output);
        assertTrue(run.output.contains("step 4 threw tablecdc fault fail-with-cause"), run.output);
        assertTrue(run.output.contains("step 5 returned 50"), run.output);
        assertTrue(injector.fired(fail));
    }

    @Test
    void hangDelaysTheChosenOccurrencesAndTheCallThenGoesOn() throws Exception {
        Fault hang = Fault.at("hang-step", TARGET, "step", "AT EXIT").hang(1_500).onOccurrence(2).times(2);
        FaultInjector injector = FaultInjector.of(StackPaths.workDir("faults-hang"), hang);
        Run run = run(injector);
        assertEquals(0, run.exit, run.output);
        assertTrue(run.output.contains("step 1 returned 10\n"), run.output);
        assertTrue(run.output.contains("step 2 returned 20 after 1 s"), run.output);
        assertTrue(run.output.contains("step 3 returned 30 after 1 s"), run.output);
        assertTrue(run.output.contains("step 4 returned 40\n"), run.output);
        assertTrue(injector.fired(hang));
    }

    @Test
    void aHungCallHangsTheCalleeOfAStepAndARebalanceStepItself() {
        Fault callee = NamedFaults.hungCall(NamedFaults.sinkStagedNotCommitted(), 5_000);
        assertEquals("sink-staged-not-committed-hung", callee.name());
        assertEquals("io.tablecdc.catalog.Stages", callee.className());
        assertEquals("upsertStage", callee.method());
        assertEquals("AT EXIT", callee.location());
        assertEquals(Fault.Kind.HANG, callee.action().kind());
        assertEquals(5_000, callee.action().hangMillis());
        Fault revoked = NamedFaults.hungCall(NamedFaults.sinkPartitionsRevoked(), 3_000);
        assertEquals("io.tablecdc.clickhouse.ClickHouseStageSinkTask", revoked.className());
        assertEquals("close", revoked.method());
        assertEquals(Fault.Kind.HANG, revoked.action().kind());
        // what Connect calls at a rebalance talks to no peer: there is no failed call to make there
        assertThrows(IllegalArgumentException.class, () -> NamedFaults.failedCall(NamedFaults.pgTaskStopping()));
    }

    @Test
    void aDisarmedFaultNeverFires() throws Exception {
        Fault kill = Fault.at("never", TARGET, "step", "AT ENTRY").kill().disarmed();
        FaultInjector injector = FaultInjector.of(StackPaths.workDir("faults-disarmed"), kill);
        Run run = run(injector);
        assertEquals(0, run.exit, run.output);
        assertTrue(run.output.contains("done"), run.output);
        assertFalse(injector.fired(kill));
    }

    private record Run(int exit, String output) {
    }

    private static Run run(FaultInjector injector) throws Exception {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(injector.jvmArgs());
        command.add("-cp");
        StringBuilder cp = new StringBuilder();
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            if (!entry.contains("byteman")) {
                cp.append(cp.isEmpty() ? "" : File.pathSeparator).append(entry);
            }
        }
        command.add(cp.toString());
        command.add(TARGET);
        Path out = Files.createTempFile(StackPaths.workDir("faults-out"), "run", ".log");
        Process process = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(out.toFile()).start();
        assertTrue(process.waitFor(60, TimeUnit.SECONDS), "the child JVM did not end");
        return new Run(process.exitValue(), Files.readString(out));
    }
}
