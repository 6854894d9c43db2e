package io.tablecdc.common;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigValue;
import org.junit.jupiter.api.Test;

class ConfigValidationTest {
    @Test
    void aSourceTopicWithMoreThanOnePartitionIsAnErrorOnThatKey() {
        for (String ok : new String[] {null, "1", " 1 "}) {
            assertEquals(List.of(), errors(ok), String.valueOf(ok));
        }
        assertEquals(List.of(ConfigValidation.TOPIC_PARTITIONS + ": " + ConfigValidation.TOPIC_PARTITIONS
                + " is 3; a table's topic must have one partition to keep its changes in order"), errors("3"));
    }

    private static List<String> errors(String partitions) {
        Config result = new Config(new ArrayList<>());
        Map<String, ConfigValue> values = ConfigValidation.byName(result);
        Map<String, String> configs = partitions == null ? Map.of() : Map.of(ConfigValidation.TOPIC_PARTITIONS, partitions);
        ConfigValidation.checkSinglePartition(configs, result, values);
        List<String> errors = new ArrayList<>();
        for (ConfigValue value : result.configValues()) {
            value.errorMessages().forEach(m -> errors.add(value.name() + ": " + m));
        }
        return errors;
    }
}
