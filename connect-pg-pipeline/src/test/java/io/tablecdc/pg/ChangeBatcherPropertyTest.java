package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

import io.tablecdc.common.RecordHeaders;
import io.tablecdc.common.RecordHeaders.Op;
import io.tablecdc.pg.wire.Lsn;

/**
 * {@link ChangeBatcher} against a model of commit order: transactions over two tables (rows of a few keys and
 * truncates), {@code batch.rows} from 1 to 4, with and without coalescing (flushes between transactions), and tables
 * held and released at transaction boundaries, as a handover does. Batch ids come from {@link BatchIds#inBlocks} over
 * a counter, as in the tasks. What the class promises, checked on every record it emits:
 * <ul>
 * <li>each table's changes come out once each, in commit order (held ones after release);</li>
 * <li>a key's versions strictly increase in the order its records come out;</li>
 * <li>a table's batches are contiguous runs of records whose ids strictly increase, at most {@code batch.rows}
 * records each, a truncate a batch of its own;</li>
 * <li>exactly one record of each batch carries {@code tablecdc.batch.last=true}: its last.</li>
 * </ul>
 */
class ChangeBatcherPropertyTest {
    private static final Schema KEY = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA)
            .field("seq", Schema.INT64_SCHEMA).build();
    private static final Instant T = Instant.parse("2026-01-02T03:04:05Z");
    private static final String[] TABLES = {"s.a", "s.b"};

    /** One change: table, key (0 = a truncate), op. */
    record Chg(int table, int key, int op) {
    }

    /** A transaction's changes, and what happens after its commit: 0 nothing, 1 flush, 2 hold, 3 release. */
    record Txn(List<Chg> changes, int after, int afterTable) {
    }

    @Provide
    Arbitrary<List<Txn>> txns() {
        Arbitrary<Chg> chg = Combinators.combine(Arbitraries.integers().between(0, 1),
                Arbitraries.integers().between(0, 9).map(k -> k == 0 ? 0 : 1 + k % 3),
                Arbitraries.integers().between(0, 2)).as(Chg::new);
        Arbitrary<Integer> after = Arbitraries.frequency(
                net.jqwik.api.Tuple.of(5, 0), net.jqwik.api.Tuple.of(3, 1), net.jqwik.api.Tuple.of(1, 2),
                net.jqwik.api.Tuple.of(1, 3));
        return Combinators.combine(chg.list().ofMaxSize(7), after, Arbitraries.integers().between(0, 1))
                .as(Txn::new).list().ofMaxSize(10);
    }

    @Property(tries = 800)
    void batchesFollowCommitOrder(@ForAll("txns") List<Txn> txns, @ForAll("batchRows") int batchRows,
                                  @ForAll boolean coalesce) {
        Map<String, Long> counter = new HashMap<>();
        BatchIds ids = BatchIds.inBlocks(t -> counter.merge(t, 3L, Long::sum) - 2, 3);
        ChangeBatcher b = new ChangeBatcher("f", "slot", "__hb", batchRows, t -> "pg." + t, ids, Lsn.parse("0/100"),
                coalesce);
        List<SourceRecord> out = new ArrayList<>();
        Map<String, List<String>> expected = new LinkedHashMap<>();
        long lsn = 0x200;
        long seq = 0;
        for (Txn txn : txns) {
            b.begin(Lsn.of(lsn), T, T);
            for (Chg c : txn.changes()) {
                String table = TABLES[c.table()];
                seq++;
                Change change;
                String shape;
                if (c.key() == 0) {
                    change = Change.truncate(table, "1/" + seq + "/table/1");
                    shape = "t";
                } else {
                    Op op = c.op() == 0 ? Op.CREATE : c.op() == 1 ? Op.UPDATE : Op.DELETE;
                    change = new Change(table, op, KEY, new Struct(KEY).put("id", (long) c.key()), VALUE,
                            new Struct(VALUE).put("id", (long) c.key()).put("seq", seq));
                    shape = op.code() + c.key() + "#" + seq;
                }
                expected.computeIfAbsent(table, t -> new ArrayList<>()).add(shape);
                out.addAll(b.add(change));
            }
            out.addAll(b.commit(Lsn.of(lsn + 0x10)));
            lsn += 0x100;
            String table = TABLES[txn.afterTable()];
            switch (txn.after()) {
                case 1 -> out.addAll(b.flush());
                case 2 -> b.hold(table);
                case 3 -> out.addAll(b.release(table));
                default -> { }
            }
        }
        out.addAll(b.flush());
        for (String table : TABLES) {
            out.addAll(b.release(table));
        }

        Map<String, List<String>> actual = new LinkedHashMap<>();
        Map<String, Long> lastVersion = new HashMap<>();
        Map<String, Long> lastBatch = new HashMap<>();
        Map<String, Integer> batchSize = new HashMap<>();
        Map<String, Boolean> batchClosed = new HashMap<>();
        for (SourceRecord r : out) {
            String table = RecordHeaders.text(r.headers(), RecordHeaders.TABLE);
            String op = RecordHeaders.text(r.headers(), RecordHeaders.OP);
            long version = Long.parseLong(RecordHeaders.text(r.headers(), RecordHeaders.VERSION));
            long batch = Long.parseLong(RecordHeaders.text(r.headers(), RecordHeaders.BATCH));
            boolean last = "true".equals(RecordHeaders.text(r.headers(), RecordHeaders.BATCH_LAST));
            boolean truncate = Op.TRUNCATE.code().equals(op);
            actual.computeIfAbsent(table, t -> new ArrayList<>()).add(truncate ? "t"
                    : op + ((Struct) r.key()).getInt64("id") + "#" + ((Struct) r.value()).getInt64("seq"));
            if (!truncate) {
                String key = table + "/" + ((Struct) r.key()).getInt64("id");
                Long before = lastVersion.put(key, version);
                assertTrue(before == null || version > before, key + ": version " + version + " after " + before);
            }
            Long previous = lastBatch.get(table);
            if (previous == null || previous != batch) {
                assertTrue(previous == null || batch > previous, table + ": batch " + batch + " after " + previous);
                assertTrue(previous == null || batchClosed.get(table),
                        table + ": batch " + previous + " ended without its last record marked");
                lastBatch.put(table, batch);
                batchSize.put(table, 0);
            } else {
                assertTrue(!batchClosed.get(table), table + ": batch " + batch + " goes on after its last record");
            }
            int size = batchSize.merge(table, 1, Integer::sum);
            assertTrue(size <= batchRows, table + ": batch " + batch + " has more than " + batchRows + " records");
            assertTrue(!truncate || (size == 1 && last), table + ": a truncate shares batch " + batch);
            batchClosed.put(table, last);
        }
        for (Map.Entry<String, Boolean> e : batchClosed.entrySet()) {
            assertTrue(e.getValue(), e.getKey() + ": the last batch has no record marked last");
        }
        assertEquals(expected, actual, "each table's changes, once each, in commit order");
    }

    @Provide
    Arbitrary<Integer> batchRows() {
        return Arbitraries.integers().between(1, 4);
    }
}
