package io.tablecdc.bigquery;

import java.io.ByteArrayInputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.types.Password;

import com.google.api.gax.retrying.RetrySettings;
import com.google.auth.oauth2.GoogleCredentials;
import com.google.cloud.NoCredentials;
import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.BigQueryError;
import com.google.cloud.bigquery.BigQueryException;
import com.google.cloud.bigquery.BigQueryOptions;
import com.google.cloud.bigquery.FieldList;
import com.google.cloud.bigquery.FieldValueList;
import com.google.cloud.bigquery.Job;
import com.google.cloud.bigquery.JobId;
import com.google.cloud.bigquery.JobInfo;
import com.google.cloud.bigquery.JobStatus;
import com.google.cloud.bigquery.QueryJobConfiguration;
import com.google.cloud.bigquery.QueryParameterValue;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.Table;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;
import com.google.cloud.bigquery.TableResult;
import com.google.cloud.http.HttpTransportOptions;

import io.tablecdc.bigquery.config.BigQueryQueryCdcConfig;
import io.tablecdc.bigquery.config.TableSpec;
import io.tablecdc.bigquery.sql.CdcSql;

/**
 * The BigQuery calls of the source: the source clock, table schemas, and parameterised queries read page by page.
 * Thread-safe (the Google client is). Not final only so that unit tests can stand in a hand-written fake for what no
 * emulator does (APPENDS and CHANGES results, counting clock queries).
 */
public class SourceClient {
    private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(SourceClient.class);
    private static final String SCOPE = "https://www.googleapis.com/auth/bigquery";

    private final BigQuery bigQuery;
    private final String location;
    private final long maximumBytesBilled;
    private final int pageSize;

    SourceClient(BigQuery bigQuery, String location, long maximumBytesBilled, int pageSize) {
        this.bigQuery = bigQuery;
        this.location = location;
        this.maximumBytesBilled = maximumBytesBilled;
        this.pageSize = pageSize;
    }

    /**
     * A client for the connector's settings.
     *
     * @param timeout how long one HTTP request may take (connect and read), and the total of its retries
     */
    public static SourceClient create(BigQueryQueryCdcConfig config, Duration timeout) {
        HttpTransportOptions transport = HttpTransportOptions.newBuilder()
                .setConnectTimeout((int) timeout.toMillis())
                .setReadTimeout((int) timeout.toMillis())
                .build();
        BigQueryOptions.Builder options = BigQueryOptions.newBuilder()
                .setProjectId(config.billingProject())
                .setTransportOptions(transport)
                .setRetrySettings(RetrySettings.newBuilder()
                        .setMaxAttempts(3)
                        .setInitialRetryDelayDuration(Duration.ofMillis(200))
                        .setMaxRetryDelayDuration(Duration.ofSeconds(2))
                        .setRetryDelayMultiplier(2.0)
                        .setTotalTimeoutDuration(timeout.multipliedBy(3))
                        .setInitialRpcTimeoutDuration(timeout)
                        .setMaxRpcTimeoutDuration(timeout)
                        .setRpcTimeoutMultiplier(1.0)
                        .build());
        if (!config.location().isEmpty()) {
            options.setLocation(config.location());
        }
        if (!config.endpoint().isEmpty()) {
            options.setHost(config.endpoint());
        }
        options.setCredentials(credentials(config));
        return new SourceClient(options.build().getService(), config.location(), config.maximumBytesBilled(), config.pageSize());
    }

    private static com.google.auth.Credentials credentials(BigQueryQueryCdcConfig config) {
        Password json = config.credentialsJson();
        try {
            if (json != null && !json.value().isBlank()) {
                try (InputStream in = new ByteArrayInputStream(json.value().getBytes(StandardCharsets.UTF_8))) {
                    return GoogleCredentials.fromStream(in).createScoped(SCOPE);
                }
            }
            if (!config.credentialsFile().isEmpty()) {
                try (InputStream in = new FileInputStream(config.credentialsFile())) {
                    return GoogleCredentials.fromStream(in).createScoped(SCOPE);
                }
            }
            if (!config.endpoint().isEmpty()) {
                return NoCredentials.getInstance();
            }
            return GoogleCredentials.getApplicationDefault().createScoped(SCOPE);
        } catch (IOException e) {
            // the message of a bad key never contains the key itself
            throw new IllegalArgumentException("BigQuery credentials cannot be loaded ("
                    + (json != null ? "bigquery.credentials.json" : !config.credentialsFile().isEmpty()
                    ? "bigquery.credentials.file " + config.credentialsFile() : "application default credentials")
                    + "): " + e.getMessage(), e);
        }
    }

