package io.tablecdc.clickhouse;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigValue;
import org.junit.jupiter.api.Test;

/** validate() reports a rule between fields on the field it concerns, before it reaches for any server. */
class ClickHouseStageSinkConnectorTest {

    /** Both sides of each rule: a name in topics, a name the regex matches, and names outside each. */
    @Test
    void aDeadLetterTopicTheSinkConsumesIsALoop() {
        assertEquals(null, ClickHouseStageSinkConnector.deadLetterLoop(Map.of("topics", "a,b")));
        assertEquals(null, ClickHouseStageSinkConnector.deadLetterLoop(Map.of("topics", "a,b",
                "errors.deadletterqueue.topic.name", "c")));
        org.junit.jupiter.api.Assertions.assertTrue(ClickHouseStageSinkConnector.deadLetterLoop(Map.of("topics", "a, b",
                "errors.deadletterqueue.topic.name", " b ")).contains("is one of the sink's topics"));
        org.junit.jupiter.api.Assertions.assertTrue(ClickHouseStageSinkConnector.deadLetterLoop(Map.of("topics.regex",
                "cdc\\..*", "errors.deadletterqueue.topic.name", "cdc.dlq")).contains("matches the sink's topics.regex"));
        // the whole name must match, as Connect subscribes: a regex matching a part of it is no loop
        assertEquals(null, ClickHouseStageSinkConnector.deadLetterLoop(Map.of("topics.regex", "cdc\\..*",
                "errors.deadletterqueue.topic.name", "dlq.cdc.x")));
        assertEquals(null, ClickHouseStageSinkConnector.deadLetterLoop(Map.of("topics.regex", "(",
                "errors.deadletterqueue.topic.name", "x")));
    }

    @Test
    void aDistributedTableWithoutAClusterIsReportedOnTheDistributedKey() {
        Map<String, String> props = new HashMap<>();
        props.put("clickhouse.url", "http://127.0.0.1:1");
        props.put("stage.uri", "file:///tmp/stage");
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:1/catalog");
        props.put("clickhouse.distributed.table", "true");
        Map<String, List<String>> errors = new HashMap<>();
        for (ConfigValue value : new ClickHouseStageSinkConnector().validate(props).configValues()) {
            if (!value.errorMessages().isEmpty()) {
                errors.put(value.name(), value.errorMessages());
            }
        }
        assertEquals(List.of("clickhouse.distributed.table"), List.copyOf(errors.keySet()), errors.toString());
        assertEquals(1, errors.get("clickhouse.distributed.table").size());
    }
}
