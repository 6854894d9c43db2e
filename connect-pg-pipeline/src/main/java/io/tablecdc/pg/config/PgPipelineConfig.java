package io.tablecdc.pg.config;

import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.common.config.ConfigDef.Width;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;

import io.tablecdc.catalog.CatalogConfig;
import io.tablecdc.catalog.CatalogConfig.CatalogSettings;

/** The configuration of the Postgres pipeline source: one {@link ConfigDef}, read only through typed getters. */
public final class PgPipelineConfig extends AbstractConfig {
    private static final String CONNECTION_GROUP = "Postgres connection";
    private static final String REPLICATION_GROUP = "Replication";

    public static final String HOST_CONFIG = "database.host";
    private static final String HOST_DOC = "Host name or address of the source PostgreSQL server (10+, wal_level=logical).";

    public static final String PORT_CONFIG = "database.port";
    private static final String PORT_DOC = "Port of the source PostgreSQL server.";
    private static final int PORT_DEFAULT = 5432;

    public static final String DATABASE_CONFIG = "database.dbname";
    private static final String DATABASE_DOC = "The database whose publication is replicated (UTF8 encoding).";

    public static final String USER_CONFIG = "database.user";
    private static final String USER_DOC = "User for the regular and the replication connection; needs the REPLICATION"
            + " attribute (or superuser) and SELECT on the catalog views pg_publication_tables and pg_replication_slots.";

    public static final String PASSWORD_CONFIG = "database.password";
    private static final String PASSWORD_DOC = "Password of database.user. Never logged; use a Connect config provider"
            + " (${file:...}) to keep it out of the connector config.";

    public static final String SSLMODE_CONFIG = "database.sslmode";
    private static final String SSLMODE_DOC = "pgjdbc sslmode of both connections: disable, allow, prefer, require,"
            + " verify-ca or verify-full.";
    private static final String SSLMODE_DEFAULT = "prefer";

    public static final String PUBLICATION_CONFIG = "publication.name";
    private static final String PUBLICATION_DOC = "The publication to replicate (CREATE PUBLICATION … FOR TABLE …, or"
            + " FOR ALL TABLES). It must exist and contain at least one table; every table in it is replicated.";

    public static final String SLOT_PREFIX_CONFIG = "slot.prefix";
    private static final String SLOT_PREFIX_DOC = "Prefix of the flow's replication slot: the main slot is"
            + " <slot.prefix>_<random>, recorded in the catalog's cdc_flow before it is created and reused on every"
            + " restart.";
    private static final String SLOT_PREFIX_DEFAULT = "tablecdc";

    public static final String INVALIDATED_SLOT_BEHAVIOR_CONFIG = "invalidated.slot.behavior";
    private static final String INVALIDATED_SLOT_BEHAVIOR_DOC = "What the apply task does when the flow's main slot"
            + " was invalidated by the server (wal_status = lost: the WAL it needed was removed, e.g. past"
            + " max_slot_wal_keep_size): reject stops with an error that says how to raise max_slot_wal_keep_size"
            + " and how to reset the flow; recreate drops the lost slot, creates a new one, puts every table back to"
            + " pending and copies each again (each copy first empties its ClickHouse table, so no stale row"
            + " survives). recreate needs table.sync.copy=all, since a table that is not copied could not get back"
            + " the changes the lost slot held.";
    private static final String INVALIDATED_SLOT_BEHAVIOR_DEFAULT = "reject";

    public static final String SLOT_FAILOVER_CONFIG = "slot.failover";
    private static final String SLOT_FAILOVER_DOC = "Create the main slot as a failover slot (PostgreSQL 17 or later;"
            + " the server's standbys with sync_replication_slots=on keep a copy of it). After a standby is promoted,"
            + " point database.host at it: the flow resumes from the synchronized slot on the new timeline, which"
            + " it otherwise refuses. Copy slots are temporary and never failover slots: a copy running during the"
            + " promotion starts over.";

