package io.tablecdc.pg;

import static io.tablecdc.common.ConfigValidation.addError;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.common.BatchTransactionSourceConnector;
import io.tablecdc.common.ConfigValidation;
import io.tablecdc.common.Version;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogUnavailableException;
import io.tablecdc.catalog.FlowRecord;
import io.tablecdc.pg.config.PgPipelineConfig;
import io.tablecdc.pg.config.TopicNames;
import io.tablecdc.pg.wire.Lsn;

/**
 * Postgres logical replication of one publication, every table on its own (see docs/pg-pipeline.md).
 *
 * <p>Task 0 is the apply task ({@link ApplyTask}); with {@code table.sync.copy} other than {@code none}, tasks
 * 1..{@code tasks.max}-1 are copy tasks ({@link CopyTask}) that load tables one at a time and hand them over.
 *
 * <p>{@link #validate} checks single fields first, then (when the database answers) {@code wal_level}, the
 * publication and the user's replication privilege, each reported on the field it concerns.
 *
 * <p>Exactly-once delivery is supported (docs/pg-pipeline.md, Exactly-once delivery): the flow's position and the
 * table offsets are Connect offsets, written in the same Kafka transaction as the records; what lives outside Kafka
 * (the catalog's synced batches, {@code ready}, a copy's move to {@code catchup}, the slot's confirmed position) moves
 * only from {@code commit()}, which an exactly-once worker calls right after a transaction committed (see
 * {@link PgPipelineSourceTask#commit()}).
 */
public class PgPipelineSourceConnector extends BatchTransactionSourceConnector {
    private static final Logger log = LoggerFactory.getLogger(PgPipelineSourceConnector.class);

