package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.errors.ConnectException;
import org.junit.jupiter.api.Test;

class ConnectorTest {
    private static Map<String, String> config() {
        Map<String, String> props = new HashMap<>();
        props.put("name", "orders-flow");
        return props;
    }

    private static Map<Map<String, ?>, Map<String, ?>> offsets(Map<String, ?> partition, Map<String, ?> offset) {
        Map<Map<String, ?>, Map<String, ?>> offsets = new HashMap<>();
        offsets.put(partition, offset);
        return offsets;
    }

    @Test
    void offsetsOfTheSlotAndOfTablesAreAccepted() {
        PgPipelineSourceConnector connector = new PgPipelineSourceConnector();
        assertTrue(connector.alterOffsets(config(), offsets(Map.of("flow", "orders-flow", "slot", "tablecdc_ab"),
                Map.of("lsn", "0/16B3748"))));
        assertTrue(connector.alterOffsets(config(), offsets(Map.of("flow", "orders-flow", "table", "shop.orders"),
                Map.of("batch", 12, "lsn", "1/0"))));
        assertTrue(connector.alterOffsets(config(), offsets(Map.of("flow", "orders-flow", "table", "shop.orders"), null)),
                "a tombstone resets");
    }

    @Test
    void malformedOffsetsAreRefusedWithTheReason() {
        PgPipelineSourceConnector connector = new PgPipelineSourceConnector();
        ConnectException e = assertThrows(ConnectException.class, () -> connector.alterOffsets(config(),
                offsets(Map.of("flow", "another-flow", "slot", "s"), Map.of("lsn", "0/1"))));
        assertTrue(e.getMessage().contains("\"flow\": \"orders-flow\""), e.getMessage());
        e = assertThrows(ConnectException.class, () -> connector.alterOffsets(config(),
                offsets(Map.of("flow", "orders-flow", "slot", "s"), Map.of("lsn", "yesterday"))));
        assertTrue(e.getMessage().contains("an LSN must be X/Y"), e.getMessage());
        e = assertThrows(ConnectException.class, () -> connector.alterOffsets(config(),
                offsets(Map.of("flow", "orders-flow", "table", "shop.orders"), Map.of("batch", -1, "lsn", "0/1"))));
        assertTrue(e.getMessage().contains("batch must be a non-negative integer"), e.getMessage());
    }

    /** An unreachable catalog is an outage: the connector starts and its tasks wait for the catalog (PgSourceOutageIT). */
    @Test
    void startRidesOutAnUnreachableCatalog() {
        PgPipelineSourceConnector connector = new PgPipelineSourceConnector();
        Map<String, String> props = config();
        props.put("database.host", "127.0.0.1");
        props.put("database.dbname", "shop");
        props.put("database.user", "replicator");
        props.put("publication.name", "shop_pub");
        props.put("topic.prefix", "pg");
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:1/none");
        connector.start(props);
        assertEquals(PgPipelineSourceTask.class, connector.taskClass());
        assertEquals(2, connector.taskConfigs(2).size(), "task configs without the catalog");
    }

    @Test
    void taskZeroAppliesAndTheOthersCopyOnlyWhenTablesAreCopied() throws Exception {
        PgPipelineSourceConnector connector = new PgPipelineSourceConnector();
        Map<String, String> props = config();
        props.put("database.host", "127.0.0.1");
        props.put("database.dbname", "shop");
        props.put("database.user", "replicator");
        props.put("publication.name", "shop_pub");
        props.put("topic.prefix", "pg");
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:1/none");
        java.lang.reflect.Field field = PgPipelineSourceConnector.class.getDeclaredField("props");
        field.setAccessible(true);
        field.set(connector, props);
        // copying is the default: with tasks.max=1 one task applies and copies in turn
        List<Map<String, String>> tasks = connector.taskConfigs(1);
        assertEquals(List.of("apply+copy"), tasks.stream().map(t -> t.get(PgPipelineTaskConfig.ROLE)).toList());
        assertEquals(List.of("apply", "copy"), connector.taskConfigs(2).stream()
                .map(t -> t.get(PgPipelineTaskConfig.ROLE)).toList());
        // without copies one task is enough, whatever tasks.max says; it catches detached tables up when they rejoin
        props.put("table.sync.copy", "none");
        tasks = connector.taskConfigs(3);
        assertEquals(1, tasks.size());
        assertEquals("apply+copy", tasks.get(0).get(PgPipelineTaskConfig.ROLE));
        // ... unless no table is ever detached: then it only applies
        props.put("detach.max.tables", "0");
        assertEquals(List.of("apply"), connector.taskConfigs(3).stream().map(t -> t.get(PgPipelineTaskConfig.ROLE)).toList());
        props.remove("detach.max.tables");
        props.put("table.sync.copy", "except:shop.audit");
        tasks = connector.taskConfigs(3);
        assertEquals(List.of("apply", "copy", "copy"), tasks.stream().map(t -> t.get(PgPipelineTaskConfig.ROLE)).toList());
        assertEquals(List.of("0", "1", "2"), tasks.stream().map(t -> t.get(PgPipelineTaskConfig.TASK_INDEX)).toList());
        assertTrue(tasks.stream().allMatch(t -> "orders-flow".equals(t.get(PgPipelineTaskConfig.FLOW))));
    }
}
