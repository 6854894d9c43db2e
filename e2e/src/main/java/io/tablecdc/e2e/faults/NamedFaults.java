package io.tablecdc.e2e.faults;

/**
 * The steps of each connector where a crash or a failed call is most likely to lose or double a row, as faults a
 * test can inject. Each is a place between two state changes (Kafka, the catalog, the object store, ClickHouse, a
 * replication slot); docs/reliability.md lists them with what each test checks.
 */
public final class NamedFaults {
    private static final String SINK_NORMALIZER = "io.tablecdc.clickhouse.TableNormalizer";
    private static final String SINK_TASK = "io.tablecdc.clickhouse.ClickHouseStageSinkTask";

    private NamedFaults() {
    }

    /** Sink: a batch's file was loaded into ClickHouse, the catalog does not know yet. */
    public static Fault.Step sinkLoadedNotRecorded() {
        return Fault.at("sink-loaded-not-recorded", SINK_NORMALIZER, "normalizeAll", "AFTER INVOKE load");
    }

    /** Sink: the catalog recorded the batch as normalized, its stage row and files are still there. */
    public static Fault.Step sinkRecordedNotCleaned() {
        return Fault.at("sink-recorded-not-cleaned", SINK_NORMALIZER, "normalizeAll", "AFTER INVOKE recordNormalize");
    }

    /** Sink: a batch's files are in the object store, its stage row is not in the catalog. */
    public static Fault.Step sinkUploadedNotStaged() {
        return Fault.at("sink-uploaded-not-staged", SINK_TASK, "tryUpload", "AFTER INVOKE upload");
    }

    /** Sink: the stage row is written, the consumer offsets past the batch are not committed yet. */
    public static Fault.Step sinkStagedNotCommitted() {
        return Fault.at("sink-staged-not-committed", SINK_TASK, "tryUpload", "AFTER INVOKE upsertStage");
    }
}
