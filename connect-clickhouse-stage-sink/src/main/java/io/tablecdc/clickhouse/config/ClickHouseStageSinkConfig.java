package io.tablecdc.clickhouse.config;

import java.net.URI;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.common.config.ConfigDef.Width;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;

import io.tablecdc.clickhouse.destination.Cluster;
import io.tablecdc.catalog.CatalogConfig;
import io.tablecdc.common.ConfigValidation;

/**
 * The configuration of the ClickHouse stage sink: one {@link ConfigDef}, read only through typed getters.
 *
 * <p>Why it is long: it is the sink's every key with its documentation (the source of docs/config), its recommenders
 * and its getter.
 */
public final class ClickHouseStageSinkConfig extends AbstractConfig {
    private static final String CLICKHOUSE_GROUP = "ClickHouse";
    private static final String CLUSTER_GROUP = "ClickHouse cluster";
    private static final String STAGE_GROUP = "Stage";
    private static final String NORMALIZE_GROUP = "Normalize";
    private static final String TABLES_GROUP = "Tables";

    public static final String CLICKHOUSE_URL_CONFIG = "clickhouse.url";
    private static final String CLICKHOUSE_URL_DOC = "ClickHouse HTTP interface, e.g. http://clickhouse:8123 or https://host:8443.";

    public static final String CLICKHOUSE_USER_CONFIG = "clickhouse.user";
    private static final String CLICKHOUSE_USER_DOC = "ClickHouse user.";
    private static final String CLICKHOUSE_USER_DEFAULT = "default";

    public static final String CLICKHOUSE_PASSWORD_CONFIG = "clickhouse.password";
    private static final String CLICKHOUSE_PASSWORD_DOC = "Password of clickhouse.user. Never logged; use a config provider (${file:…}, ${env:…}).";

    public static final String CLICKHOUSE_DATABASE_CONFIG = "clickhouse.database";
    private static final String CLICKHOUSE_DATABASE_DOC = "Database of the final tables; it must exist.";
    private static final String CLICKHOUSE_DATABASE_DEFAULT = "default";

    public static final String CLICKHOUSE_TIMEOUT_MS_CONFIG = "clickhouse.timeout.ms";
    private static final String CLICKHOUSE_TIMEOUT_MS_DOC = "How long one ClickHouse statement (DDL or a batch load) may take before it counts as failed and is retried; also the longest the sink waits for a byte from ClickHouse on an open connection (a server that froze or a network cut that closes nothing ends no sooner).";
    private static final long CLICKHOUSE_TIMEOUT_MS_DEFAULT = 300_000L;

    public static final String STAGE_URI_CONFIG = "stage.uri";
    private static final String STAGE_URI_DOC = "Where stage files wait to be normalized: file:///dir (ClickHouse must see the same path"
            + " in pull mode), s3://bucket/prefix (AWS or any S3-compatible store), gs://bucket/prefix (Google Cloud Storage"
            + " through its S3-compatible XML API with HMAC keys).";

    public static final String STAGE_GCS_ENDPOINT_CONFIG = "stage.gcs.endpoint";
    private static final String STAGE_GCS_ENDPOINT_DOC = "Endpoint of GCS's XML API for gs:// stages; ClickHouse's gcs() must reach the same endpoint.";

    public static final String STAGE_GCS_HMAC_ACCESS_ID_CONFIG = "stage.gcs.hmac.access.id";
    private static final String STAGE_GCS_HMAC_ACCESS_ID_DOC = "Access id of a GCS HMAC key (of a service account that may write and delete in the bucket).";

    public static final String STAGE_GCS_HMAC_SECRET_CONFIG = "stage.gcs.hmac.secret";
    private static final String STAGE_GCS_HMAC_SECRET_DOC = "Secret of the GCS HMAC key. Never logged; passed to ClickHouse as a query parameter, never in SQL text.";

    public static final String STAGE_S3_ENDPOINT_CONFIG = "stage.s3.endpoint";
    private static final String STAGE_S3_ENDPOINT_DOC = "Endpoint of an S3-compatible store (http://host:port); empty for AWS. ClickHouse must reach the same endpoint in pull mode.";

    public static final String STAGE_S3_REGION_CONFIG = "stage.s3.region";
    private static final String STAGE_S3_REGION_DOC = "Region of the stage bucket.";

    public static final String STAGE_S3_ACCESS_KEY_CONFIG = "stage.s3.access.key";
    private static final String STAGE_S3_ACCESS_KEY_DOC = "Access key for the stage bucket; empty to use the default AWS credential chain"
            + " (then ClickHouse needs its own access to the bucket in pull mode).";

    public static final String STAGE_S3_SECRET_KEY_CONFIG = "stage.s3.secret.key";
    private static final String STAGE_S3_SECRET_KEY_DOC = "Secret key for the stage bucket. Never logged; passed to ClickHouse as a query parameter, never in SQL text.";

