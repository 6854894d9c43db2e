package io.tablecdc.pg;

import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Struct;

import io.tablecdc.common.RecordHeaders.Op;

/**
 * Unchanged TOAST values inside one batch. An update that leaves a TOASTed column untouched (replica identity
 * DEFAULT or USING INDEX) carries no value for it; when the same row changed earlier in the batch, the value is
 * taken from that change here (the batch's records are in memory anyway), so only the columns whose value the batch
 * itself does not hold reach the sink as {@code tablecdc.unchanged}.
 */
final class UnchangedToast {
    private UnchangedToast() {
    }

    /** Resolves the changes of one batch, in batch order. Keeps one reference per key changed in the batch. */
    static final class Resolver {
        private final Map<Struct, Change> latest = new HashMap<>();
        private Change previous;

        /** {@code change} with the unchanged columns an earlier change of its row in this batch has. */
        Change resolve(Change change) {
            Change out = change;
            if (change.key() != null) {
                if (change.op() == Op.UPDATE && !change.unchanged().isEmpty()) {
                    // the row's earlier image: under its old key when the update moved it
                    Change before = change.keyChanged() && previous != null && previous.op() == Op.DELETE
                            ? deleted : latest.get(change.key());
                    if (before != null && before.op() != Op.DELETE && before.value() != null) {
                        out = fill(change, before);
                    }
                }
                if (change.op() == Op.DELETE) {
                    deleted = latest.remove(change.key());
                } else {
                    latest.put(change.key(), out);
                }
            }
            previous = change;
            return out;
        }

        /** The change the last delete removed (the old row of a key-changing update that follows it). */
        private Change deleted;

        private static Change fill(Change change, Change before) {
            Struct value = new Struct(change.valueSchema());
            for (Field field : change.valueSchema().fields()) {
                value.put(field, change.value().get(field));
            }
            Set<String> still = new LinkedHashSet<>();
            java.util.List<String> nonFinite = new java.util.ArrayList<>(change.nonFinite());
            for (String column : change.unchanged()) {
                Field field = before.value().schema().field(column);
                Field target = value.schema().field(column);
                if (field == null || target == null || before.unchanged().contains(column)
                        || !field.schema().equals(target.schema())) {
                    still.add(column);
                } else {
                    value.put(column, before.value().get(field));
                    // the value's tablecdc.nonfinite marks come with it
                    for (String mark : before.nonFinite()) {
                        String name = mark.substring(0, mark.lastIndexOf('='));
                        if (name.equals(column) || name.startsWith(column + "[") && target.schema().type()
                                == org.apache.kafka.connect.data.Schema.Type.ARRAY && value.schema().field(name) == null) {
                            nonFinite.add(mark);
                        }
                    }
                }
            }
            return new Change(change.table(), change.op(), change.keySchema(), change.key(), change.valueSchema(), value,
                    change.replayId(), still, change.keyChanged(), nonFinite);
        }
    }
}
