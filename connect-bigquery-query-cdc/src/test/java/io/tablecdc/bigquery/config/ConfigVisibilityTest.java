package io.tablecdc.bigquery.config;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigValue;
import org.junit.jupiter.api.Test;

/**
 * The source's keys that apply to one replication mode or one way of giving credentials only show (ConfigValue.visible)
 * when the configuration asks for them, as Connect's validate() reports them to its REST API and to UIs.
 */
class ConfigVisibilityTest {
    private static final List<String> WATERMARK = List.of("watermark.column", "watermark.time.zone");
    /** Keys of every mode and every way of giving credentials. */
    private static final List<String> ALWAYS = List.of("replication.mode", "tables", "bigquery.project", "initial.load",
            "safety.lag.ms", "max.query.window.ms", "bigquery.endpoint");

    @Test
    void theWatermarksKeysShowInQueryModeOnly() {
        assertVisible(visibility(Map.of()), WATERMARK, true);
        assertVisible(visibility(Map.of("replication.mode", "QUERY")), WATERMARK, true);
        assertVisible(visibility(Map.of("replication.mode", "query")), WATERMARK, true);
        assertVisible(visibility(Map.of("replication.mode", "APPENDS")), WATERMARK, false);
        assertVisible(visibility(Map.of("replication.mode", "changes", "safety.lag.ms", "700000")), WATERMARK, false);
        for (String mode : List.of("QUERY", "APPENDS", "CHANGES")) {
            assertVisible(visibility(Map.of("replication.mode", mode, "safety.lag.ms", "700000")), ALWAYS, true);
        }
    }

    @Test
    void eachWayOfGivingCredentialsShowsWhileTheOtherIsNotSet() {
        List<String> both = List.of("bigquery.credentials.file", "bigquery.credentials.json");
        // application default credentials: either may be set
        assertVisible(visibility(Map.of()), both, true);
        assertVisible(visibility(Map.of("bigquery.credentials.file", "  ")), both, true);
        Map<String, Boolean> file = visibility(Map.of("bigquery.credentials.file", "/etc/tablecdc/key.json"));
        assertVisible(file, List.of("bigquery.credentials.file"), true);
        assertVisible(file, List.of("bigquery.credentials.json"), false);
        Map<String, Boolean> inline = visibility(Map.of("bigquery.credentials.json", "{\"type\": \"service_account\"}"));
        assertVisible(inline, List.of("bigquery.credentials.json"), true);
        assertVisible(inline, List.of("bigquery.credentials.file"), false);
    }

    private static Map<String, Boolean> visibility(Map<String, String> settings) {
        Map<String, String> props = new HashMap<>();
        props.put("bigquery.project", "p");
        props.put("bigquery.dataset", "d");
        props.put("tables", "orders:updated_at:id");
        props.put("topic.prefix", "bq");
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:5432/catalog");
        props.putAll(settings);
        Map<String, Boolean> visible = new HashMap<>();
        for (ConfigValue value : BigQueryQueryCdcConfig.CONFIG_DEF.validate(props)) {
            visible.put(value.name(), value.visible());
        }
        return visible;
    }

    private static void assertVisible(Map<String, Boolean> visibility, List<String> keys, boolean expected) {
        for (String key : keys) {
            assertEquals(expected, visibility.get(key), key + " visible in " + visibility);
        }
    }
}
