package io.tablecdc.e2e.clickhouse;

import com.sun.net.httpserver.Headers;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import io.tablecdc.e2e.stack.StackPaths;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;
import java.util.zip.InflaterInputStream;

/**
 * A <b>test fixture</b>: a small HTTP server in front of {@link Chdb} that speaks enough of ClickHouse's HTTP
 * interface for {@code com.clickhouse:client-v2} and plain HTTP tools. Production always talks to a real
 * ClickHouse server; nothing here is meant to be deployed.
 *
 * <p>Supported: {@code GET /ping} and {@code GET /}; queries by {@code GET} or {@code POST} with the SQL in
 * the {@code query} URL parameter and/or the body (as the server does, a {@code query} parameter followed by a
 * body makes {@code query + "\n" + body} one statement, which is how {@code INSERT … FORMAT X} carries its
 * data); {@code database}, {@code default_format} and {@code query_id} as URL parameters or as the
 * {@code X-ClickHouse-Database/Format/Query-Id} headers; {@code param_<name>} for {@code {name:Type}}
 * placeholders, bound by the engine; any other URL parameter that names an engine setting is applied for
 * that request only, and unknown ones are ignored (a real server would reject them). Request bodies with
 * {@code Content-Encoding: gzip|deflate} are inflated; an INSERT's body reaches the engine as a file
 * ({@code FROM INFILE}), since the engine keeps only part of inline binary data; and {@code enable_http_compression=1} with
 * {@code Accept-Encoding: gzip|deflate} compresses the response.
 *
 * <p>ClickHouse's native compression as the server speaks it: with {@code compress=1} the response body is a sequence
 * of LZ4 blocks (checksum, method, sizes, data), with {@code decompress=1} the request body is read as one
 * ({@link NativeCompression}); so client-v2 runs with its defaults. Not supported, refused with a clear error:
 * lz4/zstd/br HTTP compression ({@code enable_http_compression=1} with such an {@code Accept-Encoding}).
 * Not supported, silently: sessions ({@code session_id} is ignored; every request starts in a clean
 * session), progress headers, streaming (request and result are buffered in memory), readonly enforcement
 * of {@code GET}, and the refusal of multi-statements.
 *
 * <p>Users: as a server's HTTP interface, every request but {@code /ping} and the bare {@code GET /} is
 * authenticated, with the user and password from HTTP basic authentication, the {@code X-ClickHouse-User} and
 * {@code X-ClickHouse-Key} headers or the {@code user} and {@code password} URL parameters ({@code default} and an
 * empty password when none is given). Known users are {@code default} with an empty password and those added with
 * {@link #addUser}; any other user, or a wrong password, is refused as the server refuses it: HTTP 403 with
 * {@code X-ClickHouse-Exception-Code: 516} and {@code Code: 516. DB::Exception: <user>: Authentication failed: …
 * (AUTHENTICATION_FAILED)}. Every known user has every right (the engine has no access control).
 *
 * <p>Why it is long: it is the whole of the HTTP interface above, one request's handling read top to bottom; the
 * native compression is {@link NativeCompression}'s.
 */
public final class ChdbHttpFront implements AutoCloseable {

    /** Parameters the HTTP interface itself consumes; never forwarded to the engine as settings. */
    private static final Set<String> RESERVED = Set.of("query", "database", "default_format", "query_id",
            "session_id", "session_timeout", "session_check", "compress", "decompress", "user", "password",
            "quota_key", "buffer_size", "wait_end_of_query", "stacktrace", "role", "client_protocol_version",
            "enable_http_compression", "http_zlib_compression_level", "send_progress_in_http_headers");
    /** A FORMAT clause at the end of the statement, optionally followed by SETTINGS; decides the output. */
    private static final Pattern TRAILING_FORMAT = Pattern.compile(
            "(?is)\\bFORMAT\\s+(\\w+)(\\s+SETTINGS\\s+.*)?\\s*;?\\s*$");
    private static final Pattern INSERT = Pattern.compile("(?is)^\\s*INSERT\\s");
    /** An INSERT statement up to its trailing FORMAT clause (the form client-v2 sends in the query parameter). */
    private static final Pattern INSERT_FORMAT = Pattern.compile("(?is)^(\\s*INSERT\\s.*?)\\s+(FORMAT\\s+\\w+)\\s*;?\\s*$");
    /**
     * The engine reads an INSERT's inline data as part of the statement text and keeps only part of binary data,
     * without an error (seen: 2570 of 20000 RowBinary rows; a 119 KB Avro body read as truncated, "EOF reached"),
     * where a server streams the whole body; so every INSERT body goes to the engine as a file
     * ({@code INSERT … FROM INFILE}) instead.
     */
    /** Code 1 (UNSUPPORTED_METHOD) for what this front refuses on its own account. */
    private static final int UNSUPPORTED = 1;
    /** Code 516 (AUTHENTICATION_FAILED), answered with HTTP 403 as the server does. */
    private static final int AUTHENTICATION_FAILED = 516;
    /** The response encoding for {@code compress=1}: ClickHouse's own LZ4 blocks, no Content-Encoding header. */
    private static final String NATIVE_LZ4 = "native-lz4";

