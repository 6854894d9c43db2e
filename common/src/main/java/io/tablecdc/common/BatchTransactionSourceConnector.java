package io.tablecdc.common;

import java.util.Map;

import org.apache.kafka.connect.source.ConnectorTransactionBoundaries;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * A tablecdc source: its tasks send each table's changes as batches and end a Kafka transaction at every batch's end
 * ({@code transaction.boundary=connector}), and what they record outside Kafka moves only once Kafka took a batch. So
 * exactly-once delivery is supported; each source's page ({@code docs/bigquery-query-cdc.md},
 * {@code docs/pg-pipeline.md}, "Exactly-once delivery") says how its offsets and its catalog follow the transactions.
 * The connector itself holds nothing to stop.
 */
public abstract class BatchTransactionSourceConnector extends SourceConnector {
    @Override
    public ExactlyOnceSupport exactlyOnceSupport(Map<String, String> connectorConfig) {
        return ExactlyOnceSupport.SUPPORTED;
    }

    /** Tasks end Kafka transactions at batch ends. */
    @Override
    public ConnectorTransactionBoundaries canDefineTransactionBoundaries(Map<String, String> connectorConfig) {
        return ConnectorTransactionBoundaries.SUPPORTED;
    }

    @Override
    public void stop() {
    }
}
