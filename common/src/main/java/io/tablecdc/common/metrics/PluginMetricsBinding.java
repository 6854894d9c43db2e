package io.tablecdc.common.metrics;

import java.util.LinkedHashMap;
import java.util.function.LongFunction;

import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.Gauge;
import org.apache.kafka.common.metrics.PluginMetrics;

/**
 * {@link MetricsBinding} on Kafka's plugin metrics (KIP-877): the worker adds the {@code connector} and
 * {@code task} tags, puts every gauge in the {@code plugins} group and publishes it through its metric
 * reporters (JMX: {@code kafka.connect:type=plugins,connector=…,task=…,<our tags>}). The only class that
 * names Kafka's metric types: it is loaded only once the worker handed out a {@link PluginMetrics}.
 */
final class PluginMetricsBinding implements MetricsBinding {
    private final PluginMetrics metrics;

    private PluginMetricsBinding(PluginMetrics metrics) {
        this.metrics = metrics;
    }

    static MetricsBinding of(Object pluginMetrics) {
        return new PluginMetricsBinding((PluginMetrics) pluginMetrics);
    }

    @Override
    public Object add(String name, String description, LinkedHashMap<String, String> tags, LongFunction<Object> value) {
        MetricName metricName = metrics.metricName(name, description, tags);
        metrics.addMetric(metricName, (Gauge<Object>) (config, now) -> value.apply(now));
        return metricName;
    }

    @Override
    public void remove(Object handle) {
        metrics.removeMetric((MetricName) handle);
    }
}
