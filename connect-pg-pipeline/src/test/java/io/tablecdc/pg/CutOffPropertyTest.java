package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

import io.tablecdc.pg.ApplyTask.RunState;
import io.tablecdc.pg.wire.Lsn;

/**
 * The copy/stream handover of one table against a model of the WAL (docs/pg-pipeline.md, "Copy, catch-up and
 * handover"). The copy side stops by <em>position</em>: its snapshot holds every transaction committed before its
 * consistent point {@code c0}, its temporary slot delivers the transactions after {@code c0} in WAL order and it stops
 * when its own marker arrives. The apply side decides by <em>LSN</em>: {@link ApplyTask#keeps} keeps a transaction
 * whose commit LSN is at or after the marker's LSN {@code m} (the end of the marker's record). The property: each
 * committed transaction of the table is delivered by exactly one of the two sides, however the apply task restarts
 * (resuming from any position at or before its first unsent change, its state read back from the catalog).
 */
class CutOffPropertyTest {

    /** One WAL record: a commit of the table (its commit LSN is where its commit record starts), or the marker. */
    record Rec(boolean marker, long start, long end) {
    }

    /** A generated WAL: records in order, the marker's index, the copy slot's consistent point. */
    record Wal(List<Rec> records, int markerIndex, long consistentPoint, List<Integer> restarts, int handoverAfter) {
        Lsn m() {
            return Lsn.of(records.get(markerIndex).end());
        }
    }

    /**
     * Gaps between records (0 = the next record starts where the previous one ends, as a commit directly after the
     * marker does, at exactly {@code m}), record lengths, where the marker and {@code c0} fall, and the apply task's
     * restarts (at event index, resuming from a random earlier position) and handover time.
     */
    @Provide
    Arbitrary<Wal> wals() {
        Arbitrary<List<Integer>> gaps = Arbitraries.integers().between(0, 3).list().ofMinSize(1).ofMaxSize(12);
        Arbitrary<List<Integer>> lengths = Arbitraries.integers().between(1, 4).list().ofSize(12);
        Arbitrary<Integer> markerAt = Arbitraries.integers().between(0, 11);
        Arbitrary<Integer> c0At = Arbitraries.integers().between(0, 11);
        // a restart: at event (value / 40), resuming at (value % (first unsent position + 1))
        Arbitrary<List<Integer>> restarts = Arbitraries.integers().between(0, 999).list().ofMaxSize(4)
                .map(l -> l.stream().sorted().toList());
        Arbitrary<Integer> handover = Arbitraries.integers().between(0, 12);
        return Combinators.combine(gaps, lengths, markerAt, c0At, restarts, handover).as((g, len, mi, ci, r, h) -> {
            List<Rec> records = new ArrayList<>();
            long at = 0x1000;
            int marker = Math.min(mi, g.size() - 1);
            for (int i = 0; i < g.size(); i++) {
                at += g.get(i);
                records.add(new Rec(i == marker, at, at + len.get(i)));
                at += len.get(i);
            }
            // c0: the start of some record at or before the marker (the consistent point precedes the marker)
            long c0 = records.get(Math.min(ci, marker)).start();
            return new Wal(records, marker, c0, r, h);
        });
    }

