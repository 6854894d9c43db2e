package io.tablecdc.e2e.faults;

/**
 * The steps of each connector where a crash or a failed call is most likely to lose or double a row, as faults a
 * test can inject. Each is a place between two state changes (Kafka, the catalog, the object store, ClickHouse, a
 * replication slot); docs/reliability.md lists them with what each test checks.
 */
public final class NamedFaults {
    private static final String SINK_NORMALIZER = "io.tablecdc.clickhouse.TableNormalizer";
    private static final String SINK_TASK = "io.tablecdc.clickhouse.ClickHouseStageSinkTask";
    /** A table inside a sink task: its upload and hold (issue 36 moved them out of the task). */
    private static final String SINK_TABLE = "io.tablecdc.clickhouse.TableSink";
    private static final String PG_APPLY = "io.tablecdc.pg.ApplyTask";
    private static final String PG_COPY = "io.tablecdc.pg.TableCopy";
    private static final String BQ_POLLER = "io.tablecdc.bigquery.TablePoller";

    private NamedFaults() {
    }

    /**
     * Postgres, detaching a table from the shared slot: its private slot exists (and is recorded in the catalog), its
     * marker is not written yet.
     */
    public static Fault.Step pgDetachSlotMadeNoMarker() {
        return Fault.at("pg-detach-slot-made-no-marker", "io.tablecdc.pg.Detacher", "detach", "AT INVOKE emitHandover");
    }

    /**
     * Postgres: the apply task met a detach marker and recorded it; the table is not {@code lagging} yet (the changes it
     * kept before the marker may not all be in Kafka).
     */
    public static Fault.Step pgDetachMarkedNotLagging() {
        return Fault.at("pg-detach-marked-not-lagging", PG_APPLY, "refresh", "AT INVOKE markLagging");
    }

    /** Postgres: a detached table was handed back to the apply task; its private slot is not dropped yet. */
    public static Fault.Step pgRejoinedSlotKept() {
        return Fault.at("pg-rejoined-slot-kept", PG_COPY, "handOver", "AT INVOKE dropPrivateSlot");
    }

    /** Sink: a batch's file was loaded into ClickHouse, the catalog does not know yet. */
    public static Fault.Step sinkLoadedNotRecorded() {
        return Fault.at("sink-loaded-not-recorded", SINK_NORMALIZER, "normalizeAll", "AFTER INVOKE load");
    }

    /**
     * Sink: several batches that waited together were loaded into ClickHouse by one INSERT, the catalog does not know
     * (the next run may group them otherwise and load their rows again).
     */
    public static Fault.Step sinkGroupLoadedNotRecorded() {
        return Fault.at("sink-group-loaded-not-recorded", SINK_NORMALIZER, "normalizeAll", "AFTER INVOKE loadTogether");
    }

    /** Sink: the catalog recorded the batch as normalized, its stage row and files are still there. */
    public static Fault.Step sinkRecordedNotCleaned() {
        return Fault.at("sink-recorded-not-cleaned", SINK_NORMALIZER, "normalizeAll", "AFTER INVOKE recordLoaded");
    }

    /** Sink: a batch's files are in the object store, its stage row is not in the catalog. */
    public static Fault.Step sinkUploadedNotStaged() {
        return Fault.at("sink-uploaded-not-staged", SINK_TABLE, "tryUpload", "AFTER INVOKE upload");
    }

    /** Sink: the stage row is written, the consumer offsets past the batch are not committed yet. */
    public static Fault.Step sinkStagedNotCommitted() {
        return Fault.at("sink-staged-not-committed", SINK_TABLE, "tryUpload", "AFTER INVOKE upsertStage");
    }

    /** Postgres pipeline: Kafka acknowledged a batch of the apply task, the catalog has not recorded it. */
    public static Fault.Step pgAckedNotRecorded() {
        return Fault.at("pg-acked-not-recorded", PG_APPLY, "syncToCatalog", "AT INVOKE recordSync");
    }

    /** Postgres pipeline: Connect flushed the apply task's offsets, the slot has not been told (confirmed) yet. */
    public static Fault.Step pgFlushedNotConfirmed() {
        return Fault.at("pg-flushed-not-confirmed", PG_APPLY, "commit", "AT ENTRY");
    }

