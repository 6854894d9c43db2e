package io.tablecdc.catalog;

/**
 * What a flow replicates from and to, recorded in {@code cdc_flow} when the flow first starts and checked
 * on every resume. A null field means "not known to this caller": it is neither checked nor overwritten,
 * and it is filled in the first time a caller knows it.
 *
 * @param sourceKind       e.g. {@code bigquery_query_cdc}, {@code pg_pipeline}
 * @param systemIdentifier Postgres {@code system_identifier} of the source cluster
 * @param timeline         Postgres timeline the flow last streamed on
 * @param slot             the flow's main replication slot
 * @param publication      the publication the flow streams
 * @param destination      an identity of the destination (e.g. ClickHouse host and database)
 */
public record FlowIdentity(String sourceKind, String systemIdentifier, Long timeline, String slot,
                           String publication, String destination) {

    /** The identity of a query CDC flow: a source kind and, optionally, a destination. */
    public static FlowIdentity ofKind(String sourceKind) {
        return new FlowIdentity(sourceKind, null, null, null, null, null);
    }
}
