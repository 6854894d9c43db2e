package io.tablecdc.clickhouse;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.sink.SinkRecord;

/**
 * The Kafka partition a record was consumed from, before any transform (e.g. {@code RegexRouter}) renamed its topic.
 * Offsets, pauses and the catalog's {@code sink_topic} must name that partition: the consumer knows no other.
 */
final class OriginalPartition {
    private OriginalPartition() {
    }

    static TopicPartition of(SinkRecord record) {
        return new TopicPartition(topic(record), partition(record));
    }

    static String topic(SinkRecord record) {
        try {
            return record.originalTopic();
        } catch (NoSuchMethodError olderWorker) {
            return record.topic(); // a worker before Kafka 3.6 keeps no original topic
        }
    }

    private static int partition(SinkRecord record) {
        try {
            return record.originalKafkaPartition();
        } catch (NoSuchMethodError olderWorker) {
            return record.kafkaPartition();
        }
    }
}
