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

    public static Client client(ClickHouseStageSinkConfig config) {
        return new Client.Builder()
                .setOption(PARAMS_IN_BODY, "true")
                .addEndpoint(config.clickHouseUrl())
                .setUsername(config.clickHouseUser())
                .setPassword(config.clickHousePassword().value())
                .setDefaultDatabase(config.clickHouseDatabase())
                .build();
    }
}
