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

    /**
     * A table being detached at marker {@code m} (the end of the marker's record): the apply task keeps what committed
     * before it; a transaction committed right after the marker (commit LSN {@code m}) is the private slot's, which
     * starts decoding at {@code m} (the server skips a transaction whose commit record starts before it).
     */
    @Test
    void aTableBeingDetachedKeepsChangesFromItsCutOffUntilBeforeItsDetachMarker() {
        Lsn detach = Lsn.parse("0/9000");
        assertFalse(ApplyTask.keeps(RunState.STREAMING, CUT, detach, Lsn.parse("0/4FFF")), "below the cut-off");
        assertTrue(ApplyTask.keeps(RunState.STREAMING, CUT, detach, CUT), "at the cut-off");
        assertTrue(ApplyTask.keeps(RunState.STREAMING, CUT, detach, Lsn.parse("0/8FFF")), "just before the marker");
        assertFalse(ApplyTask.keeps(RunState.STREAMING, CUT, detach, detach), "committed right after the marker");
        assertFalse(ApplyTask.keeps(RunState.STREAMING, CUT, detach, Lsn.parse("0/9001")), "after the marker");
        assertTrue(ApplyTask.keeps(RunState.STREAMING, CUT, null, Lsn.parse("0/9001")), "not detached");
    }

    @Test
    void aDetachMarkerNamesItsTableAndSlotAndOnlyItsFlowsParse() {
        String content = Detacher.markerContent("f1", "s.orders", "tablecdc_detach_0a1b2c3d_beef01");
        String[] parts = Detacher.parseMarker("f1", content);
        assertEquals("s.orders", parts[0]);
        assertEquals("tablecdc_detach_0a1b2c3d_beef01", parts[1]);
        assertEquals("s.two\nlines", Detacher.parseMarker("f1", Detacher.markerContent("f1", "s.two\nlines", "x"))[0],
                "a table name with a line break");
        assertEquals(null, Detacher.parseMarker("f2", content));
        assertTrue(Detacher.slotPrefix("tablecdc", "tablecdc_0123456789abcdef").matches("tablecdc_detach_[0-9a-f]{8}_"));
        assertEquals(TableCopy.copySlotPrefix("tablecdc", "m").replace("_copy_", "_detach_"),
                Detacher.slotPrefix("tablecdc", "m"));
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
