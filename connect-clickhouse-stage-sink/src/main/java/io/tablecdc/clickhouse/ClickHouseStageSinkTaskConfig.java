package io.tablecdc.clickhouse;

import java.util.HashMap;
import java.util.Map;

/**
 * What {@link ClickHouseStageSinkConnector} tells its tasks besides the connector's own configuration (the
 * connector's name), under a property name that only this class knows: the connector writes it with
 * {@link #taskProps}, the tasks read it with {@link #of}.
 */
final class ClickHouseStageSinkTaskConfig {
    /** The connector's name: the flow of records that carry no tablecdc headers. */
    static final String CONNECTOR_NAME = "tablecdc.connector.name";
    private static final String DEFAULT_NAME = "clickhouse-stage-sink";

    private final String connectorName;

    private ClickHouseStageSinkTaskConfig(String connectorName) {
        this.connectorName = connectorName;
    }

    /** The tasks' properties: the connector's, with its name ({@code name}, else {@code clickhouse-stage-sink}). */
    static Map<String, String> taskProps(Map<String, String> connectorProps) {
        Map<String, String> task = new HashMap<>(connectorProps);
        task.put(CONNECTOR_NAME, connectorProps.getOrDefault("name", DEFAULT_NAME));
        return task;
    }

    /** Reads a task's properties; without the connector's name the name is {@code clickhouse-stage-sink}. */
    static ClickHouseStageSinkTaskConfig of(Map<String, String> props) {
        return new ClickHouseStageSinkTaskConfig(props.getOrDefault(CONNECTOR_NAME, DEFAULT_NAME));
    }

    String connectorName() {
        return connectorName;
    }
}