    public static final String TABLE_SYNC_COPY_CONFIG = "table.sync.copy";
    private static final String TABLE_SYNC_COPY_DOC = "Which tables are copied before they stream: all, none,"
            + " only:<schema.table>,… or except:<schema.table>,…. A copied table is loaded by a copy task from a snapshot"
            + " of its own slot, caught up, and handed over to the apply task; a table not copied streams from the"
            + " position where the flow found it, without its existing rows (none: stream only). With tasks.max=1 the"
            + " one task applies and copies in turn; with tasks.max=N, task 0 applies and N-1 copy tasks copy tables in"
            + " parallel, on every worker of the cluster.";
    private static final String TABLE_SYNC_COPY_DEFAULT = "all";

    public static final String COPY_CONNECTIONS_CONFIG = "copy.connections.per.table";
    private static final String COPY_CONNECTIONS_DOC = "Connections one copy task reads a table with, all in the"
            + " same exported snapshot, each COPYing a range of the table's pages (ctid ranges). More than 1 helps"
            + " when the server, not the task, limits the copy.";
    private static final int COPY_CONNECTIONS_DEFAULT = 1;

    public static final String TABLE_RETRY_DELAY_MS_CONFIG = "table.retry.delay.ms";
    private static final String TABLE_RETRY_DELAY_MS_DOC = "How long a table whose copy failed waits before a copy"
            + " task tries it again.";
    private static final long TABLE_RETRY_DELAY_MS_DEFAULT = 10_000L;

    public static final String COPY_LEASE_MS_CONFIG = "copy.lease.ms";
    private static final String COPY_LEASE_MS_DOC = "How long a copy task's hold on the table it copies lasts without"
            + " renewal (renewed every third of it while the copy runs). When a worker dies in the middle of a copy,"
            + " another copy task starts the table over after at most this long.";
    private static final long COPY_LEASE_MS_DEFAULT = 30_000L;

    public static final String MAX_TABLE_RETRIES_CONFIG = "max.table.retries";
    private static final String MAX_TABLE_RETRIES_DOC = "Copy attempts of one table after its first failure; after"
            + " the last one the table stays errored with its reason (other tables carry on). Only failed attempts"
            + " count (a copy interrupted by a task stop, a rebalance or a lost lease does not), and the count starts"
            + " again when the table reaches ready.";
    private static final int MAX_TABLE_RETRIES_DEFAULT = 5;

    public static final String BATCH_ROWS_CONFIG = "batch.rows";
    private static final String BATCH_ROWS_DOC = "Most rows of one table in one batch. A table's batch is its rows of"
            + " one transaction; a transaction with more rows of a table is cut into batches of this size.";
    private static final int BATCH_ROWS_DEFAULT = 10_000;

    public static final String RECORD_FORMAT_CONFIG = "record.format";
    private static final String RECORD_FORMAT_DOC = "How rows travel through Kafka. rows (the default): one record per row,"
            + " its value a Struct that any converter, SMT and consumer reads. blocks: for flows whose only consumer is the"
            + " tablecdc stage sink, one record per block of rows of one table and batch, its value the rows in tablecdc's"
            + " binary block form (schema BYTES) and its headers the batch's; set value.converter="
            + "org.apache.kafka.connect.converters.ByteArrayConverter on this connector so that no converter touches the"
            + " rows. The sink unpacks the blocks into the same rows. SMTs and other consumers see blocks, not rows.";
    private static final String RECORD_FORMAT_DEFAULT = "rows";

    public static final String RECORD_BLOCK_BYTES_CONFIG = "record.block.bytes";
    private static final String RECORD_BLOCK_BYTES_DOC = "With record.format=blocks: a block record is closed once its"
            + " rows take this many bytes (a row larger than that makes a block of its own). Keep it well below the"
            + " producer's max.request.size and the topic's max.message.bytes (1 MiB by default).";
    private static final int RECORD_BLOCK_BYTES_DEFAULT = 262_144;

