package io.tablecdc.pg.config;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The topic of a table: {@code <topic.prefix>.<schema.table>} when that is a valid Kafka topic name (only
 * {@code A-Z a-z 0-9 . _ -}, at most {@value #MAX_LENGTH} characters). Otherwise every other character becomes
 * {@code _}, the result is cut so that the whole name fits, and {@code _} plus the first 12 hex digits of the SHA-256
 * of the table's name (UTF-8) are appended: {@code my schema.my table} under prefix {@code pg} goes to
 * {@code pg.my_schema.my_table_<12 hex>}. The rule is fixed (the same table always maps to the same topic) and
 * names that were valid keep their topic.
 *
 * <p>Kafka refuses a topic whose name equals an existing one's once {@code .} and {@code _} are taken as the same
 * character (they clash in its metric names): {@link #collisions} finds such pairs among a flow's tables.
 */
public final class TopicNames {
    /** Kafka's limit on a topic name's length. */
    public static final int MAX_LENGTH = 249;
    private static final int HASH_HEX_DIGITS = 12;

    private TopicNames() {
    }

    private static boolean legal(int c) {
        return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-';
    }

    /** The topic of {@code table} ({@code schema.table}) under {@code prefix} (itself a valid topic name). */
    public static String topic(String prefix, String table) {
        String plain = prefix + "." + table;
        if (plain.length() <= MAX_LENGTH && table.codePoints().allMatch(TopicNames::legal)) {
            return plain;
        }
        StringBuilder escaped = new StringBuilder();
        table.codePoints().forEach(c -> escaped.append(legal(c) ? (char) c : '_'));
        String suffix = "_" + hash(table);
        int room = MAX_LENGTH - prefix.length() - 1 - suffix.length();
        if (escaped.length() > room) {
            escaped.setLength(Math.max(0, room));
        }
        return prefix + "." + escaped + suffix;
    }

    private static String hash(String table) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(table.getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(digest).substring(0, HASH_HEX_DIGITS);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** What Kafka compares to find clashing topics: {@code .} and {@code _} as one character. */
    public static String clashKey(String topic) {
        return topic.replace('.', '_');
    }

    /**
     * The groups of tables (two or more each) whose topics under {@code prefix} are the same or clash in Kafka
     * ({@code .} and {@code _} the same), each as {@code table → topic} in the given order.
     */
    public static List<Map<String, String>> collisions(String prefix, Collection<String> tables) {
        Map<String, Map<String, String>> byKey = new LinkedHashMap<>();
        for (String table : tables) {
            String topic = topic(prefix, table);
            byKey.computeIfAbsent(clashKey(topic), k -> new LinkedHashMap<>()).put(table, topic);
        }
        List<Map<String, String>> out = new ArrayList<>();
        for (Map<String, String> group : byKey.values()) {
            if (group.size() > 1) {
                out.add(group);
            }
        }
        return out;
    }

    /** One collision group in words, for errors: {@code a.b (topic pg.a.b) and a_b (topic pg.a_b)}. */
    public static String describe(Map<String, String> group) {
        List<String> parts = new ArrayList<>();
        group.forEach((table, topic) -> parts.add(table + " (topic " + topic + ")"));
        return String.join(" and ", parts);
    }
}
