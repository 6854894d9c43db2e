package org.apache.kafka.common.utils;

/**
 * Benchmark-only bridge for Debezium 3.6.1 on Kafka Connect 4.4: Debezium names its JMX metrics with
 * {@code org.apache.kafka.common.utils.Sanitizer.jmxSanitize}, a class Kafka 4.4 moved to
 * {@code org.apache.kafka.common.utils.internals}. The worker's class loader finds no such class in Kafka and then
 * looks in the plugin's own jars, where this one forwards to the moved class. Nothing else of Debezium changes.
 */
public final class Sanitizer {
    private Sanitizer() {
    }

    public static String jmxSanitize(String name) {
        return org.apache.kafka.common.utils.internals.Sanitizer.jmxSanitize(name);
    }
}
