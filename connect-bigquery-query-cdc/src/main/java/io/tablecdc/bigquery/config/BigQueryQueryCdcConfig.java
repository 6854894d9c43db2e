package io.tablecdc.bigquery.config;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.common.config.ConfigDef.Width;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;

import io.tablecdc.catalog.CatalogConfig;
import io.tablecdc.catalog.CatalogConfig.CatalogSettings;
import io.tablecdc.common.ConfigValidation;

/** The configuration of the BigQuery query CDC source: one {@link ConfigDef}, read only through typed getters. */
public final class BigQueryQueryCdcConfig extends AbstractConfig {
    private static final String BIGQUERY_GROUP = "BigQuery";
    private static final String TABLES_GROUP = "Tables";
    private static final String POLLING_GROUP = "Polling";

    public static final String PROJECT_CONFIG = "bigquery.project";
    private static final String PROJECT_DOC = "Project of the tables (unless a table names its own project).";

    public static final String DATASET_CONFIG = "bigquery.dataset";
    private static final String DATASET_DOC = "Dataset of the tables (unless a table names its own dataset).";

    public static final String LOCATION_CONFIG = "bigquery.location";
    private static final String LOCATION_DOC = "Location the queries run in (e.g. US, EU, europe-west1); empty for the"
            + " client's default (BigQuery then infers it from the tables).";
    private static final String LOCATION_DEFAULT = "";

    public static final String BILLING_PROJECT_CONFIG = "bigquery.billing.project";
    private static final String BILLING_PROJECT_DOC = "Project the query jobs run in and are billed to; empty for bigquery.project.";
    private static final String BILLING_PROJECT_DEFAULT = "";

    public static final String CREDENTIALS_FILE_CONFIG = "bigquery.credentials.file";
    private static final String CREDENTIALS_FILE_DOC = "Path of a service-account JSON key file on every worker. Leave this and"
            + " bigquery.credentials.json empty to use application default credentials.";
    private static final String CREDENTIALS_FILE_DEFAULT = "";

    public static final String CREDENTIALS_JSON_CONFIG = "bigquery.credentials.json";
    private static final String CREDENTIALS_JSON_DOC = "A service-account JSON key, inline. Never logged; prefer a config"
            + " provider (${file:...}) to keep it out of the connector config.";

    public static final String ENDPOINT_CONFIG = "bigquery.endpoint";
    private static final String ENDPOINT_DOC = "Override of the BigQuery REST endpoint, e.g. http://127.0.0.1:9050 for an"
            + " emulator; empty for Google's. With an endpoint and no credentials configured, requests carry no credentials.";
    private static final String ENDPOINT_DEFAULT = "";

    public static final String PAGE_SIZE_CONFIG = "bigquery.page.size";
    private static final String PAGE_SIZE_DOC = "Rows per result page. Rows go to Kafka page by page as they are read, so this"
            + " bounds the rows a task holds in memory.";
    private static final int PAGE_SIZE_DEFAULT = 10_000;

    public static final String TIMEOUT_MS_CONFIG = "bigquery.timeout.ms";
    private static final String TIMEOUT_MS_DOC = "How long one BigQuery API request of a task may take to connect, and how"
            + " long it waits for a byte on an open connection (a host that froze or a network that drops packets answers"
            + " nothing); a request's retries take at most three times this in all. The table's poll then fails and is"
            + " retried with backoff, other tables go on. At least 15000: BigQuery holds a request waiting for a query's"
            + " results for up to 10 s.";
    private static final long TIMEOUT_MS_DEFAULT = 60_000L;

    public static final String MAXIMUM_BYTES_BILLED_CONFIG = "maximum.bytes.billed";
    private static final String MAXIMUM_BYTES_BILLED_DOC = "Cost guard sent with every query (maximumBytesBilled): BigQuery"
            + " fails a query that would bill more, and the table then retries with backoff. BigQuery bills at least 10 MB"
            + " per table a query reads, so keep it above that. 0 for no limit.";
    private static final long MAXIMUM_BYTES_BILLED_DEFAULT = 0L;

