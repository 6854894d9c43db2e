package io.tablecdc.e2e.bench;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Instant;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The report's header states what was measured and nothing else (no stack needed). */
class BenchRunnerTest {
    @Test
    void theMachineLineStatesTheMeasuredLoadAndNoStoryAboutIt(@TempDir Path out) throws Exception {
        String before = "2 cores, load average 0.90, busiest processes (%CPU since start) 12.0 java";
        String after = "2 cores, load average 1.10, busiest processes (%CPU since start) 30.0 java";
        String doc = BenchRunner.document(BenchOptions.parse(new String[] {"--quick"}), List.of(), List.of(),
                Instant.parse("2026-12-03T01:00:00Z"), Instant.parse("2026-12-03T01:10:00Z"), before, after, out, out);
        assertTrue(doc.contains(before), doc);
        assertTrue(doc.contains(after), doc);
        assertTrue(doc.contains(System.getProperty("os.arch")), "the platform is stated: " + doc);
        assertTrue(doc.contains(Runtime.version().toString()), "the JVM is stated: " + doc);
        for (String story : List.of("shared", "other engineers", "builds and tests", "noisy")) {
            assertFalse(doc.contains(story), "the report says '" + story + "': " + doc);
        }
    }
}
