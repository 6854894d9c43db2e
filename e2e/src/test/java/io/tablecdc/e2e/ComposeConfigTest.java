package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.tablecdc.e2e.stack.StackPaths;

/**
 * The compose deployment in {@code docker/} as a compose implementation sees it, without a container engine: the files
 * are loaded and validated by compose-go (the loader of {@code docker compose config}, built by
 * {@code scripts/install-compose-config.sh}), then the resolved project is checked: each service gets only its own
 * secrets and the Connect workers are health-checked on Connect's {@code /health}.
 */
class ComposeConfigTest {
    private static final Path ROOT = StackPaths.projectRoot();
    private static final Path DOCKER = ROOT.resolve("docker");
    private static final Set<String> SECRETS = Set.of("POSTGRES_PASSWORD", "TABLECDC_DB_PASSWORD", "CLICKHOUSE_PASSWORD",
            "S3_ACCESS_KEY", "S3_SECRET_KEY");
    private static Path composeConfig;

    @BeforeAll
    static void install() throws Exception {
        Result r = run(List.of("bash", ROOT.resolve("scripts/install-compose-config.sh").toString()), ROOT);
        assertEquals(0, r.exit, "install-compose-config.sh: " + r.err);
        composeConfig = Path.of(r.out.strip().lines().reduce((a, b) -> b).orElseThrow());
    }

    @Test
    void theDeploymentIsAValidComposeProjectAndEachServiceGetsOnlyItsSecrets() throws Exception {
        JsonNode project = config("-f", "compose.yaml", "--profile", "two-workers");
        Map<String, Set<String>> expected = Map.of(
                "kafka", Set.of(),
                "connect", Set.of("TABLECDC_DB_PASSWORD", "CLICKHOUSE_PASSWORD", "S3_ACCESS_KEY", "S3_SECRET_KEY"),
                "connect-2", Set.of("TABLECDC_DB_PASSWORD", "CLICKHOUSE_PASSWORD", "S3_ACCESS_KEY", "S3_SECRET_KEY"),
                "postgres", Set.of("POSTGRES_PASSWORD", "TABLECDC_DB_PASSWORD"),
                "clickhouse", Set.of("CLICKHOUSE_PASSWORD"),
                "s3", Set.of("S3_ACCESS_KEY", "S3_SECRET_KEY"),
                "bigquery", Set.of());
        assertEquals(new TreeSet<>(expected.keySet()), names(project.path("services")));
        for (Map.Entry<String, Set<String>> service : expected.entrySet()) {
            JsonNode s = project.path("services").path(service.getKey());
            Set<String> secrets = new TreeSet<>(names(s.path("environment")));
            secrets.retainAll(SECRETS);
            assertEquals(new TreeSet<>(service.getValue()), secrets, service.getKey() + "'s secrets");
            assertTrue(s.path("env_file").isMissingNode() || s.path("env_file").isEmpty(), service.getKey() + " reads an env_file");
        }
        // the workers' file-provider secrets: the connector secrets, never the superuser's
        String workerFile = project.path("configs").path("connect-secrets").path("content").asText();
        assertTrue(workerFile.contains("CLICKHOUSE_PASSWORD=") && !workerFile.contains("POSTGRES_PASSWORD"), workerFile);
        for (String worker : List.of("connect", "connect-2")) {
            assertEquals("/etc/tablecdc/secrets.properties",
                    project.path("services").path(worker).path("configs").path(0).path("target").asText(), worker);
        }
        assertTrue(project.path("services").path("connect").path("healthcheck").path("test").toString()
                .contains("http://127.0.0.1:8083/health"), "the worker's health check is Connect's /health");
    }

    @Test
    void theEndToEndOverlayIsValidToo() throws Exception {
        JsonNode project = config("-f", "compose.yaml", "-f", "compose.e2e.yaml", "--profile", "e2e");
        assertTrue(project.path("services").has("e2e"), project.path("services").toString());
    }

    @Test
    void anInvalidFileIsRefused() throws Exception {
        // proof that the check can fail: a health check whose interval is not a duration
        Path broken = StackPaths.workDir("compose-config").resolve("compose.yaml");
        Files.writeString(broken, "services:\n  x:\n    image: busybox\n    healthcheck:\n      interval: often\n");
        Result r = run(List.of(composeConfig.toString(), "-f", broken.toString()), broken.getParent());
        assertNotEquals(0, r.exit, r.out);
        assertTrue(r.err.contains("often"), r.err);
    }

    private static JsonNode config(String... args) throws Exception {
        List<String> command = new ArrayList<>(List.of(composeConfig.toString(), "--format", "json"));
        command.addAll(List.of(args));
        Result r = run(command, DOCKER);
        assertEquals(0, r.exit, "compose config " + String.join(" ", args) + ": " + r.err);
        return new ObjectMapper().readTree(r.out);
    }

    private static Set<String> names(JsonNode object) {
        Set<String> names = new TreeSet<>();
        object.fieldNames().forEachRemaining(names::add);
        return names;
    }

    private record Result(int exit, String out, String err) {
    }

    private static Result run(List<String> command, Path dir) throws IOException, InterruptedException {
        Path err = Files.createTempFile(StackPaths.workDir("compose-config"), "stderr", ".txt");
        ProcessBuilder pb = new ProcessBuilder(command).directory(dir.toFile()).redirectError(err.toFile());
        // the deployment's values come from docker/.env, not from whatever the test JVM's environment holds
        SECRETS.forEach(pb.environment()::remove);
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(5, TimeUnit.MINUTES), "timed out: " + command);
        return new Result(p.exitValue(), out, Files.readString(err));
    }
}
