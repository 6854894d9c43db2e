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
import io.tablecdc.common.NonFiniteValues;
import io.tablecdc.common.RecordHeaders;
import io.tablecdc.catalog.RowCounts;

/**
 * The open batch of one table inside a sink task: its records stream into a {@link StageWriter}; when the
 * batch is complete its parts are handed to the task to upload and record. Owned by the task thread.
 *
 * <p>A batch may start with a truncate of its source table ({@link #truncate}): the batch is then open
 * before it has a file, and a batch that is only the truncate closes with no part at all.
 */
final class TableStager {
    final TableKey key;
    private final Path localDir;
    private final String codec;
    private final long maxFileBytes;
    private final java.util.function.Predicate<String> integerTemporal;
    private final java.util.function.Predicate<String> decimalText;
    private final java.util.function.Consumer<StageSchema.Clamp> firstClampOfColumn;
    private final Set<String> clampedColumns = new java.util.HashSet<>();

    private StageSchema schema;
    private Schema schemaFor;
    private StageWriter writer;
    private long batchId = -1;
    private boolean truncateBefore;
    private long inserts;
    private long updates;
    private long deletes;
    private long clampedValues;
    private long openedAtMs;
    /** The lowest and highest row version of the open batch (null before its first row). */
    private java.math.BigInteger minVersion;
    private java.math.BigInteger maxVersion;
    private final Map<TopicPartition, Long> firstOffsets = new HashMap<>();
    /** The batch has a row with unchanged values: its records from then on carry the lookup fields. */
    private boolean lookup;
    private boolean schemaLookup;
    /**
     * Per key whose latest record in the open batch still has unchanged values: where they come from. A later
     * record of the key with unchanged values has them from the same place (the source filled every value the
     * batch itself holds). Keys only, never values.
     */
    private final Map<Struct, Lookup> lookups = new HashMap<>();
    /** The previous record of the batch, when it was a delete: its key, version and the lookup its row had. */
    private Struct deletedKey;
    private java.math.BigInteger deletedVersion;
    private Lookup deletedLookup;

    /** The row version that unchanged values are kept from: the newest version of {@code key} below {@code version}. */
    record Lookup(Struct key, java.math.BigInteger version) {
    }

    TableStager(TableKey key, Path localDir, String codec, long maxFileBytes) {
        this(key, localDir, codec, maxFileBytes, column -> false, clamp -> { });
    }

    /**
     * {@code integerTemporal}: the date and timestamp columns staged as integers; {@code firstClampOfColumn} is told
     * of the first value of each column this stager stores at the edge of ClickHouse's range (to log it once).
     */
    TableStager(TableKey key, Path localDir, String codec, long maxFileBytes, java.util.function.Predicate<String> integerTemporal,
                java.util.function.Consumer<StageSchema.Clamp> firstClampOfColumn) {
        this(key, localDir, codec, maxFileBytes, integerTemporal, column -> false, firstClampOfColumn);
    }

    /** As above, with {@code decimalText}: the decimal columns staged as text. */
    TableStager(TableKey key, Path localDir, String codec, long maxFileBytes, java.util.function.Predicate<String> integerTemporal,
                java.util.function.Predicate<String> decimalText, java.util.function.Consumer<StageSchema.Clamp> firstClampOfColumn) {
        this.decimalText = decimalText;
        this.key = key;
        this.localDir = localDir;
        this.codec = codec;
        this.maxFileBytes = maxFileBytes;
        this.integerTemporal = integerTemporal;
        this.firstClampOfColumn = firstClampOfColumn;
    }

    /**
     * A complete batch, ready to upload: its parts on local disk (none for a batch that is only a truncate),
     * what they hold, and whether the destination table is emptied before they are loaded.
     */
    record ClosedBatch(TableKey key, long batchId, List<StagePart> parts, long rows, RowCounts counts,
                       boolean truncateBefore, Map<TopicPartition, Long> firstOffsets, java.math.BigInteger minVersion,
                       java.math.BigInteger maxVersion) {
        /**
         * The name of part {@code part}'s stage object under {@code prefix}: it carries the batch's lowest and highest
         * row version ({@code .v<min>_<max>.avro}), which the normalize loop reads to decide which batches one INSERT
         * may load together ({@link TableNormalizer#versionRange}).
         */
        String objectName(String prefix, int part) {
            return prefix + "-" + part + (minVersion == null ? "" : ".v" + minVersion + "_" + maxVersion) + ".avro";
        }
    }

