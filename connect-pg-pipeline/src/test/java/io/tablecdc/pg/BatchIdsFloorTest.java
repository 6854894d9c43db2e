package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.function.ToLongFunction;

import org.apache.kafka.connect.storage.OffsetStorageReader;
import org.junit.jupiter.api.Test;

/** {@link BatchIds#fromOffsets}: the batch id of a table's offset in Kafka, the floor of its reservations. */
class BatchIdsFloorTest {
    private final List<Map<String, ?>> asked = new ArrayList<>();
    private boolean failing;

    private final OffsetStorageReader reader = new OffsetStorageReader() {
        @Override
        @SuppressWarnings("unchecked")
        public <T> Map<String, Object> offset(Map<String, T> partition) {
            asked.add(partition);
            if (failing) {
                throw new org.apache.kafka.connect.errors.ConnectException("offsets topic not readable");
            }
            return "s.a".equals(partition.get("table")) ? Map.of("batch", 201L, "lsn", "0/10") : null;
        }

        @Override
        public <T> Map<Map<String, T>, Map<String, Object>> offsets(Collection<Map<String, T>> partitions) {
            throw new UnsupportedOperationException();
        }
    };

    @Test
    void theOffsetsBatchIdIsReadAtEveryReservationAndAFailedReadGivesNoFloor() {
        ToLongFunction<String> floor = BatchIds.fromOffsets(reader, "f");
        assertEquals(201, floor.applyAsLong("s.a"));
        assertEquals(201, floor.applyAsLong("s.a"));
        assertEquals(0, floor.applyAsLong("s.b"), "no offset yet");
        assertEquals(List.of(Map.of("flow", "f", "table", "s.a"), Map.of("flow", "f", "table", "s.a"),
                Map.of("flow", "f", "table", "s.b")), asked);

        ToLongFunction<String> unreadable = BatchIds.fromOffsets(reader, "f");
        failing = true;
        assertEquals(0, unreadable.applyAsLong("s.a"), "the catalog alone this time");
        failing = false;
        assertEquals(201, unreadable.applyAsLong("s.a"), "read again");
        assertEquals(0, BatchIds.fromOffsets(null, "f").applyAsLong("s.a"));
    }
}
