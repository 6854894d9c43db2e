package io.tablecdc.e2e.faults;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

/**
 * An HTTP proxy on 127.0.0.1 in front of one HTTP server (the BigQuery emulator), which decides request by request:
 * unlike {@link FaultProxy}, which sees bytes only, it can fail or slow down one kind of call (reading a result page,
 * inserting a query job) while every other call passes. The test gives a {@link Rule}, which sees each request's
 * method and path (with its query) and answers how long to hold it and whether to answer it with an error status
 * itself (a Google API error body, reason {@code backendError}) instead of forwarding it. The server behind it is
 * the real one; only the chosen calls are changed.
 */
public final class HttpFaultProxy implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(HttpFaultProxy.class);
    /** Headers the JDK's client sets itself (or refuses), and hop-by-hop headers. */
    private static final Set<String> SKIPPED = Set.of("host", "content-length", "connection", "expect", "upgrade",
            "transfer-encoding", "keep-alive", "proxy-connection", "te", "trailer");

    /** What the proxy does with one request. */
    public record Action(long delayMillis, int errorStatus) {
        public static final Action PASS = new Action(0, 0);

        public static Action delay(long millis) {
            return new Action(millis, 0);
        }

        public static Action fail(int status) {
            return new Action(0, status);
        }
    }

    /** Decides what happens to a request; called on the proxy's threads, for every request, in arrival order. */
    @FunctionalInterface
    public interface Rule {
        Action decide(String method, String pathAndQuery);
    }

    private final String name;
    private final URI target;
    private final HttpServer server;
    private final HttpClient client;
    private final ExecutorService executor = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "http-fault-proxy");
        t.setDaemon(true);
        return t;
    });
    private volatile Rule rule = (method, path) -> Action.PASS;
    private volatile java.util.function.BiFunction<String, byte[], byte[]> answers = (request, body) -> body;
    private final AtomicLong forwarded = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();

    private HttpFaultProxy(String name, URI target) throws IOException {
        this.name = name;
        this.target = target;
        this.client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5))
                .executor(executor).build();
        this.server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 50);
        server.createContext("/", this::handle);
        server.setExecutor(executor);
        server.start();
    }

    /** A proxy named {@code name} (for logs) forwarding to {@code target} (scheme, host and port). */
    public static HttpFaultProxy start(String name, String target) throws IOException {
        HttpFaultProxy proxy = new HttpFaultProxy(name, URI.create(target));
        log.info("http fault proxy {} on {} in front of {}", name, proxy.url(), target);
        return proxy;
    }

    /** The proxy's base URL, {@code http://127.0.0.1:<port>}. */
    public String url() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    /** From now on, every request is decided by {@code next}. */
    public void rule(Rule next) {
        rule = next;
    }

    /**
     * From now on, the body of every answer the server gives is passed through {@code rewrite} ({@code "METHOD path"}
     * and the body in, the body to send out): a field the server cannot fill in made up by the test. A test that
     * rewrites answers says so, and what it changes.
     */
    public void answers(java.util.function.BiFunction<String, byte[], byte[]> rewrite) {
        answers = rewrite;
    }

    /** Requests forwarded to the server so far. */
    public long forwarded() {
        return forwarded.get();
    }

    /** Requests answered with an error by the proxy so far. */
    public long failed() {
        return failed.get();
    }

    private void handle(HttpExchange exchange) throws IOException {
        try (exchange) {
            String method = exchange.getRequestMethod();
            String path = exchange.getRequestURI().getRawPath()
                    + (exchange.getRequestURI().getRawQuery() == null ? "" : "?" + exchange.getRequestURI().getRawQuery());
            byte[] body;
            try (InputStream in = exchange.getRequestBody()) {
                body = in.readAllBytes();
            }
            Action action = rule.decide(method, path);
            if (action.delayMillis() > 0) {
                Thread.sleep(action.delayMillis());
            }
            if (action.errorStatus() > 0) {
                failed.incrementAndGet();
                log.info("http fault proxy {}: {} {} answered with {}", name, method, path, action.errorStatus());
                byte[] error = ("{\"error\": {\"code\": " + action.errorStatus() + ", \"message\": \"http fault proxy "
                        + name + ": HTTP " + action.errorStatus() + "\", \"errors\": [{\"reason\": \"backendError\","
                        + " \"message\": \"http fault proxy " + name + "\"}], \"status\": \"UNAVAILABLE\"}}")
                        .getBytes(StandardCharsets.UTF_8);
                exchange.getResponseHeaders().add("Content-Type", "application/json; charset=UTF-8");
                exchange.sendResponseHeaders(action.errorStatus(), error.length);
                try (OutputStream out = exchange.getResponseBody()) {
                    out.write(error);
                }
                return;
            }
            HttpRequest.Builder request = HttpRequest.newBuilder(target.resolve(path)).timeout(Duration.ofSeconds(120))
                    .method(method, body.length == 0 ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofByteArray(body));
            for (Map.Entry<String, List<String>> header : exchange.getRequestHeaders().entrySet()) {
                if (!SKIPPED.contains(header.getKey().toLowerCase(Locale.ROOT))) {
                    for (String value : header.getValue()) {
                        request.header(header.getKey(), value);
                    }
                }
            }
            HttpResponse<byte[]> response = client.send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
            forwarded.incrementAndGet();
            response.headers().map().forEach((key, values) -> {
                if (!SKIPPED.contains(key.toLowerCase(Locale.ROOT)) && !key.startsWith(":")) {
                    exchange.getResponseHeaders().put(key, values);
                }
            });
            byte[] answer = answers.apply(method + " " + path, response.body());
            exchange.sendResponseHeaders(response.statusCode(), answer.length == 0 ? -1 : answer.length);
            if (answer.length > 0) {
                try (OutputStream out = exchange.getResponseBody()) {
                    out.write(answer);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (IOException | RuntimeException e) {
            log.info("http fault proxy {}: forwarding failed: {}", name, e.toString());
            throw e instanceof IOException io ? io : new IOException(e);
        }
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
    }
}
