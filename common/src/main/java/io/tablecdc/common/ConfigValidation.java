package io.tablecdc.common;

import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.common.config.types.Password;

import io.tablecdc.catalog.CatalogConfig;
import io.tablecdc.catalog.CatalogConnectionCheck;

/** Helpers for connectors' {@code validate()}: cross-field and reachability errors go on the field they concern. */
public final class ConfigValidation {
    /** Connect's setting of the partition count of the topics a source's worker creates. */
    public static final String TOPIC_PARTITIONS = "topic.creation.default.partitions";

    private ConfigValidation() {
    }

    /**
     * A source's table topics have one partition each, which keeps a table's changes in order: an error on
     * {@value #TOPIC_PARTITIONS} when the connector sets it to anything else.
     */
    public static void checkSinglePartition(Map<String, String> connectorConfigs, Config result, Map<String, ConfigValue> values) {
        String partitions = connectorConfigs.get(TOPIC_PARTITIONS);
        if (partitions != null && !partitions.trim().equals("1")) {
            addError(result, values, TOPIC_PARTITIONS, TOPIC_PARTITIONS + " is " + partitions
                    + "; a table's topic must have one partition to keep its changes in order");
        }
    }

    /**
     * A recommender that shows a key only while {@code when} holds for the parsed value of {@code key} (e.g. the
     * object store's keys by the stage URI's scheme), so that {@code validate()} and tools built on it (Connect's
     * REST API, UIs) mark the others not visible. It recommends no values.
     */
    public static ConfigDef.Recommender visibleWhen(String key, Predicate<Object> when) {
        return new ConfigDef.Recommender() {
            @Override
            public List<Object> validValues(String name, Map<String, Object> parsedConfig) {
                return List.of();
            }

            @Override
            public boolean visible(String name, Map<String, Object> parsedConfig) {
                return when.test(parsedConfig.get(key));
            }
        };
    }

    /** A predicate for {@link #visibleWhen}: the value is text starting with {@code prefix}, in any case. */
    public static Predicate<Object> startsWithIgnoringCase(String prefix) {
        return value -> value instanceof String text && text.trim().regionMatches(true, 0, prefix, 0, prefix.length());
    }

    /** A predicate for {@link #visibleWhen}: the value is text that is not blank. */
    public static Predicate<Object> notBlank() {
        return value -> value instanceof String text && !text.isBlank();
    }

    /** A predicate for {@link #visibleWhen}: the value is unset, blank text or a blank password. */
    public static Predicate<Object> blank() {
        return value -> value == null || (value instanceof String text && text.isBlank())
                || (value instanceof Password password && (password.value() == null || password.value().isBlank()));
    }

    /** A predicate for {@link #visibleWhen}: the value is text equal to one of {@code choices}, in any case. */
    public static Predicate<Object> oneOfIgnoringCase(String... choices) {
        return value -> value instanceof String text && java.util.Arrays.stream(choices).anyMatch(text.trim()::equalsIgnoreCase);
    }

    /** The validation result's values by config key. */
    public static Map<String, ConfigValue> byName(Config result) {
        Map<String, ConfigValue> values = new HashMap<>();
        for (ConfigValue value : result.configValues()) {
            values.put(value.name(), value);
        }
        return values;
    }

    /** A connector's rules over its whole parsed configuration, each problem added to its field of {@code result}. */
    public interface Rules<T> {
        void check(T config, Config result, Map<String, ConfigValue> values);
    }

    /**
     * A connector's {@code validate()}: Connect's check of each field ({@code fieldChecks}, {@code super.validate}),
     * then, only when every field passed and {@link #parse} parsed the whole configuration, the connector's own
     * {@code rules} on it.
     *
     * @return {@code fieldChecks}, with every problem found on its field
     */
    public static <T> Config validate(Config fieldChecks, java.util.function.Supplier<T> parse, String fallback,
                                      Rules<T> rules) {
        Map<String, ConfigValue> values = byName(fieldChecks);
        T config = parse(fieldChecks, values, parse, fallback);
        if (config != null) {
            rules.check(config, fieldChecks, values);
        }
        return fieldChecks;
    }

    /**
     * The start of a connector's {@code validate()}: {@code fieldChecks} is Connect's check of each field
     * ({@code super.validate}); only when every field passed is the whole configuration parsed by {@code parse}, and a
     * rule across fields that fails goes on the field its message names ({@link #fieldOf}), else on {@code fallback}.
     *
     * @return the parsed configuration, or null when a check failed (the result then says why)
     */
    public static <T> T parse(Config fieldChecks, Map<String, ConfigValue> values, java.util.function.Supplier<T> parse,
                              String fallback) {
        if (!noErrors(values)) {
            return null;
        }
        try {
            return parse.get();
        } catch (ConfigException e) {
            addError(fieldChecks, values, fieldOf(e, values.keySet(), fallback), e.getMessage());
            return null;
        }
    }

    /** Whether no field has an error yet (only then are cross-field and reachability checks worth running). */
    public static boolean noErrors(Map<String, ConfigValue> values) {
        return values.values().stream().allMatch(v -> v.errorMessages().isEmpty());
    }

    /**
     * Checks the catalog ({@link CatalogConnectionCheck}) and adds its problem to its field of {@code result}; returns
     * whether there was none.
     */
    public static boolean checkCatalog(CatalogConfig.CatalogSettings settings, Config result,
                                       Map<String, ConfigValue> values) {
        CatalogConnectionCheck.Problem problem = CatalogConnectionCheck.check(settings);
        if (problem == null) {
            return true;
        }
        addError(result, values, problem.field(), problem.message());
        return false;
    }

    /** Adds {@code message} to field {@code name} of the result, adding the field when the result has none by that name. */
    public static void addError(Config result, Map<String, ConfigValue> values, String name, String message) {
        ConfigValue value = values.get(name);
        if (value == null) {
            value = new ConfigValue(name);
            values.put(name, value);
            result.configValues().add(value);
        }
        value.addErrorMessage(message);
    }

    /**
     * The field a cross-field rule failed on: Kafka's {@code ConfigException(name, value, message)} says "Invalid value
     * … for configuration {@code name}: …"; a message of a rule of our own names the key as "configuration
     * {@code name} …". {@code fallback} when the message names none of {@code names}.
     */
    public static String fieldOf(ConfigException e, Collection<String> names, String fallback) {
        String message = e.getMessage() == null ? "" : e.getMessage();
        String marker = " for configuration ";
        int at = message.indexOf(marker);
        if (at >= 0) {
            String rest = message.substring(at + marker.length());
            int end = rest.indexOf(':');
            String name = end < 0 ? rest.trim() : rest.substring(0, end).trim();
            if (names.contains(name)) {
                return name;
            }
        }
        for (String name : names) {
            if (message.contains("configuration " + name + " ")) {
                return name;
            }
        }
        return fallback;
    }
}
