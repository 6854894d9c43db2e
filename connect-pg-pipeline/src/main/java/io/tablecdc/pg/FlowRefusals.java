package io.tablecdc.pg;

import java.util.Objects;
import java.util.Optional;

import org.apache.kafka.connect.errors.ConnectException;

import io.tablecdc.catalog.FlowIdentity;
import io.tablecdc.pg.config.PgPipelineConfig;

/**
 * Why a flow refuses to start, in words an operator can act on: each message names the flow, what the catalog's
 * {@code cdc_flow} (or Connect's offsets) recorded, what the source shows now, and what to do. A refusal is raised
 * before the task changes anything: no catalog row, slot or offset is written on the way to it.
 */
final class FlowRefusals {
    private FlowRefusals() {
    }

    private static String source(PgPipelineConfig config) {
        return config.host() + ":" + config.port() + "/" + config.database();
    }

    private static final String NEW_FLOW = "start a new flow (another connector name; it copies its tables again"
            + " with table.sync.copy=all)";

    /**
     * Compares what {@code cdc_flow} recorded with what the source shows now. Throws on a different source kind,
     * cluster, publication or timeline. A new timeline is accepted only with {@code slot.failover=true} when the
     * flow's slot exists on this server as a failover slot (a promoted standby that kept it in sync).
     *
     * @return whether the timeline changed and is accepted
     */
    static boolean check(String flow, PgPipelineConfig config, FlowIdentity recorded,
                         SourceDatabase.SystemIdentity seen, Optional<SourceDatabase.Slot> slot) {
        if (recorded == null) {
            return false;
        }
        checkKind(flow, recorded);
        if (recorded.systemIdentifier() != null && !recorded.systemIdentifier().equals(seen.systemIdentifier())) {
            throw new ConnectException(otherCluster(flow, config, recorded.systemIdentifier(), seen.systemIdentifier(),
                    recorded.slot()));
        }
        checkPublication(flow, config, recorded);
        if (recorded.timeline() == null || recorded.timeline() == seen.timeline()) {
            return false;
        }
        boolean failoverSlot = slot.isPresent() && slot.get().failover();
        if (config.slotFailover() && failoverSlot) {
            return true;
        }
        String why;
        if (!config.slotFailover()) {
            why = "slot.failover is false, so the slot may not have followed the switch and the changes around it may"
                    + " be missing";
        } else if (slot.isEmpty()) {
            why = "slot.failover is true, but the flow's slot " + recorded.slot() + " does not exist on this server (the"
                    + " standby did not synchronize it: sync_replication_slots=on, hot_standby_feedback=on and a"
                    + " primary_slot_name are needed on the standby)";
        } else {
            why = "slot.failover is true, but the flow's slot " + recorded.slot() + " is not a failover slot (it was"
                    + " created before slot.failover was set), so nothing kept it in step with the old server";
        }
        throw new ConnectException("flow " + flow + " refuses to resume: the source " + source(config) + " is on"
                + " timeline " + seen.timeline() + ", but the flow last streamed on timeline " + recorded.timeline()
                + " (cdc_flow.source_timeline): the server was promoted or restored from a backup, and " + why + ". "
                + capitalize(NEW_FLOW) + "; to survive a promotion next time, use slot.failover=true on PostgreSQL 17"
                + " or later.");
    }

    /** The source is another cluster (system identifier) than the one the flow was created on. */
    static String otherCluster(String flow, PgPipelineConfig config, String recorded, String seen, String slot) {
        return "flow " + flow + " refuses to resume: the source " + source(config) + " is the cluster with system"
                + " identifier " + seen + ", but the flow was created on the cluster " + recorded
                + " (cdc_flow.source_system_identifier): its slot " + slot + " and its positions exist only there."
                + " Point database.host and database.port back at that cluster, or, to replicate this one, " + NEW_FLOW
                + ".";
    }

    static void checkKind(String flow, FlowIdentity recorded) {
        if (recorded.sourceKind() != null && !PgPipelineSourceTask.SOURCE_KIND.equals(recorded.sourceKind())) {
            throw new ConnectException("flow " + flow + " refuses to start: the catalog records a flow of this name"
                    + " reading from a " + recorded.sourceKind() + " source (cdc_flow.source_kind), not "
                    + PgPipelineSourceTask.SOURCE_KIND + ": the connector name is already taken by another flow."
                    + " Use another connector name.");
        }
    }

