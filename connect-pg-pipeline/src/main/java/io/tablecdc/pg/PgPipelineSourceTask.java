package io.tablecdc.pg;

import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

import io.tablecdc.common.TransactionBoundaries;
import io.tablecdc.common.Version;

/**
 * The pipeline's Connect task: task 0 is the {@linkplain ApplyTask apply task}, tasks 1..n are
 * {@linkplain CopyTask copy tasks}. Connect knows one task class per connector, so this one hands every call to
 * the role its configuration names ({@link PgPipelineTaskConfig}).
 */
public class PgPipelineSourceTask extends SourceTask {
    static final String SOURCE_KIND = "pg_pipeline";

    private SourceTask role;
    private TransactionBoundaries boundaries = new TransactionBoundaries(null);

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        String refusal = PgPipelineSourceConnector.errorsToleranceRefusal(props);
        if (refusal != null) {
            // validate() refuses it; a task started with it anyway (a worker that skipped validation) fails at once
            throw new org.apache.kafka.connect.errors.ConnectException("flow " + PgPipelineTaskConfig.of(props).flow()
                    + ": " + refusal);
        }
        role = switch (PgPipelineTaskConfig.of(props).role()) {
            case COPY -> new CopyTask();
            case APPLY_AND_COPY -> new ApplyAndCopyTask();
            case APPLY -> new ApplyTask();
        };
        boundaries = new TransactionBoundaries(context.transactionContext());
        role.initialize(context);
        role.start(props);
    }

    /**
     * On a worker with {@code transaction.boundary=connector}, each poll's Kafka transaction ends on its last record,
     * which ends a batch: every role returns whole batches (and position records, which belong to none).
     */
    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        return boundaries.polled(role.poll());
    }

    /**
     * With connector-defined boundaries the role learns of its committed records here, each once (see
     * {@link TransactionBoundaries}), before its own {@code commit()}.
     */
    @Override
    public void commit() throws InterruptedException {
        for (SourceRecord record : boundaries.committed()) {
            role.commitRecord(record, null);
        }
        role.commit();
    }

    @Override
    public void commitRecord(SourceRecord record, RecordMetadata metadata) throws InterruptedException {
        if (!boundaries.active()) {
            role.commitRecord(record, metadata);
        }
    }

    @Override
    public void stop() {
        if (role != null) {
            role.stop();
        }
    }
}
