package io.tablecdc.e2e.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

/** The export baseline's TabSeparated escaping and the end-to-end checksum comparison (no stack needed). */
class TsvTest {
    @Test
    void separatorsBackslashesAndControlCharactersAreEscapedAndNullIsBackslashN() {
        assertEquals("a\\tb\\nc\\\\d\\re\\0f\\bg\\fh\tplain\t\\N\t\n",
                Tsv.row(new StringBuilder(), "a\tb\nc\\d\re\0f\bg\fh", "plain", null, "").toString());
        assertEquals("\\\\N", Tsv.field(new StringBuilder(), "\\N").toString(), "the text \\N is not NULL");
        assertEquals("zürich ✓", Tsv.field(new StringBuilder(), "zürich ✓").toString(), "other characters stay as they are");
    }

    @Test
    void checksumsAgreeExactlyOnIntegersAndDecimalsAndWithinAToleranceOnDoublesOnly() {
        List<String> names = List.of("rows", "sum(balance)", "~sum(score)");
        E2e.sameChecksum("t", names, List.of("10", "5000.00", "250000.25"), List.of("10", "5000", "250000.2500000001"));
        IllegalStateException decimal = assertThrows(IllegalStateException.class,
                () -> E2e.sameChecksum("t", names, List.of("10", "5000.00", "1"), List.of("10", "5000.01", "1")));
        assertTrue(decimal.getMessage().contains("sum(balance): source 5000.00, ClickHouse 5000.01"), decimal.getMessage());
        IllegalStateException rows = assertThrows(IllegalStateException.class,
                () -> E2e.sameChecksum("pipe", names, List.of("10", "0", "1"), List.of("9", "0", "1")));
        assertTrue(rows.getMessage().startsWith("pipe: ") && rows.getMessage().contains("rows: source 10, ClickHouse 9"),
                rows.getMessage());
        assertThrows(IllegalStateException.class,
                () -> E2e.sameChecksum("t", names, List.of("10", "0", "1.0"), List.of("10", "0", "1.001")));
    }
}
