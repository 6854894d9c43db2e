package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.connect.errors.ConnectException;
import org.junit.jupiter.api.Test;

import io.tablecdc.catalog.FlowIdentity;
import io.tablecdc.pg.config.PgPipelineConfig;
import io.tablecdc.pg.wire.Lsn;

/** Which resumes {@link FlowRefusals#check} refuses, and that each message names the change and the way out. */
class FlowRefusalsTest {
    private static final FlowIdentity RECORDED = new FlowIdentity(PgPipelineSourceTask.SOURCE_KIND,
            "7311111111111111111", 1L, "tablecdc_00112233aabbccdd", "shop_pub", null);
    private static final SourceDatabase.SystemIdentity SAME = new SourceDatabase.SystemIdentity("7311111111111111111",
            1, Lsn.parse("0/16B3748"));

    private static PgPipelineConfig config(boolean failover, String publication) {
        Map<String, String> props = new HashMap<>();
        props.put("database.host", "pg.internal");
        props.put("database.dbname", "shop");
        props.put("database.user", "replicator");
        props.put("publication.name", publication);
        props.put("topic.prefix", "pg");
        props.put("slot.failover", Boolean.toString(failover));
        props.put("catalog.jdbc.url", "jdbc:postgresql://catalog:5432/tablecdc");
        return new PgPipelineConfig(props);
    }

    private static Optional<SourceDatabase.Slot> slot(boolean failover) {
        return Optional.of(new SourceDatabase.Slot(RECORDED.slot(), "pgoutput", "shop", Lsn.parse("0/16B3748"), "reserved",
                failover));
    }

    private static String refusal(PgPipelineConfig config, FlowIdentity recorded, SourceDatabase.SystemIdentity seen,
                                  Optional<SourceDatabase.Slot> slot) {
        return assertThrows(ConnectException.class, () -> FlowRefusals.check("orders", config, recorded, seen, slot))
                .getMessage();
    }

    @Test
    void aFirstStartOrAnUnchangedSourceIsAccepted() {
        assertFalse(FlowRefusals.check("orders", config(false, "shop_pub"), null, SAME, Optional.empty()));
        assertFalse(FlowRefusals.check("orders", config(false, "shop_pub"), RECORDED, SAME, slot(false)));
    }

    @Test
    void anotherClusterIsRefusedNamingBothIdentifiers() {
        String message = refusal(config(false, "shop_pub"), RECORDED,
                new SourceDatabase.SystemIdentity("7322222222222222222", 1, Lsn.parse("0/1")), slot(false));
        assertTrue(message.startsWith("flow orders refuses to resume: the source pg.internal:5432/shop is the cluster with"
                + " system identifier 7322222222222222222, but the flow was created on the cluster 7311111111111111111"),
                message);
        assertTrue(message.contains("Point database.host and database.port back at that cluster"), message);
    }

    @Test
    void anotherPublicationIsRefusedWithTheRecordedOne() {
        String message = refusal(config(false, "other_pub"), RECORDED, SAME, slot(false));
        assertTrue(message.contains("publication.name is 'other_pub', but the flow was created for publication"
                + " 'shop_pub'"), message);
        assertTrue(message.contains("Set publication.name back to 'shop_pub'"), message);
    }

    @Test
    void anotherKindOfFlowIsRefused() {
        FlowIdentity bigquery = FlowIdentity.ofKind("bigquery_query_cdc");
        String message = refusal(config(false, "shop_pub"), bigquery, SAME, Optional.empty());
        assertTrue(message.contains("reading from a bigquery_query_cdc source"), message);
        assertTrue(message.contains("Use another connector name"), message);
    }

    @Test
    void aNewTimelineIsAcceptedOnlyFromAFailoverSlotWithFailoverOn() {
        SourceDatabase.SystemIdentity promoted = new SourceDatabase.SystemIdentity("7311111111111111111", 2,
                Lsn.parse("0/3000000"));
        assertTrue(FlowRefusals.check("orders", config(true, "shop_pub"), RECORDED, promoted, slot(true)));

        String off = refusal(config(false, "shop_pub"), RECORDED, promoted, slot(true));
        assertTrue(off.contains("is on timeline 2, but the flow last streamed on timeline 1"), off);
        assertTrue(off.contains("slot.failover is false"), off);
        String missing = refusal(config(true, "shop_pub"), RECORDED, promoted, Optional.empty());
        assertTrue(missing.contains("does not exist on this server (the standby did not synchronize it"), missing);
        String notFailover = refusal(config(true, "shop_pub"), RECORDED, promoted, slot(false));
        assertTrue(notFailover.contains("is not a failover slot"), notFailover);
    }

    @Test
    void theSlotMessagesSayWhatToDo() {
        PgPipelineConfig config = config(false, "shop_pub");
        String invalidated = FlowRefusals.invalidated("orders", config, "tablecdc_00112233aabbccdd");
        assertTrue(invalidated.contains("wal_status = 'lost'") && invalidated.contains("invalidated.slot.behavior=recreate")
                && invalidated.contains("ALTER SYSTEM SET max_slot_wal_keep_size"), invalidated);
        String gone = FlowRefusals.slotGone("orders", config, "tablecdc_00112233aabbccdd", "Connect holds its position 0/1");
        assertTrue(gone.contains("does not exist on pg.internal:5432/shop, but the flow has streamed from it (Connect"
                + " holds its position 0/1)"), gone);
        String orphan = FlowRefusals.slotWithoutState("orders", config, "tablecdc_00112233aabbccdd", "0/1");
        assertTrue(orphan.contains("records no slot for this flow") && orphan.contains("DELETE /connectors/orders/offsets")
                && orphan.contains("pg_drop_replication_slot('tablecdc_00112233aabbccdd')"), orphan);
        assertTrue(FlowRefusals.failoverUnsupported(160004).contains("needs PostgreSQL 17 or later"));
    }
}
