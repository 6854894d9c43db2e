package io.tablecdc.e2e.faults;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.junit.jupiter.api.Test;

import io.tablecdc.e2e.stack.LocalStack;

/** The fault proxy in front of the stack's real Postgres: down, hung and back, as a client sees it. */
class FaultProxyTest {
    private static final LocalStack stack = LocalStack.get();

    @Test
    void refuseCutsOpenAndNewConnectionsHangStallsThemAndPassRestores() throws Exception {
        try (FaultProxy proxy = FaultProxy.start("pg", stack.postgres().host(), stack.postgres().port())) {
            String viaProxy = "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/postgres";
            try (Connection open = connect(viaProxy)) {
                assertEquals(1, selectOne(open));
                proxy.refuse();
                assertThrows(SQLException.class, () -> selectOne(open), "an open connection is cut");
                assertThrows(SQLException.class, () -> connect(viaProxy).close(), "a new connection is refused");
            }
            proxy.pass();
            try (Connection again = connect(viaProxy)) {
                assertEquals(1, selectOne(again));
                proxy.hang();
                CompletableFuture<Integer> stalled = CompletableFuture.supplyAsync(() -> {
                    try {
                        return selectOne(again);
                    } catch (SQLException e) {
                        throw new IllegalStateException(e);
                    }
                });
                assertThrows(TimeoutException.class, () -> stalled.get(2, TimeUnit.SECONDS), "no answer while hung");
                assertTrue(proxy.held() >= 1, "the query met the hang: " + proxy.held());
                proxy.pass();
                assertEquals(1, stalled.get(10, TimeUnit.SECONDS), "the held query completes once the proxy passes");
            }
            assertTrue(proxy.accepted() >= 3);
        }
    }

    /**
     * A black hole: a query on an open connection never answers and never fails (only the client's socket timeout
     * ends it), a new connection is accepted and never answered, and after the network heals the connection that met
     * the hole stays dead while a new one works and one that stayed idle meanwhile works too.
     */
    @Test
    void blackHoleSwallowsForGoodAndHealsOnlyForNewAndIdleConnections() throws Exception {
        try (FaultProxy proxy = FaultProxy.start("pg-hole", stack.postgres().host(), stack.postgres().port())) {
            String viaProxy = "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/postgres";
            try (Connection met = connect(viaProxy, 3); Connection idle = connect(viaProxy, 0)) {
                assertEquals(1, selectOne(met));
                assertEquals(1, selectOne(idle));
                proxy.blackHole();
                long start = System.nanoTime();
                assertThrows(SQLException.class, () -> selectOne(met), "only the socket timeout ends the wait");
                assertTrue(System.nanoTime() - start >= TimeUnit.SECONDS.toNanos(3) - TimeUnit.MILLISECONDS.toNanos(100),
                        "the query waited for the timeout, it was not refused");
                assertTrue(proxy.swallowed() >= 1, "the query met the hole: " + proxy.swallowed());
                CompletableFuture<Connection> fresh = CompletableFuture.supplyAsync(() -> {
                    try {
                        return connect(viaProxy, 0);
                    } catch (SQLException e) {
                        throw new IllegalStateException(e);
                    }
                });
                assertThrows(TimeoutException.class, () -> fresh.get(2, TimeUnit.SECONDS), "a new connection never answers");
                proxy.pass();
                try (Connection after = connect(viaProxy, 3)) {
                    assertEquals(1, selectOne(after), "a new connection works once healed");
                }
                assertEquals(1, selectOne(idle), "a connection idle during the hole works once healed");
                fresh.cancel(true);
            }
        }
    }

    @Test
    void httpErrorAnswersEveryRequestWithTheStatusAndPassRestoresTheServer() throws Exception {
        URI store = URI.create(stack.objectStore().endpoint());
        try (FaultProxy proxy = FaultProxy.start("store-errors", store.getHost(), store.getPort())) {
            HttpClient http = HttpClient.newHttpClient();
            HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + proxy.port() + "/"
                    + stack.objectStore().bucket() + "/")).timeout(Duration.ofSeconds(10)).build();
            HttpResponse<String> real = http.send(request, HttpResponse.BodyHandlers.ofString());
            assertTrue(real.statusCode() != 503, "the object store itself answers: " + real.statusCode());
            proxy.httpError(503);
            for (int i = 0; i < 3; i++) {
                HttpResponse<String> failed = http.send(request, HttpResponse.BodyHandlers.ofString());
                assertEquals(503, failed.statusCode());
                assertTrue(failed.body().contains("<Code>SlowDown</Code>"), failed.body());
            }
            assertEquals(3, proxy.errorsAnswered());
            proxy.pass();
            assertEquals(real.statusCode(), http.send(request, HttpResponse.BodyHandlers.ofString()).statusCode());
            assertEquals(3, proxy.errorsAnswered());
        }
    }

    @Test
    void slowForwardsEveryChunkLateAndLosesNothing() throws Exception {
        try (FaultProxy proxy = FaultProxy.start("pg-slow", stack.postgres().host(), stack.postgres().port())) {
            String viaProxy = "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/postgres";
            try (Connection open = connect(viaProxy)) {
                assertEquals(1, selectOne(open));
                assertEquals(0, proxy.slowed());
                proxy.slow(50);
                assertEquals(1, selectOne(open), "an open connection's answer comes, late");
                try (Connection fresh = connect(viaProxy)) {
                    assertEquals(1, selectOne(fresh), "a new connection works, late");
                }
                long slowed = proxy.slowed();
                assertTrue(slowed >= 4, "the query, its answer and a new connection's handshake went late: " + slowed);
                proxy.pass();
                assertEquals(FaultProxy.Mode.PASS, proxy.mode());
                assertEquals(1, selectOne(open));
            }
        }
    }

    @Test
    void refuseAfterPassesTheNextConnectionsThenCutsEverything() throws Exception {
        try (FaultProxy proxy = FaultProxy.start("pg-after", stack.postgres().host(), stack.postgres().port())) {
            String viaProxy = "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/postgres";
            proxy.refuseAfter(1);
            try (Connection first = connect(viaProxy)) {
                assertEquals(1, selectOne(first));
                assertThrows(SQLException.class, () -> connect(viaProxy).close(), "the second connection is refused");
                assertEquals(FaultProxy.Mode.REFUSE, proxy.mode());
                assertThrows(SQLException.class, () -> selectOne(first), "and the first is cut with it");
            }
            proxy.pass();
            try (Connection again = connect(viaProxy); Connection more = connect(viaProxy)) {
                assertEquals(2, selectOne(again) + selectOne(more), "pass() lifts the limit");
            }
        }
    }

    private static Connection connect(String url) throws SQLException {
        return connect(url, 0);
    }

    /** {@code socketTimeoutSeconds}: 0 waits for ever. */
    private static Connection connect(String url, int socketTimeoutSeconds) throws SQLException {
        Properties props = new Properties();
        props.setProperty("socketTimeout", Integer.toString(socketTimeoutSeconds));
        props.setProperty("user", stack.postgres().user());
        props.setProperty("password", stack.postgres().password());
        props.setProperty("connectTimeout", "5");
        return DriverManager.getConnection(url, props);
    }

    private static int selectOne(Connection connection) throws SQLException {
        try (Statement statement = connection.createStatement(); var rs = statement.executeQuery("SELECT 1")) {
            rs.next();
            return rs.getInt(1);
        }
    }
}
