package io.tablecdc.catalog;

import static io.tablecdc.catalog.Sql.QUARANTINE;
import static io.tablecdc.catalog.Sql.STAGE;
import static io.tablecdc.catalog.Sql.STAGED_OFFSET;
import static io.tablecdc.catalog.Sql.STATE;
import static io.tablecdc.catalog.Sql.first;
import static io.tablecdc.catalog.Sql.instant;
import static io.tablecdc.catalog.Sql.list;
import static io.tablecdc.catalog.Sql.nullable;
import static io.tablecdc.catalog.Sql.requireBatchId;
import static io.tablecdc.catalog.Sql.texts;
import static io.tablecdc.catalog.Sql.update;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The sink's staged batches ({@code cdc_table_avro_stage}): one row per batch of a table that is written to the
 * object store and not yet loaded into ClickHouse, with its files and counts, and the batches an operator set aside
 * ({@code cdc_table_quarantined_batch}).
 */
public final class Stages {

    private final CatalogDb db;

    Stages(CatalogDb db) {
        this.db = db;
    }

    /**
     * Stores the stage row of one batch, replacing the manifest and counts of an existing row for the same batch (its
     * {@code created_at} stays). A batch at or below the table's normalized batch id is already loaded, so nothing is
     * stored for it. A batch that is only a truncate has no file: its row is stored all the same, so that it is
     * normalized in batch order. May be called again after a crash.
     *
     * @return true if the batch's stage row names {@code stage}'s files after the call, false if the batch was already
     *         normalized (from other files)
     */
    public boolean upsertStage(String flow, String table, Stage stage) {
        return upsertStage(flow, table, stage, List.of());
    }

    /**
     * Stores the stage row of a batch the sink cut itself from records of other producers, as
     * {@link #upsertStage(String, String, Stage)} does, and in the same transaction raises the table's staged offsets
     * ({@code cdc_sink_staged_offset}) to those of the batch ({@code covering}: per consumed topic partition, its highest
     * offset and latest record timestamp). A batch whose every offset is at or below the table's staged offsets holds
     * only records staged before (another task staged them meanwhile): nothing is stored, and false is returned, unless
     * its stage row already names {@code stage}'s files (this call repeated after its answer was lost).
     */
    public boolean upsertStage(String flow, String table, Stage stage, List<StagedOffsets> covering) {
        Objects.requireNonNull(stage, "stage");
        Manifest files = Manifest.of(stage.files());
        RowCounts counts = stage.counts();
        Sql.requireName("upsertStage", "table", table);
        return db.inTransaction("upsertStage", flow, c -> {
            // serialized with recordLoaded: a batch recorded as loaded meanwhile is seen here, and nothing is stored
            lockState(c, flow, table, "SHARE");
            if (!covering.isEmpty() && stagedBefore(c, flow, table, covering)) {
                return readStages(c, flow, table, stage.batchId(), stage.batchId()).stream()
                        .anyMatch(st -> st.files().equals(stage.files()));
            }
            boolean stored = update(c, "INSERT INTO " + STAGE + " AS st"
                    + " (flow_name, source_table_identifier, batch_id, truncate_before, avro_files, rows, inserts, updates,"
                    + "  deletes, clamped_values)"
                    + " SELECT ?, ?, ?, ?, " + Manifest.JSON + ", ?, ?, ?, ?, ?"
                    + " WHERE NOT EXISTS (SELECT 1 FROM " + STATE + " s WHERE s.flow_name = ?"
                    + "   AND s.source_table_identifier = ? AND s.normalized_batch_id >= ?)"
                    + " ON CONFLICT (flow_name, source_table_identifier, batch_id) DO UPDATE SET"
                    + " truncate_before = EXCLUDED.truncate_before, avro_files = EXCLUDED.avro_files,"
                    + " rows = EXCLUDED.rows, inserts = EXCLUDED.inserts, updates = EXCLUDED.updates,"
                    + " deletes = EXCLUDED.deletes, clamped_values = EXCLUDED.clamped_values",
                    flow, table, stage.batchId(), stage.truncateBefore(), files.uris(), files.rows(), files.bytes(), stage.rows(),
                    counts.inserts(), counts.updates(), counts.deletes(), counts.clampedValues(), flow, table, stage.batchId()) == 1
                    // nothing written: the batch is normalized already; its row, not deleted yet, may name these files
                    // (this call repeated after its answer was lost) or others (loaded: these are not stored)
                    || readStages(c, flow, table, stage.batchId(), stage.batchId()).stream()
                            .anyMatch(st -> st.files().equals(stage.files()));
            if (stored) {
                for (StagedOffsets o : covering) {
                    update(c, "INSERT INTO " + STAGED_OFFSET + " AS so (flow_name, source_table_identifier, topic,"
                            + " kafka_partition, last_offset, max_timestamp) VALUES (?, ?, ?, ?, ?, ?)"
                            + " ON CONFLICT (flow_name, source_table_identifier, topic, kafka_partition) DO UPDATE SET"
                            + " last_offset = GREATEST(so.last_offset, EXCLUDED.last_offset),"
                            + " max_timestamp = GREATEST(so.max_timestamp, EXCLUDED.max_timestamp), updated_at = now()",
                            flow, table, o.topic(), o.partition(), o.lastOffset(), o.maxTimestamp());
                }
            }
            return stored;
        });
    }

