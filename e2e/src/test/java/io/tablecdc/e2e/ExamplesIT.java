package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;

import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * The connector configs in {@code examples/} are what users copy: each one passes the plugin's own validation
 * ({@code PUT /connector-plugins/<class>/config/validate}, which for these plugins also reaches ClickHouse, the catalog,
 * the source database and BigQuery) on a worker started from the Connect image's worker properties
 * ({@code docker/connect/connect-distributed.properties}: file and env config providers), with the compose host names and the secrets file replaced by the local stack's. Every key is one
 * the connector knows, every secret is a config provider reference that the worker resolves, and no password of
 * {@code docker/.env} appears literally.
 */
class ExamplesIT {
    private static final LocalStack stack = LocalStack.get();
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern REFERENCE = Pattern.compile("\\$\\{(file|env):([^}]*)}");
    private static final Pattern ONLY_A_REFERENCE = Pattern.compile("\\$\\{(file|env):[^}]+}");
    /** What the compose file calls the secrets file inside the Connect container. */
    private static final String SECRETS_PATH = "/etc/tablecdc/secrets.properties";
    /**
     * Keys Connect itself reads without listing them in a validation answer: overrides of the connector's clients (the
     * worker allows them) and the default topic creation group of a source.
     */
    private static final List<String> FRAMEWORK_PREFIXES = List.of("consumer.override.", "producer.override.", "admin.override.",
            "topic.creation.default.");
    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final String EXAMPLES_CLICKHOUSE_USER = "examples";