    boolean open() {
        return writer != null || truncateBefore;
    }

    /** Whether the open batch has staged a row yet (a truncate is not a row). */
    boolean hasRows() {
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
     * Starts batch {@code recordBatchId} with a truncate of the table: the destination is emptied before this
     * batch's rows are loaded. Only valid while the batch has no row (a truncate after rows of the same batch
     * cannot be ordered against them once they share a file); a second truncate in a row changes nothing.
     */
    void truncate(SinkRecord record, long recordBatchId, long nowMs) {
        if (hasRows()) {
            throw new IllegalStateException("table " + key.table() + ": batch " + batchId + " already has rows");
        }
        if (!truncateBefore) {
            batchId = recordBatchId;
            truncateBefore = true;
            openedAtMs = nowMs;
        }
        firstOffsets.putIfAbsent(OriginalPartition.of(record), record.kafkaOffset());
    }

    /**
     * Appends one record to batch {@code recordBatchId}. Throws {@link TypeMappingException} (nothing
     * appended) when the record cannot be staged; the caller reports it as an errant record.
     */
    void append(SinkRecord record, long recordBatchId, java.math.BigInteger version, RecordHeaders.Op op, long nowMs)
            throws IOException {
        append(record, recordBatchId, version, op, List.of(), false, nowMs);
    }

    /**
     * Appends one record whose {@code unchanged} columns (an update's unchanged TOAST values, {@code tablecdc.unchanged})
     * keep the values the row had before: the row's own newest version below this one, or, for an update that moved
     * the row ({@code keyChanged}), that of the old key deleted by the record right before it.
     */
    void append(SinkRecord record, long recordBatchId, java.math.BigInteger version, RecordHeaders.Op op, List<String> unchanged,
                boolean keyChanged, long nowMs) throws IOException {
        append(record, recordBatchId, version, op, unchanged, keyChanged, List.of(), nowMs);
    }

    /**
     * As above; {@code nonFinite} ({@code tablecdc.nonfinite}) names the values that are NaN or ±Infinity: floats are put
     * back into the value before it is staged (a converter such as JsonConverter reads them as 0); decimals, null in
     * the value, are stored as text in a {@code decimal.text.columns} column, else as NULL and counted.
     */
    void append(SinkRecord record, long recordBatchId, java.math.BigInteger version, RecordHeaders.Op op, List<String> unchanged,
                boolean keyChanged, List<String> nonFinite, long nowMs) throws IOException {
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
        Map<String, String> nonFiniteDecimals = nonFinite.isEmpty() ? Map.of() : new HashMap<>();
        if (!nonFinite.isEmpty()) {
            try {
                value = NonFiniteValues.restore(value, nonFinite, nonFiniteDecimals);
            } catch (IllegalArgumentException e) {
                throw new TypeMappingException("table " + key.table() + ": record at " + record.topic() + "-"
                        + record.kafkaPartition() + "@" + record.kafkaOffset() + ": " + e.getMessage());
            }
        }
        Struct rowKey = record.key() instanceof Struct k ? k : null;
        Lookup lookupOf = null;
        if (!unchanged.isEmpty()) {
            lookupOf = lookupOf(record, valueSchema, rowKey, version, op, unchanged, keyChanged);
        }
        boolean wantLookup = lookup || lookupOf != null;
        if (valueSchema != schemaFor || wantLookup != schemaLookup) {
            schema = StageSchema.of(key.table(), valueSchema, keyColumns(record, valueSchema), wantLookup, integerTemporal,
                    decimalText);
            schemaFor = valueSchema;
            schemaLookup = wantLookup;
        }
        var avro = lookupOf == null
                ? schema.toAvro(value, version, op == RecordHeaders.Op.DELETE, List.of(), rowKey, version, nonFiniteDecimals)
                : schema.toAvro(value, version, false, unchanged, lookupOf.key(), lookupOf.version(), nonFiniteDecimals);
        // a delete's image is not loaded as a value: what it holds is not counted
        List<StageSchema.Clamp> clamps = op == RecordHeaders.Op.DELETE ? List.of() : schema.lastClamps();
        if (writer == null) {
            writer = new StageWriter(localDir, key.fileName() + "-" + recordBatchId + "-" + System.nanoTime(), codec, maxFileBytes);
            if (!truncateBefore) {
                batchId = recordBatchId;
                openedAtMs = nowMs;
            }
        }
        writer.append(schema, avro);
        minVersion = minVersion == null ? version : minVersion.min(version);
        maxVersion = maxVersion == null ? version : maxVersion.max(version);
        lookup = wantLookup;
        if (rowKey != null) {
            if (op == RecordHeaders.Op.DELETE) {
                deletedLookup = lookups.remove(rowKey);
                deletedKey = rowKey;
                deletedVersion = version;
            } else {
                if (lookupOf != null) {
                    lookups.put(rowKey, lookupOf);
                } else if (!lookups.isEmpty()) {
                    lookups.remove(rowKey);
                }
                deletedKey = null;
            }
        }
        clampedValues += clamps.size();
        for (StageSchema.Clamp clamp : clamps) {
            if (clampedColumns.add(clamp.column())) {
                firstClampOfColumn.accept(clamp);
            }
        }
        switch (op) {
            case UPDATE -> updates++;
            case DELETE -> deletes++;
            default -> inserts++;
        }
        TopicPartition tp = OriginalPartition.of(record);
        firstOffsets.putIfAbsent(tp, record.kafkaOffset());
    }

