package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * Batch ids handed out from blocks ({@link BatchIds#inBlocks}, what {@link BatchIds#reserved} and
 * {@link BatchIds#reservedWhileHolding} run on) over a model of the catalog's counter
 * ({@code Catalog.reserveBatchIds}: the table's counter, at least every id reserved, synced, normalized or staged,
 * moves up by the block and the block's first id is returned). Several tasks (an apply task, copy tasks) take ids
 * of the same tables, forget a table's block (it went to another task) or every block (a reconnect), restart (their
 * blocks are lost, the counter stays) and the sink reserves single ids too. Ids must never be used twice, each task's ids of a table
 * strictly increase across its restarts, and after a forget or a restart a task's next id is above every id any
 * task used before.
 */
class BatchIdsPropertyTest {
    private static final String[] TABLES = {"s.a", "s.b"};

    enum Kind { NEXT, FORGET, RECONNECT, RESTART, SINK_RESERVE, SYNCED_ELSEWHERE }

    record Op(Kind kind, int task, int table, int amount) {
    }

    @Provide
    Arbitrary<List<Op>> ops() {
        Arbitrary<Kind> kinds = Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(12, Arbitraries.just(Kind.NEXT)),
                net.jqwik.api.Tuple.of(2, Arbitraries.just(Kind.FORGET)),
                net.jqwik.api.Tuple.of(1, Arbitraries.just(Kind.RECONNECT)),
                net.jqwik.api.Tuple.of(2, Arbitraries.just(Kind.RESTART)),
                net.jqwik.api.Tuple.of(1, Arbitraries.just(Kind.SINK_RESERVE)),
                net.jqwik.api.Tuple.of(1, Arbitraries.just(Kind.SYNCED_ELSEWHERE)));
        return Combinators.combine(kinds, Arbitraries.integers().between(0, 2), Arbitraries.integers().between(0, 1),
                Arbitraries.integers().between(1, 7)).as(Op::new).list().ofMaxSize(80);
    }

    @Property(tries = 1000)
    void idsAreNeverReusedAndGrowAcrossRestarts(@ForAll("ops") List<Op> ops,
                                                 @ForAll("blocks") int block) {
        // the catalog: per table, the largest id reserved, synced, normalized or staged
        Map<String, Long> counter = new HashMap<>();
        List<BatchIds> tasks = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            tasks.add(BatchIds.inBlocks(t -> counter.merge(t, (long) block, Long::sum) - block + 1, block));
        }
        Map<String, Set<Long>> used = new HashMap<>();
        Map<String, Long> maxUsed = new HashMap<>();
        // per task and table: its last id, and the floor its next id must exceed (after a forget or restart)
        Map<String, Long> lastOf = new HashMap<>();
        Map<String, Long> floorOf = new HashMap<>();
        List<String> trace = new ArrayList<>();
        for (Op op : ops) {
            String table = TABLES[op.table()];
            String key = op.task() + "/" + table;
            switch (op.kind()) {
                case NEXT -> {
                    long id = tasks.get(op.task()).next(table);
                    trace.add("task " + op.task() + " " + table + " -> " + id);
                    assertTrue(id >= 1, "ids start at 1: " + trace);
                    assertTrue(used.computeIfAbsent(table, t -> new HashSet<>()).add(id),
                            "id " + id + " of " + table + " used twice: " + trace);
                    Long last = lastOf.get(key);
                    assertTrue(last == null || id > last, "task " + op.task() + "'s ids of " + table
                            + " go back from " + last + " to " + id + ": " + trace);
                    Long floor = floorOf.remove(key);
                    assertTrue(floor == null || id > floor, "after a forget or restart, task " + op.task() + " took "
                            + id + " of " + table + ", not above " + floor + " used before: " + trace);
                    lastOf.put(key, id);
                    maxUsed.merge(table, id, Math::max);
                }
                case FORGET -> {
                    tasks.get(op.task()).forget(table);
                    trace.add("task " + op.task() + " forgets " + table);
                    floorOf.put(key, maxUsed.getOrDefault(table, 0L));
                }
                case RECONNECT -> {
                    // the apply task after a reconnect: another task may have sent its tables meanwhile
                    tasks.get(op.task()).forgetAll();
                    trace.add("task " + op.task() + " reconnects");
                    for (String t : TABLES) {
                        floorOf.put(op.task() + "/" + t, maxUsed.getOrDefault(t, 0L));
                    }
                }
                case RESTART -> {
                    tasks.set(op.task(), BatchIds.inBlocks(t -> counter.merge(t, (long) block, Long::sum) - block + 1, block));
                    trace.add("task " + op.task() + " restarts");
                    for (String t : TABLES) {
                        floorOf.put(op.task() + "/" + t, maxUsed.getOrDefault(t, 0L));
                    }
                }
                case SINK_RESERVE -> {
                    // the sink reserves single ids (for batches it makes itself): the same counter
                    long id = counter.merge(table, 1L, Long::sum);
                    trace.add("sink " + table + " -> " + id);
                    assertTrue(used.computeIfAbsent(table, t -> new HashSet<>()).add(id),
                            "id " + id + " of " + table + " used twice: " + trace);
                    maxUsed.merge(table, id, Math::max);
                }
                case SYNCED_ELSEWHERE -> {
                    // a batch id recorded as synced or staged that the counter did not know yet moves it up
                    // (GREATEST(reserved, synced, normalized, staged))
                    long id = counter.getOrDefault(table, 0L) + op.amount();
                    counter.put(table, id);
                    trace.add("synced elsewhere " + table + " -> " + id);
                    used.computeIfAbsent(table, t -> new HashSet<>()).add(id);
                    maxUsed.merge(table, id, Math::max);
                }
            }
        }
    }

    @Provide
    Arbitrary<Integer> blocks() {
        return Arbitraries.of(1, 2, 3, 100);
    }
}
