package io.tablecdc.clickhouse.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

import io.tablecdc.clickhouse.destination.Cluster;
import io.tablecdc.common.ConfigDocs;

class ConfigDocsTest {
    private static final ConfigDocs.Reference REFERENCE = new ConfigDocs.Reference("ClickHouse stage sink configuration",
            "Connector class: `io.tablecdc.clickhouse.ClickHouseStageSinkConnector`.\n", ClickHouseStageSinkConfig.CONFIG_DEF,
            Path.of("../docs/config/clickhouse-stage-sink.md"),
            Set.of("clickhouse.password", "stage.s3.secret.key", "stage.gcs.hmac.secret", "catalog.password"));

    /** Every key documented and grouped, secrets as passwords; regenerates the reference when it differs, then fails. */
    @Test
    void configurationReferenceIsCompleteAndUpToDate() throws Exception {
        assertEquals(List.of(), REFERENCE.problems());
    }

    @Test
    void badValuesAreRejectedNamingTheKey() {
        Map<String, String> props = minimal();
        props.put("stage.uri", "ftp://host/dir");
        ConfigException e = assertThrows(ConfigException.class, () -> new ClickHouseStageSinkConfig(props));
        assertTrue(e.getMessage().contains("stage.uri"), e.getMessage());

        Map<String, String> badUrl = minimal();
        badUrl.put("clickhouse.url", "clickhouse:8123");
        e = assertThrows(ConfigException.class, () -> new ClickHouseStageSinkConfig(badUrl));
        assertTrue(e.getMessage().contains("clickhouse.url"), e.getMessage());
    }

    @Test
    void clusterKeysAreCheckedAndMakeTheCluster() {
        assertFalse(new ClickHouseStageSinkConfig(minimal()).cluster().enabled(), "one server unless clickhouse.cluster is set");

        Map<String, String> props = minimal();
        props.put("clickhouse.cluster", "prod");
        props.put("clickhouse.distributed.table", "true");
        props.put("clickhouse.insert.quorum", "3");
        props.put("clickhouse.insert.quorum.timeout.ms", "45000");
        Cluster cluster = new ClickHouseStageSinkConfig(props).cluster();
        assertEquals(new Cluster("prod", "/clickhouse/tables/{shard}/{database}/{table}", "{replica}", true, "3", 45_000), cluster);

        for (String[] bad : new String[][] {
                {"clickhouse.insert.quorum", "1"}, {"clickhouse.insert.quorum", "majority"},
                {"clickhouse.replication.path", "/clickhouse/tables/{shard}/shared"},
                {"clickhouse.replication.path", "clickhouse/{table}"}, {"clickhouse.replication.replica", ""},
                {"clickhouse.cluster", "my cluster"}}) {
            Map<String, String> wrong = new HashMap<>(props);
            wrong.put(bad[0], bad[1]);
            ConfigException e = assertThrows(ConfigException.class, () -> new ClickHouseStageSinkConfig(wrong), bad[0] + "=" + bad[1]);
            assertTrue(e.getMessage().contains(bad[0]), e.getMessage());
        }

        Map<String, String> noCluster = minimal();
        noCluster.put("clickhouse.distributed.table", "true");
        ConfigException e = assertThrows(ConfigException.class, () -> new ClickHouseStageSinkConfig(noCluster));
        assertTrue(e.getMessage().contains("for configuration clickhouse.distributed.table") && e.getMessage().contains("clickhouse.cluster"),
                e.getMessage());
    }

    @Test
    void tableNamesAreMadePlain() {
        ClickHouseStageSinkConfig config = new ClickHouseStageSinkConfig(minimal());
        assertEquals("pg_public_orders", config.clickHouseTable("public.orders", "pg.public.orders"));
        assertEquals("other_public_orders", config.clickHouseTable("public.orders", "other.public.orders"),
                "the same table of two flows (two topic prefixes) gets two tables by default");
        Map<String, String> byTable = minimal();
        byTable.put("table.name.format", "${table}");
        assertEquals("public_orders", new ClickHouseStageSinkConfig(byTable).clickHouseTable("public.orders", "pg.public.orders"));
    }

    @Test
    void passwordsNeverShowInToString() {
        Map<String, String> props = minimal();
        props.put("clickhouse.password", "s3cr3t-value");
        props.put("catalog.password", "an0ther-secret");
        String text = new ClickHouseStageSinkConfig(props).values().toString();
        assertFalse(text.contains("s3cr3t-value") || text.contains("an0ther-secret"), text);
    }

    private static Map<String, String> minimal() {
        Map<String, String> props = new HashMap<>();
        props.put("clickhouse.url", "http://127.0.0.1:8123");
        props.put("stage.uri", "file:///tmp/stage");
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:5432/catalog");
        return props;
    }
}