    /** BigQuery's clock: {@code CURRENT_TIMESTAMP()}. */
    public Instant sourceNow() throws InterruptedException {
        TableResult result = bigQuery.query(configure(QueryJobConfiguration.newBuilder(CdcSql.sourceNow())).build());
        FieldValueList row = result.getValues().iterator().next();
        return row.get(CdcSql.NOW).getTimestampInstant();
    }

    /** The table's columns, or null when the table does not exist. */
    public FieldList columns(TableSpec table) {
        Table found = bigQuery.getTable(TableId.of(table.project(), table.dataset(), table.table()));
        if (found == null) {
            return null;
        }
        Schema schema = found.getDefinition() instanceof StandardTableDefinition standard ? standard.getSchema()
                : found.getDefinition().getSchema();
        return schema == null ? FieldList.of() : schema.getFields();
    }

    /** The largest watermark ({@link CdcSql#watermarkExpression}) of the table, or null when no row has one. */
    public Instant maxWatermark(TableSpec table, String watermark) throws InterruptedException {
        TableResult result = bigQuery.query(configure(QueryJobConfiguration.newBuilder(CdcSql.maxWatermark(table, watermark))).build());
        FieldValueList row = result.getValues().iterator().next();
        return row.get(CdcSql.MAX_WATERMARK).isNull() ? null : row.get(CdcSql.MAX_WATERMARK).getTimestampInstant();
    }

    /** The smallest watermark of the table, or null when no row has one. */
    public Instant minWatermark(TableSpec table, String watermark) throws InterruptedException {
        TableResult result = bigQuery.query(configure(QueryJobConfiguration.newBuilder(CdcSql.minWatermark(table, watermark))).build());
        FieldValueList row = result.getValues().iterator().next();
        return row.get(CdcSql.NEXT_WATERMARK).isNull() ? null : row.get(CdcSql.NEXT_WATERMARK).getTimestampInstant();
    }

    /** The smallest watermark in {@code (lower, upper]}, or null when there is none. */
    public Instant nextWatermark(TableSpec table, CdcSql.Watermark watermark, Instant lower, Instant upper) throws InterruptedException {
        QueryJobConfiguration.Builder builder = configure(QueryJobConfiguration.newBuilder(CdcSql.nextWatermark(table, watermark)));
        watermark.parameters(lower, upper).forEach(builder::addNamedParameter);
        FieldValueList row = bigQuery.query(builder.build()).getValues().iterator().next();
        return row.get(CdcSql.NEXT_WATERMARK).isNull() ? null : row.get(CdcSql.NEXT_WATERMARK).getTimestampInstant();
    }

    /**
     * How long a destination table lives at most ({@code query.destination.dataset}): it is dropped once its rows are
     * read, and expires after this when the task that wrote it died first.
     */
    static final Duration DESTINATION_EXPIRATION = Duration.ofHours(24);

    /**
     * Runs a query with named parameters and returns its first page. Later pages are read with
     * {@link Pages#next()}, each at most {@code bigquery.page.size} rows.
     */
    public Pages query(String sql, Map<String, QueryParameterValue> parameters) throws InterruptedException {
        return run(queryConfiguration(sql, parameters, null), null);
    }

    /**
     * {@link #query(String, Map)} writing the result into {@code destination} (WRITE_TRUNCATE, created if needed) when
     * it is not null: the table is created first with an expiration of {@link #DESTINATION_EXPIRATION}, and
     * dropped when the last page has been read. A query run again into the same table replaces its rows.
     */
    public Pages query(String sql, Map<String, QueryParameterValue> parameters, TableId destination) throws InterruptedException {
        if (destination == null) {
            return query(sql, parameters);
        }
        return run(queryConfiguration(sql, parameters, destination), destination);
    }

    /** The job configuration of a query: standard SQL, the cost guard, the parameters, the destination if any. */
    QueryJobConfiguration queryConfiguration(String sql, Map<String, QueryParameterValue> parameters, TableId destination) {
        QueryJobConfiguration.Builder builder = configure(QueryJobConfiguration.newBuilder(sql));
        parameters.forEach(builder::addNamedParameter);
        if (destination != null) {
            builder.setDestinationTable(destination)
                    .setWriteDisposition(JobInfo.WriteDisposition.WRITE_TRUNCATE)
                    .setCreateDisposition(JobInfo.CreateDisposition.CREATE_IF_NEEDED);
        }
        return builder.build();
    }

