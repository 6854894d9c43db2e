package io.tablecdc.e2e;

import static io.tablecdc.e2e.PgChecks.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import com.clickhouse.client.api.Client;

import io.tablecdc.e2e.faults.Fault;
import io.tablecdc.e2e.faults.FaultInjector;
import io.tablecdc.e2e.faults.NamedFaults;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * A streamed table whose ClickHouse side refuses its rows is detached from the flow's shared slot and rejoins once
 * ClickHouse takes them again; the Postgres pipeline's worker process dies (Byteman halts it, as SIGKILL would) at a
 * step of that detach or rejoin, while a writer changes the table and a neighbour in the same transactions, and a
 * second worker takes over without faults. Every table ends {@code ready} with no private slot left, and ClickHouse
 * {@code FINAL} equals Postgres row for row. The flow copies nothing and runs one task, which applies and rejoins.
 */
class PgDetachFaultIT {
    static final LocalStack stack = LocalStack.get();
    static final String DATABASE = "pgdetach_source";

    static String catalogUrl;
    static PgChecks pg;
    static Client clickhouse;

    @BeforeAll
    static void start() throws Exception {
        stack.postgres().createDatabase(DATABASE);
        catalogUrl = stack.postgres().createDatabase("pgdetach_catalog");
        clickhouse = stack.clickhouse().client();
        pg = new PgChecks(stack, DATABASE, catalogUrl, clickhouse);
        // the sources are quiet when these tests compare: a late stale batch must fail them
        pg.holdEqualFor(Duration.ofSeconds(5));
    }

    @AfterAll
    static void stop() {
        if (clickhouse != null) {
            clickhouse.close();
        }
    }

    static Stream<Fault> steps() {
        return Stream.of(
                NamedFaults.pgDetachSlotMadeNoMarker().kill(),
                NamedFaults.pgDetachMarkedNotLagging().kill(),
                NamedFaults.pgRejoinedSlotKept().kill());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("steps")
    void aWorkerKilledWhileATableDetachesOrRejoinsLosesAndDoublesNothing(Fault fault) throws Exception {
        String name = fault.name();
        String schema = "d_" + name.replace('-', '_');
        String publication = schema + "_pub";
        String prefix = "pgdetach-" + name;
        String flow = prefix + "-flow";
        String stuck = schema + ".stuck";
        String chStuck = schema + "_stuck";
        pg.sql("DROP PUBLICATION IF EXISTS " + publication,
                "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TABLE " + stuck + " (id int PRIMARY KEY, v int NOT NULL)",
                "CREATE TABLE " + schema + ".other (id int PRIMARY KEY, v int NOT NULL)",
                "CREATE PUBLICATION " + publication + " FOR TABLE " + stuck + ", " + schema + ".other");
        Map<String, String[]> tables = new LinkedHashMap<>();
        for (String table : List.of(stuck, schema + ".other")) {
            tables.put(table, new String[] {"id::text || '|' || v::text", "concat(toString(id), '|', toString(v))"});
        }
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, prefix);
        source.put("slot.prefix", schema);
        source.put("tasks.max", "1");
        source.put("table.sync.copy", "none");
        source.put("batch.rows", "20");
        // a batch of each table per poll: a healthy table may pass 5 between two loads of the sink, but is never 3 s
        // without one
        source.put("max.unnormalized.batches", "5");
        source.put("detach.after.ms", "3000");
        stack.connect().rest().putConfig(prefix + "-sink", SinkConfigs.flowSink(stack, catalogUrl, prefix + "-stage", prefix));

        Map<String, String> workerProps = ConnectWorker.workerProperties(stack.kafka().bootstrapServers(),
                prefix + "-" + System.nanoTime(), stack.pluginPath());
        FaultInjector injector = FaultInjector.of(StackPaths.workDir(prefix + "/faults"), fault);
        Path firstDir = StackPaths.workDir(prefix + "/worker-1");
        Path secondDir = StackPaths.workDir(prefix + "/worker-2");
        boolean rejoinStep = name.equals(NamedFaults.pgRejoinedSlotKept().name());
        ConnectWorker first = ConnectWorker.startProcess(workerProps, firstDir, Duration.ofSeconds(120),
                injector.jvmArgs(ConnectWorker.TEST_JVM_ARGS.toArray(String[]::new)));
        TransactionWriter writer = null;
        try {
            first.rest().putConfig(flow, source);
            // the task makes the catalog's tables as it starts
            first.rest().awaitRunning(flow, 1, Duration.ofSeconds(90));
            // the flow copies nothing: it streams from where its slot was made, so the writer starts once both are ready
            for (String table : tables.keySet()) {
                pg.awaitTable(flow, table, row -> "ready".equals(row.get("phase")), Duration.ofSeconds(120));
            }
            writer = writer(schema);
            // ClickHouse refuses the table's rows once its first ones are in: its batches pile up unloaded
            awaitTrue(() -> pg.chLong("SELECT count() FROM " + chStuck) > 0, Duration.ofSeconds(120),
                    stuck + " never reached ClickHouse");
            clickhouse.execute("ALTER TABLE " + chStuck + " ADD CONSTRAINT refuse CHECK id < 0").get().close();
            if (rejoinStep) {
                pg.awaitTable(flow, stuck, row -> "lagging".equals(row.get("phase")), Duration.ofSeconds(120));
                assertTrue(privateSlots(schema) == 1, "a lagging table has its private slot");
                heal(chStuck);
            }
            injector.awaitFired(fault, Duration.ofSeconds(120));
        } catch (Exception | AssertionError e) {
            if (writer != null) {
                writer.close();
            }
            throw e;
        } finally {
            first.kill();
        }
        heal(chStuck);
        ConnectWorker second = ConnectWorker.startProcess(workerProps, secondDir, Duration.ofSeconds(120));
        try (TransactionWriter running = writer) {
            second.rest().awaitRunning(flow, 1, Duration.ofSeconds(120));
            running.awaitMore(30);
            running.close();
            pg.awaitTable(flow, stuck, row -> "ready".equals(row.get("phase")) && row.get("detach_slot") == null
                    && Long.parseLong(row.get("normalized_batch_id")) >= Long.parseLong(row.get("synced_batch_id")),
                    Duration.ofSeconds(180));
            // the apply task drops a private slot no table holds at its next check (every 10 s)
            awaitTrue(() -> privateSlots(schema) == 0, Duration.ofSeconds(60), "a private slot is left");
            pg.awaitEqual(tables, Duration.ofSeconds(120));
            String firstLog = Files.readString(firstDir.resolve("worker.log"));
            String secondLog = Files.readString(secondDir.resolve("worker.log"));
            assertTrue(firstLog.contains("detaching it from the shared slot"), "the first worker detached a table");
            String expected = switch (name) {
                case "pg-detach-slot-made-no-marker" -> "did not reach its marker before the task stopped; undone";
                case "pg-detach-marked-not-lagging" -> "lagging (the flow's acknowledged position";
                default -> "which no table holds any more";
            };
            assertTrue(secondLog.contains(expected), "the second worker's log says '" + expected + "': see "
                    + secondDir.resolve("worker.log"));
            if (!name.equals(NamedFaults.pgDetachSlotMadeNoMarker().name())) {
                // (a detach undone at the restart leaves nothing to rejoin)
                assertTrue(secondLog.contains("rejoined: handed back") || firstLog.contains("rejoined: handed back"),
                        "the detached table rejoined");
            }
            System.out.printf("pg detach fault %s: %d writer transactions; ClickHouse equals Postgres%n", name,
                    running.written.get());
            second.rest().delete(flow);
        } finally {
            second.close();
        }
        stack.connect().rest().delete(prefix + "-sink");
    }

