package io.tablecdc.common;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;

import org.apache.kafka.common.config.ConfigDef;
import org.junit.jupiter.api.Test;

/** The check every plugin's reference passes, against a reference with each kind of problem. */
class ConfigDocsTest {
    @Test
    void aReferenceReportsUndocumentedKeysVisibleSecretsAndAStaleFileWhichItRegenerates() throws Exception {
        ConfigDef def = new ConfigDef()
                .define("a.url", ConfigDef.Type.STRING, "", ConfigDef.Importance.HIGH, "Where it is.", "Group", 1, ConfigDef.Width.LONG, "url")
                .define("a.password", ConfigDef.Type.STRING, "", ConfigDef.Importance.HIGH, "The secret.", "Group", 2, ConfigDef.Width.LONG, "pw")
                .define("a.hidden", ConfigDef.Type.STRING, "", ConfigDef.Importance.LOW, "");
        Path doc = Files.createTempDirectory(Path.of("target"), "config-docs").resolve("config/a.md");
        ConfigDocs.Reference reference = new ConfigDocs.Reference("A configuration", "Intro.\n", def, doc, Set.of("a.password"));
        assertEquals(List.of("keys without documentation or group: [a.hidden]", "secret a.password is of type STRING, not PASSWORD",
                doc + " was out of date and has been regenerated; commit it"), reference.problems());
        assertEquals(List.of("keys without documentation or group: [a.hidden]", "secret a.password is of type STRING, not PASSWORD"),
                reference.problems(), "the regenerated file is up to date");
        assertEquals(ConfigDocs.markdown("A configuration", "Intro.\n", def), Files.readString(doc));
    }
}
