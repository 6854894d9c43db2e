package io.tablecdc.clickhouse;

import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.connect.sink.SinkRecord;

import io.tablecdc.common.RecordHeaders;
import io.tablecdc.common.RowBlock;

/**
 * A record as the rows it carries: a row record as its one row, a block record ({@link RowBlock}) as its rows. What
 * cannot be read fails with {@link IllegalArgumentException}: the record goes to the errant record reporter whole.
 */
final class RecordRows {
    /**
     * Reads block records, one reader per table (flow and table headers): a reader keeps the schemas of its last schema
     * sections so that a table's blocks share one schema object, and one stage file. A reader shared by the task kept
     * 64 sections, so past 64 tables with blocks every block came with new schema objects and opened a stage file of
     * its own.
     */
    private final java.util.Map<java.util.List<String>, RowBlock.Reader> blockReaders = new java.util.HashMap<>();

    /**
     * A row record as its one row; its headers are read first, so that a record whose headers cannot be read is errant
     * before anything of its table is registered.
     */
    static List<TableSink.Row> rowOf(SinkRecord record, SinkHeaders headers) {
        headers.requireText();
        if (headers.present()) {
            headers.batchId();
            headers.operation();
        }
        return List.of(new TableSink.Row(record, headers, "the record"));
    }

    /**
     * The rows of a block record ({@link RowBlock}, {@code record.format=blocks} at the source), each as the row record
     * it stands for. A block that cannot be read goes to the errant record reporter whole.
     */
    List<TableSink.Row> blockRows(SinkRecord record, SinkHeaders headers) {
        return blockRows(record, headers, null);
    }

    /** {@link #blockRows(SinkRecord, SinkHeaders)}; also gives the block as read to {@code decoded}, if not null. */
    List<TableSink.Row> blockRows(SinkRecord record, SinkHeaders headers, java.util.function.Consumer<RowBlock.Decoded> decoded) {
        headers.requireText();
        if (!RowBlock.FORMAT.equals(headers.block())) {
            throw new IllegalArgumentException("header " + RowBlock.HEADER + " is '" + headers.block() + "': this sink reads"
                    + " blocks of format " + RowBlock.FORMAT + " (the source is of a newer tablecdc release?)");
        }
        if (!headers.present()) {
            throw new IllegalArgumentException("a block record without " + RecordHeaders.TABLE + " and " + RecordHeaders.BATCH
                    + " headers");
        }
        headers.batchId();
        byte[] bytes;
        if (record.value() instanceof byte[] b) {
            bytes = b;
        } else if (record.value() instanceof java.nio.ByteBuffer buffer) {
            bytes = new byte[buffer.remaining()];
            buffer.duplicate().get(bytes);
        } else {
            throw new IllegalArgumentException("flow " + headers.flow() + ", table " + headers.table() + ": a block record's value"
                    + " arrived as " + (record.value() == null ? "null" : record.value().getClass().getSimpleName())
                    + ", not as bytes; read the topic with the converter the source wrote it with (value.converter="
                    + "org.apache.kafka.connect.converters.ByteArrayConverter)");
        }
        RowBlock.Decoded block = blockReaders.computeIfAbsent(java.util.Arrays.asList(headers.flow(), headers.table()),
                t -> new RowBlock.Reader()).read(bytes);
        if (decoded != null) {
            decoded.accept(block);
        }
        List<RowBlock.Row> rows = block.rows();
        List<TableSink.Row> out = new ArrayList<>(rows.size());
        for (int i = 0; i < rows.size(); i++) {
            RowBlock.Row row = rows.get(i);
            out.add(new TableSink.Row(blockRow(record, block, row), headers.ofBlockRow(row, i == rows.size() - 1),
                    "row " + i + " (" + row.op() + ", version " + row.version() + ")"));
        }
        return out;
    }

    /** Row {@code row} of a block record as the row record it stands for (same topic, partition and offsets). */
    private static SinkRecord blockRow(SinkRecord record, RowBlock.Decoded block, RowBlock.Row row) {
        try {
            return new SinkRecord(record.topic(), record.kafkaPartition(), block.keySchema(), row.key(), block.valueSchema(),
                    row.value(), record.kafkaOffset(), record.timestamp(), record.timestampType(), null,
                    record.originalTopic(), record.originalKafkaPartition(), record.originalKafkaOffset());
        } catch (NoSuchMethodError olderWorker) {
            return new SinkRecord(record.topic(), record.kafkaPartition(), block.keySchema(), row.key(), block.valueSchema(),
                    row.value(), record.kafkaOffset(), record.timestamp(), record.timestampType());
        }
    }
}
