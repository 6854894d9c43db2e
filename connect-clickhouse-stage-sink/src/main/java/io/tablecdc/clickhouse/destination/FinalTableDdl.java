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

    /**
     * The pull-mode load of a stage file whose rows may keep unchanged values ({@code lookupColumns}: the
     * {@link StageSchema#UNCHANGED_COLUMN}, lookup key and {@link StageSchema#LOOKUP_VERSION_COLUMN} fields). In the
     * same statement, each such row takes each column it lists as unchanged from
     * <ol>
     * <li>its own key's oldest version at or above its own version, when the table has one (the row was loaded
     * before, e.g. a change the source sent again after a restart: that version holds the right value, or a later one
     * replaces this row anyway), else</li>
     * <li>the lookup key's newest version below the lookup version, which must be a live row.</li>
     * </ol>
     * A row that finds neither stops the statement (nothing is inserted) with an error naming the table. Versions
     * below or at a row's own are never written by the load itself, so a repeated load computes the same rows.
     */
    public String insertSelectFilling(String sourceTable, String table, List<StageColumn> columns, List<StageColumn> lookupColumns,
                                      String tableFunction) {
        String finalTable = Sql.table(database, table);
        List<StageColumn> keys = columns.stream().filter(StageColumn::key).toList();
        List<StageColumn> lookupKeys = lookupColumns.stream().filter(StageColumn::key).toList();
        if (keys.isEmpty() || keys.size() != lookupKeys.size()) {
            throw new IllegalArgumentException("table " + sourceTable + ": a stage file with unchanged values has key columns "
                    + keys.stream().map(StageColumn::column).toList() + " but lookup fields "
                    + lookupKeys.stream().map(StageColumn::avroName).toList());
        }
        String unchanged = "s." + Sql.id(StageSchema.UNCHANGED_COLUMN);
        StringBuilder targets = new StringBuilder();
        StringBuilder sources = new StringBuilder();
        StringBuilder versionsOf = new StringBuilder();
        for (int i = 0; i < keys.size(); i++) {
            versionsOf.append(i == 0 ? "" : ", ").append(Sql.id(keys.get(i).column())).append(" AS ").append(Sql.id("_tablecdc_k" + i));
        }
        int c = 0;
        for (StageColumn column : columns) {
            targets.append(targets.length() == 0 ? "" : ", ").append(Sql.id(column.column()));
            String staged = "s." + Sql.id(column.avroName());
            sources.append(sources.length() == 0 ? "" : ", ");
            if (column.column().equals(StageSchema.VERSION_COLUMN)) {
                sources.append("s.").append(Sql.id("_tablecdc_sv"));
                continue;
            }
            if (column.key() || column.column().equals(StageSchema.IS_DELETED_COLUMN)) {
                sources.append(staged);
                continue;
            }
            String alias = Sql.id("_tablecdc_c" + c++);
            versionsOf.append(", ").append(Sql.id(column.column())).append(" AS ").append(alias);
            sources.append("if(has(").append(unchanged).append(", ").append(Sql.literal(column.column())).append("), if(o.")
                    .append(Sql.id("_tablecdc_f")).append(" = 1, o.").append(alias).append(", p.").append(alias).append("), ")
                    .append(staged).append(")");
        }
        String versions = "SELECT " + versionsOf + ", toUInt128(" + Sql.id(StageSchema.VERSION_COLUMN) + ") AS " + Sql.id("_tablecdc_v")
                + ", " + Sql.id(StageSchema.IS_DELETED_COLUMN) + " AS " + Sql.id("_tablecdc_d") + ", toUInt8(1) AS " + Sql.id("_tablecdc_f")
                + " FROM " + finalTable + " WHERE (" + Sql.idList(keys.stream().map(StageColumn::column).toList()) + ") IN (SELECT ";
        String marked = " FROM " + tableFunction + " WHERE notEmpty(" + Sql.id(StageSchema.UNCHANGED_COLUMN) + "))";
        // the stage file's key fields are read with the types ClickHouse infers from Avro (a uuid as String): cast to
        // the key columns' types, so that the join compares like with like
        StringBuilder previousOn = new StringBuilder();
        StringBuilder ownOn = new StringBuilder();
        StringBuilder previousKeys = new StringBuilder();
        StringBuilder ownKeys = new StringBuilder();
        // versions are staged as Avro fixed(16), which a query that is not an INSERT's own source reads as FixedString(16)
        StringBuilder staged = new StringBuilder("(SELECT *, reinterpretAsUInt128(" + Sql.id(StageSchema.VERSION_COLUMN) + ") AS "
                + Sql.id("_tablecdc_sv") + ", reinterpretAsUInt128(" + Sql.id(StageSchema.LOOKUP_VERSION_COLUMN) + ") AS "
                + Sql.id("_tablecdc_lv"));
        for (int i = 0; i < keys.size(); i++) {
            String type = keys.get(i).type();
            String lookupKey = "CAST(" + Sql.id(lookupKeys.get(i).avroName()) + " AS " + type + ")";
            String ownKey = "CAST(" + Sql.id(keys.get(i).avroName()) + " AS " + type + ")";
            staged.append(", ").append(lookupKey).append(" AS ").append(Sql.id("_tablecdc_l" + i))
                    .append(", ").append(ownKey).append(" AS ").append(Sql.id("_tablecdc_o" + i));
            previousKeys.append(i == 0 ? "" : ", ").append(lookupKey);
            ownKeys.append(i == 0 ? "" : ", ").append(ownKey);
            previousOn.append("s.").append(Sql.id("_tablecdc_l" + i)).append(" = p.").append(Sql.id("_tablecdc_k" + i)).append(" AND ");
            ownOn.append("s.").append(Sql.id("_tablecdc_o" + i)).append(" = o.").append(Sql.id("_tablecdc_k" + i)).append(" AND ");
        }
        staged.append(" FROM ").append(tableFunction).append(")");
        String previous = versions + previousKeys + marked;
        String own = versions + ownKeys + marked;
        String message = "table " + sourceTable + ": a row updated with unchanged (TOAST) values in " + database + "." + table
                + " has no earlier live version to keep them from (the row was never loaded, or was deleted)";
        return "INSERT INTO " + finalTable + " (" + targets + ") SELECT " + sources + " FROM " + staged + " AS s"
                + " ASOF LEFT JOIN (" + previous + ") AS p ON " + previousOn + "s." + Sql.id("_tablecdc_lv")
                + " > p." + Sql.id("_tablecdc_v")
                + " ASOF LEFT JOIN (" + own + ") AS o ON " + ownOn + "s." + Sql.id("_tablecdc_sv")
                + " <= o." + Sql.id("_tablecdc_v")
                + " WHERE throwIf(notEmpty(" + unchanged + ") AND o." + Sql.id("_tablecdc_f") + " = 0 AND (p." + Sql.id("_tablecdc_f")
                + " = 0 OR p." + Sql.id("_tablecdc_d") + " = 1), " + Sql.literal(message) + ") = 0";
    }
}