    public static final String STAGE_LOCAL_DIR_CONFIG = "stage.local.dir";
    private static final String STAGE_LOCAL_DIR_DOC = "Local folder where stage files are written before upload; empty for a folder under java.io.tmpdir.";

    public static final String STAGE_MAX_FILE_BYTES_CONFIG = "stage.max.file.bytes";
    private static final String STAGE_MAX_FILE_BYTES_DOC = "A batch's stage is split into files of about this size.";
    private static final long STAGE_MAX_FILE_BYTES_DEFAULT = 128L * 1024 * 1024;

    public static final String AVRO_CODEC_CONFIG = "avro.codec";
    private static final String AVRO_CODEC_DOC = "Compression of stage files.";
    private static final String AVRO_CODEC_DEFAULT = "zstandard";

    public static final String NORMALIZE_MODE_CONFIG = "normalize.mode";
    private static final String NORMALIZE_MODE_DOC = "pull: ClickHouse reads each stage file itself (INSERT … SELECT FROM s3()/file());"
            + " push: the sink streams the file as INSERT … FORMAT Avro.";
    private static final String NORMALIZE_MODE_DEFAULT = "pull";

    public static final String NORMALIZE_PARALLELISM_CONFIG = "normalize.parallelism";
    private static final String NORMALIZE_PARALLELISM_DOC = "How many tables one task normalizes at once. Separate from staging, so a slow"
            + " ClickHouse never stops records from being staged.";
    private static final int NORMALIZE_PARALLELISM_DEFAULT = 4;

    public static final String NORMALIZE_BUFFER_BATCHES_CONFIG = "normalize.buffer.batches";
    private static final String NORMALIZE_BUFFER_BATCHES_DOC = "How many staged batches a table may wait with before the sink pauses that table's"
            + " partitions (other tables keep flowing); resumed when its normalize catches up.";
    private static final int NORMALIZE_BUFFER_BATCHES_DEFAULT = 24;

    public static final String NORMALIZE_BATCHES_PER_LOAD_CONFIG = "normalize.batches.per.load";
    private static final String NORMALIZE_BATCHES_PER_LOAD_DOC = "Most staged batches of one table loaded by one INSERT when"
            + " several wait at once (pull mode, tables with a key; a group takes no batch more once it holds a million rows)."
            + " 1 loads every batch on its own.";
    private static final int NORMALIZE_BATCHES_PER_LOAD_DEFAULT = 100;

    public static final String NORMALIZE_BACKOFF_INITIAL_MS_CONFIG = "normalize.backoff.initial.ms";
    private static final String NORMALIZE_BACKOFF_INITIAL_MS_DOC = "First wait after a table's normalize failed; doubles per failure up to normalize.backoff.max.ms. A few seconds, so that a short ClickHouse or object store outage costs each table little; a table that keeps failing is soon retried only every few minutes.";
    private static final long NORMALIZE_BACKOFF_INITIAL_MS_DEFAULT = 5_000L;

    public static final String NORMALIZE_LEASE_MS_CONFIG = "normalize.lease.ms";
    private static final String NORMALIZE_LEASE_MS_DOC = "How long a task's hold on loading one table into ClickHouse lasts"
            + " without renewal (renewed every third of it while the task loads). One task loads a table at a time; when a"
            + " worker dies while loading, another task takes the table over after at most this long.";
    private static final long NORMALIZE_LEASE_MS_DEFAULT = 30_000L;

    public static final String NORMALIZE_BACKOFF_MAX_MS_CONFIG = "normalize.backoff.max.ms";
    private static final String NORMALIZE_BACKOFF_MAX_MS_DOC = "Longest wait between a table's normalize retries.";
    private static final long NORMALIZE_BACKOFF_MAX_MS_DEFAULT = 300_000L;

    public static final String BATCH_MAX_ROWS_CONFIG = "batch.max.rows";
    private static final String BATCH_MAX_ROWS_DOC = "For records without tablecdc headers (other producers): a batch closes at this many rows.";
    private static final int BATCH_MAX_ROWS_DEFAULT = 100_000;

    public static final String BATCH_MAX_MS_CONFIG = "batch.max.ms";
    private static final String BATCH_MAX_MS_DOC = "For records without tablecdc headers: a batch closes this long after its first record.";
    private static final long BATCH_MAX_MS_DEFAULT = 10_000L;

    public static final String TABLE_NAME_FORMAT_CONFIG = "table.name.format";
    private static final String TABLE_NAME_FORMAT_DOC = "Name of a table's ClickHouse table; ${topic} is the Kafka topic the"
            + " table's records come from with every character other than letters, digits and _ replaced by _, ${table} the"
            + " source table name likewise. The default, ${topic}, gives the same table name from two flows (which write to"
            + " topics with different prefixes) two ClickHouse tables; ${table} drops the prefix, and two source tables that"
            + " then map to one ClickHouse table are refused, not merged.";
    private static final String TABLE_NAME_FORMAT_DEFAULT = "${topic}";

