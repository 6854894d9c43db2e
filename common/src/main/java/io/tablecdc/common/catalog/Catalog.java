package io.tablecdc.common.catalog;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.tablecdc.catalog.CatalogMigrations;
import io.tablecdc.catalog.CatalogSchemaException;
import io.tablecdc.common.Resources;
import io.tablecdc.common.catalog.CatalogConfig.CatalogSettings;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLRecoverableException;
import java.sql.SQLTransientException;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The catalog client: one method per step the connectors take, over a small connection pool.
 *
 * <p>Every write is idempotent unless its javadoc says otherwise: calling it again with the same
 * arguments, for instance after a crash, leaves the catalog as the first call left it (ids only rise,
 * counts are added only when an id advances, rows are upserted, and an update that would change nothing
 * is skipped by the schema's triggers, {@code updated_at} included). Methods that report whether they
 * changed something return {@code false} on such a repeat, so a caller can log once per episode.
 *
 * <p>Timestamps passed in ({@code at}, {@code nextRetryAt}) are the caller's; copy leases use the
 * catalog's clock so that every worker agrees on when a lease expires.
 *
 * <p>Failures: {@link CatalogUnavailableException} (retriable) when the catalog cannot be reached,
 * {@link CatalogException} otherwise. Both name the operation, the flow and the table, and never carry
 * connection settings. All SQL uses bound parameters; only table and column names are literal.
 *
 * <p>Thread-safe: a task may share one instance between its threads.
 */
public final class Catalog implements AutoCloseable {

    private static final Pattern LSN = Pattern.compile("[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}");
    private static final int MAX_ERROR_CHARS = 4000;

    private static final String STATE = "cdc_table_replication_state";
    private static final String STAGE = "cdc_table_avro_stage";
    private static final String FLOW = "cdc_flow";

    private static final String STATE_COLUMNS = "flow_name, source_table_identifier, cursor_text,"
            + " last_attempt_at, last_synced_at, last_normalized_at, synced_batch_id, normalized_batch_id,"
            + " synced_rows_count, phase, phase_lsn, copy_attempt, copy_lease_owner, copy_lease_until,"
            + " paused_reason, paused_at, last_error, last_error_at, error_count, next_retry_at, inserts_count,"
            + " updates_count, deletes_count, first_row_received_at, first_row_commit_time, updated_at,"
            + " copy_rows_done, copy_rows_total, clamped_values_count";

    private static final String FLOW_COLUMNS = "flow_name, source_kind, source_system_identifier, source_timeline,"
            + " source_slot, source_publication, destination_identity, config_hash, created_at, updated_at";

    private final DataSource dataSource;
    private final AutoCloseable pool;

    /**
     * Wraps an existing data source (the caller owns it; {@link #close()} leaves it open). Applies no
     * migrations.
     */
    public Catalog(DataSource dataSource) {
        this(dataSource, null);
    }

    private Catalog(DataSource dataSource, AutoCloseable pool) {
        this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
        this.pool = pool;
    }

    /**
     * Opens a pool on the catalog and, with {@code catalog.migrate=true}, applies pending migrations;
     * otherwise checks that the schema is the one this release needs. Connectors call it from
     * {@code start()}. May be called again after a crash (migrations are applied once).
     *
     * @param settings   from {@link CatalogConfig#settings}
     * @param clientName who opens it (connector or task name), shown in {@code pg_stat_activity}
     * @throws CatalogUnavailableException if the catalog cannot be reached (retrying may help)
     * @throws CatalogException if it refuses the connection (wrong password, unknown user or database),
     *         or its schema is newer than this release knows, or older while migrations are off (naming
     *         both versions)
     */
    public static Catalog open(CatalogSettings settings, String clientName) {
        String user = settings.user() == null || settings.user().isEmpty() ? null : settings.user();
        String password = settings.password() == null ? null : settings.password().value();

        // first one plain connection: it fails fast and tells a refusal from an outage; migrations use it
        // too, with their own unpooled connections (with a pool of one they would wait for themselves)
        PGSimpleDataSource direct = new PGSimpleDataSource();
        try {
            direct.setUrl(settings.jdbcUrl());
        } catch (IllegalArgumentException e) {
            throw new CatalogException("catalog.jdbc.url is not a valid PostgreSQL JDBC URL");
        }
        if (user != null) {
            direct.setUser(user);
        }
        if (password != null) {
            direct.setPassword(password);
        }
        direct.setConnectTimeout((int) Math.max(1, settings.connectionTimeoutMs() / 1000));
        direct.setApplicationName(truncate("tablecdc " + clientName, 63));
        try (Connection probe = direct.getConnection()) {
            probe.isValid(1);
        } catch (SQLException e) {
            String advice = " (check catalog.jdbc.url, catalog.user and catalog.password): " + causeText(e);
            if (isRefusal(e)) {
                throw new CatalogException("the catalog refused the connection when " + clientName + " started"
                        + advice, e);
            }
            throw new CatalogUnavailableException("catalog unreachable when " + clientName + " started" + advice, e);
        }
        try {
            if (settings.migrate()) {
                CatalogMigrations.migrate(direct);
            } else {
                CatalogMigrations.verify(direct);
            }
        } catch (CatalogSchemaException e) {
            if (causedByOutage(e)) {
                // the catalog went away between the probe and the check: an outage, retried like one
                throw new CatalogUnavailableException("catalog unreachable when " + clientName + " started (during its"
                        + " schema check): " + causeText(e), e);
            }
            throw new CatalogException("catalog schema check failed when " + clientName + " started: "
                    + e.getMessage(), e);
        }

        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(settings.jdbcUrl());
        if (user != null) {
            config.setUsername(user);
        }
        if (password != null) {
            config.setPassword(password);
        }
        config.setMaximumPoolSize(settings.poolSize());
        config.setMinimumIdle(0);
        config.setConnectionTimeout(settings.connectionTimeoutMs());
        // the probe above checked the catalog; from here on an outage is a retriable error per operation
        config.setInitializationFailTimeout(-1);
        config.setPoolName("tablecdc-catalog-" + clientName);
        config.addDataSourceProperty("ApplicationName", truncate("tablecdc " + clientName, 63));
        HikariDataSource pool = new HikariDataSource(config);
        return new Catalog(pool, pool);
    }

    /** Closes the pool if this catalog opened it. */
    @Override
    public void close() {
        Resources.closeQuietly(pool, "the catalog's connection pool");
    }

    // ---------------------------------------------------------------- tables: progress

    /**
     * Creates the table's row if it does not exist; never touches an existing row (its cursor, ids,
     * counts and phase stay). May be called again after a crash.
     *
     * @param initialPhase the phase of a new row ({@link Phase#PENDING} for Postgres tables), or null
     * @return true if the row was created now
     */
    public boolean initTable(String flow, String table, Phase initialPhase) {
        return onTable("initTable", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + STATE
                    + " (flow_name, source_table_identifier, phase) VALUES (?, ?, ?)"
                    + " ON CONFLICT (flow_name, source_table_identifier) DO NOTHING")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setString(3, initialPhase == null ? null : initialPhase.sqlName());
                return ps.executeUpdate() == 1;
            }
        });
    }

    /** {@link #initTable(String, String, Phase)} without a phase (query CDC). */
    public boolean initTable(String flow, String table) {
        return initTable(flow, table, null);
    }

    /**
     * Records a poll attempt at {@code at}. {@code last_attempt_at} only moves forward, so a late or
     * repeated call cannot rewind it. May be called again after a crash.
     */
    public void recordAttempt(String flow, String table, Instant at) {
        Objects.requireNonNull(at, "at");
        onTable("recordAttempt", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + STATE + " AS s"
                    + " (flow_name, source_table_identifier, last_attempt_at) VALUES (?, ?, ?)"
                    + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE"
                    + " SET last_attempt_at = GREATEST(s.last_attempt_at, EXCLUDED.last_attempt_at)")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setTimestamp(3, ts(at));
                return ps.executeUpdate();
            }
        });
    }

    /**
     * Records that a batch (or a cursor move without rows) is durably in Kafka. When
     * {@code batch.batchId()} is above the stored synced batch id, the id, the cursor and
     * {@code last_synced_at} move and the batch's rows are added; the oldest-unnormalized-row times are
     * set if none are pending and the batch is not already normalized (the sink can be faster than the
     * source's acknowledgement). When it equals the stored id, only the cursor and {@code last_synced_at}
     * move (an empty window walked forward). A lower id is stale and changes nothing. May be called
     * again after a crash: the repeat adds nothing.
     *
     * @return true if the row changed
     */
    public boolean recordSync(String flow, String table, SyncedBatch batch, Instant at) {
        Objects.requireNonNull(batch, "batch");
        Objects.requireNonNull(at, "at");
        return onTable("recordSync", flow, table, c -> recordSync(c, flow, table, batch, at));
    }

    private static boolean recordSync(Connection c, String flow, String table, SyncedBatch batch, Instant at)
            throws SQLException {
        {
            String advanced = "EXCLUDED.synced_batch_id > s.synced_batch_id";
            // the sink may normalize a batch before its source records the sync: then nothing is pending
            String pending = advanced + " AND EXCLUDED.synced_batch_id > s.normalized_batch_id";
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + STATE + " AS s"
                    + " (flow_name, source_table_identifier, cursor_text, synced_batch_id, synced_rows_count,"
                    + " last_synced_at, first_row_received_at, first_row_commit_time)"
                    + " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE SET"
                    + " cursor_text = EXCLUDED.cursor_text,"
                    + " synced_rows_count = s.synced_rows_count"
                    + "   + CASE WHEN " + advanced + " THEN EXCLUDED.synced_rows_count ELSE 0 END,"
                    + " first_row_received_at = CASE WHEN " + pending
                    + "   THEN COALESCE(s.first_row_received_at, EXCLUDED.first_row_received_at)"
                    + "   ELSE s.first_row_received_at END,"
                    + " first_row_commit_time = CASE WHEN " + pending
                    + "   THEN COALESCE(s.first_row_commit_time, EXCLUDED.first_row_commit_time)"
                    + "   ELSE s.first_row_commit_time END,"
                    + " last_synced_at = GREATEST(s.last_synced_at, EXCLUDED.last_synced_at),"
                    + " synced_batch_id = EXCLUDED.synced_batch_id"
                    + " WHERE EXCLUDED.synced_batch_id >= s.synced_batch_id")) {
                boolean hasRows = batch.rows() > 0;
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setString(3, batch.cursor());
                ps.setLong(4, batch.batchId());
                ps.setLong(5, batch.rows());
                ps.setTimestamp(6, ts(at));
                ps.setTimestamp(7, hasRows ? ts(batch.firstRowReceivedAt()) : null);
                ps.setTimestamp(8, hasRows ? ts(batch.firstRowCommitTime()) : null);
                return ps.executeUpdate() == 1;
            }
        }
    }

    /**
     * Records that the table's batches up to {@code batchId} are loaded into ClickHouse. Only when
     * {@code batchId} is above the stored normalized batch id: the id rises, {@code counts} (the
     * inserts, updates and deletes of the batches in {@code (previous id, batchId]}) are added, and the
     * oldest-unnormalized-row times are cleared once nothing synced is left. While batches remain they keep
     * their value, so the lag they give is an upper bound. May be called again after a crash: the
     * repeat adds nothing.
     *
     * @return true if the normalized batch id advanced
     */
    public boolean recordNormalize(String flow, String table, long batchId, RowCounts counts, Instant at) {
        Objects.requireNonNull(counts, "counts");
        Objects.requireNonNull(at, "at");
        requireBatchId(batchId);
        return onTable("recordNormalize", flow, table, c -> {
            String caughtUp = "EXCLUDED.normalized_batch_id >= s.synced_batch_id";
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + STATE + " AS s"
                    + " (flow_name, source_table_identifier, normalized_batch_id, inserts_count, updates_count,"
                    + " deletes_count, last_normalized_at, clamped_values_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE SET"
                    + " normalized_batch_id = EXCLUDED.normalized_batch_id,"
                    + " inserts_count = s.inserts_count + EXCLUDED.inserts_count,"
                    + " updates_count = s.updates_count + EXCLUDED.updates_count,"
                    + " deletes_count = s.deletes_count + EXCLUDED.deletes_count,"
                    + " clamped_values_count = s.clamped_values_count + EXCLUDED.clamped_values_count,"
                    + " last_normalized_at = GREATEST(s.last_normalized_at, EXCLUDED.last_normalized_at),"
                    + " first_row_received_at = CASE WHEN " + caughtUp + " THEN NULL"
                    + "   ELSE s.first_row_received_at END,"
                    + " first_row_commit_time = CASE WHEN " + caughtUp + " THEN NULL"
                    + "   ELSE s.first_row_commit_time END"
                    + " WHERE EXCLUDED.normalized_batch_id > s.normalized_batch_id")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setLong(3, batchId);
                ps.setLong(4, counts.inserts());
                ps.setLong(5, counts.updates());
                ps.setLong(6, counts.deletes());
                ps.setTimestamp(7, ts(at));
                ps.setLong(8, counts.clampedValues());
                return ps.executeUpdate() == 1;
            }
        });
    }

    // ---------------------------------------------------------------- tables: pause and errors

    /**
     * Pauses the table for {@code reason} (e.g. {@code normalize_buffer_full}, {@code manual}).
     * {@code paused_at} is set when the pause begins or its reason changes, and kept when the same pause
     * is recorded again. May be called again after a crash.
     *
     * @return true if this call began a pause or changed its reason (log it), false if it was already so
     */
    public boolean setPause(String flow, String table, String reason, Instant at) {
        Objects.requireNonNull(reason, "reason");
        Objects.requireNonNull(at, "at");
        return onTable("setPause", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + STATE + " AS s"
                    + " (flow_name, source_table_identifier, paused_reason, paused_at) VALUES (?, ?, ?, ?)"
                    + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE SET"
                    + " paused_reason = EXCLUDED.paused_reason,"
                    + " paused_at = CASE WHEN s.paused_reason IS NOT DISTINCT FROM EXCLUDED.paused_reason"
                    + "   THEN s.paused_at ELSE EXCLUDED.paused_at END")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setString(3, reason);
                ps.setTimestamp(4, ts(at));
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * Records which sink connector loads the table and from which Kafka topic. Writes only when either
     * changed. May be called again after a crash.
     *
     * @return true if the row changed now
     */
    public boolean recordSinkTopic(String flow, String table, String sinkName, String topic) {
        return onTable("recordSinkTopic", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE
                    + " SET sink_name = ?, sink_topic = ?"
                    + " WHERE flow_name = ? AND source_table_identifier = ?"
                    + " AND (sink_name IS DISTINCT FROM ? OR sink_topic IS DISTINCT FROM ?)")) {
                ps.setString(1, sinkName);
                ps.setString(2, topic);
                ps.setString(3, flow);
                ps.setString(4, table);
                ps.setString(5, sinkName);
                ps.setString(6, topic);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * The tables that sink {@code sinkName} loads from any of {@code topics} and that have staged batches
     * waiting, as {@code [flow, table, topic]}. Read-only.
     */
    public List<String[]> tablesWithStages(String sinkName, Collection<String> topics) {
        return onCatalog("tablesWithStages", c -> {
            Array topicArray = c.createArrayOf("text", topics.toArray());
            try (PreparedStatement ps = c.prepareStatement("SELECT s.flow_name, s.source_table_identifier, s.sink_topic FROM " + STATE + " s"
                    + " WHERE s.sink_name = ? AND s.sink_topic = ANY (?)"
                    + " AND EXISTS (SELECT 1 FROM " + STAGE + " st WHERE st.flow_name = s.flow_name"
                    + "   AND st.source_table_identifier = s.source_table_identifier)"
                    + " ORDER BY s.flow_name, s.source_table_identifier")) {
                ps.setString(1, sinkName);
                ps.setArray(2, topicArray);
                List<String[]> tables = new ArrayList<>();
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        tables.add(new String[] {rs.getString(1), rs.getString(2), rs.getString(3)});
                    }
                }
                return tables;
            } finally {
                topicArray.free();
            }
        });
    }

    /**
     * Ends the table's pause. May be called again after a crash.
     *
     * @return true if the table was paused
     */
    public boolean clearPause(String flow, String table) {
        return onTable("clearPause", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE
                    + " SET paused_reason = NULL, paused_at = NULL"
                    + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * Ends the table's pause only when it is paused for {@code reason}: a writer ends its own pause and leaves another
     * writer's (the sink's, an operator's) alone. May be called again after a crash.
     *
     * @return true if the table was paused for {@code reason}
     */
    public boolean clearPause(String flow, String table, String reason) {
        Objects.requireNonNull(reason, "reason");
        return onTable("clearPause", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE
                    + " SET paused_reason = NULL, paused_at = NULL"
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND paused_reason = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setString(3, reason);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * Opens the table's error episode or records one more error in it: {@code last_error},
     * {@code last_error_at} and {@code next_retry_at} are replaced and {@code error_count} grows by one,
     * but only for an error newer than the one stored, so a repeat with the same {@code at} changes
     * nothing. The error text is cut to 4000 characters. A Postgres pipeline table that is {@code errored} is left
     * as it is: its error and retry time are its copy's, or say that it left the publication, and a sink's
     * episode must neither hide them nor make a copy task claim it. May be called again after a crash.
     *
     * @param nextRetryAt when the table is retried, or null if it is not
     * @return true if this call opened the episode (log it once), false if one was open or it is a repeat
     */
    public boolean recordError(String flow, String table, String error, Instant at, Instant nextRetryAt) {
        Objects.requireNonNull(error, "error");
        Objects.requireNonNull(at, "at");
        return onTable("recordError", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + STATE + " AS s"
                    + " (flow_name, source_table_identifier, last_error, last_error_at, error_count, next_retry_at)"
                    + " VALUES (?, ?, ?, ?, 1, ?)"
                    + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE SET"
                    + " last_error = EXCLUDED.last_error, last_error_at = EXCLUDED.last_error_at,"
                    + " next_retry_at = EXCLUDED.next_retry_at, error_count = s.error_count + 1"
                    + " WHERE (s.last_error_at IS NULL OR EXCLUDED.last_error_at > s.last_error_at)"
                    // an errored Postgres table's error and retry time are its copy's (or say that it left)
                    + " AND s.phase IS DISTINCT FROM 'errored'"
                    + " RETURNING error_count")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setString(3, truncate(error, MAX_ERROR_CHARS));
                ps.setTimestamp(4, ts(at));
                ps.setTimestamp(5, ts(nextRetryAt));
                try (ResultSet rs = ps.executeQuery()) {
                    return rs.next() && rs.getInt(1) == 1;
                }
            }
        });
    }

    /**
     * Closes the table's error episode only when its {@code last_error} starts with {@code prefix}: a source
     * and a sink share one episode per table, and each may only end its own ({@code "poll:"},
     * {@code "normalize:"}, {@code "stage:"}). May be called again after a crash.
     *
     * @return true if an episode was closed now
     */
    public boolean clearError(String flow, String table, String prefix) {
        return onTable("clearError", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE
                    + " SET last_error = NULL, last_error_at = NULL, error_count = 0, next_retry_at = NULL"
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND starts_with(last_error, ?)"
                    + " AND phase IS DISTINCT FROM 'errored'")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setString(3, prefix);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * Closes the table's error episode after a success: clears the error, its time, count and next retry.
     * May be called again after a crash.
     *
     * @return true if an episode was open
     */
    public boolean clearError(String flow, String table) {
        return onTable("clearError", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE
                    + " SET last_error = NULL, last_error_at = NULL, error_count = 0, next_retry_at = NULL"
                    + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                return ps.executeUpdate() == 1;
            }
        });
    }

    // ---------------------------------------------------------------- tables: Postgres phases

    /**
     * Puts the table (back) in {@code pending}, dropping its phase LSN and any copy lease, e.g. when a
     * new table appears in the publication or the main slot is recreated. Creates the row if needed.
     * May be called again after a crash.
     *
     * @return true if the row changed
     */
    public boolean setPending(String flow, String table) {
        return onTable("setPending", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + STATE + " AS s"
                    + " (flow_name, source_table_identifier, phase) VALUES (?, ?, 'pending')"
                    + " ON CONFLICT (flow_name, source_table_identifier) DO UPDATE SET phase = 'pending',"
                    + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * The publication entries the flow's tables were last seen to belong to their publication by (see
     * {@link #setPublicationMember}); tables without a recorded entry are left out.
     */
    public Map<String, String> publicationMembers(String flow) {
        return onFlow("publicationMembers", flow, c -> {
            try (PreparedStatement ps = c.prepareStatement("SELECT source_table_identifier, publication_member FROM "
                    + STATE + " WHERE flow_name = ? AND publication_member IS NOT NULL")) {
                ps.setString(1, flow);
                Map<String, String> members = new HashMap<>();
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        members.put(rs.getString(1), rs.getString(2));
                    }
                }
                return members;
            }
        });
    }

    /**
     * Records by which entry of its publication (a relation and the {@code pg_publication_rel} or
     * {@code pg_publication_namespace} row that lists it) a Postgres pipeline table belongs to it. A table that left
     * the publication and came back belongs by another entry.
     *
     * @return true if the table's row exists
     */
    public boolean setPublicationMember(String flow, String table, String member) {
        return onTable("setPublicationMember", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET publication_member = ?"
                    + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, member);
                ps.setString(2, flow);
                ps.setString(3, table);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * Marks a Postgres pipeline table that left its publication: {@code errored} with {@code reason} and no retry
     * time, so no copy task claims it and no task streams it, while its batch ids, its staged batches and its rows in
     * ClickHouse stay. Should it come back, {@link #restartTable} copies it again with batch ids above the old ones.
     *
     * @return true if the table had a row
     */
    public boolean markLeft(String flow, String table, String reason) {
        return onTable("markLeft", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET phase = 'errored', phase_lsn = NULL,"
                    + " copy_lease_owner = NULL, copy_lease_until = NULL, last_error = ?, last_error_at = now(),"
                    + " next_retry_at = NULL WHERE flow_name = ? AND source_table_identifier = ? AND phase IS NOT NULL")) {
                ps.setString(1, reason);
                ps.setString(2, flow);
                ps.setString(3, table);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * Starts a Postgres pipeline table over with a new copy ({@link TableRestart}): {@code errored} with
     * {@code reason}, claimed by a copy task after {@code delaySeconds}.
     *
     * @return the phase before, or empty if the flow has no such table
     */
    public Optional<String> restartTable(String flow, String table, String reason, int delaySeconds) {
        return onTable("restartTable", flow, table, c -> TableRestart.restart(c, flow, table, reason, delaySeconds));
    }

    /**
     * Claims one table of the flow for copying: a {@code pending} table, a {@code copying} table whose
     * lease expired (its task died), or an {@code errored} table whose {@code next_retry_at} has come.
     * The claimed table becomes {@code copying}, leased to {@code owner} for {@code lease} by the
     * catalog's clock, and its copy attempt grows by one. Concurrent claims never return the same table
     * ({@code FOR UPDATE SKIP LOCKED} on the row, then the lease).
     *
     * <p>Not idempotent by nature: each call claims another table. After a crash the lease expires and
     * the table is claimed again.
     *
     * @return the claimed table, or empty if none is claimable now
     */
    public Optional<CopyClaim> claimCopy(String flow, String owner, Duration lease) {
        return claimCopy(flow, owner, lease, null, List.of());
    }

    /**
     * Extends the copy lease of {@code owner} on the table to {@code lease} from now (catalog clock).
     * May be repeated; a crash in between only lets the lease run out sooner.
     *
     * @return false if {@code owner} no longer holds the table (its copy must stop)
     */
    public boolean renewCopyLease(String flow, String table, String owner, Duration lease) {
        Objects.requireNonNull(owner, "owner");
        requirePositive(lease);
        return onTable("renewCopyLease", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE
                    + " SET copy_lease_until = now() + make_interval(secs => ?)"
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'copying'"
                    + " AND copy_lease_owner = ?")) {
                ps.setDouble(1, seconds(lease));
                ps.setString(2, flow);
                ps.setString(3, table);
                ps.setString(4, owner);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * Reserves the next {@code count} batch ids of the table and returns the first: ids above every id reserved,
     * synced, normalized or staged for it before. An id handed out here is never handed out again, whichever task
     * asks and however tasks die, so two batches never share an id. Not idempotent: a repeated call reserves
     * another block (unused ids are gaps, which the sink accepts).
     *
     * @throws CatalogException when the table has no row
     */
    public long reserveBatchIds(String flow, String table, int count) {
        if (count < 1) {
            throw new IllegalArgumentException("count must be positive: " + count);
        }
        return onTable("reserveBatchIds", flow, table, c -> reserveBatchIds(c, flow, table, count));
    }

    private static long reserveBatchIds(Connection c, String flow, String table, int count) throws SQLException {
        {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " AS s SET reserved_batch_id ="
                    + " GREATEST(s.reserved_batch_id, s.synced_batch_id, s.normalized_batch_id,"
                    + "   (SELECT COALESCE(max(st.batch_id), 0) FROM " + STAGE + " st"
                    + "    WHERE st.flow_name = s.flow_name AND st.source_table_identifier = s.source_table_identifier))"
                    + "   + ?"
                    + " WHERE s.flow_name = ? AND s.source_table_identifier = ? RETURNING s.reserved_batch_id")) {
                ps.setInt(1, count);
                ps.setString(2, flow);
                ps.setString(3, table);
                try (ResultSet rs = ps.executeQuery()) {
                    if (!rs.next()) {
                        throw new CatalogException("flow " + flow + ", table " + table + ": no catalog row to reserve"
                                + " batch ids in");
                    }
                    return rs.getLong(1) - count + 1;
                }
            }
        }
    }

    /**
     * Records where the apply task saw {@code owner}'s handover marker: the table stays {@code copying} with
     * {@code phase_lsn} = the marker's LSN, so that an apply task that restarts keeps holding the table's changes
     * after that point until the copy task moves it to {@code catchup(lsn)}. May be called again after a crash.
     *
     * @return true if {@code owner} still holds the table and the marker is recorded (now or before), or the
     *     table already is in {@code catchup} or {@code ready} at {@code lsn}
     */
    public boolean markHandover(String flow, String table, String owner, String lsn) {
        Objects.requireNonNull(owner, "owner");
        requireLsn(lsn);
        return onTable("markHandover", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET phase_lsn = ?"
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'copying'"
                    + " AND copy_lease_owner = ? AND (phase_lsn IS NULL OR phase_lsn = ?)")) {
                ps.setString(1, lsn);
                ps.setString(2, flow);
                ps.setString(3, table);
                ps.setString(4, owner);
                ps.setString(5, lsn);
                return ps.executeUpdate() == 1 || inPhase(c, flow, table, Phase.COPYING, lsn)
                        || inPhase(c, flow, table, Phase.CATCHUP, lsn) || inPhase(c, flow, table, Phase.READY, lsn);
            }
        });
    }

    /**
     * Gives a table {@code owner} holds back to {@code pending} (its copy task stops cleanly), so another copy task
     * claims it at once instead of waiting for the lease to expire. May be called again: a table no longer held
     * by {@code owner} is left as it is.
     *
     * @return true if the table was released now
     */
    public boolean releaseCopy(String flow, String table, String owner) {
        Objects.requireNonNull(owner, "owner");
        return onTable("releaseCopy", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET phase = 'pending',"
                    + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL"
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'copying'"
                    + " AND copy_lease_owner = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setString(3, owner);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * Records a copy's progress: rows sent so far and the expected total (raised to {@code done} when the
     * estimate was low). Only while {@code owner} holds the table. May be called again with the same values.
     *
     * @return false if {@code owner} no longer holds the table
     */
    public boolean recordCopyProgress(String flow, String table, String owner, long done, long total) {
        Objects.requireNonNull(owner, "owner");
        return onTable("recordCopyProgress", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET copy_rows_done = ?,"
                    + " copy_rows_total = ? WHERE flow_name = ? AND source_table_identifier = ?"
                    + " AND phase = 'copying' AND copy_lease_owner = ?")) {
                ps.setLong(1, done);
                ps.setLong(2, Math.max(done, total));
                ps.setString(3, flow);
                ps.setString(4, table);
                ps.setString(5, owner);
                if (ps.executeUpdate() == 1) {
                    return true;
                }
            }
            // an update that changes nothing reports no row: check the lease
            try (PreparedStatement ps = c.prepareStatement("SELECT 1 FROM " + STATE + " WHERE flow_name = ?"
                    + " AND source_table_identifier = ? AND phase = 'copying' AND copy_lease_owner = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setString(3, owner);
                try (ResultSet rs = ps.executeQuery()) {
                    return rs.next();
                }
            }
        });
    }

    /**
     * Moves the table from {@code copying} (held by {@code owner}) to {@code catchup(lsn)} and releases
     * the lease. May be called again after a crash: true again when the table already is in
     * {@code catchup} at {@code lsn}.
     *
     * @return false if {@code owner} does not hold the table and it is not already in catchup at lsn
     */
    public boolean markCatchup(String flow, String table, String owner, String lsn) {
        Objects.requireNonNull(owner, "owner");
        requireLsn(lsn);
        return onTable("markCatchup", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET phase = 'catchup',"
                    + " phase_lsn = ?, copy_lease_owner = NULL, copy_lease_until = NULL"
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'copying'"
                    + " AND copy_lease_owner = ?")) {
                ps.setString(1, lsn);
                ps.setString(2, flow);
                ps.setString(3, table);
                ps.setString(4, owner);
                return ps.executeUpdate() == 1 || inPhase(c, flow, table, Phase.CATCHUP, lsn);
            }
        });
    }

    /**
     * Moves the table to {@code ready(lsn)}: from {@code catchup(lsn)} once the apply task's durable
     * position passed {@code lsn}, or straight from {@code pending} for a table that is not copied and
     * streams from {@code lsn}. May be called again after a crash: true again when already ready at
     * {@code lsn}.
     *
     * @return false if the table is in another phase (e.g. a copy task claimed it meanwhile)
     */
    public boolean markReady(String flow, String table, String lsn) {
        requireLsn(lsn);
        return onTable("markReady", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET phase = 'ready',"
                    + " phase_lsn = ?, copy_lease_owner = NULL, copy_lease_until = NULL, copy_failures = 0"
                    + " WHERE flow_name = ? AND source_table_identifier = ?"
                    + " AND (phase = 'pending' OR (phase = 'catchup' AND phase_lsn = ?))")) {
                ps.setString(1, lsn);
                ps.setString(2, flow);
                ps.setString(3, table);
                ps.setString(4, lsn);
                return ps.executeUpdate() == 1 || inPhase(c, flow, table, Phase.READY, lsn);
            }
        });
    }

    /**
     * Moves every table of the flow in {@code catchup(c)} with {@code c <= durableLsn} to
     * {@code ready(c)}. The apply task calls it when its durable position advances. May be called again
     * after a crash.
     *
     * @return the tables that became ready now
     */
    public List<String> markCaughtUpReady(String flow, String durableLsn) {
        requireLsn(durableLsn);
        return onFlow("markCaughtUpReady", flow, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET phase = 'ready', copy_failures = 0"
                    + " WHERE flow_name = ? AND phase = 'catchup' AND phase_lsn::pg_lsn <= ?::pg_lsn"
                    + " RETURNING source_table_identifier")) {
                ps.setString(1, flow);
                ps.setString(2, durableLsn);
                List<String> ready = new ArrayList<>();
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        ready.add(rs.getString(1));
                    }
                }
                ready.sort(null);
                return ready;
            }
        });
    }

    /**
     * Marks the table {@code errored} and records the error as {@link #recordError} does. With an
     * {@code owner} (a copy task) only while that owner holds the table, so a task whose lease was taken
     * over cannot overwrite the new copy; with a null owner (the apply task) in any phase. With a
     * {@code nextRetryAt} a copy task claims it again from then; with null it stays errored. May be
     * called again after a crash: the repeat changes nothing.
     *
     * @return true if the row changed now
     */
    public boolean markErrored(String flow, String table, String owner, String error, Instant at,
                               Instant nextRetryAt) {
        Objects.requireNonNull(error, "error");
        Objects.requireNonNull(at, "at");
        return onTable("markErrored", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET phase = 'errored',"
                    + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL,"
                    + " last_error = ?, last_error_at = ?, next_retry_at = ?,"
                    + " error_count = error_count + CASE WHEN last_error_at IS NULL OR last_error_at < ?"
                    + "   THEN 1 ELSE 0 END"
                    + " WHERE flow_name = ? AND source_table_identifier = ?"
                    + " AND (last_error_at IS NULL OR last_error_at <= ?)"
                    + " AND (CAST(? AS text) IS NULL OR (phase = 'copying' AND copy_lease_owner = ?))")) {
                Timestamp atTs = ts(at);
                ps.setString(1, truncate(error, MAX_ERROR_CHARS));
                ps.setTimestamp(2, atTs);
                ps.setTimestamp(3, ts(nextRetryAt));
                ps.setTimestamp(4, atTs);
                ps.setString(5, flow);
                ps.setString(6, table);
                ps.setTimestamp(7, atTs);
                ps.setString(8, owner);
                ps.setString(9, owner);
                return ps.executeUpdate() == 1;
            }
        });
    }

    // ---------------------------------------------------------------- stages

    /**
     * Stores the stage row of one batch, replacing the manifest and counts of an existing row for the same
     * batch (its {@code created_at} stays). A batch at or below the table's normalized batch id is already
     * loaded, so nothing is stored for it. A batch that is only a truncate has no file: its row is stored all
     * the same, so that it is normalized in batch order. May be called again after a crash.
     *
     * @return true if the stage row exists after the call, false if the batch was already normalized
     */
    public boolean upsertStage(String flow, String table, Stage stage) {
        Objects.requireNonNull(stage, "stage");
        return onTable("upsertStage", flow, table, c -> {
            int n = stage.files().size();
            String[] uris = new String[n];
            Long[] rows = new Long[n];
            Long[] bytes = new Long[n];
            for (int i = 0; i < n; i++) {
                StageFile f = stage.files().get(i);
                uris[i] = f.uri();
                rows[i] = f.rows();
                bytes[i] = f.bytes();
            }
            Array uriArray = c.createArrayOf("text", uris);
            Array rowArray = c.createArrayOf("int8", rows);
            Array byteArray = c.createArrayOf("int8", bytes);
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + STAGE + " AS st"
                    + " (flow_name, source_table_identifier, batch_id, truncate_before, avro_files, rows, inserts, updates,"
                    + "  deletes, clamped_values)"
                    + " SELECT ?, ?, ?, ?, COALESCE((SELECT jsonb_agg(jsonb_build_object('uri', f.uri, 'rows', f.rows,"
                    + "   'bytes', f.bytes) ORDER BY f.ord)"
                    + "   FROM unnest(?::text[], ?::int8[], ?::int8[]) WITH ORDINALITY AS f(uri, rows, bytes, ord)),"
                    + "   '[]'::jsonb), ?, ?, ?, ?, ?"
                    + " WHERE NOT EXISTS (SELECT 1 FROM " + STATE + " s WHERE s.flow_name = ?"
                    + "   AND s.source_table_identifier = ? AND s.normalized_batch_id >= ?)"
                    + " ON CONFLICT (flow_name, source_table_identifier, batch_id) DO UPDATE SET"
                    + " truncate_before = EXCLUDED.truncate_before, avro_files = EXCLUDED.avro_files,"
                    + " rows = EXCLUDED.rows, inserts = EXCLUDED.inserts, updates = EXCLUDED.updates,"
                    + " deletes = EXCLUDED.deletes, clamped_values = EXCLUDED.clamped_values")) {
                int i = 0;
                ps.setString(++i, flow);
                ps.setString(++i, table);
                ps.setLong(++i, stage.batchId());
                ps.setBoolean(++i, stage.truncateBefore());
                ps.setArray(++i, uriArray);
                ps.setArray(++i, rowArray);
                ps.setArray(++i, byteArray);
                ps.setLong(++i, stage.rows());
                ps.setLong(++i, stage.counts().inserts());
                ps.setLong(++i, stage.counts().updates());
                ps.setLong(++i, stage.counts().deletes());
                ps.setLong(++i, stage.counts().clampedValues());
                ps.setString(++i, flow);
                ps.setString(++i, table);
                ps.setLong(++i, stage.batchId());
                if (ps.executeUpdate() == 1) {
                    return true;
                }
            } finally {
                uriArray.free();
                rowArray.free();
                byteArray.free();
            }
            // nothing written: either the same row is already there, or the batch is already normalized
            return readStages(c, flow, table, stage.batchId(), stage.batchId()).size() == 1;
        });
    }

    /** The stage of one batch, if it is staged and not yet normalized. Read-only. */
    public Optional<Stage> getStage(String flow, String table, long batchId) {
        requireBatchId(batchId);
        return onTable("getStage", flow, table, c -> {
            List<Stage> stages = readStages(c, flow, table, batchId, batchId);
            return stages.isEmpty() ? Optional.<Stage>empty() : Optional.of(stages.get(0));
        });
    }

    /** The table's stages with a batch id above {@code afterBatchId}, by batch id. Read-only. */
    public List<Stage> listStages(String flow, String table, long afterBatchId) {
        return onTable("listStages", flow, table,
                c -> readStages(c, flow, table, afterBatchId + 1, Long.MAX_VALUE));
    }

    /** All the table's stages, by batch id. Read-only. */
    public List<Stage> listStages(String flow, String table) {
        return listStages(flow, table, 0);
    }

    /**
     * Deletes the stage row of one batch (after its files were loaded and removed). May be called again
     * after a crash.
     *
     * @return true if a row was deleted now
     */
    public boolean deleteStage(String flow, String table, long batchId) {
        requireBatchId(batchId);
        return onTable("deleteStage", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("DELETE FROM " + STAGE
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND batch_id = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setLong(3, batchId);
                return ps.executeUpdate() == 1;
            }
        });
    }

    // ---------------------------------------------------------------- reads

    /** The table's row. Read-only. */
    public Optional<TableState> getTable(String flow, String table) {
        return onTable("getTable", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("SELECT " + STATE_COLUMNS + " FROM " + STATE
                    + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                try (ResultSet rs = ps.executeQuery()) {
                    return rs.next() ? Optional.of(tableState(rs)) : Optional.<TableState>empty();
                }
            }
        });
    }

    /** The rows of every table of the flow, by table name. Read-only. */
    public List<TableState> listTables(String flow) {
        return onFlow("listTables", flow, c -> {
            try (PreparedStatement ps = c.prepareStatement("SELECT " + STATE_COLUMNS + " FROM " + STATE
                    + " WHERE flow_name = ? ORDER BY source_table_identifier")) {
                ps.setString(1, flow);
                List<TableState> tables = new ArrayList<>();
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        tables.add(tableState(rs));
                    }
                }
                return tables;
            }
        });
    }

    // ---------------------------------------------------------------- flows

    /**
     * Registers the flow on its first start and checks its identity on every later one. Fields of
     * {@code identity} that are null are not checked; recorded fields that are null are filled in. A
     * recorded non-null field that differs from the given one refuses the resume, except the timeline
     * when {@code acceptTimelineChange} (failover recovery on), which is then updated. The config hash
     * is replaced when given. May be called again after a crash.
     *
     * @return the flow's row after the call
     * @throws FlowIdentityMismatchException naming every recorded value and the value now seen
     */
    public FlowRecord registerFlow(String flow, FlowIdentity identity, String configHash,
                                   boolean acceptTimelineChange) {
        Objects.requireNonNull(identity, "identity");
        return inTransaction("registerFlow", flow, c -> {
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + FLOW + " (flow_name, source_kind,"
                    + " source_system_identifier, source_timeline, source_slot, source_publication,"
                    + " destination_identity, config_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    + " ON CONFLICT (flow_name) DO NOTHING")) {
                ps.setString(1, flow);
                bindIdentity(ps, 2, identity);
                ps.setString(8, configHash);
                ps.executeUpdate();
            }
            FlowRecord stored;
            try (PreparedStatement ps = c.prepareStatement("SELECT " + FLOW_COLUMNS + " FROM " + FLOW
                    + " WHERE flow_name = ? FOR UPDATE")) {
                ps.setString(1, flow);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    stored = flowRecord(rs);
                }
            }
            FlowIdentity recorded = stored.identity();
            List<String> mismatches = new ArrayList<>();
            compare(mismatches, "source kind", recorded.sourceKind(), identity.sourceKind());
            compare(mismatches, "source system identifier", recorded.systemIdentifier(), identity.systemIdentifier());
            compare(mismatches, "slot", recorded.slot(), identity.slot());
            compare(mismatches, "publication", recorded.publication(), identity.publication());
            compare(mismatches, "destination", recorded.destination(), identity.destination());
            if (!acceptTimelineChange) {
                compare(mismatches, "timeline", recorded.timeline(), identity.timeline());
            }
            if (!mismatches.isEmpty()) {
                throw new FlowIdentityMismatchException("flow '" + flow + "' refuses to resume: "
                        + String.join("; ", mismatches) + ". The catalog and the source offsets belong to"
                        + " another source or destination; start a new flow (another connector name) or"
                        + " delete this flow's catalog rows and offsets to start over.");
            }
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + FLOW + " SET"
                    + " source_kind = COALESCE(source_kind, ?),"
                    + " source_system_identifier = COALESCE(source_system_identifier, ?),"
                    + " source_timeline = COALESCE(?, source_timeline),"
                    + " source_slot = COALESCE(source_slot, ?),"
                    + " source_publication = COALESCE(source_publication, ?),"
                    + " destination_identity = COALESCE(destination_identity, ?),"
                    + " config_hash = COALESCE(?, config_hash)"
                    + " WHERE flow_name = ?")) {
                bindIdentity(ps, 1, identity);
                ps.setString(7, configHash);
                ps.setString(8, flow);
                ps.executeUpdate();
            }
            return readFlow(c, flow).orElseThrow();
        });
    }

    /**
     * Replaces the flow's main slot {@code oldSlot} (one the server invalidated) with {@code newSlot} and, in the
     * same transaction, puts every table of the flow back in {@code pending} with a fresh copy attempt count, no
     * error and no lease, so that each is copied again from the new slot. Recording the new name before the slot
     * exists keeps the usual order (name first, then the slot). May be called again after a crash: when the flow
     * already records {@code newSlot} nothing changes.
     *
     * @return the tables put back in pending (empty when the slot was already replaced)
     * @throws FlowIdentityMismatchException when the flow records neither slot
     */
    public List<String> replaceSlot(String flow, String oldSlot, String newSlot) {
        Objects.requireNonNull(oldSlot, "oldSlot");
        Objects.requireNonNull(newSlot, "newSlot");
        return inTransaction("replaceSlot", flow, c -> {
            String recorded;
            try (PreparedStatement ps = c.prepareStatement("SELECT source_slot FROM " + FLOW
                    + " WHERE flow_name = ? FOR UPDATE")) {
                ps.setString(1, flow);
                try (ResultSet rs = ps.executeQuery()) {
                    recorded = rs.next() ? rs.getString(1) : null;
                }
            }
            if (newSlot.equals(recorded)) {
                return List.<String>of();
            }
            if (!oldSlot.equals(recorded)) {
                throw new FlowIdentityMismatchException("flow '" + flow + "' records slot '" + recorded
                        + "', not '" + oldSlot + "': the slot was not replaced");
            }
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + FLOW + " SET source_slot = ?"
                    + " WHERE flow_name = ?")) {
                ps.setString(1, newSlot);
                ps.setString(2, flow);
                ps.executeUpdate();
            }
            List<String> tables = new ArrayList<>();
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET phase = 'pending',"
                    + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL, copy_attempt = 0,"
                    + " copy_failures = 0, next_retry_at = NULL, last_error = NULL"
                    + " WHERE flow_name = ? RETURNING source_table_identifier")) {
                ps.setString(1, flow);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        tables.add(rs.getString(1));
                    }
                }
            }
            tables.sort(null);
            return tables;
        });
    }

    /** {@link #registerFlow(String, FlowIdentity, String, boolean)} refusing a timeline change. */
    public FlowRecord registerFlow(String flow, FlowIdentity identity, String configHash) {
        return registerFlow(flow, identity, configHash, false);
    }

    /** The flow's row. Read-only. */
    public Optional<FlowRecord> getFlow(String flow) {
        return onFlow("getFlow", flow, c -> readFlow(c, flow));
    }

    /** Every flow, by name. Read-only. */
    public List<FlowRecord> listFlows() {
        return onCatalog("listFlows", c -> {
            try (PreparedStatement ps = c.prepareStatement("SELECT " + FLOW_COLUMNS + " FROM " + FLOW
                    + " ORDER BY flow_name");
                 ResultSet rs = ps.executeQuery()) {
                List<FlowRecord> flows = new ArrayList<>();
                while (rs.next()) {
                    flows.add(flowRecord(rs));
                }
                return flows;
            }
        });
    }

    /**
     * Deletes the state and stage rows of the flow's tables that are not in {@code tablesInFlow} (tables
     * removed from the flow's config); other flows are never touched. The stage files of pruned tables
     * are left in the object store. May be called again after a crash.
     *
     * @param tablesInFlow the flow's tables now; must not be empty (an empty list is most likely a
     *                     configuration mistake, and would erase the whole flow)
     * @return the pruned tables, by name
     */
    public List<String> pruneTables(String flow, Collection<String> tablesInFlow) {
        Objects.requireNonNull(tablesInFlow, "tablesInFlow");
        if (tablesInFlow.isEmpty()) {
            throw new IllegalArgumentException("pruneTables for flow '" + flow + "' needs the flow's tables;"
                    + " refusing to prune every table");
        }
        return inTransaction("pruneTables", flow, c -> {
            Array keep = c.createArrayOf("text", tablesInFlow.toArray(new String[0]));
            try {
                try (PreparedStatement ps = c.prepareStatement("DELETE FROM " + STAGE
                        + " WHERE flow_name = ? AND NOT (source_table_identifier = ANY (?))")) {
                    ps.setString(1, flow);
                    ps.setArray(2, keep);
                    ps.executeUpdate();
                }
                List<String> pruned = new ArrayList<>();
                try (PreparedStatement ps = c.prepareStatement("DELETE FROM " + STATE
                        + " WHERE flow_name = ? AND NOT (source_table_identifier = ANY (?))"
                        + " RETURNING source_table_identifier")) {
                    ps.setString(1, flow);
                    ps.setArray(2, keep);
                    try (ResultSet rs = ps.executeQuery()) {
                        while (rs.next()) {
                            pruned.add(rs.getString(1));
                        }
                    }
                }
                pruned.sort(null);
                return pruned;
            } finally {
                keep.free();
            }
        });
    }

    // ---------------------------------------------------------------- plumbing

    @FunctionalInterface
    private interface Work<T> {
        T run(Connection c) throws SQLException;
    }

    private <T> T onTable(String operation, String flow, String table, Work<T> work) {
        requireName(operation, "flow", flow);
        requireName(operation, "table", table);
        return run(operation, flow, table, work);
    }

    private <T> T onFlow(String operation, String flow, Work<T> work) {
        requireName(operation, "flow", flow);
        return run(operation, flow, null, work);
    }

    private <T> T onCatalog(String operation, Work<T> work) {
        return run(operation, null, null, work);
    }

    private <T> T run(String operation, String flow, String table, Work<T> work) {
        try (Connection c = dataSource.getConnection()) {
            if (!c.getAutoCommit()) {
                c.setAutoCommit(true);
            }
            return work.run(c);
        } catch (SQLException e) {
            throw translate(operation, flow, table, e);
        }
    }

    private <T> T inTransaction(String operation, String flow, Work<T> work) {
        requireName(operation, "flow", flow);
        try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(false);
            try {
                T result = work.run(c);
                c.commit();
                return result;
            } catch (SQLException | RuntimeException e) {
                try {
                    c.rollback();
                } catch (SQLException suppressed) {
                    e.addSuppressed(suppressed);
                }
                throw e;
            } finally {
                c.setAutoCommit(true);
            }
        } catch (SQLException e) {
            throw translate(operation, flow, null, e);
        }
    }

    private static void requireName(String operation, String what, String value) {
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException(operation + " needs a " + what + " name");
        }
    }

    static RuntimeException translate(String operation, String flow, String table, SQLException e) {
        String where = operation + (flow == null ? "" : " for flow '" + flow + "'")
                + (table == null ? "" : " table '" + table + "'");
        if (isTransient(e)) {
            return new CatalogUnavailableException("catalog unavailable during " + where + ", will retry: "
                    + causeText(e), e);
        }
        return new CatalogException("catalog " + where + " failed: " + causeText(e), e);
    }

    /** Wrong password, unknown user or database: retrying will not help. */
    private static boolean isRefusal(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLException sql && sql.getSQLState() != null
                    && (sql.getSQLState().startsWith("28") || sql.getSQLState().equals("3D000"))) {
                return true;
            }
        }
        return false;
    }

    /** Whether {@code e} has an SQL cause that says the catalog could not be reached (see {@link #isTransient}). */
    private static boolean causedByOutage(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLException sql && isTransient(sql)) {
                return true;
            }
        }
        return false;
    }

    private static boolean isTransient(SQLException e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLTransientException || t instanceof SQLRecoverableException) {
                return true;
            }
            if (t instanceof SQLException sql && sql.getSQLState() != null) {
                String state = sql.getSQLState();
                if (state.startsWith("08") || state.startsWith("53") || state.startsWith("57P")
                        || state.equals("40001") || state.equals("40P01")) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The cause's message without anything that looks like a credential. */
    private static String causeText(Throwable e) {
        String text = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        return text.replaceAll("(?i)(password|passwd|pwd)=[^&;\\s]*", "$1=****");
    }

    private static boolean inPhase(Connection c, String flow, String table, Phase phase, String lsn)
            throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT 1 FROM " + STATE
                + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = ? AND phase_lsn = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            ps.setString(3, phase.sqlName());
            ps.setString(4, lsn);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next();
            }
        }
    }

    private static List<Stage> readStages(Connection c, String flow, String table, long fromBatch, long toBatch)
            throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT st.batch_id, st.rows, st.inserts, st.updates,"
                + " st.deletes, st.created_at, f.value ->> 'uri', (f.value ->> 'rows')::int8,"
                + " (f.value ->> 'bytes')::int8, st.truncate_before, st.clamped_values"
                + " FROM " + STAGE + " st"
                + " LEFT JOIN LATERAL jsonb_array_elements(st.avro_files) WITH ORDINALITY AS f(value, ord) ON true"
                + " WHERE st.flow_name = ? AND st.source_table_identifier = ? AND st.batch_id BETWEEN ? AND ?"
                + " ORDER BY st.batch_id, f.ord")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            ps.setLong(3, fromBatch);
            ps.setLong(4, toBatch);
            Map<Long, Stage> stages = new LinkedHashMap<>();
            Map<Long, List<StageFile>> files = new LinkedHashMap<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
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
            List<Stage> result = new ArrayList<>(stages.size());
            for (Stage s : stages.values()) {
                result.add(new Stage(s.batchId(), files.get(s.batchId()), s.rows(), s.counts(), s.truncateBefore(),
                        s.createdAt()));
            }
            return result;
        }
    }

    private static Optional<FlowRecord> readFlow(Connection c, String flow) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT " + FLOW_COLUMNS + " FROM " + FLOW
                + " WHERE flow_name = ?")) {
            ps.setString(1, flow);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? Optional.of(flowRecord(rs)) : Optional.empty();
            }
        }
    }

    private static void bindIdentity(PreparedStatement ps, int first, FlowIdentity id) throws SQLException {
        ps.setString(first, id.sourceKind());
        ps.setString(first + 1, id.systemIdentifier());
        if (id.timeline() == null) {
            ps.setNull(first + 2, Types.BIGINT);
        } else {
            ps.setLong(first + 2, id.timeline());
        }
        ps.setString(first + 3, id.slot());
        ps.setString(first + 4, id.publication());
        ps.setString(first + 5, id.destination());
    }

    private static void compare(List<String> mismatches, String what, Object recorded, Object seen) {
        if (recorded != null && seen != null && !recorded.equals(seen)) {
            mismatches.add(what + " was '" + recorded + "' when the flow was created but is '" + seen + "' now");
        }
    }

    private static FlowRecord flowRecord(ResultSet rs) throws SQLException {
        long timeline = rs.getLong(4);
        Long timelineOrNull = rs.wasNull() ? null : timeline;
        return new FlowRecord(rs.getString(1),
                new FlowIdentity(rs.getString(2), rs.getString(3), timelineOrNull, rs.getString(5),
                        rs.getString(6), rs.getString(7)),
                rs.getString(8), instant(rs.getTimestamp(9)), instant(rs.getTimestamp(10)));
    }

    private static TableState tableState(ResultSet rs) throws SQLException {
        return new TableState(rs.getString(1), rs.getString(2), rs.getString(3), instant(rs.getTimestamp(4)),
                instant(rs.getTimestamp(5)), instant(rs.getTimestamp(6)), rs.getLong(7), rs.getLong(8),
                rs.getLong(9), Phase.fromSqlName(rs.getString(10)), rs.getString(11), rs.getInt(12),
                rs.getString(13), instant(rs.getTimestamp(14)), rs.getString(15), instant(rs.getTimestamp(16)),
                rs.getString(17), instant(rs.getTimestamp(18)), rs.getInt(19), instant(rs.getTimestamp(20)),
                new RowCounts(rs.getLong(21), rs.getLong(22), rs.getLong(23), rs.getLong(29)), instant(rs.getTimestamp(24)),
                instant(rs.getTimestamp(25)), instant(rs.getTimestamp(26)), nullableLong(rs, 27), nullableLong(rs, 28));
    }

    private static Long nullableLong(ResultSet rs, int column) throws SQLException {
        long value = rs.getLong(column);
        return rs.wasNull() ? null : value;
    }

    private static Timestamp ts(Instant instant) {
        return instant == null ? null : Timestamp.from(instant);
    }

    private static Instant instant(Timestamp ts) {
        return ts == null ? null : ts.toInstant();
    }

    private static double seconds(Duration d) {
        return d.toNanos() / 1e9;
    }

    private static void requirePositive(Duration lease) {
        if (lease == null || lease.isNegative() || lease.isZero()) {
            throw new IllegalArgumentException("a copy lease must be positive: " + lease);
        }
    }

    private static void requireBatchId(long batchId) {
        if (batchId < 1) {
            throw new IllegalArgumentException("batch ids start at 1: " + batchId);
        }
    }

    private static void requireLsn(String lsn) {
        if (lsn == null || !LSN.matcher(lsn).matches()) {
            throw new IllegalArgumentException("not an LSN (expected like 16/B374D848): " + lsn);
        }
    }

    private static String truncate(String s, int max) {
        return s.length() <= max ? s : s.substring(0, max);
    }

    // ---------------------------------------------------------------- sink: normalize leases

    /**
     * Takes or renews the lease on loading the table into ClickHouse, for {@code lease} from the catalog's clock:
     * granted when nobody holds it, {@code owner} holds it already, or its holder's lease has expired. One sink
     * normalize loop per table holds it while it loads, so that two loops never load, truncate or raise the
     * normalized id of one table at the same time, not even while a rebalance moves the table between tasks.
     * May be called again after a crash.
     *
     * @return true if {@code owner} holds the lease now
     * @throws CatalogException when the table has no row
     */
    public boolean claimNormalizeLease(String flow, String table, String owner, Duration lease) {
        Objects.requireNonNull(owner, "owner");
        if (lease == null || lease.isNegative() || lease.isZero()) {
            throw new IllegalArgumentException("a normalize lease must be positive: " + lease);
        }
        return onTable("claimNormalizeLease", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET normalize_lease_owner = ?,"
                    + " normalize_lease_until = now() + make_interval(secs => ?)"
                    + " WHERE flow_name = ? AND source_table_identifier = ?"
                    + " AND (normalize_lease_owner IS NULL OR normalize_lease_owner = ? OR normalize_lease_until < now())")) {
                ps.setString(1, owner);
                ps.setDouble(2, seconds(lease));
                ps.setString(3, flow);
                ps.setString(4, table);
                ps.setString(5, owner);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * Extends {@code owner}'s normalize lease of the table by {@code lease} from now; nothing when another owner holds
     * it or nobody does (a lease given up is not taken again by a late renewal). May be called again after a crash.
     *
     * @return true if {@code owner} still holds the lease
     */
    public boolean renewNormalizeLease(String flow, String table, String owner, Duration lease) {
        Objects.requireNonNull(owner, "owner");
        Objects.requireNonNull(lease, "lease");
        return onTable("renewNormalizeLease", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET"
                    + " normalize_lease_until = now() + make_interval(secs => ?)"
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND normalize_lease_owner = ?")) {
                ps.setDouble(1, seconds(lease));
                ps.setString(2, flow);
                ps.setString(3, table);
                ps.setString(4, owner);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * Gives up {@code owner}'s normalize lease of the table (nothing when another owner holds it). May be called
     * again after a crash.
     *
     * @return true if {@code owner} held it
     */
    public boolean releaseNormalizeLease(String flow, String table, String owner) {
        Objects.requireNonNull(owner, "owner");
        return onTable("releaseNormalizeLease", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET normalize_lease_owner = NULL,"
                    + " normalize_lease_until = NULL WHERE flow_name = ? AND source_table_identifier = ?"
                    + " AND normalize_lease_owner = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                ps.setString(3, owner);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /** Who holds the table's normalize lease and until when, or empty when nobody does. Read-only. */
    public Optional<String> normalizeLeaseHolder(String flow, String table) {
        return onTable("normalizeLeaseHolder", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("SELECT normalize_lease_owner || ' until '"
                    + " || to_char(normalize_lease_until AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM " + STATE
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND normalize_lease_owner IS NOT NULL")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                try (ResultSet rs = ps.executeQuery()) {
                    return rs.next() ? Optional.ofNullable(rs.getString(1)) : Optional.<String>empty();
                }
            }
        });
    }

    /**
     * How many times the table was reloaded into ClickHouse by an operator ({@code tablecdc-reload-table}); 0 for a
     * table never reloaded or without a row. Part of the sink's deduplication tokens. Read-only.
     */
    public int normalizeEpoch(String flow, String table) {
        return onTable("normalizeEpoch", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("SELECT normalize_epoch FROM " + STATE
                    + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                try (ResultSet rs = ps.executeQuery()) {
                    return rs.next() ? rs.getInt(1) : 0;
                }
            }
        });
    }

    /** Why a table may not be loaded into the destination a sink asked for ({@link #claimDestination}). */
    public sealed interface DestinationRefusal {
        /** Another table of the catalog is loaded there, as "flow F, table T". */
        record HeldBy(String otherTable) implements DestinationRefusal {
        }

        /**
         * The table has batches loaded into {@code current} (up to batch {@code normalizedBatchId}): loading the rest
         * elsewhere would leave both destinations incomplete.
         */
        record LoadedElsewhere(String current, long normalizedBatchId) implements DestinationRefusal {
        }
    }

    /**
     * Records that the table is loaded into {@code destination} (a ClickHouse table, named with its server and
     * database), unless another table of the catalog is loaded there already (two source tables never share a
     * destination table) or this table already has batches loaded into another destination (a table never moves
     * silently: a reload or a reset, which start its loads over, clear that). May be called again after a crash.
     *
     * @return empty when {@code destination} is this table's now, otherwise why not
     */
    public Optional<DestinationRefusal> claimDestination(String flow, String table, String destination) {
        requireName("claimDestination", "destination", destination);
        return onTable("claimDestination", flow, table, c -> {
            Optional<String> other = destinationHolder(c, flow, table, destination);
            if (other.isPresent()) {
                return other.<DestinationRefusal>map(DestinationRefusal.HeldBy::new);
            }
            try (PreparedStatement ps = c.prepareStatement("SELECT destination_table, normalized_batch_id FROM " + STATE
                    + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                try (ResultSet rs = ps.executeQuery()) {
                    if (rs.next()) {
                        String current = rs.getString(1);
                        long normalized = rs.getLong(2);
                        if (current != null && !current.equals(destination) && normalized > 0) {
                            return Optional.<DestinationRefusal>of(new DestinationRefusal.LoadedElsewhere(current, normalized));
                        }
                    }
                }
            }
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET destination_table = ?"
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND destination_table IS DISTINCT FROM ?")) {
                ps.setString(1, destination);
                ps.setString(2, flow);
                ps.setString(3, table);
                ps.setString(4, destination);
                ps.executeUpdate();
            } catch (SQLException e) {
                if ("23505".equals(e.getSQLState())) {
                    // another table took it at the same moment
                    return destinationHolder(c, flow, table, destination).<DestinationRefusal>map(DestinationRefusal.HeldBy::new);
                }
                throw e;
            }
            return Optional.<DestinationRefusal>empty();
        });
    }

    private static Optional<String> destinationHolder(Connection c, String flow, String table, String destination)
            throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT flow_name, source_table_identifier FROM " + STATE
                + " WHERE destination_table = ? AND NOT (flow_name = ? AND source_table_identifier = ?)")) {
            ps.setString(1, destination);
            ps.setString(2, flow);
            ps.setString(3, table);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? Optional.of("flow " + rs.getString(1) + ", table " + rs.getString(2)) : Optional.<String>empty();
            }
        }
    }

    /**
     * The tables that sink {@code sinkName} loads from {@code topic}, other than {@code flow}/{@code table}, as
     * "flow F, table T" (for a sink that binds each topic to one table). Read-only.
     */
    public List<String> otherTablesOfSinkTopic(String sinkName, String topic, String flow, String table) {
        return onTable("otherTablesOfSinkTopic", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("SELECT flow_name, source_table_identifier FROM " + STATE
                    + " WHERE sink_name = ? AND sink_topic = ? AND NOT (flow_name = ? AND source_table_identifier = ?)"
                    + " ORDER BY flow_name, source_table_identifier")) {
                ps.setString(1, sinkName);
                ps.setString(2, topic);
                ps.setString(3, flow);
                ps.setString(4, table);
                List<String> tables = new ArrayList<>();
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        tables.add("flow " + rs.getString(1) + ", table " + rs.getString(2));
                    }
                }
                return tables;
            }
        });
    }

    // ---------------------------------------------------------------- Postgres copies: filtered claims, fenced
    // writes (lease owner, claim number and an unexpired lease checked where the write happens), retry budget

    /** The check every fenced write of a copy task makes on the table's row. */
    private static final String HOLDS_COPY = " phase = 'copying' AND copy_lease_owner = ? AND copy_attempt = ?"
            + " AND copy_lease_until > now()";

    /**
     * {@link #claimCopy(String, String, Duration)} restricted to the tables a flow copies: with {@code only} non-null,
     * only those tables; never a table of {@code except}. A table outside them is never claimed, whatever its phase.
     * The claim reports the table's failed attempts since it was last ready ({@code copy_failures}); its
     * {@code attempt} (the table's claim count) together with {@code owner} identifies this claim in every fenced
     * write.
     *
     * @return the claimed table, or empty if none is claimable now
     */
    public Optional<CopyClaim> claimCopy(String flow, String owner, Duration lease, Collection<String> only,
                                         Collection<String> except) {
        Objects.requireNonNull(owner, "owner");
        requirePositive(lease);
        return onFlow("claimCopy", flow, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " AS s SET phase = 'copying',"
                    + " phase_lsn = NULL, copy_lease_owner = ?,"
                    + " copy_lease_until = now() + make_interval(secs => ?),"
                    + " copy_attempt = s.copy_attempt + 1, next_retry_at = NULL"
                    + " WHERE (s.flow_name, s.source_table_identifier) = ("
                    + "   SELECT c.flow_name, c.source_table_identifier FROM " + STATE + " c"
                    + "   WHERE c.flow_name = ? AND (c.phase = 'pending'"
                    + "     OR (c.phase = 'copying' AND c.copy_lease_until < now())"
                    + "     OR (c.phase = 'errored' AND c.next_retry_at <= now()))"
                    + "   AND (CAST(? AS text[]) IS NULL OR c.source_table_identifier = ANY (CAST(? AS text[])))"
                    + "   AND NOT (c.source_table_identifier = ANY (CAST(? AS text[])))"
                    + "   ORDER BY c.phase <> 'pending', c.copy_attempt, c.source_table_identifier"
                    + "   LIMIT 1 FOR UPDATE SKIP LOCKED)"
                    + " RETURNING s.source_table_identifier, s.copy_attempt, s.copy_lease_until, s.copy_failures")) {
                Array onlyArray = only == null ? null : c.createArrayOf("text", only.toArray());
                Array exceptArray = c.createArrayOf("text", (except == null ? List.of() : except).toArray());
                ps.setString(1, owner);
                ps.setDouble(2, seconds(lease));
                ps.setString(3, flow);
                ps.setArray(4, onlyArray);
                ps.setArray(5, onlyArray);
                ps.setArray(6, exceptArray);
                try (ResultSet rs = ps.executeQuery()) {
                    if (!rs.next()) {
                        return Optional.<CopyClaim>empty();
                    }
                    return Optional.of(new CopyClaim(rs.getString(1), rs.getInt(2), instant(rs.getTimestamp(3)),
                            rs.getInt(4)));
                }
            }
        });
    }

    /**
     * Extends the lease of one claim ({@code owner}, {@code attempt}) to {@code lease} from now, only while it still
     * holds: the table is {@code copying} under this claim and the lease has not expired. A copy task calls it
     * before it hands records to Connect. May be repeated.
     *
     * @return false if the claim no longer holds (its copy must stop without sending anything more)
     */
    public boolean renewCopyLease(String flow, String table, String owner, int attempt, Duration lease) {
        Objects.requireNonNull(owner, "owner");
        requirePositive(lease);
        return onTable("renewCopyLease", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE
                    + " SET copy_lease_until = now() + make_interval(secs => ?)"
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND" + HOLDS_COPY)) {
                ps.setDouble(1, seconds(lease));
                ps.setString(2, flow);
                ps.setString(3, table);
                ps.setString(4, owner);
                ps.setInt(5, attempt);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * {@link #reserveBatchIds} for a copy task: only while its claim holds (checked on the locked row in the same
     * transaction as the reservation).
     *
     * @return the first reserved id, or empty if the claim no longer holds (nothing is reserved)
     */
    public Optional<Long> reserveCopyBatchIds(String flow, String table, String owner, int attempt, int count) {
        if (count < 1) {
            throw new IllegalArgumentException("count must be positive: " + count);
        }
        return inTransaction("reserveCopyBatchIds", flow, c -> holdsCopy(c, flow, table, owner, attempt)
                ? Optional.of(reserveBatchIds(c, flow, table, count)) : Optional.<Long>empty());
    }

    /**
     * {@link #recordSync} for a copy task: only while its claim holds (checked on the locked row in the same
     * transaction as the write).
     *
     * @return false if the claim no longer holds (nothing is recorded)
     */
    public boolean recordCopySync(String flow, String table, String owner, int attempt, SyncedBatch batch, Instant at) {
        Objects.requireNonNull(batch, "batch");
        Objects.requireNonNull(at, "at");
        return inTransaction("recordCopySync", flow, c -> {
            if (!holdsCopy(c, flow, table, owner, attempt)) {
                return false;
            }
            recordSync(c, flow, table, batch, at);
            return true;
        });
    }

    /**
     * {@link #recordCopyProgress(String, String, String, long, long)} fenced by the claim and an unexpired lease.
     *
     * @return false if the claim no longer holds
     */
    public boolean recordCopyProgress(String flow, String table, String owner, int attempt, long done, long total) {
        Objects.requireNonNull(owner, "owner");
        return inTransaction("recordCopyProgress", flow, c -> {
            if (!holdsCopy(c, flow, table, owner, attempt)) {
                return false;
            }
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET copy_rows_done = ?,"
                    + " copy_rows_total = ? WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setLong(1, done);
                ps.setLong(2, Math.max(done, total));
                ps.setString(3, flow);
                ps.setString(4, table);
                ps.executeUpdate();
            }
            return true;
        });
    }

    /**
     * {@link #markCatchup} fenced by the claim and an unexpired lease. May be called again after a crash: true again
     * when the table already is in {@code catchup} at {@code lsn}.
     *
     * @return false if the claim no longer holds and the table is not already in catchup at lsn
     */
    public boolean markCopyCatchup(String flow, String table, String owner, int attempt, String lsn) {
        Objects.requireNonNull(owner, "owner");
        requireLsn(lsn);
        return onTable("markCopyCatchup", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET phase = 'catchup',"
                    + " phase_lsn = ?, copy_lease_owner = NULL, copy_lease_until = NULL"
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND" + HOLDS_COPY)) {
                ps.setString(1, lsn);
                ps.setString(2, flow);
                ps.setString(3, table);
                ps.setString(4, owner);
                ps.setInt(5, attempt);
                return ps.executeUpdate() == 1 || inPhase(c, flow, table, Phase.CATCHUP, lsn);
            }
        });
    }

    /**
     * A copy attempt failed: like {@link #markErrored} with an owner (only while this claim holds the table), and
     * one more failure counted against the table's retry budget ({@code copy_failures}). An interrupted attempt
     * (released, or its lease taken over) is never counted.
     *
     * @return true if the row changed now
     */
    public boolean markCopyFailed(String flow, String table, String owner, int attempt, String error, Instant at,
                                  Instant nextRetryAt) {
        Objects.requireNonNull(owner, "owner");
        Objects.requireNonNull(error, "error");
        Objects.requireNonNull(at, "at");
        return onTable("markCopyFailed", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET phase = 'errored',"
                    + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL,"
                    + " last_error = ?, last_error_at = ?, next_retry_at = ?, copy_failures = copy_failures + 1,"
                    + " error_count = error_count + CASE WHEN last_error_at IS NULL OR last_error_at < ?"
                    + "   THEN 1 ELSE 0 END"
                    + " WHERE flow_name = ? AND source_table_identifier = ? AND phase = 'copying'"
                    + " AND copy_lease_owner = ? AND copy_attempt = ?")) {
                Timestamp atTs = ts(at);
                ps.setString(1, truncate(error, MAX_ERROR_CHARS));
                ps.setTimestamp(2, atTs);
                ps.setTimestamp(3, ts(nextRetryAt));
                ps.setTimestamp(4, atTs);
                ps.setString(5, flow);
                ps.setString(6, table);
                ps.setString(7, owner);
                ps.setInt(8, attempt);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /**
     * A change of a table the stream cannot convert: {@link #markErrored} without an owner (any phase), counting one
     * failure against the table's retry budget when {@code counted} (a copied table, copied again).
     *
     * @return true if the row changed now
     */
    public boolean markStreamFailed(String flow, String table, String error, Instant at, Instant nextRetryAt,
                                    boolean counted) {
        Objects.requireNonNull(error, "error");
        Objects.requireNonNull(at, "at");
        return onTable("markStreamFailed", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + STATE + " SET phase = 'errored',"
                    + " phase_lsn = NULL, copy_lease_owner = NULL, copy_lease_until = NULL,"
                    + " last_error = ?, last_error_at = ?, next_retry_at = ?,"
                    + " copy_failures = copy_failures + CASE WHEN ? THEN 1 ELSE 0 END,"
                    + " error_count = error_count + CASE WHEN last_error_at IS NULL OR last_error_at < ?"
                    + "   THEN 1 ELSE 0 END"
                    + " WHERE flow_name = ? AND source_table_identifier = ?"
                    + " AND (last_error_at IS NULL OR last_error_at <= ?)")) {
                Timestamp atTs = ts(at);
                ps.setString(1, truncate(error, MAX_ERROR_CHARS));
                ps.setTimestamp(2, atTs);
                ps.setTimestamp(3, ts(nextRetryAt));
                ps.setBoolean(4, counted);
                ps.setTimestamp(5, atTs);
                ps.setString(6, flow);
                ps.setString(7, table);
                ps.setTimestamp(8, atTs);
                return ps.executeUpdate() == 1;
            }
        });
    }

    /** Failed copy attempts of the table since it was last ready (0 when it has no row). */
    public int copyFailures(String flow, String table) {
        return onTable("copyFailures", flow, table, c -> {
            try (PreparedStatement ps = c.prepareStatement("SELECT copy_failures FROM " + STATE
                    + " WHERE flow_name = ? AND source_table_identifier = ?")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                try (ResultSet rs = ps.executeQuery()) {
                    return rs.next() ? rs.getInt(1) : 0;
                }
            }
        });
    }

    /** Locks the table's row and tells whether the claim ({@code owner}, {@code attempt}) holds it with a live lease. */
    private static boolean holdsCopy(Connection c, String flow, String table, String owner, int attempt)
            throws SQLException {
        requireName("fenced copy write", "table", table);
        Objects.requireNonNull(owner, "owner");
        try (PreparedStatement ps = c.prepareStatement("SELECT 1 FROM " + STATE + " WHERE flow_name = ?"
                + " AND source_table_identifier = ? AND" + HOLDS_COPY + " FOR UPDATE")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            ps.setString(3, owner);
            ps.setInt(4, attempt);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next();
            }
        }
    }
}
