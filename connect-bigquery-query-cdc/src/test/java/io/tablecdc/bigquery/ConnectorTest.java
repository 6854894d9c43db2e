package io.tablecdc.bigquery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.connect.errors.ConnectException;
import org.junit.jupiter.api.Test;

/** Connector checks that need no BigQuery: the endpoint below refuses connections, so table checks are skipped. */
class ConnectorTest {
    private static Map<String, String> config() {
        Map<String, String> props = new HashMap<>();
        props.put("name", "bq-unit");
        props.put("bigquery.project", "p");
        props.put("bigquery.dataset", "d");
        props.put("bigquery.endpoint", "http://127.0.0.1:9");
        props.put("tables", "a:ts:id,b:ts:id,c:ts:id");
        props.put("topic.prefix", "cdc");
        props.put("tasks.max", "3");
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:9/catalog");
        return props;
    }

    private static List<String> errors(Config config, String name) {
        return config.configValues().stream().filter(v -> v.name().equals(name)).findFirst()
                .map(ConfigValue::errorMessages).orElse(List.of());
    }

    @Test
    void tasksMaxBelowTheNumberOfTablesIsAnErrorNamingBothNumbers() {
        Map<String, String> props = config();
        props.put("tasks.max", "2");
        Config result = new BigQueryQueryCdcSourceConnector().validate(props);
        assertEquals(List.of("tasks.max is 2 but 3 tables are configured; each table needs its own task: set tasks.max to at least 3"),
                errors(result, "tasks.max"));
        assertEquals(List.of(), errors(result, "tables"));
    }

    /** Issue 16: a table without key columns is refused, on tables, naming it (its re-reads would stay duplicates). */
    @Test
    void aTableWithoutKeyColumnsIsRefused() {
        Map<String, String> props = config();
        props.put("tables", "a:ts:id,b:ts,c:ts:id");
        Config result = new BigQueryQueryCdcSourceConnector().validate(props);
        assertEquals(List.of("table p.d.b has no key columns: rows read again after a restart or a failed batch would stay"
                + " in ClickHouse as duplicates (a table without a key is append-only there); name the key in the entry,"
                + " e.g. b:ts:id"), errors(result, "tables"));
    }

    /** Issue 16: the source's back-pressure setting has its own name; the former one is still read, not both. */
    @Test
    void maxUnnormalizedBatchesAndItsFormerName() {
        Map<String, String> props = config();
        assertEquals(1_440L, new io.tablecdc.bigquery.config.BigQueryQueryCdcConfig(props).normalizeBufferBatches(), "24 h / 60 s");
        props.put("normalize.buffer.batches", "1");
        assertEquals(1L, new io.tablecdc.bigquery.config.BigQueryQueryCdcConfig(props).normalizeBufferBatches());
        props.put("max.unnormalized.batches", "1");
        assertEquals(1L, new io.tablecdc.bigquery.config.BigQueryQueryCdcConfig(props).normalizeBufferBatches());
        props.put("max.unnormalized.batches", "5");
        Config result = new BigQueryQueryCdcSourceConnector().validate(props);
        List<String> errors = errors(result, "normalize.buffer.batches");
        assertEquals(1, errors.size(), errors.toString());
        assertTrue(errors.get(0).endsWith("normalize.buffer.batches is the former name of max.unnormalized.batches (5); set only"
                + " max.unnormalized.batches"), errors.toString());
        props.remove("normalize.buffer.batches");
        assertEquals(5L, new io.tablecdc.bigquery.config.BigQueryQueryCdcConfig(props).normalizeBufferBatches());
    }

    @Test
    void moreThanOnePartitionPerTopicIsRefused() {
        Map<String, String> props = config();
        props.put("topic.creation.default.partitions", "3");
        Config result = new BigQueryQueryCdcSourceConnector().validate(props);
        assertTrue(errors(result, "topic.creation.default.partitions").get(0).contains("one partition"));
    }

    @Test
    void crossFieldErrorsAreReportedOnTheirField() {
        Map<String, String> props = config();
        props.put("replication.mode", "CHANGES");
        Config result = new BigQueryQueryCdcSourceConnector().validate(props);
        assertEquals(1, errors(result, "safety.lag.ms").size(), result.configValues().toString());
    }

