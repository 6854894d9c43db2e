package io.tablecdc.pg;

import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;

import io.tablecdc.common.RecordHeaders;

/**
 * One change of one table, converted: what {@link ChangeBuilder} builds from the stream's row messages (and the copy
 * from its rows), and what {@link ChangeBatcher} cuts into batches. {@code key} is null for tables without a key; a
 * truncate has neither key nor value, and carries its replay id ({@code <xid>/<ordinal>/table/<oid>}).
 */
record Change(String table, RecordHeaders.Op op, Schema keySchema, Struct key, Schema valueSchema, Struct value,
              String replayId, Set<String> unchanged, boolean keyChanged, List<String> nonFinite) {
    Change {
        unchanged = unchanged == null ? Set.of() : Collections.unmodifiableSet(new LinkedHashSet<>(unchanged));
        nonFinite = nonFinite == null ? List.of() : List.copyOf(nonFinite);
    }

    Change(String table, RecordHeaders.Op op, Schema keySchema, Struct key, Schema valueSchema, Struct value,
           String replayId, Set<String> unchanged, boolean keyChanged) {
        this(table, op, keySchema, key, valueSchema, value, replayId, unchanged, keyChanged, List.of());
    }

    Change(String table, RecordHeaders.Op op, Schema keySchema, Struct key, Schema valueSchema, Struct value) {
        this(table, op, keySchema, key, valueSchema, value, null, Set.of(), false);
    }

    Change(String table, RecordHeaders.Op op, Schema keySchema, Struct key, Schema valueSchema, Struct value,
           String replayId) {
        this(table, op, keySchema, key, valueSchema, value, replayId, Set.of(), false);
    }

    /** This change with the {@code tablecdc.nonfinite} marks of its decimal values (null in {@link #value()}). */
    Change withNonFinite(List<String> marks) {
        return marks.isEmpty() && nonFinite.isEmpty() ? this
                : new Change(table, op, keySchema, key, valueSchema, value, replayId, unchanged, keyChanged, marks);
    }

    /**
     * An update: {@code unchanged} names the columns the server did not send (unchanged TOAST values, null in
     * {@code value}); {@code keyChanged} when the update moved the row to another key (the change before it is
     * the delete of the old key).
     */
    static Change update(String table, Schema keySchema, Struct key, Schema valueSchema, Struct value,
                         Set<String> unchanged, boolean keyChanged) {
        return new Change(table, RecordHeaders.Op.UPDATE, keySchema, key, valueSchema, value, null, unchanged, keyChanged);
    }

    /** A TRUNCATE of {@code table}, as its own batch. */
    static Change truncate(String table, String replayId) {
        return new Change(table, RecordHeaders.Op.TRUNCATE, null, null, null, null, replayId);
    }
}
