package io.tablecdc.e2e.flows;

import java.util.HashMap;
import java.util.Map;

import io.tablecdc.e2e.stack.LocalStack;

/** Connector configs of the sources against the local stack: BigQuery query CDC on the emulator, the Postgres pipeline. */
public final class SourceConfigs {
    public static final String QUERY_CDC = "io.tablecdc.bigquery.BigQueryQueryCdcSourceConnector";
    public static final String PG_PIPELINE = "io.tablecdc.pg.PgPipelineSourceConnector";

    private SourceConfigs() {
    }

    /**
     * A query CDC source reading {@code tables} ({@code table[:watermark[:keys]]} entries) of {@code dataset} in the
     * stack's emulator, polling every second with a one-second safety lag, one task per table, topics
     * {@code <topicPrefix>.<project.dataset.table>} with one partition, its catalog at {@code catalogUrl}. The map is
     * mutable.
     */
    public static Map<String, String> queryCdc(LocalStack stack, String catalogUrl, String dataset, String tables,
                                               int tasks, String topicPrefix) {
        Map<String, String> config = new HashMap<>();
        config.put("connector.class", QUERY_CDC);
        config.put("tasks.max", Integer.toString(tasks));
        config.put("bigquery.project", stack.bigquery().projectId());
        config.put("bigquery.dataset", dataset);
        config.put("bigquery.endpoint", stack.bigquery().endpoint());
        config.put("tables", tables);
        config.put("topic.prefix", topicPrefix);
        config.put("sync.interval.ms", "1000");
        config.put("safety.lag.ms", "1000");
        config.put("topic.creation.default.partitions", "1");
        config.put("topic.creation.default.replication.factor", "1");
        config.put("catalog.jdbc.url", catalogUrl);
        config.put("catalog.user", stack.postgres().user());
        config.put("catalog.password", stack.postgres().password());
        return config;
    }

    /**
     * A Postgres pipeline source on {@code database} of the stack's Postgres, streaming {@code publication} to topics
     * {@code <prefix>.<schema.table>} (one partition) with slot prefix {@code prefix}, one task (no copy), heartbeats
     * every 500 ms, its catalog at {@code catalogUrl}. The map is mutable.
     */
    public static Map<String, String> pgPipeline(LocalStack stack, String catalogUrl, String database, String publication,
                                                 String prefix) {
        Map<String, String> config = new HashMap<>();
        config.put("connector.class", PG_PIPELINE);
        config.put("tasks.max", "1");
        config.put("database.host", stack.postgres().host());
        config.put("database.port", Integer.toString(stack.postgres().port()));
        config.put("database.dbname", database);
        config.put("database.user", stack.postgres().user());
        config.put("database.password", stack.postgres().password());
        config.put("database.sslmode", "disable");
        config.put("publication.name", publication);
        config.put("slot.prefix", prefix);
        // stream only: tests that copy say so (the connector's default copies every table)
        config.put("table.sync.copy", "none");
        config.put("topic.prefix", prefix);
        config.put("heartbeat.interval.ms", "500");
        config.put("topic.creation.default.partitions", "1");
        config.put("topic.creation.default.replication.factor", "1");
        config.put("catalog.jdbc.url", catalogUrl);
        config.put("catalog.user", stack.postgres().user());
        config.put("catalog.password", stack.postgres().password());
        return config;
    }
}
