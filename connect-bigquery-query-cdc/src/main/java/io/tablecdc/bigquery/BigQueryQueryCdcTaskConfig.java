package io.tablecdc.bigquery;

import java.util.HashMap;
import java.util.Map;

/**
 * What {@link BigQueryQueryCdcSourceConnector} tells each of its tasks besides the connector's own configuration
 * (the flow and the one table the task replicates), under property names that only this class knows: the connector
 * writes them with {@link #taskProps}, the task reads them with {@link #of}.
 */
final class BigQueryQueryCdcTaskConfig {
    /** The table the task replicates ({@code project.dataset.table}). */
    static final String TABLE = "tablecdc.task.table";
    /** The flow (the connector's name). */
    static final String FLOW = "tablecdc.flow";

    private final String flow;
    private final String table;

    private BigQueryQueryCdcTaskConfig(String flow, String table) {
        this.flow = flow;
        this.table = table;
    }

    /** A task's properties: the connector's, with the flow and the task's table. */
    static Map<String, String> taskProps(Map<String, String> connectorProps, String flow, String table) {
        Map<String, String> task = new HashMap<>(connectorProps);
        task.put(TABLE, table);
        task.put(FLOW, flow);
        return task;
    }

    /** Reads a task's properties; either value is null when the connector did not set it. */
    static BigQueryQueryCdcTaskConfig of(Map<String, String> props) {
        return new BigQueryQueryCdcTaskConfig(props.get(FLOW), props.get(TABLE));
    }

    String flow() {
        return flow;
    }

    /** The table's full name ({@code project.dataset.table}). */
    String table() {
        return table;
    }
}
