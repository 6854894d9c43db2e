package io.tablecdc.e2e;

import java.io.PrintStream;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;
import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetId;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.InsertAllRequest;
import com.google.cloud.bigquery.InsertAllResponse;
import com.google.cloud.bigquery.QueryJobConfiguration;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.StatusScript;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * The quickstart: starts the local stack, prints its endpoints, creates a table in the BigQuery emulator,
 * deploys the BigQuery query CDC source and the ClickHouse stage sink through the Connect REST API, shows
 * the rows and an update arriving in ClickHouse; then a Postgres flow: two tables with rows copied by copy tasks
 * (progress from the catalog), handed over and streamed; prints the catalog's status, and keeps the stack up until
 * Ctrl-C when run from a terminal ({@code --exit} leaves at once).
 */
public final class Quickstart {

    private Quickstart() {
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Exception e) {
            System.err.println("quickstart failed: " + e.getMessage() + " (details in test-stack/target/quickstart.log)");
            e.printStackTrace();
            System.exit(1);
        }
    }

    private static void run(String[] args) throws Exception {
        PrintStream out = System.out;
        long started = System.nanoTime();
        LocalStack stack = LocalStack.get();
        String catalogUrl = stack.postgres().createDatabase("tablecdc_catalog");
        out.println();
        out.println("tablecdc local stack");
        out.println("  Kafka bootstrap     " + stack.kafka().bootstrapServers());
        out.println("  Connect REST        " + stack.connect().restUrl());
        out.println("  Postgres            " + stack.postgres().adminUrl() + " (user " + stack.postgres().user() + ")");
        out.println("  catalog             " + catalogUrl);
        out.println("  ClickHouse HTTP     " + stack.clickhouse().httpUrl() + " (chDB engine behind a test front)");
        out.println("  S3 object store     " + stack.objectStore().endpoint() + " bucket " + stack.objectStore().bucket());
        out.println("  BigQuery emulator   " + stack.bigquery().endpoint() + " project " + stack.bigquery().projectId());
        List<String> plugins = stack.connect().rest().connectorPlugins().stream().filter(p -> p.startsWith("io.tablecdc.")).toList();
        out.println("  tablecdc plugins    " + String.join(", ", plugins));
        out.printf("  started in %.1f s%n%n", (System.nanoTime() - started) / 1e9);

        // a BigQuery table in the emulator: three customers
        BigQuery bigquery = stack.bigquery().client();
        String project = stack.bigquery().projectId();
        TableId customers = TableId.of(project, "shop", "customers");
        if (bigquery.getDataset(DatasetId.of(project, "shop")) == null) {
            bigquery.create(DatasetInfo.newBuilder(project, "shop").build());
        }
        bigquery.delete(customers);
        bigquery.create(TableInfo.of(customers, StandardTableDefinition.of(com.google.cloud.bigquery.Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("name", StandardSQLTypeName.STRING),
                Field.of("updated_at", StandardSQLTypeName.TIMESTAMP)))));
        Instant now = Instant.now();
        InsertAllRequest.Builder rows = InsertAllRequest.newBuilder(customers);
        String[] names = {"ada", "grace", "edsger"};
        for (int i = 0; i < names.length; i++) {
            rows.addRow(Map.of("id", i + 1, "name", names[i], "updated_at", now.minusSeconds(600 - i).toString()));
        }
        InsertAllResponse inserted = bigquery.insertAll(rows.build());
        if (inserted.hasErrors()) {
            throw new IllegalStateException("inserting the sample rows failed: " + inserted.getInsertErrors());
        }
        out.println("BigQuery emulator: " + project + ".shop.customers with 3 rows");

        Map<String, String> sink = SinkConfigs.defaultNames(SinkConfigs.stageSink(stack, catalogUrl, "quickstart"));
        sink.put("topics.regex", "quickstart\\..*");
        // the source creates its topics after the sink subscribed: look for new topics every second
        sink.put("consumer.override.metadata.max.age.ms", "1000");
        out.println("PUT /connectors/quickstart-sink/config      (ClickHouse stage sink, topics quickstart.*)");
        stack.connect().rest().putConfig("quickstart-sink", sink);

        Map<String, String> source = new HashMap<>();
        source.put("connector.class", "io.tablecdc.bigquery.BigQueryQueryCdcSourceConnector");
        source.put("tasks.max", "1");
        source.put("bigquery.project", project);
        source.put("bigquery.dataset", "shop");
        source.put("bigquery.endpoint", stack.bigquery().endpoint());
        source.put("tables", "customers:updated_at:id");
        source.put("topic.prefix", "quickstart");
        source.put("sync.interval.ms", "1000");
        source.put("safety.lag.ms", "1000");
        source.put("topic.creation.default.partitions", "1");
        source.put("topic.creation.default.replication.factor", "1");
        source.put("catalog.jdbc.url", catalogUrl);
        source.put("catalog.user", stack.postgres().user());
        source.put("catalog.password", stack.postgres().password());
        out.println("PUT /connectors/quickstart-bigquery/config  (BigQuery query CDC source, table shop.customers)");
        stack.connect().rest().putConfig("quickstart-bigquery", source);
        stack.connect().rest().awaitRunning("quickstart-sink", 1, Duration.ofSeconds(120));
        stack.connect().rest().awaitRunning("quickstart-bigquery", 1, Duration.ofSeconds(120));

        String table = ("quickstart_" + project + "_shop_customers").replaceAll("[^A-Za-z0-9_]", "_") + "_current";
        try (Client client = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                .compressServerResponse(false).build()) {
            long t0 = System.nanoTime();
            List<GenericRecord> found = awaitRows(client, table, r -> r.size() == 3, Duration.ofSeconds(180));
            out.printf("%nClickHouse after %.1f s: SELECT id, name FROM %s ORDER BY id%n", (System.nanoTime() - t0) / 1e9, table);
            found.forEach(row -> out.printf("  %d  %s%n", row.getLong("id"), row.getString("name")));

            bigquery.query(QueryJobConfiguration.newBuilder("UPDATE `" + project + ".shop.customers` SET name = 'grace hopper',"
                    + " updated_at = CURRENT_TIMESTAMP() WHERE id = 2").build());
            out.println("\nBigQuery: UPDATE shop.customers SET name = 'grace hopper' WHERE id = 2");
            t0 = System.nanoTime();
            found = awaitRows(client, table, r -> r.size() == 3 && "grace hopper".equals(r.get(1).getString("name")), Duration.ofSeconds(180));
            out.printf("ClickHouse after %.1f s:%n", (System.nanoTime() - t0) / 1e9);
            found.forEach(row -> out.printf("  %d  %s%n", row.getLong("id"), row.getString("name")));
        }
        postgresFlow(stack, catalogUrl, out);
        out.println();
        out.println("catalog: tablecdc-status (from the sink's plugin archive, bin/tablecdc-status)");
        printStatus(stack, catalogUrl, out);

        boolean interactive = System.console() != null && !List.of(args).contains("--exit");
        if (interactive) {
            out.println("The stack stays up until Ctrl-C.");
            Thread.currentThread().join();
        }
        System.exit(0);
    }

    /** A Postgres database with two tables, copied and then streamed by the Postgres pipeline source. */
    private static void postgresFlow(LocalStack stack, String catalogUrl, PrintStream out) throws Exception {
        stack.postgres().createDatabase("shop");
        try (java.sql.Connection c = stack.postgres().connect("shop"); java.sql.Statement s = c.createStatement()) {
            s.execute("DROP PUBLICATION IF EXISTS quickstart_pub");
            s.execute("DROP TABLE IF EXISTS public.orders, public.items");
            s.execute("CREATE TABLE public.orders (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12, 2))");
            s.execute("INSERT INTO public.orders SELECT g, 'customer ' || (g % 1000), g % 500 + 0.99"
                    + " FROM generate_series(1, 200000) g");
            s.execute("CREATE TABLE public.items (order_id bigint, line int, sku text NOT NULL, PRIMARY KEY (order_id, line))");
            s.execute("INSERT INTO public.items SELECT g, l, 'sku-' || (g * l % 97) FROM generate_series(1, 20000) g,"
                    + " generate_series(1, 3) l");
            s.execute("ANALYZE public.orders, public.items");
            s.execute("CREATE PUBLICATION quickstart_pub FOR TABLE public.orders, public.items");
        }
        out.println();
        out.println("Postgres: database shop, public.orders (200000 rows) and public.items (60000 rows),"
                + " publication quickstart_pub");
        Map<String, String> source = io.tablecdc.e2e.flows.SourceConfigs.pgPipeline(stack, catalogUrl, "shop",
                "quickstart_pub", "quickstart");
        // task 0 applies the stream, tasks 1 and 2 copy tables
        source.put("tasks.max", "3");
        source.put("table.sync.copy", "all");
        source.put("topic.prefix", "quickstart.pg");
        out.println("PUT /connectors/quickstart-postgres/config  (Postgres pipeline source, table.sync.copy=all, tasks.max=3)");
        long t0 = System.nanoTime();
        stack.connect().rest().putConfig("quickstart-postgres", source);
        stack.connect().rest().awaitRunning("quickstart-postgres", 3, Duration.ofSeconds(120));
        // copy progress as the catalog shows it, until both tables are handed over
        long deadline = System.nanoTime() + Duration.ofSeconds(300).toNanos();
        String last = "";
        while (true) {
            String status = StatusScript.run(stack, catalogUrl, "--flow", "quickstart-postgres");
            String phases = status == null ? "" : status.lines().filter(l -> l.contains("public.")).map(String::strip)
                    .map(l -> l.replaceAll("\\s{2,}", "  ")).reduce((a, b) -> a + "\n    " + b).orElse("");
            if (!phases.equals(last)) {
                out.printf("  after %4.1f s:%n    %s%n", (System.nanoTime() - t0) / 1e9, phases);
                last = phases;
            }
            if (phases.lines().count() == 2 && phases.lines().allMatch(l -> l.contains("ready("))) {
                break;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the Postgres tables were not handed over within 300 s: " + phases);
            }
            Thread.sleep(1000);
        }
        try (java.sql.Connection c = stack.postgres().connect("shop"); java.sql.Statement s = c.createStatement()) {
            s.execute("UPDATE public.orders SET customer = 'grace hopper' WHERE id = 2");
            s.execute("DELETE FROM public.orders WHERE id = 3");
        }
        out.println("Postgres: UPDATE public.orders SET customer = 'grace hopper' WHERE id = 2; DELETE … WHERE id = 3");
        try (Client client = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user()).setPassword(stack.clickhouse().password())
                .compressServerResponse(false).build()) {
            long t1 = System.nanoTime();
            List<GenericRecord> counts = null;
            while (System.nanoTime() < deadline) {
                try {
                    counts = client.queryAll("SELECT (SELECT count() FROM quickstart_pg_public_orders_current) AS orders,"
                            + " (SELECT count() FROM quickstart_pg_public_items_current) AS items,"
                            + " (SELECT any(customer) FROM quickstart_pg_public_orders_current WHERE id = 2) AS second");
                    if (counts.get(0).getLong("orders") == 199_999 && counts.get(0).getLong("items") == 60_000
                            && "grace hopper".equals(counts.get(0).getString("second"))) {
                        break;
                    }
                } catch (RuntimeException e) {
                    counts = null;
                }
                Thread.sleep(500);
            }
            if (counts == null || counts.get(0).getLong("orders") != 199_999) {
                throw new IllegalStateException("ClickHouse did not reach Postgres's rows: " + counts);
            }
            out.printf("ClickHouse after %.1f s: quickstart_pg_public_orders_current %d rows, quickstart_pg_public_items_current %d rows,"
                    + " order 2's customer '%s'%n", (System.nanoTime() - t1) / 1e9, counts.get(0).getLong("orders"),
                    counts.get(0).getLong("items"), counts.get(0).getString("second"));
        }
    }

    private static List<GenericRecord> awaitRows(Client client, String table, Predicate<List<GenericRecord>> done, Duration timeout)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = "no answer";
        while (System.nanoTime() < deadline) {
            try {
                List<GenericRecord> rows = client.queryAll("SELECT id, name FROM " + table + " ORDER BY id");
                if (done.test(rows)) {
                    return rows;
                }
                last = rows.size() + " rows";
            } catch (RuntimeException e) {
                last = e.getMessage();
            }
            Thread.sleep(500);
        }
        throw new IllegalStateException(table + " did not reach the expected rows within " + timeout + " (" + last + ")");
    }

    private static void printStatus(LocalStack stack, String catalogUrl, PrintStream out) throws Exception {
        String output = StatusScript.run(stack, catalogUrl);
        if (output == null) {
            out.println("  (the sink archive has no bin/tablecdc-status)");
            return;
        }
        for (String line : output.split("\n")) {
            out.println("  " + line);
        }
    }
}
