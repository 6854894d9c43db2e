package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import io.tablecdc.pg.wire.Lsn;

/** The flow's position: read, emitted, stored and confirmed. */
class FlowPositionTest {
    private static Lsn lsn(long v) {
        return Lsn.of(v);
    }

    @Test
    void onlyWhatTheFlushBeforeStoredIsConfirmed() {
        FlowPosition p = new FlowPosition(lsn(100), lsn(100));
        p.committed(lsn(200));
        // the first commit() confirms what was acknowledged before it: the start, already confirmed
        assertNull(p.takeToConfirm());
        p.committed(lsn(300));
        assertEquals(lsn(200), p.takeToConfirm(), "acknowledged before the previous commit(): stored");
        assertNull(p.takeToConfirm(), "once");
        p.committed(lsn(250));
        assertEquals(lsn(300), p.takeToConfirm());
        p.committed(lsn(400));
        assertNull(p.takeToConfirm(), "never back to 250");
    }

    @Test
    void theServersPositionAfterAReconnectIsNotConfirmedAgain() {
        FlowPosition p = new FlowPosition(lsn(100), lsn(100));
        p.committed(lsn(200));
        p.committed(lsn(300));
        p.serverConfirmed(lsn(250));
        assertNull(p.takeToConfirm(), "200 is behind what the server holds");
        p.serverConfirmed(lsn(150));
        p.committed(lsn(400));
        assertEquals(lsn(300), p.takeToConfirm());
    }

    @Test
    void theReadPositionNeverMovesBackAndRecordsAreSpaced() {
        FlowPosition p = new FlowPosition(lsn(100), lsn(50));
        p.readTo(lsn(300));
        p.readTo(lsn(200));
        assertEquals(lsn(300), p.read());
        assertTrue(p.emitDue(lsn(150), 1_000, 1_000));
        p.emitted(lsn(150), 1_000);
        assertFalse(p.emitDue(lsn(150), 5_000, 1_000), "not past the last one");
        assertFalse(p.emitDue(lsn(160), 1_500, 1_000), "too soon");
        assertTrue(p.emitDue(lsn(160), 2_000, 1_000), "boundary: exactly the interval later");
    }
}