    public static final String DESTINATION_DATASET_CONFIG = "query.destination.dataset";
    private static final String DESTINATION_DATASET_DOC = "Dataset (dataset, or project.dataset; without a project, the"
            + " one of bigquery.billing.project) into which the snapshot chunks and change windows are written before"
            + " they are read page by page, for results too large to return (BigQuery fails a query whose result exceeds"
            + " its response limit, about 10 GB, with 'Response too large to return' unless it has a destination table)."
            + " Each table's task writes to a table of its own (tablecdc_<flow>_<dataset>_<table>_<random per task start>,"
            + " WRITE_TRUNCATE),"
            + " created with an expiration of 24 hours and dropped once its rows are read. The dataset must exist in the location of"
            + " the tables and the credentials need bigquery.tables.create, updateData, getData and delete on it. Empty (the"
            + " default): results are read from BigQuery's anonymous result tables.";
    private static final String DESTINATION_DATASET_DEFAULT = "";

    public static final String TABLES_CONFIG = "tables";
    private static final String TABLES_DOC = "The tables to replicate, each table[:watermark_column[:key1+key2]]; a table is"
            + " table, dataset.table or project.dataset.table. The watermark column (TIMESTAMP, DATETIME or DATE) must move"
            + " forward whenever a row changes; without one in the entry, watermark.column applies. Key columns become the"
            + " record key (the ClickHouse ORDER BY). One task per table: tasks.max must be at least the number of tables.";

    public static final String WATERMARK_COLUMN_CONFIG = "watermark.column";
    private static final String WATERMARK_COLUMN_DOC = "Watermark column of the tables whose entry names none.";
    private static final String WATERMARK_COLUMN_DEFAULT = "";

    public static final String WATERMARK_TIME_ZONE_CONFIG = "watermark.time.zone";
    private static final String WATERMARK_TIME_ZONE_DOC = "The time zone DATETIME and DATE watermarks are written in (a"
            + " region such as Europe/Berlin, or UTC, or an offset such as +02:00): windows, cursors and versions place"
            + " their values on BigQuery's clock in this zone, in the query and in the connector alike. TIMESTAMP"
            + " watermarks are not affected. In a zone with daylight-saving changes a DATETIME watermark needs"
            + " safety.lag.ms above one hour, a DATE watermark at least 25 hours.";
    private static final String WATERMARK_TIME_ZONE_DEFAULT = "UTC";

    public static final String MODE_CONFIG = "replication.mode";
    private static final String MODE_DOC = "QUERY: rows whose watermark moved into the window (upserts; deletes are not"
            + " seen). APPENDS: BigQuery's APPENDS() change history (inserts only). CHANGES: BigQuery's CHANGES() change"
            + " history (inserts, updates and deletes; needs safety.lag.ms above 600000, 10 minutes).";
    private static final String MODE_DEFAULT = Mode.QUERY.name();

    public static final String INITIAL_LOAD_CONFIG = "initial.load";
    private static final String INITIAL_LOAD_DOC = "What a table without a cursor does first. snapshot: read the rows"
            + " without a watermark, then every row with a watermark up to min(the table's largest, BigQuery's clock -"
            + " safety.lag.ms), in chunks of max.query.window.ms, each a batch of snapshot records committed on its own,"
            + " then poll from there. skip: start polling from that same bound.";
    private static final String INITIAL_LOAD_DEFAULT = InitialLoad.SNAPSHOT.name().toLowerCase(Locale.ROOT);

    public static final String TOPIC_PREFIX_CONFIG = "topic.prefix";
    private static final String TOPIC_PREFIX_DOC = "Each table goes to the topic <topic.prefix>.<project.dataset.table>."
            + " Set topic.creation.default.partitions=1 and topic.creation.default.replication.factor so that Connect"
            + " creates each topic with one partition.";

    public static final String SYNC_INTERVAL_MS_CONFIG = "sync.interval.ms";
    private static final String SYNC_INTERVAL_MS_DOC = "How often each table is polled (from its last attempt).";
    private static final long SYNC_INTERVAL_MS_DEFAULT = 60_000L;

