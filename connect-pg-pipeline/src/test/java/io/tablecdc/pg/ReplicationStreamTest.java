package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/** What goes from the configuration into the replication protocol: the publication and the handover marker. */
class ReplicationStreamTest {
    @Test
    void thePublicationIsAQuotedIdentifierInsideAQuotedLiteral() {
        assertEquals("\"shop_pub\"", ReplicationStream.publicationNames("shop_pub"));
        // pgjdbc puts the value between single quotes as it is: the quote inside is doubled here
        assertEquals("\"it''s pub\"", ReplicationStream.publicationNames("it's pub"));
        assertEquals("\"say \"\"hi\"\", ok\"", ReplicationStream.publicationNames("say \"hi\", ok"));
    }

    @Test
    void aMarkerParsesWhateverTheTableIsCalled() {
        String owner = "f/copy-1-a1b2c3";
        assertArrayEquals(new String[] {"s.t", owner}, TableCopy.parseMarker("f", TableCopy.markerContent("f", "s.t", owner)));
        assertArrayEquals(new String[] {"s.two\nlines", owner},
                TableCopy.parseMarker("f", TableCopy.markerContent("f", "s.two\nlines", owner)));
        assertNull(TableCopy.parseMarker("g", TableCopy.markerContent("f", "s.t", owner)), "another flow's marker");
        assertNull(TableCopy.parseMarker("f", "f\ngarbage"));
    }
}
