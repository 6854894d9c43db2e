package io.tablecdc.e2e.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Instant;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The report's header states what was measured and nothing else; a run of some suites keeps the others' sections. */
class BenchRunnerTest {
    @Test
    void theMachineLineStatesTheMeasuredLoadAndNoStoryAboutIt(@TempDir Path out) throws Exception {
        String before = "2 cores, load average 0.90, busiest processes (%CPU since start) 12.0 java";
        String after = "2 cores, load average 1.10, busiest processes (%CPU since start) 30.0 java";
        String doc = BenchRunner.document(BenchOptions.parse(new String[] {"--quick"}), List.of(), List.of(),
                Instant.parse("2026-12-03T01:00:00Z"), Instant.parse("2026-12-03T01:10:00Z"), before, after, out, out, null);
        assertTrue(doc.contains(before), doc);
        assertTrue(doc.contains(after), doc);
        assertTrue(doc.contains(System.getProperty("os.arch")), "the platform is stated: " + doc);
        assertTrue(doc.contains(Runtime.version().toString()), "the JVM is stated: " + doc);
        for (String story : List.of("shared", "other engineers", "builds and tests", "noisy")) {
            assertFalse(doc.contains(story), "the report says '" + story + "': " + doc);
        }
    }

    @Test
    void aRunOfSomeSuitesKeepsTheSectionsOfTheOthersInTheirOrderAndReplacesItsOwn(@TempDir Path out) throws Exception {
        String previous = """
                # Benchmarks

                Produced by: an old header

                ## 1. Copy

                old copy table, no run line

                ```
                ## not a heading inside a fence
                ```

                ## 3. Sink

                _Run: 2026-12-01T10:00:00Z to 2026-12-01T10:30:00Z, `scripts/bench.sh --suites sink`, 3 repetitions._

                old sink table

                ## 6. End to end

                old end-to-end table

                ## Reading

                old reading
                """;
        SuiteReport sink = new SuiteReport("sink", "3. Sink", "new sink description");
        SuiteReport stream = new SuiteReport("pg-stream", "2. Stream", "new stream description");
        stream.note("a note");
        String doc = BenchRunner.document(BenchOptions.parse(new String[] {"--suites", "pg-stream,sink", "--reps", "2"}),
                List.of(stream, sink), List.of(), Instant.parse("2026-12-03T01:00:00Z"), Instant.parse("2026-12-03T01:10:00Z"),
                "2 cores, load average 1.50, busiest", "2 cores, load average 2.25, busiest", out, out, previous);
        List<String> headings = doc.lines().filter(l -> l.startsWith("## ") && !l.contains("inside a fence")).toList();
        assertEquals(List.of("## 1. Copy", "## 2. Stream", "## 3. Sink", "## 6. End to end"), headings, doc);
        assertTrue(doc.contains("## not a heading inside a fence"), "a fenced block stays in its section: " + doc);
        assertTrue(doc.contains("old copy table") && doc.contains("old end-to-end table"), doc);
        assertFalse(doc.contains("old sink table"), "the suite run now replaces its old section: " + doc);
        assertFalse(doc.contains("old reading"), "the reading comes from docs/benchmarks/reading.md only: " + doc);
        assertFalse(doc.contains("an old header"), doc);
        String newRun = "_Run: 2026-12-03T01:00:00Z to 2026-12-03T01:10:00Z, `scripts/bench.sh --suites pg-stream,sink --reps 2`,"
                + " 2 repetitions; load average at the start 1.50, at the end 2.25._";
        assertEquals(2, doc.split(java.util.regex.Pattern.quote(newRun), -1).length - 1, "both new sections name this run: " + doc);
        String copy = doc.substring(doc.indexOf("## 1. Copy"), doc.indexOf("## 2. Stream"));
        assertTrue(copy.contains("_Run: kept from an earlier report"), "a kept section without a run line gets one: " + copy);
        assertTrue(doc.contains("kept from the report that was in the output folder"), doc);
        assertTrue(doc.contains("a note"), doc);

        // merging again keeps what the first merge wrote, once
        String again = BenchRunner.document(BenchOptions.parse(new String[] {"--suites", "e2e-pg"}), List.of(),
                List.of(), Instant.parse("2026-12-03T02:00:00Z"), Instant.parse("2026-12-03T02:10:00Z"), "", "", out, out, doc);
        assertEquals(headings, again.lines().filter(l -> l.startsWith("## ") && !l.contains("inside a fence")).toList(), again);
        assertEquals(2, again.split("_Run: kept from an earlier report", -1).length - 1, "sections 1 and 6, once each: " + again);
        assertTrue(again.contains(newRun), again);
    }
}
