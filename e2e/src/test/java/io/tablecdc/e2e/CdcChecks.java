package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertFalse;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Instant;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;

import org.slf4j.LoggerFactory;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;
import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.InsertAllRequest;
import com.google.cloud.bigquery.InsertAllResponse;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.TableId;

import io.tablecdc.e2e.stack.LocalStack;

/**
 * Checks the end-to-end tests share: ClickHouse answers awaited, the catalog's per-table row, rows inserted into the
 * BigQuery emulator, and the log lines the in-process worker writes.
 */
final class CdcChecks {
    private final LocalStack stack;
    private final String catalogDatabase;
    private final Client clickhouse;

    CdcChecks(LocalStack stack, String catalogDatabase) {
        this.stack = stack;
        this.catalogDatabase = catalogDatabase;
        this.clickhouse = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                .compressServerResponse(false).build();
    }

    Client clickhouse() {
        return clickhouse;
    }

    void execute(String sql) throws Exception {
        clickhouse.execute(sql).get().close();
    }

    /** One table's row of {@code cdc_table_replication_state}; all zero/null when there is none. */
    record State(boolean exists, String cursor, long syncedBatchId, long normalizedBatchId, long syncedRows, String pausedReason,
                 String lastError, int errorCount, Instant lastAttemptAt) {
    }

