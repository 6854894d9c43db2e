package io.tablecdc.pg.wire;

import static io.tablecdc.pg.wire.WireBytes.message;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.List;

import org.junit.jupiter.api.Test;

import io.tablecdc.pg.wire.PgOutputMessage.Begin;
import io.tablecdc.pg.wire.PgOutputMessage.Column;
import io.tablecdc.pg.wire.PgOutputMessage.Commit;
import io.tablecdc.pg.wire.PgOutputMessage.Delete;
import io.tablecdc.pg.wire.PgOutputMessage.Insert;
import io.tablecdc.pg.wire.PgOutputMessage.LogicalMessage;
import io.tablecdc.pg.wire.PgOutputMessage.Origin;
import io.tablecdc.pg.wire.PgOutputMessage.Relation;
import io.tablecdc.pg.wire.PgOutputMessage.ReplicaIdentity;
import io.tablecdc.pg.wire.PgOutputMessage.Truncate;
import io.tablecdc.pg.wire.PgOutputMessage.Type;
import io.tablecdc.pg.wire.PgOutputMessage.Update;

class PgOutputParserTest {
    /** 2024-05-06T07:08:09.123456Z in microseconds since 2000-01-01. */
    private static final long PG_MICROS = 768_294_489_123_456L;
    private static final Instant INSTANT = Instant.parse("2024-05-06T07:08:09.123456Z");

    @Test
    void beginReadsXidAsUnsignedSoThatWrappedXidsStayPositive() {
        byte[] bytes = message('B').int64(0x1_0000_0028L).int64(PG_MICROS).int32(0xFFFF_FFF0L).bytes();
        Begin begin = (Begin) PgOutputParser.parse(bytes);
        assertEquals(Lsn.parse("1/28"), begin.finalLsn());
        assertEquals(INSTANT, begin.commitTime());
        assertEquals(0xFFFF_FFF0L, begin.xid());
    }

    @Test
    void commitCarriesCommitAndEndLsn() {
        byte[] bytes = message('C').int8(0).int64(0x28).int64(0x58).int64(PG_MICROS).bytes();
        assertEquals(new Commit(0, Lsn.of(0x28), Lsn.of(0x58), INSTANT), PgOutputParser.parse(bytes));
    }

    @Test
    void timestampsBeforeTheYear2000AreNotShiftedByTruncatingDivision() {
        // -1 µs before 2000-01-01 must be 1999-12-31T23:59:59.999999Z, not 2000-01-01T00:00:00.000001Z
        assertEquals(Instant.parse("1999-12-31T23:59:59.999999Z"), PgOutputParser.instant(-1L));
        assertEquals(Instant.parse("2000-01-01T00:00:00Z"), PgOutputParser.instant(0L));
    }

    @Test
    void originNamesTheUpstreamNode() {
        byte[] bytes = message('O').int64(0x1234).string("node_a").bytes();
        assertEquals(new Origin(Lsn.of(0x1234), "node_a"), PgOutputParser.parse(bytes));
    }

    @Test
    void relationReadsFlagsTypmodAndAnUnsignedOid() {
        byte[] bytes = message('R').int32(0x8000_0001L).string("sales").string("order items").int8('i').int16(3)
                .int8(1).string("id").int32(20).int32(-1)
                .int8(0).string("amount").int32(1700).int32((12 << 16 | 2) + 4)
                .int8(0).string("naïve").int32(25).int32(-1)
                .bytes();
        Relation relation = (Relation) PgOutputParser.parse(bytes);
        assertEquals(0x8000_0001L, relation.oid());
        assertEquals("sales.order items", relation.qualifiedName());
        assertEquals(ReplicaIdentity.INDEX, relation.replicaIdentity());
        assertEquals(List.of(new Column(1, "id", 20, -1), new Column(0, "amount", 1700, (12 << 16 | 2) + 4),
                new Column(0, "naïve", 25, -1)), relation.columns());
        assertTrue(relation.columns().get(0).key());
        assertFalse(relation.columns().get(1).key());
        assertEquals(List.of(relation.columns().get(0)), relation.keyColumns());
    }

    @Test
    void relationInPgCatalogHasAnEmptyNamespaceOnTheWire() {
        byte[] bytes = message('R').int32(1).string("").string("t").int8('d').int16(0).bytes();
        assertEquals("pg_catalog.t", ((Relation) PgOutputParser.parse(bytes)).qualifiedName());
    }

    @Test
    void unknownReplicaIdentityFailsInsteadOfGuessingTheKey() {
        byte[] bytes = message('R').int32(1).string("public").string("t").int8('x').int16(0).bytes();
        assertThrows(PgOutputParseException.class, () -> PgOutputParser.parse(bytes));
    }

