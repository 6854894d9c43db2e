package io.tablecdc.pg;

import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Struct;

import io.tablecdc.common.RecordHeaders.Op;
import io.tablecdc.pg.convert.ConversionException;
import io.tablecdc.pg.convert.RelationSchema;
import io.tablecdc.pg.wire.PgOutputMessage;
import io.tablecdc.pg.wire.PgOutputMessage.Delete;
import io.tablecdc.pg.wire.PgOutputMessage.Insert;
import io.tablecdc.pg.wire.PgOutputMessage.Relation;
import io.tablecdc.pg.wire.PgOutputMessage.ReplicaIdentity;
import io.tablecdc.pg.wire.PgOutputMessage.Update;
import io.tablecdc.pg.wire.RelationCache;

/**
 * Turns the row messages of one replication stream into {@link Change}s, with the relations and value schemas the
 * stream announced. The apply task and the copy tasks' catch-up streams share it so that a table's records look
 * the same whichever stream sent them.
 */
final class ChangeBuilder {
    /** The primary key columns of a relation, for tables whose replica identity names no key on the wire. */
    interface PrimaryKeys {
        List<String> of(long relationOid) throws SQLException;
    }

    private final RelationCache relations = new RelationCache();
    private final Map<Long, RelationSchema> schemas = new HashMap<>();
    private final PrimaryKeys primaryKeys;
    private final RelationSchema.TextArrays textArrays;

    ChangeBuilder(PrimaryKeys primaryKeys) {
        this(primaryKeys, (table, column) -> false);
    }

    /** {@code textArrays}: the array columns carried as the server's text ({@code array.text.columns}). */
    ChangeBuilder(PrimaryKeys primaryKeys, RelationSchema.TextArrays textArrays) {
        this.primaryKeys = primaryKeys;
        this.textArrays = textArrays;
    }

    /** Forgets every relation: a new stream announces them again. */
    void clear() {
        relations.clear();
        schemas.clear();
    }

    /** Takes a Relation or Type message; a new Relation replaces the relation's schema. */
    void accept(PgOutputMessage message) {
        relations.accept(message);
        if (message instanceof Relation relation) {
            schemas.remove(relation.oid());
        }
    }

    Relation relation(long oid) {
        return relations.get(oid);
    }

    /** The {@code schema.table} of a row message's relation. */
    String table(long relationOid) {
        return relations.get(relationOid).qualifiedName();
    }

    /**
     * The changes an Insert, Update or Delete makes: one, or two for an update that changes the key (a delete of
     * the old key, then the update).
     *
     * An update's unchanged TOAST columns that the old tuple does not carry are listed in its change
     * ({@link Change#unchanged()}), null in its value.
     *
     * @throws ConversionException when a value cannot be converted, or a table without a key has an unchanged TOAST
     *     value without an old value
     */
    List<Change> changes(PgOutputMessage message) throws SQLException {
        List<Change> changes = new ArrayList<>(2);
        if (message instanceof Insert insert) {
            RelationSchema schema = schema(relations.get(insert.relationOid()));
            RelationSchema.Row row = checked(schema, schema.row(insert.newTuple()));
            changes.add(change(schema, Op.CREATE, row.value()).withNonFinite(row.nonFinite()));
        } else if (message instanceof Update update) {
            RelationSchema schema = schema(relations.get(update.relationOid()));
            RelationSchema.Row row = schema.row(update.newTuple(), update.oldTuple());
            boolean keyChanged = false;
            if (update.oldTuple() != null && schema.keySchema() != null) {
                RelationSchema.Row old = schema.row(update.oldTuple().tuple());
                if (!schema.key(old.value()).equals(schema.key(row.value()))) {
                    // the key changed: the old key's row is gone
                    changes.add(change(schema, Op.DELETE, old.value()));
                    keyChanged = true;
                }
            }
            if (!row.unchangedToastColumns().isEmpty() && schema.keySchema() == null) {
                throw new ConversionException("table " + schema.relation().qualifiedName() + ": unchanged TOAST value in "
                        + row.unchangedToastColumns() + " of a table without a key: the sink cannot find the row to keep"
                        + " the value of (give the table a primary key, or set REPLICA IDENTITY FULL)");
            }
            changes.add(Change.update(schema.relation().qualifiedName(), schema.keySchema(), schema.key(row.value()),
                    schema.valueSchema(), row.value(), row.unchangedToastColumns(), keyChanged).withNonFinite(row.nonFinite()));
        } else if (message instanceof Delete delete) {
            RelationSchema schema = schema(relations.get(delete.relationOid()));
            RelationSchema.Row old = schema.row(delete.oldTuple().tuple());
            changes.add(change(schema, Op.DELETE, old.value()));
        } else {
            throw new IllegalArgumentException("not a row message: " + message);
        }
        return changes;
    }

    /** The value schema of a relation as the stream describes it, built once per Relation message. */
    RelationSchema schema(Relation relation) throws SQLException {
        RelationSchema schema = schemas.get(relation.oid());
        if (schema == null) {
            schema = of(relation, primaryKeys, textArrays);
            schemas.put(relation.oid(), schema);
        }
        return schema;
    }

    /** How both streams and the copy build a relation's schema: the wire's key, or the primary key under FULL/NOTHING. */
    static RelationSchema of(Relation relation, PrimaryKeys primaryKeys) throws SQLException {
        return of(relation, primaryKeys, (table, column) -> false);
    }

    /** As above, with the array columns {@code textArrays} names carried as text. */
    static RelationSchema of(Relation relation, PrimaryKeys primaryKeys, RelationSchema.TextArrays textArrays)
            throws SQLException {
        boolean wireKey = relation.replicaIdentity() == ReplicaIdentity.DEFAULT
                || relation.replicaIdentity() == ReplicaIdentity.INDEX;
        List<String> key = wireKey ? relation.keyColumns().stream().map(c -> c.name()).toList() : primaryKeys.of(relation.oid());
        return RelationSchema.of(relation, key, textArrays);
    }

    private static RelationSchema.Row checked(RelationSchema schema, RelationSchema.Row row) {
        if (!row.unchangedToastColumns().isEmpty()) {
            throw new ConversionException("table " + schema.relation().qualifiedName() + ": an insert with unchanged TOAST"
                    + " values in " + row.unchangedToastColumns());
        }
        return row;
    }

    static Change change(RelationSchema schema, Op op, Struct value) {
        return new Change(schema.relation().qualifiedName(), op, schema.keySchema(), schema.key(value),
                schema.valueSchema(), value);
    }
}