    State state(String flow, String table) throws Exception {
        try (Connection c = stack.postgres().connect(catalogDatabase);
             PreparedStatement ps = c.prepareStatement("SELECT cursor_text, synced_batch_id, normalized_batch_id, synced_rows_count,"
                     + " paused_reason, last_error, error_count, last_attempt_at FROM cdc_table_replication_state"
                     + " WHERE flow_name = ? AND source_table_identifier = ?")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return new State(false, "", 0, 0, 0, null, null, 0, null);
                }
                return new State(true, rs.getString(1), rs.getLong(2), rs.getLong(3), rs.getLong(4), rs.getString(5),
                        rs.getString(6), rs.getInt(7), rs.getTimestamp(8) == null ? null : rs.getTimestamp(8).toInstant());
            }
        }
    }

    State awaitState(String flow, String table, Predicate<State> done, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        State last = null;
        while (System.nanoTime() < deadline) {
            last = state(flow, table);
            if (done.test(last)) {
                return last;
            }
            Thread.sleep(200);
        }
        throw new AssertionError("catalog row of " + flow + "/" + table + " never matched; last " + last);
    }

    /** Rows of {@code cdc_table_avro_stage} of a flow (every table). */
    long stagedBatches(String flow) throws Exception {
        try (Connection c = stack.postgres().connect(catalogDatabase);
             PreparedStatement ps = c.prepareStatement("SELECT count(*) FROM cdc_table_avro_stage WHERE flow_name = ?")) {
            ps.setString(1, flow);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    /** The stage rows of a flow (of one table when {@code table} is not null), as "table batch (normalized n)". */
    List<String> stages(String flow, String table) throws Exception {
        try (Connection c = stack.postgres().connect(catalogDatabase);
             PreparedStatement ps = c.prepareStatement("SELECT st.source_table_identifier, st.batch_id, s.normalized_batch_id"
                     + " FROM cdc_table_avro_stage st LEFT JOIN cdc_table_replication_state s USING (flow_name, source_table_identifier)"
                     + " WHERE st.flow_name = ? AND (?::text IS NULL OR st.source_table_identifier = ?) ORDER BY 1, 2")) {
            ps.setString(1, flow);
            ps.setString(2, table);
            ps.setString(3, table);
            List<String> stages = new ArrayList<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    stages.add(rs.getString(1) + " batch " + rs.getLong(2) + " (normalized " + rs.getLong(3) + ")");
                }
            }
            return stages;
        }
    }

    List<GenericRecord> awaitRows(String sql, Predicate<List<GenericRecord>> done, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        List<GenericRecord> rows = new ArrayList<>();
        String lastError = null;
        while (System.nanoTime() < deadline) {
            try {
                rows = clickhouse.queryAll(sql);
                if (done.test(rows)) {
                    return rows;
                }
            } catch (RuntimeException e) {
                lastError = e.getMessage();
            }
            Thread.sleep(200);
        }
        List<String> seen = new ArrayList<>();
        rows.stream().limit(20).forEach(r -> seen.add(r.getValues().toString()));
        throw new AssertionError("ClickHouse never answered as expected: " + sql + "; last rows " + seen
                + (lastError == null ? "" : "; last error " + lastError));
    }

    /** A table with a column of every BigQuery type and an {@code updated_at} watermark of the given mode. */
    static com.google.cloud.bigquery.Schema allBigQueryTypes(Field.Mode watermarkMode) {
        return com.google.cloud.bigquery.Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("c_numeric", StandardSQLTypeName.NUMERIC),
                Field.of("c_bignumeric", StandardSQLTypeName.BIGNUMERIC),
                Field.of("c_float", StandardSQLTypeName.FLOAT64),
                Field.of("c_bool", StandardSQLTypeName.BOOL),
                Field.of("c_string", StandardSQLTypeName.STRING),
                Field.of("c_bytes", StandardSQLTypeName.BYTES),
                Field.of("c_date", StandardSQLTypeName.DATE),
                Field.of("c_datetime", StandardSQLTypeName.DATETIME),
                Field.of("c_time", StandardSQLTypeName.TIME),
                Field.of("c_json", StandardSQLTypeName.JSON),
                Field.newBuilder("c_array", StandardSQLTypeName.STRING).setMode(Field.Mode.REPEATED).build(),
                Field.of("c_struct", StandardSQLTypeName.STRUCT,
                        Field.of("x", StandardSQLTypeName.INT64), Field.of("y", StandardSQLTypeName.STRING)),
                Field.of("c_geography", StandardSQLTypeName.GEOGRAPHY),
                Field.newBuilder("updated_at", StandardSQLTypeName.TIMESTAMP).setMode(watermarkMode).build());
    }

    /** How many rows a ClickHouse table holds after FINAL, or -1 while it does not exist. */
    long countFinal(String table) {
        try {
            return clickhouse.queryAll("SELECT count() AS n FROM " + table + " FINAL").get(0).getLong("n");
        } catch (RuntimeException notYet) {
            return -1;
        }
    }

    static void insert(BigQuery bigQuery, TableId id, List<Map<String, Object>> rows) {
        InsertAllRequest.Builder insert = InsertAllRequest.newBuilder(id);
        rows.forEach(insert::addRow);
        InsertAllResponse response = bigQuery.insertAll(insert.build());
        assertFalse(response.hasErrors(), () -> "insertAll errors: " + response.getInsertErrors());
    }

    /**
     * Collects the log events of the {@code io.tablecdc} loggers written in this JVM (the in-process Connect worker's
     * connectors log through it) until closed. Create it after every part of the stack the test uses has started: the
     * object store (S3Mock, a Spring Boot application) configures logging anew as it starts, which drops this appender.
     */
    static final class LogCapture extends AppenderBase<ILoggingEvent> implements AutoCloseable {
        private final List<ILoggingEvent> events = new CopyOnWriteArrayList<>();
        private final Logger logger;

        LogCapture() {
            logger = (Logger) LoggerFactory.getLogger("io.tablecdc");
            setContext(logger.getLoggerContext());
            setName("iso-capture-" + System.nanoTime());
            start();
            logger.addAppender(this);
        }

        @Override
        protected void append(ILoggingEvent event) {
            events.add(event);
        }

        /** Events at {@code level} (WARN, INFO, …) whose formatted message contains every one of {@code parts}. */
        long count(String level, String... parts) {
            return events.stream().filter(e -> e.getLevel().toString().equals(level)).filter(e -> {
                String message = e.getFormattedMessage();
                for (String part : parts) {
                    if (!message.contains(part)) {
                        return false;
                    }
                }
                return true;
            }).count();
        }

        /**
         * Waits up to {@code timeout} until at least {@code lines} events at {@code level} contain every one of
         * {@code parts}.
         */
        void await(int lines, String level, Duration timeout, String... parts) throws InterruptedException {
            long deadline = System.nanoTime() + timeout.toNanos();
            while (count(level, parts) < lines) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("fewer than " + lines + " " + level + " log lines with " + List.of(parts)
                            + " in " + timeout + ": " + count(level, parts) + " (of " + events.size() + " events captured)");
                }
                Thread.sleep(100);
            }
        }

        @Override
        public void close() {
            logger.detachAppender(this);
            stop();
        }
    }
}
