package io.tablecdc.pg.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

class PgPipelineConfigTest {
    private static Map<String, String> props() {
        Map<String, String> props = new HashMap<>();
        props.put("database.host", "127.0.0.1");
        props.put("database.dbname", "shop");
        props.put("database.user", "replicator");
        props.put("publication.name", "shop_pub");
        props.put("topic.prefix", "pg");
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:1/none");
        return props;
    }

    @Test
    void maxUnnormalizedBatchesDefaultsTo100AndRefusesValuesBelowOne() {
        assertEquals(100, new PgPipelineConfig(props()).maxUnnormalizedBatches());
        Map<String, String> one = props();
        one.put("max.unnormalized.batches", "1");
        assertEquals(1, new PgPipelineConfig(one).maxUnnormalizedBatches());
        for (String bad : new String[] {"0", "-3", "1000001", "many"}) {
            Map<String, String> props = props();
            props.put("max.unnormalized.batches", bad);
            ConfigException e = assertThrows(ConfigException.class, () -> new PgPipelineConfig(props), bad);
            assertTrue(e.getMessage().contains("max.unnormalized.batches"), e.getMessage());
        }
    }

    @Test
    void copyPauseMaxDefaultsToTenMinutesAndRefusesValuesBelowASecond() {
        assertEquals(java.time.Duration.ofMinutes(10), new PgPipelineConfig(props()).copyPauseMax());
        Map<String, String> short_ = props();
        short_.put("copy.pause.max.ms", "3000");
        assertEquals(java.time.Duration.ofSeconds(3), new PgPipelineConfig(short_).copyPauseMax());
        for (String bad : new String[] {"0", "999", "-1", "604800001", "long"}) {
            Map<String, String> props = props();
            props.put("copy.pause.max.ms", bad);
            ConfigException e = assertThrows(ConfigException.class, () -> new PgPipelineConfig(props), bad);
            assertTrue(e.getMessage().contains("copy.pause.max.ms"), e.getMessage());
        }
    }
}