    public static final String SAFETY_LAG_MS_CONFIG = "safety.lag.ms";
    private static final String SAFETY_LAG_MS_DOC = "A window ends this long before BigQuery's CURRENT_TIMESTAMP(), so that"
            + " rows stamped before then but committed later are seen. It must be longer than the time from a row's"
            + " watermark to its commit: a DML statement that stamps rows with CURRENT_TIMESTAMP() takes that value when"
            + " it starts and commits when it ends, so set it above the longest such statement or transaction (the"
            + " default covers streamed rows and DML statements of under a minute).";
    private static final long SAFETY_LAG_MS_DEFAULT = 60_000L;

    public static final String MAX_QUERY_WINDOW_MS_CONFIG = "max.query.window.ms";
    private static final String MAX_QUERY_WINDOW_MS_DOC = "Longest window one query reads; a table far behind catches up"
            + " window by window.";
    private static final long MAX_QUERY_WINDOW_MS_DEFAULT = 24L * 3600 * 1000;

    public static final String PULL_PARALLELISM_CONFIG = "pull.parallelism";
    private static final String PULL_PARALLELISM_DOC = "How many of this connector's tables may query BigQuery at once in"
            + " one worker (BigQuery allows about 100 concurrent queries per project).";
    private static final int PULL_PARALLELISM_DEFAULT = 10;

    public static final String MAX_UNNORMALIZED_BATCHES_CONFIG = "max.unnormalized.batches";
    private static final String MAX_UNNORMALIZED_BATCHES_DOC = "How many batches a table may have synced but not yet"
            + " normalized (the catalog's synced_batch_id - normalized_batch_id); at that limit the table pauses"
            + " (paused_reason normalize_buffer_full) until the sink catches up. 1 sends the next batch only once the"
            + " previous one is in ClickHouse. 0 for max(24 h / sync.interval.ms, 2). Not the sink's"
            + " normalize.buffer.batches, which counts staged batches inside the sink.";
    private static final int MAX_UNNORMALIZED_BATCHES_DEFAULT = 0;

    /** The former name of {@link #MAX_UNNORMALIZED_BATCHES_CONFIG}, still read. */
    public static final String NORMALIZE_BUFFER_BATCHES_CONFIG = "normalize.buffer.batches";
    private static final String NORMALIZE_BUFFER_BATCHES_DOC = "Deprecated: the former name of max.unnormalized.batches"
            + " (same meaning), read when max.unnormalized.batches is not set.";

    // the watermark's keys show in QUERY mode only (APPENDS and CHANGES read BigQuery's _CHANGE_TIMESTAMP); each way
    // of giving credentials shows while the other is not set (no dependents between those two: ConfigDef would follow
    // the cycle for ever)
    private static final ConfigDef.Recommender QUERY_MODE_ONLY = ConfigValidation.visibleWhen(MODE_CONFIG,
            ConfigValidation.oneOfIgnoringCase(Mode.QUERY.name()));
    private static final ConfigDef.Recommender WITHOUT_CREDENTIALS_JSON = ConfigValidation.visibleWhen(CREDENTIALS_JSON_CONFIG,
            ConfigValidation.blank());
    private static final ConfigDef.Recommender WITHOUT_CREDENTIALS_FILE = ConfigValidation.visibleWhen(CREDENTIALS_FILE_CONFIG,
            ConfigValidation.blank());

    public static final ConfigDef CONFIG_DEF = configDef();

    private final List<TableSpec> tables;

    public BigQueryQueryCdcConfig(Map<String, String> props) {
        super(CONFIG_DEF, props);
        this.tables = parseTables();
        if (mode() == Mode.CHANGES && safetyLagMs() <= 600_000L) {
            throw new ConfigException(SAFETY_LAG_MS_CONFIG, safetyLagMs(),
                    "replication.mode=CHANGES needs more than 600000 (BigQuery's CHANGES() must end at least 10 minutes before now)");
        }
        Integer unnormalized = getInt(MAX_UNNORMALIZED_BATCHES_CONFIG);
        Integer former = getInt(NORMALIZE_BUFFER_BATCHES_CONFIG);
        if (unnormalized != null && former != null && !unnormalized.equals(former)) {
            throw new ConfigException(NORMALIZE_BUFFER_BATCHES_CONFIG, former, "normalize.buffer.batches is the former name of"
                    + " max.unnormalized.batches (" + unnormalized + "); set only max.unnormalized.batches");
        }
        if (!getString(CREDENTIALS_FILE_CONFIG).isEmpty() && getPassword(CREDENTIALS_JSON_CONFIG) != null) {
            throw new ConfigException(CREDENTIALS_JSON_CONFIG, "(secret)",
                    "set either bigquery.credentials.file or bigquery.credentials.json, not both");
        }
    }

