package io.tablecdc.pg;

import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;

import org.apache.kafka.connect.errors.ConnectException;
import org.postgresql.PGConnection;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.Phase;
import io.tablecdc.pg.config.PgPipelineConfig;
import io.tablecdc.pg.wire.Lsn;

/**
 * The flow's main slot: creates it, checks it (at start and on every reconnect), recreates it when the server
 * invalidated it and {@code invalidated.slot.behavior=recreate}, and refuses everything else with the words of
 * {@link FlowRefusals}: a lost slot (by default), a slot of another plugin or database, a missing slot the flow has
 * streamed from, and (at a first start) a slot of this flow that the catalog does not know.
 */
final class SlotManager {
    private static final Logger log = LoggerFactory.getLogger(SlotManager.class);

    private final String flow;
    private final PgPipelineConfig config;
    private final Catalog catalog;
    private final Function<String, String> storedPosition;

    /** What a check found: the slot to stream from (a new one when it was recreated) and where it starts. */
    record Checked(String slot, Lsn start, boolean recreated) {
    }

    /**
     * @param storedPosition the flow's position Connect stores for a slot ({@code X/Y}), or null
     */
    SlotManager(String flow, PgPipelineConfig config, Catalog catalog, Function<String, String> storedPosition) {
        this.flow = flow;
        this.config = config;
        this.catalog = catalog;
        this.storedPosition = storedPosition;
    }

    /** A new main slot name, {@code <slot.prefix>_<16 hex digits>}. */
    String newName() {
        byte[] random = new byte[8];
        new SecureRandom().nextBytes(random);
        return config.slotPrefix() + "_" + HexFormat.of().formatHex(random);
    }

    /**
     * First start as far as the catalog knows (no slot recorded): refuses when a slot shaped like this flow's main
     * slot exists on the database and Connect holds this flow's position for it: the catalog was wiped or
     * {@code catalog.jdbc.url} changed, and starting over here would forget what was already replicated.
     */
    void refuseSlotWithoutState(Connection sql) throws SQLException {
        for (String candidate : SourceDatabase.mainSlotsLike(sql, config.slotPrefix(), config.database())) {
            String position = storedPosition.apply(candidate);
            if (position != null) {
                throw new ConnectException(FlowRefusals.slotWithoutState(flow, config, candidate, position));
            }
        }
    }

    /**
     * Checks the slot and returns where a table without offsets starts. A missing slot is created at a start when the
     * flow has not streamed from it yet; {@code streamingEvidence} (the apply task's position, on a reconnect) says
     * it has, so a missing slot is refused. A lost slot is refused, or replaced with
     * {@code invalidated.slot.behavior=recreate}: every table back to pending, the new name recorded, the lost slot
     * dropped and the new one created ({@link Checked#recreated()}).
     */
    Checked ensure(Connection sql, Connection replication, String slot, String streamingEvidence) throws SQLException {
        Optional<SourceDatabase.Slot> existing = SourceDatabase.slot(sql, slot);
        if (existing.isPresent()) {
            SourceDatabase.Slot s = existing.get();
            if ("lost".equals(s.walStatus())) {
                if (!config.recreateInvalidatedSlot()) {
                    throw new ConnectException(FlowRefusals.invalidated(flow, config, slot));
                }
                String fresh = newName();
                return new Checked(fresh, recreate(sql, replication, slot, fresh), true);
            }
            if (!"pgoutput".equals(s.plugin()) || !config.database().equals(s.database())) {
                throw new ConnectException(FlowRefusals.foreignSlot(flow, config, s));
            }
            return new Checked(slot, s.confirmedFlush(), false);
        }
        String streamed = streamingEvidence;
        if (streamed == null && storedPosition.apply(slot) != null) {
            streamed = "Connect holds its position " + storedPosition.apply(slot);
        }
        if (streamed == null) {
            // tables that stream(ed) from the slot; a pending, copying or errored table starts over with a copy anyway
            List<String> started = catalog.progress().listTables(flow).stream()
                    .filter(t -> t.phase() == Phase.CATCHUP || t.phase() == Phase.READY)
                    .map(t -> t.table() + " " + t.phase().sqlName()).toList();
            if (!started.isEmpty()) {
                streamed = "the catalog has tables past pending (" + String.join(", ", started) + ")";
            }
        }
        if (streamed != null) {
            throw new ConnectException(FlowRefusals.slotGone(flow, config, slot, streamed));
        }
        return new Checked(slot, create(sql, replication, slot), false);
    }

    Lsn create(Connection sql, Connection replication, String slot) throws SQLException {
        Lsn point;
        if (config.slotFailover()) {
            point = SourceDatabase.createFailoverSlot(sql, slot);
        } else {
            PGConnection pg = replication.unwrap(PGConnection.class);
            point = Lsn.of(pg.getReplicationAPI().createReplicationSlot().logical().withSlotName(slot)
                    .withOutputPlugin("pgoutput").make().getConsistentPoint().asLong());
        }
        log.info("flow {}: created replication slot {} at {}{}", flow, slot, point,
                config.slotFailover() ? " (failover)" : "");
        return point;
    }

    /**
     * {@code invalidated.slot.behavior=recreate}: every table back to pending and the new slot's name recorded (one
     * catalog transaction), then the lost slot dropped and the new one created. The old slot's offsets belong to
     * its partition and are never read again; each table's copy starts with a truncate, so ClickHouse keeps no row
     * from before. A crash after the catalog step finds the new slot recorded, missing and every table pending:
     * the slot is created then (and the lost one, if still there, stays; it holds no WAL).
     */
    private Lsn recreate(Connection sql, Connection replication, String lost, String fresh) throws SQLException {
        List<String> pending = catalog.flows().replaceSlot(flow, lost, fresh);
        boolean dropped = SourceDatabase.dropSlot(sql, lost);
        log.warn("flow {}: replication slot {} was invalidated by the server (wal_status lost); invalidated.slot.behavior"
                + "=recreate: {} slot {}, new slot {}; {} tables back to pending to be copied again: {}", flow, lost,
                dropped ? "dropped" : "could not drop (in use)", lost, fresh, pending.size(), pending);
        List<String> stale = SourceDatabase.dropStaleSlots(sql, TableCopy.copySlotPrefix(config.slotPrefix(), lost));
        if (!stale.isEmpty()) {
            log.info("flow {}: dropped copy slots of the lost slot: {}", flow, stale);
        }
        // the private slots of tables detached from the lost slot: every table is copied again, no one reads them
        // again, and the slot checks look only at the new slot's
        List<String> detached = SourceDatabase.dropStaleSlots(sql, Detacher.slotPrefix(config.slotPrefix(), lost));
        if (!detached.isEmpty()) {
            log.info("flow {}: dropped private slots of tables detached from the lost slot: {}", flow, detached);
        }
        return create(sql, replication, fresh);
    }
}
