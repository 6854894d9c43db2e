package io.tablecdc.common.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.common.metrics.JmxReporter;
import org.apache.kafka.common.metrics.KafkaMetricsContext;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.internals.PluginMetricsImpl;
import org.apache.kafka.common.utils.Time;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The registry against Kafka's own metrics classes and JMX reporter, set up the way a Connect worker sets them up
 * for a task (group {@code plugins}, tags {@code connector} and {@code task}, JMX domain {@code kafka.connect}),
 * with a clock the test moves.
 */
class TableMetricsTest {
    private static final MBeanServer jmx = ManagementFactory.getPlatformMBeanServer();

    private final SettableTime time = new SettableTime(Instant.parse("2026-01-01T00:00:00Z").toEpochMilli());
    private Metrics metrics;
    private PluginMetricsImpl pluginMetrics;
    private String connector;

    @BeforeEach
    void worker(org.junit.jupiter.api.TestInfo test) {
        metrics = new Metrics(new MetricConfig(), List.of(new JmxReporter()), time, new KafkaMetricsContext("kafka.connect"));
        connector = test.getTestMethod().orElseThrow().getName();
        LinkedHashMap<String, String> taskTags = new LinkedHashMap<>();
        taskTags.put("connector", connector);
        taskTags.put("task", "0");
        pluginMetrics = new PluginMetricsImpl(metrics, taskTags);
    }

    @AfterEach
    void stop() throws Exception {
        pluginMetrics.close();
        metrics.close();
    }

    private Supplier<Object> plugin() {
        return () -> pluginMetrics;
    }

    private ObjectName mbean(String flow, String table) throws Exception {
        return new ObjectName("kafka.connect:type=plugins,connector=" + connector + ",task=0,flow=" + flow + ",table=" + table);
    }

    private Object attribute(ObjectName name, String attribute) throws Exception {
        return jmx.getAttribute(name, attribute);
    }

    @Test
    void sourceGaugesAreOneMBeanPerTableUnderThePluginsGroup() throws Exception {
        TableMetrics source = TableMetrics.forSource(plugin(), "shop");
        assertTrue(source.enabled());
        TableMetrics.Table orders = source.table("public.orders");
        orders.batchSynced(2, 10);
        orders.batchSynced(3, 5);
        source.table("public.items").batchSynced(7, 1);

        ObjectName name = mbean("shop", "public.orders");
        assertEquals(15.0, attribute(name, "rows-synced-total"));
        assertEquals(2.0, attribute(name, "batches-synced-total"));
        assertEquals(3.0, attribute(name, "synced-batch-id"));
        assertEquals(0.0, attribute(name, "paused"));
        assertEquals("", attribute(name, "paused-reason"));
        assertEquals(0.0, attribute(name, "in-error"));
        assertEquals(0.0, attribute(name, "error-episodes-total"));
        assertTrue(Double.isNaN((Double) attribute(name, "lag-seconds")), "no lag before anything is known");
        assertEquals(1.0, attribute(mbean("shop", "public.items"), "rows-synced-total"));
        orders.batchIdKnown(9); // the catalog's id, read when a task starts
        assertEquals(9.0, attribute(name, "synced-batch-id"));
        assertEquals(2.0, attribute(name, "batches-synced-total"), "not counted as a batch");
        assertEquals(2, jmx.queryNames(new ObjectName("kafka.connect:type=plugins,connector=" + connector + ",*"), null).size());
    }

    @Test
    void sourceLagIsTheAgeOfTheNewestTimeReplicatedUpToAndNeverGoesBack() throws Exception {
        TableMetrics.Table t = TableMetrics.forSource(plugin(), "f").table("s.t");
        Instant now = Instant.ofEpochMilli(time.milliseconds());
        t.syncedUpTo(now.minusSeconds(90));
        assertEquals(90.0, attribute(mbean("f", "s.t"), "lag-seconds"));
        t.syncedUpTo(now.minusSeconds(120)); // an older batch acknowledged late
        time.sleep(1_500);
        assertEquals(91.5, attribute(mbean("f", "s.t"), "lag-seconds"));
        t.syncedUpTo(now.plusSeconds(5)); // the source's clock ahead of the worker's
        assertEquals(0.0, t.lagSeconds(time.milliseconds()));
    }