    public static final String TABLE_PER_TOPIC_CONFIG = "table.per.topic";
    private static final String TABLE_PER_TOPIC_DOC = "Bind each topic to one table: the first table (tablecdc.flow and"
            + " tablecdc.table headers) the sink registers for a topic is the only one it takes from that topic; records naming"
            + " another table go to the errant record reporter. Limits what a producer on one topic can write to or truncate.";

    public static final String TABLE_AUTO_CREATE_CONFIG = "table.auto.create";
    private static final String TABLE_AUTO_CREATE_DOC = "Create missing final tables (ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted)"
            + " ordered by the key) and their <table>_current views.";

    public static final String SCHEMA_EVOLUTION_CONFIG = "schema.evolution";
    private static final String SCHEMA_EVOLUTION_DOC = "add_columns: new optional columns are added to the final table; none: a new"
            + " column stops that table with an error. Other changes always stop only that table.";
    private static final String SCHEMA_EVOLUTION_DEFAULT = "add_columns";

    public static final String TEMPORAL_INTEGER_COLUMNS_CONFIG = "temporal.integer.columns";
    private static final String TEMPORAL_INTEGER_COLUMNS_DOC = "Date and timestamp columns stored as integers, exactly: a date as"
            + " Int32 days since 1970-01-01, a timestamp as Int64 microseconds since 1970-01-01 00:00:00 UTC (a source's"
            + " infinity as the type's largest or smallest value). Entries <table>.<column> (the source table as in the"
            + " tablecdc.table header, e.g. public.events.created_at), <table>.* for every such column of a table, or * for"
            + " all. Other date and timestamp columns are Date32 and DateTime64(6, 'UTC'), which hold 1900-01-01 to 2299-12-31:"
            + " a value outside that range is stored at the nearest edge and counted (clamped_values in tablecdc-status, the"
            + " values-clamped-total metric), and refused in a key column. Applies when a table's ClickHouse table is"
            + " created; changing it for an existing table stops that table with an incompatible change.";

    public static final String DECIMAL_TEXT_COLUMNS_CONFIG = "decimal.text.columns";
    private static final String DECIMAL_TEXT_COLUMNS_DOC = "Decimal columns (and arrays of decimals) stored as String, exactly:"
            + " each value's plain text with the column's scale (12.50), and NaN, Infinity and -Infinity as such. Entries as"
            + " for temporal.integer.columns: <table>.<column>, <table>.* or *. Other decimal columns are Decimal(P, S): a"
            + " Postgres numeric(p,s) NaN, which a Decimal cannot hold, is stored as NULL and counted"
            + " (clamped_values in tablecdc-status, the values-clamped-total metric), and a value with more digits than the"
            + " column holds (a BigQuery BIGNUMERIC of 1E38 or more in Decimal(76, 38)) is refused to the errant record"
            + " reporter. Applies when a table's ClickHouse table is created; changing it for an existing table stops that"
            + " table with an incompatible change.";

    public static final String DEDUPLICATION_WINDOW_CONFIG = "clickhouse.deduplication.window";
    private static final String DEDUPLICATION_WINDOW_DOC = "non_replicated_deduplication_window of created tables"
            + " (replicated_deduplication_window on a cluster): how many recent loads ClickHouse remembers, so that"
            + " re-loading a stage file after a crash inserts nothing.";
    private static final int DEDUPLICATION_WINDOW_DEFAULT = 1000;

    public static final String CLUSTER_CONFIG = "clickhouse.cluster";
    private static final String CLUSTER_DOC = "Cluster (from the servers' remote_servers) on which final tables are created:"
            + " every DDL runs ON CLUSTER, tables are ReplicatedReplacingMergeTree (ReplicatedMergeTree without a key), and"
            + " loads carry clickhouse.insert.quorum. Empty: one server, plain ReplacingMergeTree.";

    public static final String REPLICATION_PATH_CONFIG = "clickhouse.replication.path";
    private static final String REPLICATION_PATH_DOC = "Keeper path of a replicated final table; ClickHouse expands the macros"
            + " ({shard} from each server's macros, {database} and {table} itself). Must name the table ({table} or {uuid}),"
            + " or every table would claim the same path. Used only with clickhouse.cluster.";
    private static final String REPLICATION_PATH_DEFAULT = "/clickhouse/tables/{shard}/{database}/{table}";

    public static final String REPLICA_NAME_CONFIG = "clickhouse.replication.replica";
    private static final String REPLICA_NAME_DOC = "Replica name of a replicated final table, usually the {replica} macro of each"
            + " server. Used only with clickhouse.cluster.";
    private static final String REPLICA_NAME_DEFAULT = "{replica}";

    public static final String DISTRIBUTED_TABLE_CONFIG = "clickhouse.distributed.table";
    private static final String DISTRIBUTED_TABLE_DOC = "With clickhouse.cluster: rows are stored in <table>_local on every shard and"
            + " <table> is a Distributed table over them, sharded by cityHash64 of the key (rand() without a key) so that every"
            + " version of a row lands on one shard; loads go through it synchronously (insert_distributed_sync=1). false:"
            + " <table> itself is the replicated table (one shard).";

