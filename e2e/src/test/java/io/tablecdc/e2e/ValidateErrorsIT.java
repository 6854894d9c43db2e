package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.Statement;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/**
 * Wrong passwords and other access problems, as a user meets them: through the Connect worker's validate endpoint,
 * against the local stack's real Postgres (password authentication on) and ClickHouse engine (its HTTP front refuses
 * wrong passwords as a server does). Each problem is reported as what it is (authentication, network, permission,
 * missing database) on the field at fault, and no answer holds a password.
 */
class ValidateErrorsIT {
    private static final LocalStack stack = LocalStack.get();
    private static final String SINK = "io.tablecdc.clickhouse.ClickHouseStageSinkConnector";
    private static final String CH_USER = "validate_ch";
    private static final String CH_PASSWORD = "ch-right-" + UUID.randomUUID();
    private static final String PG_ROLE = "validate_role";
    private static final String PG_PASSWORD = "pg-right-" + UUID.randomUUID();
    private static final String WRONG = "wrong-" + UUID.randomUUID();
    private static String catalogUrl;

    @BeforeAll
    static void start() throws Exception {
        catalogUrl = stack.postgres().createDatabase("validate_catalog");
        stack.postgres().createDatabase("validate_source");
        try (Connection c = stack.postgres().connect("validate_source"); Statement s = c.createStatement()) {
            s.execute("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '" + PG_ROLE + "') THEN"
                    + " CREATE ROLE " + PG_ROLE + " LOGIN REPLICATION; END IF; END $$");
            // ALTER ROLE takes no parameters; the password is a UUID with a prefix, no quote can occur in it
            s.execute("ALTER ROLE " + PG_ROLE + " PASSWORD '" + PG_PASSWORD + "'");
            s.execute("CREATE TABLE IF NOT EXISTS items (id bigint PRIMARY KEY, name text)");
            s.execute("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = 'validate_pub') THEN"
                    + " CREATE PUBLICATION validate_pub FOR TABLE items; END IF; END $$");
        }
        if (stack.clickhouse().isEmbedded()) {
            stack.clickhouse().addUser(CH_USER, CH_PASSWORD);
        }
    }

