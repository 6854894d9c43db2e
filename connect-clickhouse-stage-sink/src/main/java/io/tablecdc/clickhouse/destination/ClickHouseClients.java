package io.tablecdc.clickhouse.destination;

import com.clickhouse.client.api.Client;

import io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig;

/** The ClickHouse client the sink's tasks and its connector's {@code validate()} open from a config. */
public final class ClickHouseClients {
    private ClickHouseClients() {
    }

    public static Client client(ClickHouseStageSinkConfig config) {
        return new Client.Builder()
                .addEndpoint(config.clickHouseUrl())
                .setUsername(config.clickHouseUser())
                .setPassword(config.clickHousePassword().value())
                .setDefaultDatabase(config.clickHouseDatabase())
                .build();
    }
}
