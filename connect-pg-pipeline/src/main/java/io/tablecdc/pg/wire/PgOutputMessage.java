package io.tablecdc.pg.wire;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;

/**
 * The logical replication messages of the {@code pgoutput} plugin, protocol version 1, as
 * {@link PgOutputParser} reads them. Object ids and transaction ids are unsigned 32-bit on the wire and
 * held in {@code long}s.
 */
public sealed interface PgOutputMessage {

    /** {@code B}: a transaction starts; {@code finalLsn} is the LSN of its commit record. */
    record Begin(Lsn finalLsn, Instant commitTime, long xid) implements PgOutputMessage {
        public Begin {
            Objects.requireNonNull(finalLsn, "finalLsn");
            Objects.requireNonNull(commitTime, "commitTime");
        }
    }

    /**
     * {@code C}: a transaction ends. {@code commitLsn} is its commit record (equal to the Begin's final LSN),
     * {@code endLsn} the end of that record: the position to confirm once the transaction is durable.
     */
    record Commit(int flags, Lsn commitLsn, Lsn endLsn, Instant commitTime) implements PgOutputMessage {
        public Commit {
            Objects.requireNonNull(commitLsn, "commitLsn");
            Objects.requireNonNull(endLsn, "endLsn");
            Objects.requireNonNull(commitTime, "commitTime");
        }
    }

    /** {@code O}: the transaction was replicated here from the origin {@code name}. */
    record Origin(Lsn originLsn, String name) implements PgOutputMessage {
        public Origin {
            Objects.requireNonNull(originLsn, "originLsn");
            Objects.requireNonNull(name, "name");
        }
    }

    /** The replica identity of a relation: which old column values UPDATE and DELETE carry. */
    enum ReplicaIdentity {
        /** {@code d}: the primary key. */
        DEFAULT('d'),
        /** {@code n}: nothing (updates and deletes cannot be published). */
        NOTHING('n'),
        /** {@code f}: all columns; every column is flagged as key on the wire. */
        FULL('f'),
        /** {@code i}: the columns of a chosen unique index. */
        INDEX('i');

        private final char code;

        ReplicaIdentity(char code) {
            this.code = code;
        }

        public char code() {
            return code;
        }

        public static ReplicaIdentity of(int code) {
            for (ReplicaIdentity identity : values()) {
                if (identity.code == code) {
                    return identity;
                }
            }
            throw new PgOutputParseException("unknown replica identity '" + (char) code + "' (0x" + Integer.toHexString(code) + ")");
        }
    }

    /** One column of a {@link Relation}. {@code typeModifier} is {@code atttypmod} ({@code -1} when none). */
    record Column(int flags, String name, long typeOid, int typeModifier) {
        /** The flag pgoutput sets on columns that are part of the replica identity. */
        public static final int FLAG_KEY = 1;

        public Column {
            Objects.requireNonNull(name, "name");
        }

        public boolean key() {
            return (flags & FLAG_KEY) != 0;
        }
    }

    /**
     * {@code R}: the description of a table, sent before the first change of it in a stream and again after
     * it changes. {@code namespace} is the schema ({@code pg_catalog} is sent as the empty string).
     */
    record Relation(long oid, String namespace, String name, ReplicaIdentity replicaIdentity, List<Column> columns)
            implements PgOutputMessage {
        public Relation {
            Objects.requireNonNull(namespace, "namespace");
            Objects.requireNonNull(name, "name");
            Objects.requireNonNull(replicaIdentity, "replicaIdentity");
            columns = List.copyOf(columns);
        }

        /** {@code schema.table}, the table name of the vocabulary. */
        public String qualifiedName() {
            return (namespace.isEmpty() ? "pg_catalog" : namespace) + "." + name;
        }

        /** The columns flagged as replica identity (all of them under {@link ReplicaIdentity#FULL}). */
        public List<Column> keyColumns() {
            return columns.stream().filter(Column::key).toList();
        }
    }

    /** {@code Y}: the name of a non-built-in data type used by a column sent next. */
    record Type(long oid, String namespace, String name) implements PgOutputMessage {
        public Type {
            Objects.requireNonNull(namespace, "namespace");
            Objects.requireNonNull(name, "name");
        }
    }

    /** {@code I}: a new row. */
    record Insert(long relationOid, TupleData newTuple) implements PgOutputMessage {
        public Insert {
            Objects.requireNonNull(newTuple, "newTuple");
        }
    }

    /**
     * The old row image of an UPDATE or DELETE: {@code K} carries only the replica identity columns (others
     * null), {@code O} the whole old row (replica identity full).
     */
    record OldTuple(boolean full, TupleData tuple) {
        public OldTuple {
            Objects.requireNonNull(tuple, "tuple");
        }
    }

    /**
     * {@code U}: a changed row. {@code oldTuple} is null when the server sent none (the key did not change
     * and replica identity is not full).
     */
    record Update(long relationOid, OldTuple oldTuple, TupleData newTuple) implements PgOutputMessage {
        public Update {
            Objects.requireNonNull(newTuple, "newTuple");
        }
    }

    /** {@code D}: a deleted row, identified by its old key ({@code K}) or whole old row ({@code O}). */
    record Delete(long relationOid, OldTuple oldTuple) implements PgOutputMessage {
        public Delete {
            Objects.requireNonNull(oldTuple, "oldTuple");
        }
    }

    /** {@code T}: one TRUNCATE statement over one or more relations. */
    record Truncate(int options, List<Long> relationOids) implements PgOutputMessage {
        public static final int OPTION_CASCADE = 1;
        public static final int OPTION_RESTART_IDENTITY = 2;

        public Truncate {
            relationOids = List.copyOf(relationOids);
        }

        public boolean cascade() {
            return (options & OPTION_CASCADE) != 0;
        }

        public boolean restartIdentity() {
            return (options & OPTION_RESTART_IDENTITY) != 0;
        }
    }

    /**
     * {@code M}: a message written by {@code pg_logical_emit_message}. Transactional messages arrive inside
     * their transaction; others arrive as soon as they are decoded, outside any Begin/Commit.
     */
    record LogicalMessage(int flags, Lsn lsn, String prefix, byte[] content) implements PgOutputMessage {
        public static final int FLAG_TRANSACTIONAL = 1;

        public LogicalMessage {
            Objects.requireNonNull(lsn, "lsn");
            Objects.requireNonNull(prefix, "prefix");
            content = content.clone();
        }

        public boolean transactional() {
            return (flags & FLAG_TRANSACTIONAL) != 0;
        }

        @Override
        public byte[] content() {
            return content.clone();
        }

        /** The content as UTF-8 text (what {@code pg_logical_emit_message(bool, text, text)} wrote). */
        public String contentText() {
            return new String(content, StandardCharsets.UTF_8);
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof LogicalMessage m && flags == m.flags && lsn.equals(m.lsn)
                    && prefix.equals(m.prefix) && Arrays.equals(content, m.content);
        }

        @Override
        public int hashCode() {
            return Objects.hash(flags, lsn, prefix, Arrays.hashCode(content));
        }

        @Override
        public String toString() {
            return "LogicalMessage[flags=" + flags + ", lsn=" + lsn + ", prefix=" + prefix + ", content="
                    + HexFormat.of().formatHex(content) + "]";
        }
    }
}
