package io.tablecdc.e2e.stack;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A schema registry for tests of the converters production workers use: Apicurio Registry (in-memory H2 storage) as a
 * child JVM on 127.0.0.1 and a port of its own choosing, with Apicurio's Avro converter laid out as a Connect plugin
 * folder ({@link #converterPluginPath()}). Both are installed from Maven Central by
 * {@code scripts/install-schema-registry.sh} into {@code .cache/schema-registry/}.
 *
 * <p>With {@value #ENV_URL} set (the registry's base URL, e.g. {@code http://127.0.0.1:8080}) no registry is started;
 * the converter is still installed, since the worker of the local stack needs it.
 */
public final class LocalSchemaRegistry implements AutoCloseable {
    public static final String ENV_URL = "TABLECDC_SCHEMA_REGISTRY_URL";
    static final String INSTALL_SCRIPT = "scripts/install-schema-registry.sh";
    private static final Duration INSTALL_TIMEOUT = Duration.ofMinutes(10);
    private static final Duration START_TIMEOUT = Duration.ofSeconds(120);
    private static final Pattern LISTENING = Pattern.compile("Listening on: (http://127\\.0\\.0\\.1:\\d+)");
    private static final Logger log = LoggerFactory.getLogger(LocalSchemaRegistry.class);

    private final String url;
    private final Path converterPluginPath;
    private final Process process;
    private final Path logFile;

    private LocalSchemaRegistry(String url, Path converterPluginPath, Process process, Path logFile) {
        this.url = url;
        this.converterPluginPath = converterPluginPath;
        this.process = process;
        this.logFile = logFile;
    }

    /** Installs (once) and starts the registry with its log under {@code workDir}, or points at {@value #ENV_URL}. */
    public static LocalSchemaRegistry start(Path workDir) throws IOException, InterruptedException {
        Files.createDirectories(workDir);
        Path home = install(workDir);
        Path converters = home.resolve("converter");
        String external = StackPaths.env(ENV_URL);
        if (external != null) {
            log.info("schema registry: using {} from {}", external, ENV_URL);
            return new LocalSchemaRegistry(external.endsWith("/") ? external.substring(0, external.length() - 1) : external,
                    converters, null, null);
        }
        Path logFile = workDir.resolve("registry.log");
        long started = System.nanoTime();
        List<String> command = List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx384m",
                // as a test worker's (ConnectWorker.TEST_JVM_ARGS): the suite's cores are busy, its JIT never pays back
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-Dquarkus.http.host=127.0.0.1",
                "-Dquarkus.http.port=0",
                // the management interface (health, metrics) would listen on 0.0.0.0:9000
                "-Dquarkus.management.enabled=false",
                "-jar", home.resolve("server").resolve("quarkus-run.jar").toString());
        Process process = new ProcessBuilder(command)
                .directory(workDir.toFile())
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile()))
                .start();
        LocalSchemaRegistry registry = null;
        try {
            String url = awaitListening(process, logFile);
            registry = new LocalSchemaRegistry(url, converters, process, logFile);
            registry.awaitAnswering();
        } catch (IOException | InterruptedException | RuntimeException e) {
            process.destroyForcibly();
            throw e;
        }
        log.info("schema registry (Apicurio) up at {} (pid {}) in {} ms; log {}", registry.url, process.pid(),
                (System.nanoTime() - started) / 1_000_000, logFile);
        return registry;
    }

    /** The registry's base URL, e.g. {@code http://127.0.0.1:41234}. */
    public String url() {
        return url;
    }

    /** The URL of Apicurio's v2 REST API, the one the converter's {@code apicurio.registry.url} names. */
    public String apiV2Url() {
        return url + "/apis/registry/v2";
    }

    /**
     * A {@code plugin.path} entry holding Apicurio's Avro converter ({@code io.apicurio.registry.utils.converter.AvroConverter})
     * as one plugin folder; add it to a worker's {@code plugin.path} next to the connector archives.
     */
    public Path converterPluginPath() {
        return converterPluginPath;
    }

    /** Apicurio's Avro converter for Kafka Connect. */
    public static final String AVRO_CONVERTER = "io.apicurio.registry.utils.converter.AvroConverter";

    /**
     * {@code config} (a connector's) with Apicurio's Avro converter for keys and values against this registry: schema
     * ids in the payload, schemas registered as met. Returns {@code config}.
     */
    public java.util.Map<String, String> withAvroConverters(java.util.Map<String, String> config) {
        for (String side : new String[] {"key", "value"}) {
            config.put(side + ".converter", AVRO_CONVERTER);
            config.put(side + ".converter.apicurio.registry.url", apiV2Url());
            config.put(side + ".converter.apicurio.registry.auto-register", "true");
            config.put(side + ".converter.apicurio.registry.headers.enabled", "false");
        }
        return config;
    }

    /**
     * Apicurio's Avro converter, configured as {@link #withAvroConverters} configures a connector's, loaded in this JVM
     * from {@link #converterPluginPath()} in a class loader of its own (Kafka's and the logging API's classes from
     * this JVM, the rest from the plugin's jars first), as a worker isolates a plugin: to write records the way a
     * worker with that converter does.
     */
    public org.apache.kafka.connect.storage.Converter avroConverter(boolean isKey) throws IOException, ReflectiveOperationException {
        synchronized (this) {
            if (pluginLoader == null) {
                List<java.net.URL> jars = new java.util.ArrayList<>();
                try (var files = Files.list(converterPluginPath.resolve("apicurio-avro"))) {
                    for (Path jar : files.filter(f -> f.toString().endsWith(".jar")).sorted().toList()) {
                        jars.add(jar.toUri().toURL());
                    }
                }
                pluginLoader = new PluginFirstLoader(jars.toArray(new java.net.URL[0]), LocalSchemaRegistry.class.getClassLoader());
            }
        }
        var converter = (org.apache.kafka.connect.storage.Converter) Class.forName(AVRO_CONVERTER, true, pluginLoader)
                .getDeclaredConstructor().newInstance();
        java.util.Map<String, String> config = new java.util.HashMap<>();
        withAvroConverters(config);
        java.util.Map<String, Object> own = new java.util.HashMap<>();
        String prefix = (isKey ? "key" : "value") + ".converter.";
        config.forEach((k, v) -> {
            if (k.startsWith(prefix)) {
                own.put(k.substring(prefix.length()), v);
            }
        });
        Thread thread = Thread.currentThread();
        ClassLoader previous = thread.getContextClassLoader();
        thread.setContextClassLoader(pluginLoader);
        try {
            converter.configure(own, isKey);
        } finally {
            thread.setContextClassLoader(previous);
        }
        return converter;
    }

    private PluginFirstLoader pluginLoader;

    /** Loads from its jars first, except the JDK's, Kafka's and SLF4J's classes, which come from the parent. */
    private static final class PluginFirstLoader extends java.net.URLClassLoader {
        PluginFirstLoader(java.net.URL[] jars, ClassLoader parent) {
            super(jars, parent);
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (name.startsWith("java.") || name.startsWith("jdk.") || name.startsWith("sun.")
                    || name.startsWith("org.apache.kafka.") || name.startsWith("org.slf4j.")) {
                return super.loadClass(name, resolve);
            }
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                if (c == null) {
                    try {
                        c = findClass(name);
                    } catch (ClassNotFoundException notInPlugin) {
                        c = super.loadClass(name, false);
                    }
                }
                if (resolve) {
                    resolveClass(c);
                }
                return c;
            }
        }
    }

    /** The registry's process id, when this stack started it. */
    public java.util.OptionalLong pid() {
        return process == null ? java.util.OptionalLong.empty() : java.util.OptionalLong.of(process.pid());
    }

    private static Path install(Path workDir) throws IOException, InterruptedException {
        Path root = StackPaths.projectRoot();
        Path script = root.resolve(INSTALL_SCRIPT);
        Path installLog = workDir.resolve("install-schema-registry.log");
        Path output = workDir.resolve("install-schema-registry.out");
        Process install = new ProcessBuilder("bash", script.toString())
                .directory(root.toFile())
                .redirectOutput(output.toFile())
                .redirectError(ProcessBuilder.Redirect.appendTo(installLog.toFile()))
                .start();
        if (!install.waitFor(INSTALL_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
            install.destroyForcibly();
            throw new IllegalStateException("installing the schema registry took more than " + INSTALL_TIMEOUT
                    + "; log " + installLog + ":\n" + tail(installLog));
        }
        List<String> lines = Files.readAllLines(output, StandardCharsets.UTF_8);
        if (install.exitValue() != 0 || lines.isEmpty()) {
            throw new IllegalStateException("installing the schema registry failed (exit " + install.exitValue()
                    + "); log " + installLog + ":\n" + tail(installLog));
        }
        return Path.of(lines.getLast().strip());
    }

    private static String awaitListening(Process process, Path logFile) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        while (true) {
            if (Files.exists(logFile)) {
                Matcher m = LISTENING.matcher(Files.readString(logFile, StandardCharsets.UTF_8));
                if (m.find()) {
                    return m.group(1);
                }
            }
            if (!process.isAlive()) {
                throw new IllegalStateException("the schema registry exited with " + process.exitValue()
                        + " before listening; log " + logFile + ":\n" + tail(logFile));
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the schema registry did not listen within " + START_TIMEOUT + "; log "
                        + logFile + ":\n" + tail(logFile));
            }
            Thread.sleep(200);
        }
    }

    private void awaitAnswering() throws IOException, InterruptedException {
        URI probe = URI.create(url + "/apis/registry/v3/system/info");
        try (HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build()) {
            HttpResponse<String> response = http.send(HttpRequest.newBuilder(probe).timeout(Duration.ofSeconds(10)).GET().build(),
                    HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() != 200) {
                throw new IllegalStateException("the schema registry answered " + probe + " with HTTP "
                        + response.statusCode() + ": " + response.body());
            }
        }
    }

    private static String tail(Path file) {
        try {
            List<String> all = Files.readAllLines(file, StandardCharsets.UTF_8);
            return String.join("\n", all.subList(Math.max(0, all.size() - 40), all.size()));
        } catch (IOException | UncheckedIOException e) {
            return "(cannot read " + file + ": " + e + ")";
        }
    }

    @Override
    public void close() throws InterruptedException {
        if (process != null && process.isAlive()) {
            process.destroy();
            if (!process.waitFor(20, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(10, TimeUnit.SECONDS);
            }
        }
    }
}