    /** Postgres pipeline: a copy wrote its marker and sent its catch-up, the table is not in {@code catchup} yet. */
    public static Fault.Step pgMarkerWrittenNotHandedOver() {
        return Fault.at("pg-marker-written-not-handed-over", PG_COPY, "handOver", "AT INVOKE markCopyCatchup");
    }

    /** Postgres pipeline: the apply task sent a handed-over table's held changes, the table is not {@code ready} yet. */
    public static Fault.Step pgCaughtUpNotReady() {
        return Fault.at("pg-caught-up-not-ready", PG_APPLY, "refresh", "AT INVOKE markCaughtUpReady");
    }

    /**
     * Any source on an exactly-once worker: Kafka acknowledged one more record of the task's open Kafka transaction
     * (written to the log, not committed). Counted over the task's records: its n-th occurrence lands in the middle
     * of a batch when n is not at a batch's end.
     */
    public static Fault.Step eosRecordWrittenNotCommitted() {
        return Fault.at("eos-record-written-not-committed", "org.apache.kafka.connect.runtime.ExactlyOnceWorkerSourceTask",
                "recordSent", "AT ENTRY");
    }

    /** Postgres pipeline: a copy's batch is acknowledged and recorded, the copy goes on (the middle of a COPY). */
    public static Fault.Step pgMidCopy() {
        return Fault.at("pg-mid-copy", PG_COPY, "recordSynced", "AFTER INVOKE recordCopySync");
    }

    /**
     * Sink, during a rebalance: Connect takes the sink task's partitions away (the consumer group rebalances as topics
     * appear, or the task moves to another worker); the open batches are dropped, the normalize loops stop.
     */
    public static Fault.Step sinkPartitionsRevoked() {
        return Fault.at("sink-partitions-revoked", SINK_TASK, "close", "AT ENTRY");
    }

    /**
     * Postgres pipeline, during a rebalance: Connect stops a source task (it moves to another worker, or its connector
     * is reconfigured), while the task's thread may still be in a poll.
     */
    public static Fault.Step pgTaskStopping() {
        return Fault.at("pg-task-stopping", "io.tablecdc.pg.PgPipelineSourceTask", "stop", "AT ENTRY");
    }

    /**
     * BigQuery source: Kafka acknowledged every record of a batch, the catalog has not recorded it (its cursor, its
     * batch id). A restart reads the window again: under a new batch id, or the sink drops it as a repeat.
     */
    public static Fault.Step bigQueryAckedNotRecorded() {
        return Fault.at("bq-acked-not-recorded", BQ_POLLER, "mirror", "AT INVOKE recordSync");
    }

    /**
     * BigQuery source: a window's query job ran and wrote its result table, no row of it is read yet. A restart
     * queries the window again; the result table of the dead run expires.
     */
    public static Fault.Step bigQueryQueryRunNotRead() {
        return Fault.at("bq-query-run-not-read", BQ_POLLER, "runWindow", "AT EXIT");
    }

    /**
     * BigQuery source: Kafka acknowledged one more record of a batch (counted over the table's records: the n-th lands
     * inside the first batch, the initial snapshot's, for small n). Part of the batch is in Kafka, its last record is
     * not; a restart reads the window again under a new batch id.
     */
    public static Fault.Step bigQueryMidBatch() {
        return Fault.at("bq-mid-batch", BQ_POLLER, "acknowledged", "AT ENTRY");
    }

    /**
     * The step's call failing instead of the worker dying there, {@code times} times from its {@code occurrence}-th
     * time. The fault is placed in the called method, since a Byteman {@code throw} leaves its method past the
     * method's own handlers: thrown in the caller it would be a failure no real call can cause. It throws what that
     * call throws when its peer goes away: {@code CatalogUnavailableException} for the catalog's calls, an
     * {@code IOException} for the ClickHouse load and the object store upload, a {@code ConnectException} for the
     * source's {@code commit()} (Connect logs what it throws). At the callee's entry the call fails; at its exit (the
     * steps after a call) the call has taken effect and only its answer is lost, so the caller repeats a call that
     * already happened. Named after the step with {@code -failed}. The rebalance steps have no failed call: what
     * Connect calls there talks to no peer.
     */
    public static Fault failedCall(Fault.Step step) {
        Callee callee = callee(step, step.name() + "-failed");
        if (callee.statusCode != null) {
            return callee.step.failWithStatus(callee.exception, callee.statusCode);
        }
        return callee.exceptionWithCause ? callee.step.failWithCause(callee.exception) : callee.step.fail(callee.exception);
    }