    public static final String INSERT_QUORUM_CONFIG = "clickhouse.insert.quorum";
    private static final String INSERT_QUORUM_DOC = "insert_quorum of every load on a cluster: auto (a majority of the shard's"
            + " replicas), a number of replicas (2 or more), or off. A load returns only once the quorum wrote it and fails"
            + " otherwise (insert_quorum_parallel=0), so a batch never counts as normalized without it. Ignored without"
            + " clickhouse.cluster.";
    private static final String INSERT_QUORUM_DEFAULT = "auto";

    public static final String INSERT_QUORUM_TIMEOUT_MS_CONFIG = "clickhouse.insert.quorum.timeout.ms";
    private static final String INSERT_QUORUM_TIMEOUT_MS_DOC = "insert_quorum_timeout: how long a load waits for its quorum"
            + " before it fails (and the table's normalize retries).";
    private static final long INSERT_QUORUM_TIMEOUT_MS_DEFAULT = 600_000L;

    // the object store's keys show by the stage URI's scheme, the replication keys once a cluster is named
    private static final ConfigDef.Recommender S3_ONLY = ConfigValidation.visibleWhen(STAGE_URI_CONFIG,
            ConfigValidation.startsWithIgnoringCase("s3://"));
    private static final ConfigDef.Recommender GCS_ONLY = ConfigValidation.visibleWhen(STAGE_URI_CONFIG,
            ConfigValidation.startsWithIgnoringCase("gs://"));
    private static final ConfigDef.Recommender CLUSTER_ONLY = ConfigValidation.visibleWhen(CLUSTER_CONFIG,
            ConfigValidation.notBlank());

    public static final ConfigDef CONFIG_DEF = configDef();

    public ClickHouseStageSinkConfig(Map<String, String> props) {
        super(CONFIG_DEF, props);
        URI stage = stageUri();
        if (!"file".equals(stage.getScheme()) && !"s3".equals(stage.getScheme()) && !"gs".equals(stage.getScheme())) {
            throw new ConfigException(STAGE_URI_CONFIG, stage.toString(), "the scheme must be file://, s3:// or gs://");
        }
        if (getBoolean(DISTRIBUTED_TABLE_CONFIG) && getString(CLUSTER_CONFIG).isEmpty()) {
            throw new ConfigException(DISTRIBUTED_TABLE_CONFIG, true, "a Distributed table needs " + CLUSTER_CONFIG);
        }
    }

