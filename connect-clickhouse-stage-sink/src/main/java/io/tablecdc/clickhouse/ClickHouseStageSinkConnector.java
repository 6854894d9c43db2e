package io.tablecdc.clickhouse;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkConnector;

import io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig;
import io.tablecdc.common.ConfigValidation;
import io.tablecdc.common.Version;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogConfig;

/**
 * Stages each table's batches as typed Avro files in an object store and normalizes them per table into
 * ReplacingMergeTree tables in ClickHouse. Tasks share the topics by partition; a table (one partition per
 * tablecdc topic) belongs to one task at a time.
 */
public class ClickHouseStageSinkConnector extends SinkConnector {
    private Map<String, String> props;

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        this.props = ClickHouseStageSinkTaskConfig.taskProps(props);
        String name = ClickHouseStageSinkTaskConfig.of(this.props).connectorName();
        ClickHouseStageSinkConfig config = new ClickHouseStageSinkConfig(props);
        if (config.catalog().migrate()) {
            // apply catalog migrations once here rather than racing them from every task
            try {
                // open applies the migrations; the tasks then find the schema current
                Catalog.open(config.catalog(), "sink " + name).close();
            } catch (io.tablecdc.catalog.CatalogUnavailableException e) {
                // an outage, not a wrong setting: the tasks retry opening it (and apply the migrations) with backoff
                org.slf4j.LoggerFactory.getLogger(ClickHouseStageSinkConnector.class).warn("sink {}: the catalog cannot be"
                        + " reached at start; its tasks retry: {}", name, e.getMessage());
            } catch (RuntimeException e) {
                throw new ConnectException("sink " + name + ": the catalog is not usable: " + e.getMessage(), e);
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

    /**
     * Field checks, then ClickHouse (answers, accepts the user and password, has the database, grants what the sink
     * needs), the stage location (a test object written, read by ClickHouse in pull mode, deleted) and the catalog;
     * each problem is reported as what it is on the field at fault, and secrets never appear in messages.
     */
    @Override
    public Config validate(Map<String, String> connectorConfigs) {
        Config result = ConfigValidation.validate(super.validate(connectorConfigs),
                () -> new ClickHouseStageSinkConfig(connectorConfigs), ClickHouseStageSinkConfig.CLICKHOUSE_URL_CONFIG,
                ClickHouseStageSinkConnector::checkAccess);
        String problem = deadLetterLoop(connectorConfigs);
        if (problem != null) {
            ConfigValidation.addError(result, ConfigValidation.byName(result), DLQ_TOPIC, problem);
        }
        return result;
    }

    /** Connect's setting of the sink's dead letter queue topic. */
    static final String DLQ_TOPIC = "errors.deadletterqueue.topic.name";

    /**
     * Why the dead letter queue topic cannot be used, or null: a topic the sink itself consumes ({@code topics} or
     * {@code topics.regex}) would hand every record it reports back to it, to be reported again.
     */
    static String deadLetterLoop(Map<String, String> configs) {
        String dlq = configs.getOrDefault(DLQ_TOPIC, "").trim();
        if (dlq.isEmpty()) {
            return null;
        }
        for (String topic : configs.getOrDefault("topics", "").split(",")) {
            if (topic.trim().equals(dlq)) {
                return "the dead letter queue topic " + dlq + " is one of the sink's topics (topics): a record the sink"
                        + " cannot stage would come back to it from there; name a topic the sink does not consume";
            }
        }
        String regex = configs.getOrDefault("topics.regex", "").trim();
        if (!regex.isEmpty()) {
            try {
                if (java.util.regex.Pattern.compile(regex).matcher(dlq).matches()) {
                    return "the dead letter queue topic " + dlq + " matches the sink's topics.regex " + regex + ": a record"
                            + " the sink cannot stage would come back to it from there; name a topic the regex does not"
                            + " match";
                }
            } catch (java.util.regex.PatternSyntaxException e) {
                // Connect reports the pattern itself
                return null;
            }
        }
        return null;
    }

    private static void checkAccess(ClickHouseStageSinkConfig config, Config result, Map<String, ConfigValue> values) {
        List<ClickHouseAccessCheck.Problem> problems;
        try (var client = io.tablecdc.clickhouse.destination.ClickHouseClients.client(config); var store = io.tablecdc.clickhouse.stage.StageStores.open(config)) {
            problems = ClickHouseAccessCheck.check(config, client, store);
        } catch (Exception e) {
            problems = ClickHouseAccessCheck.scrub(List.of(ClickHouseAccessCheck.stageWriteProblem(config, e)), config);
        }
        for (ClickHouseAccessCheck.Problem problem : problems) {
            ConfigValidation.addError(result, values, problem.field(), problem.message());
        }
        ConfigValidation.checkCatalog(config.catalog(), result, values);
    }
}