    @Test
    void sinkLagIsTheAgeOfTheOldestWaitingBatchAndZeroOnceDrained() throws Exception {
        TableMetrics sink = TableMetrics.forSink(plugin(), "sink");
        TableMetrics.Table t = sink.table("flow-a", "s.t");
        long now = time.milliseconds();
        assertEquals(0.0, t.lagSeconds(now), "nothing waits");
        t.batchWaiting(4, Instant.ofEpochMilli(now - 60_000)); // staged before the task started
        t.batchStaged(5, 100, Instant.ofEpochMilli(now - 10_000));
        t.batchStaged(6, 50, Instant.ofEpochMilli(now - 1_000));
        ObjectName name = mbean("flow-a", "s.t");
        assertEquals(60.0, attribute(name, "lag-seconds"));
        assertEquals(3.0, attribute(name, "batches-waiting"));
        assertEquals(6.0, attribute(name, "staged-batch-id"));
        assertEquals(150.0, attribute(name, "rows-staged-total"), "a batch from before the task is not counted as staged by it");
        assertEquals(0.0, attribute(name, "values-clamped-total"));
        t.valuesClamped(3);
        t.valuesClamped(0);
        assertEquals(3.0, attribute(name, "values-clamped-total"), "dates ClickHouse cannot hold, stored at its range's edge");

        t.normalizedUpTo(4); // it was loaded before a crash
        assertEquals(10.0, attribute(name, "lag-seconds"));
        TableMetrics.Table restarted = sink.table("flow-a", "s.other");
        restarted.normalizedUpTo(8); // read from the catalog at start, nothing staged
        assertEquals(8.0, attribute(mbean("flow-a", "s.other"), "staged-batch-id"), "what is normalized was staged");
        t.batchNormalized(5, 100);
        assertEquals(1.0, attribute(name, "lag-seconds"));
        t.batchNormalized(6, 50);
        assertEquals(0.0, attribute(name, "lag-seconds"));
        assertEquals(0.0, attribute(name, "batches-waiting"));
        assertEquals(6.0, attribute(name, "normalized-batch-id"));
        assertEquals(150.0, attribute(name, "rows-normalized-total"));
        assertEquals(2.0, attribute(name, "batches-normalized-total"));
        assertEquals(0.0, attribute(name, "normalize-loads-total"));
        t.loaded(); // batches 5 and 6 loaded together
        assertEquals(1.0, attribute(name, "normalize-loads-total"));

        // a batch staged again after it was loaded (a replay) does not wait forever
        t.batchStaged(6, 50, Instant.ofEpochMilli(now));
        assertEquals(0, t.batchesWaiting());
    }

    @Test
    void anErrorEpisodeCountsOnceHoweverManyRetriesFailAndEachKindIsItsOwn() throws Exception {
        TableMetrics.Table t = TableMetrics.forSink(plugin(), "sink").table("f", "s.t");
        ObjectName name = mbean("f", "s.t");
        t.errorEpisodeStarted("normalize");
        t.errorEpisodeStarted("normalize");
        t.errorEpisodeStarted("stage");
        assertEquals(1.0, attribute(name, "in-error"));
        assertEquals(2.0, attribute(name, "error-episodes-total"));
        t.errorEpisodeEnded("normalize");
        assertEquals(1.0, attribute(name, "in-error"), "the stage episode is still open");
        t.errorEpisodeEnded("stage");
        assertEquals(0.0, attribute(name, "in-error"));
        t.errorEpisodeStarted("normalize");
        assertEquals(3.0, attribute(name, "error-episodes-total"));
    }

