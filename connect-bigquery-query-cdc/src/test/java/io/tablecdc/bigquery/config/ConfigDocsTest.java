package io.tablecdc.bigquery.config;

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

import io.tablecdc.common.ConfigDocs;

class ConfigDocsTest {
    private static final ConfigDocs.Reference REFERENCE = new ConfigDocs.Reference("BigQuery query CDC source configuration",
            "Connector class: `io.tablecdc.bigquery.BigQueryQueryCdcSourceConnector`. See ../bigquery-query-cdc.md.\n",
            BigQueryQueryCdcConfig.CONFIG_DEF, Path.of("../docs/config/bigquery-query-cdc.md"),
            Set.of("bigquery.credentials.json", "catalog.password"));

    /** Every key documented and grouped, secrets as passwords; regenerates the reference when it differs, then fails. */
    @Test
    void configurationReferenceIsCompleteAndUpToDate() throws Exception {
        assertEquals(List.of(), REFERENCE.problems());
    }

    @Test
    void tablesAreParsedWithDefaults() {
        Map<String, String> props = minimal();
        props.put("tables", "orders, other.customers:modified_at:id+region, proj2.ds2.events:ts");
        props.put("watermark.column", "updated_at");
        BigQueryQueryCdcConfig config = new BigQueryQueryCdcConfig(props);
        List<TableSpec> tables = config.tables();
        assertEquals(new TableSpec("my-project", "shop", "orders", "updated_at", List.of()), tables.get(0));
        assertEquals(new TableSpec("my-project", "other", "customers", "modified_at", List.of("id", "region")), tables.get(1));
        assertEquals("proj2.ds2.events", tables.get(2).fullName());
        assertEquals("cdc.my-project.shop.orders", config.topic(tables.get(0)));
        assertEquals(1440, config.normalizeBufferBatches(), "24 h / 60 s");
        assertEquals(2, BigQueryQueryCdcConfig.defaultNormalizeBuffer(24L * 3600 * 1000));
    }

    @Test
    void badValuesAreRejectedNamingTheKey() {
        Map<String, String> noWatermark = minimal();
        noWatermark.put("tables", "orders");
        ConfigException e = assertThrows(ConfigException.class, () -> new BigQueryQueryCdcConfig(noWatermark));
        assertTrue(e.getMessage().contains("tables") && e.getMessage().contains("no watermark column"), e.getMessage());

        Map<String, String> badName = minimal();
        badName.put("tables", "a`b:ts");
        e = assertThrows(ConfigException.class, () -> new BigQueryQueryCdcConfig(badName));
        assertTrue(e.getMessage().contains("tables"), e.getMessage());

        Map<String, String> twice = minimal();
        twice.put("tables", "orders:ts, shop.orders:ts");
        e = assertThrows(ConfigException.class, () -> new BigQueryQueryCdcConfig(twice));
        assertTrue(e.getMessage().contains("listed twice"), e.getMessage());

        Map<String, String> changes = minimal();
        changes.put("replication.mode", "CHANGES");
        e = assertThrows(ConfigException.class, () -> new BigQueryQueryCdcConfig(changes));
        assertTrue(e.getMessage().contains("safety.lag.ms"), e.getMessage());
        changes.put("safety.lag.ms", "660000");
        assertEquals(BigQueryQueryCdcConfig.Mode.CHANGES, new BigQueryQueryCdcConfig(changes).mode());

        Map<String, String> endpoint = minimal();
        endpoint.put("bigquery.endpoint", "localhost:9050");
        e = assertThrows(ConfigException.class, () -> new BigQueryQueryCdcConfig(endpoint));
        assertTrue(e.getMessage().contains("bigquery.endpoint"), e.getMessage());
    }

    @Test
    void secretsNeverShowInToString() {
        Map<String, String> props = minimal();
        props.put("bigquery.credentials.json", "{\"private_key\": \"s3cr3t-value\"}");
        props.put("catalog.password", "an0ther-secret");
        BigQueryQueryCdcConfig config = new BigQueryQueryCdcConfig(props);
        String text = config.values().toString() + config.catalog();
        assertFalse(text.contains("s3cr3t-value") || text.contains("an0ther-secret"), text);
    }

    static Map<String, String> minimal() {
        Map<String, String> props = new HashMap<>();
        props.put("bigquery.project", "my-project");
        props.put("bigquery.dataset", "shop");
        props.put("tables", "orders:updated_at:id");
        props.put("topic.prefix", "cdc");
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:5432/catalog");
        return props;
    }
}
