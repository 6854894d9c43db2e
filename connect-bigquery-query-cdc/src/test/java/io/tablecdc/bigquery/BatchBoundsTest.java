package io.tablecdc.bigquery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.junit.jupiter.api.Test;

import com.google.cloud.bigquery.BigQueryException;

/**
 * Issue 37: how long a batch may stay open under exactly-once (item 10), and which failed page reads are read again
 * rather than the whole window (one warning per episode). The behaviour itself is shown end to end against the
 * emulator; these are the rules.
 */
class BatchBoundsTest {
    @Test
    void aBatchUnderExactlyOnceEndsWithinHalfTheProducersTransactionTimeout() {
        assertEquals(30_000L, BigQueryQueryCdcSourceTask.batchMaxMs(Map.of()), "Kafka's default of 60 s");
        assertEquals(3_000L, BigQueryQueryCdcSourceTask.batchMaxMs(Map.of("producer.override.transaction.timeout.ms", "6000")));
        assertEquals(450_000L, BigQueryQueryCdcSourceTask.batchMaxMs(Map.of("producer.override.transaction.timeout.ms", " 900000 ")));
        assertEquals(30_000L, BigQueryQueryCdcSourceTask.batchMaxMs(Map.of("producer.override.transaction.timeout.ms", "soon")),
                "a value the worker refuses itself");
        assertEquals(1L, BigQueryQueryCdcSourceTask.batchMaxMs(Map.of("producer.override.transaction.timeout.ms", "1")));
    }

    @Test
    void aPageIsReadAgainUnlessItsResultIsGone() {
        assertTrue(TablePoller.pageCanBeReadAgain(new BigQueryException(503, "backendError")));
        assertTrue(TablePoller.pageCanBeReadAgain(new BigQueryException(500, "internalError")));
        assertTrue(TablePoller.pageCanBeReadAgain(new BigQueryException(403, "rateLimitExceeded")));
        assertTrue(TablePoller.pageCanBeReadAgain(new IllegalStateException("connection reset")));
        assertFalse(TablePoller.pageCanBeReadAgain(new BigQueryException(404, "Not found: Table p:d.anon")),
                "the result expired or its destination was dropped: the window is read again");
        assertFalse(TablePoller.pageCanBeReadAgain(new BigQueryException(400, "Invalid page token")));
    }
}