    private static ConfigDef configDef() {
        ConfigDef def = new ConfigDef();
        int order = 0;
        def.define(PROJECT_CONFIG, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(), Importance.HIGH,
                        PROJECT_DOC, BIGQUERY_GROUP, ++order, Width.MEDIUM, "Project")
                .define(DATASET_CONFIG, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(), Importance.HIGH,
                        DATASET_DOC, BIGQUERY_GROUP, ++order, Width.MEDIUM, "Dataset")
                .define(LOCATION_CONFIG, Type.STRING, LOCATION_DEFAULT, Importance.MEDIUM, LOCATION_DOC, BIGQUERY_GROUP,
                        ++order, Width.SHORT, "Location")
                .define(BILLING_PROJECT_CONFIG, Type.STRING, BILLING_PROJECT_DEFAULT, Importance.LOW, BILLING_PROJECT_DOC,
                        BIGQUERY_GROUP, ++order, Width.MEDIUM, "Billing project")
                .define(CREDENTIALS_FILE_CONFIG, Type.STRING, CREDENTIALS_FILE_DEFAULT, Importance.HIGH, CREDENTIALS_FILE_DOC,
                        BIGQUERY_GROUP, ++order, Width.LONG, "Credentials file", WITHOUT_CREDENTIALS_JSON)
                .define(CREDENTIALS_JSON_CONFIG, Type.PASSWORD, null, Importance.HIGH, CREDENTIALS_JSON_DOC, BIGQUERY_GROUP,
                        ++order, Width.LONG, "Credentials JSON", WITHOUT_CREDENTIALS_FILE)
                .define(ENDPOINT_CONFIG, Type.STRING, ENDPOINT_DEFAULT, new HttpUrlOrEmpty(), Importance.LOW, ENDPOINT_DOC,
                        BIGQUERY_GROUP, ++order, Width.LONG, "Endpoint override")
                .define(PAGE_SIZE_CONFIG, Type.INT, PAGE_SIZE_DEFAULT, ConfigDef.Range.between(1, 1_000_000), Importance.LOW,
                        PAGE_SIZE_DOC, BIGQUERY_GROUP, ++order, Width.SHORT, "Page size")
                .define(TIMEOUT_MS_CONFIG, Type.LONG, TIMEOUT_MS_DEFAULT, ConfigDef.Range.between(15_000L, 3_600_000L),
                        Importance.LOW, TIMEOUT_MS_DOC, BIGQUERY_GROUP, ++order, Width.SHORT, "Request timeout (ms)")
                .define(MAXIMUM_BYTES_BILLED_CONFIG, Type.LONG, MAXIMUM_BYTES_BILLED_DEFAULT, ConfigDef.Range.atLeast(0L),
                        Importance.MEDIUM, MAXIMUM_BYTES_BILLED_DOC, BIGQUERY_GROUP, ++order, Width.SHORT, "Maximum bytes billed")
                .define(DESTINATION_DATASET_CONFIG, Type.STRING, DESTINATION_DATASET_DEFAULT, new DatasetName(),
                        Importance.MEDIUM, DESTINATION_DATASET_DOC, BIGQUERY_GROUP, ++order, Width.MEDIUM, "Destination dataset");
        order = 0;
        def.define(TABLES_CONFIG, Type.LIST, ConfigDef.NO_DEFAULT_VALUE, new NonEmptyList(), Importance.HIGH, TABLES_DOC,
                        TABLES_GROUP, ++order, Width.LONG, "Tables")
                .define(WATERMARK_COLUMN_CONFIG, Type.STRING, WATERMARK_COLUMN_DEFAULT, Importance.HIGH, WATERMARK_COLUMN_DOC,
                        TABLES_GROUP, ++order, Width.MEDIUM, "Watermark column", QUERY_MODE_ONLY)
                .define(WATERMARK_TIME_ZONE_CONFIG, Type.STRING, WATERMARK_TIME_ZONE_DEFAULT, new TimeZone(), Importance.MEDIUM,
                        WATERMARK_TIME_ZONE_DOC, TABLES_GROUP, ++order, Width.SHORT, "Watermark time zone", QUERY_MODE_ONLY)
                .define(MODE_CONFIG, Type.STRING, MODE_DEFAULT, ConfigDef.CaseInsensitiveValidString.in("QUERY", "APPENDS", "CHANGES"),
                        Importance.HIGH, MODE_DOC, TABLES_GROUP, ++order, Width.SHORT, "Replication mode",
                        List.of(WATERMARK_COLUMN_CONFIG, WATERMARK_TIME_ZONE_CONFIG))
                .define(INITIAL_LOAD_CONFIG, Type.STRING, INITIAL_LOAD_DEFAULT, ConfigDef.CaseInsensitiveValidString.in("snapshot", "skip"),
                        Importance.MEDIUM, INITIAL_LOAD_DOC, TABLES_GROUP, ++order, Width.SHORT, "Initial load")
                .define(TOPIC_PREFIX_CONFIG, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new TopicPrefix(), Importance.HIGH,
                        TOPIC_PREFIX_DOC, TABLES_GROUP, ++order, Width.MEDIUM, "Topic prefix");
        order = 0;
        def.define(SYNC_INTERVAL_MS_CONFIG, Type.LONG, SYNC_INTERVAL_MS_DEFAULT, ConfigDef.Range.between(100L, 7L * 24 * 3600 * 1000),
                        Importance.HIGH, SYNC_INTERVAL_MS_DOC, POLLING_GROUP, ++order, Width.SHORT, "Sync interval (ms)")
                .define(SAFETY_LAG_MS_CONFIG, Type.LONG, SAFETY_LAG_MS_DEFAULT, ConfigDef.Range.between(0L, 7L * 24 * 3600 * 1000),
                        Importance.MEDIUM, SAFETY_LAG_MS_DOC, POLLING_GROUP, ++order, Width.SHORT, "Safety lag (ms)")
                .define(MAX_QUERY_WINDOW_MS_CONFIG, Type.LONG, MAX_QUERY_WINDOW_MS_DEFAULT,
                        ConfigDef.Range.between(1_000L, 366L * 24 * 3600 * 1000), Importance.MEDIUM, MAX_QUERY_WINDOW_MS_DOC,
                        POLLING_GROUP, ++order, Width.SHORT, "Max query window (ms)")
                .define(PULL_PARALLELISM_CONFIG, Type.INT, PULL_PARALLELISM_DEFAULT, ConfigDef.Range.between(1, 100),
                        Importance.MEDIUM, PULL_PARALLELISM_DOC, POLLING_GROUP, ++order, Width.SHORT, "Pull parallelism")
                .define(MAX_UNNORMALIZED_BATCHES_CONFIG, Type.INT, null,
                        ConfigDef.LambdaValidator.with((name, value) -> {
                            if (value != null && ((Integer) value < 0 || (Integer) value > 1_000_000)) {
                                throw new ConfigException(name, value, "must be between 0 and 1000000");
                            }
                        }, () -> "[0,...,1000000]"), Importance.MEDIUM, MAX_UNNORMALIZED_BATCHES_DOC, POLLING_GROUP,
                        ++order, Width.SHORT, "Max unnormalized batches")
                .define(NORMALIZE_BUFFER_BATCHES_CONFIG, Type.INT, null,
                        ConfigDef.LambdaValidator.with((name, value) -> {
                            if (value != null && ((Integer) value < 0 || (Integer) value > 1_000_000)) {
                                throw new ConfigException(name, value, "must be between 0 and 1000000");
                            }
                        }, () -> "[0,...,1000000]"), Importance.LOW, NORMALIZE_BUFFER_BATCHES_DOC, POLLING_GROUP,
                        ++order, Width.SHORT, "Normalize buffer (deprecated)");
        return CatalogConfig.addTo(def);
    }

