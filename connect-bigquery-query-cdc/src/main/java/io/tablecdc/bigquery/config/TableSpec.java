package io.tablecdc.bigquery.config;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

import org.apache.kafka.common.config.ConfigException;

/**
 * One entry of {@code tables}: {@code name[:watermark_column[:key1+key2...]]}. The name is {@code table},
 * {@code dataset.table} or {@code project.dataset.table}; missing parts come from {@code bigquery.project} and
 * {@code bigquery.dataset}.
 *
 * @param project         the table's project
 * @param dataset         the table's dataset
 * @param table           the table's name
 * @param watermarkColumn the column whose value moves when a row changes (QUERY mode); may be empty in APPENDS
 *                        and CHANGES modes
 * @param keyColumns      the key columns, possibly none
 */
public record TableSpec(String project, String dataset, String table, String watermarkColumn, List<String> keyColumns) {

    /** BigQuery project ids, dataset and table names, column names: no backticks, quotes or separators. */
    private static final Pattern PART = Pattern.compile("[A-Za-z0-9_\\-$]+");
    private static final Pattern COLUMN = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");

    public TableSpec {
        Objects.requireNonNull(project);
        Objects.requireNonNull(dataset);
        Objects.requireNonNull(table);
        keyColumns = List.copyOf(keyColumns);
    }

    /** {@code project.dataset.table}: the table's name everywhere (topic, partition, catalog, headers). */
    public String fullName() {
        return project + "." + dataset + "." + table;
    }

    public boolean hasKey() {
        return !keyColumns.isEmpty();
    }

    /**
     * Parses one {@code tables} entry.
     *
     * @throws ConfigException naming {@code key} and the entry when it is malformed
     */
    public static TableSpec parse(String key, String entry, String defaultProject, String defaultDataset,
                                  String defaultWatermark) {
        String text = entry == null ? "" : entry.trim();
        String[] parts = text.split(":", -1);
        if (text.isEmpty() || parts.length > 3) {
            throw new ConfigException(key, entry, "each entry is table[:watermark_column[:key1+key2]]");
        }
        String[] name = parts[0].trim().split("\\.", -1);
        String project = defaultProject;
        String dataset = defaultDataset;
        String table;
        switch (name.length) {
            case 1 -> table = name[0];
            case 2 -> {
                dataset = name[0];
                table = name[1];
            }
            case 3 -> {
                project = name[0];
                dataset = name[1];
                table = name[2];
            }
            default -> throw new ConfigException(key, entry, "a table is table, dataset.table or project.dataset.table");
        }
        for (String part : new String[] {project, dataset, table}) {
            if (part == null || !PART.matcher(part).matches()) {
                throw new ConfigException(key, entry, "'" + part + "' is not a valid BigQuery project, dataset or table name");
            }
        }
        String watermark = parts.length > 1 && !parts[1].isBlank() ? parts[1].trim() : defaultWatermark;
        if (!watermark.isEmpty() && !COLUMN.matcher(watermark).matches()) {
            throw new ConfigException(key, entry, "'" + watermark + "' is not a valid column name");
        }
        List<String> keys = new ArrayList<>();
        if (parts.length > 2 && !parts[2].isBlank()) {
            for (String column : parts[2].split("\\+")) {
                String c = column.trim();
                if (!COLUMN.matcher(c).matches()) {
                    throw new ConfigException(key, entry, "'" + c + "' is not a valid key column name");
                }
                keys.add(c);
            }
        }
        return new TableSpec(project, dataset, table, watermark, keys);
    }
}