    private static ConfigDef configDef() {
        ConfigDef def = new ConfigDef();
        int order = 0;
        def.define(CLICKHOUSE_URL_CONFIG, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new HttpUrl(), Importance.HIGH, CLICKHOUSE_URL_DOC,
                CLICKHOUSE_GROUP, ++order, Width.LONG, "ClickHouse URL");
        def.define(CLICKHOUSE_USER_CONFIG, Type.STRING, CLICKHOUSE_USER_DEFAULT, Importance.HIGH, CLICKHOUSE_USER_DOC,
                CLICKHOUSE_GROUP, ++order, Width.SHORT, "ClickHouse user");
        def.define(CLICKHOUSE_PASSWORD_CONFIG, Type.PASSWORD, "", Importance.HIGH, CLICKHOUSE_PASSWORD_DOC,
                CLICKHOUSE_GROUP, ++order, Width.SHORT, "ClickHouse password");
        def.define(CLICKHOUSE_DATABASE_CONFIG, Type.STRING, CLICKHOUSE_DATABASE_DEFAULT, new ConfigDef.NonEmptyString(), Importance.HIGH,
                CLICKHOUSE_DATABASE_DOC, CLICKHOUSE_GROUP, ++order, Width.SHORT, "ClickHouse database");
        def.define(CLICKHOUSE_TIMEOUT_MS_CONFIG, Type.LONG, CLICKHOUSE_TIMEOUT_MS_DEFAULT, ConfigDef.Range.atLeast(1000), Importance.LOW,
                CLICKHOUSE_TIMEOUT_MS_DOC, CLICKHOUSE_GROUP, ++order, Width.SHORT, "ClickHouse timeout");
        def.define(DEDUPLICATION_WINDOW_CONFIG, Type.INT, DEDUPLICATION_WINDOW_DEFAULT, ConfigDef.Range.atLeast(1), Importance.LOW,
                DEDUPLICATION_WINDOW_DOC, CLICKHOUSE_GROUP, ++order, Width.SHORT, "Deduplication window");

        order = 0;
        def.define(CLUSTER_CONFIG, Type.STRING, "", new ClusterName(), Importance.MEDIUM, CLUSTER_DOC,
                CLUSTER_GROUP, ++order, Width.MEDIUM, "Cluster", List.of(REPLICATION_PATH_CONFIG, REPLICA_NAME_CONFIG,
                DISTRIBUTED_TABLE_CONFIG, INSERT_QUORUM_CONFIG, INSERT_QUORUM_TIMEOUT_MS_CONFIG));
        def.define(REPLICATION_PATH_CONFIG, Type.STRING, REPLICATION_PATH_DEFAULT, new ReplicationPath(), Importance.LOW,
                REPLICATION_PATH_DOC, CLUSTER_GROUP, ++order, Width.LONG, "Replication path", CLUSTER_ONLY);
        def.define(REPLICA_NAME_CONFIG, Type.STRING, REPLICA_NAME_DEFAULT, new ConfigDef.NonEmptyString(), Importance.LOW,
                REPLICA_NAME_DOC, CLUSTER_GROUP, ++order, Width.SHORT, "Replica name", CLUSTER_ONLY);
        def.define(DISTRIBUTED_TABLE_CONFIG, Type.BOOLEAN, false, Importance.MEDIUM, DISTRIBUTED_TABLE_DOC,
                CLUSTER_GROUP, ++order, Width.SHORT, "Distributed table", CLUSTER_ONLY);
        def.define(INSERT_QUORUM_CONFIG, Type.STRING, INSERT_QUORUM_DEFAULT, new InsertQuorum(), Importance.MEDIUM,
                INSERT_QUORUM_DOC, CLUSTER_GROUP, ++order, Width.SHORT, "Insert quorum", CLUSTER_ONLY);
        def.define(INSERT_QUORUM_TIMEOUT_MS_CONFIG, Type.LONG, INSERT_QUORUM_TIMEOUT_MS_DEFAULT, ConfigDef.Range.atLeast(1000),
                Importance.LOW, INSERT_QUORUM_TIMEOUT_MS_DOC, CLUSTER_GROUP, ++order, Width.SHORT, "Insert quorum timeout", CLUSTER_ONLY);

        order = 0;
        def.define(STAGE_URI_CONFIG, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new StageUri(), Importance.HIGH, STAGE_URI_DOC,
                STAGE_GROUP, ++order, Width.LONG, "Stage URI", List.of(STAGE_S3_ENDPOINT_CONFIG, STAGE_S3_REGION_CONFIG, STAGE_S3_ACCESS_KEY_CONFIG,
                STAGE_S3_SECRET_KEY_CONFIG, STAGE_GCS_ENDPOINT_CONFIG, STAGE_GCS_HMAC_ACCESS_ID_CONFIG, STAGE_GCS_HMAC_SECRET_CONFIG));
        def.define(STAGE_S3_ENDPOINT_CONFIG, Type.STRING, "", Importance.MEDIUM, STAGE_S3_ENDPOINT_DOC,
                STAGE_GROUP, ++order, Width.LONG, "S3 endpoint", S3_ONLY);
        def.define(STAGE_S3_REGION_CONFIG, Type.STRING, "us-east-1", new ConfigDef.NonEmptyString(), Importance.MEDIUM, STAGE_S3_REGION_DOC,
                STAGE_GROUP, ++order, Width.SHORT, "S3 region", S3_ONLY);
        def.define(STAGE_S3_ACCESS_KEY_CONFIG, Type.STRING, "", Importance.MEDIUM, STAGE_S3_ACCESS_KEY_DOC,
                STAGE_GROUP, ++order, Width.MEDIUM, "S3 access key", S3_ONLY);
        def.define(STAGE_S3_SECRET_KEY_CONFIG, Type.PASSWORD, "", Importance.MEDIUM, STAGE_S3_SECRET_KEY_DOC,
                STAGE_GROUP, ++order, Width.MEDIUM, "S3 secret key", S3_ONLY);
        def.define(STAGE_GCS_ENDPOINT_CONFIG, Type.STRING, "https://storage.googleapis.com", Importance.MEDIUM, STAGE_GCS_ENDPOINT_DOC,
                STAGE_GROUP, ++order, Width.LONG, "GCS endpoint", GCS_ONLY);
        def.define(STAGE_GCS_HMAC_ACCESS_ID_CONFIG, Type.STRING, "", Importance.MEDIUM, STAGE_GCS_HMAC_ACCESS_ID_DOC,
                STAGE_GROUP, ++order, Width.MEDIUM, "GCS HMAC access id", GCS_ONLY);
        def.define(STAGE_GCS_HMAC_SECRET_CONFIG, Type.PASSWORD, "", Importance.MEDIUM, STAGE_GCS_HMAC_SECRET_DOC,
                STAGE_GROUP, ++order, Width.MEDIUM, "GCS HMAC secret", GCS_ONLY);
        def.define(STAGE_LOCAL_DIR_CONFIG, Type.STRING, "", Importance.LOW, STAGE_LOCAL_DIR_DOC,
                STAGE_GROUP, ++order, Width.LONG, "Local stage folder");
        def.define(STAGE_MAX_FILE_BYTES_CONFIG, Type.LONG, STAGE_MAX_FILE_BYTES_DEFAULT, ConfigDef.Range.atLeast(64 * 1024), Importance.LOW,
                STAGE_MAX_FILE_BYTES_DOC, STAGE_GROUP, ++order, Width.SHORT, "Stage file size");
        def.define(AVRO_CODEC_CONFIG, Type.STRING, AVRO_CODEC_DEFAULT, ConfigDef.ValidString.in("zstandard", "snappy", "deflate", "null"),
                Importance.LOW, AVRO_CODEC_DOC, STAGE_GROUP, ++order, Width.SHORT, "Avro codec");
        def.define(BATCH_MAX_ROWS_CONFIG, Type.INT, BATCH_MAX_ROWS_DEFAULT, ConfigDef.Range.atLeast(1), Importance.LOW,
                BATCH_MAX_ROWS_DOC, STAGE_GROUP, ++order, Width.SHORT, "Batch rows (other producers)");
        def.define(BATCH_MAX_MS_CONFIG, Type.LONG, BATCH_MAX_MS_DEFAULT, ConfigDef.Range.atLeast(1), Importance.LOW,
                BATCH_MAX_MS_DOC, STAGE_GROUP, ++order, Width.SHORT, "Batch time (other producers)");

        order = 0;
        def.define(NORMALIZE_MODE_CONFIG, Type.STRING, NORMALIZE_MODE_DEFAULT, ConfigDef.ValidString.in("pull", "push"), Importance.MEDIUM,
                NORMALIZE_MODE_DOC, NORMALIZE_GROUP, ++order, Width.SHORT, "Normalize mode");
        def.define(NORMALIZE_PARALLELISM_CONFIG, Type.INT, NORMALIZE_PARALLELISM_DEFAULT, ConfigDef.Range.between(1, 256), Importance.MEDIUM,
                NORMALIZE_PARALLELISM_DOC, NORMALIZE_GROUP, ++order, Width.SHORT, "Normalize parallelism");
        def.define(NORMALIZE_BUFFER_BATCHES_CONFIG, Type.INT, NORMALIZE_BUFFER_BATCHES_DEFAULT, ConfigDef.Range.atLeast(1), Importance.MEDIUM,
                NORMALIZE_BUFFER_BATCHES_DOC, NORMALIZE_GROUP, ++order, Width.SHORT, "Normalize buffer");
        def.define(NORMALIZE_BATCHES_PER_LOAD_CONFIG, Type.INT, NORMALIZE_BATCHES_PER_LOAD_DEFAULT, ConfigDef.Range.between(1, 1000),
                Importance.LOW, NORMALIZE_BATCHES_PER_LOAD_DOC, NORMALIZE_GROUP, ++order, Width.SHORT, "Batches per load");
        def.define(NORMALIZE_BACKOFF_INITIAL_MS_CONFIG, Type.LONG, NORMALIZE_BACKOFF_INITIAL_MS_DEFAULT, ConfigDef.Range.atLeast(10),
                Importance.LOW, NORMALIZE_BACKOFF_INITIAL_MS_DOC, NORMALIZE_GROUP, ++order, Width.SHORT, "First backoff");
        def.define(NORMALIZE_BACKOFF_MAX_MS_CONFIG, Type.LONG, NORMALIZE_BACKOFF_MAX_MS_DEFAULT, ConfigDef.Range.atLeast(10),
                Importance.LOW, NORMALIZE_BACKOFF_MAX_MS_DOC, NORMALIZE_GROUP, ++order, Width.SHORT, "Longest backoff");
        def.define(NORMALIZE_LEASE_MS_CONFIG, Type.LONG, NORMALIZE_LEASE_MS_DEFAULT, ConfigDef.Range.between(3_000L, 600_000L),
                Importance.LOW, NORMALIZE_LEASE_MS_DOC, NORMALIZE_GROUP, ++order, Width.SHORT, "Normalize lease");

        order = 0;
        def.define(TABLE_NAME_FORMAT_CONFIG, Type.STRING, TABLE_NAME_FORMAT_DEFAULT, new ConfigDef.NonEmptyString(), Importance.MEDIUM,
                TABLE_NAME_FORMAT_DOC, TABLES_GROUP, ++order, Width.MEDIUM, "Table name format");
        def.define(TABLE_PER_TOPIC_CONFIG, Type.BOOLEAN, false, Importance.MEDIUM, TABLE_PER_TOPIC_DOC,
                TABLES_GROUP, ++order, Width.SHORT, "One table per topic");
        def.define(TABLE_AUTO_CREATE_CONFIG, Type.BOOLEAN, true, Importance.MEDIUM, TABLE_AUTO_CREATE_DOC,
                TABLES_GROUP, ++order, Width.SHORT, "Create tables");
        def.define(SCHEMA_EVOLUTION_CONFIG, Type.STRING, SCHEMA_EVOLUTION_DEFAULT, ConfigDef.ValidString.in("add_columns", "none"),
                Importance.MEDIUM, SCHEMA_EVOLUTION_DOC, TABLES_GROUP, ++order, Width.SHORT, "Schema evolution");
        def.define(TEMPORAL_INTEGER_COLUMNS_CONFIG, Type.LIST, "", Importance.MEDIUM, TEMPORAL_INTEGER_COLUMNS_DOC,
                TABLES_GROUP, ++order, Width.LONG, "Dates and timestamps as integers");
        def.define(DECIMAL_TEXT_COLUMNS_CONFIG, Type.LIST, "", Importance.MEDIUM, DECIMAL_TEXT_COLUMNS_DOC,
                TABLES_GROUP, ++order, Width.LONG, "Decimals as text");
        return CatalogConfig.addTo(def);
    }

