package io.tablecdc.common;

import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigValue;

/** Helpers for connectors' {@code validate()}: cross-field and reachability errors go on the field they concern. */
public final class ConfigValidation {
    private ConfigValidation() {
    }

    /** The validation result's values by config key. */
    public static Map<String, ConfigValue> byName(Config result) {
        Map<String, ConfigValue> values = new HashMap<>();
        for (ConfigValue value : result.configValues()) {
            values.put(value.name(), value);
        }
        return values;
    }

    /** Whether no field has an error yet (only then are cross-field and reachability checks worth running). */
    public static boolean noErrors(Map<String, ConfigValue> values) {
        return values.values().stream().allMatch(v -> v.errorMessages().isEmpty());
    }
}