    /** Whether every offset of {@code covering} is at or below the table's staged offsets (rows locked for the caller). */
    private static boolean stagedBefore(Connection c, String flow, String table, List<StagedOffsets> covering)
            throws SQLException {
        for (StagedOffsets o : covering) {
            long staged = first(c, "SELECT last_offset FROM " + STAGED_OFFSET + " WHERE flow_name = ?"
                    + " AND source_table_identifier = ? AND topic = ? AND kafka_partition = ? FOR UPDATE",
                    rs -> rs.getLong(1), flow, table, o.topic(), o.partition()).orElse(-1L);
            if (o.lastOffset() > staged) {
                return false;
            }
        }
        return true;
    }

    /**
     * The table's staged offsets ({@link #upsertStage(String, String, Stage, List)}), per consumed topic partition;
     * none for a table of tablecdc sources. Read-only.
     */
    public List<StagedOffsets> stagedOffsets(String flow, String table) {
        return db.onTable("stagedOffsets", flow, table, c -> list(c, "SELECT topic, kafka_partition, last_offset,"
                + " max_timestamp FROM " + STAGED_OFFSET + " WHERE flow_name = ? AND source_table_identifier = ?"
                + " ORDER BY topic, kafka_partition",
                rs -> new StagedOffsets(rs.getString(1), rs.getInt(2), rs.getLong(3), rs.getLong(4)), flow, table));
    }

    /** The stage of one batch, if it is staged and not yet normalized. Read-only. */
    public Optional<Stage> getStage(String flow, String table, long batchId) {
        requireBatchId(batchId);
        return db.onTable("getStage", flow, table,
                c -> readStages(c, flow, table, batchId, batchId).stream().findFirst());
    }

    /** The table's stages with a batch id above {@code afterBatchId}, by batch id. Read-only. */
    public List<Stage> listStages(String flow, String table, long afterBatchId) {
        return db.onTable("listStages", flow, table,
                c -> readStages(c, flow, table, afterBatchId + 1, Long.MAX_VALUE));
    }

    /** All the table's stages, by batch id. Read-only. */
    public List<Stage> listStages(String flow, String table) {
        return listStages(flow, table, 0);
    }

    /**
     * Deletes the stage row of one batch whatever files it names. May be called again after a crash. The sink's
     * normalize uses {@link #deleteStage(String, String, long, List)}, which keeps a row staged again meanwhile.
     *
     * @return true if a row was deleted now
     */
    public boolean deleteStage(String flow, String table, long batchId) {
        requireBatchId(batchId);
        return db.onTable("deleteStage", flow, table, c -> update(c, "DELETE FROM " + STAGE
                + " WHERE flow_name = ? AND source_table_identifier = ? AND batch_id = ?", flow, table, batchId) == 1);
    }

