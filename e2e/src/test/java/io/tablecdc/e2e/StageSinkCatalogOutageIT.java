package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.types.Password;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.CatalogConfig.CatalogSettings;
import io.tablecdc.catalog.CatalogUnavailableException;
import io.tablecdc.e2e.faults.FaultProxy;
import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The catalog cannot be reached when the sink (re)starts: Postgres answers its role with "too many connections"
 * (SQLSTATE 53300, set up here with {@code CONNECTION LIMIT 0}), an outage rather than a wrong setting. The connector
 * and its task must keep running, retry, and load once the catalog takes connections again.
 */
class StageSinkCatalogOutageIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DB = "sink_outage_catalog";
    private static final String ROLE = "sink_outage";
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA).build();
    private static String catalogUrl;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase(DB);
        try (Connection c = stack.postgres().connect(DB); Statement s = c.createStatement()) {
            s.execute("CREATE ROLE " + ROLE + " LOGIN PASSWORD 'outage-pw'");
            s.execute("ALTER DATABASE " + DB + " OWNER TO " + ROLE);
        }
        clickhouse = stack.clickhouse().client();
    }

    private static void connectionLimit(int limit) throws Exception {
        try (Connection c = stack.postgres().connect(DB); Statement s = c.createStatement()) {
            s.execute("ALTER ROLE " + ROLE + " CONNECTION LIMIT " + limit);
            if (limit == 0) {
                s.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + ROLE + "'");
            }
        }
    }

    @Test
    void aSinkRestartedWhileTheCatalogIsUnreachableWaitsForItInsteadOfFailing() throws Exception {
        String flow = "flow-outage";
        String topic = "sinkoutage.t";
        String connector = "sink-outage";
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "outage");
        config.put("topics", topic);
        config.put("catalog.user", ROLE);
        config.put("catalog.password", "outage-pw");
        config.put("stage.local.dir", StackPaths.workDir("sink-outage-local").toString());
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, new Struct(KEY).put("id", 1L), new Struct(VALUE).put("id", 1L), Headers.of(flow, "outage.t", "c", 1, 1, true));
        }
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig(connector, config);
        rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
        awaitCount(1, Duration.ofSeconds(60));

        connectionLimit(0);
        rest.restart(connector, true, false);
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers())) {
            producer.send(topic, new Struct(KEY).put("id", 2L), new Struct(VALUE).put("id", 2L), Headers.of(flow, "outage.t", "c", 2, 2, true));
        }
        // the outage lasts a few retries of the task (1 s, 2 s, 4 s)
        Thread.sleep(8_000);
        connectionLimit(-1);
        awaitCount(2, Duration.ofSeconds(90));
        // running, not failed (awaited: the restart may still show RESTARTING at the moment the rows arrive)
        rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
        rest.delete(connector);
    }

    /**
     * Batches staged before a restart whose start met a catalog outage, of a table that sends nothing more (a detached
     * Postgres table, a BigQuery table at its {@code max.unnormalized.batches}, a quiet producer): nothing but a scan of
     * the catalog starts their normalize loop. Before: {@code open()} looked them up once and gave up without a
     * catalog, and the loops started only with a table's next record, so the batch stayed staged for good (and a
     * source waiting for it waited for ever). Now the lookup is retried until it succeeds, and repeated every 30 s.
     */
    @Test
    void aBatchStagedBeforeARestartDuringACatalogOutageLoadsWithoutANewRecord() throws Exception {
        String flow = "flow-stranded";
        String topic = "sinkstranded.t";
        String connector = "sink-stranded";
        java.net.URI clickhouseUri = java.net.URI.create(stack.clickhouse().httpUrl());
        try (FaultProxy proxy = FaultProxy.start("stranded-clickhouse", clickhouseUri.getHost(), clickhouseUri.getPort())) {
            Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "stranded");
            config.put("topics", topic);
            config.put("catalog.user", ROLE);
            config.put("catalog.password", "outage-pw");
            config.put("clickhouse.url", "http://127.0.0.1:" + proxy.port());
            config.put("stage.local.dir", StackPaths.workDir("sink-stranded-local").toString());
            ConnectRestClient rest = stack.connect().rest();
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
                producer.send(topic, new Struct(KEY).put("id", 1L), new Struct(VALUE).put("id", 1L),
                        Headers.of(flow, "stranded.t", "c", 1, 1, true));
                rest.putConfig(connector, config);
                rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
                awaitCount(1, "stranded_t", Duration.ofSeconds(60));
                // ClickHouse refuses: batch 2 is staged and not loaded
                proxy.refuse();
                producer.send(topic, new Struct(KEY).put("id", 2L), new Struct(VALUE).put("id", 2L),
                        Headers.of(flow, "stranded.t", "c", 2, 2, true));
            }
            PgChecks.awaitTrue(() -> stagedBatches(flow, "stranded.t") == 1, Duration.ofSeconds(60),
                    "batch 2 was never staged");
            // the sink's task starts again while the catalog refuses its role (stopped, then resumed: a new task
            // instance, whose start finds no catalog); no record arrives after it
            connectionLimit(0);
            rest.stop(connector);
            rest.awaitStatus(connector, st -> "STOPPED".equals(st.path("connector").path("state").asText()),
                    Duration.ofSeconds(60));
            rest.resume(connector);
            rest.awaitRunning(connector, 1, Duration.ofSeconds(90));
            Thread.sleep(2_000);
            proxy.pass();
            connectionLimit(-1);
            awaitCount(2, "stranded_t", Duration.ofSeconds(90));
            PgChecks.awaitTrue(() -> stagedBatches(flow, "stranded.t") == 0, Duration.ofSeconds(30),
                    "batch 2's stage row stayed after its load");
            rest.awaitRunning(connector, 1, Duration.ofSeconds(60));
            rest.delete(connector);
        }
    }

    private static long stagedBatches(String flow, String table) throws Exception {
        try (Connection c = stack.postgres().connect(DB); java.sql.PreparedStatement ps = c.prepareStatement(
                "SELECT count(*) FROM cdc_table_avro_stage WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (java.sql.ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    /**
     * The catalog goes away between a start's first connection and its schema check (found by a randomized run,
     * seed 6019, where it ended the sink task for good): the probe connection succeeds, the migration's connection is
     * refused. That is an outage (the task waits and retries), not a broken schema; once the catalog is back the
     * same start succeeds.
     */
    @Test
    void theCatalogGoingAwayDuringTheSchemaCheckOfAStartIsAnOutage() throws Exception {
        stack.postgres().createDatabase(DB + "_check");
        try (FaultProxy proxy = FaultProxy.start("catalog-check", stack.postgres().host(), stack.postgres().port())) {
            CatalogSettings settings = new CatalogSettings("jdbc:postgresql://127.0.0.1:" + proxy.port() + "/" + DB
                    + "_check", stack.postgres().user(), new Password(stack.postgres().password()), true, 2, 5_000);
            proxy.refuseAfter(1);
            CatalogUnavailableException outage = assertThrows(CatalogUnavailableException.class,
                    () -> Catalog.open(settings, "outage-check").close());
            assertTrue(outage.getMessage().contains("schema check"), outage.getMessage());
            assertTrue(proxy.accepted() >= 2, "the probe passed and a later connection was refused");
            proxy.pass();
            try (Catalog catalog = Catalog.open(settings, "outage-check")) {
                assertEquals(List.of(), catalog.progress().listTables("no-such-flow"));
            }
        }
    }

    private static void awaitCount(long expected, Duration timeout) throws InterruptedException {
        awaitCount(expected, "outage_t", timeout);
    }

    private static void awaitCount(long expected, String table, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            try {
                long n = clickhouse.queryAll("SELECT count() AS n FROM " + table + " FINAL").get(0).getLong("n");
                if (n == expected) {
                    return;
                }
                last = Long.toString(n);
            } catch (RuntimeException e) {
                last = e.getMessage();
            }
            Thread.sleep(300);
        }
        throw new AssertionError(table + " never had " + expected + " rows; last " + last);
    }
}
