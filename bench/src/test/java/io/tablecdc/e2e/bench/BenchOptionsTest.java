package io.tablecdc.e2e.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

/** The options of the end-to-end suites (no stack needed). */
class BenchOptionsTest {
    @Test
    void theEndToEndSuitesRunAtTheIssueSizesByDefaultAndSmallWithQuick() {
        BenchOptions full = BenchOptions.parse(new String[] {"--suites", "e2e-query,e2e-pg"});
        assertEquals(List.of("e2e-pg", "e2e-query"), List.copyOf(full.suites), "the report's order, whatever the order given");
        assertEquals(1_000_000, full.e2eRows);
        assertEquals(500_000, full.e2eChanges);
        assertEquals(1_000_000, full.e2eQueryRows);
        BenchOptions quick = BenchOptions.parse(new String[] {"--quick", "--suites", "e2e-pg"});
        assertTrue(quick.e2eRows <= 20_000 && quick.e2eChanges <= 20_000 && quick.e2eQueryRows <= 20_000);
        BenchOptions sized = BenchOptions.parse(new String[] {"--suites", "e2e-pg", "--e2e-rows", "300000", "--e2e-changes",
                "100000", "--e2e-query-rows", "200000"});
        assertEquals(300_000, sized.e2eRows);
        assertEquals(100_000, sized.e2eChanges);
        assertEquals(200_000, sized.e2eQueryRows);
        assertTrue(BenchOptions.parse(new String[0]).suites.containsAll(List.of("e2e-pg", "e2e-query")), "every suite by default");
    }

    @Test
    void badEndToEndOptionsAreRefusedNamingTheOption() {
        IllegalArgumentException rows = assertThrows(IllegalArgumentException.class,
                () -> BenchOptions.parse(new String[] {"--e2e-rows", "0"}));
        assertTrue(rows.getMessage().contains("--e2e-rows"), rows.getMessage());
        IllegalArgumentException changes = assertThrows(IllegalArgumentException.class,
                () -> BenchOptions.parse(new String[] {"--e2e-changes", "5"}));
        assertTrue(changes.getMessage().contains("--e2e-changes"), changes.getMessage());
        IllegalArgumentException suite = assertThrows(IllegalArgumentException.class,
                () -> BenchOptions.parse(new String[] {"--suites", "e2e"}));
        assertTrue(suite.getMessage().contains("e2e-pg"), "the message lists the suites: " + suite.getMessage());
    }
}