    /**
     * Deletes the stage row of one batch only while it names exactly {@code files} (those a normalize run loaded and
     * removed): a row that the sink replaced meanwhile (the batch staged again under other files) stays, for the next
     * run to load. May be called again after a crash.
     *
     * @return true if a row was deleted now
     */
    public boolean deleteStage(String flow, String table, long batchId, List<StageFile> files) {
        requireBatchId(batchId);
        Manifest manifest = Manifest.of(files);
        return db.onTable("deleteStage", flow, table, c -> update(c, "DELETE FROM " + STAGE
                + " WHERE flow_name = ? AND source_table_identifier = ? AND batch_id = ? AND avro_files = "
                + Manifest.JSON, flow, table, batchId, manifest.uris(), manifest.rows(), manifest.bytes()) == 1);
    }

    /**
     * Records that the batches {@code loaded} (stage rows as a normalize run read them, in batch order, their files now
     * loaded) are normalized: in one transaction, and only if every one of their stage rows still names the same files,
     * rows and truncate, the table's normalized batch id is raised to the last of them with {@code counts}
     * ({@link TableProgress#recordNormalize}). If the sink staged one of them again meanwhile (other files), nothing is
     * recorded: the run loaded files the catalog no longer names, and the next run loads the batch's new files. The
     * table's state row is locked first, as {@link #upsertStage} locks it, so a batch is either staged again before the
     * record (which then refuses) or after it (the upsert then stores nothing: the batch is normalized). The stage rows
     * are not deleted here: the caller removes the files, then the rows ({@link #deleteStage(String, String, long, List)}).
     * May be called again after a crash.
     *
     * @return 0 when recorded (or recorded already); otherwise the first batch of {@code loaded} whose stage row changed
     *         or is gone, and nothing was written
     */
    public long recordLoaded(String flow, String table, List<Stage> loaded, RowCounts counts, Instant at) {
        Objects.requireNonNull(counts, "counts");
        Objects.requireNonNull(at, "at");
        if (loaded.isEmpty()) {
            throw new IllegalArgumentException("no batch loaded");
        }
        Sql.requireName("recordLoaded", "table", table);
        long first = loaded.get(0).batchId();
        long last = loaded.get(loaded.size() - 1).batchId();
        return db.inTransaction("recordLoaded", flow, c -> {
            long normalized = lockState(c, flow, table, "UPDATE");
            list(c, "SELECT batch_id FROM " + STAGE + " WHERE flow_name = ? AND source_table_identifier = ?"
                    + " AND batch_id BETWEEN ? AND ? FOR UPDATE", rs -> null, flow, table, first, last);
            Map<Long, Stage> now = new LinkedHashMap<>();
            for (Stage stage : readStages(c, flow, table, first, last)) {
                now.put(stage.batchId(), stage);
            }
            for (Stage stage : loaded) {
                Stage current = now.get(stage.batchId());
                if (current == null && stage.batchId() <= normalized) {
                    continue; // recorded and removed by an earlier call (a repeat after a crash)
                }
                if (current == null || !current.files().equals(stage.files()) || current.rows() != stage.rows()
                        || current.truncateBefore() != stage.truncateBefore()) {
                    return stage.batchId();
                }
            }
            TableProgress.recordNormalize(c, flow, table, last, counts, at);
            return 0L;
        });
    }

    /**
     * Locks the table's state row ({@code FOR SHARE} or {@code FOR UPDATE}) on the caller's transaction; returns its
     * normalized batch id, 0 when the table has no state row yet.
     */
    private static long lockState(Connection c, String flow, String table, String mode) throws SQLException {
        return first(c, "SELECT normalized_batch_id FROM " + STATE + " WHERE flow_name = ? AND source_table_identifier = ?"
                + " FOR " + ("SHARE".equals(mode) ? "SHARE" : "UPDATE"), rs -> rs.getLong(1), flow, table).orElse(0L);
    }

