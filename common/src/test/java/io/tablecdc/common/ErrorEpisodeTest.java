package io.tablecdc.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.slf4j.Logger;

/** The error episode against recording collaborators: no catalog, no metrics registry. */
class ErrorEpisodeTest {
    private static final Instant NOW = Instant.parse("2026-03-01T10:00:00Z");

    /** Log lines as "level: first argument", calls to the catalog and the metric in order. */
    private final List<String> logged = new ArrayList<>();
    private final List<String> calls = new ArrayList<>();
    private boolean catalogDown;

    private final Logger log = (Logger) Proxy.newProxyInstance(Logger.class.getClassLoader(), new Class<?>[] {Logger.class},
            (proxy, method, args) -> {
                if (method.getName().matches("trace|debug|info|warn|error") && args != null && args.length > 1) {
                    Object[] values = args[1] instanceof Object[] many ? many : new Object[] {args[1]};
                    logged.add(method.getName() + ": " + values[0]);
                }
                return method.getReturnType() == boolean.class ? true : null;
            });

    private final ErrorEpisode.ErrorRecord record = new ErrorEpisode.ErrorRecord() {
        @Override
        public void record(String error, Instant at, Instant retryAt) {
            if (catalogDown) {
                throw new IllegalStateException("catalog down");
            }
            calls.add("record " + error + " at " + at + " retry " + retryAt);
        }

        @Override
        public void clear() {
            if (catalogDown) {
                throw new IllegalStateException("catalog down");
            }
            calls.add("clear");
        }
    };

    private final ErrorEpisode.EpisodeMetric metric = new ErrorEpisode.EpisodeMetric() {
        @Override
        public void started() {
            calls.add("metric started");
        }

        @Override
        public void ended() {
            calls.add("metric ended");
        }
    };

    private ErrorEpisode episode() {
        return new ErrorEpisode(log, "normalize of flow f, table t", new Backoff(1_000, 3_000),
                Clock.fixed(NOW, ZoneOffset.UTC), record, metric);
    }

    @Test
    void anEpisodeLogsOnceCountsOnceAndWritesEveryFailureWithItsRetryTime() {
        ErrorEpisode episode = episode();
        assertEquals(1_000, episode.failed(new RuntimeException("ClickHouse refused")));
        assertEquals(2_000, episode.failed(new RuntimeException("ClickHouse refused")));
        assertEquals(3_000, episode.failed(new RuntimeException("ClickHouse timed out")));
        assertTrue(episode.open());
        assertEquals(List.of("warn: normalize of flow f, table t", "debug: normalize of flow f, table t",
                "debug: normalize of flow f, table t"), logged);
        assertEquals(List.of("metric started",
                "record ClickHouse refused at " + NOW + " retry " + NOW.plusMillis(1_000),
                "record ClickHouse refused at " + NOW + " retry " + NOW.plusMillis(2_000),
                "record ClickHouse timed out at " + NOW + " retry " + NOW.plusMillis(3_000)), calls);

        logged.clear();
        calls.clear();
        assertTrue(episode.succeeded(), "the success clears the catalog's error");
        assertFalse(episode.open());
        assertEquals(List.of("info: normalize of flow f, table t"), logged);
        assertEquals(List.of("metric ended", "clear"), calls);

        calls.clear();
        assertFalse(episode.succeeded(), "a success outside an episode writes nothing");
        assertEquals(List.of(), calls);
        assertEquals(1_000, episode.failed(new RuntimeException("again")), "a success resets the backoff");
        assertEquals(List.of("metric started", "record again at " + NOW + " retry " + NOW.plusMillis(1_000)), calls);
    }

    @Test
    void aCatalogThatCannotBeReachedDoesNotStopTheEpisode() {
        ErrorEpisode episode = episode();
        catalogDown = true;
        assertEquals(1_000, episode.failed(new RuntimeException("S3 refused")));
        assertEquals(List.of("metric started"), calls);
        assertEquals(List.of("warn: normalize of flow f, table t", "debug: normalize of flow f, table t"), logged,
                "the failure, then the failed write at debug level");

        // clearing fails: the failure propagates to the caller's retry, and the next success clears
        calls.clear();
        assertThrows(IllegalStateException.class, episode::succeeded);
        assertEquals(List.of("metric ended"), calls);
        catalogDown = false;
        assertTrue(episode.succeeded());
        assertEquals(List.of("metric ended", "clear"), calls);
    }

    @Test
    void anErrorLeftByAnEarlierTaskIsClearedByTheFirstSuccess() {
        ErrorEpisode episode = episode();
        episode.errorLeftInCatalog();
        assertTrue(episode.succeeded());
        assertEquals(List.of("clear"), calls, "no episode of this task was open: no metric, no recovery line");
        assertEquals(List.of(), logged);
        assertFalse(episode.succeeded());
    }

    @Test
    void anErrorIsDescribedByItsOwnOrItsCausesMessageCutTo2000Characters() {
        assertEquals("refused", ErrorEpisode.describe(new RuntimeException("refused")));
        assertEquals("connection reset", ErrorEpisode.describe(new RuntimeException(null, new java.io.IOException("connection reset"))));
        assertEquals("NullPointerException", ErrorEpisode.describe(new NullPointerException()));
        String described = ErrorEpisode.describe(new RuntimeException("x".repeat(3_000)));
        assertEquals(2_001, described.length());
        assertTrue(described.endsWith("…"));
    }
}
