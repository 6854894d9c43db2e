package io.tablecdc.clickhouse;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkConnector;

import io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig;
import io.tablecdc.common.Version;
import io.tablecdc.common.catalog.Catalog;

/**
 * Stages each table's batches as typed Avro files in an object store and normalizes them per table into
 * ReplacingMergeTree tables in ClickHouse. Tasks share the topics by partition; a table (one partition per
 * tablecdc topic) belongs to one task at a time.
 */
public class ClickHouseStageSinkConnector extends SinkConnector {
    /** The connector's name, passed to its tasks: the flow of records that carry no tablecdc headers. */
    static final String CONNECTOR_NAME_PROP = "tablecdc.connector.name";

    private Map<String, String> props;

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        this.props = new HashMap<>(props);
        this.props.put(CONNECTOR_NAME_PROP, props.getOrDefault("name", "clickhouse-stage-sink"));
        ClickHouseStageSinkConfig config = new ClickHouseStageSinkConfig(props);
        if (config.catalog().migrate()) {
            // apply catalog migrations once here rather than racing them from every task
            try (Catalog catalog = Catalog.open(config.catalog(), "sink " + this.props.get(CONNECTOR_NAME_PROP))) {
                catalog.listFlows();
            } catch (RuntimeException e) {
                throw new ConnectException("sink " + this.props.get(CONNECTOR_NAME_PROP) + ": the catalog is not usable: " + e.getMessage(), e);
            }
        }
    }

    @Override
    public Class<? extends Task> taskClass() {
        return ClickHouseStageSinkTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<Map<String, String>> configs = new ArrayList<>();
        for (int i = 0; i < maxTasks; i++) {
            configs.add(props);
        }
        return configs;
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return ClickHouseStageSinkConfig.CONFIG_DEF;
    }
}
