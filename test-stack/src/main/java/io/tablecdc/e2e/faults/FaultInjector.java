package io.tablecdc.e2e.faults;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Injects {@link Fault}s into a worker process through the Byteman agent: {@link #jvmArgs()} goes to
 * {@code ConnectWorker.startProcess}, the rules are written to {@code dir/faults.btm}, and each fault leaves a
 * marker file in {@code dir} when it fires, so a test knows it really happened ({@link #awaitFired}). A fault that
 * is not armed from the start is armed by a file the test creates ({@link #arm}), at the moment it chooses.
 * Nothing in the connectors' code knows about faults.
 */
public final class FaultInjector {
    private final Path dir;
    private final List<Fault> faults;

    private FaultInjector(Path dir, List<Fault> faults) {
        this.dir = dir;
        this.faults = List.copyOf(faults);
    }

    /** Rules for {@code faults}, with their marker files in {@code dir}. */
    public static FaultInjector of(Path dir, Fault... faults) throws IOException {
        Files.createDirectories(dir);
        FaultInjector injector = new FaultInjector(dir.toAbsolutePath(), List.of(faults));
        for (Fault fault : faults) {
            Files.deleteIfExists(injector.firedFile(fault));
            Files.deleteIfExists(injector.armFile(fault));
        }
        Files.writeString(injector.scriptFile(), injector.rules());
        return injector;
    }

    /** The worker's JVM arguments: {@code workerArgs} (its heap, say), then the agent with the rules. */
    public List<String> jvmArgs(String... workerArgs) {
        String agent = agentJar();
        List<String> args = new ArrayList<>(List.of(workerArgs));
        args.add("-javaagent:" + agent + "=script:" + scriptFile() + ",boot:" + agent);
        return args;
    }

    /** Arms a fault created {@link Fault#disarmed()}: it fires from its next matching occurrence on. */
    public void arm(Fault fault) throws IOException {
        Files.writeString(armFile(fault), "armed");
    }

    /** Disarms a fault: occurrences from now on do not fire (and are not counted). */
    public void disarm(Fault fault) throws IOException {
        Files.deleteIfExists(armFile(fault));
    }

    public boolean fired(Fault fault) {
        return Files.exists(firedFile(fault));
    }

    /** Waits until {@code fault} fired; an assertion error names the step that was never reached. */
    public void awaitFired(Fault fault, Duration timeout) throws InterruptedException {
        if (!firedWithin(fault, timeout)) {
            throw new AssertionError("fault " + fault.name() + " (" + fault.className() + "." + fault.method() + " "
                    + fault.location() + ") did not fire within " + timeout);
        }
    }

    /** Whether {@code fault} has fired or fires within {@code timeout}. */
    public boolean firedWithin(Fault fault, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!fired(fault)) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(100);
        }
        return true;
    }

    /** The Byteman script for the faults. */
    public String rules() {
        StringBuilder script = new StringBuilder();
        for (Fault fault : faults) {
            script.append("RULE tablecdc fault ").append(fault.name()).append('\n')
                    .append("CLASS ").append(fault.className()).append('\n')
                    .append("METHOD ").append(fault.method()).append('\n')
                    .append(fault.location()).append('\n')
                    .append("BIND fired:java.io.File = new java.io.File(\"").append(escape(firedFile(fault))).append("\");\n")
                    .append("     armed:java.io.File = new java.io.File(\"").append(escape(armFile(fault))).append("\")\n")
                    .append("IF ").append(condition(fault)).append('\n')
                    .append("DO traceln(\"tablecdc fault ").append(fault.name()).append(" fires\");\n")
                    .append("   fired.createNewFile();\n")
                    .append("   ").append(action(fault)).append('\n')
                    .append("ENDRULE\n\n");
        }
        return script.toString();
    }

    private String condition(Fault fault) {
        // the counter moves only while the fault is armed, so "the n-th occurrence" counts from arming
        String counter = "\"tablecdc." + fault.name() + "\"";
        String inRange = "incrementCounter(" + counter + ") > 0 && readCounter(" + counter + ") >= " + fault.occurrence()
                + " && readCounter(" + counter + ") < " + (fault.occurrence() + fault.times());
        if (fault.armed()) {
            return inRange;
        }
        return "armed.exists() && " + inRange;
    }

    private static String action(Fault fault) {
        return switch (fault.action().kind()) {
            case KILL -> "killJVM(137)";
            case THROW -> "throw new " + fault.action().exceptionClass() + "("
                    + (fault.action().statusCode() == null ? "" : fault.action().statusCode() + ", ")
                    + "\"tablecdc fault " + fault.name() + "\"" + (fault.action().causeArgument() ? ", null)" : ")");
            case HANG -> "delay(" + fault.action().hangMillis() + "L)";
        };
    }

    private static String escape(Path path) {
        return path.toString().replace("\\", "\\\\").replace("\"", "\\\"");
    }

    Path scriptFile() {
        return dir.resolve("faults.btm");
    }

    Path firedFile(Fault fault) {
        return dir.resolve(fault.name() + ".fired");
    }

    Path armFile(Fault fault) {
        return dir.resolve(fault.name() + ".armed");
    }

    /** The Byteman agent jar on this JVM's class path (the test-stack module depends on it). */
    static String agentJar() {
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            String name = Path.of(entry).getFileName().toString();
            if (name.startsWith("byteman-") && name.endsWith(".jar") && name.matches("byteman-\\d.*")) {
                return Path.of(entry).toAbsolutePath().toString();
            }
        }
        throw new IllegalStateException("the Byteman agent (org.jboss.byteman:byteman) is not on the class path");
    }
}
