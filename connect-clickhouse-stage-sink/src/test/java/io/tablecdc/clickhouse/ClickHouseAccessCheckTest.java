package io.tablecdc.clickhouse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ConnectException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.ClientException;
import com.clickhouse.client.api.ServerException;

import io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig;

/** Which field and which kind of problem each ClickHouse or object store failure is reported as (no server needed). */
class ClickHouseAccessCheckTest {
    private static final String CH_SECRET = "ch-secret-value";
    private static final String S3_SECRET = "s3-secret-value";

    private static ClickHouseStageSinkConfig config() {
        Map<String, String> props = new HashMap<>();
        props.put("clickhouse.url", "http://ch:8123");
        props.put("clickhouse.user", "loader");
        props.put("clickhouse.password", CH_SECRET);
        props.put("stage.uri", "s3://bucket/stage");
        props.put("stage.s3.endpoint", "http://s3:8333");
        props.put("stage.s3.access.key", "AKIA");
        props.put("stage.s3.secret.key", S3_SECRET);
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:1/catalog");
        return new ClickHouseStageSinkConfig(props);
    }

    private static ServerException server(int code, String message) {
        return new ServerException(code, message, code == 516 ? 403 : 500, "q");
    }

    /** User info in {@code clickhouse.url} (a password, say) is never part of a message. */
    @Test
    void theUserInfoOfTheClickHouseUrlIsNotInMessages() {
        Map<String, String> props = new HashMap<>(config().originalsStrings());
        props.put("clickhouse.url", "http://loader:pw-in-url@ch:8123/");
        ClickHouseStageSinkConfig config = new ClickHouseStageSinkConfig(props);
        ClickHouseAccessCheck.Problem network = ClickHouseAccessCheck.clickHouseProblem(config,
                new ClientException("Failed to get query response", new ConnectException("Connection refused")));
        assertFalse(network.message().contains("pw-in-url"), network.message());
        assertTrue(network.message().startsWith("network: cannot reach ClickHouse at http://ch:8123/"), network.message());
        assertEquals("http://ch:8123/", config.clickHouseUrlForLogs());
        assertEquals("http://ch:8123", config().clickHouseUrlForLogs());
    }

    @Test
    void clickHouseFailuresGoToTheFieldAtFault() {
        ClickHouseStageSinkConfig config = config();
        ClickHouseAccessCheck.Problem auth = ClickHouseAccessCheck.clickHouseProblem(config,
                new ClientException("Failed to get query response", server(516, "Code: 516. DB::Exception: loader: Authentication failed")));
        assertEquals("clickhouse.password", auth.field());
        assertTrue(auth.message().startsWith("authentication failed: ClickHouse at http://ch:8123 refused user loader"), auth.message());

        assertEquals("clickhouse.user", ClickHouseAccessCheck.clickHouseProblem(config, server(192, "unknown user")).field());
        ClickHouseAccessCheck.Problem denied = ClickHouseAccessCheck.clickHouseProblem(config, server(497, "Not enough privileges"));
        assertEquals("clickhouse.user", denied.field());
        assertTrue(denied.message().startsWith("permission denied: "), denied.message());
        assertEquals("clickhouse.database", ClickHouseAccessCheck.clickHouseProblem(config, server(81, "Database x does not exist")).field());

        ClickHouseAccessCheck.Problem network = ClickHouseAccessCheck.clickHouseProblem(config,
                new ClientException("Failed to get query response", new ConnectException("Connection refused")));
        assertEquals("clickhouse.url", network.field());
        assertTrue(network.message().startsWith("network: cannot reach ClickHouse at http://ch:8123"), network.message());
    }

    @Test
    void objectStoreFailuresGoToTheFieldAtFault() {
        ClickHouseStageSinkConfig config = config();
        assertEquals("stage.s3.access.key", ClickHouseAccessCheck.stageWriteProblem(config,
                new IOException("uploading failed: The AWS Access Key Id you provided does not exist in our records. (Service: S3, Status Code: 403)")).field());
        assertEquals("stage.s3.secret.key", ClickHouseAccessCheck.stageWriteProblem(config,
                new IOException("uploading failed: SignatureDoesNotMatch (Status Code: 403)")).field());
        ClickHouseAccessCheck.Problem denied = ClickHouseAccessCheck.stageWriteProblem(config,
                new IOException("uploading failed: Access Denied (Service: S3, Status Code: 403, Request ID: x) AccessDenied"));
        assertEquals("stage.uri", denied.field());
        assertTrue(denied.message().startsWith("permission denied: "), denied.message());
        assertEquals("stage.s3.endpoint", ClickHouseAccessCheck.stageWriteProblem(config,
                new IOException("uploading failed", new ConnectException("Connection refused"))).field());
    }

    @Test
    void noMessageHoldsASecretEvenWhenAServerEchoesIt() {
        ClickHouseStageSinkConfig config = config();
        List<ClickHouseAccessCheck.Problem> scrubbed = ClickHouseAccessCheck.scrub(List.of(
                new ClickHouseAccessCheck.Problem("stage.uri", "s3('http://s3:8333/x', 'AKIA', '" + S3_SECRET + "') failed"),
                new ClickHouseAccessCheck.Problem("clickhouse.url", "password " + CH_SECRET)), config);
        for (ClickHouseAccessCheck.Problem p : scrubbed) {
            assertFalse(p.message().contains(S3_SECRET) || p.message().contains(CH_SECRET), p.message());
        }
    }
}