    @Test
    void everyExampleIsValidOnAWorkerWithConfigProvidersAndHoldsNoLiteralSecret() throws Exception {
        Path root = StackPaths.projectRoot();
        Map<String, Map<String, String>> examples = readExamples(root.resolve("examples"));
        Set<String> classes = new TreeSet<>();
        examples.values().forEach(e -> classes.add(e.get("connector.class")));
        assertEquals(Set.of("io.tablecdc.bigquery.BigQueryQueryCdcSourceConnector", "io.tablecdc.clickhouse.ClickHouseStageSinkConnector",
                "io.tablecdc.pg.PgPipelineSourceConnector"), classes, "examples for every connector: " + examples.keySet());
        for (String plugin : List.of("bigquery-query-cdc", "clickhouse-stage-sink", "pg-pipeline")) {
            assertTrue(examples.containsKey(plugin + ".minimal.json") && examples.containsKey(plugin + ".full.json"),
                    "a minimal and a full example of " + plugin + ": " + examples.keySet());
        }

        // the compose deployment's dev secrets must not be pasted into any example
        Properties composeSecrets = new Properties();
        try (InputStream in = Files.newInputStream(root.resolve("docker/.env"))) {
            composeSecrets.load(in);
        }
        for (Map.Entry<String, Map<String, String>> example : examples.entrySet()) {
            for (Map.Entry<String, String> entry : example.getValue().entrySet()) {
                for (String secret : composeSecrets.stringPropertyNames()) {
                    if (!secret.endsWith("PASSWORD") && !secret.endsWith("SECRET_KEY")) {
                        continue;
                    }
                    assertFalse(entry.getValue().contains(composeSecrets.getProperty(secret)),
                            example.getKey() + ": " + entry.getKey() + " holds the literal value of " + secret);
                }
            }
        }

        // the local stack gets what the examples name: role, databases, publication, dataset, tables, ClickHouse database
        // against the compose deployment (docker/compose.e2e.yaml) the role tablecdc exists with the password of
        // docker/.env, which the test container has in its environment: keep it, the deployed flows use it
        String dbPassword = StackPaths.env("TABLECDC_DB_PASSWORD");
        boolean setDbPassword = dbPassword == null;
        Map<String, String> secrets = new TreeMap<>();
        secrets.put("TABLECDC_DB_PASSWORD", setDbPassword ? "ex-" + UUID.randomUUID() : dbPassword);
        secrets.put("CLICKHOUSE_PASSWORD", stack.clickhouse().isEmbedded() ? "ex-" + UUID.randomUUID() : stack.clickhouse().password());
        secrets.put("S3_ACCESS_KEY", stack.objectStore().accessKey());
        secrets.put("S3_SECRET_KEY", stack.objectStore().secretKey());
        assertEquals(new TreeSet<>(secrets.keySet()), new TreeSet<>(referencedNames(examples)),
                "the secrets the examples reference are the ones this test provides");
        prepareSources(setDbPassword ? secrets.get("TABLECDC_DB_PASSWORD") : null);
        if (stack.clickhouse().isEmbedded()) {
            stack.clickhouse().addUser(EXAMPLES_CLICKHOUSE_USER, secrets.get("CLICKHOUSE_PASSWORD"));
        }
        Path secretsFile = StackPaths.workDir("examples").resolve("secrets.properties");
        Properties fileSecrets = new Properties();
        fileSecrets.putAll(secrets);
        try (var out = Files.newOutputStream(secretsFile)) {
            fileSecrets.store(out, "ExamplesIT");
        }

        // a worker started from the docker image's worker properties, with this stack's broker, a free port, the plugins
        // unzipped by the harness, and the file provider reading the folder of this test's secrets file
        String template = Files.readString(root.resolve("docker/connect/connect-distributed.properties"))
                .replace("@BOOTSTRAP_SERVERS@", stack.kafka().bootstrapServers())
                .replace("@GROUP_ID@", "examples-" + System.nanoTime())
                .replace("@ADVERTISED_HOST@", "127.0.0.1");
        Properties image = new Properties();
        image.load(new java.io.StringReader(template));
        Map<String, String> workerProps = new TreeMap<>();
        image.stringPropertyNames().forEach(key -> workerProps.put(key, image.getProperty(key)));
        assertEquals("/etc/tablecdc", workerProps.put("config.providers.file.param.allowed.paths", secretsFile.getParent().toString()),
                "the image's file provider reads " + SECRETS_PATH);
        assertEquals("/opt/tablecdc/plugins", workerProps.put("plugin.path", stack.pluginPath().toString()));
        workerProps.put("listeners", "http://127.0.0.1:0");
        workerProps.remove("rest.advertised.port");
        try (ConnectWorker worker = ConnectWorker.startProcess(workerProps, StackPaths.workDir("examples-worker"), WAIT, secrets)) {
            ConnectRestClient rest = worker.rest();
            assertTrue(rest.connectorPlugins().containsAll(classes), "the worker loads " + classes + ": " + rest.connectorPlugins());
            List<String> problems = new ArrayList<>();
            for (Map.Entry<String, Map<String, String>> example : examples.entrySet()) {
                String name = example.getKey();
                Map<String, String> config = example.getValue();
                Map<String, String> local = localized(name.substring(0, name.indexOf('.')), config, secretsFile);
                JsonNode validation = rest.validate(config.get("connector.class"), local);
                ConnectRestClient.validationErrors(validation).forEach(e -> problems.add(name + ": " + e));

                Map<String, String> types = new HashMap<>();
                validation.path("configs").forEach(c -> types.put(c.path("definition").path("name").asText(),
                        c.path("definition").path("type").asText()));
                for (Map.Entry<String, String> entry : config.entrySet()) {
                    String key = entry.getKey();
                    boolean override = FRAMEWORK_PREFIXES.stream().anyMatch(key::startsWith);
                    if (!override && !types.containsKey(key)) {
                        problems.add(name + ": " + key + " is not a config key of " + config.get("connector.class"));
                    }
                    if ("PASSWORD".equals(types.get(key)) && !ONLY_A_REFERENCE.matcher(entry.getValue()).matches()) {
                        problems.add(name + ": " + key + " is a secret but not a ${file:…} or ${env:…} reference");
                    }
                }
                System.out.printf("%s: %d keys, %d validation errors%n", name, config.size(), validation.path("error_count").asInt());
            }

            // every reference resolves on the worker. Validate answers with the values as given, so each reference is put
            // into topic.prefix, whose validator refuses "${", ":" and "}" but accepts each secret's value; a reference the
            // worker cannot resolve must be refused there, or the probe proves nothing
            Map<String, String> probe = localized("bigquery-query-cdc", examples.get("bigquery-query-cdc.minimal.json"), secretsFile);
            probe.put("topic.prefix", "${env:TABLECDC_EXAMPLES_UNSET}");
            assertFalse(errorsOf(rest.validate(probe.get("connector.class"), probe), "topic.prefix").isEmpty(),
                    "an unresolved reference is refused by topic.prefix's validator");
            for (String reference : references(examples)) {
                probe.put("topic.prefix", reference.replace(SECRETS_PATH, secretsFile.toString()));
                List<String> errors = errorsOf(rest.validate(probe.get("connector.class"), probe), "topic.prefix");
                if (!errors.isEmpty()) {
                    problems.add(reference + " does not resolve on a worker with the docker image's providers: " + errors);
                }
            }
            assertEquals(List.of(), problems);
        }
    }

    private static List<String> errorsOf(JsonNode validation, String key) {
        List<String> errors = new ArrayList<>();
        for (JsonNode c : validation.path("configs")) {
            if (key.equals(c.path("value").path("name").asText())) {
                c.path("value").path("errors").forEach(e -> errors.add(e.asText()));
            }
        }
        return errors;
    }

