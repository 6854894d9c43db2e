package io.tablecdc.clickhouse.schema;

/**
 * One column of a stage file: its Avro field name (always a valid Avro name), the ClickHouse column it
 * loads into, and that column's ClickHouse type.
 *
 * @param avroName   field name in the Avro file
 * @param column     column name in the final ClickHouse table (any text; quoted wherever it is used)
 * @param type       ClickHouse type of the column
 * @param key        whether the column is part of the table's key (its ORDER BY)
 */
public record StageColumn(String avroName, String column, String type, boolean key) {
}