    private List<TableSpec> parseTables() {
        List<TableSpec> specs = new ArrayList<>();
        Set<String> seen = new HashSet<>();
        for (String entry : getList(TABLES_CONFIG)) {
            TableSpec spec = TableSpec.parse(TABLES_CONFIG, entry, project(), dataset(), getString(WATERMARK_COLUMN_CONFIG).trim());
            if (mode() == Mode.QUERY && spec.watermarkColumn().isEmpty()) {
                throw new ConfigException(TABLES_CONFIG, entry, "table " + spec.fullName()
                        + " has no watermark column (name one in the entry or set watermark.column)");
            }
            if (!seen.add(spec.fullName())) {
                throw new ConfigException(TABLES_CONFIG, entry, "table " + spec.fullName() + " is listed twice");
            }
            specs.add(spec);
        }
        return List.copyOf(specs);
    }

    /**
     * Why a table without key columns is refused: a window is read again after a restart, a failed batch or a rewind
     * (at least once), and ClickHouse keeps every copy of a row that has no key (an append-only table), so the copies
     * would stay for good. With a key, the destination keeps one row per key and version.
     */
    public static String keylessProblem(TableSpec table) {
        return "table " + table.fullName() + " has no key columns: rows read again after a restart or a failed batch would"
                + " stay in ClickHouse as duplicates (a table without a key is append-only there); name the key in the"
                + " entry, e.g. " + table.table() + ":" + (table.watermarkColumn().isEmpty() ? "watermark" : table.watermarkColumn())
                + ":id";
    }

