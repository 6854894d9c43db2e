package io.tablecdc.e2e.bigquery;

import com.google.cloud.NoCredentials;
import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.BigQueryOptions;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The BigQuery emulator of the local test stack: PyPI {@code local-bigquery} (DuckDB-backed; REST on one port,
 * Storage Read/Write gRPC on another), installed by {@code scripts/install-bq-emulator.sh} into
 * {@code .cache/bqemulator/} under the project root and run as a child process bound to 127.0.0.1 on free ports.
 *
 * <p>If the environment variable {@value #ENV_ENDPOINT} is set, nothing is installed or started: the handle points
 * at that endpoint, with the project from {@value #ENV_PROJECT} (default {@value #DEFAULT_PROJECT}).
 *
 * <p>What the emulator can and cannot do is written down in {@code docs/test-stack-bigquery.md}.
 */
public final class LocalBigQuery implements AutoCloseable {

    /** Points the stack at an external BigQuery-compatible endpoint, for example {@code http://127.0.0.1:9050}. */
    public static final String ENV_ENDPOINT = "TABLECDC_BIGQUERY_ENDPOINT";
    /** The project id to use with {@value #ENV_ENDPOINT}. */
    public static final String ENV_PROJECT = "TABLECDC_BIGQUERY_PROJECT";
    /** The project of the local emulator (and the default for an external endpoint). */
    public static final String DEFAULT_PROJECT = "tablecdc-local";
    /** The system property naming the project root (the folder holding {@code mvnw}). */
    public static final String ROOT_PROPERTY = "tablecdc.root";

    static final String INSTALL_SCRIPT = "scripts/install-bq-emulator.sh";
    static final Duration DEFAULT_START_TIMEOUT = Duration.ofSeconds(60);
    private static final Duration INSTALL_TIMEOUT = Duration.ofMinutes(10);
    private static final int START_ATTEMPTS = 3;
    private static final Logger LOG = LoggerFactory.getLogger(LocalBigQuery.class);

    private final String endpoint;
    private final String projectId;
    private final Integer grpcPort;
    private final Process process;
    private final Path logFile;
    private final Thread shutdownHook;
    private boolean closed;

    private LocalBigQuery(String endpoint, String projectId, Integer grpcPort, Process process, Path logFile) {
        this.endpoint = endpoint;
        this.projectId = projectId;
        this.grpcPort = grpcPort;
        this.process = process;
        this.logFile = logFile;
        if (process != null) {
            this.shutdownHook = new Thread(() -> destroyTree(process), "local-bigquery-shutdown");
            Runtime.getRuntime().addShutdownHook(shutdownHook);
        } else {
            this.shutdownHook = null;
        }
    }

    /** Starts the emulator with data and logs under {@code workDir}, or points at {@value #ENV_ENDPOINT}. */
    public static LocalBigQuery start(Path workDir) {
        return start(workDir, DEFAULT_START_TIMEOUT);
    }

    /** As {@link #start(Path)}, waiting at most {@code timeout} for the emulator to answer. */
    public static LocalBigQuery start(Path workDir, Duration timeout) {
        String external = System.getenv(ENV_ENDPOINT);
        if (external != null && !external.isBlank()) {
            String project = Optional.ofNullable(System.getenv(ENV_PROJECT)).filter(p -> !p.isBlank()).orElse(DEFAULT_PROJECT);
            LOG.info("BigQuery: using external endpoint {} (project {}) from {}", external, project, ENV_ENDPOINT);
            return new LocalBigQuery(stripTrailingSlash(external.strip()), project, null, null, null);
        }
        try {
            Files.createDirectories(workDir);
            Path executable = install(workDir);
            IllegalStateException last = null;
            for (int attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
                try {
                    return launch(executable, workDir, timeout);
                } catch (PortTakenException e) {
                    // another process took a port between our probe and the emulator's bind: pick new ports
                    last = e;
                    LOG.warn("BigQuery emulator could not bind its ports (attempt {}), retrying", attempt);
                }
            }
            throw last;
        } catch (IOException e) {
            throw new UncheckedIOException("could not start the BigQuery emulator under " + workDir, e);
        }
    }

    /** The REST endpoint, for {@code BigQueryOptions.Builder.setHost}, e.g. {@code http://127.0.0.1:40123}. */
    public String endpoint() {
        return endpoint;
    }

    public String projectId() {
        return projectId;
    }

    /** The Storage Read/Write API (gRPC, plaintext) as {@code host:port}; empty for an external endpoint. */
    public Optional<String> storageEndpoint() {
        return grpcPort == null ? Optional.empty() : Optional.of("127.0.0.1:" + grpcPort);
    }

    /** The emulator's log file; empty for an external endpoint. */
    public Optional<Path> logFile() {
        return Optional.ofNullable(logFile);
    }

    /** The process id of the emulator; empty for an external endpoint. */
    public Optional<Long> pid() {
        return process == null ? Optional.empty() : Optional.of(process.pid());
    }

    /** A new client for this endpoint and project, without credentials. */
    public BigQuery client() {
        return BigQueryOptions.newBuilder()
                .setHost(endpoint)
                .setProjectId(projectId)
                .setCredentials(NoCredentials.getInstance())
                .build()
                .getService();
    }

    /** Stops the emulator and every process it started. Does nothing for an external endpoint. */
    @Override
    public synchronized void close() {
        if (closed || process == null) {
            closed = true;
            return;
        }
        closed = true;
        destroyTree(process);
        try {
            Runtime.getRuntime().removeShutdownHook(shutdownHook);
        } catch (IllegalStateException alreadyShuttingDown) {
            // the hook runs (or ran) anyway
        }
    }

    // ---------------------------------------------------------------------------------------------------------

    private static Path install(Path workDir) throws IOException {
        Path root = projectRoot();
        Path script = root.resolve(INSTALL_SCRIPT);
        if (!Files.isRegularFile(script)) {
            throw new IllegalStateException("BigQuery emulator install script not found: " + script);
        }
        // The script is idempotent: once installed it only prints the executable's path (a few ms).
        Path installLog = workDir.resolve("install-bq-emulator.log");
        Path output = workDir.resolve("install-bq-emulator.out");
        Process install = new ProcessBuilder("bash", script.toString())
                .directory(root.toFile())
                .redirectOutput(output.toFile())
                .redirectError(ProcessBuilder.Redirect.appendTo(installLog.toFile()))
                .start();
        try {
            if (!install.waitFor(INSTALL_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
                destroyTree(install);
                throw new IllegalStateException("installing the BigQuery emulator took more than " + INSTALL_TIMEOUT
                        + "; log " + installLog + ":\n" + tail(installLog, 40));
            }
        } catch (InterruptedException e) {
            destroyTree(install);
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while installing the BigQuery emulator", e);
        }
        List<String> lines = Files.readAllLines(output, StandardCharsets.UTF_8);
        if (install.exitValue() != 0 || lines.isEmpty()) {
            throw new IllegalStateException("installing the BigQuery emulator failed (exit " + install.exitValue()
                    + "); log " + installLog + ":\n" + tail(installLog, 40));
        }
        Path executable = Path.of(lines.get(lines.size() - 1).strip());
        if (!Files.isExecutable(executable)) {
            throw new IllegalStateException("the install script printed " + executable + ", which is not executable");
        }
        return executable;
    }

    private static LocalBigQuery launch(Path executable, Path workDir, Duration timeout) throws IOException {
        int restPort = freePort();
        int grpcPort = freePort();
        while (grpcPort == restPort) {
            grpcPort = freePort();
        }
        Path dataDir = Files.createDirectories(workDir.resolve("data"));
        Path log = workDir.resolve("local-bigquery.log");
        String endpoint = "http://127.0.0.1:" + restPort;
        long started = System.nanoTime();
        ProcessBuilder builder = new ProcessBuilder(executable.toString(), "serve",
                "--host", "127.0.0.1",
                "--port", Integer.toString(restPort),
                "--grpc-port", Integer.toString(grpcPort),
                "--project", DEFAULT_PROJECT,
                "--data-dir", dataDir.toString())
                .directory(workDir.toFile())
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
        builder.environment().put("PYTHONUNBUFFERED", "1");
        Process process = builder.start();
        LocalBigQuery handle = new LocalBigQuery(endpoint, DEFAULT_PROJECT, grpcPort, process, log);
        try {
            awaitReady(handle, timeout);
        } catch (RuntimeException | Error e) {
            handle.close();
            throw e;
        }
        LOG.info("BigQuery emulator up at {} (gRPC 127.0.0.1:{}, pid {}) in {} ms; log {}", endpoint, grpcPort,
                process.pid(), Duration.ofNanos(System.nanoTime() - started).toMillis(), log);
        return handle;
    }

    private static void awaitReady(LocalBigQuery handle, Duration timeout) {
        URI probe = URI.create(handle.endpoint + "/bigquery/v2/projects/" + handle.projectId + "/datasets");
        long deadline = System.nanoTime() + timeout.toNanos();
        try (HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build()) {
            while (true) {
                if (!handle.process.isAlive()) {
                    String tail = tail(handle.logFile, 40);
                    String message = "the BigQuery emulator exited with code " + handle.process.exitValue()
                            + " before answering; log " + handle.logFile + ":\n" + tail;
                    if (tail.contains("address already in use") || tail.contains("Failed to bind")) {
                        throw new PortTakenException(message);
                    }
                    throw new IllegalStateException(message);
                }
                try {
                    HttpResponse<Void> response = http.send(
                            HttpRequest.newBuilder(probe).timeout(Duration.ofSeconds(2)).GET().build(),
                            HttpResponse.BodyHandlers.discarding());
                    if (response.statusCode() == 200) {
                        return;
                    }
                } catch (IOException notYet) {
                    // not listening yet
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the BigQuery emulator did not answer " + probe + " within "
                            + timeout + "; log " + handle.logFile + ":\n" + tail(handle.logFile, 40));
                }
                Thread.sleep(100);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the BigQuery emulator", e);
        }
    }

    static Path projectRoot() {
        String configured = System.getProperty(ROOT_PROPERTY);
        if (configured != null && !configured.isBlank()) {
            return Path.of(configured).toAbsolutePath().normalize();
        }
        for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            if (Files.isRegularFile(dir.resolve("mvnw"))) {
                return dir;
            }
        }
        throw new IllegalStateException("cannot find the project root: set -D" + ROOT_PROPERTY
                + " or run from inside the project (no mvnw above " + Path.of("").toAbsolutePath() + ")");
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            socket.setReuseAddress(true);
            return socket.getLocalPort();
        }
    }

    private static void destroyTree(Process process) {
        List<ProcessHandle> all = new ArrayList<>();
        process.descendants().forEach(all::add);
        all.add(process.toHandle());
        all.forEach(ProcessHandle::destroy);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        for (ProcessHandle handle : all) {
            long left = deadline - System.nanoTime();
            try {
                if (left <= 0) {
                    break;
                }
                handle.onExit().get(left, TimeUnit.NANOSECONDS);
            } catch (Exception stillAlive) {
                break;
            }
        }
        all.stream().filter(ProcessHandle::isAlive).forEach(ProcessHandle::destroyForcibly);
    }

    static String tail(Path file, int lines) {
        if (file == null || !Files.isRegularFile(file)) {
            return "(no log)";
        }
        try {
            List<String> all = Files.readAllLines(file, StandardCharsets.UTF_8);
            return all.isEmpty() ? "(log is empty)" : String.join("\n", all.subList(Math.max(0, all.size() - lines), all.size()));
        } catch (IOException | UncheckedIOException e) {
            return "(cannot read log: " + e + ")";
        }
    }

    private static String stripTrailingSlash(String url) {
        return url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
    }

    private static final class PortTakenException extends IllegalStateException {
        PortTakenException(String message) {
            super(message);
        }
    }
}
