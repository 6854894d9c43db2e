package io.tablecdc.pg.wire;

import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

import io.tablecdc.pg.wire.PgOutputMessage.Relation;
import io.tablecdc.pg.wire.PgOutputMessage.Type;

/**
 * The relations and types a stream has described so far, by oid. pgoutput sends a Relation before the first
 * change of a table in each stream (and again whenever it changes), so a cache lives as long as one
 * replication stream: a new stream must start with an empty cache.
 *
 * <p>Not thread-safe: one stream is read by one thread.
 */
public final class RelationCache {
    private final Map<Long, Relation> relations = new HashMap<>();
    private final Map<Long, Type> types = new HashMap<>();

    /**
     * Records what {@code message} describes (Relation, Type) and returns the relation it replaced, if any,
     * so that the caller can tell a schema change; other messages are ignored.
     */
    public Optional<Relation> accept(PgOutputMessage message) {
        if (message instanceof Relation relation) {
            return Optional.ofNullable(relations.put(relation.oid(), relation));
        }
        if (message instanceof Type type) {
            types.put(type.oid(), type);
        }
        return Optional.empty();
    }

    public Optional<Relation> find(long oid) {
        return Optional.ofNullable(relations.get(oid));
    }

    /**
     * The relation {@code oid}.
     *
     * @throws PgOutputParseException when the stream has not described it: a change can only be read after
     *     its Relation message, so this means a stream was resumed with a cache that does not belong to it
     */
    public Relation get(long oid) {
        Relation relation = relations.get(oid);
        if (relation == null) {
            throw new PgOutputParseException("relation oid " + oid + " has not been described in this stream"
                    + " (a change arrived before its Relation message)");
        }
        return relation;
    }

    /** The Type message of {@code oid}, sent for types that are not built in (enums, domains, extensions). */
    public Optional<Type> type(long oid) {
        return Optional.ofNullable(types.get(oid));
    }

    public int size() {
        return relations.size();
    }

    public void clear() {
        relations.clear();
        types.clear();
    }
}
