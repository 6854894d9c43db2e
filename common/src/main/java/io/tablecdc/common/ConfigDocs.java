package io.tablecdc.common;

import java.util.List;

import org.apache.kafka.common.config.ConfigDef;

/** Renders a connector's {@link ConfigDef} as the Markdown configuration reference in {@code docs/}. */
public final class ConfigDocs {
    private ConfigDocs() {
    }

    /** A Markdown section per group, a row per key: name, type, default, valid values, importance, meaning. */
    public static String markdown(String title, String intro, ConfigDef def) {
        StringBuilder out = new StringBuilder();
        out.append("# ").append(title).append("\n\n");
        out.append("<!-- generated from the connector's ConfigDef by ConfigDocsTest; do not edit by hand -->\n\n");
        out.append(intro).append("\n");
        String group = null;
        List<ConfigDef.ConfigKey> keys = def.configKeys().values().stream()
                .sorted((a, b) -> {
                    int g = Integer.compare(def.groups().indexOf(a.group), def.groups().indexOf(b.group));
                    return g != 0 ? g : Integer.compare(a.orderInGroup, b.orderInGroup);
                })
                .toList();
        for (ConfigDef.ConfigKey key : keys) {
            String keyGroup = key.group == null ? "Other" : key.group;
            if (!keyGroup.equals(group)) {
                group = keyGroup;
                out.append("\n## ").append(group).append("\n\n");
                out.append("| key | type | default | valid values | importance | description |\n");
                out.append("|---|---|---|---|---|---|\n");
            }
            out.append("| `").append(key.name).append("` | ").append(key.type.name().toLowerCase())
                    .append(" | ").append(defaultText(key))
                    .append(" | ").append(key.validator == null ? "" : cell(key.validator.toString()))
                    .append(" | ").append(key.importance.name().toLowerCase())
                    .append(" | ").append(cell(key.documentation))
                    .append(" |\n");
        }
        return out.toString();
    }

    /** Keys without documentation or group: each connector's tests require this list to be empty. */
    public static List<String> undocumented(ConfigDef def) {
        return def.configKeys().values().stream()
                .filter(k -> k.documentation == null || k.documentation.isBlank() || k.group == null)
                .map(k -> k.name)
                .toList();
    }

    /**
     * Returns the reference as committed at {@code doc} and rewrites the file with {@code generated} when they
     * differ, so that a test comparing the two fails once and the regenerated file can be committed.
     */
    public static String committedThenRefreshed(java.nio.file.Path doc, String generated) throws java.io.IOException {
        String committed = java.nio.file.Files.exists(doc) ? java.nio.file.Files.readString(doc) : "";
        if (!generated.equals(committed)) {
            java.nio.file.Files.createDirectories(doc.getParent());
            java.nio.file.Files.writeString(doc, generated);
        }
        return committed;
    }

    /**
     * A plugin's configuration reference: the Markdown file {@code doc} rendered from {@code def} under {@code title}
     * and {@code intro}, and the keys that hold secrets. Each plugin's {@code ConfigDocsTest} requires
     * {@link #problems()} to be empty.
     */
    public record Reference(String title, String intro, ConfigDef def, java.nio.file.Path doc, java.util.Set<String> secrets) {
        /**
         * What is wrong with the plugin's configuration reference: keys without documentation or group, secrets that
         * are not of type {@code PASSWORD} (so Connect would show them), and a committed reference that differs from
         * the rendered one, which is then rewritten (the test fails once; commit the regenerated file).
         */
        public List<String> problems() throws java.io.IOException {
            List<String> problems = new java.util.ArrayList<>();
            List<String> undocumented = undocumented(def);
            if (!undocumented.isEmpty()) {
                problems.add("keys without documentation or group: " + undocumented);
            }
            for (String secret : new java.util.TreeSet<>(secrets)) {
                ConfigDef.ConfigKey key = def.configKeys().get(secret);
                if (key == null || key.type != ConfigDef.Type.PASSWORD) {
                    problems.add("secret " + secret + " is " + (key == null ? "not a key" : "of type " + key.type) + ", not PASSWORD");
                }
            }
            String generated = markdown(title, intro, def);
            if (!generated.equals(committedThenRefreshed(doc, generated))) {
                problems.add(doc + " was out of date and has been regenerated; commit it");
            }
            return problems;
        }
    }

    private static String defaultText(ConfigDef.ConfigKey key) {
        if (!key.hasDefault()) {
            return "(required)";
        }
        if (key.type == ConfigDef.Type.PASSWORD) {
            return "(secret)";
        }
        Object value = key.defaultValue;
        if (value == null) {
            return "null";
        }
        String text = value instanceof List<?> list ? String.join(",", list.stream().map(String::valueOf).toList()) : value.toString();
        return text.isEmpty() ? "\"\"" : "`" + cell(text) + "`";
    }

    private static String cell(String text) {
        return text == null ? "" : text.replace("|", "\\|").replace("\n", " ");
    }
}
