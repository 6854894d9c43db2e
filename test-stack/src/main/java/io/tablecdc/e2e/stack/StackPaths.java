package io.tablecdc.e2e.stack;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;

/** Where the project and the stack's working folders are, and how to get a free loopback port. */
public final class StackPaths {
    private StackPaths() {
    }

    /**
     * The project root: the {@code tablecdc.root} system property (set by the build) or the nearest
     * folder above the working directory that holds {@code mvnw}.
     */
    public static Path projectRoot() {
        String configured = System.getProperty("tablecdc.root");
        if (configured != null && !configured.isBlank()) {
            return Path.of(configured).toAbsolutePath().normalize();
        }
        for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            if (Files.isRegularFile(dir.resolve("mvnw")) && Files.isDirectory(dir.resolve("test-stack"))) {
                return dir;
            }
        }
        throw new IllegalStateException("cannot find the tablecdc project root above "
                + Path.of("").toAbsolutePath() + "; set -Dtablecdc.root=<folder with mvnw>");
    }

    /**
     * The folder holding the stacks' working folders, {@code e2e/target/stack/}: under the end-to-end tests' module,
     * which starts most stacks; the quickstart and the benchmarks put theirs there too.
     */
    public static Path stackRoot() {
        return projectRoot().resolve("e2e").resolve("target").resolve("stack");
    }

    /** A fresh folder under {@link #stackRoot()} for one component of one stack. */
    public static Path workDir(String name) {
        Path dir = stackRoot().resolve(name + "-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        try {
            return Files.createDirectories(dir);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create " + dir, e);
        }
    }

    /**
     * A port that was free on 127.0.0.1 a moment ago. Only for servers that must know their port before
     * they bind (a KRaft controller quorum); everything else binds port 0 itself.
     */
    public static int freePort() {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            socket.setReuseAddress(true);
            return socket.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException("no free port on 127.0.0.1", e);
        }
    }

    /** The value of an environment variable, or null when it is unset or blank. */
    public static String env(String name) {
        String value = System.getenv(name);
        return value == null || value.isBlank() ? null : value;
    }
}
