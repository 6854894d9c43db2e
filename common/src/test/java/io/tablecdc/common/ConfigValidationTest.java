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

    @Test
    void theWholeConfigurationIsParsedOnlyAfterEveryFieldPassedAndARuleAcrossFieldsFailsOnTheFieldItNames() {
        Config result = new Config(new ArrayList<>(List.of(new ConfigValue("a.url"), new ConfigValue("b.mode"))));
        Map<String, ConfigValue> values = ConfigValidation.byName(result);
        String parsed = ConfigValidation.parse(result, values, () -> {
            throw new org.apache.kafka.common.config.ConfigException("b.mode", "x", "needs a.url");
        }, "a.url");
        assertEquals(null, parsed);
        assertEquals(List.of(), values.get("a.url").errorMessages());
        assertEquals(List.of("Invalid value x for configuration b.mode: needs a.url"), values.get("b.mode").errorMessages());
        Object notParsed = ConfigValidation.parse(result, values, () -> {
            throw new AssertionError("not parsed while a field has an error");
        }, "a.url");
        assertEquals(null, notParsed);

        Config clean = new Config(new ArrayList<>(List.of(new ConfigValue("a.url"))));
        assertEquals("parsed", ConfigValidation.parse(clean, ConfigValidation.byName(clean), () -> "parsed", "a.url"));
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