    private Map<String, String> props;

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        PgPipelineConfig config = new PgPipelineConfig(props);
        this.props = new HashMap<>(props);
        String flow = flow(props);
        // migrations run once here, not raced by the tasks
        Optional<FlowRecord> recorded;
        try (Catalog catalog = Catalog.open(config.catalog(), "source " + flow)) {
            recorded = catalog.flows().getFlow(flow);
        } catch (CatalogUnavailableException e) {
            // an outage: the tasks start anyway, wait for the catalog with backoff and make the same checks then
            log.warn("flow {}: the catalog cannot be reached at the connector's start ({}); its tasks wait for it", flow,
                    e.getMessage());
            return;
        } catch (RuntimeException e) {
            throw new ConnectException("flow " + flow + ": the catalog is not usable: " + e.getMessage(), e);
        }
        // refused here already, and again by the apply task, which alone registers the flow (with its slot): a
        // refusal writes nothing
        if (recorded.isPresent()) {
            FlowRefusals.checkKind(flow, recorded.get().identity());
            FlowRefusals.checkPublication(flow, config, recorded.get().identity());
        }
    }

    private static String flow(Map<String, String> props) {
        return props.getOrDefault("name", "pg-pipeline");
    }

    @Override
    public Class<? extends Task> taskClass() {
        return PgPipelineSourceTask.class;
    }

    /**
     * Task 0 applies; tasks 1..maxTasks-1 copy (only when {@code table.sync.copy} copies something: without copies
     * one task is enough). A flow that copies with {@code tasks.max=1} gets one task that applies and copies in turn.
     */
    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        PgPipelineConfig config = new PgPipelineConfig(props);
        boolean copies = config.copyMode() != PgPipelineConfig.CopyMode.NONE;
        int tasks = copies ? Math.max(1, maxTasks) : 1;
        // a flow that copies nothing still catches its detached tables up when they rejoin: its one task does
        boolean rejoins = config.detachMaxTables() > 0;
        List<Map<String, String>> configs = new ArrayList<>();
        for (int i = 0; i < tasks; i++) {
            PgPipelineTaskConfig.Role role = i > 0 ? PgPipelineTaskConfig.Role.COPY
                    : (copies || rejoins) && tasks == 1 ? PgPipelineTaskConfig.Role.APPLY_AND_COPY
                    : PgPipelineTaskConfig.Role.APPLY;
            configs.add(PgPipelineTaskConfig.taskProps(props, flow(props), role, i));
        }
        return configs;
    }

    @Override
    public ConfigDef config() {
        return PgPipelineConfig.CONFIG_DEF;
    }

    @Override
    public Config validate(Map<String, String> connectorConfigs) {
        // the one rule across fields the configuration checks itself is table.sync.copy's
        Config result = ConfigValidation.validate(super.validate(connectorConfigs), () -> new PgPipelineConfig(connectorConfigs),
                PgPipelineConfig.TABLE_SYNC_COPY_CONFIG, (config, result2, values) -> checkRules(connectorConfigs, config, result2, values));
        String refusal = errorsToleranceRefusal(connectorConfigs);
        if (refusal != null) {
            addError(result, ConfigValidation.byName(result), ERRORS_TOLERANCE, refusal);
        }
        return result;
    }

    /** Connect's per-connector setting of what a failed conversion or send does. */
    static final String ERRORS_TOLERANCE = "errors.tolerance";

    /**
     * Why {@code errors.tolerance=all} is refused, or null. With it Connect reports a record the producer failed to send
     * as acknowledged ({@code commitRecord(record, null)}, KIP-779), exactly as an exactly-once worker reports a record
     * of a committed transaction; the flow's position, then the slot, would move past data that is not in Kafka.
     */
    static String errorsToleranceRefusal(Map<String, String> connectorConfigs) {
        String tolerance = connectorConfigs.get(ERRORS_TOLERANCE);
        if (tolerance == null || !"all".equalsIgnoreCase(tolerance.trim())) {
            return null;
        }
        return ERRORS_TOLERANCE + "=all would skip records Kafka did not take (a row too large, a failed send) and move"
                + " the flow's position and its replication slot past them: their changes would be lost. Keep "
                + ERRORS_TOLERANCE + "=none (the default); a row the converter rejects stops only its own table either way";
    }

    /** The rules across fields, then the database and the catalog. */
    private static void checkRules(Map<String, String> connectorConfigs, PgPipelineConfig config, Config result,
                                   Map<String, ConfigValue> values) {
        if (config.recreateInvalidatedSlot() && config.copyMode() != PgPipelineConfig.CopyMode.ALL) {
            addError(result, values, PgPipelineConfig.INVALIDATED_SLOT_BEHAVIOR_CONFIG,
                    PgPipelineConfig.INVALIDATED_SLOT_BEHAVIOR_CONFIG + "=recreate copies every table again from the new"
                    + " slot, but " + PgPipelineConfig.TABLE_SYNC_COPY_CONFIG + " is '"
                    + config.getString(PgPipelineConfig.TABLE_SYNC_COPY_CONFIG) + "': a table not copied would"
                    + " silently miss the changes the lost slot held. Set " + PgPipelineConfig.TABLE_SYNC_COPY_CONFIG
                    + "=all, or keep " + PgPipelineConfig.INVALIDATED_SLOT_BEHAVIOR_CONFIG + "=reject");
        }
        ConfigValidation.checkSinglePartition(connectorConfigs, result, values);
        checkDatabase(config, result, values);
        ConfigValidation.checkCatalog(config.catalog(), result, values);
    }

    /** wal_level, the publication and the replication privilege, each on its field. */
    static void checkDatabase(PgPipelineConfig config, Config result, Map<String, ConfigValue> values) {
        try (Connection c = SourceDatabase.connect(config, "tablecdc validate")) {
            String walLevel = SourceDatabase.walLevel(c);
            if (!"logical".equals(walLevel)) {
                addError(result, values, PgPipelineConfig.HOST_CONFIG, "the server has wal_level=" + walLevel
                        + "; logical replication needs wal_level=logical (ALTER SYSTEM SET wal_level = logical, then restart)");
            }
            if (!SourceDatabase.publicationExists(c, config.publication())) {
                addError(result, values, PgPipelineConfig.PUBLICATION_CONFIG, "publication " + config.publication()
                        + " does not exist in database " + config.database() + " (CREATE PUBLICATION … FOR TABLE …)");
            } else {
                List<String> tables = SourceDatabase.publicationTables(c, config.publication());
                if (tables.isEmpty()) {
                    addError(result, values, PgPipelineConfig.PUBLICATION_CONFIG, "publication " + config.publication()
                            + " has no tables (ALTER PUBLICATION … ADD TABLE …)");
                }
                for (Map<String, String> clash : TopicNames.collisions(config.topicPrefix(), tables)) {
                    addError(result, values, PgPipelineConfig.PUBLICATION_CONFIG, "tables "
                            + TopicNames.describe(clash) + " of publication " + config.publication() + " would write"
                            + " to the same Kafka topic (Kafka takes '.' and '_' as the same character in topic"
                            + " names): rename one of the tables, or leave one out of the publication");
                }
            }
            int version = SourceDatabase.serverVersionNum(c);
            if (config.slotFailover() && version < 170000) {
                addError(result, values, PgPipelineConfig.SLOT_FAILOVER_CONFIG, FlowRefusals.failoverUnsupported(version));
            }
            if (!SourceDatabase.canReplicate(c)) {
                addError(result, values, PgPipelineConfig.USER_CONFIG, "user " + config.user() + " may not replicate:"
                        + " it needs the REPLICATION attribute (ALTER ROLE " + config.user() + " REPLICATION)");
            }
        } catch (SQLException e) {
            String state = e.getSQLState() == null ? "" : e.getSQLState();
            String field = switch (state) {
                case "28P01" -> PgPipelineConfig.PASSWORD_CONFIG;
                case "28000" -> PgPipelineConfig.USER_CONFIG;
                case "3D000" -> PgPipelineConfig.DATABASE_CONFIG;
                default -> PgPipelineConfig.HOST_CONFIG;
            };
            String what = switch (state.length() >= 2 ? state.substring(0, 2) : state) {
                case "28" -> "authentication failed at ";
                case "08" -> "network: cannot reach ";
                default -> "cannot connect to ";
            };
            addError(result, values, field, what + config.jdbcUrl() + ": " + e.getMessage() + " (SQLSTATE " + state + ")");
        }
    }

    /**
     * Checks offsets proposed through the REST API: {@code {"flow": f, "slot": s}} with {@code {"lsn": "X/Y"}}, or
     * {@code {"flow": f, "table": "schema.table"}} with {@code {"batch": id, "lsn": "X/Y"}}; null resets. Batch ids
     * never go back whatever the offset says (the task takes the larger of offset and catalog), and a slot position
     * before the slot's confirmed position cannot make the server resend what it released.
     */
    @Override
    public boolean alterOffsets(Map<String, String> connectorConfig, Map<Map<String, ?>, Map<String, ?>> offsets) {
        String flow = flow(connectorConfig);
        for (Map.Entry<Map<String, ?>, Map<String, ?>> entry : offsets.entrySet()) {
            Map<String, ?> partition = entry.getKey();
            if (partition == null || !flow.equals(partition.get(ChangeBatcher.FLOW_KEY)) || partition.size() != 2
                    || !(partition.get(ChangeBatcher.SLOT_KEY) instanceof String
                    || partition.get(ChangeBatcher.TABLE_KEY) instanceof String)) {
                throw new ConnectException("a partition is {\"flow\": \"" + flow + "\", \"slot\": …} or {\"flow\": \""
                        + flow + "\", \"table\": \"schema.table\"}, not " + partition);
            }
            Map<String, ?> offset = entry.getValue();
            if (offset == null) {
                continue;
            }
            Object lsn = offset.get(ChangeBatcher.LSN_KEY);
            try {
                Lsn.parse(lsn == null ? null : lsn.toString());
            } catch (IllegalArgumentException e) {
                throw new ConnectException("offset of " + partition + ": " + e.getMessage());
            }
            if (partition.containsKey(ChangeBatcher.TABLE_KEY)
                    && !(offset.get(ChangeBatcher.BATCH_KEY) instanceof Number n && n.longValue() >= 0)) {
                throw new ConnectException("offset of " + partition + ": batch must be a non-negative integer, not "
                        + offset.get(ChangeBatcher.BATCH_KEY));
            }
        }
        return true;
    }

    static {
        log.debug("tablecdc Postgres pipeline source {}", Version.get());
    }
}
