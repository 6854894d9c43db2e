package io.tablecdc.clickhouse.destination;

import com.clickhouse.client.api.Client;

import io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig;

/** The ClickHouse client the sink's tasks and its connector's {@code validate()} open from a config. */
public final class ClickHouseClients {
    private ClickHouseClients() {
    }

    /**
     * Query parameters (the stage file's URL and, in pull mode, the object store's access and secret key) travel in a
     * form request's body rather than in the request URL, which proxies and servers write to their access logs.
     */
    static final String PARAMS_IN_BODY = "client.http.use_form_request_for_query";
    /** How long opening a connection may take (a host that does not answer at all). */
    static final long CONNECT_TIMEOUT_MS = 10_000;

    /**
     * Every call is bounded by {@code clickhouse.timeout.ms}, also where the socket stops carrying data without closing
     * (a server that froze, a network cut that closes nothing): the socket's read timeout and the whole operation's.
     */
    public static Client client(ClickHouseStageSinkConfig config) {
        long timeoutMs = config.clickHouseTimeoutMs();
        return new Client.Builder()
                .setOption(PARAMS_IN_BODY, "true")
                .setConnectTimeout(Math.min(timeoutMs, CONNECT_TIMEOUT_MS))
                .setSocketTimeout(timeoutMs)
                .setExecutionTimeout(timeoutMs, java.time.temporal.ChronoUnit.MILLIS)
                .addEndpoint(config.clickHouseUrl())
                .setUsername(config.clickHouseUser())
                .setPassword(config.clickHousePassword().value())
                .setDefaultDatabase(config.clickHouseDatabase())
                .build();
    }
}
