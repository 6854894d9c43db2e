package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

import io.tablecdc.e2e.stack.StackPaths;

/**
 * The user docs name only configuration keys and catalog migrations that exist. Keys are checked against the
 * generated references in {@code docs/config/} (which each connector module's {@code ConfigDocsTest} keeps equal to
 * its {@code ConfigDef}); migrations against the files in {@code catalog-sql}. No stack needed.
 */
class DocsReferencesTest {
    private static final Path ROOT = StackPaths.projectRoot();
    /** A backticked key, optionally with a value: {@code `catalog.user`}, {@code `table.sync.copy=none`}, {@code `stage.s3.*`}. */
    private static final Pattern BACKTICKED_KEY = Pattern.compile("`([a-z][a-z0-9_-]*(?:\\.[a-z0-9_*-]+)+)(?:=[^`]*)?`");
    /** A migration file name, or a version in parentheses as the catalog's column tables give it: {@code (V3)}. */
    private static final Pattern MIGRATION = Pattern.compile("\\bV(\\d+)(__[A-Za-z0-9_]+\\.sql)|\\(V(\\d+)\\)");
    /** Connect's own connector settings that the docs may name next to tablecdc's. */
    private static final List<String> CONNECT_PREFIXES = List.of("topic.creation.", "errors.", "transforms.", "predicates.",
            "consumer.override.", "producer.override.", "admin.override.", "exactly.once.", "offsets.storage.", "header.converter");

    @Test
    void everyDocumentedConfigKeyExists() throws IOException {
        Set<String> keys = configKeys();
        Set<String> prefixes = new TreeSet<>();
        keys.forEach(k -> prefixes.add(k.substring(0, k.indexOf('.') < 0 ? k.length() : k.indexOf('.'))));
        List<String> missing = new ArrayList<>();
        for (Path doc : userDocs()) {
            Matcher m = BACKTICKED_KEY.matcher(Files.readString(doc, StandardCharsets.UTF_8));
            while (m.find()) {
                String key = m.group(1);
                if (!prefixes.contains(key.substring(0, key.indexOf('.'))) || CONNECT_PREFIXES.stream().anyMatch(key::startsWith)) {
                    continue; // not a tablecdc key (a table name, a header, a class, Connect's own settings)
                }
                boolean exists = key.endsWith(".*")
                        ? keys.stream().anyMatch(k -> k.startsWith(key.substring(0, key.length() - 1)))
                        : keys.contains(key);
                if (!exists) {
                    missing.add(ROOT.relativize(doc) + ": " + key);
                }
            }
        }
        assertTrue(missing.isEmpty(), "the docs name configuration keys no connector has (see docs/config/): " + missing);
    }

    @Test
    void everyDocumentedMigrationExists() throws IOException {
        Path dir = ROOT.resolve("catalog-sql/src/main/resources/io/tablecdc/catalog/migration");
        Set<String> files = new TreeSet<>();
        try (Stream<Path> s = Files.list(dir)) {
            s.forEach(p -> files.add(p.getFileName().toString()));
        }
        assertFalse(files.isEmpty(), "no migrations in " + dir);
        List<String> missing = new ArrayList<>();
        for (Path doc : userDocs()) {
            Matcher m = MIGRATION.matcher(Files.readString(doc, StandardCharsets.UTF_8));
            while (m.find()) {
                String version = m.group(1) != null ? m.group(1) : m.group(3);
                String name = m.group(2) == null ? null : "V" + version + m.group(2);
                boolean exists = name != null ? files.contains(name) : files.stream().anyMatch(f -> f.startsWith("V" + version + "__"));
                if (!exists) {
                    missing.add(ROOT.relativize(doc) + ": " + m.group());
                }
            }
        }
        assertTrue(missing.isEmpty(), "the docs name catalog migrations that do not exist (" + files + "): " + missing);
    }

    /** Every key of the generated configuration references. */
    private static Set<String> configKeys() throws IOException {
        Set<String> keys = new TreeSet<>();
        Pattern row = Pattern.compile("^\\| `([^`]+)` \\|", Pattern.MULTILINE);
        try (Stream<Path> s = Files.list(ROOT.resolve("docs/config"))) {
            for (Path p : s.filter(p -> p.toString().endsWith(".md")).toList()) {
                Matcher m = row.matcher(Files.readString(p, StandardCharsets.UTF_8));
                while (m.find()) {
                    keys.add(m.group(1));
                }
            }
        }
        assertFalse(keys.isEmpty(), "no keys found in docs/config/");
        return keys;
    }

    /** The README, the user docs (not the generated references nor the benchmark report), the examples' and docker's READMEs. */
    private static List<Path> userDocs() throws IOException {
        List<Path> docs = new ArrayList<>(List.of(ROOT.resolve("README.md"), ROOT.resolve("examples/README.md"),
                ROOT.resolve("docker/README.md")));
        try (Stream<Path> s = Files.list(ROOT.resolve("docs"))) {
            s.filter(p -> p.toString().endsWith(".md") && !p.getFileName().toString().equals("benchmarks.md")).sorted().forEach(docs::add);
        }
        return docs;
    }
}