    public static final String MAX_UNNORMALIZED_BATCHES_CONFIG = "max.unnormalized.batches";
    private static final String MAX_UNNORMALIZED_BATCHES_DOC = "How many batches a table may have synced but not yet"
            + " normalized (the same setting as the BigQuery source's): a copy task whose table's batches reach it pauses"
            + " at a batch boundary (paused_reason normalize_buffer_full), keeping its copy transaction and snapshot"
            + " open (for at most copy.pause.max.ms) and its lease renewed, and goes on once the sink has loaded enough"
            + " of them into ClickHouse. 1 sends"
            + " the next batch only once the previous one is in ClickHouse. A ready (streamed) table that reaches it is"
            + " detached from the flow's shared slot once the sink has loaded none of its batches for detach.after.ms"
            + " (see detach.max.tables), so that it holds back no other table. A copy's catch-up is never paused. Not the sink's normalize.buffer.batches, which counts"
            + " staged batches inside the sink.";
    private static final int MAX_UNNORMALIZED_BATCHES_DEFAULT = 100;

    public static final String COPY_PAUSE_MAX_MS_CONFIG = "copy.pause.max.ms";
    private static final String COPY_PAUSE_MAX_MS_DOC = "How long a copy may stay paused for the sink"
            + " (max.unnormalized.batches) while it holds its snapshot. A paused copy keeps its COPY transaction, its"
            + " snapshot and its temporary replication slot open, which holds back VACUUM for the whole source database"
            + " and keeps WAL. Past this long it gives the attempt up: it ends its transactions and drops its temporary"
            + " slot, keeps its claim on the table (paused_reason copy_snapshot_released), and copies the table again"
            + " from a new snapshot once the sink has loaded every batch it sent; it holds nothing on the source"
            + " meanwhile. The rows it had read are read again.";
    private static final long COPY_PAUSE_MAX_MS_DEFAULT = 600_000L;

    public static final String DETACH_MAX_TABLES_CONFIG = "detach.max.tables";
    private static final String DETACH_MAX_TABLES_DOC = "How many tables of the flow may be detached from its shared"
            + " slot at once. A ready table whose batches synced but not yet normalized stay at or above"
            + " max.unnormalized.batches for detach.after.ms while the sink loads none of them gets a private replication slot and a marker in the WAL; the apply task stops sending its changes at the"
            + " marker (the table is lagging), so the shared slot's position no longer waits for it. Once the sink has"
            + " loaded all of its batches, a copy task streams its changes from the private slot, hands it back at a new"
            + " marker (as after a copy) and drops the slot. Each detached table's slot keeps WAL from its marker on."
            + " 0 never detaches a table.";
    private static final int DETACH_MAX_TABLES_DEFAULT = 4;

    public static final String DETACH_AFTER_MS_CONFIG = "detach.after.ms";
    private static final String DETACH_AFTER_MS_DOC = "How long a ready table must have stayed at or above"
            + " max.unnormalized.batches, with none of its batches loaded into ClickHouse meanwhile, before it is"
            + " detached (see detach.max.tables). The apply task makes a batch of a busy table at every poll, so a"
            + " healthy one may pass max.unnormalized.batches between two loads of the sink; it is detached only when"
            + " the sink stops loading it.";
    private static final long DETACH_AFTER_MS_DEFAULT = 60_000L;

    public static final String DETACH_MAX_RETAINED_WAL_BYTES_CONFIG = "detach.max.retained.wal.bytes";
    private static final String DETACH_MAX_RETAINED_WAL_BYTES_DOC = "Most WAL a detached table's private slot may keep"
            + " (the server's current WAL position minus the slot's restart position, checked every 10 s). Past it, or"
            + " when the server invalidates the slot (max_slot_wal_keep_size), the slot is dropped and the table is"
            + " copied again from scratch (a table not copied, see table.sync.copy, is marked errored instead): no change"
            + " is skipped.";
    private static final long DETACH_MAX_RETAINED_WAL_BYTES_DEFAULT = 10L * 1024 * 1024 * 1024;

