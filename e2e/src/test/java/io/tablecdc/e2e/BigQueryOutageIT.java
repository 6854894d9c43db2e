package io.tablecdc.e2e;

import java.net.URI;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import com.google.cloud.bigquery.TableId;

import io.tablecdc.e2e.faults.FaultProxy;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * The BigQuery emulator goes away while a query CDC flow runs, through a {@link FaultProxy} in front of it: refused
 * (down), hung (no answer) or a black hole (new connections accepted and never answered, open ones swallowing what
 * they carry, nothing closed; a connection that met it stays dead after it heals, so only the source's
 * {@code bigquery.timeout.ms}, 15 s here, ends the request waiting on it) for 6 s, several sync intervals, while rows
 * keep being written (to the emulator directly). The source task stays running, and once BigQuery answers again
 * ClickHouse {@code FINAL} holds exactly the rows written, each with its last value.
 */
class BigQueryOutageIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String DATASET = "bqoutage_it";

    private static BigQueryFixture fx;

    @BeforeAll
    static void start() throws Exception {
        fx = BigQueryFixture.create(stack, DATASET, "bqoutage_catalog");
    }

    @ParameterizedTest(name = "BigQuery {0} for {1} ms")
    @CsvSource({"refuse, 6000", "hang, 6000", "blackHole, 6000"})
    void theSourceRidesOutAnOutageOfBigQuery(String how, long outageMs) throws Exception {
        String table = "out_" + how;
        TableId id = fx.table(table);
        Map<Long, String> expected = new TreeMap<>();
        write(id, expected, 0, 20, "seed");

        URI endpoint = URI.create(stack.bigquery().endpoint());
        String connector = "bqoutage-" + how;
        try (FaultProxy proxy = FaultProxy.start("bigquery-" + how, endpoint.getHost(), endpoint.getPort())) {
            Map<String, String> source = fx.source(table + ":ts:id", 1, connector);
            source.put("bigquery.endpoint", endpoint.getScheme() + "://127.0.0.1:" + proxy.port());
            // the bound of a request that meets a black hole: its connection stays dead after the hole heals
            source.put("bigquery.timeout.ms", "15000");
            stack.connect().rest().putConfig(connector + "-sink", fx.sink(connector));
            // after the object store started (for the sink): its start configures logging anew
            CdcChecks.LogCapture logs = new CdcChecks.LogCapture();
            stack.connect().rest().putConfig(connector, source);
            stack.connect().rest().awaitRunning(connector, 1, Duration.ofSeconds(60));
            fx.awaitEqual(id, expected, Duration.ofSeconds(90));

            Consumer<FaultProxy> outage = switch (how) {
                case "hang" -> FaultProxy::hang;
                case "blackHole" -> FaultProxy::blackHole;
                default -> FaultProxy::refuse;
            };
            outage.accept(proxy);
            long accepted = proxy.accepted();
            long end = System.nanoTime() + outageMs * 1_000_000;
            int round = 0;
            while (System.nanoTime() < end) {
                // new rows and updates of earlier ones, stamped now, while the source cannot read them
                write(id, expected, 20 + round * 5, 5, "during-" + round);
                round++;
                Thread.sleep(500);
            }
            proxy.pass();
            for (int i = 0; i < 4; i++) {
                write(id, expected, 20 + (round + i) * 5, 5, "after-" + i);
                Thread.sleep(500);
            }
            fx.awaitEqual(id, expected, Duration.ofSeconds(120));
            stack.connect().rest().awaitRunning(connector, 1, Duration.ofSeconds(10));
            if ("blackHole".equals(how)) {
                // the request that met the hole ended at the source's bound, and the table's error says so
                logs.await(1, "WARN", Duration.ofSeconds(10), "poll of flow " + connector,
                        "no answer from BigQuery within bigquery.timeout.ms=15000");
            }
            logs.close();
            System.out.printf("bigquery %s for %d ms: %d connections tried during the outage; %d rows in ClickHouse%n", how,
                    outageMs, proxy.accepted() - accepted, expected.size());
            stack.connect().rest().delete(connector);
            stack.connect().rest().delete(connector + "-sink");
        }
    }

    /**
     * The catalog cannot be reached when the connector (re)starts, as after a worker failover during a catalog outage:
     * the connector runs (it used to fail for good with "the catalog is not usable", its task running on without it,
     * until an operator restarted it; randomized run seed 8768), its task waits for the catalog, and once it answers
     * ClickHouse {@code FINAL} holds every row written meanwhile.
     */
    @org.junit.jupiter.api.Test
    void aConnectorStartedWhileTheCatalogIsDownRunsAndWaitsForIt() throws Exception {
        String table = "out_catalog";
        TableId id = fx.table(table);
        Map<Long, String> expected = new TreeMap<>();
        write(id, expected, 0, 20, "seed");
        String connector = "bqoutage-catalog";
        try (FaultProxy catalog = FaultProxy.start("bigquery-catalog", stack.postgres().host(), stack.postgres().port())) {
            Map<String, String> source = fx.source(table + ":ts:id", 1, connector);
            source.put("catalog.jdbc.url", fx.catalogUrl.replace(stack.postgres().host() + ":" + stack.postgres().port(),
                    "127.0.0.1:" + catalog.port()));
            stack.connect().rest().putConfig(connector + "-sink", fx.sink(connector));
            stack.connect().rest().putConfig(connector, source);
            stack.connect().rest().awaitRunning(connector, 1, Duration.ofSeconds(60));
            fx.awaitEqual(id, expected, Duration.ofSeconds(90));

            catalog.refuse();
            // the connector alone starts again: its start() meets the outage
            stack.connect().rest().restart(connector, false, false);
            write(id, expected, 20, 5, "during");
            // RUNNING again after the restart, and still so once its start has met the refused catalog
            stack.connect().rest().awaitStatus(connector, s -> "RUNNING".equals(s.path("connector").path("state").asText())
                    && catalog.accepted() > 0, Duration.ofSeconds(60));
            Thread.sleep(2_000);
            stack.connect().rest().awaitRunning(connector, 1, Duration.ofSeconds(5));
            catalog.pass();
            write(id, expected, 25, 5, "after");
            fx.awaitEqual(id, expected, Duration.ofSeconds(120));
            stack.connect().rest().awaitRunning(connector, 1, Duration.ofSeconds(10));
            stack.connect().rest().delete(connector);
            stack.connect().rest().delete(connector + "-sink");
        }
    }

    /** Inserts {@code count} rows from id {@code from + 1} and rewrites (as new row versions) the two lowest ids. */
    private static void write(TableId id, Map<Long, String> expected, long from, int count, String tag) {
        List<Map<String, Object>> rows = new ArrayList<>();
        Instant now = Instant.now().truncatedTo(ChronoUnit.MICROS);
        List<Long> ids = new ArrayList<>();
        for (int i = 1; i <= count; i++) {
            ids.add(from + i);
        }
        if (from > 0) {
            ids.add(1L + from % 7);
        }
        int n = 0;
        for (long key : ids) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("id", key);
            row.put("val", tag + "-" + key);
            row.put("ts", now.plus(n++, ChronoUnit.MICROS).toString());
            rows.add(row);
        }
        CdcChecks.insert(fx.bigQuery, id, rows);
        for (Map<String, Object> row : rows) {
            expected.put((Long) row.get("id"), (String) row.get("val"));
        }
    }
}