    private final Map<String, String> users = new java.util.concurrent.ConcurrentHashMap<>(Map.of("default", ""));

    private final Chdb chdb;
    private final HttpServer server;
    private final ExecutorService executor;
    private final Set<String> settingNames;
    private final String timezone;
    private final String version;
    private Path spoolDir;

    private ChdbHttpFront(Chdb chdb, HttpServer server, ExecutorService executor) {
        this.chdb = chdb;
        this.server = server;
        this.executor = executor;
        this.settingNames = Set.copyOf(lines(chdb.query("SELECT name FROM system.settings", "TSVRaw")));
        List<String> info = lines(chdb.query("SELECT timezone() || '\\t' || version()", "TSVRaw"));
        String[] tzVersion = info.getFirst().split("\t");
        this.timezone = tzVersion[0];
        this.version = tzVersion[1];
    }

    /** Serves {@code chdb} on 127.0.0.1 at an ephemeral port. */
    public static ChdbHttpFront start(Chdb chdb) {
        try {
            HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
            AtomicInteger n = new AtomicInteger();
            // Platform threads: a request spends its time in a native call, which would pin a virtual thread.
            ExecutorService executor = Executors.newFixedThreadPool(4, r -> {
                Thread t = new Thread(r, "chdb-http-" + n.incrementAndGet());
                t.setDaemon(true);
                return t;
            });
            server.setExecutor(executor);
            ChdbHttpFront front = new ChdbHttpFront(chdb, server, executor);
            server.createContext("/", front::handle);
            server.start();
            return front;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start the chDB HTTP front", e);
        }
    }

    /** Adds a user (or changes its password) that requests may authenticate as. */
    public void addUser(String user, String password) {
        users.put(user, password);
    }

