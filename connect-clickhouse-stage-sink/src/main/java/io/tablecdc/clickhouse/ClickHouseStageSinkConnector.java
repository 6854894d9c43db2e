package io.tablecdc.clickhouse;

import java.util.Collection;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkConnector;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

import io.tablecdc.common.Version;

/**
 * Stages each table's batches as typed Avro files and normalizes them per table into ClickHouse.
 *
 * <p>This build only packages the plugin: starting it fails with a clear message until issue #4 lands.
 */
public class ClickHouseStageSinkConnector extends SinkConnector {
    static final String NOT_YET = "ClickHouseStageSinkConnector does not replicate yet in tablecdc " + Version.get()
            + " (it is packaged so that the plugin installs and loads; issue #4 builds it)";

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        throw new ConnectException(NOT_YET);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return ClickHouseStageSinkTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        throw new ConnectException(NOT_YET);
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return new ConfigDef();
    }

    /** The task of {@link ClickHouseStageSinkConnector}. */
    public static class ClickHouseStageSinkTask extends SinkTask {
        @Override
        public String version() {
            return Version.get();
        }

        @Override
        public void start(Map<String, String> props) {
            throw new ConnectException(NOT_YET);
        }

    @Override
    public void put(Collection<SinkRecord> records) {
        throw new ConnectException(NOT_YET);
    }

        @Override
        public void stop() {
        }
    }
}