    /** The JSON files of the examples folder, each a flat map of connector config keys to string values. */
    private static Map<String, Map<String, String>> readExamples(Path dir) throws Exception {
        Map<String, Map<String, String>> examples = new TreeMap<>();
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "*.json")) {
            for (Path file : files) {
                examples.put(file.getFileName().toString(), JSON.readValue(file.toFile(), new TypeReference<LinkedHashMap<String, String>>() { }));
            }
        }
        return examples;
    }

    private static Set<String> references(Map<String, Map<String, String>> examples) {
        Set<String> references = new TreeSet<>();
        examples.values().forEach(e -> e.values().forEach(v -> {
            Matcher m = REFERENCE.matcher(v);
            while (m.find()) {
                references.add(m.group());
            }
        }));
        return references;
    }

    private static Set<String> referencedNames(Map<String, Map<String, String>> examples) {
        Set<String> names = new TreeSet<>();
        for (String reference : references(examples)) {
            Matcher m = REFERENCE.matcher(reference);
            m.matches();
            names.add("file".equals(m.group(1)) ? m.group(2).substring(m.group(2).lastIndexOf(':') + 1) : m.group(2));
        }
        return names;
    }

    /** The example with the compose deployment's addresses and secrets file replaced by the local stack's. */
    private static Map<String, String> localized(String connectorName, Map<String, String> example, Path secretsFile) {
        String pgHostPort = stack.postgres().host() + ":" + stack.postgres().port();
        Map<String, String> addresses = new LinkedHashMap<>();
        addresses.put("http://clickhouse:8123", stack.clickhouse().httpUrl());
        addresses.put("http://s3:8333", stack.objectStore().endpoint());
        addresses.put("http://bigquery:9050", stack.bigquery().endpoint());
        addresses.put("jdbc:postgresql://postgres:5432/", "jdbc:postgresql://" + pgHostPort + "/");
        addresses.put("s3://tablecdc/", "s3://" + stack.objectStore().bucket() + "/");
        addresses.put(SECRETS_PATH, secretsFile.toString());
        Map<String, String> local = new LinkedHashMap<>();
        local.put("name", connectorName);
        example.forEach((key, value) -> {
            String v = value;
            for (Map.Entry<String, String> address : addresses.entrySet()) {
                v = v.replace(address.getKey(), address.getValue());
            }
            local.put(key, v);
        });
        if (local.containsKey("database.host")) {
            local.put("database.host", stack.postgres().host());
            local.put("database.port", Integer.toString(stack.postgres().port()));
        }
        if (local.containsKey("bigquery.project")) {
            local.put("bigquery.project", stack.bigquery().projectId());
        }
        if (local.containsKey("clickhouse.url") && stack.clickhouse().isEmbedded()) {
            // the examples' ClickHouse password belongs to this user of the in-process engine (other tests log in as default)
            local.put("clickhouse.user", EXAMPLES_CLICKHOUSE_USER);
        }
        return local;
    }

    /**
     * What the examples replicate and where they write, as {@code docker/postgres/init.sh} and {@code docker/deploy.sh}
     * create it in the compose deployment.
     */
    /** Creates what is missing; sets the role's password unless {@code password} is null. */
    private static void prepareSources(String password) throws Exception {
        stack.postgres().createDatabase("tablecdc");
        stack.postgres().createDatabase("shop");
        try (Connection c = stack.postgres().connect("shop"); Statement s = c.createStatement()) {
            s.execute("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tablecdc') THEN"
                    + " CREATE ROLE tablecdc LOGIN REPLICATION; END IF; END $$");
            if (password != null) {
                // ALTER ROLE takes no parameters; the password is a UUID with a prefix, no quote can occur in it
                s.execute("ALTER ROLE tablecdc PASSWORD '" + password + "'");
            }
            s.execute("CREATE SCHEMA IF NOT EXISTS shop");
            s.execute("CREATE TABLE IF NOT EXISTS shop.customers (id bigint PRIMARY KEY, name text, updated_at timestamptz)");
            s.execute("CREATE TABLE IF NOT EXISTS shop.orders (id bigint PRIMARY KEY, customer_id bigint, amount numeric(12,2),"
                    + " updated_at timestamptz)");
            s.execute("GRANT USAGE ON SCHEMA shop TO tablecdc");
            s.execute("GRANT SELECT ON ALL TABLES IN SCHEMA shop TO tablecdc");
            // created only when missing: a flow of the compose deployment may be streaming from it
            s.execute("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = 'tablecdc_shop') THEN"
                    + " CREATE PUBLICATION tablecdc_shop FOR TABLE shop.orders, shop.customers; END IF; END $$");
        }
        try (Connection c = stack.postgres().connect("tablecdc"); Statement s = c.createStatement()) {
            s.execute("GRANT ALL ON DATABASE tablecdc TO tablecdc");
            s.execute("GRANT ALL ON SCHEMA public TO tablecdc");
        }
        BigQuery bigQuery = stack.bigquery().client();
        if (bigQuery.getDataset("shop") == null) {
            bigQuery.create(DatasetInfo.of("shop"));
        }
        for (String table : List.of("orders", "customers")) {
            TableId id = TableId.of(stack.bigquery().projectId(), "shop", table);
            if (bigQuery.getTable(id) == null) {
                bigQuery.create(TableInfo.of(id, StandardTableDefinition.of(Schema.of(
                        Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                        Field.of("name", StandardSQLTypeName.STRING),
                        Field.of("updated_at", StandardSQLTypeName.TIMESTAMP)))));
            }
        }
        new CdcChecks(stack, "tablecdc").execute("CREATE DATABASE IF NOT EXISTS analytics");
    }
}
