package io.tablecdc.clickhouse;

/**
 * One replicated table as the sink sees it: the flow that produced it, its source name, and its ClickHouse
 * table. Catalog rows are keyed by flow and source table.
 */
record TableKey(String flow, String table, String clickHouseTable) {

    /** A file-name-safe rendering used for local and staged file names. */
    String fileName() {
        return (flow + "__" + table).replaceAll("[^A-Za-z0-9_.-]", "_");
    }

    @Override
    public String toString() {
        return flow + "/" + table;
    }
}