    @Test
    void typeNamesANonBuiltInType() {
        byte[] bytes = message('Y').int32(16390).string("public").string("mood").bytes();
        assertEquals(new Type(16390, "public", "mood"), PgOutputParser.parse(bytes));
    }

    @Test
    void insertKeepsNullUnchangedToastTextAndBinaryApart() {
        byte[] bytes = message('I').int32(16384).int8('N').int16(4)
                .int8('n').int8('u').text("zürich ✓").int8('b').int32(2).raw(new byte[] {0, (byte) 0xFF})
                .bytes();
        Insert insert = (Insert) PgOutputParser.parse(bytes);
        assertEquals(16384, insert.relationOid());
        assertEquals(TupleData.of(TupleValue.NULL, TupleValue.UNCHANGED_TOAST, TupleValue.text("zürich ✓"),
                new TupleValue.Binary(new byte[] {0, (byte) 0xFF})), insert.newTuple());
        assertTrue(insert.newTuple().hasUnchangedToast());
    }

    @Test
    void emptyTextValueIsNotNull() {
        byte[] bytes = message('I').int32(1).int8('N').int16(1).text("").bytes();
        assertEquals(TupleValue.text(""), ((Insert) PgOutputParser.parse(bytes)).newTuple().get(0));
    }

    @Test
    void updateWithoutOldTupleHasNullOldTuple() {
        byte[] bytes = message('U').int32(7).int8('N').int16(1).text("1").bytes();
        Update update = (Update) PgOutputParser.parse(bytes);
        assertNull(update.oldTuple());
        assertEquals(TupleData.of(TupleValue.text("1")), update.newTuple());
    }

    @Test
    void updateOfTheKeyCarriesTheOldKeyTuple() {
        byte[] bytes = message('U').int32(7).int8('K').int16(2).text("1").int8('n').int8('N').int16(2).text("2").text("x").bytes();
        Update update = (Update) PgOutputParser.parse(bytes);
        assertFalse(update.oldTuple().full());
        assertEquals(TupleData.of(TupleValue.text("1"), TupleValue.NULL), update.oldTuple().tuple());
        assertEquals(TupleData.of(TupleValue.text("2"), TupleValue.text("x")), update.newTuple());
    }

    @Test
    void updateUnderReplicaIdentityFullCarriesTheWholeOldRow() {
        byte[] bytes = message('U').int32(7).int8('O').int16(2).text("1").text("old").int8('N').int16(2).text("1").int8('u').bytes();
        Update update = (Update) PgOutputParser.parse(bytes);
        assertTrue(update.oldTuple().full());
        assertEquals(TupleValue.text("old"), update.oldTuple().tuple().get(1));
        assertEquals(TupleValue.UNCHANGED_TOAST, update.newTuple().get(1));
    }

    @Test
    void updateWithAGarbageTupleMarkerFails() {
        byte[] bytes = message('U').int32(7).int8('X').int16(0).bytes();
        assertThrows(PgOutputParseException.class, () -> PgOutputParser.parse(bytes));
    }

    @Test
    void deleteByKeyAndByFullRow() {
        Delete byKey = (Delete) PgOutputParser.parse(message('D').int32(7).int8('K').int16(1).text("5").bytes());
        assertFalse(byKey.oldTuple().full());
        Delete byRow = (Delete) PgOutputParser.parse(message('D').int32(7).int8('O').int16(1).text("5").bytes());
        assertTrue(byRow.oldTuple().full());
        assertThrows(PgOutputParseException.class, () -> PgOutputParser.parse(message('D').int32(7).int8('N').int16(0).bytes()));
    }

    @Test
    void truncateOfSeveralTablesKeepsEveryOidAndTheOptions() {
        byte[] bytes = message('T').int32(3).int8(3).int32(16384).int32(16390).int32(0xFFFF_FFFEL).bytes();
        Truncate truncate = (Truncate) PgOutputParser.parse(bytes);
        assertEquals(List.of(16384L, 16390L, 0xFFFF_FFFEL), truncate.relationOids());
        assertTrue(truncate.cascade());
        assertTrue(truncate.restartIdentity());
        Truncate plain = (Truncate) PgOutputParser.parse(message('T').int32(1).int8(0).int32(1).bytes());
        assertFalse(plain.cascade());
        assertFalse(plain.restartIdentity());
    }

    @Test
    void truncateClaimingMoreOidsThanItCarriesFailsWithoutAllocatingThem() {
        byte[] bytes = message('T').int32(0x7FFF_FFFFL).int8(0).int32(1).bytes();
        assertThrows(PgOutputParseException.class, () -> PgOutputParser.parse(bytes));
    }