    @Test
    void anUnreachableBigQueryIsANetworkProblemOnTheEndpoint() {
        Config result = new BigQueryQueryCdcSourceConnector().validate(config());
        List<String> errors = errors(result, "bigquery.endpoint");
        assertEquals(1, errors.size(), result.configValues().toString());
        assertTrue(errors.get(0).startsWith("network: cannot reach BigQuery at http://127.0.0.1:9: "), errors.get(0));
        assertEquals(List.of(), errors(result, "tables"));
    }

    @Test
    void refusedCredentialsAndMissingPermissionsAreReportedOnTheCredentials() {
        var config = new io.tablecdc.bigquery.config.BigQueryQueryCdcConfig(config());
        String[] auth = BigQueryQueryCdcSourceConnector.bigQueryProblem(config,
                new com.google.cloud.bigquery.BigQueryException(401, "Request had invalid authentication credentials."));
        assertEquals("bigquery.credentials.file", auth[0]);
        assertTrue(auth[1].startsWith("authentication failed: BigQuery refused the credentials: "), auth[1]);
        String[] denied = BigQueryQueryCdcSourceConnector.bigQueryProblem(config,
                new com.google.cloud.bigquery.BigQueryException(403, "Access Denied: Table p:d.a"));
        assertEquals("bigquery.credentials.file", denied[0]);
        assertTrue(denied[1].startsWith("permission denied: "), denied[1]);
        assertEquals(null, BigQueryQueryCdcSourceConnector.bigQueryProblem(config,
                new com.google.cloud.bigquery.BigQueryException(500, "backend error")));
    }

    @Test
    void oneTaskPerTable() {
        BigQueryQueryCdcSourceConnector connector = new BigQueryQueryCdcSourceConnector();
        // start() needs the catalog; taskConfigs only needs the parsed config
        TestAccess.configure(connector, config());
        List<Map<String, String>> tasks = connector.taskConfigs(5);
        assertEquals(List.of("p.d.a", "p.d.b", "p.d.c"), tasks.stream().map(t -> t.get(BigQueryQueryCdcTaskConfig.TABLE)).toList());
        assertEquals("bq-unit", tasks.get(0).get(BigQueryQueryCdcTaskConfig.FLOW));
        ConnectException e = assertThrows(ConnectException.class, () -> connector.taskConfigs(2));
        assertTrue(e.getMessage().contains("tasks.max is 2 but 3 tables"), e.getMessage());
    }

    @Test
    void alterOffsetsChecksPartitionsAndOffsets() {
        BigQueryQueryCdcSourceConnector connector = new BigQueryQueryCdcSourceConnector();
        Map<Map<String, ?>, Map<String, ?>> good = new HashMap<>();
        good.put(Map.of("table", "p.d.a"), Map.of("cursor", "2024-01-01T00:00:00.000001000Z", "batch", 3L));
        good.put(Map.of("table", "p.d.b"), null);
        // valid offsets are recorded in the catalog too (a task reads on from the later cursor): refused without it
        ConnectException noCatalog = assertThrows(ConnectException.class, () -> connector.alterOffsets(config(), good));
        assertTrue(noCatalog.getMessage().contains("the offsets were not changed"), noCatalog.getMessage());

        ConnectException e = assertThrows(ConnectException.class, () -> connector.alterOffsets(config(),
                Map.of(Map.of("table", "p.d.zzz"), Map.of("cursor", "", "batch", 1L))));
        assertTrue(e.getMessage().contains("'p.d.zzz' is not one of this connector's tables"), e.getMessage());
        e = assertThrows(ConnectException.class, () -> connector.alterOffsets(config(),
                Map.of(Map.of("tbl", "p.d.a"), Map.of("cursor", "", "batch", 1L))));
        assertTrue(e.getMessage().contains("a partition is {\"table\""), e.getMessage());
        e = assertThrows(ConnectException.class, () -> connector.alterOffsets(config(),
                Map.of(Map.of("table", "p.d.a"), Map.of("cursor", "2024-13-45", "batch", 1L))));
        assertTrue(e.getMessage().contains("offset of table p.d.a: cursor '2024-13-45' is not an RFC 3339"), e.getMessage());
    }
}
