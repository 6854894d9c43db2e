package io.tablecdc.e2e;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.faults.Fault;
import io.tablecdc.e2e.faults.FaultInjector;
import io.tablecdc.e2e.faults.FaultProxy;
import io.tablecdc.e2e.faults.NamedFaults;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalKafka;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The randomized run: a seeded workload (inserts, updates, deletes, key changes, multi-statement transactions and
 * truncates over seven tables: three keyed, one without a key whose rows repeat, one added to the publication
 * while the run goes on, one removed from it and added again, and one removed for good once it is ready; all but one
 * copied) flows from Postgres through the pipeline and the sink, and a second
 * seeded workload (inserts and new versions of rows) on a BigQuery emulator table flows through a query CDC flow into
 * the same sink, all three connectors on one worker process, while two faults picked by the seed strike: the worker
 * dies at one of the named steps of the pipeline or the sink (at the n-th time the step is reached), and a second
 * worker takes over, or, in a third of the runs, the step's call fails one to three times instead (before the call, or
 * after it took effect, as when its answer is lost: {@link NamedFaults#failedCall}), or in some others it hangs
 * ({@link NamedFaults#hungCall}); a fifth of the runs strike a rebalance step instead, and a sixth of the others a step
 * of the BigQuery source; and one dependency (the catalog, the source Postgres, ClickHouse or the object store) is
 * refused, hung or slow for 2 to 15 s (slow: twice that) at a moment of the run (the object store may answer 503
 * instead), or the Kafka broker is restarted after being down that long. In half the runs the BigQuery emulator is
 * refused, hung or answers 503 as well, on its own clock. The BigQuery side draws from a generator
 * of its own (mixed from {@code seed * 17 + 3}), so a seed does to Postgres what it did before. The checker compares ClickHouse
 * ({@code FINAL}) with Postgres row for row and waits for every table to reach {@code ready}, then compares ClickHouse
 * with the emulator's latest version of every row ({@link ChaosBigQuery}). Each run prints its
 * seed; {@code scripts/chaos.sh --runs N --seed S} repeats runs S, S+1, … ({@code -Dtablecdc.chaos.seed},
 * {@code -Dtablecdc.chaos.runs}); the test command runs the fixed seed {@link #SUITE_SEED}. Every run appends a line to
 * {@code e2e/target/chaos/runs.tsv}; a failed run keeps its workers' logs under {@code e2e/target/stack/chaos-<seed>-*}.
 */
class ChaosIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATABASE = "chaos_source";
    /** A key change moves a row above this, out of the range inserts use. */
    private static final int MOVED = 10_000_000;

    private static String catalogUrl;
    private static PgChecks pg;
    private static Client clickhouse;
    private static CdcChecks checks;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("chaos_catalog");
        clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
        // the sources are quiet when these tests compare: a late stale batch must fail them
        pg.holdEqualFor(Duration.ofSeconds(5));
        checks = new CdcChecks(stack, "chaos_catalog");
    }

    @AfterAll
    static void stop() {
        if (clickhouse != null) {
            clickhouse.close();
        }
    }

    /** The faults a run picks from: every named step of the Postgres pipeline and of the sink. */
    private static List<Fault.Step> steps() {
        return List.of(NamedFaults.pgAckedNotRecorded(), NamedFaults.pgFlushedNotConfirmed(),
                NamedFaults.pgMarkerWrittenNotHandedOver(), NamedFaults.pgCaughtUpNotReady(), NamedFaults.pgMidCopy(),
                NamedFaults.sinkLoadedNotRecorded(), NamedFaults.sinkGroupLoadedNotRecorded(), NamedFaults.sinkRecordedNotCleaned(),
                NamedFaults.sinkUploadedNotStaged(), NamedFaults.sinkStagedNotCommitted());
    }

    /** The steps of the BigQuery source: a sixth of the runs that do not strike a rebalance step strike one of them. */
    private static List<Fault.Step> bigQuerySteps() {
        return List.of(NamedFaults.bigQueryAckedNotRecorded(), NamedFaults.bigQueryQueryRunNotRead(),
                NamedFaults.bigQueryMidBatch());
    }

    /** The steps of a detach and a rejoin: half of the runs that detach tables and strike a step above strike one. */
    private static List<Fault.Step> detachSteps() {
        return List.of(NamedFaults.pgDetachSlotMadeNoMarker(), NamedFaults.pgDetachMarkedNotLagging(),
                NamedFaults.pgRejoinedSlotKept());
    }

    /** The rebalance steps: a fifth of the runs strike one of them, with a second worker joining. */
    private static List<Fault.Step> rebalanceSteps() {
        return List.of(NamedFaults.sinkPartitionsRevoked(), NamedFaults.pgTaskStopping());
    }

    private static String describe(Fault fault) {
        String what = switch (fault.action().kind()) {
            case KILL -> " kill at";
            case THROW -> " failing " + fault.times() + " time(s) from";
            case HANG -> " hanging " + fault.action().hangMillis() + " ms " + fault.times() + " time(s) from";
        };
        return fault.name() + what + " occurrence " + fault.occurrence();
    }

    /**
     * The seed the test command runs when no seed is given (a worker killed at a rebalance step with a second worker
     * joining, the Kafka broker restarted, block records: about three minutes); {@code scripts/chaos.sh} runs fresh
     * seeds.
     */
    static final long SUITE_SEED = 8760;
    /** Above every id the workload gives table b's rows otherwise. */
    private static final int GIANT_IDS = 50_000_000;

    @Test
    void seededRunsLoseAndDoubleNothing() throws Exception {
        String seedProperty = System.getProperty("tablecdc.chaos.seed", "");
        // the test command runs fixed seeds, so that it is the same run every time; scripts/chaos.sh draws new ones
        long seed = seedProperty.isBlank() ? SUITE_SEED : Long.parseLong(seedProperty.trim());
        int runs = Integer.parseInt(System.getProperty("tablecdc.chaos.runs", "1").trim());
        for (int i = 0; i < runs; i++) {
            run(seed + i);
        }
    }

    private static void run(long seed) throws Exception {
        // a generator of its own, so that a seed's other choices stay what they were: in a fifth of the runs the source's
        // primary goes under the running flow (killed, or in half of those shut down) once the workload passed its
        // promoteAt-th transaction and the standby holds the flow's failover slot; the standby is promoted and the
        // source's address (a proxy) follows it, with whatever copies, catch-ups and detached tables are in flight.
        // Those runs stream from a primary and standby of their own
        SplittableRandom promotion = new SplittableRandom(seed * 53 + 29);
        int promoteAt = promotion.nextInt(5) == 0 ? 100 + promotion.nextInt(1_300) : -1;
        boolean promoteByKill = promotion.nextBoolean();
        if (promoteAt < 0) {
            run(seed, null, -1, false);
            return;
        }
        PgChecks shared = pg;
        try (PgStandbyPair pair = PgStandbyPair.start("chaos-" + seed + "/source-pair", DATABASE)) {
            pg = new PgChecks(stack, () -> PgStandbyPair.connect(pair.currentPrimaryPort(), DATABASE), catalogUrl, clickhouse);
            pg.holdEqualFor(Duration.ofSeconds(5));
            run(seed, pair, promoteAt, promoteByKill);
        } finally {
            pg = shared;
        }
    }

    /** One run; {@code pair}: the source's primary and standby when the run promotes ({@code promoteAt} ≥ 0), else null. */
    private static void run(long seed, PgStandbyPair pair, int promoteAt, boolean promoteByKill) throws Exception {
        Random random = new Random(seed);
        Fault.Step step = steps().get(random.nextInt(steps().size()));
        int occurrence = 1 + random.nextInt(4);
        // drawn from a generator of their own, so that the rest of a seed's choices stay what they were: a third of the
        // runs make the step's call fail instead of killing the worker there; table r leaves the publication at a
        // transaction of the workload and comes back later (a table leaving for good: PgPublicationIT)
        SplittableRandom extras = new SplittableRandom(seed * 13 + 5);
        boolean failMode = extras.nextInt(3) == 0;
        int failTimes = 1 + extras.nextInt(3);
        int removeAt = 100 + extras.nextInt(1_400);
        int returnAt = removeAt + 50 + extras.nextInt(450);
        // drawn after those, so that a seed keeps its earlier choices: a fifth of the runs strike a rebalance step
        // instead (killed or hung there, with a second worker joining), a quarter of the runs whose call does not fail
        // hang it (longer than a lease at times: another task may take the table while this one still holds it), and
        // table g leaves the publication for good some transactions after it is ready
        boolean rebalanceStep = extras.nextInt(5) == 0;
        if (rebalanceStep) {
            step = rebalanceSteps().get(extras.nextInt(rebalanceSteps().size()));
            occurrence = 1;
            failMode = false;
        }
        boolean hangMode = !failMode && extras.nextInt(4) == 0;
        long hangMillis = 2_000 + extras.nextInt(13_000);
        int goneAfter = 50 + extras.nextInt(750);
        // a fifth of the runs have a slow dependency instead of one that is down or hung
        boolean slowOutage = extras.nextInt(5) == 0;
        // drawn after those: a sixth of the other runs strike a step of the BigQuery source instead (its kill in the
        // middle of a batch at one of its first 200 records), and in a third of the runs an outage of an HTTP server
        // (the object store, BigQuery) answers every request with 503 instead of going down
        if (!rebalanceStep && extras.nextInt(6) == 0) {
            step = bigQuerySteps().get(extras.nextInt(bigQuerySteps().size()));
            if (step.name().equals(NamedFaults.bigQueryMidBatch().name())) {
                occurrence = 1 + extras.nextInt(200);
                // no call to fail there: it is Kafka's acknowledgement
                failMode = false;
                hangMode = false;
            }
        }
        boolean httpErrors = extras.nextInt(3) == 0;
        // drawn from a generator of its own, so that the seeds' other draws stay: in half of the runs that detach tables
        // (below: the first draw of their generator) and strike a step of the Postgres pipeline or the sink, the worker
        // is killed at a step of a detach or a rejoin instead, the first to third time it is reached
        SplittableRandom detachSteps = new SplittableRandom(seed * 61 + 37);
        if (new SplittableRandom(seed * 17 + 11).nextBoolean() && !rebalanceStep && !step.name().startsWith("bq-")
                && detachSteps.nextInt(2) == 0) {
            step = detachSteps().get(detachSteps.nextInt(detachSteps().size()));
            occurrence = 1 + detachSteps.nextInt(3);
            failMode = false;
            hangMode = false;
        }
        // the worker lives through a failed or hung call; a kill takes it down
        boolean lives = failMode || hangMode;
        // a failed or hung call is armed once the connectors are deployed: the sink's validate() writes a test object
        // to the store, and that upload is not a batch's (seed 8315's run failed on it)
        Fault fault = failMode ? NamedFaults.failedCall(step).onOccurrence(occurrence).times(failTimes).disarmed()
                : hangMode ? NamedFaults.hungCall(step, hangMillis).onOccurrence(occurrence).times(failTimes).disarmed()
                : step.kill().onOccurrence(occurrence);
        String faultText = step.name() + (failMode ? "!fail-x" + failTimes
                : hangMode ? "!hang-" + hangMillis / 1000 + "s-x" + failTimes : "") + "@" + occurrence;
        // the kinds added later draw from a generator of their own, so that a seed's other choices stay what they were:
        // in a quarter of the runs a refused or hung dependency is a black hole instead (connections that met it stay
        // dead after it heals, only the client's own timeouts end their waits); in a quarter, one transaction of the
        // workload changes table b 70,000 times (more changes of one table in one transaction than 16 bits count); in
        // a third, table e (40,000 rows then) is truncated and filled again while its copy reads: the TRUNCATE queues
        // for its lock behind the copy's, and the other tables must stream on meanwhile
        SplittableRandom kinds = new SplittableRandom(seed * 43 + 19);
        boolean blackHole = kinds.nextInt(4) == 0;
        int giantAt = kinds.nextInt(4) == 0 ? 100 + kinds.nextInt(1_000) : -1;
        // (not with a promotion: the TRUNCATE queued behind e's copy holds its connection to the old primary for minutes)
        boolean truncateInCopy = kinds.nextInt(3) == 0 && pair == null;
        // and in a third of the runs a row of 2 MiB, above the largest record Kafka takes (1 MiB by default), is
        // inserted into table h: h must stop with an error that names the limit, and every other table stream on
        int bigRowAt = kinds.nextInt(3) == 0 ? 100 + kinds.nextInt(1_000) : -1;
        int seedRows = 500 + random.nextInt(3_000);
        String id = Long.toString(seed);
        String schema = "chaos_" + id;
        String prefix = "chaos-" + id;
        String flow = prefix + "-flow";
        String sinkName = prefix + "-sink";
        pg.sql("DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "DROP PUBLICATION IF EXISTS " + schema + "_pub",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + schema + ".a (id int PRIMARY KEY, v int NOT NULL, note text)",
                "INSERT INTO " + schema + ".a SELECT g, 0, 'seed ' || g FROM generate_series(1, " + seedRows + ") g",
                "CREATE TABLE " + schema + ".b (id int PRIMARY KEY, v int NOT NULL)",
                "CREATE TABLE " + schema + ".c (x int, y int, v text NOT NULL, PRIMARY KEY (x, y))",
                "INSERT INTO " + schema + ".c SELECT g % 50, g, 'seed' FROM generate_series(1, " + seedRows / 2 + ") g",
                // no key: insert-only (Postgres refuses updates and deletes of a published table without a replica
                // identity), with rows that repeat, so that ClickHouse must hold each row as many times as Postgres
                "CREATE TABLE " + schema + ".k (v int NOT NULL, note text)",
                "INSERT INTO " + schema + ".k SELECT g % 100, 'seed' FROM generate_series(1, " + seedRows / 4 + ") g",
                // added to the publication by the workload while the run goes on
                "CREATE TABLE " + schema + ".e (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + schema + ".e SELECT g, 0 FROM generate_series(1, " + (truncateInCopy ? 40_000 : 300) + ") g",
                // removed from the publication by the workload, and added again
                "CREATE TABLE " + schema + ".r (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + schema + ".r SELECT g, 0 FROM generate_series(1, 200) g",
                // removed from the publication for good by the workload, once it is ready
                "CREATE TABLE " + schema + ".g (id int PRIMARY KEY, v int NOT NULL)",
                "INSERT INTO " + schema + ".g SELECT g, 0 FROM generate_series(1, 300) g",
                // the table of the row above Kafka's limit
                "CREATE TABLE " + schema + ".h (id int PRIMARY KEY, v text NOT NULL)",
                "CREATE PUBLICATION " + schema + "_pub FOR TABLE " + schema + ".a, " + schema + ".b, " + schema + ".c, "
                        + schema + ".k, " + schema + ".r, " + schema + ".g" + (bigRowAt >= 0 ? ", " + schema + ".h" : ""));
        Map<String, String[]> tables = new LinkedHashMap<>();
        tables.put(schema + ".a", new String[] {"id::text || '|' || v::text || '|' || coalesce(note, '-')",
            "concat(toString(id), '|', toString(v), '|', ifNull(note, '-'))"});
        tables.put(schema + ".b", new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        tables.put(schema + ".c", new String[] {"x::text || '|' || y::text || '|' || v",
            "concat(toString(x), '|', toString(y), '|', v)"});
        tables.put(schema + ".k", new String[] {"v::text || '|' || coalesce(note, '-')", "concat(toString(v), '|', ifNull(note, '-'))"});
        tables.put(schema + ".e", new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        // r: written to also while it is out of the publication; back in, it is copied again
        tables.put(schema + ".r", new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        pg.keyless(schema + ".k");
        // g: ClickHouse keeps what g held when it left the publication (the removal's transaction copies it), not
        // the changes written to it afterwards
        Map<String, String[]> gone = Map.of(schema + ".g",
                new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        pg.expectAs(schema + ".g", schema + ".g_at_removal");

        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, schema + "_pub", prefix);
        source.put("slot.prefix", schema);
        source.put("tasks.max", "2");
        source.put("table.sync.copy", "all");
        source.put("batch.rows", Integer.toString(50 + random.nextInt(400)));
        source.put("copy.lease.ms", "5000");
        source.put("table.retry.delay.ms", "1000");
        // a generator of its own, so that every other draw of a seed stays what it was: in half of the runs a ready table
        // whose batches wait unloaded for 4 s (an outage of ClickHouse, the object store or the catalog stops its loads)
        // is detached from the shared slot, and rejoins once the sink has loaded its batches
        SplittableRandom detachRandom = new SplittableRandom(seed * 17 + 11);
        String detach = "";
        if (detachRandom.nextBoolean()) {
            int limit = 3 + detachRandom.nextInt(10);
            source.put("max.unnormalized.batches", Integer.toString(limit));
            source.put("detach.after.ms", "4000");
            detach = ", detaching at " + limit + " batches";
        }
        // a generator of its own too: in half of the runs the pipeline sends block records (record.format=blocks),
        // small enough that a batch spans several, carried by the worker's JsonConverter as BYTES values
        SplittableRandom blocksRandom = new SplittableRandom(seed * 19 + 7);
        String blocks = "";
        if (blocksRandom.nextBoolean()) {
            int blockBytes = 1024 + blocksRandom.nextInt(16 * 1024);
            source.put("record.format", "blocks");
            source.put("record.block.bytes", Integer.toString(blockBytes));
            detach += ", blocks of " + blockBytes + " bytes";
            blocks = "+blocks-" + blockBytes;
        }
        Outage outage = Outage.pick(random);
        if (slowOutage) {
            outage = outage.slowed();
        } else if (httpErrors) {
            outage = outage.httpErrors();
        }
        if (blackHole) {
            outage = outage.blackHoled();
        }
        // drawn from a generator of its own, so that the seeds' other draws stay: in half of the runs whose outage is
        // Kafka's, the workers reach the broker through a proxy that becomes a black hole, instead of the broker
        // restarting (the broker and the test's own clients are not cut off)
        if (outage.dependency().equals("kafka") && new SplittableRandom(seed * 59 + 31).nextBoolean()) {
            outage = outage.kafkaBlackHoled();
        }
        if (pair != null) {
            // the address follows the primary (below), and the flow accepts the new timeline from its failover slot
            source.put("database.user", "postgres");
            source.put("database.password", "");
            source.put("slot.failover", "true");
        }
        String kindsText = (giantAt >= 0 ? "+giant-txn-at-" + giantAt : "") + (truncateInCopy ? "+e-truncated-in-copy" : "")
                + (bigRowAt >= 0 ? "+h-row-above-limit-at-" + bigRowAt : "")
                + (pair != null ? "+primary-" + (promoteByKill ? "killed" : "stopped") + "-at-" + promoteAt : "");
        // the BigQuery table draws from its own generator, so that a seed does to Postgres what it did before the table
        // was added; its seed is mixed (SplittableRandom), since java.util.Random's first draws from neighbouring seeds
        // are alike (a plain seed * 17 + 3 gave 147 outages of BigQuery in seeds 7000-7199, instead of about half)
        Random bigQueryRandom = new Random(new SplittableRandom(seed * 17 + 3).nextLong());
        ChaosBigQuery bigQuery = ChaosBigQuery.create(stack, bigQueryRandom, prefix + "-bq", "t_" + id);
        Outage bigQueryOutage = bigQueryRandom.nextBoolean() ? Outage.pick(bigQueryRandom, "bigquery") : null;
        if (bigQueryOutage != null && httpErrors) {
            bigQueryOutage = bigQueryOutage.httpErrors();
        }
        if (bigQueryOutage != null && blackHole) {
            // drawn with the Postgres side's black hole (the kinds' generator), so that the seeds' other draws stay
            bigQueryOutage = bigQueryOutage.blackHoled();
        }
        Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, prefix + "-stage");
        sink.put("topics.regex", prefix + "\\..*");
        sink.put("normalize.backoff.initial.ms", "500");
        sink.put("normalize.backoff.max.ms", "2000");
        sink.put("normalize.lease.ms", "5000");
        sink.put("consumer.override.metadata.max.age.ms", "1000");
        // a ClickHouse call on a connection that died in a black hole ends at this bound (the default, 300 s, outlasts
        // the run's waits)
        sink.put("clickhouse.timeout.ms", "30000");

        System.out.printf("chaos run seed %d: %s, %s, %d seed rows%s%s; BigQuery %d seed rows%s"
                + " (replay: scripts/chaos.sh --runs 1 --seed %d)%n", seed, describe(fault), outage, seedRows, detach, kindsText,
                bigQuery.seedRows(), bigQueryOutage == null ? "" : ", " + bigQueryOutage, seed);
        // every connection of both connectors to the catalog, the source, ClickHouse and the object store goes through
        // a proxy, so that the outage can take one of them away
        FaultProxy catalogProxy = FaultProxy.start(prefix + "-catalog", stack.postgres().host(), stack.postgres().port());
        FaultProxy sourceProxy = pair == null ? FaultProxy.start(prefix + "-source", stack.postgres().host(), stack.postgres().port())
                : FaultProxy.start(prefix + "-source", "127.0.0.1", pair.primaryPort());
        URI clickhouseUri = URI.create(stack.clickhouse().httpUrl());
        FaultProxy clickhouseProxy = FaultProxy.start(prefix + "-clickhouse", clickhouseUri.getHost(), clickhouseUri.getPort());
        URI storeUri = URI.create(stack.objectStore().endpoint());
        FaultProxy storeProxy = FaultProxy.start(prefix + "-objectstore", storeUri.getHost(), storeUri.getPort());
        URI bigQueryUri = URI.create(stack.bigquery().endpoint());
        FaultProxy bigQueryProxy = FaultProxy.start(prefix + "-bigquery", bigQueryUri.getHost(), bigQueryUri.getPort());
        String proxiedCatalog = catalogUrl.replace(stack.postgres().host() + ":" + stack.postgres().port(),
                "127.0.0.1:" + catalogProxy.port());
        source.put("catalog.jdbc.url", proxiedCatalog);
        source.put("database.host", "127.0.0.1");
        source.put("database.port", Integer.toString(sourceProxy.port()));
        sink.put("catalog.jdbc.url", proxiedCatalog);
        sink.put("clickhouse.url", "http://127.0.0.1:" + clickhouseProxy.port());
        sink.put("stage.s3.endpoint", "http://127.0.0.1:" + storeProxy.port());
        Map<String, String> bigQuerySource = bigQuery.source(stack, proxiedCatalog,
                bigQueryUri.getScheme() + "://127.0.0.1:" + bigQueryProxy.port(), prefix);
        FaultProxy outageProxy = switch (outage.dependency()) {
            case "catalog" -> catalogProxy;
            case "source" -> sourceProxy;
            case "clickhouse" -> clickhouseProxy;
            case "objectstore" -> storeProxy;
            // the proxy in front of the broker's second listener, which the workers then use; otherwise the broker is
            // restarted instead
            default -> outage.how().equals("black-hole") ? stack.kafka().proxy() : null;
        };

        String group = prefix + "-" + System.nanoTime();
        Map<String, String> workerProps = ConnectWorker.workerProperties(outage.dependency().equals("kafka") && outageProxy != null
                ? stack.kafka().proxiedBootstrapServers() : stack.kafka().bootstrapServers(), group, stack.pluginPath());
        FaultInjector injector = FaultInjector.of(StackPaths.workDir(prefix + "/faults"), fault);
        List<String> jvmArgs = injector.jvmArgs(ConnectWorker.TEST_JVM_ARGS.toArray(String[]::new));
        boolean fired;
        String outcome = "failed";
        AtomicInteger truncates = new AtomicInteger();
        Thread outageThread = null;
        Thread bigQueryOutageThread = null;
        int addAt = 200 + random.nextInt(1_300);
        // half the runs start the second worker while the first still runs: the group rebalances and moves tasks while
        // the workload, the outage and the coming kill go on
        long joinAfterMs = random.nextBoolean() ? 1_000 + random.nextInt(10_000) : -1;
        if (rebalanceStep && joinAfterMs < 0) {
            joinAfterMs = 1_000 + extras.nextInt(10_000);
        }
        AtomicInteger goneAt = new AtomicInteger(Integer.MAX_VALUE);
        CountDownLatch eAdded = new CountDownLatch(1);
        AtomicBoolean eHeld = new AtomicBoolean();
        AtomicReference<String> eTruncate = new AtomicReference<>("e-truncate-not-run");
        Thread truncater = null;
        ReentrantLock betweenTransactions = new ReentrantLock();
        AtomicReference<String> promoted = new AtomicReference<>("not-promoted");
        Thread promoter = null;
        try (catalogProxy; sourceProxy; clickhouseProxy; storeProxy; bigQueryProxy; bigQuery;
             TransactionWriter writer = writer(schema, new Random(seed * 31 + 7),
                     // table r's statements draw from a generator of their own: the other tables get what they got before r
                     new Random(new SplittableRandom(seed * 37 + 11).nextLong()), truncates, addAt, removeAt, returnAt,
                     new Random(new SplittableRandom(seed * 41 + 13).nextLong()), flow, goneAt, goneAfter, giantAt,
                     truncateInCopy, bigRowAt, eAdded, eHeld, betweenTransactions)) {
            try {
                if (truncateInCopy) {
                    truncater = truncaterOfE(schema, eAdded, eHeld, eTruncate);
                }
                ConnectWorker first = ConnectWorker.startProcess(workerProps, StackPaths.workDir(prefix + "/worker-1"),
                        Duration.ofSeconds(120), jvmArgs);
                ConnectWorker second = null;
                try {
                    try {
                        first.rest().putConfig(sinkName, sink);
                        first.rest().putConfig(flow, source);
                        first.rest().putConfig(bigQuery.flow, bigQuerySource);
                        if (lives) {
                            injector.arm(fault);
                        }
                        bigQuery.startWriter();
                        if (pair != null) {
                            promoter = promoter(pair, writer, betweenTransactions, promoteAt, promoteByKill, flow, sourceProxy,
                                    promoted);
                        }
                        outageThread = outage.start(outageProxy);
                        if (bigQueryOutage != null) {
                            bigQueryOutageThread = bigQueryOutage.start(bigQueryProxy);
                        }
                        if (joinAfterMs >= 0) {
                            Thread.sleep(joinAfterMs);
                            second = supervised(workerProps, prefix + "/worker-2");
                        }
                        fired = injector.firedWithin(fault, Duration.ofSeconds(90));
                    } finally {
                        // a step the run never reached: the worker is killed where it stands
                        if (!lives) {
                            first.kill();
                        }
                    }
                    if (second == null && !lives) {
                        second = supervised(workerProps, prefix + "/worker-2");
                    }
                    ConnectWorker survivor = lives ? first : second;
                    survivor.rest().awaitRunning(flow, 2, Duration.ofSeconds(120));
                    survivor.rest().awaitRunning(sinkName, 1, Duration.ofSeconds(120));
                    survivor.rest().awaitRunning(bigQuery.flow, 1, Duration.ofSeconds(120));
                    // the workload reaches table r's removal (and return) before the end
                    writer.awaitMore(Math.max(0, returnAt + 1 - writer.written.get()));
                    for (String table : tables.keySet()) {
                        awaitReady(flow, table);
                    }
                    // ... and g's removal, which waits for g to be ready; the flow lets g go once its changes up to
                    // the removal are sent
                    PgChecks.awaitTrue(() -> writer.written.get() > goneAt.get(), Duration.ofSeconds(180),
                            "table g never left the publication (it leaves " + goneAfter + " transactions after it is"
                                    + " ready): " + pg.table(flow, schema + ".g"));
                    pg.awaitTable(flow, schema + ".g", row -> "errored".equals(row.get("phase"))
                            && row.get("last_error") != null && row.get("last_error").startsWith("left publication"),
                            Duration.ofSeconds(180));
                    writer.awaitMore(30);
                    if (promoter != null) {
                        while (writer.written.get() <= promoteAt) {
                            writer.awaitMore(Math.min(500, promoteAt + 1 - writer.written.get()));
                        }
                        promoter.join(TimeUnit.SECONDS.toMillis(300));
                        if (promoter.isAlive() || !promoted.get().startsWith("promoted")) {
                            throw new AssertionError("the promotion did not happen: " + promoted.get());
                        }
                        // the workload goes on on the new primary
                        writer.awaitMore(30);
                    }
                    writer.close();
                    if (truncater != null) {
                        truncater.join(TimeUnit.SECONDS.toMillis(200));
                        if (truncater.isAlive() || eTruncate.get().startsWith("failed")) {
                            throw new AssertionError("the TRUNCATE of e behind its copy did not end: " + eTruncate.get());
                        }
                    }
                    bigQuery.stopWriter();
                    outageThread.join();
                    if (bigQueryOutageThread != null) {
                        bigQueryOutageThread.join();
                    }
                    pg.awaitEqual(tables, Duration.ofSeconds(180));
                    pg.awaitEqual(gone, Duration.ofSeconds(60));
                    if (bigRowAt >= 0) {
                        pg.awaitTable(flow, schema + ".h", row -> row.get("last_error") != null
                                && row.get("last_error").contains("max.request.size"), Duration.ofSeconds(120));
                    }
                    bigQuery.check(checks, Duration.ofSeconds(180));
                    int copies = pg.keylessCopies(schema + ".k");
                    int keyedCopies = 0;
                    for (String table : tables.keySet()) {
                        keyedCopies += pg.keyedCopies(table);
                    }
                    outcome = (copies == 0 ? "equal" : "equal+" + copies + "-keyless-copies")
                            + (keyedCopies == 0 ? "" : "+" + keyedCopies + "-keyed-copies");
                    System.out.printf("chaos run seed %d: %s %s, %s%s%s; %d transactions (%d truncates),"
                            + " %d BigQuery rows written: ClickHouse equals Postgres and BigQuery (%s)%n", seed,
                            describe(fault), fired ? "fired" : lives ? "not reached" : "not reached, killed", outage,
                            bigQueryOutage == null ? "" : ", " + bigQueryOutage,
                            joinAfterMs >= 0 ? ", second worker joined at " + joinAfterMs / 1000 + " s" : "",
                            writer.written.get(), truncates.get(), bigQuery.inserts.get() + bigQuery.versions.get(), outcome);
                    survivor.rest().delete(bigQuery.flow);
                    survivor.rest().delete(flow);
                    survivor.rest().delete(sinkName);
                } finally {
                    if (second != null) {
                        second.close();
                    }
                    if (lives) {
                        first.close();
                    }
                }
            } finally {
                if (outageThread != null) {
                    outageThread.interrupt();
                    outageThread.join();
                }
                if (bigQueryOutageThread != null) {
                    bigQueryOutageThread.interrupt();
                    bigQueryOutageThread.join();
                }
                if (truncater != null) {
                    truncater.interrupt();
                    truncater.join();
                }
                if (promoter != null) {
                    promoter.interrupt();
                    promoter.join();
                }
                record(seed, faultText + "+" + outage + "+r-out-" + removeAt + "-back-" + returnAt + (joinAfterMs >= 0 ? "+join-" + joinAfterMs / 1000 + "s" : "")
                        + "+g-gone-after-" + goneAfter + blocks + kindsText + (truncateInCopy ? "(" + eTruncate.get() + ")" : "")
                        + (pair != null ? "(" + promoted.get() + ")" : "")
                        + "+bq" + (bigQueryOutage == null ? "" : "+" + bigQueryOutage),
                        injector.fired(fault), writer.written.get(), outcome);
            }
        } catch (AssertionError | Exception e) {
            throw new AssertionError("chaos run seed " + seed + " (" + describe(fault) + blocks
                    + ", " + outage + (bigQueryOutage == null ? "" : ", " + bigQueryOutage) + "): " + e.getMessage() + "; replay with scripts/chaos.sh --runs 1 --seed " + seed, e);
        }
    }

    /**
     * The second fault of a run, starting {@code delayMs} after the connectors were deployed, whatever the worker kill
     * does meanwhile: one dependency (the catalog, the source Postgres, ClickHouse or the object store) is refused or
     * hung by its proxy for {@code durationMs}, or the Kafka broker is stopped and stays down that long. In half the runs
     * the BigQuery emulator's proxy has an outage of its own ({@link #pick(Random, String)}, drawn from the BigQuery
     * side's generator).
     */
    private record Outage(String dependency, String how, long delayMs, long durationMs) {
        /** How long each chunk waits while a dependency is slow ({@link FaultProxy#slow}). */
        static final long SLOW_MILLIS = 200;

        static Outage pick(Random random) {
            String[] dependencies = {"catalog", "source", "clickhouse", "objectstore", "kafka"};
            return pick(random, dependencies[random.nextInt(dependencies.length)]);
        }

        static Outage pick(Random random, String dependency) {
            return new Outage(dependency, random.nextBoolean() ? "hang" : "refuse", 2_000 + random.nextInt(23_000),
                    2_000 + random.nextInt(13_000));
        }

        /**
         * The same outage of an HTTP server (the object store, BigQuery, ClickHouse behind a load balancer) as every
         * request answered with 503.
         */
        Outage httpErrors() {
            return dependency.equals("objectstore") || dependency.equals("bigquery") || dependency.equals("clickhouse")
                    ? new Outage(dependency, "http-503", delayMs, durationMs) : this;
        }

        /**
         * A refused or hung dependency as a black hole instead ({@link FaultProxy#blackHole}): connections that carried a
         * byte while it lasted stay dead after it heals.
         */
        Outage blackHoled() {
            return proxy() && (how.equals("hang") || how.equals("refuse")) ? new Outage(dependency, "black-hole", delayMs,
                    durationMs) : this;
        }

        /**
         * Kafka's outage as a black hole between the workers and the broker ({@link LocalKafka#proxiedBootstrapServers})
         * instead of a broker restart: the broker runs on, and the workers' connections that carried a byte meanwhile
         * stay dead after it heals, so only their clients' own timeouts end their waits.
         */
        Outage kafkaBlackHoled() {
            return dependency.equals("kafka") ? new Outage(dependency, "black-hole", delayMs, durationMs) : this;
        }

        /** The same outage as a slow dependency (every chunk {@value #SLOW_MILLIS} ms late) for twice as long. */
        Outage slowed() {
            return proxy() ? new Outage(dependency, "slow", delayMs, 2 * durationMs) : this;
        }

        Thread start(FaultProxy proxy) {
            Thread thread = new Thread(() -> {
                try {
                    Thread.sleep(delayMs);
                    if (proxy == null) {
                        stack.kafka().restart(Duration.ofMillis(durationMs));
                        return;
                    }
                    switch (how) {
                        case "hang" -> proxy.hang();
                        case "slow" -> proxy.slow(SLOW_MILLIS);
                        case "http-503" -> proxy.httpError(503);
                        case "black-hole" -> proxy.blackHole();
                        default -> proxy.refuse();
                    }
                    Thread.sleep(durationMs);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    if (proxy != null) {
                        proxy.pass();
                    }
                }
            }, "chaos-outage");
            thread.setDaemon(true);
            thread.start();
            return thread;
        }

        @Override
        public String toString() {
            return dependency + "-" + (proxy() || how.equals("black-hole") ? how : "restart") + "-" + durationMs / 1000 + "s-at-"
                    + delayMs / 1000 + "s";
        }

        private boolean proxy() {
            return !"kafka".equals(dependency);
        }
    }

    /** How long a table may show no progress at all before the run says it is stuck. */
    private static final Duration STALL = Duration.ofSeconds(120);

    /**
     * Waits until {@code table} is {@code ready}: as long as its catalog row moves (its phase, copy attempt, rows copied,
     * synced or normalized batch), within 600 s in all; a row that stays the same for 120 s fails the run
     * as stuck. A busy run's copies wait on the sink by design (a copy pauses at {@code max.unnormalized.batches}, 3 to
     * 12 batches in the runs that detach), and the workload writes until the run's waits are met: seed 8775's table
     * {@code c} was copied at a steady 21 % / 43 % / 64 % / 86 % / done past a fixed 180 s wait, 5 s short of it.
     */
    private static void awaitReady(String flow, String table) throws Exception {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(600);
        Map<String, String> last = null;
        long lastChange = System.nanoTime();
        while (true) {
            Map<String, String> row = pg.table(flow, table);
            if (row != null && "ready".equals(row.get("phase"))) {
                return;
            }
            Map<String, String> progress = row == null ? Map.of() : Map.of("phase", String.valueOf(row.get("phase")),
                    "attempt", String.valueOf(row.get("copy_attempt")), "copied", String.valueOf(row.get("copy_rows_done")),
                    "synced", String.valueOf(row.get("synced_batch_id")),
                    "normalized", String.valueOf(row.get("normalized_batch_id")));
            if (!progress.equals(last)) {
                last = progress;
                lastChange = System.nanoTime();
            }
            if (System.nanoTime() - lastChange > STALL.toNanos()) {
                throw new AssertionError("table " + table + " is stuck: no progress for " + STALL.toSeconds()
                        + " s; its catalog row: " + row);
            }
            if (System.nanoTime() > end) {
                throw new AssertionError("table " + table + " still not ready after 600 s, though it moved; its catalog"
                        + " row: " + row);
            }
            Thread.sleep(1_000);
        }
    }

    /**
     * The second worker, started as a process supervisor (systemd, Kubernetes) keeps one running: a Connect worker that
     * cannot reach Kafka while it starts (it looks up the cluster id within its clients' timeouts) exits, by Connect's
     * design, and is started again, up to three times (randomized run seed 8787: the replacement of a killed worker
     * started during Kafka's black hole).
     */
    private static ConnectWorker supervised(Map<String, String> workerProps, String dir) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                return ConnectWorker.startProcess(workerProps, StackPaths.workDir(dir), Duration.ofSeconds(120));
            } catch (IllegalStateException e) {
                if (attempt == 3 || !e.getMessage().contains("process exited")) {
                    throw e;
                }
                System.out.printf("the second worker exited while it started (%s); started again%n", e.getMessage());
            }
        }
    }

    private static void record(long seed, String fault, boolean fired, int transactions, String outcome) throws IOException {
        Path file = StackPaths.projectRoot().resolve("e2e/target/chaos/runs.tsv");
        Files.createDirectories(file.getParent());
        Files.writeString(file, seed + "\t" + fault + "\t" + (fired ? "fired" : "not-reached") + "\t" + transactions
                + "\t" + outcome + "\n", StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }

    private static boolean ready(String flow, String table) {
        try {
            Map<String, String> row = pg.table(flow, table);
            return row != null && "ready".equals(row.get("phase"));
        } catch (SQLException e) {
            return false;
        }
    }

    /**
     * The kind "a promotion while running": once the workload committed its {@code at}-th transaction and the standby
     * holds a synchronized copy of the flow's failover slot (within 180 s), between two transactions of the workload
     * ({@code between}) and once the standby has replayed them all, the primary is killed ({@code kill}: no shutdown
     * checkpoint; what tablecdc itself wrote after, such as a copy's marker, may not reach the new timeline) or shut
     * down, the standby is promoted and the source's address ({@code address}) follows it. The flow runs on, no
     * connector restarted. {@code outcome} tells the run's line what happened.
     */
    private static Thread promoter(PgStandbyPair pair, TransactionWriter writer, Lock between, int at, boolean kill,
                                   String flow, FaultProxy address, AtomicReference<String> outcome) {
        Thread thread = new Thread(() -> {
            try {
                while (writer.written.get() < at) {
                    Thread.sleep(100);
                }
                long began = System.nanoTime();
                long deadline = began + TimeUnit.SECONDS.toNanos(180);
                String slot = null;
                while (slot == null || !pair.slotSynced(DATABASE, slot)) {
                    if (System.nanoTime() > deadline) {
                        outcome.set("failed: the standby did not synchronize the flow's slot " + slot + " within 180 s");
                        return;
                    }
                    Thread.sleep(500);
                    try (Connection c = pg.catalog();
                         var s = c.prepareStatement("SELECT source_slot FROM cdc_flow WHERE flow_name = ?")) {
                        s.setString(1, flow);
                        try (ResultSet r = s.executeQuery()) {
                            slot = r.next() ? r.getString(1) : null;
                        }
                    }
                }
                long synced = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - began);
                between.lockInterruptibly();
                int n;
                try {
                    n = writer.written.get();
                    pair.awaitStandbyCaughtUp(DATABASE, Duration.ofSeconds(60));
                    if (kill) {
                        pair.killPrimary();
                    } else {
                        pair.stopPrimary();
                    }
                    pair.promote(DATABASE);
                    address.retarget("127.0.0.1", pair.standbyPort());
                } finally {
                    between.unlock();
                }
                outcome.set("promoted-after-txn-" + n + "-slot-synced-after-" + synced + "s");
            } catch (InterruptedException e) {
                outcome.set("failed: interrupted");
            } catch (Exception | AssertionError e) {
                outcome.set("failed: " + e);
            }
        }, "chaos-promoter");
        thread.setDaemon(true);
        thread.start();
        return thread;
    }

    /**
     * The kind "a DDL waiting behind a copy": once table e has joined the publication and its copy's reader holds e's
     * {@code ACCESS SHARE} lock (seen in {@code pg_locks}, within 60 s), a transaction of {@code TRUNCATE e} and 300 new
     * rows queues for {@code ACCESS EXCLUSIVE} behind it for as long as the copy reads (or waits on back-pressure). The
     * workload leaves e alone meanwhile ({@code held}), so that the DDL is the only one waiting, and every other table
     * must stream on. {@code outcome} tells the run's line how long the TRUNCATE waited, or that no copy lock was seen
     * (the copy had ended, or not begun, by then), or how it failed.
     */
    private static Thread truncaterOfE(String schema, CountDownLatch added, AtomicBoolean held, AtomicReference<String> outcome) {
        Thread thread = new Thread(() -> {
            try {
                if (!added.await(300, TimeUnit.SECONDS)) {
                    outcome.set("failed: e never joined the publication");
                    return;
                }
                try (Connection c = pg.source()) {
                    boolean seen = false;
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                    while (!seen && System.nanoTime() < deadline) {
                        try (var s = c.prepareStatement("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                                + " WHERE l.relation = to_regclass(?) AND l.mode = 'AccessShareLock' AND l.granted"
                                + " AND a.application_name LIKE 'tablecdc % copy %'")) {
                            s.setString(1, schema + ".e");
                            try (ResultSet r = s.executeQuery()) {
                                seen = r.next() && r.getLong(1) > 0;
                            }
                        }
                        if (!seen) {
                            Thread.sleep(10);
                        }
                    }
                    c.setAutoCommit(false);
                    long began = System.nanoTime();
                    try (Statement s = c.createStatement()) {
                        // bounded: a copy paused by back-pressure through an outage holds its lock for that long
                        s.execute("SET LOCAL lock_timeout = '170s'");
                        s.execute("TRUNCATE " + schema + ".e");
                        s.execute("INSERT INTO " + schema + ".e SELECT g, 1 FROM generate_series(1, 300) g");
                    }
                    c.commit();
                    long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - began);
                    outcome.set((seen ? "e-truncate-behind-copy-" : "e-truncate-no-copy-lock-seen-") + waited + "ms");
                }
            } catch (InterruptedException e) {
                outcome.set("failed: interrupted");
            } catch (Exception e) {
                outcome.set("failed: " + e);
            } finally {
                held.set(false);
            }
        }, "chaos-truncater-" + schema);
        thread.start();
        return thread;
    }

    /**
     * The seeded workload: transactions of one to four statements (insert, update, delete, key change over the keyed
     * tables, inserts of repeating rows into the keyless one, updates of table e), now and then a truncate of table b
     * or of the keyless table, every 5 to 20 ms until closed; its {@code addAt}-th transaction adds table e to the
     * publication.
     */
    private static TransactionWriter writer(String schema, Random random, Random removed, AtomicInteger truncates,
                                            int addAt, int removeAt, int returnAt, Random leaving, String flow,
                                            AtomicInteger goneAt, int goneAfter, int giantAt, boolean truncateInCopy,
                                            int bigRowAt, CountDownLatch eAdded, AtomicBoolean eHeld, Lock between) {
        return new TransactionWriter("chaos-writer-" + schema, pg, n -> {
            List<String> statements = new ArrayList<>();
            if (goneAt.get() == Integer.MAX_VALUE && n % 50 == 0 && ready(flow, schema + ".g")) {
                goneAt.set(n + goneAfter);
            }
            if (n == goneAt.get()) {
                // what g holds as it leaves: the rows ClickHouse must keep
                statements.add("ALTER PUBLICATION " + schema + "_pub DROP TABLE " + schema + ".g");
                statements.add("CREATE TABLE " + schema + ".g_at_removal AS SELECT * FROM " + schema + ".g");
            } else if (leaving.nextInt(3) == 0) {
                // written to before and after it leaves
                int row = 1 + leaving.nextInt(400);
                statements.add(switch (leaving.nextInt(4)) {
                    case 0 -> "INSERT INTO " + schema + ".g VALUES (" + row + ", " + n + ") ON CONFLICT (id) DO UPDATE"
                            + " SET v = EXCLUDED.v";
                    case 1 -> "UPDATE " + schema + ".g SET v = v + 1 WHERE id = " + row;
                    case 2 -> "UPDATE " + schema + ".g SET id = " + (MOVED + n) + " WHERE id = " + row;
                    default -> "DELETE FROM " + schema + ".g WHERE id = " + row;
                });
            }
            if (n == addAt) {
                statements.add("ALTER PUBLICATION " + schema + "_pub ADD TABLE " + schema + ".e");
                if (truncateInCopy) {
                    // e is left alone from here until the TRUNCATE queued behind its copy has run (truncaterOfE)
                    eHeld.set(true);
                    truncates.incrementAndGet();
                }
                eAdded.countDown();
            }
            if (n == bigRowAt) {
                statements.add("INSERT INTO " + schema + ".h VALUES (1, repeat('x', 2 * 1024 * 1024))");
            }
            if (n == giantAt) {
                // 70,000 changes of b in one transaction: each of 35,000 new rows inserted, then updated
                statements.add("INSERT INTO " + schema + ".b SELECT " + GIANT_IDS + " + g, 0 FROM generate_series(1, 35000) g");
                statements.add("UPDATE " + schema + ".b SET v = v + 1 WHERE id > " + GIANT_IDS);
            }
            if (n == removeAt) {
                statements.add("ALTER PUBLICATION " + schema + "_pub DROP TABLE " + schema + ".r");
            }
            if (n == returnAt) {
                statements.add("ALTER PUBLICATION " + schema + "_pub ADD TABLE " + schema + ".r");
            }
            if (removed.nextInt(3) == 0) {
                int row = 1 + removed.nextInt(400);
                statements.add(switch (removed.nextInt(3)) {
                    case 0 -> "INSERT INTO " + schema + ".r VALUES (" + row + ", " + n + ") ON CONFLICT (id) DO UPDATE"
                            + " SET v = EXCLUDED.v";
                    case 1 -> "UPDATE " + schema + ".r SET v = v + 1 WHERE id = " + row;
                    default -> "DELETE FROM " + schema + ".r WHERE id = " + row;
                });
            }
            int count = 1 + random.nextInt(4);
            for (int i = 0; i < count; i++) {
                int row = 1 + random.nextInt(4_000);
                statements.add(switch (random.nextInt(11)) {
                    case 0 -> "INSERT INTO " + schema + ".a VALUES (" + (100_000 + n * 10 + i) + ", " + n + ", 'new')";
                    case 1 -> "UPDATE " + schema + ".a SET v = v + 1, note = 'w" + n + "' WHERE id = " + row;
                    case 2 -> "DELETE FROM " + schema + ".a WHERE id = " + row;
                    case 3 -> "UPDATE " + schema + ".a SET id = " + (MOVED + n * 10 + i) + " WHERE id = " + row;
                    case 4 -> "INSERT INTO " + schema + ".b VALUES (" + (n * 10 + i) + ", 0)";
                    case 5 -> "UPDATE " + schema + ".b SET v = v + 1 WHERE id = " + (random.nextInt(n) * 10);
                    case 6 -> "DELETE FROM " + schema + ".b WHERE id = " + (random.nextInt(n) * 10);
                    case 7 -> "UPDATE " + schema + ".c SET v = 'w" + n + "' WHERE x = " + random.nextInt(50);
                    case 8 -> "INSERT INTO " + schema + ".k VALUES (" + random.nextInt(100) + ", 'w" + random.nextInt(3) + "')";
                    case 9 -> eHeld.get() ? "SELECT " + random.nextInt(300)
                            : "UPDATE " + schema + ".e SET v = v + 1 WHERE id = " + (1 + random.nextInt(300));
                    default -> "INSERT INTO " + schema + ".c VALUES (" + random.nextInt(50) + ", " + (100_000 + n * 10 + i)
                            + ", 'new') ON CONFLICT DO NOTHING";
                });
            }
            if (random.nextInt(150) == 0) {
                statements.add("TRUNCATE " + schema + ".b");
                truncates.incrementAndGet();
            }
            if (random.nextInt(400) == 0) {
                statements.add("TRUNCATE " + schema + ".k");
                truncates.incrementAndGet();
            }
            return statements;
        }, () -> 5 + random.nextInt(15), between);
    }
}
