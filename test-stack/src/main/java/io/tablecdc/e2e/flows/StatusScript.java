package io.tablecdc.e2e.flows;

import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/** Runs the catalog tools of the unzipped plugin archives ({@code bin/tablecdc-*}) against a catalog, as an operator would. */
public final class StatusScript {
    private StatusScript() {
    }

    /** The script's output (stdout and stderr), or null when the sink archive has no {@code bin/tablecdc-status}. */
    public static String run(LocalStack stack, String catalogUrl, String... extraArgs) throws Exception {
        return runTool(stack, "tablecdc-connect-clickhouse-stage-sink-*", "tablecdc-status", catalogUrl, extraArgs);
    }

    /** {@code bin/tablecdc-reset-table --flow flow --table table} of the Postgres pipeline archive; its output. */
    public static String resetTable(LocalStack stack, String catalogUrl, String flow, String table) throws Exception {
        return runTool(stack, "tablecdc-connect-pg-pipeline-*", "tablecdc-reset-table", catalogUrl, "--flow", flow,
                "--table", table);
    }

    /** The output of {@code bin/<tool>} of the archive matching {@code archiveGlob}, or null when there is none. */
    public static String runTool(LocalStack stack, String archiveGlob, String tool, String catalogUrl, String... extraArgs)
            throws Exception {
        Path script = null;
        try (DirectoryStream<Path> archives = Files.newDirectoryStream(stack.pluginPath(), archiveGlob)) {
            for (Path archive : archives) {
                script = archive.resolve("bin/" + tool);
            }
        }
        if (script == null || !Files.exists(script)) {
            return null;
        }
        List<String> command = new ArrayList<>(List.of("sh", script.toString(), "--url", catalogUrl, "--user", stack.postgres().user()));
        command.addAll(List.of(extraArgs));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().put("JAVA_HOME", System.getProperty("java.home"));
        builder.environment().put("TABLECDC_CATALOG_PASSWORD", stack.postgres().password());
        Path log = Files.createTempFile(StackPaths.workDir("status"), "status", ".txt");
        Process process = builder.redirectOutput(log.toFile()).start();
        process.waitFor();
        String output = Files.readString(log);
        Files.deleteIfExists(log);
        return output;
    }
}