    /** A stage's files as the three arrays {@link #JSON} binds into its {@code avro_files} value. */
    private record Manifest(String[] uris, Long[] rows, Long[] bytes) {
        /** The {@code avro_files} jsonb of the three arrays bound after it (uris, rows, bytes), {@code []} for none. */
        static final String JSON = "COALESCE((SELECT jsonb_agg(jsonb_build_object('uri', f.uri, 'rows', f.rows,"
                + "   'bytes', f.bytes) ORDER BY f.ord)"
                + "   FROM unnest(?::text[], ?::int8[], ?::int8[]) WITH ORDINALITY AS f(uri, rows, bytes, ord)),"
                + "   '[]'::jsonb)";

        static Manifest of(List<StageFile> files) {
            int n = files.size();
            String[] uris = new String[n];
            Long[] rows = new Long[n];
            Long[] bytes = new Long[n];
            for (int i = 0; i < n; i++) {
                StageFile f = files.get(i);
                uris[i] = f.uri();
                rows[i] = f.rows();
                bytes[i] = f.bytes();
            }
            return new Manifest(uris, rows, bytes);
        }
    }

    /**
     * The tables that sink {@code sinkName} loads from any of {@code topics} and that have staged batches waiting, as
     * {@code [flow, table, topic]}. Read-only.
     */
    public List<String[]> tablesWithStages(String sinkName, Collection<String> topics) {
        return db.onCatalog("tablesWithStages", c -> list(c, "SELECT s.flow_name, s.source_table_identifier,"
                + " s.sink_topic FROM " + STATE + " s"
                + " WHERE s.sink_name = ? AND s.sink_topic = ANY (?)"
                + " AND EXISTS (SELECT 1 FROM " + STAGE + " st WHERE st.flow_name = s.flow_name"
                + "   AND st.source_table_identifier = s.source_table_identifier)"
                + " ORDER BY s.flow_name, s.source_table_identifier",
                rs -> new String[] {rs.getString(1), rs.getString(2), rs.getString(3)}, sinkName, texts(topics)));
    }

    /**
     * Deletes every stage row of the table on the caller's connection (its files stay), and forgets its staged offsets
     * (records of other producers are staged again from wherever the sink reads them next); returns how many stage
     * rows.
     */
    public static int dropStages(Connection c, String flow, String table) throws SQLException {
        update(c, "DELETE FROM " + STAGED_OFFSET + " WHERE flow_name = ? AND source_table_identifier = ?", flow, table);
        return update(c, "DELETE FROM " + STAGE + " WHERE flow_name = ? AND source_table_identifier = ?", flow, table);
    }

    /** A batch moved to {@code cdc_table_quarantined_batch}: its id, rows, number of stage files and truncate. */
    public record QuarantinedBatch(long batchId, long rows, int files, boolean truncateBefore) {
    }

    /**
     * Moves one staged batch of the table to {@code cdc_table_quarantined_batch}, with its files, its rows and
     * {@code error}, on the caller's connection: the batch {@code batch}, or with null the table's first staged one;
     * only a batch above {@code normalizedBatchId}.
     *
     * @return the batch set aside, or empty when there is no such batch
     */
    public static Optional<QuarantinedBatch> quarantine(Connection c, String flow, String table, long normalizedBatchId,
                                                        Long batch, String error) throws SQLException {
        return first(c, "WITH moved AS (DELETE FROM " + STAGE
                + " WHERE flow_name = ? AND source_table_identifier = ? AND batch_id = (SELECT min(batch_id)"
                + "   FROM " + STAGE + " WHERE flow_name = ? AND source_table_identifier = ? AND batch_id > ?"
                + "   AND (?::bigint IS NULL OR batch_id = ?::bigint))"
                + " RETURNING flow_name, source_table_identifier, batch_id, avro_files, rows, truncate_before)"
                + " INSERT INTO " + QUARANTINE + " (flow_name, source_table_identifier, batch_id, avro_files, rows,"
                + "   truncate_before, error)"
                + " SELECT flow_name, source_table_identifier, batch_id, avro_files, rows, truncate_before, ? FROM moved"
                + " RETURNING batch_id, rows, jsonb_array_length(avro_files), truncate_before",
                rs -> new QuarantinedBatch(rs.getLong(1), rs.getLong(2), rs.getInt(3), rs.getBoolean(4)),
                flow, table, flow, table, normalizedBatchId, nullable(batch), nullable(batch), error);
    }

