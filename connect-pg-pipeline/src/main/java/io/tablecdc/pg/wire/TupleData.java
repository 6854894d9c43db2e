package io.tablecdc.pg.wire;

import java.util.List;

/** A row image of pgoutput: one {@link TupleValue} per column of the relation, in column order. */
public record TupleData(List<TupleValue> values) {
    public TupleData {
        values = List.copyOf(values);
    }

    public static TupleData of(TupleValue... values) {
        return new TupleData(List.of(values));
    }

    public int size() {
        return values.size();
    }

    public TupleValue get(int column) {
        return values.get(column);
    }

    /** Whether any column is an unchanged TOAST value that the server did not send. */
    public boolean hasUnchangedToast() {
        return values.stream().anyMatch(v -> v instanceof TupleValue.UnchangedToast);
    }
}
