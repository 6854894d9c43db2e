package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;

import org.junit.jupiter.api.Test;

import io.tablecdc.pg.wire.TupleData;
import io.tablecdc.pg.wire.TupleValue;

class CopyTextTest {
    private static TupleData parse(String row, int columns) {
        return CopyText.parse(row.getBytes(StandardCharsets.UTF_8), columns);
    }

    @Test
    void columnsSplitOnTabsAndBackslashNIsNull() {
        TupleData t = parse("1\t\\N\tabc\n", 3);
        assertEquals(TupleData.of(TupleValue.text("1"), TupleValue.NULL, TupleValue.text("abc")), t);
    }

    @Test
    void anEmptyStringIsNotNull() {
        assertEquals(TupleData.of(TupleValue.text(""), TupleValue.text("")), parse("\t\n", 2));
    }

    @Test
    void escapesBecomeTheCharactersTheyStandFor() {
        TupleData t = parse("a\\tb\\nc\\\\d\\re\\bf\\fg\\vh\n", 1);
        assertEquals(TupleValue.text("a\tb\nc\\d\re\bf\fg\u000Bh"), t.get(0));
        // octal and hex escapes (COPY FROM accepts them; a bytea hex value starts with an escaped backslash)
        assertEquals(TupleValue.text("A!B"), parse("\\101\\x21B", 1).get(0));
        assertEquals(TupleValue.text("\\x00ff"), parse("\\\\x00ff", 1).get(0));
        // a literal "\N" inside a longer value is text
        assertEquals(TupleValue.text("N-1"), parse("\\N-1", 1).get(0));
    }

    @Test
    void multiByteUtf8SurvivesAroundEscapes() {
        assertEquals(TupleValue.text("zürich\t東京 🚀"), parse("zürich\\t東京 🚀\n", 1).get(0));
    }

    @Test
    void aRowWithTheWrongNumberOfColumnsIsRefused() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> parse("1\t2\n", 3));
        assertTrue(e.getMessage().contains("2 values where 3 columns"), e.getMessage());
    }
}
