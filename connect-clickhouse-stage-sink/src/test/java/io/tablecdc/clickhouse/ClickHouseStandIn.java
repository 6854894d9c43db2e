package io.tablecdc.clickhouse;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

/**
 * A hand-written stand-in for ClickHouse's HTTP interface, for what the test engine cannot show: chDB runs one
 * statement at a time, so a statement cannot be left running while another (a {@code KILL QUERY}) is asked about it, and
 * it never sees the client's query id. The stand-in records every request (its SQL, its URL parameters, its query id)
 * and, while told to hang, answers no statement that begins with one of the given words until {@link #answerAll}.
 * Every other statement is answered with an empty result, and {@code KILL QUERY} with one row
 * {@code kill_status = 'finished'} (RowBinaryWithNamesAndTypes, uncompressed: the client must be built with
 * {@code compressServerResponse(false)}). It is not ClickHouse: it runs nothing.
 */
final class ClickHouseStandIn implements AutoCloseable {
    /** One request as received. */
    record Request(String sql, Map<String, String> params) {
        String queryId() {
            return params.get("query_id");
        }
    }

    private final HttpServer server;
    private final ExecutorService threads = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "clickhouse-stand-in");
        t.setDaemon(true);
        return t;
    });
    private final List<Request> requests = new ArrayList<>();
    private volatile List<String> hanging = List.of();
    private volatile CountDownLatch released = new CountDownLatch(1);

    private ClickHouseStandIn() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.setExecutor(threads);
        server.createContext("/", this::handle);
        server.start();
    }

    static ClickHouseStandIn start() throws IOException {
        return new ClickHouseStandIn();
    }

    String url() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    /** Statements that begin with one of {@code words} (case-insensitive) get no answer until {@link #answerAll}. */
    void hang(String... words) {
        released = new CountDownLatch(1);
        hanging = List.of(words);
    }

    /** Every statement is answered again, those held up so far too. */
    void answerAll() {
        hanging = List.of();
        released.countDown();
    }

    /** The requests received so far whose SQL begins with {@code word} (case-insensitive), in order. */
    List<Request> requests(String word) {
        synchronized (requests) {
            return requests.stream().filter(r -> startsWith(r.sql(), word)).toList();
        }
    }

    private static boolean startsWith(String sql, String word) {
        return sql.stripLeading().regionMatches(true, 0, word, 0, word.length());
    }

    private void handle(HttpExchange exchange) throws IOException {
        try (exchange) {
            Map<String, String> params = new LinkedHashMap<>();
            String query = exchange.getRequestURI().getRawQuery();
            if (query != null) {
                for (String pair : query.split("&")) {
                    int eq = pair.indexOf('=');
                    String name = URLDecoder.decode(eq < 0 ? pair : pair.substring(0, eq), StandardCharsets.UTF_8);
                    params.put(name, eq < 0 ? "" : URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8));
                }
            }
            String queryId = exchange.getRequestHeaders().getFirst("X-ClickHouse-Query-Id");
            if (queryId != null) {
                params.putIfAbsent("query_id", queryId);
            }
            String body = new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
            String sql = params.containsKey("query") ? params.get("query") + (body.isEmpty() ? "" : "\n" + body) : body;
            synchronized (requests) {
                requests.add(new Request(sql, params));
            }
            CountDownLatch latch = released;
            if (hanging.stream().anyMatch(word -> startsWith(sql, word))) {
                try {
                    // held up, as a statement still running on the server; the client gives up meanwhile
                    latch.await(60, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
            byte[] answer = startsWith(sql, "KILL") ? killAnswer() : startsWith(sql, "SELECT") ? emptyResult() : new byte[0];
            exchange.getResponseHeaders().set("X-ClickHouse-Query-Id", params.getOrDefault("query_id", "stand-in"));
            exchange.getResponseHeaders().set("X-ClickHouse-Format", "RowBinaryWithNamesAndTypes");
            exchange.getResponseHeaders().set("X-ClickHouse-Timezone", "UTC");
            exchange.getResponseHeaders().set("X-ClickHouse-Summary", "{\"read_rows\":\"0\",\"read_bytes\":\"0\","
                    + "\"written_rows\":\"0\",\"written_bytes\":\"0\",\"total_rows_to_read\":\"0\",\"result_rows\":\"0\","
                    + "\"result_bytes\":\"0\",\"elapsed_ns\":\"0\"}");
            exchange.sendResponseHeaders(200, answer.length == 0 ? -1 : answer.length);
            if (answer.length > 0) {
                try (OutputStream out = exchange.getResponseBody()) {
                    out.write(answer);
                }
            }
        } catch (IOException clientGone) {
            // the client gave up and closed its connection
        }
    }

    /** RowBinaryWithNamesAndTypes: one column {@code kill_status String}, one row {@code finished}. */
    private static byte[] killAnswer() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        varint(out, 1);
        string(out, "kill_status");
        string(out, "String");
        string(out, "finished");
        return out.toByteArray();
    }

    /** RowBinaryWithNamesAndTypes: one column {@code n UInt8}, no row. */
    private static byte[] emptyResult() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        varint(out, 1);
        string(out, "n");
        string(out, "UInt8");
        return out.toByteArray();
    }

    private static void string(ByteArrayOutputStream out, String value) {
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        varint(out, bytes.length);
        out.write(bytes, 0, bytes.length);
    }

    private static void varint(ByteArrayOutputStream out, long value) {
        while ((value & ~0x7FL) != 0) {
            out.write((int) ((value & 0x7F) | 0x80));
            value >>>= 7;
        }
        out.write((int) value);
    }

    @Override
    public void close() {
        answerAll();
        server.stop(0);
        threads.shutdownNow();
    }
}
