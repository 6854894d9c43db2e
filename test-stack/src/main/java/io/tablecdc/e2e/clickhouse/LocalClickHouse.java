package io.tablecdc.e2e.clickhouse;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The ClickHouse of the local test stack: the chDB engine in this JVM behind {@link ChdbHttpFront}, reached
 * over ClickHouse's HTTP interface at {@link #httpUrl()}.
 *
 * <p><b>Test fixture.</b> The engine and its HTTP front exist for tests, benchmarks and the quickstart; a
 * deployment runs a real ClickHouse server. Set {@code TABLECDC_CLICKHOUSE_URL} (e.g.
 * {@code http://127.0.0.1:8123}) to run the same tests against a real server: {@link #start} then starts
 * nothing.
 *
 * <p>The engine library comes from {@code TABLECDC_CHDB_LIB}, else {@code .cache/chdb/26.5.3/libchdb.so}
 * under the project root (system property {@code tablecdc.root}, else the nearest folder above the working
 * directory holding {@code mvnw}); when missing it is fetched by {@code scripts/install-chdb.sh}. The JVM
 * needs Java 22+ and {@code --enable-native-access=ALL-UNNAMED}. One engine per JVM.
 */
public final class LocalClickHouse implements AutoCloseable {

    static final String CHDB_VERSION = "26.5.3";

    private final String httpUrl;
    private final String user;
    private final String password;
    private final Chdb chdb;
    private final ChdbHttpFront front;

    private LocalClickHouse(String httpUrl, String user, String password, Chdb chdb, ChdbHttpFront front) {
        this.httpUrl = httpUrl;
        this.user = user;
        this.password = password;
        this.chdb = chdb;
        this.front = front;
    }

    /**
     * Starts the engine with its data under {@code workDir} and its HTTP front on 127.0.0.1 at an ephemeral
     * port, or points at {@code TABLECDC_CLICKHOUSE_URL} when that is set (as {@code TABLECDC_CLICKHOUSE_USER},
     * default {@code default}, with {@code TABLECDC_CLICKHOUSE_PASSWORD}, default empty).
     */
    public static LocalClickHouse start(Path workDir) {
        String external = System.getenv("TABLECDC_CLICKHOUSE_URL");
        if (external != null && !external.isBlank()) {
            String user = System.getenv("TABLECDC_CLICKHOUSE_USER");
            String password = System.getenv("TABLECDC_CLICKHOUSE_PASSWORD");
            return new LocalClickHouse(external.replaceAll("/+$", ""), user == null || user.isBlank() ? "default" : user,
                    password == null ? "" : password, null, null);
        }
        Path library = library();
        Path dataDir = workDir.resolve("chdb-data");
        try {
            Files.createDirectories(dataDir);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create " + dataDir, e);
        }
        Chdb chdb = Chdb.open(library, dataDir);
        try {
            ChdbHttpFront front = ChdbHttpFront.start(chdb);
            return new LocalClickHouse("http://127.0.0.1:" + front.port(), "default", "", chdb, front);
        } catch (RuntimeException e) {
            chdb.close();
            throw e;
        }
    }

    /**
     * Adds a user of the in-process engine's front (every right, this password); against an external server, create
     * the user there instead.
     */
    public void addUser(String name, String userPassword) {
        if (front == null) {
            throw new IllegalStateException("users of an external ClickHouse are created on that server");
        }
        front.addUser(name, userPassword);
    }

    /** How many requests the in-process engine's front received so far: a mark for {@link #requestUrlsSince}. */
    public long requestCount() {
        return embeddedFront().requestCount();
    }

    /** The URLs (path and query string) of the requests the in-process engine's front received after {@code mark}. */
    public List<String> requestUrlsSince(long mark) {
        return embeddedFront().requestUrlsSince(mark);
    }

    private ChdbHttpFront embeddedFront() {
        if (front == null) {
            throw new IllegalStateException("the URLs an external ClickHouse received are in its own logs");
        }
        return front;
    }

    /** The HTTP interface, e.g. {@code http://127.0.0.1:41234}; user {@code default} with an empty password. */
    public String httpUrl() {
        return httpUrl;
    }

    /** The user tests and connectors log in as. */
    public String user() {
        return user;
    }

    /** That user's password (empty for the in-process engine's {@code default} user). */
    public String password() {
        return password;
    }

    /**
     * A new client of this ClickHouse as the tests use it (its user, answers not compressed); the caller closes it.
     */
    public com.clickhouse.client.api.Client client() {
        return new com.clickhouse.client.api.Client.Builder().addEndpoint(httpUrl).setUsername(user).setPassword(password)
                .compressServerResponse(false).build();
    }

    /** True when this instance runs the in-process engine, false when it points at an external server. */
    public boolean isEmbedded() {
        return chdb != null;
    }

    @Override
    public void close() {
        if (front != null) {
            front.close();
        }
        if (chdb != null) {
            chdb.close();
        }
    }

    private static Path library() {
        String configured = System.getenv("TABLECDC_CHDB_LIB");
        if (configured != null && !configured.isBlank()) {
            Path lib = Path.of(configured);
            if (!Files.isRegularFile(lib)) {
                throw new IllegalStateException("TABLECDC_CHDB_LIB=" + configured + " is not a file");
            }
            return lib;
        }
        Path root = projectRoot();
        Path lib = root.resolve(".cache/chdb/" + CHDB_VERSION + "/libchdb.so");
        return Files.isRegularFile(lib) ? lib : install(root);
    }

    /** Runs the install script (which knows how to fetch the npm package) and returns the path it prints. */
    private static Path install(Path root) {
        Path script = root.resolve("scripts/install-chdb.sh");
        if (!Files.isRegularFile(script)) {
            throw new IllegalStateException("libchdb.so is missing and " + script + " does not exist");
        }
        try {
            Process process = new ProcessBuilder(List.of("bash", script.toString()))
                    .redirectError(ProcessBuilder.Redirect.INHERIT)
                    .start();
            String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            int exit = process.waitFor();
            List<String> lines = out.lines().filter(l -> !l.isBlank()).toList();
            if (exit != 0 || lines.isEmpty()) {
                throw new IllegalStateException(script + " failed with exit code " + exit
                        + "; run it by hand to see why (it needs npm and the npm registry)");
            }
            return Path.of(lines.getLast().trim());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run " + script, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while running " + script, e);
        }
    }

    /** The folder holding {@code mvnw}: from {@code tablecdc.root}, else the nearest one above the cwd. */
    static Path projectRoot() {
        String configured = System.getProperty("tablecdc.root");
        if (configured != null && !configured.isBlank()) {
            return Path.of(configured).toAbsolutePath().normalize();
        }
        for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            if (Files.isRegularFile(dir.resolve("mvnw"))) {
                return dir;
            }
        }
        throw new IllegalStateException("cannot find the project root (a folder with mvnw) above "
                + Path.of("").toAbsolutePath() + "; set -Dtablecdc.root");
    }
}
