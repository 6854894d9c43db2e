package io.tablecdc.common.status;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tablecdc.catalog.CatalogMigrations;
import io.tablecdc.catalog.Catalog;
import io.tablecdc.catalog.FlowIdentity;
import io.tablecdc.catalog.Phase;
import io.tablecdc.catalog.RowCounts;
import io.tablecdc.catalog.SyncedBatch;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class StatusCommandTest {

    private static EmbeddedPostgres postgres;
    private static String url;
    /** When the fixture's times were taken (the lag is measured from them). */
    private static Instant fixtureWrittenAt;

    @BeforeAll
    static void start() throws Exception {
        File dir = new File("target/embedded-pg/" + StatusCommandTest.class.getSimpleName());
        postgres = EmbeddedPostgres.builder()
                .setOverrideWorkingDirectory(dir)
                .setDataDirectory(new File(dir, "data"))
                .setCleanDataDirectory(true)
                .start();
        try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE catalog");
            s.execute("CREATE DATABASE empty");
        }
        url = postgres.getJdbcUrl("postgres", "catalog");
        CatalogMigrations.migrate(postgres.getDatabase("postgres", "catalog"));
        Catalog catalog = new Catalog(postgres.getDatabase("postgres", "catalog"));
        Instant now = Instant.now();
        fixtureWrittenAt = now;

        catalog.flows().registerFlow("bq_shop", FlowIdentity.ofKind("bigquery_query_cdc"), null);
        catalog.progress().initTable("bq_shop", "proj.shop.orders");
        catalog.progress().recordSync("bq_shop", "proj.shop.orders",
                new SyncedBatch("2026-12-02T10:15:00.123456789Z", 12, 1200, now.minusSeconds(95),
                        now.minusSeconds(160)), now.minusSeconds(90));
        catalog.progress().recordNormalize("bq_shop", "proj.shop.orders", 10, new RowCounts(900, 80, 20, 7), now.minusSeconds(30));
        catalog.progress().setPause("bq_shop", "proj.shop.orders", "normalize_buffer_full", now.minusSeconds(40));
        catalog.progress().initTable("bq_shop", "proj.shop.customers");
        catalog.progress().recordError("bq_shop", "proj.shop.customers",
                "Access Denied: Table proj:shop.customers: User does not have permission\nsecond line",
                now.minusSeconds(20), now.plusSeconds(40));

        catalog.flows().registerFlow("pg_main", new FlowIdentity("pg_pipeline", "7311111111111111111", 1L, "tablecdc_9f2c",
                "tablecdc_pub", null), null);
        catalog.progress().initTable("pg_main", "public.items", Phase.PENDING);
        catalog.phases().markReady("pg_main", "public.items", "0/16B3748");
        catalog.progress().recordSync("pg_main", "public.items", new SyncedBatch("0/16B3748", 4, 40, now, now), now);
        catalog.progress().recordNormalize("pg_main", "public.items", 4, new RowCounts(40, 0, 0), now);
        catalog.progress().initTable("pg_main", "public.stock", Phase.PENDING);
    }

    @AfterAll
    static void stop() throws Exception {
        if (postgres != null) {
            postgres.close();
        }
    }

    private record Result(int status, String out, String err) {
    }

    private static Result run(Map<String, String> env, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int status = StatusCommand.run(args, env, new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Result(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void printsATablePerFlow() {
        Result r = run(Map.of(StatusCommand.ENV_URL, url));
        assertEquals(0, r.status(), r.err());
        String out = r.out();
        assertTrue(out.contains("flow bq_shop (bigquery_query_cdc): 2 tables"), out);
        assertTrue(out.contains("flow pg_main (pg_pipeline): 2 tables"), out);
        assertTrue(out.contains("TABLE"), out);
        assertTrue(out.contains("LAST ERROR"), out);
        String orders = line(out, "proj.shop.orders");
        assertTrue(orders.contains("2026-12-02T10:15:00.123456789Z"), orders);
        // the fixture is written once for the class: the other tests (one starts a JVM) run before this one, so the
        // ages have grown by then from 95 s and 40 s
        assertTrue(orders.matches(".*\\s12\\s+10\\s+1000\\s+7\\s+(1m[3-9]\\d|[2-9]m\\d\\d?)s\\s+normalize_buffer_full"
                + " \\(([4-9]\\ds|\\dm\\d\\d?s) ago\\).*"), orders);
        String customers = line(out, "proj.shop.customers");
        assertTrue(customers.contains("Access Denied"), customers);
        assertTrue(customers.contains("retry in"), customers);
        assertFalse(customers.contains("\n"), customers);
        assertTrue(line(out, "public.items").contains("ready(0/16B3748)"), out);
        assertTrue(line(out, "public.stock").contains("pending"), out);
        System.out.println(out);
    }

    private static String line(String out, String table) {
        return out.lines().filter(l -> l.contains(table)).findFirst().orElseThrow(() -> new AssertionError(out));
    }

    @Test
    void printsJsonForMachinesAndFiltersByFlow() {
        Result r = run(Map.of(StatusCommand.ENV_URL, url), "--json", "--flow", "bq_shop");
        assertEquals(0, r.status(), r.err());
        String json = r.out().strip();
        assertTrue(json.startsWith("{\"generated_at\":\""), json);
        assertTrue(json.contains("{\"flow\":\"bq_shop\",\"source_kind\":\"bigquery_query_cdc\",\"tables\":["), json);
        assertFalse(json.contains("pg_main"), json);
        assertTrue(json.contains("\"table\":\"proj.shop.orders\""), json);
        assertTrue(json.contains("\"synced_batch_id\":12,\"normalized_batch_id\":10,\"unnormalized_batches\":2"), json);
        assertTrue(json.contains("\"inserts\":900,\"updates\":80,\"deletes\":20,\"clamped_values\":7"), json);
        assertTrue(json.contains("\"paused_reason\":\"normalize_buffer_full\""), json);
        assertTrue(json.contains("permission\\nsecond line"), "newlines escaped: " + json);
        // the first row arrived 95 s before the fixture was written, and the command ran some seconds later (a loaded
        // machine took 7 s between the two): at least 95 s, and no more than the time since then
        java.util.regex.Matcher lag = java.util.regex.Pattern.compile("\"lag_ms\":(\\d+),").matcher(json);
        assertTrue(lag.find(), json);
        long lagMs = Long.parseLong(lag.group(1));
        long since = java.time.Duration.between(fixtureWrittenAt, java.time.Instant.now()).toMillis();
        assertTrue(lagMs >= 95_000 && lagMs <= 95_000 + since, lagMs + " ms, fixture written " + since + " ms ago: " + json);
        System.out.println(json);
    }

    @Test
    void refusesAPasswordOnTheCommandLineAndNeedsAUrl() {
        Result password = run(Map.of(StatusCommand.ENV_URL, url), "--password", "hunter2");
        assertEquals(2, password.status());
        assertFalse(password.err().contains("hunter2"));
        assertTrue(password.err().contains(StatusCommand.ENV_PASSWORD), password.err());
        Result noUrl = run(Map.of());
        assertEquals(2, noUrl.status());
        assertTrue(noUrl.err().contains("--url"), noUrl.err());
    }

    @Test
    void reportsAnUnreachableCatalogOrAMissingOneWithoutSecrets() throws Exception {
        int closedPort;
        try (ServerSocket socket = new ServerSocket(0)) {
            closedPort = socket.getLocalPort();
        }
        Result down = run(Map.of(StatusCommand.ENV_URL, "jdbc:postgresql://127.0.0.1:" + closedPort + "/x",
                StatusCommand.ENV_PASSWORD, "s3cret-pw"));
        assertEquals(1, down.status());
        assertTrue(down.err().contains("cannot read the catalog"), down.err());
        assertFalse(down.err().contains("s3cret-pw"), down.err());

        Result empty = run(Map.of(StatusCommand.ENV_URL, postgres.getJdbcUrl("postgres", "empty")));
        assertEquals(1, empty.status());
        assertTrue(empty.err().contains("no tablecdc catalog"), empty.err());
    }

    @Test
    void readsThePasswordFromAFile() throws Exception {
        Path file = Files.createTempFile(Path.of("target"), "catalog-password", ".txt");
        Files.writeString(file, "whatever\n");
        // the embedded server trusts local connections, so any password works; this checks the flag's plumbing
        Result r = run(Map.of(StatusCommand.ENV_URL, url), "--password-file", file.toString(), "--flow", "pg_main");
        assertEquals(0, r.status(), r.err());
        assertTrue(r.out().contains("public.items"), r.out());
        Result missing = run(Map.of(StatusCommand.ENV_URL, url), "--password-file", "target/no-such-file");
        assertEquals(2, missing.status());
    }

    /** As the plugin archive runs it: only this module's and the catalog's classes and pgjdbc, no SLF4J, no Kafka. */
    @Test
    void runsWithOnlyPgjdbcOnTheClasspath() throws Exception {
        String out = runAlone(StatusCommand.class, 0, "--flow", "pg_main");
        assertTrue(out.contains("flow pg_main (pg_pipeline): 2 tables"), out);
        assertTrue(out.contains("public.stock"), out);
    }

    /**
     * The commands on one table run the catalog classes' operations with only pgjdbc too (a Kafka type those classes
     * named where the JVM checks it on loading would stop them): each reaches the catalog and finds no such table.
     */
    @Test
    void tableCommandsRunWithOnlyPgjdbcOnTheClasspath() throws Exception {
        String reset = runAlone(ResetTableCommand.class, 1, "--flow", "pg_main", "--table", "public.none");
        assertTrue(reset.contains("has no Postgres pipeline table public.none"), reset);
        String reload = runAlone(ReloadTableCommand.class, 1, "--flow", "pg_main", "--table", "public.none");
        assertTrue(reload.contains("has no table public.none"), reload);
        String quarantine = runAlone(QuarantineBatchCommand.class, 1, "--flow", "pg_main", "--table", "public.none");
        assertTrue(quarantine.contains("has no table public.none"), quarantine);
    }

    /** Runs {@code command} in a JVM of its own with only this module's and the catalog's classes and pgjdbc. */
    private String runAlone(Class<?> command, int expectedStatus, String... args) throws Exception {
        String classes = Path.of(StatusCommand.class.getProtectionDomain().getCodeSource().getLocation().toURI())
                .toString() + File.pathSeparator + Path.of(io.tablecdc.catalog.Flows.class.getProtectionDomain()
                .getCodeSource().getLocation().toURI());
        String pgjdbc = Path.of(org.postgresql.Driver.class.getProtectionDomain().getCodeSource().getLocation()
                .toURI()).toString();
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> commandLine = new java.util.ArrayList<>(List.of(java, "-cp", classes + File.pathSeparator + pgjdbc,
                command.getName()));
        commandLine.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(commandLine).redirectErrorStream(true);
        pb.environment().put(StatusCommand.ENV_URL, url);
        Process p = pb.start();
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), command.getSimpleName() + " did not finish");
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(expectedStatus, p.exitValue(), out);
        return out;
    }

    @Test
    void formatsDurationsForPeople() {
        assertEquals("0s", StatusCommand.human(Duration.ofMillis(300)));
        assertEquals("59s", StatusCommand.human(Duration.ofSeconds(59)));
        assertEquals("2m05s", StatusCommand.human(Duration.ofSeconds(125)));
        assertEquals("1h02m", StatusCommand.human(Duration.ofMinutes(62)));
        assertEquals("3d04h", StatusCommand.human(Duration.ofHours(76)));
        assertEquals(List.of("\"a\\\"b\\\\c\\u0001\"", "null", "12"),
                List.of(StatusCommand.jsonValue("a\"b\\c\u0001"), StatusCommand.jsonValue(null),
                        StatusCommand.jsonValue(12L)));
    }
}