    public int port() {
        return server.getAddress().getPort();
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
        try {
            executor.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void handle(HttpExchange exchange) throws IOException {
        // not try-with-resources: the error response below still needs the open exchange
        try {
            String path = exchange.getRequestURI().getPath();
            Map<String, String> params = queryParams(exchange.getRequestURI());
            String queryId = firstNonBlank(params.get("query_id"),
                    exchange.getRequestHeaders().getFirst("X-ClickHouse-Query-Id"), UUID.randomUUID().toString());
            Headers out = exchange.getResponseHeaders();
            out.set("X-ClickHouse-Query-Id", queryId);
            out.set("X-ClickHouse-Timezone", timezone);
            out.set("X-ClickHouse-Server-Display-Name", "chdb-test-front");
            recordUrl(exchange.getRequestURI());
            byte[] body = readBody(exchange);
            String contentType = exchange.getRequestHeaders().getFirst("Content-Type");
            if (contentType != null && contentType.toLowerCase().startsWith("multipart/form-data")) {
                // a form request (client-v2's use_form_request_for_query): the query and its param_ values are
                // fields of the body, as the server reads them, and stay out of the URL
                params.putAll(formFields(contentType, body));
                body = new byte[0];
            }
            if (path.equals("/ping") || (path.equals("/") && body.length == 0 && !params.containsKey("query"))) {
                send(exchange, 200, "text/plain; charset=UTF-8", "Ok.\n".getBytes(StandardCharsets.UTF_8));
                return;
            }
            if (!path.equals("/")) {
                throw new FrontException(UNSUPPORTED, "the chDB test front serves only / and /ping, not " + path);
            }
            authenticate(exchange, params);
            if ("1".equals(params.get("decompress"))) {
                body = NativeCompression.decompress(body);
            }
            run(exchange, params, body, "1".equals(params.get("compress")) ? NATIVE_LZ4 : responseEncoding(exchange, params));
        } catch (FrontException e) {
            sendError(exchange, e.code, e.getMessage());
        } catch (Chdb.ChdbException e) {
            sendError(exchange, e.code(), e.getMessage());
        } catch (RuntimeException e) {
            sendError(exchange, 1001, "chDB test front: " + e); // 1001 = STD_EXCEPTION
        } finally {
            exchange.close();
        }
    }

    private void run(HttpExchange exchange, Map<String, String> params, byte[] body, String encoding)
            throws IOException {
        Headers in = exchange.getRequestHeaders();
        String queryParam = params.getOrDefault("query", "");
        byte[] sql = queryParam.isEmpty() ? body
                : body.length == 0 ? queryParam.getBytes(StandardCharsets.UTF_8)
                : concat((queryParam + "\n").getBytes(StandardCharsets.UTF_8), body);
        // Only the SQL head matters for deciding the output format; INSERT data after it may be binary.
        String head = new String(sql, 0, Math.min(sql.length, 64 * 1024), StandardCharsets.UTF_8);
        // The server answers in the statement's own FORMAT when it has one; an INSERT's FORMAT names its input.
        Matcher trailing = TRAILING_FORMAT.matcher(head);
        String format = !INSERT.matcher(head).find() && trailing.find() ? trailing.group(1)
                : firstNonBlank(params.get("default_format"), in.getFirst("X-ClickHouse-Format"), "TabSeparated");
        Path spooled = null;
        Matcher insertFormat = INSERT_FORMAT.matcher(queryParam);
        if (body.length > 0 && insertFormat.matches()) {
            spooled = Files.createTempFile(spoolDir(), "insert-", ".data");
            Files.write(spooled, body);
            sql = (insertFormat.group(1) + " FROM INFILE " + quoteString(spooled.toAbsolutePath().toString()) + " "
                    + insertFormat.group(2)).getBytes(StandardCharsets.UTF_8);
        }
        try {
            execute(exchange, params, sql, format, encoding);
        } finally {
            if (spooled != null) {
                Files.deleteIfExists(spooled);
            }
        }
    }

    private synchronized Path spoolDir() {
        if (spoolDir == null) {
            spoolDir = StackPaths.workDir("chdb-insert-spool");
        }
        return spoolDir;
    }

    private void execute(HttpExchange exchange, Map<String, String> params, byte[] sql, String format, String encoding)
            throws IOException {
        Headers in = exchange.getRequestHeaders();
        String database = firstNonBlank(params.get("database"), in.getFirst("X-ClickHouse-Database"), "default");
        Map<String, String> queryParams = new LinkedHashMap<>();
        Map<String, String> settings = new LinkedHashMap<>();
        params.forEach((name, value) -> {
            if (name.startsWith("param_")) {
                queryParams.put(name.substring("param_".length()), value);
            } else if (!RESERVED.contains(name) && settingNames.contains(name)) {
                settings.put(name, value);
            }
        });

        Chdb.Result result = chdb.exclusive(() -> {
            // The engine connection is one session: put it in the request's state, then back to a clean one.
            chdb.query("USE " + quoteIdentifier(database), "TSV");
            List<String> applied = new ArrayList<>();
            try {
                settings.forEach((name, value) -> {
                    chdb.query("SET " + name + " = " + quoteString(value), "TSV");
                    applied.add(name);
                });
                return chdb.query(sql, format, queryParams);
            } finally {
                for (String name : applied) {
                    chdb.query("SET " + name + " = DEFAULT", "TSV");
                }
            }
        });

        Headers out = exchange.getResponseHeaders();
        out.set("X-ClickHouse-Format", format);
        out.set("X-ClickHouse-Summary", String.format(
                "{\"read_rows\":\"%d\",\"read_bytes\":\"%d\",\"written_rows\":\"%d\",\"written_bytes\":\"%d\","
                        + "\"total_rows_to_read\":\"%d\",\"result_rows\":\"%d\",\"result_bytes\":\"%d\","
                        + "\"elapsed_ns\":\"%d\"}",
                result.rowsRead(), result.bytesRead(), result.rowsWritten(), result.bytesWritten(),
                result.rowsRead(), result.resultRows(), result.data().length,
                (long) (result.elapsedSeconds() * 1e9)));
        byte[] data = result.data();
        if (encoding.equals(NATIVE_LZ4)) {
            data = NativeCompression.compress(data);
        } else if (!encoding.isEmpty()) {
            out.set("Content-Encoding", encoding);
            ByteArrayOutputStream compressed = new ByteArrayOutputStream();
            try (OutputStream os = encoding.equals("gzip") ? new GZIPOutputStream(compressed)
                    : new DeflaterOutputStream(compressed)) {
                os.write(data);
            }
            data = compressed.toByteArray();
        }
        send(exchange, 200, contentType(format), data);
    }

    /**
     * With {@code enable_http_compression=1} the server compresses the response in an encoding the client
     * accepts. The JDK has gzip and deflate; client-v2 asks for lz4 only, which is refused with a clear
     * error rather than answered with bytes the client would misread.
     */
    private static String responseEncoding(HttpExchange exchange, Map<String, String> params) {
        if (!"1".equals(params.get("enable_http_compression"))) {
            return "";
        }
        String accepted = String.valueOf(exchange.getRequestHeaders().getFirst("Accept-Encoding")).toLowerCase();
        if (accepted.contains("gzip")) {
            return "gzip";
        }
        if (accepted.contains("deflate")) {
            return "deflate";
        }
        throw new FrontException(UNSUPPORTED, "the chDB test front compresses responses only with gzip or"
                + " deflate, not " + accepted + "; build client-v2 with useHttpCompression(false)");
    }

    /** Refuses an unknown user or a wrong password with the server's code, status and message (no password in it). */
    private void authenticate(HttpExchange exchange, Map<String, String> params) {
        Headers in = exchange.getRequestHeaders();
        String user = null;
        String password = null;
        String authorization = in.getFirst("Authorization");
        if (authorization != null && authorization.regionMatches(true, 0, "Basic ", 0, 6)) {
            String decoded = new String(java.util.Base64.getDecoder().decode(authorization.substring(6).trim()), StandardCharsets.UTF_8);
            int colon = decoded.indexOf(':');
            user = colon < 0 ? decoded : decoded.substring(0, colon);
            password = colon < 0 ? "" : decoded.substring(colon + 1);
        }
        if (user == null) {
            user = firstNonBlank(in.getFirst("X-ClickHouse-User"), params.get("user"));
            password = in.getFirst("X-ClickHouse-Key") != null ? in.getFirst("X-ClickHouse-Key") : params.get("password");
        }
        user = user == null || user.isEmpty() ? "default" : user;
        password = password == null ? "" : password;
        String expected = users.get(user);
        if (expected == null || !java.security.MessageDigest.isEqual(expected.getBytes(StandardCharsets.UTF_8),
                password.getBytes(StandardCharsets.UTF_8))) {
            throw new FrontException(AUTHENTICATION_FAILED, user + ": Authentication failed: password is incorrect, or there is no"
                    + " user with such name. (AUTHENTICATION_FAILED)");
        }
    }

    private void sendError(HttpExchange exchange, int code, String message) throws IOException {
        String text = message.startsWith("Code: ") ? message
                : "Code: " + code + ". DB::Exception: " + message;
        if (!text.contains("(version ")) {
            text += " (version " + version + ")";
        }
        exchange.getResponseHeaders().set("X-ClickHouse-Exception-Code", Integer.toString(code));
        send(exchange, code == AUTHENTICATION_FAILED ? 403 : 500, "text/plain; charset=UTF-8", (text + "\n").getBytes(StandardCharsets.UTF_8));
    }

    private static void send(HttpExchange exchange, int status, String contentType, byte[] data) throws IOException {
        exchange.getResponseHeaders().set("Content-Type", contentType);
        exchange.sendResponseHeaders(status, data.length == 0 ? -1 : data.length);
        if (data.length > 0) {
            try (OutputStream os = exchange.getResponseBody()) {
                os.write(data);
            }
        }
    }

    private static byte[] readBody(HttpExchange exchange) throws IOException {
        String encoding = exchange.getRequestHeaders().getFirst("Content-Encoding");
        InputStream raw = exchange.getRequestBody();
        InputStream in = switch (encoding == null ? "" : encoding.trim().toLowerCase()) {
            case "", "identity" -> raw;
            case "gzip" -> new GZIPInputStream(raw);
            case "deflate" -> new InflaterInputStream(raw);
            default -> throw new FrontException(UNSUPPORTED, "Content-Encoding " + encoding
                    + " is not supported by the chDB test front (only gzip and deflate)");
        };
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        in.transferTo(buffer);
        return buffer.toByteArray();
    }

    /** How many requests this front received so far: a mark for {@link #requestUrlsSince}. */
    public long requestCount() {
        synchronized (urls) {
            return received;
        }
    }

    /**
     * The URLs (path and query) of the requests received after {@code mark} ({@link #requestCount()} earlier), newest
     * last; at most the last {@link #URL_RECORD}.
     */
    public List<String> requestUrlsSince(long mark) {
        synchronized (urls) {
            List<String> all = List.copyOf(urls);
            long wanted = Math.min(all.size(), Math.max(0, received - mark));
            return all.subList(all.size() - (int) wanted, all.size());
        }
    }

    private static final int URL_RECORD = 10_000;
    private final java.util.ArrayDeque<String> urls = new java.util.ArrayDeque<>();
    private long received;

    private void recordUrl(URI uri) {
        synchronized (urls) {
            if (urls.size() == URL_RECORD) {
                urls.removeFirst();
            }
            urls.addLast(uri.toString());
            received++;
        }
    }

    /** The fields of a multipart/form-data body without files: name to text value. */
    static Map<String, String> formFields(String contentType, byte[] body) {
        Matcher m = Pattern.compile("(?i)boundary=\"?([^\";]+)\"?").matcher(contentType);
        if (!m.find()) {
            throw new FrontException(UNSUPPORTED, "a multipart/form-data request without a boundary");
        }
        String text = new String(body, StandardCharsets.UTF_8);
        String delimiter = "--" + m.group(1);
        Map<String, String> fields = new LinkedHashMap<>();
        for (String part : text.split(Pattern.quote(delimiter))) {
            if (part.startsWith("--") || part.isBlank()) {
                continue;
            }
            int headersEnd = part.indexOf("\r\n\r\n");
            if (headersEnd < 0) {
                continue;
            }
            String headers = part.substring(0, headersEnd);
            Matcher name = Pattern.compile("(?i)name=\"([^\"]*)\"").matcher(headers);
            if (!name.find()) {
                continue;
            }
            if (headers.toLowerCase().contains("filename=")) {
                throw new FrontException(UNSUPPORTED, "the chDB test front takes no external tables (form field "
                        + name.group(1) + ")");
            }
            String value = part.substring(headersEnd + 4);
            if (value.endsWith("\r\n")) {
                value = value.substring(0, value.length() - 2);
            }
            fields.put(name.group(1), value);
        }
        return fields;
    }

    private static Map<String, String> queryParams(URI uri) {
        Map<String, String> params = new LinkedHashMap<>();
        String raw = uri.getRawQuery();
        if (raw == null || raw.isEmpty()) {
            return params;
        }
        for (String pair : raw.split("&")) {
            int eq = pair.indexOf('=');
            String name = URLDecoder.decode(eq < 0 ? pair : pair.substring(0, eq), StandardCharsets.UTF_8);
            String value = eq < 0 ? "" : URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8);
            params.put(name, value);
        }
        return params;
    }

    private static String contentType(String format) {
        String f = format.toLowerCase();
        if (f.startsWith("json")) {
            return "application/json; charset=UTF-8";
        }
        if (f.startsWith("tabseparated") || f.startsWith("tsv") || f.startsWith("csv") || f.startsWith("pretty")
                || f.equals("values") || f.equals("vertical") || f.equals("markdown")) {
            return "text/plain; charset=UTF-8";
        }
        return "application/octet-stream";
    }

    private static String quoteIdentifier(String name) {
        return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`";
    }

    private static String quoteString(String value) {
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'";
    }

    private static String firstNonBlank(String... values) {
        for (String v : values) {
            if (v != null && !v.isBlank()) {
                return v;
            }
        }
        return null;
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] all = new byte[a.length + b.length];
        System.arraycopy(a, 0, all, 0, a.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }

    private static List<String> lines(Chdb.Result result) {
        return new String(result.data(), StandardCharsets.UTF_8).lines().toList();
    }

    /** A request this front refuses itself, reported the way the server reports errors. */
    private static final class FrontException extends RuntimeException {
        final int code;

        FrontException(int code, String message) {
            super(message);
            this.code = code;
        }
    }
}
