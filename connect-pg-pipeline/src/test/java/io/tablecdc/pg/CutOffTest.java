package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import io.tablecdc.pg.ApplyTask.RunState;
import io.tablecdc.pg.wire.Lsn;

class CutOffTest {
    private static final Lsn CUT = Lsn.parse("0/5000");

    @Test
    void aStreamingTableKeepsChangesCommittedAtOrAfterItsCutOff() {
        assertFalse(ApplyTask.keeps(RunState.STREAMING, CUT, Lsn.parse("0/4FFF")), "below: the copy sent it");
        assertTrue(ApplyTask.keeps(RunState.STREAMING, CUT, CUT), "equal: the apply task's");
        assertTrue(ApplyTask.keeps(RunState.STREAMING, CUT, Lsn.parse("0/5001")), "above: the apply task's");
    }

    /**
     * The marker's LSN is the end of its WAL record: a commit record written directly after it starts there, so a
     * transaction committed right after the marker has commit LSN equal to the marker's. The copy stops at the marker
     * and never sends it: the apply task must.
     */
    @Test
    void aHeldTableKeepsChangesCommittedAtOrAfterTheMarker() {
        assertFalse(ApplyTask.keeps(RunState.HOLDING, CUT, Lsn.parse("0/4FFF")), "below: the copy sent it");
        assertTrue(ApplyTask.keeps(RunState.HOLDING, CUT, CUT), "equal: committed right after the marker");
        assertTrue(ApplyTask.keeps(RunState.HOLDING, CUT, Lsn.parse("0/5001")), "above: the apply task's");
    }

    @Test
    void aSkippedTableKeepsNothing() {
        assertFalse(ApplyTask.keeps(RunState.SKIPPING, null, Lsn.parse("0/5001")));
    }

    /**
     * A transaction that began before the copy's snapshot but committed after it is not in the snapshot: it is
     * streamed with its commit LSN, at or past the consistent point, and must win over the copied row.
     */
    @Test
    void aTransactionBegunBeforeTheSnapshotAndCommittedAfterItWinsOverTheCopiedRow() {
        Lsn consistentPoint = Lsn.parse("0/5000");
        java.math.BigInteger copied = ChangeVersion.snapshot(consistentPoint);
        java.math.BigInteger streamed = ChangeVersion.of(Lsn.parse("0/5000"), 1);
        assertTrue(streamed.compareTo(copied) > 0);
        // and a change committed before the snapshot (already in the copied row) loses to the copy
        assertTrue(ChangeVersion.of(Lsn.parse("0/4FF0"), 3).compareTo(copied) < 0);
    }

    @Test
    void aTruncateFragmentsReplayIdIsScopedToItsTable() {
        assertEquals("901/3/table/16384", TableCopy.replayId(901, 3, 16384));
        assertTrue(!TableCopy.replayId(901, 3, 16384).equals(TableCopy.replayId(901, 3, 16390)));
        assertTrue(TableCopy.copySlotPrefix("tablecdc", "tablecdc_0123456789abcdef").matches("tablecdc_copy_[0-9a-f]{8}_"));
    }
}
