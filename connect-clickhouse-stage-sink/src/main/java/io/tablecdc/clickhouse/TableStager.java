package io.tablecdc.clickhouse;

import java.io.IOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.sink.SinkRecord;

import io.tablecdc.clickhouse.schema.StageSchema;
import io.tablecdc.clickhouse.schema.TypeMappingException;
import io.tablecdc.clickhouse.stage.StagePart;
import io.tablecdc.clickhouse.stage.StageWriter;
import io.tablecdc.common.RecordHeaders;
import io.tablecdc.common.catalog.RowCounts;

/**
 * The open batch of one table inside a sink task: its records stream into a {@link StageWriter}; when the
 * batch is complete its parts are handed to the task to upload and record. Owned by the task thread.
 */
final class TableStager {
    final TableKey key;
    private final Path localDir;
    private final String codec;
    private final long maxFileBytes;

    private StageSchema schema;
    private Schema schemaFor;
    private StageWriter writer;
    private long batchId = -1;
    private long inserts;
    private long updates;
    private long deletes;
    private long openedAtMs;
    private final Map<TopicPartition, Long> firstOffsets = new HashMap<>();

    TableStager(TableKey key, Path localDir, String codec, long maxFileBytes) {
        this.key = key;
        this.localDir = localDir;
        this.codec = codec;
        this.maxFileBytes = maxFileBytes;
    }

    /** A complete batch, ready to upload: its parts on local disk and what they hold. */
    record ClosedBatch(TableKey key, long batchId, List<StagePart> parts, long rows, RowCounts counts,
                       Map<TopicPartition, Long> firstOffsets) {
    }

    boolean open() {
        return writer != null;
    }

    long batchId() {
        return batchId;
    }

    long openedAtMs() {
        return openedAtMs;
    }

    long rows() {
        return writer == null ? 0 : writer.rows();
    }

    /** The first offset of the open batch in {@code partition}, or null when the open batch has none from it. */
    Long firstOffset(TopicPartition partition) {
        return firstOffsets.get(partition);
    }

    /**
     * Appends one record to batch {@code recordBatchId}. Throws {@link TypeMappingException} (nothing
     * appended) when the record cannot be staged; the caller reports it as an errant record.
     */
    void append(SinkRecord record, long recordBatchId, long version, RecordHeaders.Op op, long nowMs) throws IOException {
        Schema valueSchema = record.valueSchema();
        if (record.value() != null && !(record.value() instanceof Struct)) {
            throw new TypeMappingException("table " + key.table() + ": record at " + record.topic() + "-" + record.kafkaPartition()
                    + "@" + record.kafkaOffset() + " has a " + (valueSchema == null ? "schemaless" : valueSchema.type().toString())
                    + " value where a row needs a STRUCT with a schema; use a converter that keeps schemas");
        }
        Struct value = (Struct) record.value();
        if (op == RecordHeaders.Op.DELETE && value == null && record.key() instanceof Struct keyStruct) {
            // a tombstone-style delete: the key carries the columns that identify the row
            valueSchema = schemaFor != null ? schemaFor : keyStruct.schema();
            value = project(keyStruct, valueSchema);
        }
        if (value == null || valueSchema == null) {
            throw new TypeMappingException("table " + key.table() + ": record at " + record.topic() + "-" + record.kafkaPartition()
                    + "@" + record.kafkaOffset() + " has no value Struct with a schema; use a converter that keeps schemas");
        }
        if (valueSchema != schemaFor) {
            schema = StageSchema.of(key.table(), valueSchema, keyColumns(record, valueSchema));
            schemaFor = valueSchema;
        }
        var avro = schema.toAvro(value, version, op == RecordHeaders.Op.DELETE);
        if (writer == null) {
            batchId = recordBatchId;
            writer = new StageWriter(localDir, key.fileName() + "-" + recordBatchId + "-" + System.nanoTime(), codec, maxFileBytes);
            openedAtMs = nowMs;
        }
        writer.append(schema, avro);
        switch (op) {
            case UPDATE -> updates++;
            case DELETE -> deletes++;
            default -> inserts++;
        }
        TopicPartition tp = new TopicPartition(record.topic(), record.kafkaPartition());
        firstOffsets.putIfAbsent(tp, record.kafkaOffset());
    }

    /** Closes the open batch and returns it; the stager is empty afterwards. */
    ClosedBatch close() throws IOException {
        List<StagePart> parts = writer.finish();
        ClosedBatch closed = new ClosedBatch(key, batchId, parts, writer.rows(), new RowCounts(inserts, updates, deletes),
                Map.copyOf(firstOffsets));
        reset();
        return closed;
    }

    /** Drops the open batch (its records will be delivered again). */
    void abandon() throws IOException {
        if (writer != null) {
            writer.close();
        }
        reset();
    }

    private void reset() {
        writer = null;
        batchId = -1;
        inserts = updates = deletes = 0;
        firstOffsets.clear();
    }

    /** The key columns: the fields of the record key's Struct schema (a table without a key has none). */
    private Set<String> keyColumns(SinkRecord record, Schema valueSchema) {
        Schema keySchema = record.keySchema();
        Set<String> keys = new LinkedHashSet<>();
        if (keySchema != null && keySchema.type() == Schema.Type.STRUCT) {
            for (Field field : keySchema.fields()) {
                if (valueSchema.field(field.name()) == null) {
                    throw new TypeMappingException("table " + key.table() + ": key column " + field.name() + " is not in the record value");
                }
                keys.add(field.name());
            }
        }
        return keys;
    }

    private static Struct project(Struct keyStruct, Schema valueSchema) {
        Struct value = new Struct(valueSchema);
        for (Field field : valueSchema.fields()) {
            Field keyField = keyStruct.schema().field(field.name());
            if (keyField != null) {
                value.put(field, keyStruct.get(keyField));
            }
        }
        return value;
    }
}
