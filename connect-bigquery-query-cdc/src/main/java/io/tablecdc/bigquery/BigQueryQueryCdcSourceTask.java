package io.tablecdc.bigquery;

import java.time.Clock;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

import io.tablecdc.bigquery.config.BigQueryQueryCdcConfig;
import io.tablecdc.bigquery.config.TableSpec;
import io.tablecdc.common.TransactionBoundaries;
import io.tablecdc.common.Version;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.common.metrics.TableMetrics;

/** The task of {@link BigQueryQueryCdcSourceConnector}: replicates one table with a {@link TablePoller}. */
public class BigQueryQueryCdcSourceTask extends SourceTask {
    private TablePoller poller;
    private TransactionBoundaries boundaries = new TransactionBoundaries(null);
    private TableMetrics metrics;

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        BigQueryQueryCdcConfig config = new BigQueryQueryCdcConfig(props);
        BigQueryQueryCdcTaskConfig task = BigQueryQueryCdcTaskConfig.of(props);
        String flow = task.flow();
        String tableName = task.table();
        TableSpec table = config.tables().stream().filter(t -> t.fullName().equals(tableName)).findFirst()
                .orElseThrow(() -> new ConnectException("task of flow " + flow + " was given table " + tableName
                        + ", which is not in tables"));
        SourceClient client = SourceClient.create(config, config.timeout());
        Map<String, Object> offset = context.offsetStorageReader().offset(TablePoller.partition(table));
        // a lambda returning Object, so that a worker without plugin metrics fails inside it (see TableMetrics)
        metrics = TableMetrics.forSource(() -> context.pluginMetrics(), flow);
        // the catalog is opened by the poller's first poll, so that an outage at start is retried with backoff
        poller = new TablePoller(flow, table, config, client, () -> Catalog.open(config.catalog(), "source " + flow + " " + tableName),
                PullLimiter.of(flow, config.pullParallelism()), Clock.systemUTC(), offset, metrics.table(table.fullName()));
        boundaries = new TransactionBoundaries(context.transactionContext());
        poller.onCutShort(boundaries::commitAll);
        if (boundaries.active()) {
            // a batch is one Kafka transaction: it must end well within the producer's transaction.timeout.ms, or the
            // broker aborts it and every restart reads the same window into the same abort
            poller.closeBatchesAfter(batchMaxMs(props));
        }
    }

    /** Kafka's default {@code transaction.timeout.ms} (a producer's, unless the worker or the connector sets one). */
    static final long DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000L;
    /** The connector-level override of the producer's transaction timeout. */
    static final String TRANSACTION_TIMEOUT_OVERRIDE = "producer.override.transaction.timeout.ms";

    /**
     * How long a batch may stay open under exactly-once: half the producer's {@code transaction.timeout.ms} (the
     * connector's {@code producer.override.transaction.timeout.ms}, else Kafka's default of 60 s), so that the page
     * being read when the time is up still fits in the other half.
     */
    static long batchMaxMs(Map<String, String> props) {
        long timeout = DEFAULT_TRANSACTION_TIMEOUT_MS;
        String override = props.get(TRANSACTION_TIMEOUT_OVERRIDE);
        if (override != null && !override.isBlank()) {
            try {
                timeout = Long.parseLong(override.trim());
            } catch (NumberFormatException e) {
                // the worker refuses the producer with that value itself
            }
        }
        return Math.max(1, timeout / 2);
    }

    /**
     * On a worker with {@code transaction.boundary=connector}, a Kafka transaction ends on a batch's last record: a
     * batch read in several pages (several polls) is one transaction.
     */
    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        List<SourceRecord> records = poller.poll();
        return records.isEmpty() ? null : boundaries.polled(records);
    }

    /**
     * Runs on the producer's thread: only counts the acknowledgement; the poll thread mirrors it to the catalog. With
     * connector-defined boundaries the count comes from {@link #commit()} instead (see {@link TransactionBoundaries}:
     * the worker would report two equal records, two identical rows, once).
     */
    @Override
    public void commitRecord(SourceRecord record, RecordMetadata metadata) {
        if (!boundaries.active()) {
            poller.acknowledged();
        }
    }

    /** With connector-defined boundaries: right after a Kafka transaction committed, its records are acknowledged. */
    @Override
    public void commit() {
        for (int i = boundaries.committed().size(); i > 0; i--) {
            poller.acknowledged();
        }
    }

    @Override
    public void stop() {
        if (poller != null) {
            poller.stop();
        }
        if (poller != null) {
            poller.close();
        }
        if (metrics != null) {
            metrics.close();
        }
    }
}
