package io.tablecdc.pg.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

import io.tablecdc.common.ConfigDocs;

class ConfigDocsTest {
    private static final ConfigDocs.Reference REFERENCE = new ConfigDocs.Reference("Postgres pipeline source configuration",
            "Connector class: `io.tablecdc.pg.PgPipelineSourceConnector`. See ../pg-pipeline.md.\n", PgPipelineConfig.CONFIG_DEF,
            Path.of("../docs/config/pg-pipeline.md"), Set.of("database.password", "catalog.password"));

    /** Every key documented and grouped, secrets as passwords; regenerates the reference when it differs, then fails. */
    @Test
    void configurationReferenceIsCompleteAndUpToDate() throws Exception {
        assertEquals(List.of(), REFERENCE.problems());
    }

    @Test
    void copyModesSayWhichTablesAreCopied() {
        Map<String, String> props = minimal();
        PgPipelineConfig config = new PgPipelineConfig(props);
        // copying every table is the default, streaming only is one setting away
        assertEquals(PgPipelineConfig.CopyMode.ALL, config.copyMode());
        assertTrue(config.copies("public.orders"));
        assertEquals(null, config.copyOnly());
        assertEquals(java.util.Set.of(), config.copyExcept());
        assertEquals("pg.public.orders", config.topic("public.orders"));
        props.put("table.sync.copy", "none");
        assertFalse(new PgPipelineConfig(props).copies("public.orders"));
        assertEquals(java.util.Set.of(), new PgPipelineConfig(props).copyOnly(), "none: a claim matches no table");
        props.put("table.sync.copy", "only:public.orders, public.Items");
        config = new PgPipelineConfig(props);
        assertEquals(PgPipelineConfig.CopyMode.ONLY, config.copyMode());
        assertTrue(config.copies("public.orders"));
        assertTrue(config.copies("public.Items"));
        assertFalse(config.copies("public.items"));
        assertEquals(java.util.Set.of("public.orders", "public.Items"), config.copyOnly());
        props.put("table.sync.copy", "except:public.orders");
        config = new PgPipelineConfig(props);
        assertFalse(config.copies("public.orders"));
        assertTrue(config.copies("public.items"));
        props.put("table.sync.copy", "some");
        ConfigException e = assertThrows(ConfigException.class, () -> new PgPipelineConfig(props));
        assertTrue(e.getMessage().contains("table.sync.copy"), e.getMessage());
    }

    @Test
    void secretsNeverShowInToString() {
        Map<String, String> props = minimal();
        props.put("database.password", "s3cr3t-value");
        props.put("catalog.password", "an0ther-secret");
        PgPipelineConfig config = new PgPipelineConfig(props);
        String text = config.values().toString() + config.catalog() + config.jdbcUrl();
        assertFalse(text.contains("s3cr3t-value") || text.contains("an0ther-secret"), text);
    }

    static Map<String, String> minimal() {
        Map<String, String> props = new HashMap<>();
        props.put("database.host", "127.0.0.1");
        props.put("database.dbname", "shop");
        props.put("database.user", "replicator");
        props.put("publication.name", "shop_pub");
        props.put("topic.prefix", "pg");
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:5432/catalog");
        return props;
    }
}
