package io.tablecdc.clickhouse.config;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigValue;
import org.junit.jupiter.api.Test;

/**
 * The sink's keys that apply to one kind of stage store or to a cluster only show (ConfigValue.visible) when the
 * stage URI or the cluster asks for them, as Connect's validate() reports them to its REST API and to UIs.
 */
class ConfigVisibilityTest {
    private static final List<String> S3 = List.of("stage.s3.endpoint", "stage.s3.region", "stage.s3.access.key",
            "stage.s3.secret.key");
    private static final List<String> GCS = List.of("stage.gcs.endpoint", "stage.gcs.hmac.access.id",
            "stage.gcs.hmac.secret");
    private static final List<String> CLUSTER = List.of("clickhouse.replication.path", "clickhouse.replication.replica", "clickhouse.distributed.table",
            "clickhouse.insert.quorum", "clickhouse.insert.quorum.timeout.ms");

    @Test
    void theObjectStoresKeysShowByTheStageUrisScheme() {
        assertVisible(visibility("s3://bucket/stage", ""), S3, true);
        assertVisible(visibility("S3://bucket/stage", ""), S3, true);
        assertVisible(visibility("s3://bucket/stage", ""), GCS, false);
        assertVisible(visibility("gs://bucket/stage", ""), GCS, true);
        assertVisible(visibility("gs://bucket/stage", ""), S3, false);
        assertVisible(visibility("file:///var/stage", ""), S3, false);
        assertVisible(visibility("file:///var/stage", ""), GCS, false);
    }

    @Test
    void theReplicationKeysShowOnceAClusterIsNamed() {
        assertVisible(visibility("s3://bucket/stage", ""), CLUSTER, false);
        assertVisible(visibility("s3://bucket/stage", "   "), CLUSTER, false);
        assertVisible(visibility("s3://bucket/stage", "main"), CLUSTER, true);
        // keys of their own stay visible whatever the others say
        assertVisible(visibility("file:///var/stage", ""), List.of("stage.uri", "clickhouse.cluster", "clickhouse.url"), true);
    }

    private static Map<String, Boolean> visibility(String stageUri, String cluster) {
        Map<String, String> props = new HashMap<>();
        props.put("clickhouse.url", "http://127.0.0.1:8123");
        props.put("stage.uri", stageUri);
        props.put("clickhouse.cluster", cluster);
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:5432/catalog");
        Map<String, Boolean> visible = new HashMap<>();
        for (ConfigValue value : ClickHouseStageSinkConfig.CONFIG_DEF.validate(props)) {
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
