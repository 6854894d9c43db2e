package io.tablecdc.clickhouse.destination;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

import io.tablecdc.clickhouse.schema.ClickHouseTypes;
import io.tablecdc.clickhouse.schema.StageColumn;
import io.tablecdc.clickhouse.schema.StageSchema;

/**
 * The DDL of a final table and its {@code <table>_current} view in one database. A table with a key is a
 * {@code ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted)} ordered by the key; a table without
 * one (records without a key, e.g. from other producers) is an append-only {@code MergeTree}, since
 * replacing rows needs something to identify them.
 *
 * <p>On a {@link Cluster}, every statement runs {@code ON CLUSTER}, the engines are the {@code Replicated}
 * ones, and with a {@code Distributed} table the rows live in {@code <table>_local} on every shard while
 * {@code <table>} routes them by a hash of the key, so that every version of a row meets on one shard (where
 * {@code ReplacingMergeTree} and {@code FINAL} can see them together).
 */
public final class FinalTableDdl {
    private final String database;
    private final Cluster cluster;

    public FinalTableDdl(String database, Cluster cluster) {
        this.database = database;
        this.cluster = cluster;
    }

    /**
     * The statements that create a final table, in order ({@code CREATE TABLE IF NOT EXISTS}: may be run
     * again after a crash). {@code deduplicationWindow} keeps the insert deduplication tokens of that many
     * recent inserts, which makes re-loading a batch a no-op.
     */
    public List<String> createTable(String table, List<StageColumn> columns, int deduplicationWindow) {
        String columnDefs = columns.stream().map(c -> Sql.id(c.column()) + " " + c.type()).collect(Collectors.joining(", "));
        List<String> key = columns.stream().filter(StageColumn::key).map(StageColumn::column).toList();
        String storage = cluster.storageTable(table);
        List<String> statements = new ArrayList<>();
        statements.add("CREATE TABLE IF NOT EXISTS " + Sql.table(database, storage) + cluster.onCluster() + " (" + columnDefs
                + ") ENGINE = " + engine(key) + " SETTINGS " + (cluster.enabled() ? "replicated" : "non_replicated")
                + "_deduplication_window = " + deduplicationWindow);
        if (cluster.distributed()) {
            String shardingKey = key.isEmpty() ? "rand()" : "cityHash64(" + Sql.idList(key) + ")";
            statements.add("CREATE TABLE IF NOT EXISTS " + Sql.table(database, table) + cluster.onCluster() + " (" + columnDefs
                    + ") ENGINE = Distributed(" + Sql.literal(cluster.name()) + ", " + Sql.literal(database) + ", "
                    + Sql.literal(storage) + ", " + shardingKey + ")");
        }
        return statements;
    }

    private String engine(List<String> key) {
        String replicated = cluster.enabled() ? "Replicated" : "";
        String replication = cluster.enabled()
                ? Sql.literal(cluster.replicationPath()) + ", " + Sql.literal(cluster.replicaName())
                : "";
        if (key.isEmpty()) {
            return replicated + "MergeTree" + (cluster.enabled() ? "(" + replication + ")" : "") + " ORDER BY tuple()";
        }
        return replicated + "ReplacingMergeTree(" + (cluster.enabled() ? replication + ", " : "")
                + Sql.id(StageSchema.VERSION_COLUMN) + ", " + Sql.id(StageSchema.IS_DELETED_COLUMN) + ") ORDER BY (" + Sql.idList(key) + ")";
    }

    /** The view of live rows: {@code FINAL}, deleted rows hidden. May be run again after a crash. */
    public String createCurrentView(String table) {
        return createCurrentView(table, false);
    }

    /**
     * The view of live rows. A table with a key: {@code FINAL}, deleted rows hidden. A table without one
     * ({@code keyless}, a plain {@code MergeTree} that has no versions to collapse and where {@code FINAL} means
     * nothing): every row, deleted ones hidden. May be run again after a crash.
     */
    public String createCurrentView(String table, boolean keyless) {
        return "CREATE VIEW IF NOT EXISTS " + currentView(table, keyless);
    }

    /** The view again, after columns were added (a view keeps the columns its SELECT * had when created). */
    public String replaceCurrentView(String table) {
        return replaceCurrentView(table, false);
    }

    /** {@link #replaceCurrentView(String)} of a table with or without a key. */
    public String replaceCurrentView(String table, boolean keyless) {
        return "CREATE OR REPLACE VIEW " + currentView(table, keyless);
    }

    private String currentView(String table, boolean keyless) {
        return Sql.table(database, table + "_current") + cluster.onCluster() + " AS SELECT * FROM " + Sql.table(database, table)
                + (keyless ? "" : " FINAL") + " WHERE " + Sql.id(StageSchema.IS_DELETED_COLUMN) + " = 0";
    }

    /**
     * Adds a column that a newer value schema brought: to the table that stores the rows, then to the
     * {@code Distributed} table in front of it. May be run again after a crash.
     */
    public List<String> addColumn(String table, StageColumn column) {
        List<String> statements = new ArrayList<>();
        String definition = " ADD COLUMN IF NOT EXISTS " + Sql.id(column.column()) + " " + column.type();
        statements.add("ALTER TABLE " + Sql.table(database, cluster.storageTable(table)) + cluster.onCluster() + definition);
        if (cluster.distributed()) {
            statements.add("ALTER TABLE " + Sql.table(database, table) + cluster.onCluster() + definition);
        }
        return statements;
    }

    /**
     * Empties a final table (a truncate of its source table): the table that stores the rows, on every
     * replica. A table that does not exist yet has nothing to empty. May be run again after a crash.
     */
    public String truncate(String table) {
        return "TRUNCATE TABLE IF EXISTS " + Sql.table(database, cluster.storageTable(table)) + cluster.onCluster();
    }

    /**
     * The pull-mode load: {@code INSERT INTO final (columns) SELECT avro fields FROM <table function>}.
     * Only the columns of the stage file are named; columns it lacks take their defaults.
     */
    public String insertSelect(String table, List<StageColumn> columns, String tableFunction) {
        return insertSelect(table, columns, tableFunction, false);
    }

    /**
     * With {@code legacyVersion}, the table's version column is the UInt64 of an earlier release: the staged UInt128
     * is converted, and a version that does not fit (2^63 or more) fails the load with the message in the query
     * parameter {@code version_error}.
     */
    public String insertSelect(String table, List<StageColumn> columns, String tableFunction, boolean legacyVersion) {
        String targets = columns.stream().map(c -> Sql.id(c.column())).collect(Collectors.joining(", "));
        String sources = columns.stream().map(c -> {
            if (legacyVersion && c.column().equals(StageSchema.VERSION_COLUMN)) {
                String v = "reinterpretAsUInt128(" + Sql.id(c.avroName()) + ")";
                return "toUInt64(" + v + " + throwIf(" + v + " >= " + ClickHouseTypes.LEGACY_VERSION_LIMIT
                        + ", {version_error:String}))";
            }
            return Sql.id(c.avroName());
        }).collect(Collectors.joining(", "));
        return "INSERT INTO " + Sql.table(database, table) + " (" + targets + ") SELECT " + sources + " FROM " + tableFunction;
    }
}