    /**
     * Whether {@code column} of source table {@code table} is listed in {@value #TEMPORAL_INTEGER_COLUMNS_CONFIG}
     * (exactly, through {@code <table>.*}, or through {@code *}).
     */
    public boolean integerTemporal(String table, String column) {
        return listed(TEMPORAL_INTEGER_COLUMNS_CONFIG, table, column);
    }

    /** Whether {@code column} of source table {@code table} is listed in {@value #DECIMAL_TEXT_COLUMNS_CONFIG}. */
    public boolean decimalText(String table, String column) {
        return listed(DECIMAL_TEXT_COLUMNS_CONFIG, table, column);
    }

    private boolean listed(String setting, String table, String column) {
        for (String entry : getList(setting)) {
            String e = entry.trim();
            if (e.equals("*") || e.equals(table + ".*") || e.equals(table + "." + column)) {
                return true;
            }
        }
        return false;
    }

    public String clickHouseUrl() {
        return getString(CLICKHOUSE_URL_CONFIG);
    }

    /**
     * {@code clickhouse.url} for logs and error messages: without its user info ({@code http://user:password@host}
     * would put the password there).
     */
    public String clickHouseUrlForLogs() {
        String url = clickHouseUrl();
        try {
            URI uri = URI.create(url);
            if (uri.getRawUserInfo() == null) {
                return url;
            }
            return new URI(uri.getScheme(), null, uri.getHost(), uri.getPort(), uri.getRawPath().isEmpty() ? null : uri.getPath(),
                    null, null).toString();
        } catch (IllegalArgumentException | java.net.URISyntaxException e) {
            return "(clickhouse.url, not shown)";
        }
    }