    /** A batch set aside with {@code tablecdc-quarantine-batch}. */
    public record Quarantined(String flow, String table, long batchId, long rows, Instant at, String error) {
    }

    /**
     * The batches set aside in the tables of {@code flows} (of every flow when it is empty), by flow, table and batch
     * id, on the caller's connection; none when the catalog has no quarantine table yet. Read-only.
     */
    public static List<Quarantined> listQuarantined(Connection c, List<String> flows) throws SQLException {
        boolean hasQuarantine = first(c, "SELECT to_regclass('" + QUARANTINE + "') IS NOT NULL",
                rs -> rs.getBoolean(1)).orElse(false);
        if (!hasQuarantine) {
            return List.of();
        }
        return list(c, "SELECT flow_name, source_table_identifier, batch_id, rows, quarantined_at, error FROM "
                + QUARANTINE + " WHERE ? OR flow_name = ANY (?) ORDER BY flow_name, source_table_identifier, batch_id",
                rs -> new Quarantined(rs.getString(1), rs.getString(2), rs.getLong(3), rs.getLong(4),
                        instant(rs.getTimestamp(5)), rs.getString(6)), flows.isEmpty(), texts(flows));
    }

    private static List<Stage> readStages(Connection c, String flow, String table, long fromBatch, long toBatch)
            throws SQLException {
        Map<Long, Stage> stages = new LinkedHashMap<>();
        Map<Long, List<StageFile>> files = new LinkedHashMap<>();
        list(c, "SELECT st.batch_id, st.rows, st.inserts, st.updates,"
                + " st.deletes, st.created_at, f.value ->> 'uri', (f.value ->> 'rows')::int8,"
                + " (f.value ->> 'bytes')::int8, st.truncate_before, st.clamped_values"
                + " FROM " + STAGE + " st"
                + " LEFT JOIN LATERAL jsonb_array_elements(st.avro_files) WITH ORDINALITY AS f(value, ord) ON true"
                + " WHERE st.flow_name = ? AND st.source_table_identifier = ? AND st.batch_id BETWEEN ? AND ?"
                + " ORDER BY st.batch_id, f.ord", rs -> {
                    readStageRow(rs, stages, files);
                    return null;
                }, flow, table, fromBatch, toBatch);
        List<Stage> result = new ArrayList<>(stages.size());
        for (Stage s : stages.values()) {
            result.add(new Stage(s.batchId(), files.get(s.batchId()), s.rows(), s.counts(), s.truncateBefore(),
                    s.createdAt()));
        }
        return result;
    }

    /** One row of a stage and one of its files (none for a stage without files). */
    private static void readStageRow(ResultSet rs, Map<Long, Stage> stages, Map<Long, List<StageFile>> files)
            throws SQLException {
        long batchId = rs.getLong(1);
        if (!stages.containsKey(batchId)) {
            stages.put(batchId, new Stage(batchId, List.of(), rs.getLong(2),
                    new RowCounts(rs.getLong(3), rs.getLong(4), rs.getLong(5), rs.getLong(11)), rs.getBoolean(10),
                    instant(rs.getTimestamp(6))));
            files.put(batchId, new ArrayList<>());
        }
        String uri = rs.getString(7);
        if (uri != null) {
            files.get(batchId).add(new StageFile(uri, rs.getLong(8), rs.getLong(9)));
        }
    }
}