    @Test
    void logicalMessageKeepsBinaryContentWithZeroBytes() {
        byte[] content = {'a', 0, (byte) 0xC3, 'z'};
        byte[] bytes = message('M').int8(1).int64(0x99).string("tablecdc_ddl").int32(content.length).raw(content).bytes();
        LogicalMessage decoded = (LogicalMessage) PgOutputParser.parse(bytes);
        assertTrue(decoded.transactional());
        assertEquals(Lsn.of(0x99), decoded.lsn());
        assertEquals("tablecdc_ddl", decoded.prefix());
        assertArrayEquals(content, decoded.content());
        assertEquals(new LogicalMessage(1, Lsn.of(0x99), "tablecdc_ddl", content), decoded);
        assertFalse(((LogicalMessage) PgOutputParser.parse(message('M').int8(0).int64(1).string("p").int32(0).bytes())).transactional());
    }

    @Test
    void readsOnlyBetweenPositionAndLimitOfPgjdbcsFrameBuffer() {
        // pgjdbc wraps the whole XLogData frame and positions the buffer at the payload
        byte[] payload = message('O').int64(5).string("n").bytes();
        byte[] frame = new byte[25 + payload.length + 3];
        frame[0] = 'w';
        System.arraycopy(payload, 0, frame, 25, payload.length);
        frame[frame.length - 1] = 'X';
        ByteBuffer buffer = ByteBuffer.wrap(frame, 25, payload.length);
        assertEquals(new Origin(Lsn.of(5), "n"), PgOutputParser.parse(buffer));
        assertEquals(25, buffer.position(), "the caller's buffer position moved");
    }

    @Test
    void truncatedMessageFailsNamingTheMessageType() {
        byte[] bytes = message('B').int64(1).bytes();
        PgOutputParseException e = assertThrows(PgOutputParseException.class, () -> PgOutputParser.parse(bytes));
        assertTrue(e.getMessage().contains("'B'"), e.getMessage());
    }

    @Test
    void textValueLongerThanTheMessageFails() {
        byte[] bytes = message('I').int32(1).int8('N').int16(1).int8('t').int32(100).raw(new byte[] {'a'}).bytes();
        assertThrows(PgOutputParseException.class, () -> PgOutputParser.parse(bytes));
    }

    @Test
    void unterminatedStringFails() {
        byte[] bytes = message('Y').int32(1).raw(new byte[] {'a', 'b'}).bytes();
        assertThrows(PgOutputParseException.class, () -> PgOutputParser.parse(bytes));
    }

    @Test
    void trailingBytesFailSoThatAMisreadFieldIsNotSilentlyIgnored() {
        byte[] bytes = message('C').int8(0).int64(1).int64(2).int64(3).int8(0).bytes();
        assertThrows(PgOutputParseException.class, () -> PgOutputParser.parse(bytes));
    }

    @Test
    void streamingMessagesOfProtocolVersion2FailWithAdvice() {
        PgOutputParseException e = assertThrows(PgOutputParseException.class,
                () -> PgOutputParser.parse(message('S').int32(5).int8(1).bytes()));
        assertTrue(e.getMessage().contains("proto_version 1"), e.getMessage());
        assertThrows(PgOutputParseException.class, () -> PgOutputParser.parse(new byte[0]));
        assertThrows(PgOutputParseException.class, () -> PgOutputParser.parse(new byte[] {'Z'}));
    }

    @Test
    void relationCacheReturnsTheReplacedRelationSoThatSchemaChangesAreSeen() {
        RelationCache cache = new RelationCache();
        Relation v1 = new Relation(9, "public", "t", ReplicaIdentity.DEFAULT, List.of(new Column(1, "id", 23, -1)));
        Relation v2 = new Relation(9, "public", "t", ReplicaIdentity.DEFAULT,
                List.of(new Column(1, "id", 23, -1), new Column(0, "added", 25, -1)));
        assertTrue(cache.accept(v1).isEmpty());
        assertEquals(v1, cache.accept(v2).orElseThrow());
        assertEquals(v2, cache.get(9));
        assertTrue(cache.accept(new Begin(Lsn.of(1), INSTANT, 1)).isEmpty());
        cache.accept(new Type(77, "public", "mood"));
        assertEquals("mood", cache.type(77).orElseThrow().name());
        assertEquals(1, cache.size());
    }

    @Test
    void relationCacheRefusesAChangeOfAnUndescribedRelation() {
        RelationCache cache = new RelationCache();
        PgOutputParseException e = assertThrows(PgOutputParseException.class, () -> cache.get(123));
        assertTrue(e.getMessage().contains("123"));
        assertTrue(cache.find(123).isEmpty());
        assertInstanceOf(RelationCache.class, cache);
    }
}
