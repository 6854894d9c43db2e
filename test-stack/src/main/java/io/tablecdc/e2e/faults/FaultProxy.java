package io.tablecdc.e2e.faults;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A TCP proxy on 127.0.0.1 in front of one server (the catalog, a source database, ClickHouse, the object store,
 * the BigQuery emulator), through which a test takes the server away while flows run: {@link #refuse()} closes every
 * open connection and every new one at once (the server is down), {@link #hang()} keeps connections open but moves
 * no byte in either direction (the server stopped answering), {@link #slow(long)} forwards every chunk late (the
 * server or the network is slow), {@link #httpError(int)} answers every HTTP request itself with an error status (an
 * HTTP server that is up but failing: an object store's {@code 503 SlowDown}, an API's backend error),
 * {@link #blackHole()} swallows every byte for good without closing anything (a host that froze or was cut off: no
 * FIN, no RST, and a connection that met it stays dead after the network heals), {@link #pass()} restores it. The server itself keeps
 * running, so what a connector sees is exactly a network or server outage.
 */
public final class FaultProxy implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(FaultProxy.class);

    /** What the proxy does with traffic. */
    public enum Mode { PASS, REFUSE, HANG, SLOW, HTTP_ERROR, BLACK_HOLE }

    private final String name;
    /** Where new connections go; {@link #retarget} moves it (an address that follows a promoted standby). */
    private volatile InetSocketAddress target;
    private final ServerSocket server;
    private final Set<Socket> open = ConcurrentHashMap.newKeySet();
    private final AtomicLong accepted = new AtomicLong();
    /** New connections still passed before the proxy refuses; negative: no limit. */
    private final AtomicInteger passesLeft = new AtomicInteger(-1);
    private volatile Mode mode = Mode.PASS;
    private volatile long slowMillis;
    private final AtomicLong slowed = new AtomicLong();
    private final AtomicLong held = new AtomicLong();
    private volatile int errorStatus;
    private final AtomicLong errorsAnswered = new AtomicLong();
    private final AtomicLong swallowed = new AtomicLong();
    private volatile boolean closed;

    private FaultProxy(String name, InetSocketAddress target) throws IOException {
        this.name = name;
        this.target = target;
        this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(this::acceptLoop, "fault-proxy-" + name);
        acceptor.setDaemon(true);
        acceptor.start();
    }

    /** A proxy named {@code name} (for logs) forwarding to {@code host:port}. */
    public static FaultProxy start(String name, String host, int port) throws IOException {
        FaultProxy proxy = new FaultProxy(name, new InetSocketAddress(host, port));
        log.info("fault proxy {} on 127.0.0.1:{} in front of {}:{}", name, proxy.port(), host, port);
        return proxy;
    }

    public int port() {
        return server.getLocalPort();
    }

    /**
     * Sends new connections to {@code host:port} from now on, as a name that follows the primary does after a
     * failover; open connections stay where they are.
     */
    public void retarget(String host, int port) {
        target = new InetSocketAddress(host, port);
        log.info("fault proxy {}: new connections go to {}:{}", name, host, port);
    }

    public Mode mode() {
        return mode;
    }

    /** Connections accepted so far (refused ones included). */
    public long accepted() {
        return accepted.get();
    }

    public void pass() {
        passesLeft.set(-1);
        set(Mode.PASS);
    }

    /**
     * Passes the open connections and the next {@code connections} new ones, then refuses (as {@link #refuse()})
     * from the connection after them on: a server that goes away right after a client's first connection.
     */
    public void refuseAfter(int connections) {
        if (connections < 0) {
            throw new IllegalArgumentException("connections must be >= 0");
        }
        passesLeft.set(connections);
        set(Mode.PASS);
    }

    /** Closes every open connection and each new one: the server looks down. */
    public void refuse() {
        set(Mode.REFUSE);
        for (Socket socket : open) {
            closeQuietly(socket);
        }
    }

    /**
     * Every chunk read from either side (up to 64 KiB) is forwarded {@code delayMillis} late, on open and new
     * connections: a slow server or network, whose calls take long and whose transfers crawl but complete.
     */
    public void slow(long delayMillis) {
        if (delayMillis < 1) {
            throw new IllegalArgumentException("delayMillis must be >= 1");
        }
        slowMillis = delayMillis;
        set(Mode.SLOW);
    }

    /** Chunks held while the proxy hung ({@link #hang}): a call that met the hang. */
    public long held() {
        return held.get();
    }

    /** Chunks forwarded late so far ({@link #slow}). */
    public long slowed() {
        return slowed.get();
    }

    /**
     * Every HTTP request on a new connection is answered by the proxy with {@code status} (an XML error body, as an
     * object store sends, and {@code Connection: close}); the open connections are closed, so that pooled ones are
     * opened again and answered likewise. The server is up but fails every call.
     */
    public void httpError(int status) {
        if (status < 400 || status > 599) {
            throw new IllegalArgumentException("status must be an HTTP error status (400-599)");
        }
        errorStatus = status;
        set(Mode.HTTP_ERROR);
        for (Socket socket : open) {
            closeQuietly(socket);
        }
    }

    /** Requests answered with an error so far ({@link #httpError}). */
    public long errorsAnswered() {
        return errorsAnswered.get();
    }

    /**
     * A black hole: new connections are accepted and never answered, and a connection that carries a byte while the
     * hole lasts is dead for good (what either side sends is swallowed; neither side is closed, so only a client's own
     * timeout ends its wait). {@link #pass()} heals the network for new connections and for those that stayed idle
     * meanwhile; the dead ones stay dead, as a TCP connection whose peer froze or lost its state.
     */
    public void blackHole() {
        set(Mode.BLACK_HOLE);
    }

    /** Chunks swallowed so far by dead connections ({@link #blackHole}). */
    public long swallowed() {
        return swallowed.get();
    }

    /** Connections stay open and new ones are accepted, but no byte moves: the server looks hung. */
    public void hang() {
        set(Mode.HANG);
    }

    private void set(Mode next) {
        log.info("fault proxy {}: {} -> {}", name, mode, next);
        mode = next;
    }

    private void acceptLoop() {
        while (!closed) {
            Socket client;
            try {
                client = server.accept();
            } catch (IOException e) {
                if (!closed) {
                    log.warn("fault proxy {}: accept failed", name, e);
                }
                return;
            }
            accepted.incrementAndGet();
            if (mode == Mode.PASS && passesLeft.get() >= 0 && passesLeft.getAndDecrement() == 0) {
                refuse();
            }
            if (mode == Mode.REFUSE) {
                closeQuietly(client);
                continue;
            }
            if (mode == Mode.HTTP_ERROR) {
                answerWithError(client, errorStatus);
                continue;
            }
            if (mode == Mode.BLACK_HOLE) {
                open.add(client);
                swallow(client);
                continue;
            }
            Socket upstream = new Socket();
            try {
                upstream.connect(target, 5000);
            } catch (IOException e) {
                closeQuietly(client);
                closeQuietly(upstream);
                continue;
            }
            open.add(client);
            open.add(upstream);
            java.util.concurrent.atomic.AtomicBoolean dead = new java.util.concurrent.atomic.AtomicBoolean();
            pump(client, upstream, dead, "up");
            pump(upstream, client, dead, "down");
        }
    }

    /** Reads and drops what {@code from} sends until the proxy closes: a peer that is gone without a word. */
    private void swallow(Socket from) {
        Thread thread = new Thread(() -> {
            byte[] buffer = new byte[64 * 1024];
            try (InputStream in = from.getInputStream()) {
                while (in.read(buffer) >= 0 && !closed) {
                    swallowed.incrementAndGet();
                }
            } catch (IOException e) {
                // the proxy closed
            } finally {
                open.remove(from);
            }
        }, "fault-proxy-" + name + "-swallowed");
        thread.setDaemon(true);
        thread.start();
    }

    private void pump(Socket from, Socket to, java.util.concurrent.atomic.AtomicBoolean dead, String direction) {
        Thread thread = new Thread(() -> {
            byte[] buffer = new byte[64 * 1024];
            // the streams are not closed with the block: closing one closes its socket, and the finally below decides
            // which sockets close (a dead connection's peer must not see the other side go)
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                int n;
                while ((n = in.read(buffer)) >= 0) {
                    if (mode == Mode.BLACK_HOLE) {
                        dead.set(true);
                    }
                    if (dead.get()) {
                        // the connection met the black hole: nothing it carries arrives, and nothing closes it
                        swallowed.incrementAndGet();
                        if (closed) {
                            break;
                        }
                        continue;
                    }
                    if (mode == Mode.HANG) {
                        held.incrementAndGet();
                    }
                    while (mode == Mode.HANG && !closed) {
                        Thread.sleep(20);
                    }
                    if (mode == Mode.SLOW) {
                        slowed.incrementAndGet();
                        Thread.sleep(slowMillis);
                    }
                    if (mode == Mode.REFUSE || closed) {
                        break;
                    }
                    out.write(buffer, 0, n);
                    out.flush();
                }
            } catch (IOException | InterruptedException e) {
                // the other side or a mode change closed the connection
            } finally {
                closeQuietly(from);
                open.remove(from);
                // a dead connection's peer that goes away is never seen by the other side (no FIN crosses a black
                // hole): that side stays open until it gives up itself, or the proxy closes
                if (!dead.get() || closed) {
                    closeQuietly(to);
                    open.remove(to);
                }
            }
        }, "fault-proxy-" + name + "-" + direction);
        thread.setDaemon(true);
        thread.start();
    }

    /** Reads one request's head on its own thread, answers it with {@code status} and closes the connection. */
    private void answerWithError(Socket client, int status) {
        Thread thread = new Thread(() -> {
            try (client; InputStream in = client.getInputStream(); OutputStream out = client.getOutputStream()) {
                client.setSoTimeout(5_000);
                // the request's head ends with an empty line; its body (if any) is not read: the connection closes
                int matched = 0;
                int b;
                while (matched < 4 && (b = in.read()) >= 0) {
                    matched = b == (matched % 2 == 0 ? '\r' : '\n') ? matched + 1 : b == '\r' ? 1 : 0;
                }
                if (matched < 4) {
                    return;
                }
                String code = status == 503 ? "SlowDown" : status >= 500 ? "InternalError" : "BadRequest";
                byte[] body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + code + "</Code><Message>"
                        + "fault proxy " + name + ": HTTP " + status + "</Message></Error>").getBytes(StandardCharsets.UTF_8);
                String head = "HTTP/1.1 " + status + " " + reason(status) + "\r\n"
                        + "Content-Type: application/xml\r\nContent-Length: " + body.length + "\r\nConnection: close\r\n\r\n";
                // counted before the answer is written: a client that has read the answer finds it counted
                errorsAnswered.incrementAndGet();
                out.write(head.getBytes(StandardCharsets.US_ASCII));
                out.write(body);
                out.flush();
            } catch (IOException e) {
                // the client went away
            }
        }, "fault-proxy-" + name + "-error");
        thread.setDaemon(true);
        thread.start();
    }

    private static String reason(int status) {
        return switch (status) {
            case 500 -> "Internal Server Error";
            case 502 -> "Bad Gateway";
            case 503 -> "Service Unavailable";
            case 504 -> "Gateway Timeout";
            default -> status >= 500 ? "Server Error" : "Client Error";
        };
    }

    private static void closeQuietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // already closed
        }
    }

    @Override
    public void close() throws IOException {
        closed = true;
        server.close();
        for (Socket socket : open) {
            closeQuietly(socket);
        }
    }
}
