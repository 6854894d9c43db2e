package io.tablecdc.catalog;

/** Why a table may not be loaded into the destination a sink asked for ({@link SinkLeases#claimDestination}). */
public sealed interface DestinationRefusal {
    /**
     * Another table of the catalog is loaded there: {@code otherTable} as "flow F, table T", {@code otherFlow} its flow
     * (perhaps this flow under a former name, which {@code tablecdc-retire-flow} removes from the catalog).
     */
    record HeldBy(String otherTable, String otherFlow) implements DestinationRefusal {
    }

    /**
     * Another sink connector ({@code sink}) holds the table: it loads it into {@code destination} (null when none is
     * recorded yet), and its hold lasts until {@code until} (ISO-8601, UTC) unless it is renewed. Two sinks that each
     * loaded some of the table's batches would leave both destinations incomplete.
     */
    record HeldBySink(String sink, String destination, String until) implements DestinationRefusal {
    }

    /**
     * The table has batches loaded into {@code current} (up to batch {@code normalizedBatchId}): loading the rest
     * elsewhere would leave both destinations incomplete.
     */
    record LoadedElsewhere(String current, long normalizedBatchId) implements DestinationRefusal {
    }
}