    // ------------------------------------------------------------------------------------------ getters

    public String project() {
        return getString(PROJECT_CONFIG).trim();
    }

    public String dataset() {
        return getString(DATASET_CONFIG).trim();
    }

    public String location() {
        return getString(LOCATION_CONFIG).trim();
    }

    /** The project jobs run in: {@code bigquery.billing.project}, else {@code bigquery.project}. */
    public String billingProject() {
        String billing = getString(BILLING_PROJECT_CONFIG).trim();
        return billing.isEmpty() ? project() : billing;
    }

    public String credentialsFile() {
        return getString(CREDENTIALS_FILE_CONFIG).trim();
    }

    /** The inline credentials, or null. */
    public Password credentialsJson() {
        return getPassword(CREDENTIALS_JSON_CONFIG);
    }

    public String endpoint() {
        return getString(ENDPOINT_CONFIG).trim();
    }

    public int pageSize() {
        return getInt(PAGE_SIZE_CONFIG);
    }

    /** How long one API request may take to connect and wait for a byte ({@value #TIMEOUT_MS_CONFIG}). */
    public java.time.Duration timeout() {
        return java.time.Duration.ofMillis(getLong(TIMEOUT_MS_CONFIG));
    }

    /** 0 when unlimited. */
    public long maximumBytesBilled() {
        return getLong(MAXIMUM_BYTES_BILLED_CONFIG);
    }

    public List<TableSpec> tables() {
        return tables;
    }

    /**
     * {@code query.destination.dataset} as {project, dataset} (the project defaults to {@link #billingProject()}), or
     * null when query results are read from BigQuery's anonymous result tables.
     */
    public String[] destinationDataset() {
        String value = getString(DESTINATION_DATASET_CONFIG).trim();
        if (value.isEmpty()) {
            return null;
        }
        int dot = value.lastIndexOf('.');
        return dot < 0 ? new String[] {billingProject(), value} : new String[] {value.substring(0, dot), value.substring(dot + 1)};
    }

    /** {@code watermark.time.zone}: the zone of DATETIME and DATE watermarks. */
    public java.time.ZoneId watermarkTimeZone() {
        return java.time.ZoneId.of(getString(WATERMARK_TIME_ZONE_CONFIG).trim());
    }

    public Mode mode() {
        return Mode.valueOf(getString(MODE_CONFIG).trim().toUpperCase(Locale.ROOT));
    }

    public InitialLoad initialLoad() {
        return InitialLoad.valueOf(getString(INITIAL_LOAD_CONFIG).trim().toUpperCase(Locale.ROOT));
    }

    public String topicPrefix() {
        return getString(TOPIC_PREFIX_CONFIG).trim();
    }

    /** The topic of {@code table}: {@code <topic.prefix>.<project.dataset.table>}. */
    public String topic(TableSpec table) {
        return topicPrefix() + "." + table.fullName();
    }

    public long syncIntervalMs() {
        return getLong(SYNC_INTERVAL_MS_CONFIG);
    }

    public long safetyLagMs() {
        return getLong(SAFETY_LAG_MS_CONFIG);
    }

