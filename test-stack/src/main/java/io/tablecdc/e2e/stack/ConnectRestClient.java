package io.tablecdc.e2e.stack;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The Kafka Connect REST API as tests, the quickstart and benchmarks use it: deploy a JSON config, read
 * status per task, pause, resume, stop, alter or reset offsets, delete.
 */
public final class ConnectRestClient {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final URI base;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    public ConnectRestClient(URI base) {
        this.base = base;
    }

    /** A non-2xx answer from the worker, with its status code and the worker's message. */
    public static final class ConnectRestException extends RuntimeException {
        private final int status;

        ConnectRestException(String method, String path, int status, String body) {
            super(method + " " + path + " answered " + status + ": " + body);
            this.status = status;
        }

        public int status() {
            return status;
        }
    }

    /** The connector classes the worker loaded, e.g. {@code io.tablecdc.pg.PgPipelineSourceConnector}. */
    public List<String> connectorPlugins() {
        List<String> classes = new ArrayList<>();
        for (JsonNode plugin : call("GET", "/connector-plugins?connectorsOnly=true", null)) {
            classes.add(plugin.path("class").asText());
        }
        return classes;
    }

    /** {@code PUT /connectors/<name>/config}: creates or updates a connector. */
    public JsonNode putConfig(String name, Map<String, String> config) {
        return call("PUT", "/connectors/" + enc(name) + "/config", config);
    }

    /** {@code PUT /connector-plugins/<class>/config/validate}: the worker's and the connector's validation. */
    public JsonNode validate(String connectorClass, Map<String, String> config) {
        String simple = connectorClass.substring(connectorClass.lastIndexOf('.') + 1);
        return call("PUT", "/connector-plugins/" + enc(simple) + "/config/validate", config);
    }

    /** Error messages of a validation answer, keyed "field: message", empty when the config is valid. */
    public static List<String> validationErrors(JsonNode validation) {
        List<String> errors = new ArrayList<>();
        for (JsonNode config : validation.path("configs")) {
            JsonNode value = config.path("value");
            for (JsonNode error : value.path("errors")) {
                errors.add(value.path("name").asText() + ": " + error.asText());
            }
        }
        return errors;
    }

    public List<String> connectors() {
        List<String> names = new ArrayList<>();
        call("GET", "/connectors", null).forEach(n -> names.add(n.asText()));
        return names;
    }

    public JsonNode status(String name) {
        return call("GET", "/connectors/" + enc(name) + "/status", null);
    }

    public void pause(String name) {
        call("PUT", "/connectors/" + enc(name) + "/pause", null);
    }

    public void resume(String name) {
        call("PUT", "/connectors/" + enc(name) + "/resume", null);
    }

    /** Stops the connector and its tasks (KIP-875); offsets can then be altered or reset. */
    public void stop(String name) {
        call("PUT", "/connectors/" + enc(name) + "/stop", null);
    }

    public void restart(String name, boolean includeTasks, boolean onlyFailed) {
        call("POST", "/connectors/" + enc(name) + "/restart?includeTasks=" + includeTasks + "&onlyFailed=" + onlyFailed, null);
    }

    public JsonNode offsets(String name) {
        return call("GET", "/connectors/" + enc(name) + "/offsets", null);
    }

    /** {@code PATCH /connectors/<name>/offsets} with {@code {"offsets":[{"partition":…,"offset":…}]}}. */
    public JsonNode alterOffsets(String name, List<Map<String, Object>> partitionsAndOffsets) {
        return call("PATCH", "/connectors/" + enc(name) + "/offsets", Map.of("offsets", partitionsAndOffsets));
    }

    public JsonNode resetOffsets(String name) {
        return call("DELETE", "/connectors/" + enc(name) + "/offsets", null);
    }

    public void delete(String name) {
        call("DELETE", "/connectors/" + enc(name), null);
    }

    /** Connector state ({@code RUNNING}, {@code PAUSED}, {@code STOPPED}, {@code FAILED}) and every task's. */
    public List<String> states(String name) {
        JsonNode status = status(name);
        List<String> states = new ArrayList<>();
        states.add(status.path("connector").path("state").asText());
        status.path("tasks").forEach(t -> states.add(t.path("state").asText()));
        return states;
    }

    /**
     * Waits until the status satisfies {@code condition}; fails with the last status seen (including task
     * traces) when it does not within {@code timeout}.
     */
    public JsonNode awaitStatus(String name, Predicate<JsonNode> condition, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        JsonNode last = null;
        String lastError = null;
        while (System.nanoTime() < deadline) {
            try {
                last = status(name);
                if (condition.test(last)) {
                    return last;
                }
            } catch (ConnectRestException e) {
                lastError = e.getMessage();
            }
            Thread.sleep(200);
        }
        throw new AssertionError("connector " + name + " did not reach the expected status within " + timeout
                + "; last status: " + last + (lastError == null ? "" : "; last error: " + lastError));
    }

    /** Waits until the connector and {@code tasks} tasks are RUNNING. */
    public JsonNode awaitRunning(String name, int tasks, Duration timeout) throws InterruptedException {
        return awaitStatus(name, s -> "RUNNING".equals(s.path("connector").path("state").asText())
                && s.path("tasks").size() == tasks
                && allTasks(s, "RUNNING"), timeout);
    }

    private static boolean allTasks(JsonNode status, String state) {
        for (JsonNode task : status.path("tasks")) {
            if (!state.equals(task.path("state").asText())) {
                return false;
            }
        }
        return true;
    }

    private JsonNode call(String method, String path, Object body) {
        try {
            HttpRequest.Builder request = HttpRequest.newBuilder(base.resolve(path))
                    .timeout(Duration.ofSeconds(90))
                    .header("Accept", "application/json");
            if (body == null) {
                request.method(method, HttpRequest.BodyPublishers.noBody());
            } else {
                request.header("Content-Type", "application/json")
                        .method(method, HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body)));
            }
            HttpResponse<String> response = http.send(request.build(), HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() / 100 != 2) {
                throw new ConnectRestException(method, path, response.statusCode(), response.body());
            }
            String text = response.body();
            return text == null || text.isBlank() ? JSON.nullNode() : JSON.readTree(text);
        } catch (IOException e) {
            throw new IllegalStateException(method + " " + base.resolve(path) + " failed: " + e, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted during " + method + " " + path, e);
        }
    }

    private static String enc(String segment) {
        return URLEncoder.encode(segment, StandardCharsets.UTF_8).replace("+", "%20");
    }
}
