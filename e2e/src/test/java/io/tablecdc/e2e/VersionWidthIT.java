package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * {@code tablecdc.version} beyond 64 bits, through the stage sink into the real ClickHouse engine: a Postgres commit
 * LSN at or past 2^47 (and up to 2^64) gives versions of up to 80 bits. New tables get a UInt128
 * {@code _tablecdc_version} (ReplacingMergeTree takes it as its version column) and order such versions; a table
 * created earlier with a UInt64 version keeps loading versions below 2^63 in both normalize modes, and one that does
 * not fit stops that table with an error naming it.
 */
class VersionWidthIT {
    private static final LocalStack stack = LocalStack.get();
    private static final Schema KEY = SchemaBuilder.struct().name("vw_key").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("vw_value").field("id", Schema.INT64_SCHEMA)
            .field("v", Schema.STRING_SCHEMA).build();
    private static final BigInteger TWO_63 = BigInteger.ONE.shiftLeft(63);
    private static final BigInteger TWO_64 = BigInteger.ONE.shiftLeft(64);
    private static String catalogUrl;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase("versionwidth_catalog");
        clickhouse = stack.clickhouse().client();
    }

    private static Map<String, String> sinkConfig(String topicsRegex, String stage) {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, stage);
        config.put("topics.regex", topicsRegex);
        config.put("stage.local.dir", StackPaths.workDir("vw-local-" + stage).toString());
        config.put("normalize.backoff.initial.ms", "500");
        config.put("normalize.backoff.max.ms", "2000");
        return config;
    }

    private static Map<String, String> headers(String flow, String table, String op, BigInteger version, long batch,
                                               boolean last) {
        Map<String, String> headers = new HashMap<>(Headers.of(flow, table, op, 0, batch, last));
        headers.put("tablecdc.version", version.toString());
        return headers;
    }

    private static Struct key(long id) {
        return new Struct(KEY).put("id", id);
    }

    private static Struct row(long id, String v) {
        return new Struct(VALUE).put("id", id).put("v", v);
    }

    /** The version of change {@code ordinal} of a transaction committed at {@code lsn} (Postgres pipeline scheme). */
    private static BigInteger version(BigInteger lsn, int ordinal) {
        return lsn.shiftLeft(16).add(BigInteger.valueOf(ordinal));
    }

    @Test
    void versionsOfCommitLsnsNear2To63AndBeyondOrderRowsInANewUInt128Table() throws Exception {
        String flow = "vw-flow";
        String table = "vw.wide";
        String topic = "vwit.wide";
        BigInteger near63 = TWO_63.subtract(BigInteger.valueOf(0x1000));
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, key(1), row(1, "at 2^63 - 4096"), headers(flow, table, "c", version(near63, 1), 1, false));
            producer.send(topic, key(2), row(2, "max"), headers(flow, table, "c", version(TWO_64.subtract(BigInteger.ONE),
                    65535), 1, true));
            // one LSN later, past 2^63: wins over row 1's first image
            producer.send(topic, key(1), row(1, "past 2^63"), headers(flow, table, "u", version(TWO_63, 1), 2, true));
            // a later batch carrying an older change of row 1 (committed earlier) must not win
            producer.send(topic, key(1), row(1, "stale"), headers(flow, table, "u", version(near63, 2), 3, true));
        }
        ConnectRestClient rest = stack.connect().rest();
        rest.putConfig("vw-sink", sinkConfig("vwit\\.wide", "vw-stage"));
        try {
            awaitCatalog(flow, table, "normalized_batch_id::text", "3", Duration.ofSeconds(90));
            assertEquals("UInt128", clickhouse.queryAll("SELECT type FROM system.columns WHERE table = 'vw_wide'"
                    + " AND name = '_tablecdc_version'").get(0).getString("type"));
            assertTrue(clickhouse.queryAll("SELECT engine_full FROM system.tables WHERE name = 'vw_wide'").get(0)
                    .getString("engine_full").startsWith("ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted)"));
            List<GenericRecord> rows = clickhouse.queryAll("SELECT id, v, toString(_tablecdc_version) AS version"
                    + " FROM vw_wide FINAL ORDER BY id");
            assertEquals(2, rows.size());
            assertEquals("past 2^63", rows.get(0).getString("v"));
            assertEquals(version(TWO_63, 1).toString(), rows.get(0).getString("version"));
            assertEquals(version(TWO_64.subtract(BigInteger.ONE), 65535).toString(), rows.get(1).getString("version"));
        } finally {
            rest.delete("vw-sink");
        }
    }

    @Test
    void aTableWithAUInt64VersionKeepsLoadingVersionsThatFitInPullAndPushAndRefusesOneThatDoesNot() throws Exception {
        for (String mode : List.of("pull", "push")) {
            String flow = "vw-legacy-" + mode;
            String table = "vwl." + mode;
            String topic = "vwlit." + mode;
            clickhouse.execute("CREATE TABLE vwl_" + mode + " (id Int64, v String, _tablecdc_version UInt64,"
                    + " _tablecdc_is_deleted UInt8) ENGINE = ReplacingMergeTree(_tablecdc_version, _tablecdc_is_deleted)"
                    + " ORDER BY id").get().close();
            BigInteger largestThatFits = TWO_63.subtract(BigInteger.ONE);
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
                producer.send(topic, key(1), row(1, "old"), headers(flow, table, "c", BigInteger.valueOf(5), 1, true));
                producer.send(topic, key(1), row(1, "new"), headers(flow, table, "u", largestThatFits, 2, true));
                producer.send(topic, key(2), row(2, "fits"), headers(flow, table, "c", BigInteger.valueOf(7), 3, true));
            }
            Map<String, String> config = sinkConfig("vwlit\\." + mode, "vwl-stage-" + mode);
            config.put("normalize.mode", mode);
            if (mode.equals("push")) {
                config.put("stage.uri", StackPaths.workDir("vwl-file-stage").toUri().toString());
            }
            ConnectRestClient rest = stack.connect().rest();
            rest.putConfig("vwl-sink-" + mode, config);
            try {
                awaitCatalog(flow, table, "normalized_batch_id::text", "3", Duration.ofSeconds(90));
                List<GenericRecord> rows = clickhouse.queryAll("SELECT id, v, toString(_tablecdc_version) AS version"
                        + " FROM vwl_" + mode + " FINAL ORDER BY id");
                assertEquals("new", rows.get(0).getString("v"), mode);
                assertEquals(largestThatFits.toString(), rows.get(0).getString("version"), mode);
                assertEquals("fits", rows.get(1).getString("v"), mode);
                assertEquals("UInt64", clickhouse.queryAll("SELECT type FROM system.columns WHERE table = 'vwl_" + mode
                        + "' AND name = '_tablecdc_version'").get(0).getString("type"), "the column stays as it was");

                try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers())) {
                    producer.send(topic, key(3), row(3, "too wide"), headers(flow, table, "c", TWO_63, 4, true));
                }
                String error = awaitCatalogError(flow, table, Duration.ofSeconds(90));
                assertTrue(error.contains("UInt64 _tablecdc_version column of") && error.contains("vwl_" + mode)
                        && error.contains("recreate the table"), mode + ": " + error);
                assertEquals("3", catalog(flow, table, "normalized_batch_id::text"), "nothing of the batch loaded");
            } finally {
                rest.delete("vwl-sink-" + mode);
            }
        }
    }

    private static String catalog(String flow, String table, String column) throws Exception {
        try (Connection c = stack.postgres().connect("versionwidth_catalog");
             PreparedStatement ps = c.prepareStatement("SELECT " + column + " FROM cdc_table_replication_state"
                     + " WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : "(no row)";
            }
        } catch (java.sql.SQLException e) {
            if ("42P01".equals(e.getSQLState())) {
                return "(no row)"; // the sink has not created the catalog yet
            }
            throw e;
        }
    }

    private static void awaitCatalog(String flow, String table, String column, String expected, Duration timeout)
            throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            last = catalog(flow, table, column);
            if (expected.equals(last)) {
                return;
            }
            Thread.sleep(300);
        }
        throw new AssertionError(column + " of " + flow + "/" + table + " never became '" + expected + "'; last '" + last
                + "'; error: " + catalog(flow, table, "last_error"));
    }

    private static String awaitCatalogError(String flow, String table, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            String error = catalog(flow, table, "last_error");
            if (error != null && !error.equals("(no row)")) {
                return error;
            }
            Thread.sleep(300);
        }
        throw new AssertionError("no error recorded in the catalog for " + flow + "/" + table);
    }
}
