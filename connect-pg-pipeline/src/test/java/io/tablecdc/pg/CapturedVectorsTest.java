package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;

import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.Test;

import io.tablecdc.pg.convert.RelationSchema;
import io.tablecdc.pg.wire.Lsn;
import io.tablecdc.pg.wire.PgOutputParser;
import io.tablecdc.pg.wire.PgOutputMessage;
import io.tablecdc.pg.wire.PgOutputMessage.Begin;
import io.tablecdc.pg.wire.PgOutputMessage.Commit;
import io.tablecdc.pg.wire.PgOutputMessage.Insert;
import io.tablecdc.pg.wire.PgOutputMessage.LogicalMessage;
import io.tablecdc.pg.wire.PgOutputMessage.Relation;
import io.tablecdc.pg.wire.PgOutputMessage.Truncate;
import io.tablecdc.pg.wire.PgOutputMessage.Type;
import io.tablecdc.pg.wire.PgOutputMessage.Update;
import io.tablecdc.pg.wire.RelationCache;
import io.tablecdc.pg.wire.TupleValue;

/**
 * Byte sequences a real PostgreSQL 17 sent (src/test/resources/pgoutput/, captured by
 * {@link PgoutputRealServerTest}), decoded and converted without a server.
 */
class CapturedVectorsTest {
    private static List<byte[]> vectors(String name) throws IOException {
        try (InputStream in = CapturedVectorsTest.class.getResourceAsStream("/pgoutput/" + name)) {
            if (in == null) {
                throw new IOException("missing test vector " + name);
            }
            List<byte[]> out = new ArrayList<>();
            for (String line : new String(in.readAllBytes(), StandardCharsets.UTF_8).split("\n")) {
                if (!line.isBlank() && !line.startsWith("#")) {
                    out.add(HexFormat.of().parseHex(line.trim()));
                }
            }
            return out;
        }
    }

    private static List<PgOutputMessage> decode(String name) throws IOException {
        return vectors(name).stream().map(PgOutputParser::parse).toList();
    }

    private static long micros(Instant instant) {
        return instant.getEpochSecond() * 1_000_000L + instant.getNano() / 1_000;
    }

    @Test
    void everyCapturedVectorDecodesWithNoByteLeftOver() throws IOException {
        int count = 0;
        for (String name : List.of("multi_table.hex", "truncate.hex", "messages.hex", "toast_unchanged.hex",
                "tz_america_sao_paulo.hex", "evolving.hex", "all_types.hex", "origin.hex")) {
            for (byte[] bytes : vectors(name)) {
                PgOutputParser.parse(bytes); // strict: fails on trailing bytes
                // the same bytes at an offset inside a larger frame, as pgjdbc hands them over
                byte[] frame = new byte[bytes.length + 30];
                System.arraycopy(bytes, 0, frame, 25, bytes.length);
                assertEquals(PgOutputParser.parse(bytes), PgOutputParser.parse(ByteBuffer.wrap(frame, 25, bytes.length)), name);
                count++;
            }
        }
        assertEquals(69, count);
    }

    @Test
    void capturedTransactionFramesEveryChangeWithItsCommitPosition() throws IOException {
        List<PgOutputMessage> messages = decode("multi_table.hex");
        assertEquals(new Begin(Lsn.parse("0/1530398"), Instant.parse("2026-12-02T14:02:18.222575Z"), 760), messages.get(0));
        assertEquals(new Commit(0, Lsn.parse("0/1530398"), Lsn.parse("0/15303C8"), Instant.parse("2026-12-02T14:02:18.222575Z")),
                messages.get(8));
        Relation tA = (Relation) messages.get(1);
        assertEquals(16391, tA.oid());
        assertEquals("public.t_a", tA.qualifiedName());
        Update keyChange = (Update) messages.get(5);
        assertEquals(List.of(TupleValue.text("1"), TupleValue.NULL), keyChange.oldTuple().tuple().values());
        assertEquals(List.of(TupleValue.text("2"), TupleValue.text("one")), keyChange.newTuple().values());
        assertNull(((Update) messages.get(6)).oldTuple());
        RelationCache cache = new RelationCache();
        messages.forEach(cache::accept);
        Struct t_b = RelationSchema.of(cache.get(16398)).row(((Insert) messages.get(4)).newTuple()).value();
        assertEquals(10_000_000_000L, t_b.get("id"));
    }

    @Test
    void capturedOriginSitsBetweenBeginAndTheFirstChange() throws IOException {
        List<PgOutputMessage> messages = decode("origin.hex");
        assertEquals(new PgOutputMessage.Origin(Lsn.parse("0/ABCDEF12"), "upstream_node"), messages.get(1));
        assertEquals(List.of(TupleValue.text("42"), TupleValue.text("replayed")), ((Insert) messages.get(3)).newTuple().values());
    }