    private static Map<String, String> sink() {
        Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "validate-stage");
        config.put("name", "validate-sink");
        config.put("topics", "validate.items");
        config.put("stage.local.dir", StackPaths.workDir("validate-sink-local").toString());
        if (stack.clickhouse().isEmbedded()) {
            config.put("clickhouse.user", CH_USER);
            config.put("clickhouse.password", CH_PASSWORD);
        }
        return config;
    }

    private static Map<String, String> errors(String connectorClass, Map<String, String> config) {
        JsonNode answer = stack.connect().rest().validate(connectorClass, config);
        String text = answer.toString();
        for (String secret : List.of(CH_PASSWORD, PG_PASSWORD, WRONG)) {
            assertFalse(text.contains(secret), "the answer holds a password: " + text);
        }
        Map<String, String> byField = new HashMap<>();
        for (String e : ConnectRestClient.validationErrors(answer)) {
            assertFalse(e.contains(CH_PASSWORD) || e.contains(PG_PASSWORD) || e.contains(WRONG), "an error holds a password: " + e);
            int colon = e.indexOf(": ");
            byField.merge(e.substring(0, colon), e.substring(colon + 2), (a, b) -> a + " | " + b);
        }
        return byField;
    }

    @Test
    void theSinkValidatesCleanlyWhenClickHouseTheStageAndTheCatalogAcceptIt() {
        assertEquals(Map.of(), errors(SINK, sink()));
    }

    @Test
    void aWrongClickHousePasswordIsAnAuthenticationFailureOnClickHousePassword() {
        Map<String, String> config = sink();
        config.put("clickhouse.password", WRONG);
        Map<String, String> errors = errors(SINK, config);
        assertTrue(errors.getOrDefault("clickhouse.password", "").startsWith("authentication failed: ClickHouse at "),
                errors.toString());
        assertFalse(errors.containsKey("clickhouse.url"), "the URL is not at fault: " + errors);
    }

    @Test
    void anUnreachableClickHouseIsANetworkProblemOnClickHouseUrl() {
        Map<String, String> config = sink();
        config.put("clickhouse.url", "http://127.0.0.1:" + StackPaths.freePort());
        Map<String, String> errors = errors(SINK, config);
        assertTrue(errors.getOrDefault("clickhouse.url", "").startsWith("network: cannot reach ClickHouse at "), errors.toString());
        assertFalse(errors.containsKey("clickhouse.password"), errors.toString());
    }

    @Test
    void aMissingDatabaseIsReportedOnClickHouseDatabase() {
        Map<String, String> config = sink();
        config.put("clickhouse.database", "no_such_database_" + System.nanoTime());
        Map<String, String> errors = errors(SINK, config);
        assertTrue(errors.getOrDefault("clickhouse.database", "").contains("does not exist"), errors.toString());
    }

    @Test
    void anUnreachableStageStoreIsANetworkProblemOnItsEndpoint() {
        Map<String, String> config = sink();
        config.put("stage.s3.endpoint", "http://127.0.0.1:" + StackPaths.freePort());
        Map<String, String> errors = errors(SINK, config);
        assertTrue(errors.getOrDefault("stage.s3.endpoint", "").startsWith("network: cannot reach the object store"), errors.toString());
    }

    @Test
    void theStageIsCheckedEvenWhenClickHouseRefusesTheUser() {
        Map<String, String> config = sink();
        config.put("clickhouse.password", WRONG);
        config.put("stage.s3.endpoint", "http://127.0.0.1:" + StackPaths.freePort());
        Map<String, String> errors = errors(SINK, config);
        assertTrue(errors.getOrDefault("clickhouse.password", "").startsWith("authentication failed: "), errors.toString());
        assertTrue(errors.getOrDefault("stage.s3.endpoint", "").startsWith("network: cannot reach the object store"), errors.toString());
    }

    @Test
    void aWrongCatalogPasswordIsAnAuthenticationFailureOnCatalogPasswordForEveryConnector() {
        Map<String, String> sink = sink();
        Map<String, String> pg = SourceConfigs.pgPipeline(stack, catalogUrl, "validate_source", "validate_pub", "validate");
        pg.put("name", "validate-pg");
        Map<String, String> bq = SourceConfigs.queryCdc(stack, catalogUrl, "validate_dataset", "items:updated_at", 1, "validate");
        bq.put("name", "validate-bq");
        for (Map<String, String> config : List.of(sink, pg, bq)) {
            config.put("catalog.user", PG_ROLE);
            config.put("catalog.password", WRONG);
            Map<String, String> errors = errors(config.get("connector.class"), config);
            assertTrue(errors.getOrDefault("catalog.password", "").startsWith("authentication failed: the catalog refused the password"
                    + " of user '" + PG_ROLE + "'"), config.get("connector.class") + ": " + errors);
            assertFalse(errors.containsKey("catalog.jdbc.url"), config.get("connector.class") + ": " + errors);

            // the right password: the role may log in, but not create the catalog's tables (catalog.migrate=true)
            config.put("catalog.password", PG_PASSWORD);
            errors = errors(config.get("connector.class"), config);
            assertFalse(errors.containsKey("catalog.password"), config.get("connector.class") + ": " + errors);
            assertTrue(errors.getOrDefault("catalog.user", "").startsWith("permission denied: user '" + PG_ROLE + "' may not create"),
                    config.get("connector.class") + ": " + errors);
        }
    }

    @Test
    void aWrongSourcePasswordIsAnAuthenticationFailureOnDatabasePassword() {
        Map<String, String> pg = SourceConfigs.pgPipeline(stack, catalogUrl, "validate_source", "validate_pub", "validate");
        pg.put("name", "validate-pg");
        pg.put("database.user", PG_ROLE);
        pg.put("database.password", WRONG);
        Map<String, String> errors = errors(pg.get("connector.class"), pg);
        assertTrue(errors.getOrDefault("database.password", "").startsWith("authentication failed at "), errors.toString());
        assertFalse(errors.containsKey("database.host"), errors.toString());
    }
    /**
     * A dead letter queue topic the sink consumes itself would hand every record it reports back to it: refused on
     * errors.deadletterqueue.topic.name, for a name in topics and one that topics.regex matches; a topic outside passes.
     */
    @Test
    void aDeadLetterTopicTheSinkConsumesIsRefused() {
        Map<String, String> config = sink();
        config.put("errors.tolerance", "all");
        config.put("errors.deadletterqueue.topic.name", "validate.items");
        Map<String, String> errors = errors(SINK, config);
        assertTrue(errors.getOrDefault("errors.deadletterqueue.topic.name", "").contains("is one of the sink's topics"),
                errors.toString());
        config.remove("topics");
        config.put("topics.regex", "validate\\..*");
        config.put("errors.deadletterqueue.topic.name", "validate.dlq");
        errors = errors(SINK, config);
        assertTrue(errors.getOrDefault("errors.deadletterqueue.topic.name", "").contains("matches the sink's topics.regex"),
                errors.toString());
        config.put("errors.deadletterqueue.topic.name", "dead.validate");
        assertEquals(Map.of(), errors(SINK, config));
    }

    /**
     * Issue 35 item 4: with errors.tolerance=all Connect reports a record it failed to send as acknowledged
     * ({@code commitRecord(record, null)}), and the flow's position, then the slot, would move past data that is not in
     * Kafka. The setting is refused on errors.tolerance, through the worker's validate endpoint and on a deploy.
     */
    @Test
    void errorsToleranceAllIsRefusedOnThePostgresSource() {
        Map<String, String> pg = SourceConfigs.pgPipeline(stack, catalogUrl, "validate_source", "validate_pub", "validate");
        pg.put("name", "validate-pg-tolerance");
        pg.put("errors.tolerance", "all");
        Map<String, String> errors = errors(pg.get("connector.class"), pg);
        assertTrue(errors.getOrDefault("errors.tolerance", "").contains("errors.tolerance=all")
                && errors.get("errors.tolerance").contains("none"), errors.toString());
        ConnectRestClient.ConnectRestException refused = org.junit.jupiter.api.Assertions.assertThrows(
                ConnectRestClient.ConnectRestException.class, () -> stack.connect().rest().putConfig("validate-pg-tolerance", pg));
        assertTrue(refused.getMessage().contains("errors.tolerance"), refused.getMessage());
        pg.put("errors.tolerance", "none");
        assertFalse(errors(pg.get("connector.class"), pg).containsKey("errors.tolerance"));
    }
}
