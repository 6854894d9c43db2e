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
 * the role its configuration names.
 */
public class PgPipelineSourceTask extends SourceTask {
    static final String SOURCE_KIND = "pg_pipeline";
    /** The flow (the connector's name), set by the connector. */
    static final String FLOW_PROP = "tablecdc.flow";
    /** {@code apply} or {@code copy}, set by the connector. */
    static final String ROLE_PROP = "tablecdc.role";
    /** The task's index among the connector's tasks, set by the connector. */
    static final String TASK_INDEX_PROP = "tablecdc.task.index";
    static final String ROLE_APPLY = "apply";
    static final String ROLE_COPY = "copy";
    /** Both in one task: a flow that copies with {@code tasks.max=1}. */
    static final String ROLE_APPLY_AND_COPY = "apply+copy";

    private SourceTask role;
    private TransactionBoundaries boundaries = new TransactionBoundaries(null);

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        String name = props.get(ROLE_PROP);
        role = ROLE_COPY.equals(name) ? new CopyTask() : ROLE_APPLY_AND_COPY.equals(name) ? new ApplyAndCopyTask()
                : new ApplyTask();
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