    /** {@code <slot.prefix>_detach_<8 hex of the main slot's SHA-256>_}, as the connector names private slots. */
    static String detachSlotPrefix(String slotPrefix, String mainSlot) throws Exception {
        byte[] hash = java.security.MessageDigest.getInstance("SHA-256")
                .digest(mainSlot.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        return slotPrefix + "_detach_" + java.util.HexFormat.of().formatHex(hash, 0, 4) + "_";
    }

    /** A flow whose streamed tables detach after 3 unloaded batches and 1 s without a load; two tasks, tables copied. */
    static Map<String, String> detachingSource(String publication, String prefix, String slotPrefix) {
        Map<String, String> source = SourceConfigs.pgPipeline(stack, catalogUrl, DATABASE, publication, prefix);
        source.put("slot.prefix", slotPrefix);
        source.put("tasks.max", "2");
        source.put("table.sync.copy", "all");
        source.put("max.unnormalized.batches", "3");
        source.put("detach.after.ms", "1000");
        return source;
    }

    /**
     * Makes ClickHouse refuse {@code chTable}'s inserts, then changes {@code stuck} in up to 4 batches of its own
     * (each followed by {@code alongside}, formatted with the batch's number, when given), enough to detach it; it stops
     * early once the table is detached.
     */
    static void stall(String flow, String stuck, String chTable, String alongside) throws Exception {
        clickhouse.execute("ALTER TABLE " + chTable + " ADD CONSTRAINT refuse CHECK id < 0").get().close();
        for (int i = 1; i <= 4; i++) {
            Map<String, String> row = pg.table(flow, stuck);
            if (row.get("detach_slot") != null) {
                // detached after three batches (max.unnormalized.batches): its later changes go to its private slot
                // and make no batch until it rejoins, so a fourth one is not awaited
                return;
            }
            long before = Long.parseLong(row.get("synced_batch_id"));
            pg.sql("UPDATE " + stuck + " SET v = v + 1 WHERE id <= " + (i * 10));
            pg.awaitTable(flow, stuck, r -> Long.parseLong(r.get("synced_batch_id")) > before
                    || r.get("detach_slot") != null, Duration.ofSeconds(60));
            if (alongside != null) {
                pg.sql(String.format(java.util.Locale.ROOT, alongside, i));
            }
        }
    }

    static void heal(String chTable) throws Exception {
        clickhouse.execute("ALTER TABLE " + chTable + " DROP CONSTRAINT IF EXISTS refuse").get().close();
    }

    /** The flow's private slots on the source (named {@code <slot.prefix>_detach_…}). */
    static long privateSlots(String slotPrefix) throws Exception {
        try (Connection c = pg.source(); PreparedStatement ps = c.prepareStatement(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE ?")) {
            ps.setString(1, slotPrefix.replace("_", "\\_") + "\\_detach\\_%");
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }


    /**
     * Changes both tables in every transaction, and each table alone in others, one transaction every few milliseconds,
     * until closed.
     */
    static TransactionWriter writer(String schema) {
        return new TransactionWriter("pgdetach-writer-" + schema, pg, n -> switch (n % 3) {
            case 0 -> List.of("INSERT INTO " + schema + ".stuck VALUES (" + n + ", " + n + ")",
                    "INSERT INTO " + schema + ".other VALUES (" + n + ", " + n + ")");
            case 1 -> List.of("UPDATE " + schema + ".stuck SET v = v + 1 WHERE id = " + (n - 1),
                    "DELETE FROM " + schema + ".stuck WHERE id = " + Math.max(0, n - 30));
            default -> List.of("UPDATE " + schema + ".other SET v = v + 1 WHERE id = " + (n - 2));
        }, () -> 15);
    }
}
