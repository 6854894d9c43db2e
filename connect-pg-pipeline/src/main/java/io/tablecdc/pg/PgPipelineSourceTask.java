package io.tablecdc.pg;

import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;
import org.apache.kafka.connect.source.SourceTaskContext;

import io.tablecdc.common.Version;
import io.tablecdc.common.catalog.Catalog;

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

    private SourceTask role;

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        role = ROLE_COPY.equals(props.get(ROLE_PROP)) ? new CopyTask() : new ApplyTask();
        role.initialize(context);
        role.start(props);
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        return role.poll();
    }

    @Override
    public void commit() throws InterruptedException {
        role.commit();
    }

    @Override
    public void commitRecord(SourceRecord record, RecordMetadata metadata) throws InterruptedException {
        role.commitRecord(record, metadata);
    }

    @Override
    public void stop() {
        if (role != null) {
            role.stop();
        }
    }

    /**
     * The id after which a table's next batch is numbered: the largest of its offset's batch, the catalog's synced
     * and normalized ids and its staged batch ids, plus one skipped id. The sink may have staged or loaded batches
     * whose acknowledgement a crashed task never recorded; gaps are harmless, ids only grow.
     */
    static long nextBatchId(SourceTaskContext context, Catalog catalog, String flow, String table) {
        Map<String, Object> offset = context.offsetStorageReader().offset(ChangeBatcher.tablePartition(flow, table));
        long fromOffset = 0;
        if (offset != null && offset.get(ChangeBatcher.BATCH_KEY) instanceof Number n) {
            fromOffset = n.longValue();
        }
        long fromCatalog = catalog.getTable(flow, table)
                .map(s -> Math.max(s.syncedBatchId(), s.normalizedBatchId())).orElse(0L);
        long staged = catalog.listStages(flow, table).stream().mapToLong(st -> st.batchId()).max().orElse(0L);
        return Math.max(Math.max(fromOffset, fromCatalog), staged) + 1;
    }
}