    public static final String HOLD_MAX_BYTES_CONFIG = "hold.max.bytes";
    private static final String HOLD_MAX_BYTES_DOC = "Most bytes of changes (as received from the server) the apply"
            + " task keeps for tables being handed over, whose copy tasks are still sending their last rows. Past it"
            + " (or past 20 x batch.rows held changes) the task stops reading the slot, also in the middle of a"
            + " transaction, until a held table is handed over; it keeps answering the server meanwhile, so"
            + " wal_sender_timeout does not end the connection. Other tables wait while reading is paused.";
    private static final long HOLD_MAX_BYTES_DEFAULT = 64L * 1024 * 1024;

    public static final String HEARTBEAT_INTERVAL_MS_CONFIG = "heartbeat.interval.ms";
    private static final String HEARTBEAT_INTERVAL_MS_DOC = "While no change arrives, how often the task records the"
            + " server's position as the flow's offset (a record on heartbeat.topic), so that the slot is confirmed"
            + " forward and an idle database does not keep WAL forever.";
    private static final long HEARTBEAT_INTERVAL_MS_DEFAULT = 10_000L;

    public static final String HEARTBEAT_TOPIC_CONFIG = "heartbeat.topic";
    private static final String HEARTBEAT_TOPIC_DOC = "Topic of the flow's position records (key: flow, value: LSN)."
            + " They carry the {\"flow\", \"slot\"} offset; no sink should read this topic, so keep it outside the"
            + " sink's topics.regex.";
    private static final String HEARTBEAT_TOPIC_DEFAULT = "__tablecdc_heartbeat";

    public static final String TOPIC_PREFIX_CONFIG = "topic.prefix";
    private static final String TOPIC_PREFIX_DOC = "Each table goes to the topic <topic.prefix>.<schema.table>. A table"
            + " whose name would not make a valid Kafka topic (characters other than letters, digits, '.', '_' and"
            + " '-', or more than 249 characters in all) goes to <topic.prefix>.<its name with every other character"
            + " as '_', cut to fit>_<first 12 hex digits of the SHA-256 of schema.table>. Set"
            + " topic.creation.default.partitions=1 and topic.creation.default.replication.factor so that Connect"
            + " creates each topic with one partition.";

    public static final String ARRAY_TEXT_COLUMNS_CONFIG = "array.text.columns";
    private static final String ARRAY_TEXT_COLUMNS_DOC = "Array columns carried as the server's array text (a STRING,"
            + " e.g. {{1,2},{3,4}}, {\"a b\",NULL}) instead of an ARRAY of their element type: the way to replicate a"
            + " column holding multi-dimensional arrays, which an ARRAY column refuses (the table stops with an error"
            + " naming table, column and this setting). Entries <schema.table>.<column>, <schema.table>.* for every"
            + " array column of a table, or * for all. Decides the column's schema when the table's relation is read;"
            + " changing it for a table already in ClickHouse is an incompatible change there.";

    public static final ConfigDef CONFIG_DEF = configDef();

    private final CopyMode copyMode;

    /** What {@code table.sync.copy} asks for. */
    public enum CopyMode { ALL, NONE, ONLY, EXCEPT }

    public PgPipelineConfig(Map<String, String> props) {
        super(CONFIG_DEF, props);
        this.copyMode = parseCopyMode(getString(TABLE_SYNC_COPY_CONFIG));
    }

