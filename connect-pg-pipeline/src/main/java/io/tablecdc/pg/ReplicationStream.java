package io.tablecdc.pg;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.concurrent.TimeUnit;

import org.postgresql.PGConnection;
import org.postgresql.replication.LogSequenceNumber;
import org.postgresql.replication.PGReplicationStream;

import io.tablecdc.pg.wire.Lsn;

/**
 * Starts the pgoutput stream (protocol version 1, logical decoding messages on) of a slot, the same way for the
 * apply task's main slot and a copy task's temporary slot.
 */
final class ReplicationStream {
    /** How often the stream sends a standby status update on its own while it is read. */
    static final long STATUS_INTERVAL_SECONDS = 10;

    private ReplicationStream() {
    }

    /** {@code START_REPLICATION SLOT slot LOGICAL from (proto_version '1', publication_names '…', messages 'true')}. */
    static PGReplicationStream start(Connection replication, String slot, String publication, Lsn from)
            throws SQLException {
        return replication.unwrap(PGConnection.class).getReplicationAPI().replicationStream().logical()
                .withSlotName(slot)
                .withSlotOption("proto_version", "1")
                .withSlotOption("publication_names", publicationNames(publication))
                .withSlotOption("messages", "true")
                .withStartPosition(LogSequenceNumber.valueOf(from.value()))
                .withStatusInterval((int) STATUS_INTERVAL_SECONDS, TimeUnit.SECONDS)
                .start();
    }

    /**
     * The {@code publication_names} option's value as it goes into the START_REPLICATION command: pgoutput reads a
     * list of identifiers, so the name is double-quoted (an inner {@code "} doubled); the driver puts the value
     * between single quotes without escaping it, so an inner {@code '} is doubled here.
     */
    static String publicationNames(String publication) {
        return ("\"" + publication.replace("\"", "\"\"") + "\"").replace("'", "''");
    }
}