    @Test
    void pausedCarriesItsReasonAsASeparateAttribute() throws Exception {
        TableMetrics.Table t = TableMetrics.forSource(plugin(), "f").table("s.t");
        t.paused("normalize_buffer_full");
        assertEquals(1.0, attribute(mbean("f", "s.t"), "paused"));
        assertEquals("normalize_buffer_full", attribute(mbean("f", "s.t"), "paused-reason"));
        t.resumed();
        assertEquals(0.0, attribute(mbean("f", "s.t"), "paused"));
        assertEquals("", attribute(mbean("f", "s.t"), "paused-reason"));
    }

    @Test
    void aRemovedTableLeavesJmxAndComesBackWithItsValuesWhenUsedAgain() throws Exception {
        TableMetrics sink = TableMetrics.forSink(plugin(), "sink");
        TableMetrics.Table t = sink.table("f", "s.gone");
        t.batchStaged(1, 3, Instant.ofEpochMilli(time.milliseconds()));
        sink.table("f", "s.stays");
        sink.remove("f", "s.gone");
        assertFalse(jmx.isRegistered(mbean("f", "s.gone")));
        assertTrue(jmx.isRegistered(mbean("f", "s.stays")));
        t.batchStaged(2, 4, Instant.ofEpochMilli(time.milliseconds())); // a normalize thread still holding it
        assertFalse(jmx.isRegistered(mbean("f", "s.gone")), "an update does not publish a removed table");

        assertSame(t, sink.table("f", "s.gone"));
        assertEquals(7.0, attribute(mbean("f", "s.gone"), "rows-staged-total"));
        sink.close();
        assertEquals(0, jmx.queryNames(new ObjectName("kafka.connect:type=plugins,connector=" + connector + ",*"), null).size());
    }

    @Test
    void aWorkerWithoutPluginMetricsGetsNoGaugesAndTheCallsStillWork() {
        TableMetrics old = TableMetrics.forSource(() -> {
            throw new NoSuchMethodError("org.apache.kafka.connect.source.SourceTaskContext.pluginMetrics()");
        }, "f");
        assertFalse(old.enabled());
        TableMetrics.Table t = old.table("s.t");
        t.batchSynced(1, 2);
        t.paused("normalize_buffer_full");
        assertEquals(2, t.rows());
        old.remove("f", "s.t");
        old.close();
        assertFalse(TableMetrics.forSink(() -> null, "sink").enabled());
    }

    @Test
    void theSameTableTwiceInOneTaskDoesNotFailTheTask() throws Exception {
        TableMetrics first = TableMetrics.forSource(plugin(), "f");
        first.table("s.t").batchSynced(1, 1);
        TableMetrics second = TableMetrics.forSource(plugin(), "f");
        second.table("s.t").batchSynced(1, 99);
        assertEquals(1.0, attribute(mbean("f", "s.t"), "rows-synced-total"), "the first registration stays");
    }

    @Test
    void aTableNameThatJmxMustQuoteIsQuoted() throws Exception {
        TableMetrics.forSource(plugin(), "f").table("odd:name,with=chars").batchSynced(1, 1);
        ObjectName quoted = new ObjectName("kafka.connect:type=plugins,connector=" + connector + ",task=0,flow=f,table="
                + ObjectName.quote("odd:name,with=chars"));
        assertEquals(1.0, attribute(quoted, "rows-synced-total"));
    }

    /** The worker's clock, moved by the test. */
    private static final class SettableTime implements Time {
        private volatile long ms;

        SettableTime(long ms) {
            this.ms = ms;
        }

        @Override
        public long milliseconds() {
            return ms;
        }

        @Override
        public long nanoseconds() {
            return TimeUnit.MILLISECONDS.toNanos(ms);
        }

        @Override
        public void sleep(long delayMs) {
            ms += delayMs;
        }
    }
}
