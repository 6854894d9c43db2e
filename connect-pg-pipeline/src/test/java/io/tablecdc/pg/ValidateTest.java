package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigValue;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** {@link PgPipelineSourceConnector#validate} against a real PostgreSQL: each problem on its field. */
class ValidateTest {
    private static PgoutputServer pg;

    @BeforeAll
    static void start() throws Exception {
        pg = PgoutputServer.start("validate-server");
        pg.execute("CREATE TABLE IF NOT EXISTS public.v_orders (id int PRIMARY KEY)",
                "DROP PUBLICATION IF EXISTS v_pub", "CREATE PUBLICATION v_pub FOR TABLE public.v_orders",
                "DROP PUBLICATION IF EXISTS v_empty", "CREATE PUBLICATION v_empty",
                "DROP ROLE IF EXISTS v_plain", "CREATE ROLE v_plain LOGIN");
    }

    @AfterAll
    static void stop() throws Exception {
        pg.close();
    }

    private static Map<String, String> config() {
        Map<String, String> props = new HashMap<>();
        props.put("name", "v-flow");
        props.put("database.host", "127.0.0.1");
        props.put("database.port", Integer.toString(pg.port()));
        props.put("database.dbname", PgoutputServer.DATABASE);
        props.put("database.user", "postgres");
        props.put("database.sslmode", "disable");
        props.put("publication.name", "v_pub");
        props.put("topic.prefix", "pg");
        // validate() checks the catalog too: the same server serves as the catalog
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:" + pg.port() + "/" + PgoutputServer.DATABASE);
        props.put("catalog.user", "postgres");
        return props;
    }

    private static Map<String, List<String>> errors(Map<String, String> props) {
        Config result = new PgPipelineSourceConnector().validate(props);
        Map<String, List<String>> errors = new HashMap<>();
        for (ConfigValue value : result.configValues()) {
            if (!value.errorMessages().isEmpty()) {
                errors.put(value.name(), new ArrayList<>(value.errorMessages()));
            }
        }
        return errors;
    }

    @Test
    void aGoodConfigHasNoErrors() {
        assertEquals(Map.of(), errors(config()));
    }

    @Test
    void recreatingAnInvalidatedSlotNeedsEveryTableCopied() {
        Map<String, String> props = config();
        props.put("invalidated.slot.behavior", "recreate");
        props.put("table.sync.copy", "none");
        String error = String.join("; ", errors(props).get("invalidated.slot.behavior"));
        assertTrue(error.contains("invalidated.slot.behavior=recreate copies every table again from the new slot,"
                + " but table.sync.copy is 'none'") && error.contains("Set table.sync.copy=all"), error);
        props.put("table.sync.copy", "all");
        props.put("tasks.max", "2");
        assertEquals(Map.of(), errors(props));
    }

    @Test
    void failoverSlotsAreAcceptedOnPostgres17() {
        // the only server at hand is 17: the refusal for older servers is unit-tested in FlowRefusalsTest
        Map<String, String> props = config();
        props.put("slot.failover", "true");
        assertEquals(Map.of(), errors(props));
    }

    @Test
    void anUnreachableCatalogIsANetworkProblemOnItsUrl() {
        Map<String, String> props = config();
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:1/unused");
        Map<String, List<String>> errors = errors(props);
        assertEquals(List.of("catalog.jdbc.url"), List.copyOf(errors.keySet()), errors.toString());
        assertTrue(errors.get("catalog.jdbc.url").get(0).startsWith("network: cannot reach the catalog: "), errors.toString());
    }

    @Test
    void publicationProblemsAreOnThePublication() {
        Map<String, String> props = config();
        props.put("publication.name", "v_missing");
        String error = String.join("; ", errors(props).get("publication.name"));
        assertTrue(error.contains("publication v_missing does not exist"), error);
        props.put("publication.name", "v_empty");
        error = String.join("; ", errors(props).get("publication.name"));
        assertTrue(error.contains("has no tables"), error);
    }

    @Test
    void aUserWithoutReplicationIsReportedOnTheUser() {
        Map<String, String> props = config();
        props.put("database.user", "v_plain");
        String error = String.join("; ", errors(props).get("database.user"));
        assertTrue(error.contains("may not replicate"), error);
    }

    @Test
    void copyWithOneTaskIsAcceptedAndPartitionsAreRefusedOnTheirField() {
        Map<String, String> props = config();
        props.put("table.sync.copy", "except:public.v_orders");
        props.put("tasks.max", "1");
        props.put("topic.creation.default.partitions", "3");
        Map<String, List<String>> errors = errors(props);
        // one task applies and copies in turn (ApplyAndCopyTask)
        assertEquals(null, errors.get("tasks.max"), errors.toString());
        assertTrue(String.join("; ", errors.get("topic.creation.default.partitions")).contains("one partition"), errors.toString());
    }

    @Test
    void anUnknownDatabaseIsReportedOnTheDatabase() {
        Map<String, String> props = config();
        props.put("database.dbname", "no_such_db");
        String error = String.join("; ", errors(props).get("database.dbname"));
        assertTrue(error.contains("cannot connect"), error);
    }
}
