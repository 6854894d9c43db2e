package io.tablecdc.catalog;

import java.util.Objects;

/**
 * How far the stage sink staged one table from one consumed topic partition, for records of other producers (whose
 * batches the sink cuts and whose row versions are Kafka offsets): the highest offset of its staged batches, and the
 * latest record timestamp among them ({@code -1} when no record carried one). Kept in
 * {@code cdc_sink_staged_offset} after the batches are loaded.
 *
 * @param topic        the topic the records were consumed from
 * @param partition    its partition
 * @param lastOffset   the highest offset staged
 * @param maxTimestamp the latest record timestamp staged (milliseconds since the epoch), or -1
 */
public record StagedOffsets(String topic, int partition, long lastOffset, long maxTimestamp) {

    public StagedOffsets {
        Objects.requireNonNull(topic, "topic");
        if (partition < 0 || lastOffset < 0) {
            throw new IllegalArgumentException("partition and offset cannot be negative: " + partition + ", " + lastOffset);
        }
    }

    /** These offsets and {@code other}'s (of the same topic partition) together: the higher offset and timestamp. */
    public StagedOffsets max(StagedOffsets other) {
        return other == null ? this : new StagedOffsets(topic, partition, Math.max(lastOffset, other.lastOffset),
                Math.max(maxTimestamp, other.maxTimestamp));
    }
}