    private Pages run(QueryJobConfiguration configuration, TableId destination) throws InterruptedException {
        if (destination == null) {
            return runJob(configuration, null);
        }
        createExpiring(destination);
        try {
            return runJob(configuration, destination);
        } catch (RuntimeException | InterruptedException e) {
            // the query failed after its destination table was created: drop it now rather than let it wait a day for
            // its expiration (the next attempt creates it again)
            dropTable(destination);
            throw e;
        }
    }

    private Pages runJob(QueryJobConfiguration configuration, TableId destination) throws InterruptedException {
        JobId jobId = location.isEmpty() ? JobId.of() : JobId.newBuilder().setLocation(location).build();
        Job job = bigQuery.create(JobInfo.newBuilder(configuration).setJobId(jobId).build());
        if (job != null && !done(job)) {
            // waits for the job, then reads its final state and statistics; a job BigQuery finished within the insert
            // call (a small query often is) came back with both, and is not asked for them twice
            job = job.waitFor();
        }
        if (job == null) {
            throw new BigQueryException(404, "the query job vanished before it finished");
        }
        BigQueryError error = job.getStatus().getError();
        if (error != null) {
            throw new BigQueryException(400, error.getMessage(), error);
        }
        TableResult first = job.getQueryResults(BigQuery.QueryResultsOption.pageSize(pageSize));
        TableId results = ((QueryJobConfiguration) job.getConfiguration()).getDestinationTable();
        Pages pages = new Pages(first, results, destination);
        pages.bytesProcessed = bytesProcessed(job.getStatistics());
        return pages;
    }

    private static boolean done(Job job) {
        return job.getStatus() != null && JobStatus.State.DONE.equals(job.getStatus().getState());
    }

    /** The bytes a finished query job processed, as BigQuery reports them (0 when it reports none). */
    static long bytesProcessed(com.google.cloud.bigquery.JobStatistics statistics) {
        if (statistics instanceof com.google.cloud.bigquery.JobStatistics.QueryStatistics query
                && query.getTotalBytesProcessed() != null) {
            return Math.max(0, query.getTotalBytesProcessed());
        }
        return 0;
    }

    /**
     * Why {@code project.dataset} cannot take the query results ({@code query.destination.dataset}), or null when it
     * can: it must exist, be in {@code bigquery.location} when that is set, and the credentials must be able to create
     * and drop a table in it (checked by creating an empty table that expires within an hour and dropping it).
     *
     * @throws BigQueryException when BigQuery fails otherwise (the caller decides what that means)
     */
    public String destinationProblem(String project, String dataset) {
        String name = project + "." + dataset;
        com.google.cloud.bigquery.Dataset found;
        try {
            found = bigQuery.getDataset(com.google.cloud.bigquery.DatasetId.of(project, dataset));
        } catch (BigQueryException e) {
            if (e.getCode() == 403) {
                return "permission denied: the credentials may not read dataset " + name + ": " + e.getMessage();
            }
            throw e;
        }
        if (found == null) {
            return "dataset " + name + " does not exist; create it in the location of the tables (a default table"
                    + " expiration of a day keeps it clean) or leave the setting empty";
        }
        if (!location.isEmpty() && found.getLocation() != null && !found.getLocation().equalsIgnoreCase(location)) {
            return "dataset " + name + " is in location " + found.getLocation() + " but the queries run in " + location
                    + " (bigquery.location); a query's destination must be in the location of its tables";
        }
        TableId probe = TableId.of(project, dataset, "tablecdc_probe_" + java.util.UUID.randomUUID().toString().replace("-", ""));
        try {
            bigQuery.create(TableInfo.newBuilder(probe, StandardTableDefinition.of(Schema.of(
                            com.google.cloud.bigquery.Field.of("probe", com.google.cloud.bigquery.StandardSQLTypeName.INT64))))
                    .setExpirationTime(System.currentTimeMillis() + Duration.ofHours(1).toMillis()).build());
        } catch (BigQueryException e) {
            if (e.getCode() == 403) {
                return "permission denied: the credentials may not create tables in dataset " + name
                        + " (they need bigquery.tables.create, updateData, getData and delete there): " + e.getMessage();
            }
            throw e;
        }
        try {
            bigQuery.delete(probe);
        } catch (BigQueryException e) {
            if (e.getCode() == 403) {
                return "permission denied: the credentials may not drop tables in dataset " + name
                        + " (they need bigquery.tables.delete there; the probe table " + probe.getTable()
                        + " expires within an hour): " + e.getMessage();
            }
            throw e;
        }
        return null;
    }