    @Property(tries = 2000)
    void everyCommittedChangeIsDeliveredByExactlyOneSide(@ForAll("wals") Wal wal) {
        Lsn m = wal.m();
        List<Rec> recs = wal.records();

        // the copy side: the snapshot (commits before c0), then its slot from c0 in WAL order until its own marker
        Set<Long> copied = new LinkedHashSet<>();
        for (Rec r : recs) {
            if (!r.marker() && r.start() < wal.consistentPoint()) {
                copied.add(r.start());
            }
        }
        for (Rec r : recs) {
            if (r.start() < wal.consistentPoint()) {
                continue;
            }
            if (r.marker()) {
                break;
            }
            copied.add(r.start());
        }

        // the apply side: the main slot from the start, SKIPPING while the table is copied without a marker
        Map<Long, Integer> streamed = new HashMap<>();
        RunState state = RunState.SKIPPING;
        Lsn lsn = null;
        String phase = "copying";        // the catalog: copying, copying(m), catchup(m)
        List<Long> held = new ArrayList<>();
        int firstHeld = -1;
        int pos = 0;
        int events = 0;
        int restartIndex = 0;
        boolean handedOver = false;
        int sinceMarker = -1;
        while (pos < recs.size()) {
            // a restart: held changes are lost, the stream resumes at or before the first unsent change, the table's
            // state comes back from the catalog
            if (restartIndex < wal.restarts().size() && events >= wal.restarts().get(restartIndex) / 40) {
                int limit = firstHeld >= 0 ? firstHeld : pos;
                pos = wal.restarts().get(restartIndex) % (limit + 1);
                restartIndex++;
                held.clear();
                firstHeld = -1;
                switch (phase) {
                    case "copying" -> { state = RunState.SKIPPING; lsn = null; }
                    case "copying(m)" -> { state = RunState.HOLDING; lsn = m; }
                    default -> { state = RunState.STREAMING; lsn = m; }
                }
                events++;
                continue;
            }
            Rec r = recs.get(pos);
            if (r.marker()) {
                // handoverMarker: a streaming table ignores it; otherwise copying(m) is recorded and the table held
                if (state != RunState.STREAMING) {
                    if (phase.equals("copying")) {
                        phase = "copying(m)";
                    }
                    if (phase.equals("copying(m)")) {
                        state = RunState.HOLDING;
                        lsn = Lsn.of(r.end());
                        sinceMarker = 0;
                    } else {
                        state = RunState.STREAMING;
                        lsn = Lsn.of(r.end());
                    }
                }
            } else if (ApplyTask.keeps(state, lsn, Lsn.of(r.start()))) {
                if (state == RunState.HOLDING) {
                    if (firstHeld < 0) {
                        firstHeld = pos;
                    }
                    held.add(r.start());
                } else {
                    streamed.merge(r.start(), 1, Integer::sum);
                }
            }
            pos++;
            events++;
            if (sinceMarker >= 0 && !handedOver) {
                sinceMarker++;
            }
            // the copy task hands over (catchup(m)) some events after the apply task recorded the marker
            if (phase.equals("copying(m)") && sinceMarker > wal.handoverAfter() % 4 && !handedOver) {
                handedOver = true;
                phase = "catchup(m)";
            }
            if (phase.equals("catchup(m)") && state == RunState.HOLDING && m.equals(lsn)) {
                for (long h : held) {
                    streamed.merge(h, 1, Integer::sum);
                }
                held.clear();
                firstHeld = -1;
                state = RunState.STREAMING;
            }
        }
        // the stream's end: the handover has happened by now
        if (state == RunState.HOLDING) {
            held.forEach(h -> streamed.merge(h, 1, Integer::sum));
        }

        for (Rec r : recs) {
            if (r.marker()) {
                continue;
            }
            boolean byCopy = copied.contains(r.start());
            boolean byStream = streamed.containsKey(r.start());
            assertTrue(byCopy ^ byStream, "the commit at " + Lsn.of(r.start()) + " (marker " + m + ") is sent by "
                    + (byCopy && byStream ? "both the copy and the stream" : "neither the copy nor the stream"));
        }
    }

    /** The rule on its own: for any cut-off and commit LSN, kept iff at or after the cut-off; a skipped table keeps none. */
    @Property(tries = 1000)
    void keepsIsAtOrAfterTheCutOff(@ForAll("lsns") long cut, @ForAll("lsns") long commit) {
        boolean expected = commit >= cut;
        assertEquals(expected, ApplyTask.keeps(RunState.STREAMING, Lsn.of(cut), Lsn.of(commit)));
        assertEquals(expected, ApplyTask.keeps(RunState.HOLDING, Lsn.of(cut), Lsn.of(commit)));
        assertEquals(false, ApplyTask.keeps(RunState.SKIPPING, null, Lsn.of(commit)));
    }

    @Provide
    Arbitrary<Long> lsns() {
        return Arbitraries.longs().between(1, 40).map(v -> 0x5000 - 20 + v);
    }
}