    private static ConfigDef configDef() {
        ConfigDef def = new ConfigDef();
        int order = 0;
        def.define(HOST_CONFIG, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(), Importance.HIGH,
                        HOST_DOC, CONNECTION_GROUP, ++order, Width.MEDIUM, "Host")
                .define(PORT_CONFIG, Type.INT, PORT_DEFAULT, ConfigDef.Range.between(1, 65535), Importance.HIGH, PORT_DOC,
                        CONNECTION_GROUP, ++order, Width.SHORT, "Port")
                .define(DATABASE_CONFIG, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                        Importance.HIGH, DATABASE_DOC, CONNECTION_GROUP, ++order, Width.MEDIUM, "Database")
                .define(USER_CONFIG, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(), Importance.HIGH,
                        USER_DOC, CONNECTION_GROUP, ++order, Width.MEDIUM, "User")
                .define(PASSWORD_CONFIG, Type.PASSWORD, null, Importance.HIGH, PASSWORD_DOC, CONNECTION_GROUP, ++order,
                        Width.MEDIUM, "Password")
                .define(SSLMODE_CONFIG, Type.STRING, SSLMODE_DEFAULT,
                        ConfigDef.ValidString.in("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
                        Importance.MEDIUM, SSLMODE_DOC, CONNECTION_GROUP, ++order, Width.SHORT, "SSL mode");
        order = 0;
        def.define(PUBLICATION_CONFIG, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                        Importance.HIGH, PUBLICATION_DOC, REPLICATION_GROUP, ++order, Width.MEDIUM, "Publication")
                .define(SLOT_PREFIX_CONFIG, Type.STRING, SLOT_PREFIX_DEFAULT, new SlotPrefix(), Importance.MEDIUM,
                        SLOT_PREFIX_DOC, REPLICATION_GROUP, ++order, Width.MEDIUM, "Slot prefix")
                .define(INVALIDATED_SLOT_BEHAVIOR_CONFIG, Type.STRING, INVALIDATED_SLOT_BEHAVIOR_DEFAULT,
                        ConfigDef.ValidString.in("reject", "recreate"), Importance.MEDIUM,
                        INVALIDATED_SLOT_BEHAVIOR_DOC, REPLICATION_GROUP, ++order, Width.SHORT,
                        "Invalidated slot behavior")
                .define(SLOT_FAILOVER_CONFIG, Type.BOOLEAN, false, Importance.MEDIUM, SLOT_FAILOVER_DOC,
                        REPLICATION_GROUP, ++order, Width.SHORT, "Failover slot")
                .define(TABLE_SYNC_COPY_CONFIG, Type.STRING, TABLE_SYNC_COPY_DEFAULT, new CopySpec(), Importance.HIGH,
                        TABLE_SYNC_COPY_DOC, REPLICATION_GROUP, ++order, Width.MEDIUM, "Initial copy")
                .define(COPY_CONNECTIONS_CONFIG, Type.INT, COPY_CONNECTIONS_DEFAULT, ConfigDef.Range.between(1, 16),
                        Importance.LOW, COPY_CONNECTIONS_DOC, REPLICATION_GROUP, ++order, Width.SHORT,
                        "Connections per copied table")
                .define(TABLE_RETRY_DELAY_MS_CONFIG, Type.LONG, TABLE_RETRY_DELAY_MS_DEFAULT,
                        ConfigDef.Range.between(0L, 86_400_000L), Importance.LOW, TABLE_RETRY_DELAY_MS_DOC,
                        REPLICATION_GROUP, ++order, Width.SHORT, "Table retry delay (ms)")
                .define(COPY_LEASE_MS_CONFIG, Type.LONG, COPY_LEASE_MS_DEFAULT,
                        ConfigDef.Range.between(3_000L, 3_600_000L), Importance.LOW, COPY_LEASE_MS_DOC,
                        REPLICATION_GROUP, ++order, Width.SHORT, "Copy lease (ms)")
                .define(MAX_TABLE_RETRIES_CONFIG, Type.INT, MAX_TABLE_RETRIES_DEFAULT, ConfigDef.Range.between(0, 1000),
                        Importance.LOW, MAX_TABLE_RETRIES_DOC, REPLICATION_GROUP, ++order, Width.SHORT,
                        "Max table retries")
                .define(BATCH_ROWS_CONFIG, Type.INT, BATCH_ROWS_DEFAULT, ConfigDef.Range.between(1, 1_000_000),
                        Importance.MEDIUM, BATCH_ROWS_DOC, REPLICATION_GROUP, ++order, Width.SHORT, "Batch rows")
                .define(RECORD_FORMAT_CONFIG, Type.STRING, RECORD_FORMAT_DEFAULT, ConfigDef.ValidString.in("rows", "blocks"),
                        Importance.MEDIUM, RECORD_FORMAT_DOC, REPLICATION_GROUP, ++order, Width.SHORT, "Record format")
                .define(RECORD_BLOCK_BYTES_CONFIG, Type.INT, RECORD_BLOCK_BYTES_DEFAULT,
                        ConfigDef.Range.between(1024, 16_777_216), Importance.LOW, RECORD_BLOCK_BYTES_DOC,
                        REPLICATION_GROUP, ++order, Width.SHORT, "Block bytes")
                .define(MAX_UNNORMALIZED_BATCHES_CONFIG, Type.INT, MAX_UNNORMALIZED_BATCHES_DEFAULT,
                        ConfigDef.Range.between(1, 1_000_000), Importance.MEDIUM, MAX_UNNORMALIZED_BATCHES_DOC,
                        REPLICATION_GROUP, ++order, Width.SHORT, "Max unnormalized batches")
                .define(COPY_PAUSE_MAX_MS_CONFIG, Type.LONG, COPY_PAUSE_MAX_MS_DEFAULT,
                        ConfigDef.Range.between(1_000L, 604_800_000L), Importance.LOW, COPY_PAUSE_MAX_MS_DOC,
                        REPLICATION_GROUP, ++order, Width.SHORT, "Copy pause bound (ms)")
                .define(DETACH_MAX_TABLES_CONFIG, Type.INT, DETACH_MAX_TABLES_DEFAULT,
                        ConfigDef.Range.between(0, 10_000), Importance.MEDIUM, DETACH_MAX_TABLES_DOC,
                        REPLICATION_GROUP, ++order, Width.SHORT, "Max detached tables")
                .define(DETACH_AFTER_MS_CONFIG, Type.LONG, DETACH_AFTER_MS_DEFAULT,
                        ConfigDef.Range.between(0L, 86_400_000L), Importance.LOW, DETACH_AFTER_MS_DOC,
                        REPLICATION_GROUP, ++order, Width.SHORT, "Detach after (ms)")
                .define(DETACH_MAX_RETAINED_WAL_BYTES_CONFIG, Type.LONG, DETACH_MAX_RETAINED_WAL_BYTES_DEFAULT,
                        ConfigDef.Range.atLeast(1_048_576L), Importance.LOW, DETACH_MAX_RETAINED_WAL_BYTES_DOC,
                        REPLICATION_GROUP, ++order, Width.SHORT, "Max WAL kept for a detached table")
                .define(HOLD_MAX_BYTES_CONFIG, Type.LONG, HOLD_MAX_BYTES_DEFAULT,
                        ConfigDef.Range.between(65_536L, 68_719_476_736L), Importance.LOW, HOLD_MAX_BYTES_DOC,
                        REPLICATION_GROUP, ++order, Width.SHORT, "Held bytes limit")
                .define(HEARTBEAT_INTERVAL_MS_CONFIG, Type.LONG, HEARTBEAT_INTERVAL_MS_DEFAULT,
                        ConfigDef.Range.between(100L, 3_600_000L), Importance.LOW, HEARTBEAT_INTERVAL_MS_DOC,
                        REPLICATION_GROUP, ++order, Width.SHORT, "Heartbeat interval (ms)")
                .define(HEARTBEAT_TOPIC_CONFIG, Type.STRING, HEARTBEAT_TOPIC_DEFAULT, new TopicName(), Importance.LOW,
                        HEARTBEAT_TOPIC_DOC, REPLICATION_GROUP, ++order, Width.MEDIUM, "Heartbeat topic")
                .define(TOPIC_PREFIX_CONFIG, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new TopicName(), Importance.HIGH,
                        TOPIC_PREFIX_DOC, REPLICATION_GROUP, ++order, Width.MEDIUM, "Topic prefix")
                .define(ARRAY_TEXT_COLUMNS_CONFIG, Type.LIST, "", Importance.LOW, ARRAY_TEXT_COLUMNS_DOC,
                        REPLICATION_GROUP, ++order, Width.LONG, "Arrays as text");
        return CatalogConfig.addTo(def);
    }

    /** {@code record.format=blocks}: the most bytes of rows per block record; 0 for a record per row. */
    public int blockBytes() {
        return "blocks".equals(getString(RECORD_FORMAT_CONFIG)) ? getInt(RECORD_BLOCK_BYTES_CONFIG) : 0;
    }

    public String host() {
        return getString(HOST_CONFIG).trim();
    }

    public int port() {
        return getInt(PORT_CONFIG);
    }

    public String database() {
        return getString(DATABASE_CONFIG).trim();
    }

    public String user() {
        return getString(USER_CONFIG).trim();
    }

    public Password password() {
        return getPassword(PASSWORD_CONFIG);
    }

    public String sslmode() {
        return getString(SSLMODE_CONFIG);
    }

    public String publication() {
        return getString(PUBLICATION_CONFIG).trim();
    }

    public String slotPrefix() {
        return getString(SLOT_PREFIX_CONFIG).trim();
    }

    /** Whether a lost main slot is replaced (and every table copied again) rather than refused. */
    public boolean recreateInvalidatedSlot() {
        return "recreate".equals(getString(INVALIDATED_SLOT_BEHAVIOR_CONFIG));
    }

    public boolean slotFailover() {
        return getBoolean(SLOT_FAILOVER_CONFIG);
    }

    public CopyMode copyMode() {
        return copyMode;
    }

    /** Whether {@code table.sync.copy} asks for {@code table} ({@code schema.table}) to be copied. */
    public boolean copies(String table) {
        return switch (copyMode) {
            case ALL -> true;
            case NONE -> false;
            case ONLY -> copyList().contains(table);
            case EXCEPT -> !copyList().contains(table);
        };
    }

    /** The only tables copied ({@code only:…}), or null when the flow copies by another rule. */
    public Set<String> copyOnly() {
        return switch (copyMode) {
            case ONLY -> copyList();
            case NONE -> Set.of();
            default -> null;
        };
    }

    /** The tables never copied ({@code except:…}); empty otherwise. */
    public Set<String> copyExcept() {
        return copyMode == CopyMode.EXCEPT ? copyList() : Set.of();
    }

    private Set<String> copyList() {
        String value = getString(TABLE_SYNC_COPY_CONFIG).trim();
        String list = value.substring(value.indexOf(':') + 1);
        return Arrays.stream(list.split(",")).map(String::trim).filter(t -> !t.isEmpty()).collect(Collectors.toSet());
    }

    public int copyConnectionsPerTable() {
        return getInt(COPY_CONNECTIONS_CONFIG);
    }

    public long tableRetryDelayMs() {
        return getLong(TABLE_RETRY_DELAY_MS_CONFIG);
    }

    public java.time.Duration copyLease() {
        return java.time.Duration.ofMillis(getLong(COPY_LEASE_MS_CONFIG));
    }

    public int maxTableRetries() {
        return getInt(MAX_TABLE_RETRIES_CONFIG);
    }

    /**
     * Whether array column {@code column} of {@code table} ({@code schema.table}) is listed in
     * {@value #ARRAY_TEXT_COLUMNS_CONFIG} (exactly, through {@code <schema.table>.*}, or through {@code *}).
     */
    public boolean arrayText(String table, String column) {
        for (String entry : getList(ARRAY_TEXT_COLUMNS_CONFIG)) {
            String e = entry.trim();
            if (e.equals("*") || e.equals(table + ".*") || e.equals(table + "." + column)) {
                return true;
            }
        }
        return false;
    }

    public int batchRows() {
        return getInt(BATCH_ROWS_CONFIG);
    }

    /** {@code max.unnormalized.batches}: a copying table's synced-but-not-normalized batches that pause its copy. */
    /** How long a copy may stay paused for the sink holding its snapshot before it gives the attempt up. */
    public java.time.Duration copyPauseMax() {
        return java.time.Duration.ofMillis(getLong(COPY_PAUSE_MAX_MS_CONFIG));
    }

    public int maxUnnormalizedBatches() {
        return getInt(MAX_UNNORMALIZED_BATCHES_CONFIG);
    }

    public int detachMaxTables() {
        return getInt(DETACH_MAX_TABLES_CONFIG);
    }

    public long detachAfterMs() {
        return getLong(DETACH_AFTER_MS_CONFIG);
    }

    public long detachMaxRetainedWalBytes() {
        return getLong(DETACH_MAX_RETAINED_WAL_BYTES_CONFIG);
    }

    public long holdMaxBytes() {
        return getLong(HOLD_MAX_BYTES_CONFIG);
    }

    public long heartbeatIntervalMs() {
        return getLong(HEARTBEAT_INTERVAL_MS_CONFIG);
    }

    public String heartbeatTopic() {
        return getString(HEARTBEAT_TOPIC_CONFIG).trim();
    }

    public String topicPrefix() {
        return getString(TOPIC_PREFIX_CONFIG).trim();
    }

    /** The topic of {@code table} ({@code schema.table}): {@code <topic.prefix>.<schema.table>}, see {@link TopicNames}. */
    public String topic(String table) {
        return TopicNames.topic(topicPrefix(), table);
    }

    public CatalogSettings catalog() {
        return CatalogConfig.settings(this);
    }

    /**
     * The JDBC URL of the source database (no credentials in it). The database name is URL-encoded (the driver decodes
     * it), so that a name with {@code /}, {@code ?}, {@code &}, {@code %}, spaces or non-ASCII characters reaches the
     * server as it is.
     */
    public String jdbcUrl() {
        return "jdbc:postgresql://" + host() + ":" + port() + "/"
                + URLEncoder.encode(database(), StandardCharsets.UTF_8);
    }

    /**
     * Connection properties for the source: user, password, sslmode and the application name; with
     * {@code replication} also what a logical replication connection needs.
     */
    public Properties connectionProperties(String applicationName, boolean replication) {
        Properties props = new Properties();
        props.setProperty("user", user());
        if (password() != null) {
            props.setProperty("password", password().value());
        }
        props.setProperty("sslmode", sslmode());
        props.setProperty("ApplicationName", applicationName.length() > 63 ? applicationName.substring(0, 63) : applicationName);
        props.setProperty("connectTimeout", "10");
        if (replication) {
            props.setProperty("replication", "database");
            props.setProperty("assumeMinServerVersion", "10");
            props.setProperty("preferQueryMode", "simple");
        }
        return props;
    }

    static CopyMode parseCopyMode(String text) {
        String value = text == null ? "" : text.trim().toLowerCase(Locale.ROOT);
        if (value.equals("all")) {
            return CopyMode.ALL;
        }
        if (value.equals("none")) {
            return CopyMode.NONE;
        }
        if (value.startsWith("only:") && value.length() > 5) {
            return CopyMode.ONLY;
        }
        if (value.startsWith("except:") && value.length() > 7) {
            return CopyMode.EXCEPT;
        }
        throw new ConfigException(TABLE_SYNC_COPY_CONFIG, text, "must be all, none, only:<schema.table>,… or except:<schema.table>,…");
    }

    static final class CopySpec implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            parseCopyMode(value == null ? null : value.toString());
        }

        @Override
        public String toString() {
            return "all, none, only:<schema.table>,…, except:<schema.table>,…";
        }
    }

    static final class SlotPrefix implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            String text = value == null ? "" : value.toString().trim();
            // a slot name is at most 63 characters of [a-z0-9_]; the random suffix takes 17
            if (!text.matches("[a-z0-9_]{1,40}")) {
                throw new ConfigException(name, value, "must be 1 to 40 lower-case letters, digits or _");
            }
        }

        @Override
        public String toString() {
            return "1 to 40 of [a-z0-9_]";
        }
    }

    static final class TopicName implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            String text = value == null ? "" : value.toString().trim();
            if (!text.matches("[A-Za-z0-9._-]{1,100}")) {
                throw new ConfigException(name, value, "must be 1 to 100 of the characters a Kafka topic may hold (letters, digits, . _ -)");
            }
        }

        @Override
        public String toString() {
            return "1 to 100 of [A-Za-z0-9._-]";
        }
    }
}