    public long maxQueryWindowMs() {
        return getLong(MAX_QUERY_WINDOW_MS_CONFIG);
    }

    public int pullParallelism() {
        return getInt(PULL_PARALLELISM_CONFIG);
    }

    /**
     * {@code max.unnormalized.batches} (else its former name {@code normalize.buffer.batches}), or
     * {@code max(24 h / sync.interval.ms, 2)} when 0 or unset.
     */
    public long normalizeBufferBatches() {
        Integer configured = getInt(MAX_UNNORMALIZED_BATCHES_CONFIG);
        if (configured == null) {
            configured = getInt(NORMALIZE_BUFFER_BATCHES_CONFIG);
        }
        return configured != null && configured > 0 ? configured : defaultNormalizeBuffer(syncIntervalMs());
    }

    public static long defaultNormalizeBuffer(long syncIntervalMs) {
        return Math.max(24L * 3600 * 1000 / syncIntervalMs, 2);
    }

    public CatalogSettings catalog() {
        return CatalogConfig.settings(this);
    }

    /** How a table's changes are read. */
    public enum Mode {
        /** Rows whose watermark column moved into the window. */
        QUERY,
        /** BigQuery's {@code APPENDS()} change history: inserts. */
        APPENDS,
        /** BigQuery's {@code CHANGES()} change history: inserts, updates and deletes. */
        CHANGES
    }

    /** What a table without a cursor does first. */
    public enum InitialLoad {
        SNAPSHOT, SKIP
    }

    // ------------------------------------------------------------------------------------------ validators

    static final class NonEmptyList implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            if (value == null || ((List<?>) value).isEmpty()) {
                throw new ConfigException(name, value, "name at least one table");
            }
        }

        @Override
        public String toString() {
            return "a non-empty list of table[:watermark_column[:key1+key2]]";
        }
    }

    /**
     * A time zone id Java and BigQuery both read: a region ({@code Europe/Berlin}), {@code UTC}, or an offset
     * ({@code +02:00}). Only letters, digits and {@code / _ + - :} are accepted, so the id can stand as a string
     * literal in the SQL text (the BigQuery emulator used in tests cannot take a query parameter there).
     */
    static final class TimeZone implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            String text = value == null ? "" : value.toString().trim();
            if (!text.matches("[A-Za-z0-9/_+\\-:]{1,64}")) {
                throw new ConfigException(name, value, "must be a time zone id such as UTC, Europe/Berlin or +02:00");
            }
            try {
                java.time.ZoneId.of(text);
            } catch (java.time.DateTimeException e) {
                throw new ConfigException(name, value, "is not a time zone id (such as UTC, Europe/Berlin or +02:00): "
                        + e.getMessage());
            }
        }

        @Override
        public String toString() {
            return "a time zone id such as UTC, Europe/Berlin or +02:00";
        }
    }

    static final class HttpUrlOrEmpty implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            String text = value == null ? "" : value.toString().trim();
            if (!text.isEmpty() && !text.startsWith("http://") && !text.startsWith("https://")) {
                throw new ConfigException(name, value, "must be an http:// or https:// URL, or empty");
            }
        }

        @Override
        public String toString() {
            return "empty, or an http:// or https:// URL";
        }
    }

    /** Empty, {@code dataset} or {@code project.dataset}. */
    static final class DatasetName implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            String text = value == null ? "" : value.toString().trim();
            if (!text.isEmpty() && !text.matches("([A-Za-z0-9:.\\-]+\\.)?[A-Za-z0-9_]{1,1024}")) {
                throw new ConfigException(name, value, "must be empty, a dataset (letters, digits, _) or project.dataset");
            }
        }

        @Override
        public String toString() {
            return "empty, dataset or project.dataset";
        }
    }

    static final class TopicPrefix implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            String text = value == null ? "" : value.toString().trim();
            if (text.isEmpty() || !text.matches("[A-Za-z0-9._\\-]+") || text.length() > 100) {
                throw new ConfigException(name, value, "must be 1 to 100 of the characters a Kafka topic may hold (letters, digits, . _ -)");
            }
        }

        @Override
        public String toString() {
            return "1-100 characters among letters, digits, . _ -";
        }
    }
}
