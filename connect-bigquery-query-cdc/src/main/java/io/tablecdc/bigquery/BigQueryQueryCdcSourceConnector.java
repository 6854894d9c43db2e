package io.tablecdc.bigquery;

import static io.tablecdc.common.ConfigValidation.addError;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import com.google.cloud.bigquery.BigQueryException;
import com.google.cloud.bigquery.FieldList;

import io.tablecdc.bigquery.config.BigQueryQueryCdcConfig;
import io.tablecdc.bigquery.config.TableSpec;
import io.tablecdc.bigquery.schema.TableSchema;
import io.tablecdc.common.BatchTransactionSourceConnector;
import io.tablecdc.common.ConfigValidation;
import io.tablecdc.common.Version;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogUnavailableException;
import io.tablecdc.catalog.FlowIdentity;

/**
 * Query-based CDC from BigQuery: one task per table, each polling its own cursor (see {@link TablePoller}).
 *
 * <p>{@link #validate} checks single fields first, then that {@code tasks.max} covers the tables, then (when BigQuery
 * answers) that every table, watermark column and key column exists with a usable type; each error is reported on
 * the field it concerns. {@link #alterOffsets} checks offsets proposed through the REST API.
 *
 * <p>Exactly-once delivery is supported (docs/bigquery-query-cdc.md, Exactly-once delivery): a table's cursor is the
 * Connect offset of its batch's last record, written in the same Kafka transaction as the batch; the catalog mirror
 * waits until every record of the batch is acknowledged, which the task learns in {@code commit()}, called by an
 * exactly-once worker right after the transaction committed.
 */
public class BigQueryQueryCdcSourceConnector extends BatchTransactionSourceConnector {
    private static final Logger log = LoggerFactory.getLogger(BigQueryQueryCdcSourceConnector.class);
    static final String SOURCE_KIND = "bigquery_query_cdc";
    private static final String TASKS_MAX = "tasks.max";