    public String clickHouseUser() {
        return getString(CLICKHOUSE_USER_CONFIG);
    }

    public Password clickHousePassword() {
        return getPassword(CLICKHOUSE_PASSWORD_CONFIG);
    }

    public String clickHouseDatabase() {
        return getString(CLICKHOUSE_DATABASE_CONFIG);
    }

    public long clickHouseTimeoutMs() {
        return getLong(CLICKHOUSE_TIMEOUT_MS_CONFIG);
    }

    public int deduplicationWindow() {
        return getInt(DEDUPLICATION_WINDOW_CONFIG);
    }

    /** Where final tables live: one server, or the configured cluster with its replication and quorum. */
    public Cluster cluster() {
        String name = getString(CLUSTER_CONFIG);
        if (name.isEmpty()) {
            return Cluster.single();
        }
        return new Cluster(name, getString(REPLICATION_PATH_CONFIG), getString(REPLICA_NAME_CONFIG),
                getBoolean(DISTRIBUTED_TABLE_CONFIG), getString(INSERT_QUORUM_CONFIG), getLong(INSERT_QUORUM_TIMEOUT_MS_CONFIG));
    }

    public URI stageUri() {
        return URI.create(getString(STAGE_URI_CONFIG));
    }

    public String s3Endpoint() {
        return getString(STAGE_S3_ENDPOINT_CONFIG);
    }

    public String s3Region() {
        return getString(STAGE_S3_REGION_CONFIG);
    }

    public String s3AccessKey() {
        return getString(STAGE_S3_ACCESS_KEY_CONFIG);
    }

    public Password s3SecretKey() {
        return getPassword(STAGE_S3_SECRET_KEY_CONFIG);
    }

    public String gcsEndpoint() {
        return getString(STAGE_GCS_ENDPOINT_CONFIG);
    }

    public String gcsHmacAccessId() {
        return getString(STAGE_GCS_HMAC_ACCESS_ID_CONFIG);
    }

    public Password gcsHmacSecret() {
        return getPassword(STAGE_GCS_HMAC_SECRET_CONFIG);
    }

    public String stageLocalDir() {
        return getString(STAGE_LOCAL_DIR_CONFIG);
    }

    public long stageMaxFileBytes() {
        return getLong(STAGE_MAX_FILE_BYTES_CONFIG);
    }

    public String avroCodec() {
        return getString(AVRO_CODEC_CONFIG);
    }

    public boolean pushMode() {
        return "push".equals(getString(NORMALIZE_MODE_CONFIG));
    }

