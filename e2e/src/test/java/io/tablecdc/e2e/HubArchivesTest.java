package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.tablecdc.e2e.stack.PluginArchives;

/**
 * What each Confluent Hub archive the connector modules build carries besides the plugin: the licence, a NOTICE, the
 * licence of every bundled third-party jar, and a manifest that names its licence. No stack needed (the archives are
 * built before the e2e module).
 */
class HubArchivesTest {
    /** An entry of the third-party list: {@code (groupId:artifactId:version - url)}. */
    private static final Pattern LISTED = Pattern.compile("\\(([^:()\\s]+):([^:()\\s]+):([^:()\\s]+) - ");

    @Test
    void everyArchiveCarriesLicenceNoticeAndTheLicenceOfEveryBundledJar() throws IOException {
        List<Path> archives = PluginArchives.archives();
        assertEquals(3, archives.size(), archives.toString());
        for (Path archive : archives) {
            try (ZipFile zip = new ZipFile(archive.toFile())) {
                Map<String, ZipEntry> entries = new TreeMap<>();
                zip.stream().forEach(e -> entries.put(e.getName().substring(e.getName().indexOf('/') + 1), e));
                String licence = text(zip, entries.get("doc/LICENSE"), archive, "doc/LICENSE");
                assertTrue(licence.contains("Apache License") && licence.contains("Version 2.0, January 2004"), archive + ": doc/LICENSE");
                assertTrue(text(zip, entries.get("doc/NOTICE"), archive, "doc/NOTICE").contains("doc/THIRD-PARTY.txt"), archive + ": doc/NOTICE");
                String thirdParty = text(zip, entries.get("doc/THIRD-PARTY.txt"), archive, "doc/THIRD-PARTY.txt");

                List<String> listed = new ArrayList<>();
                Matcher m = LISTED.matcher(thirdParty);
                while (m.find()) {
                    listed.add(m.group(2) + "-" + m.group(3));
                }
                List<String> unlisted = new ArrayList<>();
                int jars = 0;
                for (String name : entries.keySet()) {
                    if (!name.startsWith("lib/") || !name.endsWith(".jar")) {
                        continue;
                    }
                    jars++;
                    String file = name.substring("lib/".length());
                    String base = file.substring(0, file.length() - ".jar".length());
                    boolean ownPlugin = file.startsWith("tablecdc-connect-");
                    // artifactId-version.jar, or artifactId-version-classifier.jar
                    if (!ownPlugin && listed.stream().noneMatch(l -> base.equals(l) || base.startsWith(l + "-"))) {
                        unlisted.add(file);
                    }
                }
                assertTrue(jars > 3, archive + " bundles its dependencies: " + jars);
                assertEquals(List.of(), unlisted, archive + ": bundled jars missing from doc/THIRD-PARTY.txt");
                assertFalse(thirdParty.contains("Unknown license"), archive + ": a jar without a known licence");

                JsonNode manifest = new ObjectMapper().readTree(text(zip, entries.get("manifest.json"), archive, "manifest.json"));
                assertEquals("Apache License 2.0", manifest.path("license").path(0).path("name").asText(), manifest.toString());

                // the sample configs in etc/ are the plugin's examples, which ExamplesIT validates on a worker
                String plugin = PLUGIN.matcher(archive.getFileName().toString()).replaceFirst("$1");
                List<String> samples = entries.keySet().stream().filter(n -> n.startsWith("etc/") && !n.endsWith("/")).sorted().toList();
                assertEquals(List.of("etc/" + plugin + ".full.json", "etc/" + plugin + ".minimal.json"), samples, archive + ": etc/");
                for (String sample : samples) {
                    Path example = io.tablecdc.e2e.stack.StackPaths.projectRoot().resolve("examples").resolve(sample.substring("etc/".length()));
                    assertEquals(java.nio.file.Files.readString(example), text(zip, entries.get(sample), archive, sample),
                            archive + ": " + sample + " differs from " + example);
                }
            }
        }
    }

    /** The plugin's name in its archive's file name: {@code tablecdc-connect-<plugin>-<version>.zip}. */
    private static final Pattern PLUGIN = Pattern.compile("^tablecdc-connect-(.+)-\\d+\\.\\d+\\.\\d+.*\\.zip$");

    private static String text(ZipFile zip, ZipEntry entry, Path archive, String name) throws IOException {
        assertTrue(entry != null, archive + " has no " + name);
        return new String(zip.getInputStream(entry).readAllBytes(), StandardCharsets.UTF_8);
    }
}
