package io.tablecdc.e2e;

import java.io.PrintStream;
import java.math.BigDecimal;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The quickstart: starts the local stack, prints its endpoints, deploys the ClickHouse stage sink through
 * the Connect REST API, feeds it two batches of a sample table the way a tablecdc source writes them,
 * shows the table in ClickHouse and the catalog's status, and keeps the stack up until Ctrl-C when run from
 * a terminal ({@code --exit} leaves at once).
 */
public final class Quickstart {
    private static final String FLOW = "quickstart";
    private static final String TABLE = "shop.orders";
    private static final String TOPIC = "quickstart.shop.orders";

    private Quickstart() {
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Exception e) {
            System.err.println("quickstart failed: " + e.getMessage() + " (details in e2e/target/quickstart.log)");
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

        // the topic exists before the sink subscribes, so its pattern subscription sees it at once
        new RecordProducer(stack.kafka().bootstrapServers()).topic(TOPIC).close();
        Map<String, String> sink = SinkConfigs.stageSink(stack, catalogUrl, "quickstart");
        sink.put("topics.regex", "quickstart\\..*");
        out.println("PUT /connectors/quickstart-sink/config  (ClickHouse stage sink, topics quickstart.*)");
        stack.connect().rest().putConfig("quickstart-sink", sink);
        stack.connect().rest().awaitRunning("quickstart-sink", 1, Duration.ofSeconds(120));

        Schema key = SchemaBuilder.struct().name("orders_key").field("id", Schema.INT64_SCHEMA).build();
        Schema value = SchemaBuilder.struct().name("orders").field("id", Schema.INT64_SCHEMA)
                .field("customer", Schema.STRING_SCHEMA).field("amount", Decimal.builder(2).optional().build()).build();
        try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers())) {
            out.println("batch 1 of " + TABLE + ": three new orders");
            producer.send(TOPIC, new Struct(key).put("id", 1L), order(value, 1, "ada", "12.50"), Headers.of(FLOW, TABLE, "r", 1, 1, false));
            producer.send(TOPIC, new Struct(key).put("id", 2L), order(value, 2, "grace", "7.25"), Headers.of(FLOW, TABLE, "r", 1, 1, false));
            producer.send(TOPIC, new Struct(key).put("id", 3L), order(value, 3, "edsger", "99.00"), Headers.of(FLOW, TABLE, "r", 1, 1, true));
            out.println("batch 2 of " + TABLE + ": order 1 updated, order 2 deleted");
            producer.send(TOPIC, new Struct(key).put("id", 1L), order(value, 1, "ada", "13.75"), Headers.of(FLOW, TABLE, "u", 2, 2, false));
            producer.send(TOPIC, new Struct(key).put("id", 2L), null, Headers.of(FLOW, TABLE, "d", 3, 2, true));
        }

        try (Client client = new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername("default").setPassword("")
                .compressServerResponse(false).build()) {
            List<GenericRecord> rows = awaitRows(client, Duration.ofSeconds(120));
            out.println();
            out.println("ClickHouse: SELECT id, customer, amount FROM shop_orders_current ORDER BY id");
            for (GenericRecord row : rows) {
                out.printf("  %d  %-8s %s%n", row.getLong("id"), row.getString("customer"), row.getBigDecimal("amount"));
            }
        }
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

    private static Struct order(Schema schema, long id, String customer, String amount) {
        return new Struct(schema).put("id", id).put("customer", customer).put("amount", new BigDecimal(amount));
    }

    private static List<GenericRecord> awaitRows(Client client, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = "no answer";
        while (System.nanoTime() < deadline) {
            try {
                List<GenericRecord> rows = client.queryAll("SELECT id, customer, amount FROM shop_orders_current ORDER BY id");
                if (rows.size() == 2 && rows.get(0).getBigDecimal("amount").compareTo(new BigDecimal("13.75")) == 0) {
                    return rows;
                }
                last = rows.size() + " rows";
            } catch (RuntimeException e) {
                last = e.getMessage();
            }
            Thread.sleep(500);
        }
        throw new IllegalStateException("the sample table did not reach ClickHouse within " + timeout + " (" + last + ")");
    }

    private static void printStatus(LocalStack stack, String catalogUrl, PrintStream out) throws Exception {
        Path script = null;
        try (DirectoryStream<Path> archives = Files.newDirectoryStream(stack.pluginPath(), "tablecdc-connect-clickhouse-stage-sink-*")) {
            for (Path archive : archives) {
                script = archive.resolve("bin/tablecdc-status");
            }
        }
        if (script == null) {
            out.println("  (the sink archive has no bin/tablecdc-status)");
            return;
        }
        List<String> command = new ArrayList<>(List.of("sh", script.toString(), "--url", catalogUrl, "--user", stack.postgres().user()));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().put("JAVA_HOME", System.getProperty("java.home"));
        builder.environment().put("TABLECDC_CATALOG_PASSWORD", stack.postgres().password());
        Path log = StackPaths.workDir("status").resolve("status.txt");
        Process process = builder.redirectOutput(log.toFile()).start();
        process.waitFor();
        for (String line : Files.readAllLines(log)) {
            out.println("  " + line);
        }
    }
}