    @Test
    void capturedTruncatesKeepEveryTableAndOption() throws IOException {
        List<PgOutputMessage> messages = decode("truncate.hex");
        Truncate both = (Truncate) messages.get(7);
        assertEquals(List.of(16391L, 16398L), both.relationOids());
        assertTrue(both.restartIdentity());
        assertFalse(both.cascade());
        Truncate cascade = (Truncate) messages.get(11);
        assertEquals(List.of(16391L), cascade.relationOids());
        assertTrue(cascade.cascade());
    }

    @Test
    void capturedLogicalMessagesKeepFlagsPrefixAndBytes() throws IOException {
        List<PgOutputMessage> messages = decode("messages.hex");
        LogicalMessage ddl = (LogicalMessage) messages.get(3);
        assertTrue(ddl.transactional());
        assertEquals(Lsn.parse("0/1533880"), ddl.lsn());
        assertEquals("tablecdc_ddl", ddl.prefix());
        assertEquals("ALTER TABLE ✓", ddl.contentText());
        LogicalMessage binary = (LogicalMessage) messages.get(5);
        assertFalse(binary.transactional());
        assertArrayEquals(new byte[] {0, (byte) 0xFF, 0}, binary.content());
    }

    @Test
    void capturedUnchangedToastIsMarkedNotNulled() throws IOException {
        List<PgOutputMessage> messages = decode("toast_unchanged.hex");
        RelationSchema schema = RelationSchema.of((Relation) messages.get(0));
        Update update = (Update) messages.get(1);
        RelationSchema.Row row = schema.row(update.newTuple(), update.oldTuple());
        assertEquals(Set.of("big"), row.unchangedToastColumns());
        assertEquals("t", row.value().get("small"));
    }

    @Test
    void capturedLocalMeanTimeOffsetsGiveTheSameInstantsAsUtc() throws IOException {
        List<PgOutputMessage> messages = decode("tz_america_sao_paulo.hex");
        RelationSchema schema = RelationSchema.of((Relation) messages.get(1));
        List<Object> converted = new ArrayList<>();
        for (PgOutputMessage message : messages) {
            if (message instanceof Update update) {
                converted.add(schema.row(update.newTuple()).value().get("at"));
            }
        }
        long bc = LocalDate.of(-43, 3, 15).toEpochDay() * 86_400_000_000L + 12 * 3_600_000_000L;
        assertEquals(List.of(micros(Instant.parse("2024-05-06T07:08:09.123456Z")), micros(Instant.parse("1900-01-01T00:00:00Z")),
                bc, -1L), converted);
    }

    @Test
    void capturedAddColumnCarriesTheNewColumnsTypmod() throws IOException {
        List<PgOutputMessage> messages = decode("evolving.hex");
        Relation after = (Relation) messages.get(5);
        assertEquals(327686, after.columns().get(2).typeModifier());
        Struct row = RelationSchema.of(after).row(((Insert) messages.get(6)).newTuple()).value();
        assertEquals(new BigDecimal("1.50"), row.get("b"));
    }

    @Test
    void capturedRowsOfEveryTypeConvert() throws IOException {
        List<PgOutputMessage> messages = decode("all_types.hex");
        assertEquals(new Type(16385, "public", "mood"), messages.get(1));
        assertEquals(new Type(16384, "public", "_mood"), messages.get(2));
        RelationCache cache = new RelationCache();
        List<Struct> rows = new ArrayList<>();
        for (PgOutputMessage message : messages) {
            cache.accept(message);
            if (message instanceof Insert insert) {
                Struct row = RelationSchema.of(cache.get(insert.relationOid())).row(insert.newTuple()).value();
                row.validate();
                rows.add(row);
            }
        }
        assertEquals(3, rows.size());
        Struct first = rows.get(0);
        assertEquals(new BigDecimal("123456789.123"), first.get("c_num"));
        assertEquals(micros(Instant.parse("2024-05-06T07:08:09.123456Z")), first.get("c_tstz"));
        assertEquals(micros(Instant.parse("2024-05-06T07:08:09.123456Z")), first.get("c_ts"));
        assertEquals("P1Y2M-3DT4H5M6.789S", first.get("c_interval"));
        assertEquals(Arrays.asList("a b", "NULL", null, "q\"uo\\te", "x,y", "{}", ""), first.get("c_text_arr"));
        // infinity is the type's largest value, as the server stores it
        assertEquals(Arrays.asList(micros(Instant.parse("2000-01-01T00:00:00Z")), Long.MAX_VALUE), first.get("c_tstz_arr"));
        assertEquals(new java.util.Date(LocalDate.of(-43, 3, 15).toEpochDay() * 86_400_000L), rows.get(1).get("c_date"));
        assertEquals(-1L, rows.get(1).get("c_tstz"));
        assertEquals(Long.MAX_VALUE, rows.get(2).get("c_tstz"), "infinity");
    }
}