    private Map<String, String> props;
    private BigQueryQueryCdcConfig config;

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        configureWithoutCatalog(props);
        String flow = flow(props);
        // migrations run once here, not raced by every task; removed tables lose their catalog rows once loaded
        try (Catalog catalog = Catalog.open(config.catalog(), "source " + flow)) {
            catalog.flows().registerFlow(flow, FlowIdentity.ofKind(SOURCE_KIND), null);
            // a removed table's batches the sink has not loaded stay (its staged batches and its row) until it has
            var outcome = catalog.flows().pruneLoadedTables(flow, config.tables().stream().map(TableSpec::fullName).toList());
            if (!outcome.pruned().isEmpty()) {
                log.info("flow {}: tables no longer configured, catalog rows removed: {}", flow, outcome.pruned());
            }
            if (!outcome.keptUntilLoaded().isEmpty()) {
                log.info("flow {}: tables no longer configured are kept in the catalog until the sink has loaded what"
                        + " it holds of them (they are removed at a later start): {}", flow, outcome.keptUntilLoaded());
            }
        } catch (CatalogUnavailableException e) {
            // an outage (a worker failover during a catalog outage starts the connector elsewhere): the tasks wait for
            // the catalog with backoff; the flow's registration and the pruning of removed tables run at the next start
            log.warn("flow {}: the catalog cannot be reached at the connector's start ({}); its tasks wait for it, and the"
                    + " catalog rows of tables no longer configured are removed at a later start", flow, e.getMessage());
        } catch (RuntimeException e) {
            throw new ConnectException("flow " + flow + ": the catalog is not usable: " + e.getMessage(), e);
        }
    }

    /** Reads the config (for {@link #taskConfigs}) without touching the catalog. */
    void configureWithoutCatalog(Map<String, String> props) {
        this.props = new HashMap<>(props);
        this.config = new BigQueryQueryCdcConfig(props);
    }

    private static String flow(Map<String, String> props) {
        return props.getOrDefault("name", "bigquery-query-cdc");
    }

    @Override
    public Class<? extends Task> taskClass() {
        return BigQueryQueryCdcSourceTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<TableSpec> tables = config.tables();
        if (maxTasks < tables.size()) {
            throw new ConnectException("tasks.max is " + maxTasks + " but " + tables.size()
                    + " tables are configured: each table needs its own task");
        }
        List<Map<String, String>> configs = new ArrayList<>();
        for (TableSpec table : tables) {
            configs.add(BigQueryQueryCdcTaskConfig.taskProps(props, flow(props), table.fullName()));
        }
        return configs;
    }

    @Override
    public ConfigDef config() {
        return BigQueryQueryCdcConfig.CONFIG_DEF;
    }

    @Override
    public Config validate(Map<String, String> connectorConfigs) {
        return ConfigValidation.validate(super.validate(connectorConfigs), () -> new BigQueryQueryCdcConfig(connectorConfigs),
                BigQueryQueryCdcConfig.TABLES_CONFIG, (parsed, result, values) -> checkRules(connectorConfigs, parsed, result, values));
    }

    /** The rules across fields, the catalog, then tables and columns against BigQuery. */
    private static void checkRules(Map<String, String> connectorConfigs, BigQueryQueryCdcConfig parsed, Config result,
                                   Map<String, ConfigValue> values) {
        String tasksMax = connectorConfigs.get(TASKS_MAX);
        int max = 1;
        try {
            max = tasksMax == null ? 1 : Integer.parseInt(tasksMax.trim());
        } catch (NumberFormatException e) {
            // Connect reports a malformed tasks.max itself
        }
        if (max < parsed.tables().size()) {
            addError(result, values, TASKS_MAX, "tasks.max is " + max + " but " + parsed.tables().size()
                    + " tables are configured; each table needs its own task: set tasks.max to at least " + parsed.tables().size());
        }
        ConfigValidation.checkSinglePartition(connectorConfigs, result, values);
        for (TableSpec table : parsed.tables()) {
            if (!table.hasKey()) {
                addError(result, values, BigQueryQueryCdcConfig.TABLES_CONFIG, BigQueryQueryCdcConfig.keylessProblem(table));
            }
        }
        ConfigValidation.checkCatalog(parsed.catalog(), result, values);
        checkTables(flow(connectorConfigs), parsed, result, values);
    }

    /** Checks tables and columns against BigQuery; skipped (with a log line) when BigQuery does not answer. */
    private static void checkTables(String flow, BigQueryQueryCdcConfig config, Config result, Map<String, ConfigValue> values) {
        SourceClient client;
        try {
            client = SourceClient.create(config, Duration.ofSeconds(10));
        } catch (RuntimeException e) {
            addError(result, values, config.credentialsJson() != null ? BigQueryQueryCdcConfig.CREDENTIALS_JSON_CONFIG
                    : BigQueryQueryCdcConfig.CREDENTIALS_FILE_CONFIG, e.getMessage());
            return;
        }
        if (!checkDestination(flow, config, client, result, values)) {
            return;
        }
        for (TableSpec table : config.tables()) {
            FieldList columns;
            try {
                columns = client.columns(table);
            } catch (BigQueryException e) {
                String[] problem = bigQueryProblem(config, e);
                if (problem != null) {
                    addError(result, values, problem[0], problem[1]);
                } else {
                    log.info("validate: BigQuery did not answer for table {} ({}); tables and columns are checked when the tasks start",
                            table.fullName(), e.getMessage());
                }
                return;
            }
            if (columns == null) {
                addError(result, values, BigQueryQueryCdcConfig.TABLES_CONFIG, "table " + table.fullName() + " does not exist");
                continue;
            }
            try {
                TableSchema schema = TableSchema.of(table, columns, config.mode() == BigQueryQueryCdcConfig.Mode.QUERY);
                String lagProblem = config.mode() == BigQueryQueryCdcConfig.Mode.QUERY
                        ? schema.lagProblem(config.safetyLagMs(), config.watermarkTimeZone()) : null;
                if (lagProblem != null) {
                    addError(result, values, BigQueryQueryCdcConfig.SAFETY_LAG_MS_CONFIG, lagProblem);
                }
            } catch (TableSchema.SchemaException e) {
                addError(result, values, BigQueryQueryCdcConfig.TABLES_CONFIG, e.getMessage());
            }
        }
    }

    /**
     * Checks {@code query.destination.dataset}, when set: it exists (in {@code bigquery.location}), and the credentials
     * may create and drop tables in it. False when BigQuery cannot be asked (the error, if the configuration's fault, is
     * reported, and nothing else is checked).
     */
    private static boolean checkDestination(String flow, BigQueryQueryCdcConfig config, SourceClient client, Config result,
                                            Map<String, ConfigValue> values) {
        String[] dataset = config.destinationDataset();
        if (dataset == null) {
            return true;
        }
        String problem;
        try {
            problem = client.destinationProblem(dataset[0], dataset[1]);
        } catch (BigQueryException e) {
            String[] failure = bigQueryProblem(config, e);
            if (failure != null) {
                addError(result, values, failure[0], failure[1]);
            } else {
                log.info("validate: BigQuery did not answer for dataset {}.{} ({}); it is checked when the tasks query",
                        dataset[0], dataset[1], e.getMessage());
            }
            return false;
        }
        if (problem != null) {
            addError(result, values, BigQueryQueryCdcConfig.DESTINATION_DATASET_CONFIG, "connector " + flow + ": "
                    + BigQueryQueryCdcConfig.DESTINATION_DATASET_CONFIG + ": " + problem);
        }
        return true;
    }

    /**
     * The field and message of a BigQuery failure that is the configuration's fault: refused credentials (401) and
     * missing permissions (403) on the credentials field, an endpoint that cannot be reached on {@code bigquery.endpoint};
     * null for anything else (a server error, a timeout), which the tasks meet again and retry.
     */
    static String[] bigQueryProblem(BigQueryQueryCdcConfig config, BigQueryException e) {
        String credentials = config.credentialsJson() != null ? BigQueryQueryCdcConfig.CREDENTIALS_JSON_CONFIG
                : BigQueryQueryCdcConfig.CREDENTIALS_FILE_CONFIG;
        String reason = e.getMessage() == null ? "" : e.getMessage();
        if (e.getCode() == 401) {
            return new String[] {credentials, "authentication failed: BigQuery refused the credentials: " + reason};
        }
        if (e.getCode() == 403) {
            return new String[] {credentials, "permission denied: the credentials may not read the configured tables of "
                    + config.getString(BigQueryQueryCdcConfig.PROJECT_CONFIG) + " (they need bigquery.tables.get and"
                    + " bigquery.jobs.create): " + reason};
        }
        for (Throwable t = e.getCause(); t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof java.net.ConnectException || t instanceof java.net.UnknownHostException
                    || t instanceof java.net.NoRouteToHostException) {
                String endpoint = config.getString(BigQueryQueryCdcConfig.ENDPOINT_CONFIG);
                return new String[] {BigQueryQueryCdcConfig.ENDPOINT_CONFIG, "network: cannot reach BigQuery at "
                        + (endpoint.isEmpty() ? "its default endpoint" : endpoint) + ": " + t.getMessage()};
            }
        }
        return null;
    }

    /**
     * A task reads on from the later of its Connect offset and the catalog's cursor, so a rewind (or reset) moves the
     * catalog's cursor too, and records the {@code watermark.time.zone} the new cursor is read in. Refused (the offsets
     * are not changed) when the catalog cannot be written.
     */
    private static void recordRewinds(Map<String, String> connectorConfig, Map<Map<String, ?>, Map<String, ?>> offsets) {
        BigQueryQueryCdcConfig config = new BigQueryQueryCdcConfig(connectorConfig);
        String flow = flow(connectorConfig);
        String zone = config.mode() == BigQueryQueryCdcConfig.Mode.QUERY ? config.watermarkTimeZone().getId() : null;
        try (Catalog catalog = Catalog.open(config.catalog(), "source " + flow + " offsets")) {
            for (Map.Entry<Map<String, ?>, Map<String, ?>> entry : offsets.entrySet()) {
                String table = (String) entry.getKey().get(TablePoller.PARTITION_KEY);
                OffsetValue offset = OffsetValue.of(entry.getValue());
                String cursor = offset.cursor() == null ? "" : Cursor.format(offset.cursor());
                catalog.progress().rewindCursor(flow, table, cursor, zone);
                log.info("flow {}, table {}: offset altered, the catalog's cursor set to {}", flow, table,
                        cursor.isEmpty() ? "none (initial load)" : cursor);
            }
        } catch (RuntimeException e) {
            throw new ConnectException("flow " + flow + ": the offsets were not changed, because the catalog could not"
                    + " record the new cursors (a task reads on from the later of its offset and the catalog's cursor): "
                    + e.getMessage(), e);
        }
    }

    /**
     * Checks offsets proposed through the REST API ({@code PATCH /connectors/{name}/offsets}): each partition is
     * {@code {"table": "project.dataset.table"}} naming a configured table, each offset {@code {"cursor": "<RFC 3339
     * UTC>", "batch": <id>}} or null (a reset: the table starts again with its initial load). Batch ids never go
     * back, whatever the offset says: a task takes the larger of the offset's and the catalog's.
     */
    @Override
    public boolean alterOffsets(Map<String, String> connectorConfig, Map<Map<String, ?>, Map<String, ?>> offsets) {
        Set<String> tables = new HashSet<>();
        try {
            new BigQueryQueryCdcConfig(connectorConfig).tables().forEach(t -> tables.add(t.fullName()));
        } catch (ConfigException e) {
            throw new ConnectException("the connector's configuration is not valid: " + e.getMessage());
        }
        for (Map.Entry<Map<String, ?>, Map<String, ?>> entry : offsets.entrySet()) {
            Map<String, ?> partition = entry.getKey();
            Object table = partition == null ? null : partition.get(TablePoller.PARTITION_KEY);
            if (partition == null || partition.size() != 1 || !(table instanceof String name)) {
                throw new ConnectException("a partition is {\"table\": \"project.dataset.table\"}, not " + partition);
            }
            if (!tables.contains(name)) {
                throw new ConnectException("table '" + name + "' is not one of this connector's tables " + tables);
            }
            try {
                OffsetValue.of(entry.getValue());
            } catch (IllegalArgumentException e) {
                throw new ConnectException("offset of table " + name + ": " + e.getMessage());
            }
        }
        recordRewinds(connectorConfig, offsets);
        return true;
    }
}
