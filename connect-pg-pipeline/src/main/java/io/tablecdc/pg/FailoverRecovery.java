package io.tablecdc.pg;

import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.Phase;
import io.tablecdc.catalog.TableState;
import io.tablecdc.pg.wire.Lsn;

/**
 * After a promotion the flow accepted (its failover slot is on the new primary): the standby's history forked from
 * the old timeline at the switch point S, and whatever the old primary wrote at or past S is not on the new timeline.
 * The main slot never read past what the standby had (synchronized standby slots), but a copy task's temporary slot
 * is not a failover slot and may have: a table handed over at a marker m past S was copied and caught up from WAL the
 * new timeline does not have, and the new timeline's changes in [S, m) would be dropped by the cut-off. Such tables
 * (and a table not copied that became ready past S) go back to {@code pending}: copied again from a new snapshot,
 * its copy starting with a truncate (or, when not copied, ready again where the flow is now).
 *
 * <p>Runs before the new timeline is recorded in {@code cdc_flow}, so a crash in between runs it again; putting a
 * table back to pending is idempotent.
 */
final class FailoverRecovery {
    private static final Logger log = LoggerFactory.getLogger(FailoverRecovery.class);

    private FailoverRecovery() {
    }

    /** A table's phase and phase LSN, as the rule needs them. */
    record TablePhase(String table, Phase phase, String phaseLsn) {
        static TablePhase of(TableState state) {
            return new TablePhase(state.table(), state.phase(), state.phaseLsn());
        }
    }

    /**
     * The LSN where {@code oldTimeline} ended in the history file of the new timeline (lines {@code <parent
     * timeline>\t<switch point>\t<reason>}); empty when the history does not name it.
     */
    static Optional<Lsn> switchPoint(String history, long oldTimeline) {
        for (String line : history.split("\n")) {
            String trimmed = line.trim();
            if (trimmed.isEmpty() || trimmed.startsWith("#")) {
                continue;
            }
            String[] parts = trimmed.split("\\s+");
            if (parts.length >= 2 && parts[0].matches("[0-9]+") && Long.parseLong(parts[0]) == oldTimeline) {
                return Optional.of(Lsn.parse(parts[1]));
            }
        }
        return Optional.empty();
    }

    /**
     * The tables whose copy handover, catch-up or start of streaming lies past the switch point: {@code copying} with
     * a recorded marker, {@code catchup} or {@code ready} at an LSN above {@code switchPoint}. At S itself the marker's
     * record ended before the fork and is on both timelines.
     */
    static List<String> pastSwitchPoint(List<TablePhase> tables, Lsn switchPoint) {
        List<String> past = new ArrayList<>();
        for (TablePhase t : tables) {
            boolean positioned = t.phase() == Phase.COPYING || t.phase() == Phase.CATCHUP || t.phase() == Phase.READY;
            if (positioned && t.phaseLsn() != null && Lsn.parse(t.phaseLsn()).isAfter(switchPoint)) {
                past.add(t.table());
            }
        }
        return past;
    }

    /**
     * Reads the switch point from the new timeline's history ({@code TIMELINE_HISTORY} on the replication
     * connection) and puts the tables past it back to pending. Without the old timeline in the history, every table
     * with a position goes back to pending (copied again: nothing of the old timeline can be trusted).
     *
     * @return the tables put back to pending
     */
    static List<String> afterPromotion(Catalog catalog, String flow, Connection replication, long oldTimeline,
                                       long newTimeline) throws SQLException {
        Optional<Lsn> switchPoint = switchPoint(timelineHistory(replication, newTimeline), oldTimeline);
        Lsn s = switchPoint.orElse(Lsn.of(0));
        if (switchPoint.isEmpty()) {
            log.warn("flow {}: the history of timeline {} does not name timeline {}: every table with a position is"
                    + " copied again", flow, newTimeline, oldTimeline);
        }
        List<String> past = pastSwitchPoint(catalog.progress().listTables(flow).stream().map(TablePhase::of).toList(), s);
        for (String table : past) {
            catalog.phases().setPending(flow, table);
        }
        if (!past.isEmpty()) {
            log.warn("flow {}: timeline {} forked from timeline {} at {}; tables handed over or started past it are"
                    + " pending again and are copied again (the new timeline does not have what their copy read): {}",
                    flow, newTimeline, oldTimeline, s, past);
        } else {
            log.info("flow {}: timeline {} forked from timeline {} at {}; no table was handed over past it", flow,
                    newTimeline, oldTimeline, s);
        }
        return past;
    }

    /** The content of the timeline's history file, from the server ({@code TIMELINE_HISTORY}). */
    static String timelineHistory(Connection replication, long timeline) throws SQLException {
        try (Statement s = replication.createStatement();
             ResultSet rs = s.executeQuery("TIMELINE_HISTORY " + timeline)) {
            if (!rs.next()) {
                return "";
            }
            int type = rs.getMetaData().getColumnType(2);
            if (type == Types.BINARY || type == Types.VARBINARY || type == Types.LONGVARBINARY) {
                String text = rs.getString(2);
                if (text != null && text.startsWith("\\x")) {
                    return new String(HexFormat.of().parseHex(text.substring(2)), StandardCharsets.UTF_8);
                }
                return text == null ? "" : text;
            }
            String text = rs.getString(2);
            return text == null ? "" : text;
        }
    }
}
