package io.tablecdc.e2e.flows;

import java.util.HashMap;
import java.util.Map;

import io.tablecdc.e2e.stack.LocalStack;

/** Connector configs of the ClickHouse stage sink against the local stack, as tests and the quickstart deploy it. */
public final class SinkConfigs {
    private SinkConfigs() {
    }

    /**
     * A sink staging into the stack's S3 bucket under {@code stagePrefix}, loading into the stack's
     * ClickHouse in pull mode, with its catalog at {@code catalogUrl}; the caller adds {@code topics} or
     * {@code topics.regex}. The map is mutable. ClickHouse tables are named after the source table
     * ({@code table.name.format=${table}}, e.g. {@code public_orders}), not after the topic (the default), so that
     * tests address them by the table they replicate; {@link #defaultNames} removes that.
     */
    public static Map<String, String> stageSink(LocalStack stack, String catalogUrl, String stagePrefix) {
        Map<String, String> config = new HashMap<>();
        config.put("connector.class", "io.tablecdc.clickhouse.ClickHouseStageSinkConnector");
        config.put("tasks.max", "1");
        config.put("clickhouse.url", stack.clickhouse().httpUrl());
        config.put("clickhouse.user", stack.clickhouse().user());
        if (!stack.clickhouse().password().isEmpty()) {
            config.put("clickhouse.password", stack.clickhouse().password());
        }
        config.put("stage.uri", "s3://" + stack.objectStore().bucket() + "/" + stagePrefix);
        config.put("stage.s3.endpoint", stack.objectStore().endpoint());
        config.put("stage.s3.region", stack.objectStore().region());
        config.put("stage.s3.access.key", stack.objectStore().accessKey());
        config.put("stage.s3.secret.key", stack.objectStore().secretKey());
        config.put("catalog.jdbc.url", catalogUrl);
        config.put("catalog.user", stack.postgres().user());
        config.put("catalog.password", stack.postgres().password());
        config.put("consumer.override.auto.offset.reset", "earliest");
        // a killed worker's sink consumer holds its partitions until its session runs out (45 s by default), and a
        // test that kills a worker waits for it
        config.put("consumer.override.session.timeout.ms", "6000");
        config.put("consumer.override.heartbeat.interval.ms", "1500");
        config.put("table.name.format", "${table}");
        return config;
    }

    /**
     * {@link #stageSink} for the topics of one flow ({@code <topicPrefix>.*}), with the settings the end-to-end tests of
     * flows share: the normalize backoff of a test (0.5 s doubling to 2 s, not minutes) and the consumer's metadata
     * refreshed every second, so that a table's topic created by the source is subscribed at once.
     */
    public static Map<String, String> flowSink(LocalStack stack, String catalogUrl, String stagePrefix, String topicPrefix) {
        Map<String, String> config = stageSink(stack, catalogUrl, stagePrefix);
        config.put("topics.regex", topicPrefix + "\\..*");
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "2000");
        config.put("consumer.override.metadata.max.age.ms", "1000");
        return config;
    }

    /** {@code config} without a {@code table.name.format}: ClickHouse tables are named after their topics. */
    public static Map<String, String> defaultNames(Map<String, String> config) {
        config.remove("table.name.format");
        return config;
    }
}
