package io.tablecdc.clickhouse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.header.ConnectHeaders;
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
}