    /** A different {@code publication.name} than the flow was created with. */
    static void checkPublication(String flow, PgPipelineConfig config, FlowIdentity recorded) {
        if (recorded.publication() != null && !recorded.publication().equals(config.publication())) {
            throw new ConnectException("flow " + flow + " refuses to resume: publication.name is '"
                    + config.publication() + "', but the flow was created for publication '" + recorded.publication()
                    + "' (cdc_flow.source_publication). Set publication.name back to '" + recorded.publication()
                    + "' (change its tables with ALTER PUBLICATION " + recorded.publication() + " ADD/DROP TABLE …),"
                    + " or, for the other publication, " + NEW_FLOW + ".");
        }
    }

    /** The main slot was invalidated (wal_status lost) and {@code invalidated.slot.behavior=reject}. */
    static String invalidated(String flow, PgPipelineConfig config, String slot) {
        return "flow " + flow + " refuses to resume: its replication slot " + slot + " on " + source(config)
                + " was invalidated by the server (pg_replication_slots.wal_status = 'lost'): the WAL it still needed"
                + " was removed, so changes the flow had not read are gone. To recover, set"
                + " invalidated.slot.behavior=recreate (with table.sync.copy=all): the flow"
                + " drops the lost slot, creates a new one and copies every table again, emptying its ClickHouse"
                + " table first; or " + NEW_FLOW + ". To keep it from happening again, raise max_slot_wal_keep_size"
                + " on the source (ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf(); -1 is"
                + " no limit) above the WAL written while the connector may be stopped.";
    }

    /** The flow's slot exists but is not a pgoutput slot of the configured database. */
    static String foreignSlot(String flow, PgPipelineConfig config, SourceDatabase.Slot slot) {
        return "flow " + flow + " refuses to resume: its replication slot " + slot.name() + " (cdc_flow.source_slot)"
                + " exists on " + source(config) + " but decodes with " + slot.plugin() + " on database "
                + slot.database() + ", not pgoutput on " + config.database() + ": it is not the slot this flow"
                + " created (database.dbname changed, or another program took the name). Set database.dbname back to "
                + Objects.requireNonNullElse(slot.database(), "the flow's database") + ", or " + NEW_FLOW + ".";
    }

    /** The recorded slot is missing but the flow has streamed from it ("a state without its slot"). */
    static String slotGone(String flow, PgPipelineConfig config, String slot, String evidence) {
        return "flow " + flow + " refuses to resume: its replication slot " + slot + " (cdc_flow.source_slot) does not"
                + " exist on " + source(config) + ", but the flow has streamed from it (" + evidence + "): the slot was"
                + " dropped, or the server was replaced or restored, and the changes since the flow's last position"
                + " are lost. Nothing was changed. If the database.* settings point at the wrong server, point them"
                + " back; otherwise " + NEW_FLOW + ".";
    }

    /** A slot of this flow exists with Connect offsets, but the catalog records none ("a slot without its state"). */
    static String slotWithoutState(String flow, PgPipelineConfig config, String slot, String lsn) {
        return "flow " + flow + " refuses to start: the catalog (" + config.catalog().jdbcUrl() + ") records no slot"
                + " for this flow in cdc_flow, but its slot " + slot + " exists on " + source(config) + " and Connect"
                + " holds the flow's position " + lsn + " in it: the catalog was wiped or catalog.jdbc.url points at"
                + " another catalog, and starting over would forget the tables' phases and batch ids. Point"
                + " catalog.jdbc.url back at the flow's catalog; or, to start this flow over from scratch, stop the"
                + " connector (PUT /connectors/" + flow + "/stop), delete its offsets (DELETE /connectors/" + flow
                + "/offsets), drop the slot (SELECT pg_drop_replication_slot('" + slot + "')) and resume it.";
    }

    /** {@code slot.failover=true} on a server without failover slots. */
    static String failoverUnsupported(int serverVersionNum) {
        return PgPipelineConfig.SLOT_FAILOVER_CONFIG + "=true needs PostgreSQL 17 or later (failover slots), but the"
                + " server's server_version_num is " + serverVersionNum + ". Set " + PgPipelineConfig.SLOT_FAILOVER_CONFIG
                + "=false, or upgrade the server.";
    }

    private static String capitalize(String s) {
        return Character.toUpperCase(s.charAt(0)) + s.substring(1);
    }
}
