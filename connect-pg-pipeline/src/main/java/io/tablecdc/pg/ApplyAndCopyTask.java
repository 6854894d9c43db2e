package io.tablecdc.pg;

import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

import io.tablecdc.common.Version;
import io.tablecdc.common.metrics.TableMetrics;

/**
 * The single task of a flow that copies tables with {@code tasks.max=1}: the {@linkplain ApplyTask apply task} and
 * one {@linkplain CopyTask copy task} in one Connect task, polled in turn. Copying works with Connect's default task
 * count this way; more copy tasks (and copies on other workers) come from {@code tasks.max} of 2 or more, where task
 * 0 only applies.
 */
final class ApplyAndCopyTask extends SourceTask {
    private final ApplyTask apply = new ApplyTask();
    private final CopyTask copy = new CopyTask();
    private boolean copyNext;
    /**
     * One registry for both halves: with one each, a table's gauges were registered twice under one name (the second
     * registration refused) and the copy half removed them when its copy ended, leaving the table without metrics.
     */
    private TableMetrics metrics;

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        apply.initialize(context);
        copy.initialize(context);
        String flow = PgPipelineTaskConfig.of(props).flow();
        metrics = TableMetrics.forSource(() -> context.pluginMetrics(), flow);
        apply.shareMetrics(metrics);
        copy.runBesideApply(metrics);
        try {
            apply.start(props);
        } catch (RuntimeException e) {
            metrics.close();
            throw e;
        }
        try {
            copy.start(props);
        } catch (RuntimeException e) {
            apply.stop();
            metrics.close();
            throw e;
        }
    }

    /** One role per call, in turn; the other's turn comes at once when this one has nothing. */
    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        copyNext = !copyNext;
        List<SourceRecord> records = copyNext ? copy.poll() : apply.poll();
        if (records == null || records.isEmpty()) {
            records = copyNext ? apply.poll() : copy.poll();
        }
        return records;
    }

    @Override
    public void commit() throws InterruptedException {
        apply.commit();
        copy.commit();
    }

    /** Each role ignores the records it did not send. */
    @Override
    public void commitRecord(SourceRecord record, RecordMetadata metadata) throws InterruptedException {
        apply.commitRecord(record, metadata);
        copy.commitRecord(record, metadata);
    }

    @Override
    public void stop() {
        try {
            copy.stop();
        } finally {
            try {
                apply.stop();
            } finally {
                if (metrics != null) {
                    metrics.close();
                }
            }
        }
    }
}
