package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.faults.FaultProxy;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * A failover of the source with {@code slot.failover=true} on PostgreSQL 17: a primary and a standby (a base backup
 * taken with {@code pg_backup_start}/{@code pg_backup_stop}, physical streaming through a physical slot,
 * {@code sync_replication_slots=on}), a flow streaming from the primary, the standby promoted and the primary shut
 * down, the flow pointed at the new primary: it resumes on the new timeline from the synchronized slot and ClickHouse
 * equals Postgres, rows written around the promotion included.
 */
class PgFailoverIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String SOURCE = "io.tablecdc.pg.PgPipelineSourceConnector";
    private static final String DATABASE = "fo_source";

    private static String query(Connection c, String sql, String... params) throws SQLException {
        return PgStandbyPair.query(c, sql, params);
    }

    @Test
    void aPromotedStandbyResumesTheFlowFromItsFailoverSlot() throws Exception {
        failover(false);
    }

    /**
     * Issue 35 item 1: the standby promoted while the flow runs, behind an address that follows the primary (a proxy
     * retargeted to the standby), with no connector restart. The apply task accepts the new timeline on its reconnect;
     * it used to skip the failover recovery there (only a start ran it), so the table handed over at a marker past the
     * switch point stayed at it and its changes on the new timeline before the marker were dropped.
     */
    @Test
    void aStandbyPromotedWhileTheFlowRunsGetsTheFailoverRecovery() throws Exception {
        failover(true);
    }

    private void failover(boolean whileRunning) throws Exception {
        String catalogUrl = stack.postgres().createDatabase(whileRunning ? "fo_running_catalog" : "fo_catalog");
        Client clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl())
                .setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                .compressServerResponse(false).build();
        String flow = whileRunning ? "fo-running-flow" : "fo-flow";
        ConnectRestClient rest = stack.connect().rest();
        try (PgStandbyPair pair = PgStandbyPair.start(whileRunning ? "failover-running-postgres" : "failover-postgres",
                DATABASE);
             FaultProxy address = whileRunning ? FaultProxy.start("fo-primary", "127.0.0.1", pair.primaryPort()) : null) {
            int primaryPort = pair.primaryPort();
            int standbyPort = pair.standbyPort();
            pair.sqlOnPrimary(DATABASE, "CREATE SCHEMA fo",
                    "CREATE TABLE fo.t (id int PRIMARY KEY, v int NOT NULL)",
                    "INSERT INTO fo.t SELECT g, 0 FROM generate_series(1, 1000) g",
                    "CREATE TABLE fo.u (id int PRIMARY KEY, v int NOT NULL)",
                    "INSERT INTO fo.u SELECT g, 0 FROM generate_series(1, 1000) g",
                    "CREATE PUBLICATION fo_pub FOR TABLE fo.t, fo.u");

            PgChecks onPrimary = new PgChecks(stack, () -> PgStandbyPair.connect(primaryPort, DATABASE), catalogUrl, clickhouse);
            PgChecks onStandby = new PgChecks(stack, () -> PgStandbyPair.connect(standbyPort, DATABASE), catalogUrl, clickhouse);
            Map<String, String[]> tables = Map.of("fo.t", new String[] {"id::text || '|' || v::text",
                "concat(toString(id), '|', toString(v))"}, "fo.u", new String[] {"id::text || '|' || v::text",
                "concat(toString(id), '|', toString(v))"});
            Map<String, String> source = new HashMap<>();
            source.put("connector.class", SOURCE);
            source.put("tasks.max", "2");
            source.put("database.host", "127.0.0.1");
            source.put("database.port", Integer.toString(whileRunning ? address.port() : primaryPort));
            source.put("database.dbname", DATABASE);
            source.put("database.user", "postgres");
            source.put("database.password", "");
            source.put("database.sslmode", "disable");
            source.put("publication.name", "fo_pub");
            source.put("slot.prefix", "fo");
            source.put("slot.failover", "true");
            source.put("table.sync.copy", "all");
            source.put("topic.prefix", "fo");
            source.put("heartbeat.interval.ms", "500");
            source.put("topic.creation.default.partitions", "1");
            source.put("topic.creation.default.replication.factor", "1");
            source.put("catalog.jdbc.url", catalogUrl);
            source.put("catalog.user", stack.postgres().user());
            source.put("catalog.password", stack.postgres().password());
            Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, "fo-stage");
            sink.put("topics.regex", "fo\\..*");
            sink.put("normalize.backoff.initial.ms", "500");
            sink.put("normalize.backoff.max.ms", "2000");
            // the flow's topics appear after the sink subscribed
            sink.put("consumer.override.metadata.max.age.ms", "1000");
            rest.putConfig("fo-sink", sink);
            rest.putConfig(flow, source);
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            onPrimary.awaitTable(flow, "fo.t", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            onPrimary.awaitTable(flow, "fo.u", row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            onPrimary.sql("UPDATE fo.t SET v = 1 WHERE id <= 500", "INSERT INTO fo.t SELECT g, 1 FROM generate_series(1001, 1500) g");
            onPrimary.awaitEqual(tables, Duration.ofSeconds(120));

            String slot;
            try (Connection c = onPrimary.catalog()) {
                slot = query(c, "SELECT source_slot FROM cdc_flow WHERE flow_name = ?", flow);
            }
            // the standby's slot sync worker copies the failover slot once the primary's slot has moved past the
            // standby's own horizon; changes keep it moving
            int round = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (true) {
                if (pair.slotSynced(DATABASE, slot)) {
                    break;
                }
                assertTrue(System.nanoTime() < deadline, "the standby never synchronized slot " + slot);
                onPrimary.sql("UPDATE fo.t SET v = v + 1 WHERE id = " + (++round % 1500 + 1));
                Thread.sleep(1_000);
            }
            // rows written after the sync, some perhaps not yet read by the flow when the primary goes
            onPrimary.sql("INSERT INTO fo.t SELECT g, 2 FROM generate_series(1501, 1700) g", "DELETE FROM fo.t WHERE id % 50 = 0");
            String primaryEnd;
            try (Connection c = onPrimary.source()) {
                primaryEnd = query(c, "SELECT CAST(pg_current_wal_lsn() AS text)");
            }
            awaitTrue(() -> {
                try (Connection c = onStandby.source()) {
                    return "true".equals(query(c, "SELECT CAST(pg_last_wal_replay_lsn() >= CAST(? AS pg_lsn) AS text)",
                            primaryEnd));
                }
            }, Duration.ofSeconds(60), "the standby never replayed the primary's WAL");

            // a handover the standby never receives: the standby stops receiving WAL (its switch point S will be
            // here), then fo.u changes on the primary alone and is copied again; the copy's temporary slot is not a
            // failover slot, so it reads past S and hands fo.u over at a marker m > S
            onStandby.sql("ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_reload_conf()");
            awaitTrue(() -> {
                try (Connection c = onStandby.source()) {
                    return "0".equals(query(c, "SELECT CAST(count(*) AS text) FROM pg_stat_wal_receiver"));
                }
            }, Duration.ofSeconds(60), "the standby kept receiving WAL");
            String received;
            try (Connection c = onStandby.source()) {
                received = query(c, "SELECT CAST(pg_last_wal_receive_lsn() AS text)");
            }
            onPrimary.sql("INSERT INTO fo.u SELECT g, 9 FROM generate_series(1001, 3000) g", "DELETE FROM fo.u WHERE id <= 100");
            try (Connection c = onPrimary.catalog()) {
                // what tablecdc-reset-table does: the table is copied again at once
                query(c, "UPDATE cdc_table_replication_state SET phase = 'errored', phase_lsn = NULL,"
                        + " next_retry_at = now(), last_error = 'copied again by the test' WHERE flow_name = ?"
                        + " AND source_table_identifier = 'fo.u' RETURNING phase", flow);
            }
            Map<String, String> handedOver = onPrimary.awaitTable(flow, "fo.u", row -> "catchup".equals(row.get("phase")),
                    Duration.ofSeconds(120));
            try (Connection c = onPrimary.source()) {
                assertEquals("true", query(c, "SELECT CAST(CAST(? AS pg_lsn) > CAST(? AS pg_lsn) AS text)",
                        handedOver.get("phase_lsn"), received), "the handover " + handedOver + " lies past " + received);
            }
            String attemptBefore = handedOver.get("copy_attempt");

            if (whileRunning) {
                // the primary dies under the running flow; its address follows the promoted standby
                pair.stopPrimary();
                pair.promote(DATABASE);
                address.retarget("127.0.0.1", standbyPort);
            } else {
                rest.stop(flow);
                rest.awaitStatus(flow, s -> "STOPPED".equals(s.path("connector").path("state").asText()),
                        Duration.ofSeconds(60));
                pair.stopPrimary();
                pair.promote(DATABASE);
            }
            onStandby.sql("INSERT INTO fo.t SELECT g, 3 FROM generate_series(1701, 1800) g", "UPDATE fo.t SET v = 4 WHERE id <= 10");
            // changes of fo.u on the new timeline, committed between S and m: the old handover would drop them
            onStandby.sql("INSERT INTO fo.u SELECT g, 5 FROM generate_series(5001, 5100) g", "UPDATE fo.u SET v = 6 WHERE id <= 200");

            if (!whileRunning) {
                Map<String, String> moved = new HashMap<>(source);
                moved.put("database.port", Integer.toString(standbyPort));
                rest.putConfig(flow, moved);
                rest.resume(flow);
            }
            rest.awaitRunning(flow, 2, Duration.ofSeconds(90));
            onStandby.awaitEqual(tables, Duration.ofSeconds(180));
            Map<String, String> recopied = onStandby.table(flow, "fo.u");
            assertTrue(Integer.parseInt(recopied.get("copy_attempt")) > Integer.parseInt(attemptBefore),
                    "fo.u was copied again on the new timeline: " + recopied);
            try (Connection c = onStandby.catalog()) {
                assertEquals("2", query(c, "SELECT CAST(source_timeline AS text) FROM cdc_flow WHERE flow_name = ?", flow),
                        "the flow now records the new timeline");
                assertEquals(slot, query(c, "SELECT source_slot FROM cdc_flow WHERE flow_name = ?", flow),
                        "the same (synchronized) slot");
            }
            System.out.printf("pg failover%s: flow resumed on timeline 2 of the promoted standby from failover slot %s;"
                    + " ClickHouse equals Postgres%n", whileRunning ? " while running" : "", slot);
            rest.delete(flow);
            rest.delete("fo-sink");
        }
    }
}
