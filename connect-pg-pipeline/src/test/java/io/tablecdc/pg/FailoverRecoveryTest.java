package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Optional;

import org.junit.jupiter.api.Test;

import io.tablecdc.catalog.Phase;
import io.tablecdc.pg.FailoverRecovery.TablePhase;
import io.tablecdc.pg.wire.Lsn;

class FailoverRecoveryTest {
    /** The history file of timeline 3 after two promotions, as the server sends it. */
    private static final String HISTORY = "1\t0/3000060\tno recovery target specified\n\n"
            + "2\t0/5A0000A8\tno recovery target specified\n";

    @Test
    void theSwitchPointIsWhereTheFlowsTimelineEndedInTheNewOnesHistory() {
        assertEquals(Optional.of(Lsn.parse("0/3000060")), FailoverRecovery.switchPoint(HISTORY, 1));
        assertEquals(Optional.of(Lsn.parse("0/5A0000A8")), FailoverRecovery.switchPoint(HISTORY, 2));
        assertEquals(Optional.empty(), FailoverRecovery.switchPoint(HISTORY, 3));
        assertEquals(Optional.empty(), FailoverRecovery.switchPoint("", 1));
    }

    /**
     * A table handed over (or started) past the switch point S was copied or caught up from WAL the new timeline does
     * not have: it is copied again. At S and below, the handover is on both timelines.
     */
    @Test
    void tablesWhosePositionLiesPastTheSwitchPointAreCopiedAgain() {
        Lsn s = Lsn.parse("0/5000");
        List<TablePhase> tables = List.of(
                new TablePhase("s.ready_below", Phase.READY, "0/4FFF"),
                new TablePhase("s.ready_at", Phase.READY, "0/5000"),
                new TablePhase("s.ready_above", Phase.READY, "0/5001"),
                new TablePhase("s.catchup_above", Phase.CATCHUP, "0/6000"),
                new TablePhase("s.catchup_below", Phase.CATCHUP, "0/4000"),
                new TablePhase("s.held_above", Phase.COPYING, "0/5008"),
                new TablePhase("s.copying", Phase.COPYING, null),
                new TablePhase("s.pending", Phase.PENDING, null),
                new TablePhase("s.errored", Phase.ERRORED, null));
        assertEquals(List.of("s.ready_above", "s.catchup_above", "s.held_above"),
                FailoverRecovery.pastSwitchPoint(tables, s));
        // LSNs compare as numbers, not text
        assertEquals(List.of("s.t"), FailoverRecovery.pastSwitchPoint(
                List.of(new TablePhase("s.t", Phase.READY, "0/10000")), Lsn.parse("0/A000")));
        // without a known switch point every positioned table is copied again
        assertEquals(6, FailoverRecovery.pastSwitchPoint(tables, Lsn.of(0)).size());
    }
}
