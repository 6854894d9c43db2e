package io.tablecdc.common;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

class ResourcesTest {
    @Test
    void aFailedCloseNeitherThrowsNorKeepsTheNextResourceOpen() {
        List<String> closed = new ArrayList<>();
        Resources.closeQuietly(() -> {
            closed.add("stream");
            throw new java.io.IOException("connection reset");
        }, "the replication stream");
        Resources.closeQuietly(null, "a connection never opened");
        Resources.closeQuietly(() -> closed.add("connection"), "the source connection");
        assertEquals(List.of("stream", "connection"), closed);
    }
}
