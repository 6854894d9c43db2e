package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;
import org.junit.jupiter.api.Test;

import io.tablecdc.common.RecordHeaders;
import io.tablecdc.common.RecordHeaders.Op;
import io.tablecdc.pg.wire.Lsn;

class UnchangedToastTest {
    private static final Schema KEY = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA)
            .field("n", Schema.OPTIONAL_INT32_SCHEMA).field("big", Schema.OPTIONAL_STRING_SCHEMA)
            .field("doc", Schema.OPTIONAL_STRING_SCHEMA).build();

    private static Struct key(long id) {
        return new Struct(KEY).put("id", id);
    }

    private static Change insert(long id, int n, String big, String doc) {
        Struct value = new Struct(VALUE).put("id", id).put("n", n).put("big", big).put("doc", doc);
        return new Change("s.t", Op.CREATE, KEY, key(id), VALUE, value);
    }

    private static Change update(long id, int n, String big, String doc, boolean keyChanged, String... unchanged) {
        Struct value = new Struct(VALUE).put("id", id).put("n", n).put("big", big).put("doc", doc);
        return Change.update("s.t", KEY, key(id), VALUE, value, new LinkedHashSet<>(List.of(unchanged)), keyChanged);
    }

    private static Change delete(long id) {
        return new Change("s.t", Op.DELETE, KEY, key(id), VALUE, new Struct(VALUE).put("id", id));
    }

    @Test
    void anUpdateTakesTheValueOfTheRowsEarlierChangeInTheBatch() {
        UnchangedToast.Resolver resolver = new UnchangedToast.Resolver();
        resolver.resolve(insert(1, 1, "B1", "D1"));
        Change first = resolver.resolve(update(1, 2, null, null, false, "big", "doc"));
        assertEquals(Set.of(), first.unchanged());
        assertEquals("B1", first.value().get("big"));
        assertEquals("D1", first.value().get("doc"));
        assertEquals(2, first.value().get("n"));
        // a second untouched update takes the filled values in turn
        Change second = resolver.resolve(update(1, 3, null, "D2", false, "big"));
        assertEquals(Set.of(), second.unchanged());
        assertEquals("B1", second.value().get("big"));
        assertEquals("D2", second.value().get("doc"));
    }

    @Test
    void aValueTheBatchDoesNotHoldStaysMarkedAlsoOnLaterChangesOfTheRow() {
        UnchangedToast.Resolver resolver = new UnchangedToast.Resolver();
        Change plain = update(7, 1, null, "D", false, "big");
        assertSame(plain, resolver.resolve(plain), "nothing earlier in the batch: unchanged as it came");
        Change later = resolver.resolve(update(7, 2, null, null, false, "big", "doc"));
        assertEquals(Set.of("big"), later.unchanged(), "big is still unknown; doc came with the earlier change");
        assertEquals("D", later.value().get("doc"));
        assertNull(later.value().get("big"));
        // other rows are not mixed in
        assertEquals(Set.of("big"), resolver.resolve(update(8, 1, null, null, false, "big")).unchanged());
    }

    @Test
    void aKeyChangeTakesTheValueOfTheOldKeysRowAndADeleteForgetsIt() {
        UnchangedToast.Resolver resolver = new UnchangedToast.Resolver();
        resolver.resolve(insert(1, 1, "B1", "D1"));
        resolver.resolve(delete(1));
        Change moved = resolver.resolve(update(2, 1, null, "D1", true, "big"));
        assertEquals(Set.of(), moved.unchanged());
        assertEquals("B1", moved.value().get("big"));
        // the old key is gone: an update of a row of that key again (re-inserted elsewhere) is not filled from it
        resolver.resolve(delete(2));
        assertEquals(Set.of("big"), resolver.resolve(update(1, 5, null, null, false, "big")).unchanged());
    }

    @Test
    void aKeyChangeWithoutTheOldRowInTheBatchStaysMarked() {
        UnchangedToast.Resolver resolver = new UnchangedToast.Resolver();
        resolver.resolve(delete(1));
        Change moved = resolver.resolve(update(2, 1, null, null, true, "big"));
        assertEquals(Set.of("big"), moved.unchanged());
        assertEquals(true, moved.keyChanged());
    }

    @Test
    void theBatcherNamesUnmarkedColumnsInHeadersAndNeverCutsAKeyChangeInTwo() {
        ChangeBatcher batcher = new ChangeBatcher("f", "slot_1", "__hb", 2, t -> "pg." + t, BatchIds.countingFrom(t -> 0L),
                Lsn.parse("0/100"));
        Instant t = Instant.parse("2026-01-02T03:04:05Z");
        batcher.begin(Lsn.parse("0/200"), t, t);
        List<SourceRecord> out = new ArrayList<>(batcher.add(update(5, 1, null, null, false, "big", "doc")));
        // two rows per batch, but the delete of the old key and the update that moved the row stay together
        out.addAll(batcher.addAll(List.of(delete(5), update(6, 1, null, null, true, "big", "doc"))));
        out.addAll(batcher.commit(Lsn.parse("0/250")));
        assertEquals(3, out.size());
        assertEquals(RecordHeaders.text(out.get(1).headers(), RecordHeaders.BATCH),
                RecordHeaders.text(out.get(2).headers(), RecordHeaders.BATCH));
        List<String> unchanged = new ArrayList<>();
        out.get(2).headers().allWithName(RecordHeaders.UNCHANGED).forEachRemaining(h -> unchanged.add((String) h.value()));
        assertEquals(List.of("big", "doc"), unchanged);
        assertEquals("true", RecordHeaders.text(out.get(2).headers(), RecordHeaders.KEY_CHANGED));
        assertNull(RecordHeaders.text(out.get(0).headers(), RecordHeaders.KEY_CHANGED));
        assertNull(RecordHeaders.text(out.get(1).headers(), RecordHeaders.UNCHANGED));
    }
}
