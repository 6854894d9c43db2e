package io.tablecdc.common.metrics;

import java.util.LinkedHashMap;
import java.util.function.LongFunction;

/**
 * Where {@link TableMetrics} registers its gauges. Kept apart from Kafka's metric types so that a plugin on a
 * worker without plugin metrics (Kafka before 4.1) never loads them.
 */
interface MetricsBinding {

    /**
     * Registers one gauge and returns a handle to remove it with; {@code value} is given the reading time in
     * epoch milliseconds and must be cheap (it runs on every JMX read).
     */
    Object add(String name, String description, LinkedHashMap<String, String> tags, LongFunction<Object> value);

    /** Removes a gauge registered by {@link #add}; a gauge already gone is ignored. */
    void remove(Object handle);
}
