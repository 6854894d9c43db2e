package io.tablecdc.clickhouse.destination;

import java.util.List;
import java.util.stream.Collectors;

import io.tablecdc.clickhouse.schema.StageColumn;
import io.tablecdc.clickhouse.schema.StageSchema;

/**
 * The DDL of a final table and its {@code <table>_current} view. A table with a key is a
 * {@code ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted)} ordered by the key; a table without
 * one (records without a key, e.g. from other producers) is an append-only {@code MergeTree}, since
 * replacing rows needs something to identify them.
 */
public final class FinalTableDdl {
    private FinalTableDdl() {
    }

    /**
     * {@code CREATE TABLE IF NOT EXISTS}: may be run again after a crash. {@code deduplicationWindow} keeps
     * the insert deduplication tokens of that many recent inserts, which makes re-loading a batch a no-op.
     */
    public static String createTable(String database, String table, List<StageColumn> columns, int deduplicationWindow) {
        String columnDefs = columns.stream().map(c -> Sql.id(c.column()) + " " + c.type()).collect(Collectors.joining(", "));
        List<String> key = columns.stream().filter(StageColumn::key).map(StageColumn::column).toList();
        String engine = key.isEmpty()
                ? "MergeTree ORDER BY tuple()"
                : "ReplacingMergeTree(" + Sql.id(StageSchema.VERSION_COLUMN) + ", " + Sql.id(StageSchema.IS_DELETED_COLUMN)
                        + ") ORDER BY (" + Sql.idList(key) + ")";
        return "CREATE TABLE IF NOT EXISTS " + Sql.table(database, table) + " (" + columnDefs + ") ENGINE = " + engine
                + " SETTINGS non_replicated_deduplication_window = " + deduplicationWindow;
    }

    /** The view of live rows: {@code FINAL}, deleted rows hidden. May be run again after a crash. */
    public static String createCurrentView(String database, String table) {
        return "CREATE VIEW IF NOT EXISTS " + Sql.table(database, table + "_current") + " AS SELECT * FROM "
                + Sql.table(database, table) + " FINAL WHERE " + Sql.id(StageSchema.IS_DELETED_COLUMN) + " = 0";
    }

    /** The view again, after columns were added (a view keeps the columns its SELECT * had when created). */
    public static String replaceCurrentView(String database, String table) {
        return createCurrentView(database, table).replace("CREATE VIEW IF NOT EXISTS", "CREATE OR REPLACE VIEW");
    }

    /** Adds a column that a newer value schema brought. May be run again after a crash. */
    public static String addColumn(String database, String table, StageColumn column) {
        return "ALTER TABLE " + Sql.table(database, table) + " ADD COLUMN IF NOT EXISTS " + Sql.id(column.column()) + " " + column.type();
    }

    /**
     * Empties a final table (a truncate of its source table); a table that does not exist yet has nothing to
     * empty. May be run again after a crash.
     */
    public static String truncate(String database, String table) {
        return "TRUNCATE TABLE IF EXISTS " + Sql.table(database, table);
    }

    /**
     * The pull-mode load: {@code INSERT INTO final (columns) SELECT avro fields FROM <table function>}.
     * Only the columns of the stage file are named; columns it lacks take their defaults.
     */
    public static String insertSelect(String database, String table, List<StageColumn> columns, String tableFunction) {
        String targets = columns.stream().map(c -> Sql.id(c.column())).collect(Collectors.joining(", "));
        String sources = columns.stream().map(c -> Sql.id(c.avroName())).collect(Collectors.joining(", "));
        return "INSERT INTO " + Sql.table(database, table) + " (" + targets + ") SELECT " + sources + " FROM " + tableFunction;
    }
}
