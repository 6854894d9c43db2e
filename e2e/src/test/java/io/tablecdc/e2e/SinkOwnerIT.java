package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
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
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.flows.StatusScript;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Who loads a table (issue 46, items 6 and 8): a second sink on a table another sink loads is refused, naming that sink,
 * and the reload command refuses while that sink runs; a flow recreated under another name is refused at the sink,
 * naming the old flow and {@code tablecdc-retire-flow}, and loads without a restart once the old flow is retired.
 */
class SinkOwnerIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DB = "sink_owner_catalog";
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA).build();
    private static final String SINK_TOOLS = "tablecdc-connect-clickhouse-stage-sink-*";
    private static String catalogUrl;
    private static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase(DB);
        clickhouse = stack.clickhouse().client();
    }

    private static Struct key(long id) {
        return new Struct(KEY).put("id", id);
    }

    private static Struct row(long id, String customer) {
        return new Struct(VALUE).put("id", id).put("customer", customer);
    }

    /**
     * Two sinks, each into its own ClickHouse database, started together on one table: exactly one of them loads it,
     * every batch into its database; the other is refused with a message naming the first, and the reload its refusal
     * used to advise is refused while the first one runs (it would drop the first one's staged batches).
     */
    @Test
    void aSecondSinkOnATableIsRefusedAndTheFirstLoadsEveryBatch() throws Exception {
        String flow = "flow-twosinks";
        String table = "twosinks.t";
        String topic = "sinkowner.twosinks";
        ConnectRestClient rest = stack.connect().rest();
        List<String> sinks = List.of("sink-owner-a", "sink-owner-b");
        List<String> databases = List.of("sinkowner_a", "sinkowner_b");
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            for (long batch = 1; batch <= 3; batch++) {
                producer.send(topic, key(2 * batch - 1), row(2 * batch - 1, "r"), Headers.of(flow, table, "c", 2 * batch - 1, batch, false));
                producer.send(topic, key(2 * batch), row(2 * batch, "r"), Headers.of(flow, table, "c", 2 * batch, batch, true));
            }
            for (int i = 0; i < 2; i++) {
                clickhouse.queryAll("CREATE DATABASE IF NOT EXISTS " + databases.get(i));
                Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "owner" + i);
                config.put("topics", topic);
                config.put("clickhouse.database", databases.get(i));
                config.put("stage.local.dir", StackPaths.workDir(sinks.get(i) + "-local").toString());
                rest.putConfig(sinks.get(i), config);
            }
            for (String sink : sinks) {
                rest.awaitRunning(sink, 1, Duration.ofSeconds(60));
            }
            awaitCatalog(flow, table, "normalized_batch_id::text", "3", Duration.ofSeconds(90));
            for (long batch = 4; batch <= 5; batch++) {
                producer.send(topic, key(2 * batch - 1), row(2 * batch - 1, "r"), Headers.of(flow, table, "c", 2 * batch - 1, batch, false));
                producer.send(topic, key(2 * batch), row(2 * batch, "r"), Headers.of(flow, table, "c", 2 * batch, batch, true));
            }
            awaitCatalog(flow, table, "normalized_batch_id::text", "5", Duration.ofSeconds(90));

            String owner = catalogValue(flow, table, "sink_name");
            int first = sinks.indexOf(owner);
            assertTrue(first >= 0, "the table's row names one of the sinks: " + owner);
            String other = sinks.get(1 - first);
            assertEquals("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", ids(databases.get(first)),
                    "every batch in the database of " + owner);
            assertEquals("[]", ids(databases.get(1 - first)), "nothing in the database of " + other);

            // the refused sink says which sink holds the table and the ways out (rechecked, so recorded again)
            String error = awaitCatalogError(flow, table, "sink " + other, Duration.ofSeconds(120));
            assertTrue(error.contains("sink " + owner) && error.contains(databases.get(first) + ".twosinks_t")
                    && error.contains("catalog") && !error.contains("tablecdc-reload-table"), error);

            // the reload would drop what the first sink staged: refused while it runs
            String reload = StatusScript.runTool(stack, SINK_TOOLS, "tablecdc-reload-table", catalogUrl,
                    "--flow", flow, "--table", table);
            assertTrue(reload != null && reload.contains("sink " + owner) && !reload.contains("normalized batch id 5 -> 0"),
                    String.valueOf(reload));
            assertEquals("5", catalogValue(flow, table, "normalized_batch_id::text"), "the reload changed nothing");
            assertEquals(List.of("RUNNING", "RUNNING"), rest.states(other));
        } finally {
            for (String sink : sinks) {
                rest.delete(sink);
            }
        }
    }

    /**
     * A flow's connector recreated under another name writes the same table under the new flow name: the sink refuses
     * it (the ClickHouse table holds the old flow's rows), naming the old flow and tablecdc-retire-flow; once the
     * operator retired the old flow, the sink loads the new flow's table without a restart.
     */
    @Test
    void aRenamedFlowLoadsOnceTheOldFlowIsRetired() throws Exception {
        String oldFlow = "flow-before-rename";
        String newFlow = "flow-after-rename";
        String table = "renamed.t";
        String topic = "sinkowner.renamed";
        String sink = "sink-owner-renamed";
        ConnectRestClient rest = stack.connect().rest();
        clickhouse.execute("DROP TABLE IF EXISTS renamed_t").get().close();
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            producer.send(topic, key(1), row(1, "old"), Headers.of(oldFlow, table, "c", 1, 1, true));
            Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "renamed");
            config.put("topics", topic);
            config.put("stage.local.dir", StackPaths.workDir(sink + "-local").toString());
            rest.putConfig(sink, config);
            rest.awaitRunning(sink, 1, Duration.ofSeconds(60));
            awaitCatalog(oldFlow, table, "normalized_batch_id::text", "1", Duration.ofSeconds(60));

            // the source connector recreated under another name starts over: its batches count from 1 again
            producer.send(topic, key(1), row(1, "new"), Headers.of(newFlow, table, "c", 2, 1, false));
            producer.send(topic, key(2), row(2, "new"), Headers.of(newFlow, table, "c", 3, 1, true));
            String error = awaitCatalogError(newFlow, table, "flow " + oldFlow, Duration.ofSeconds(60));
            assertTrue(error.contains("tablecdc-retire-flow --flow " + oldFlow), error);
            assertEquals("[1=old]", rows("renamed_t"));

            String retired = StatusScript.runTool(stack, SINK_TOOLS, "tablecdc-retire-flow", catalogUrl, "--flow", oldFlow);
            assertTrue(retired != null && retired.contains("flow " + oldFlow + " retired"), String.valueOf(retired));
            assertEquals("(no row)", catalogValue(oldFlow, table, "normalized_batch_id::text"), "the old flow's rows are gone");

            // no restart: the refused table checks its claim again
            awaitCatalog(newFlow, table, "normalized_batch_id::text || '/' || coalesce(last_error, '-')", "1/-",
                    Duration.ofSeconds(120));
            assertEquals("[1=new, 2=new]", rows("renamed_t"));
            assertEquals(List.of("RUNNING", "RUNNING"), rest.states(sink));
        } finally {
            rest.delete(sink);
        }
    }

    /**
     * A Postgres pipeline flow's connector deleted and created again under another name (the documented rename): the
     * new flow makes a slot of its own and streams the table's new rows, which the sink refuses (the ClickHouse table is
     * the old flow's), naming the old flow and tablecdc-retire-flow. The command refuses without the source database
     * (the old flow's slot keeps WAL), then drops the old flow's slot and removes its rows; the new flow's rows load
     * without a restart, and its own slot stays. Then the new flow is started over under its name as documented (stop,
     * offsets deleted, retired, resumed): it copies its table again from a new slot.
     */
    @Test
    void aRenamedPostgresFlowIsRetiredWithItsSlotAndItsTableLoads() throws Exception {
        String database = "sinkowner_src";
        String oldFlow = "pgowner-flow";
        String newFlow = "pgowner-flow-renamed";
        String sink = "pgowner-sink";
        stack.postgres().createDatabase(database);
        sourceSql(database, "DROP PUBLICATION IF EXISTS pgowner_pub", "DROP SCHEMA IF EXISTS ownr CASCADE",
                "CREATE SCHEMA ownr", "CREATE TABLE ownr.moved (id bigint PRIMARY KEY, customer text NOT NULL)",
                "CREATE PUBLICATION pgowner_pub FOR TABLE ownr.moved");
        clickhouse.execute("DROP TABLE IF EXISTS ownr_moved").get().close();
        ConnectRestClient rest = stack.connect().rest();
        Map<String, String> sinkConfig = SinkConfigs.flowSink(stack, catalogUrl, "pgowner-stage", "pgowner");
        sinkConfig.put("stage.local.dir", StackPaths.workDir(sink + "-local").toString());
        try {
            rest.putConfig(sink, sinkConfig);
            rest.putConfig(oldFlow, SourceConfigs.pgPipeline(stack, catalogUrl, database, "pgowner_pub", "pgowner"));
            rest.awaitRunning(oldFlow, 1, Duration.ofSeconds(90));
            rest.awaitRunning(sink, 1, Duration.ofSeconds(90));
            String oldSlot = flowSlot(oldFlow);
            sourceSql(database, "INSERT INTO ownr.moved VALUES (1, 'a'), (2, 'b')");
            awaitRows("ownr_moved", "[1=a, 2=b]", Duration.ofSeconds(90));

            // the rename: the connector deleted, created again under another name with the same settings
            rest.delete(oldFlow);
            Map<String, String> renamed = SourceConfigs.pgPipeline(stack, catalogUrl, database, "pgowner_pub", "pgowner");
            // the flow under its new name copies its table (and again when it is started over)
            renamed.put("table.sync.copy", "all");
            rest.putConfig(newFlow, renamed);
            rest.awaitRunning(newFlow, 1, Duration.ofSeconds(90));
            String newSlot = flowSlot(newFlow);
            sourceSql(database, "INSERT INTO ownr.moved VALUES (3, 'c')", "UPDATE ownr.moved SET customer = 'a2' WHERE id = 1");
            String error = awaitCatalogError(newFlow, "ownr.moved", "flow " + oldFlow, Duration.ofSeconds(90));
            assertTrue(error.contains("tablecdc-retire-flow --flow " + oldFlow), error);
            assertEquals("[true]", slotsExist(database, oldSlot), "the old flow's slot keeps WAL until it is dropped");
            // the deleted connector's task let go of its slot
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (slotActive(database, oldSlot) && System.nanoTime() < deadline) {
                Thread.sleep(300);
            }

            String withoutSource = StatusScript.runTool(stack, SINK_TOOLS, "tablecdc-retire-flow", catalogUrl, "--flow", oldFlow);
            assertTrue(withoutSource != null && withoutSource.contains("replication slot " + oldSlot)
                    && withoutSource.contains("--source-url"), String.valueOf(withoutSource));
            String sourceUrl = "jdbc:postgresql://" + stack.postgres().host() + ":" + stack.postgres().port() + "/" + database;
            String retired = StatusScript.runTool(stack, "tablecdc-connect-pg-pipeline-*", "tablecdc-retire-flow", catalogUrl,
                    "--flow", oldFlow, "--source-url", sourceUrl, "--source-user", stack.postgres().user());
            assertTrue(retired != null && retired.contains("flow " + oldFlow + " retired") && retired.contains(oldSlot),
                    String.valueOf(retired));
            assertEquals("[false]", slotsExist(database, oldSlot), "the old flow's slot dropped");
            assertEquals("[true]", slotsExist(database, newSlot), "the new flow's slot kept");

            awaitRows("ownr_moved", "[1=a2, 2=b, 3=c]", Duration.ofSeconds(120));
            assertEquals(List.of("RUNNING", "RUNNING"), rest.states(newFlow));

            // the documented start-over under the same name: stop, delete the offsets, retire, resume; it copies the
            // table from a new slot (a row inserted meanwhile is there, a row that is in ClickHouse only is not)
            rest.stop(newFlow);
            rest.awaitStatus(newFlow, st -> "STOPPED".equals(st.path("connector").path("state").asText())
                    && st.path("tasks").isEmpty(), Duration.ofSeconds(60));
            rest.resetOffsets(newFlow);
            sourceSql(database, "INSERT INTO ownr.moved VALUES (4, 'd')");
            clickhouse.execute("INSERT INTO ownr_moved (id, customer, _tablecdc_version, _tablecdc_is_deleted)"
                    + " VALUES (99, 'only in ClickHouse', 0, 0)").get().close();
            String startedOver = StatusScript.runTool(stack, "tablecdc-connect-pg-pipeline-*", "tablecdc-retire-flow",
                    catalogUrl, "--flow", newFlow, "--source-url", sourceUrl, "--source-user", stack.postgres().user());
            assertTrue(startedOver != null && startedOver.contains("flow " + newFlow + " retired") && startedOver.contains(newSlot),
                    String.valueOf(startedOver));
            rest.resume(newFlow);
            rest.awaitRunning(newFlow, 1, Duration.ofSeconds(90));
            awaitRows("ownr_moved", "[1=a2, 2=b, 3=c, 4=d]", Duration.ofSeconds(120));
            String restartedSlot = flowSlot(newFlow);
            assertTrue(!restartedSlot.equals(newSlot), "a new slot: " + restartedSlot);
            assertEquals("[false]", slotsExist(database, newSlot), "the slot before the start-over dropped");
        } finally {
            for (String connector : List.of(newFlow, oldFlow, sink)) {
                if (rest.connectors().contains(connector)) {
                    rest.delete(connector);
                }
            }
        }
    }

    private static void sourceSql(String database, String... statements) throws Exception {
        try (Connection c = stack.postgres().connect(database); java.sql.Statement st = c.createStatement()) {
            for (String statement : statements) {
                st.execute(statement);
            }
        }
    }

    private static String slotsExist(String database, String slot) throws Exception {
        try (Connection c = stack.postgres().connect(database);
             PreparedStatement ps = c.prepareStatement("SELECT count(*) > 0 FROM pg_replication_slots WHERE slot_name = ?")) {
            ps.setString(1, slot);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return "[" + rs.getBoolean(1) + "]";
            }
        }
    }

    private static boolean slotActive(String database, String slot) throws Exception {
        try (Connection c = stack.postgres().connect(database);
             PreparedStatement ps = c.prepareStatement("SELECT active FROM pg_replication_slots WHERE slot_name = ?")) {
            ps.setString(1, slot);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() && rs.getBoolean(1);
            }
        }
    }

    private static String flowSlot(String flow) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (System.nanoTime() < deadline) {
            try (Connection c = stack.postgres().connect(DB);
                 PreparedStatement ps = c.prepareStatement("SELECT source_slot FROM cdc_flow WHERE flow_name = ?")) {
                ps.setString(1, flow);
                try (ResultSet rs = ps.executeQuery()) {
                    if (rs.next() && rs.getString(1) != null) {
                        return rs.getString(1);
                    }
                }
            }
            Thread.sleep(300);
        }
        throw new AssertionError("flow " + flow + " recorded no slot");
    }

    private static void awaitRows(String clickHouseTable, String expected, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            boolean exists = clickhouse.queryAll("SELECT count() AS n FROM system.tables WHERE database = currentDatabase()"
                    + " AND name = '" + clickHouseTable + "'").get(0).getLong("n") > 0;
            last = exists ? rows(clickHouseTable) : "(no table)";
            if (expected.equals(last)) {
                return;
            }
            Thread.sleep(500);
        }
        throw new AssertionError(clickHouseTable + " never held " + expected + "; last " + last);
    }

    private static String ids(String database) {
        if (clickhouse.queryAll("SELECT count() AS n FROM system.tables WHERE database = '" + database
                + "' AND name = 'twosinks_t'").get(0).getLong("n") == 0) {
            return "[]";
        }
        List<Long> out = new ArrayList<>();
        for (GenericRecord r : clickhouse.queryAll("SELECT id FROM " + database + ".twosinks_t FINAL ORDER BY id")) {
            out.add(r.getLong("id"));
        }
        return out.toString();
    }

    private static String rows(String clickHouseTable) {
        List<String> out = new ArrayList<>();
        for (GenericRecord r : clickhouse.queryAll("SELECT id, customer FROM \"" + clickHouseTable + "\" FINAL ORDER BY id")) {
            out.add(r.getLong("id") + "=" + r.getString("customer"));
        }
        return out.toString();
    }

    private static String catalogValue(String flow, String table, String expression) throws Exception {
        try (Connection c = stack.postgres().connect(DB);
             PreparedStatement ps = c.prepareStatement("SELECT " + expression + " FROM cdc_table_replication_state"
                     + " WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : "(no row)";
            }
        }
    }

    private static String awaitCatalogError(String flow, String table, String containing, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            last = catalogValue(flow, table, "last_error");
            if (last != null && last.contains(containing)) {
                return last;
            }
            Thread.sleep(300);
        }
        throw new AssertionError("the last error of " + flow + "/" + table + " never named '" + containing + "'; last '" + last + "'");
    }

    private static void awaitCatalog(String flow, String table, String expression, String expected, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = null;
        while (System.nanoTime() < deadline) {
            last = catalogValue(flow, table, expression);
            if (expected.equals(last)) {
                return;
            }
            Thread.sleep(300);
        }
        throw new AssertionError(expression + " of " + flow + "/" + table + " never became '" + expected + "'; last '" + last + "'");
    }
}
