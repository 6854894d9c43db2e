package io.tablecdc.catalog;

/** Why a table may not be loaded into the destination a sink asked for ({@link SinkLeases#claimDestination}). */
public sealed interface DestinationRefusal {
    /** Another table of the catalog is loaded there, as "flow F, table T". */
    record HeldBy(String otherTable) implements DestinationRefusal {
    }

    /**
     * The table has batches loaded into {@code current} (up to batch {@code normalizedBatchId}): loading the rest
     * elsewhere would leave both destinations incomplete.
     */
    record LoadedElsewhere(String current, long normalizedBatchId) implements DestinationRefusal {
    }
}