    public int normalizeParallelism() {
        return getInt(NORMALIZE_PARALLELISM_CONFIG);
    }

    public int normalizeBufferBatches() {
        return getInt(NORMALIZE_BUFFER_BATCHES_CONFIG);
    }

    public int normalizeBatchesPerLoad() {
        return getInt(NORMALIZE_BATCHES_PER_LOAD_CONFIG);
    }

    public long normalizeBackoffInitialMs() {
        return getLong(NORMALIZE_BACKOFF_INITIAL_MS_CONFIG);
    }

    public java.time.Duration normalizeLease() {
        return java.time.Duration.ofMillis(getLong(NORMALIZE_LEASE_MS_CONFIG));
    }

    public long normalizeBackoffMaxMs() {
        return getLong(NORMALIZE_BACKOFF_MAX_MS_CONFIG);
    }

    public int batchMaxRows() {
        return getInt(BATCH_MAX_ROWS_CONFIG);
    }

    public long batchMaxMs() {
        return getLong(BATCH_MAX_MS_CONFIG);
    }

    public String tableNameFormat() {
        return getString(TABLE_NAME_FORMAT_CONFIG);
    }

    public boolean tablePerTopic() {
        return getBoolean(TABLE_PER_TOPIC_CONFIG);
    }

    public boolean tableAutoCreate() {
        return getBoolean(TABLE_AUTO_CREATE_CONFIG);
    }

    public boolean addColumns() {
        return "add_columns".equals(getString(SCHEMA_EVOLUTION_CONFIG));
    }

    public CatalogConfig.CatalogSettings catalog() {
        return CatalogConfig.settings(this);
    }

    /** The ClickHouse table of a source table (and topic), from {@code table.name.format}. */
    public String clickHouseTable(String sourceTable, String topic) {
        return tableNameFormat().replace("${table}", plain(sourceTable)).replace("${topic}", plain(topic));
    }

    private static String plain(String name) {
        return name == null ? "" : name.replaceAll("[^A-Za-z0-9_]", "_");
    }

    /** Accepts http:// and https:// URLs. */
    static final class HttpUrl implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            String text = (String) value;
            try {
                URI uri = URI.create(text);
                if (!"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme()) || uri.getHost() == null) {
                    throw new ConfigException(name, value, "must be an http:// or https:// URL with a host");
                }
            } catch (IllegalArgumentException e) {
                throw new ConfigException(name, value, "is not a URL: " + e.getMessage());
            }
        }

        @Override
        public String toString() {
            return "an http:// or https:// URL";
        }
    }

    /** Empty (one server) or a cluster name without spaces or control characters. */
    static final class ClusterName implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            String text = (String) value;
            if (text == null || text.chars().anyMatch(c -> Character.isWhitespace(c) || Character.isISOControl(c))) {
                throw new ConfigException(name, value, "a cluster name has no spaces or control characters (empty for one server)");
            }
        }

        @Override
        public String toString() {
            return "empty, or a cluster name of the servers' remote_servers";
        }
    }

    /** A Keeper path that names the table, so that no two final tables share one. */
    static final class ReplicationPath implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            String text = (String) value;
            if (text == null || !text.startsWith("/")) {
                throw new ConfigException(name, value, "must be an absolute Keeper path");
            }
            if (!text.contains("{table}") && !text.contains("{uuid}")) {
                throw new ConfigException(name, value, "must contain {table} or {uuid}: every final table needs its own path");
            }
        }

        @Override
        public String toString() {
            return "an absolute Keeper path containing {table} or {uuid}";
        }
    }

    /** {@code auto}, {@code off} or a number of replicas of at least 2. */
    static final class InsertQuorum implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            String text = (String) value;
            if ("auto".equals(text) || "off".equals(text)) {
                return;
            }
            try {
                if (text != null && Integer.parseInt(text) >= 2) {
                    return;
                }
            } catch (NumberFormatException e) {
                // reported below
            }
            throw new ConfigException(name, value, "must be auto, off, or a number of replicas of at least 2");
        }

        @Override
        public String toString() {
            return "auto, off, or a number of replicas (at least 2)";
        }
    }

    /** Accepts file:///dir and s3://bucket[/prefix]. */
    static final class StageUri implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            String text = (String) value;
            try {
                URI uri = URI.create(text);
                if ("file".equals(uri.getScheme()) && uri.getPath() != null && uri.getPath().startsWith("/")) {
                    return;
                }
                if (("s3".equals(uri.getScheme()) || "gs".equals(uri.getScheme())) && uri.getHost() != null) {
                    return;
                }
            } catch (IllegalArgumentException e) {
                throw new ConfigException(name, value, "is not a URI: " + e.getMessage());
            }
            throw new ConfigException(name, value, "must be file:///absolute/dir, s3://bucket[/prefix] or gs://bucket[/prefix]");
        }

        @Override
        public String toString() {
            return "file:///absolute/dir, s3://bucket[/prefix] or gs://bucket[/prefix]";
        }
    }
}
