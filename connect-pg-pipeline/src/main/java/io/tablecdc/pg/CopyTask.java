package io.tablecdc.pg;

import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.common.Resources;
import io.tablecdc.common.Version;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogUnavailableException;
import io.tablecdc.catalog.CopyClaim;
import io.tablecdc.common.metrics.TableMetrics;
import io.tablecdc.pg.config.PgPipelineConfig;

/**
 * A copy task (tasks 1..n): claims one {@code pending} table of the flow at a time from the catalog (a lease that
 * expires if this task dies), copies it, catches it up and hands it over to the apply task ({@link TableCopy} does
 * the work); then claims the next. Several copy tasks, on any workers, share the flow's tables this way.
 */
public class CopyTask extends SourceTask {
    private static final Logger log = LoggerFactory.getLogger(CopyTask.class);
    private static final long CLAIM_INTERVAL_MS = 1000;

    private PgPipelineConfig config;
    private String flow;
    private String owner;
    private Catalog catalog;
    private TableMetrics metrics;
    /** The apply half's metrics when the task runs beside it ({@link #runBesideApply}): that task closes them. */
    private TableMetrics applyHalfMetrics;
    /** Whether an apply half in the same Connect task paces {@link #poll} (it waits for changes): no sleep here. */
    private boolean pacedByApply;
    private static final long OUTAGE_BACKOFF_INITIAL_MS = 1_000;
    private static final long OUTAGE_BACKOFF_MAX_MS = 30_000;
    private volatile TableCopy current;
    /** The wait before the next claim after a copy stopped because the source could not be reached (doubling). */
    private long outageBackoffMs = OUTAGE_BACKOFF_INITIAL_MS;
    private long nextClaimAt;
    private volatile boolean stopping;

    @Override
    public String version() {
        return Version.get();
    }

    @Override
    public void start(Map<String, String> props) {
        config = new PgPipelineConfig(props);
        PgPipelineTaskConfig task = PgPipelineTaskConfig.of(props);
        flow = task.flow();
        byte[] random = new byte[3];
        new SecureRandom().nextBytes(random);
        // a new owner per start: a restarted task never mistakes the lease of its previous life for its own
        owner = flow + "/copy-" + task.taskIndex() + "-"
                + HexFormat.of().formatHex(random);
        metrics = applyHalfMetrics != null ? applyHalfMetrics : TableMetrics.forSource(() -> context.pluginMetrics(), flow);
        openCatalog();
        log.info("flow {}: copy task {} started", flow, owner);
    }

    /**
     * Opens the catalog; when it cannot be reached (an outage), the task stays up and {@link #poll} tries again with
     * the outage backoff. A refusal fails the task.
     */
    private boolean openCatalog() {
        try {
            catalog = Catalog.open(config.catalog(), "source " + flow + " copy");
            return true;
        } catch (CatalogUnavailableException e) {
            log.warn("flow {}: copy task {} cannot reach the catalog ({}); trying again in {} ms", flow, owner,
                    e.getMessage(), outageBackoffMs);
            nextClaimAt = System.currentTimeMillis() + outageBackoffMs;
            outageBackoffMs = Math.min(outageBackoffMs * 2, OUTAGE_BACKOFF_MAX_MS);
            return false;
        }
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        if (stopping) {
            return null;
        }
        TableCopy copy = current;
        if (copy == null) {
            long now = System.currentTimeMillis();
            if (now < nextClaimAt) {
                if (!pacedByApply) {
                    Thread.sleep(Math.min(200, nextClaimAt - now));
                }
                return null;
            }
            if (catalog == null && !openCatalog()) {
                return null;
            }
            Optional<CopyClaim> claim;
            try {
                claim = catalog.copies().claimCopy(flow, owner, config.copyLease(), config.copyOnly(), config.copyExcept());
            } catch (RuntimeException e) {
                log.warn("flow {}: copy task {} cannot claim a table ({}); retrying", flow, owner, e.getMessage());
                nextClaimAt = now + 5 * CLAIM_INTERVAL_MS;
                return null;
            }
            if (claim.isEmpty()) {
                nextClaimAt = now + CLAIM_INTERVAL_MS;
                return null;
            }
            copy = new TableCopy(config, flow, owner, claim.get(), catalog, metrics, pacedByApply);
            copy.batchIdsAbove(BatchIds.fromOffsets(context.offsetStorageReader(), flow));
            current = copy;
        }
        List<SourceRecord> records = copy.step();
        if (copy.finished()) {
            copy.close();
            if (applyHalfMetrics == null) {
                // the table's numbers belong to the apply task from now on (in one task with it, they stay)
                metrics.remove(flow, copy.table());
            }
            current = null;
            if (copy.stoppedBySourceOutage()) {
                log.warn("flow {}: copy task {} cannot reach the source; claiming a table again in {} ms", flow, owner,
                        outageBackoffMs);
                nextClaimAt = System.currentTimeMillis() + outageBackoffMs;
                outageBackoffMs = Math.min(outageBackoffMs * 2, OUTAGE_BACKOFF_MAX_MS);
            } else {
                outageBackoffMs = OUTAGE_BACKOFF_INITIAL_MS;
                nextClaimAt = 0;
            }
        }
        return records == null || records.isEmpty() ? null : records;
    }

    @Override
    public void commitRecord(SourceRecord record, RecordMetadata metadata) {
        TableCopy copy = current;
        if (copy != null) {
            copy.acknowledged(record);
        }
    }

    @Override
    public void stop() {
        stopping = true;
        TableCopy copy = current;
        if (copy != null) {
            // gives the table back so another copy task starts it at once rather than after the lease (and says on
            // the table when Kafka had not taken all of its records: the task may have failed on them)
            copy.taskStopped();
        }
        Resources.closeQuietly(catalog, "the catalog");
        Resources.closeQuietly(applyHalfMetrics != null ? null : metrics, "the metrics");
    }

    /**
     * Before {@link #start}: this copy task runs in one Connect task with an apply task ({@link ApplyAndCopyTask}). It
     * counts into the apply half's {@code metrics}, which the caller closes, and never sleeps in {@link #poll} while
     * no claim is due: the apply half waits for changes, and a sleep here would delay every streamed change.
     */
    void runBesideApply(TableMetrics metrics) {
        this.applyHalfMetrics = metrics;
        this.pacedByApply = true;
    }

}