    /**
     * The step's call hanging for {@code millis} instead of the worker dying there: placed as {@link #failedCall}, so at
     * the callee's entry the call starts late, and at its exit it took effect and its answer comes late. A hang longer
     * than a lease lets another task take the table while this one still believes it owns it. At a rebalance step the
     * step itself hangs (Connect waits for the task's stop or partition close). Named after the step with
     * {@code -hung}.
     */
    public static Fault hungCall(Fault.Step step, long millis) {
        String name = step.name() + "-hung";
        return switch (step.name()) {
            case "sink-partitions-revoked", "pg-task-stopping" ->
                    Fault.at(name, step.className(), step.method(), step.location()).hang(millis);
            default -> callee(step, name).step.hang(millis);
        };
    }

    private record Callee(Fault.Step step, String exception, boolean exceptionWithCause, Integer statusCode) {
        Callee(Fault.Step step, String exception, boolean exceptionWithCause) {
            this(step, exception, exceptionWithCause, null);
        }
    }

    private static Callee callee(Fault.Step step, String name) {
        String catalog = "io.tablecdc.catalog.";
        String unavailable = "io.tablecdc.catalog.CatalogUnavailableException";
        return switch (step.name()) {
            // recordSync is the call of both sources (the BigQuery source's for a batch and for a cursor alone): the
            // occurrences count them all
            case "pg-acked-not-recorded", "bq-acked-not-recorded" -> new Callee(Fault.at(name, catalog + "TableProgress", "recordSync", "AT ENTRY"), unavailable, true);
            case "pg-flushed-not-confirmed" -> new Callee(Fault.at(name, step.className(), step.method(), step.location()),
                    "org.apache.kafka.connect.errors.ConnectException", false);
            case "pg-marker-written-not-handed-over" ->
                    new Callee(Fault.at(name, catalog + "CopyLeases", "markCopyCatchup", "AT ENTRY"), unavailable, true);
            case "pg-caught-up-not-ready" ->
                    new Callee(Fault.at(name, catalog + "PgPhases", "markCaughtUpReady", "AT ENTRY"), unavailable, true);
            case "pg-detach-marked-not-lagging" ->
                    new Callee(Fault.at(name, catalog + "PgPhases", "markLagging", "AT ENTRY"), unavailable, true);
            case "pg-mid-copy" -> new Callee(Fault.at(name, catalog + "CopyLeases", "recordCopySync", "AT EXIT"), unavailable, true);
            case "sink-loaded-not-recorded" ->
                    new Callee(Fault.at(name, SINK_NORMALIZER, "load", "AT EXIT"), "java.io.IOException", false);
            case "sink-group-loaded-not-recorded" ->
                    new Callee(Fault.at(name, SINK_NORMALIZER, "loadTogether", "AT EXIT"), "java.io.IOException", false);
            case "sink-recorded-not-cleaned" ->
                    new Callee(Fault.at(name, catalog + "Stages", "recordLoaded", "AT EXIT"), unavailable, true);
            case "sink-uploaded-not-staged" -> new Callee(Fault.at(name, "io.tablecdc.clickhouse.stage.S3StageStore",
                    "upload", "AT EXIT"), "java.io.IOException", false);
            case "sink-staged-not-committed" ->
                    new Callee(Fault.at(name, catalog + "Stages", "upsertStage", "AT EXIT"), unavailable, true);
            // the query ran and wrote its result table; its answer is lost as when BigQuery fails with a 503
            case "bq-query-run-not-read" -> new Callee(Fault.at(name, "io.tablecdc.bigquery.SourceClient", "run", "AT EXIT"),
                    "com.google.cloud.bigquery.BigQueryException", false, 503);
            default -> throw new IllegalArgumentException("no call to fail or hang at step " + step.name());
        };
    }
}
