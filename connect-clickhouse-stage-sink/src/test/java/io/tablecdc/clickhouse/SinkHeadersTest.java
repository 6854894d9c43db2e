package io.tablecdc.clickhouse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.storage.HeaderConverter;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;
import org.apache.kafka.connect.storage.StringConverter;
import org.junit.jupiter.api.Test;

import io.tablecdc.common.RecordHeaders;

class SinkHeadersTest {

    /**
     * The version is taken in the same single pass as the other headers (issue 20: it was looked up again by name on
     * every record): the same value as {@link RecordHeaders#versionValue(org.apache.kafka.connect.header.Headers)},
     * the last header of the name winning, bytes read as UTF-8, and the same refusals.
     */
    @Test
    void theVersionIsReadInTheSinglePassAsTheLookupByNameReadsIt() {
        ConnectHeaders headers = new ConnectHeaders();
        headers.addString(RecordHeaders.TABLE, "public.t");
        headers.addString(RecordHeaders.VERSION, "5");
        headers.addString(RecordHeaders.BATCH, "3");
        headers.addBytes(RecordHeaders.VERSION, "340282366920938463463374607431768211455".getBytes(StandardCharsets.UTF_8));
        SinkHeaders read = SinkHeaders.of(headers);
        assertEquals(RecordHeaders.versionValue(headers), read.versionValue());
        assertEquals(BigInteger.ONE.shiftLeft(128).subtract(BigInteger.ONE), read.versionValue());
        assertEquals(3, read.batchId());

        headers.add(RecordHeaders.VERSION, null, Schema.OPTIONAL_STRING_SCHEMA);
        IllegalArgumentException missing = assertThrows(IllegalArgumentException.class, () -> SinkHeaders.of(headers).versionValue());
        assertEquals("the record has no tablecdc.version header", missing.getMessage());
        assertThrows(IllegalArgumentException.class, () -> RecordHeaders.versionValue(headers));

        ConnectHeaders bad = new ConnectHeaders();
        bad.addString(RecordHeaders.VERSION, "12a");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SinkHeaders.of(bad).versionValue());
        assertEquals("header tablecdc.version is not a non-negative decimal integer: '12a'", e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> SinkHeaders.NONE.versionValue());
    }

    /** The headers of one record as a sink worker's header converter hands them over, from the text a source wrote. */
    private static ConnectHeaders arrived(HeaderConverter converter, String... keysAndTexts) {
        ConnectHeaders headers = new ConnectHeaders();
        for (int i = 0; i < keysAndTexts.length; i += 2) {
            SchemaAndValue v = converter.toConnectHeader("t", keysAndTexts[i], keysAndTexts[i + 1].getBytes(StandardCharsets.UTF_8));
            headers.add(keysAndTexts[i], v);
        }
        return headers;
    }

    private static HeaderConverter configured(HeaderConverter converter) {
        // as the worker configures a header converter
        converter.configure(java.util.Map.of("converter.type", "header"));
        return converter;
    }

    /**
     * Kafka's default header converter parses header text that looks like a number: a flow named {@code 1e3} arrives
     * as 1000, a column named {@code 1.50} as 1.5. Such names are refused, naming the header and the setting that
     * fixes it, rather than staged under another name; with StringConverter they arrive exactly. Names that stay text
     * and the numeric headers are read as before under either converter.
     */
    @Test
    void namesParsedByTheHeaderConverterAreRefusedAndStringConverterKeepsThem() {
        HeaderConverter simple = configured(new SimpleHeaderConverter());
        HeaderConverter strings = configured(new StringConverter());
        String[] record = {RecordHeaders.FLOW, "1e3", RecordHeaders.TABLE, "public.t", RecordHeaders.BATCH, "3",
                RecordHeaders.BATCH_LAST, "true", RecordHeaders.VERSION, "12"};

        SinkHeaders parsed = SinkHeaders.of(arrived(simple, record));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, parsed::requireText);
        assertEquals("header tablecdc.flow arrived as Short 1000, not as the text the source wrote: the worker's header converter"
                + " (SimpleHeaderConverter unless set otherwise) parsed it, and the name it stood for cannot be told from that"
                + " value; set header.converter=org.apache.kafka.connect.storage.StringConverter on this sink connector", e.getMessage());

        SinkHeaders exact = SinkHeaders.of(arrived(strings, record));
        exact.requireText();
        assertEquals("1e3", exact.flow());
        assertEquals(3, exact.batchId());
        assertEquals(BigInteger.valueOf(12), exact.versionValue());
        assertEquals(true, exact.lastOfBatch());

        SinkHeaders column = SinkHeaders.of(arrived(simple, RecordHeaders.FLOW, "pgflow", RecordHeaders.TABLE, "public.t",
                RecordHeaders.BATCH, "3", RecordHeaders.UNCHANGED, "1.50"));
        assertThrows(IllegalArgumentException.class, column::requireText);
        assertEquals(java.util.List.of("1.50"), SinkHeaders.of(arrived(strings, RecordHeaders.UNCHANGED, "1.50")).unchanged());

        // names that stay text, and numbers where numbers are meant, pass under the default converter
        SinkHeaders plain = SinkHeaders.of(arrived(simple, RecordHeaders.FLOW, "pgflow", RecordHeaders.TABLE, "public.t",
                RecordHeaders.BATCH, "3", RecordHeaders.BATCH_LAST, "true", RecordHeaders.VERSION, "12", RecordHeaders.UNCHANGED, "doc"));
        plain.requireText();
        assertEquals(3, plain.batchId());
        assertEquals(true, plain.lastOfBatch());
        assertEquals(BigInteger.valueOf(12), plain.versionValue());
        assertEquals(java.util.List.of("doc"), plain.unchanged());
    }

    /**
     * The default header converter parses the text {@code null} to no value: a table or flow named {@code null} would
     * otherwise make the record another producer's upsert, and an unchanged column named {@code null} would be written
     * NULL. Such a record is refused naming the header; with StringConverter the name arrives as written.
     */
    @Test
    void aNameNullParsedToNoValueIsRefusedNotTakenAsMissing() {
        HeaderConverter simple = configured(new SimpleHeaderConverter());
        HeaderConverter strings = configured(new StringConverter());
        for (String[] record : java.util.List.of(
                new String[] {RecordHeaders.FLOW, "pgflow", RecordHeaders.TABLE, "null", RecordHeaders.BATCH, "3"},
                new String[] {RecordHeaders.FLOW, "null", RecordHeaders.TABLE, "public.t", RecordHeaders.BATCH, "3"},
                new String[] {RecordHeaders.FLOW, "pgflow", RecordHeaders.TABLE, "public.t", RecordHeaders.BATCH, "3",
                        RecordHeaders.UNCHANGED, "null"})) {
            SinkHeaders parsed = SinkHeaders.of(arrived(simple, record));
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, parsed::requireText, String.join(" ", record));
            assertTrue(e.getMessage().contains("arrived without a value") && e.getMessage().contains("StringConverter"), e.getMessage());
            SinkHeaders.of(arrived(strings, record)).requireText();
        }
        assertEquals("null", SinkHeaders.of(arrived(strings, RecordHeaders.TABLE, "null")).table());
        assertEquals(java.util.List.of("null"), SinkHeaders.of(arrived(strings, RecordHeaders.UNCHANGED, "null")).unchanged());
    }
}