    /**
     * Creates the destination table, empty, expiring after {@link #DESTINATION_EXPIRATION}, before the query writes
     * into it (WRITE_TRUNCATE replaces its rows and schema; the table, with its expiration, stays): a table left by a
     * task that dies at any point afterwards goes away by itself. A table of that name is already there when this task
     * runs a query again after a failure; it was created with an expiration too.
     */
    private void createExpiring(TableId destination) {
        try {
            bigQuery.create(TableInfo.newBuilder(destination, StandardTableDefinition.newBuilder().build())
                    .setExpirationTime(System.currentTimeMillis() + DESTINATION_EXPIRATION.toMillis()).build());
        } catch (BigQueryException e) {
            if (e.getCode() != 409) {
                throw e;
            }
        }
    }

    /** Drops a destination table; false when BigQuery refused or failed (the table then expires by itself). */
    public boolean dropTable(TableId table) {
        try {
            bigQuery.delete(table);
            return true;
        } catch (BigQueryException e) {
            log.info("dropping query result table {}.{}.{} failed ({}); it expires by itself", table.getProject(),
                    table.getDataset(), table.getTable(), e.getMessage());
            return false;
        }
    }

    private QueryJobConfiguration.Builder configure(QueryJobConfiguration.Builder builder) {
        builder.setUseLegacySql(false);
        if (maximumBytesBilled > 0) {
            builder.setMaximumBytesBilled(maximumBytesBilled);
        }
        return builder;
    }

    /**
     * The pages of one query's result. The client sends no page size for the pages after the first, so every page
     * after the first is read from the job's result table with an explicit page size and token.
     */
    public final class Pages {
        private final Schema schema;
        private final TableId results;
        private List<FieldValueList> page;
        private String token;
        private final long totalRows;
        /** The destination table of the query, dropped once the last page is read; null for an anonymous result. */
        private TableId owned;
        /** What BigQuery reported the query job processed (its on-demand price is by these bytes). */
        private long bytesProcessed;

        /** One page of rows and nothing after it (for a fake client in tests). */
        Pages(Schema schema, List<FieldValueList> rows) {
            this.schema = schema;
            this.results = null;
            this.totalRows = rows.size();
            this.page = rows;
            this.token = null;
        }

        Pages(TableResult first, TableId results, TableId owned) {
            this.schema = first.getSchema();
            this.results = results;
            this.totalRows = first.getTotalRows();
            this.page = rows(first);
            this.token = first.getNextPageToken();
            this.owned = owned;
            dropWhenRead();
        }

        public long totalRows() {
            return totalRows;
        }

        /** The bytes BigQuery reported the query processed; 0 when it reported none. */
        public long bytesProcessed() {
            return bytesProcessed;
        }

        /** The current page's rows. */
        public List<FieldValueList> page() {
            return page;
        }

        /** Whether a page follows the current one. */
        public boolean hasNext() {
            return token != null && !token.isEmpty();
        }

        /** Reads the next page and makes it the current one. */
        public List<FieldValueList> next() {
            TableResult result = bigQuery.listTableData(results, schema, BigQuery.TableDataListOption.pageSize(pageSize),
                    BigQuery.TableDataListOption.pageToken(token));
            page = rows(result);
            token = result.getNextPageToken();
            dropWhenRead();
            return page;
        }

        /** Once the last page is in memory, the destination table is no longer needed. */
        private void dropWhenRead() {
            if (owned != null && !hasNext()) {
                dropTable(owned);
                owned = null;
            }
        }

        private List<FieldValueList> rows(TableResult result) {
            List<FieldValueList> rows = new ArrayList<>();
            for (FieldValueList row : result.getValues()) {
                rows.add(schema != null && !row.hasSchema() ? FieldValueList.of(row, schema.getFields()) : row);
            }
            return rows;
        }
    }
}