    private Lookup lookupOf(SinkRecord record, Schema valueSchema, Struct rowKey, java.math.BigInteger version, RecordHeaders.Op op,
                            List<String> unchanged, boolean keyChanged) {
        String at = "table " + key.table() + ": record at " + record.topic() + "-" + record.kafkaPartition() + "@"
                + record.kafkaOffset();
        if (op != RecordHeaders.Op.UPDATE) {
            throw new TypeMappingException(at + " is a " + op + " with " + RecordHeaders.UNCHANGED + " headers; only an update"
                    + " keeps values of the row's previous version");
        }
        Set<String> keys = keyColumns(record, valueSchema);
        if (rowKey == null || keys.isEmpty()) {
            throw new TypeMappingException(at + " has unchanged values in " + unchanged + " but no key to find the row's"
                    + " previous version by");
        }
        for (String column : unchanged) {
            if (valueSchema.field(column) == null || keys.contains(column)) {
                throw new TypeMappingException(at + ": unchanged column " + column + (keys.contains(column)
                        ? " is a key column" : " is not in the record value"));
            }
        }
        if (keyChanged && deletedKey != null) {
            return deletedLookup != null ? deletedLookup : new Lookup(deletedKey, deletedVersion);
        }
        if (keyChanged) {
            throw new TypeMappingException(at + " moved its row to another key but the record before it in batch is not the"
                    + " delete of the old key, so the unchanged values in " + unchanged + " cannot be found");
        }
        Lookup earlier = lookups.get(rowKey);
        return earlier != null ? earlier : new Lookup(rowKey, version);
    }

    /** Closes the open batch and returns it; the stager is empty afterwards. */
    ClosedBatch close() throws IOException {
        List<StagePart> parts = writer == null ? List.of() : writer.finish();
        long rows = writer == null ? 0 : writer.rows();
        ClosedBatch closed = new ClosedBatch(key, batchId, parts, rows, new RowCounts(inserts, updates, deletes, clampedValues),
                truncateBefore, Map.copyOf(firstOffsets), minVersion, maxVersion);
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
        truncateBefore = false;
        inserts = updates = deletes = clampedValues = 0;
        firstOffsets.clear();
        minVersion = null;
        maxVersion = null;
        lookup = false;
        lookups.clear();
        deletedKey = null;
        deletedLookup = null;
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
