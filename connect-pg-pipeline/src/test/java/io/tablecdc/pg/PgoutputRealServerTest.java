package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.tablecdc.common.TablecdcTypes;
import io.tablecdc.pg.PgoutputServer.Captured;
import io.tablecdc.pg.convert.RelationSchema;
import io.tablecdc.pg.convert.ValueConverter;
import io.tablecdc.pg.wire.PgOutputMessage;
import io.tablecdc.pg.wire.PgOutputMessage.Begin;
import io.tablecdc.pg.wire.PgOutputMessage.Commit;
import io.tablecdc.pg.wire.PgOutputMessage.Delete;
import io.tablecdc.pg.wire.PgOutputMessage.Insert;
import io.tablecdc.pg.wire.PgOutputMessage.LogicalMessage;
import io.tablecdc.pg.wire.PgOutputMessage.Relation;
import io.tablecdc.pg.wire.PgOutputMessage.ReplicaIdentity;
import io.tablecdc.pg.wire.PgOutputMessage.Truncate;
import io.tablecdc.pg.wire.PgOutputMessage.Type;
import io.tablecdc.pg.wire.PgOutputMessage.Update;
import io.tablecdc.pg.wire.RelationCache;
import io.tablecdc.pg.wire.TupleValue;

/**
 * The parser and the converter against what a real PostgreSQL 17 sends: every message kind of protocol
 * version 1, and every supported type compared with what the server itself computes for the same value.
 * Captured streams are written to {@code target/pgoutput-capture/} as hex (the source of the test vectors
 * under {@code src/test/resources/pgoutput/}).
 */
class PgoutputRealServerTest {
    private static final String PUBLICATION = "capture_pub";
    private static PgoutputServer pg;

    @BeforeAll
    static void startPostgres() throws Exception {
        pg = PgoutputServer.start("pgoutput-server");
        pg.execute(
                "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
                "CREATE TABLE t_a (id int PRIMARY KEY, v text)",
                "CREATE TABLE t_b (id bigint PRIMARY KEY, v text)",
                "CREATE TABLE t_toast (id int PRIMARY KEY, small text, big text)",
                "ALTER TABLE t_toast ALTER COLUMN big SET STORAGE EXTERNAL",
                "CREATE TABLE t_full (id int PRIMARY KEY, small text, big text)",
                "ALTER TABLE t_full ALTER COLUMN big SET STORAGE EXTERNAL",
                "ALTER TABLE t_full REPLICA IDENTITY FULL",
                "CREATE TABLE t_evolving (id int PRIMARY KEY, a text)",
                "CREATE TABLE tz_probe (id int PRIMARY KEY, at timestamptz)",
                "CREATE TABLE style_probe (id int PRIMARY KEY, i interval, b bytea, b_arr bytea[])",
                """
                CREATE TABLE all_types (
                  id int PRIMARY KEY, c_int2 int2, c_int8 int8, c_num numeric(12,3), c_num_free numeric,
                  c_num_neg numeric(3,-2), c_float4 float4, c_float8 float8, c_bool bool, c_text text,
                  c_varchar varchar(20), c_bpchar char(5), c_name name, c_bytea bytea, c_uuid uuid, c_json json,
                  c_jsonb jsonb, c_date date, c_time time, c_timetz timetz, c_ts timestamp, c_tstz timestamptz,
                  c_interval interval, c_int_arr int4[], c_text_arr text[], c_num_arr numeric(6,2)[],
                  c_tstz_arr timestamptz[], c_bool_arr bool[], c_mood mood, c_mood_arr mood[])
                """,
                "CREATE PUBLICATION " + PUBLICATION + " FOR ALL TABLES");
    }

    @AfterAll
    static void stopPostgres() throws Exception {
        if (pg != null) {
            pg.close();
        }
    }

    private static List<Captured> capture(String slot, String zone, PgoutputServer.SqlWork work) throws Exception {
        List<Captured> captured = pg.capture(slot, PUBLICATION, zone, work);
        Path dir = Path.of("target", "pgoutput-capture");
        Files.createDirectories(dir);
        List<String> lines = new ArrayList<>();
        for (Captured c : captured) {
            lines.add("# " + c.message().getClass().getSimpleName() + " received at " + c.receivedAt());
            lines.add(c.hex());
        }
        Files.write(dir.resolve(slot + ".hex"), lines);
        return captured;
    }

    private static List<PgOutputMessage> messages(List<Captured> captured) {
        // the last message is the capture's own end marker
        return captured.subList(0, captured.size() - 1).stream().map(Captured::message).toList();
    }

    private static long oid(String table) throws Exception {
        try (Connection c = pg.connect(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT '" + table + "'::regclass::oid")) {
            rs.next();
            return rs.getLong(1);
        }
    }

    private static List<String> kinds(List<PgOutputMessage> messages) {
        return messages.stream().map(m -> m.getClass().getSimpleName()).toList();
    }

    @Test
    void multiTableTransactionDecodesEveryChangeInCommitOrder() throws Exception {
        long[] xid = new long[1];
        List<PgOutputMessage> messages = messages(capture("multi_table", "UTC", server -> {
            try (Connection c = server.connect(); Statement s = c.createStatement()) {
                c.setAutoCommit(false);
                s.execute("INSERT INTO t_a VALUES (1, 'one')");
                s.execute("INSERT INTO t_b VALUES (10000000000, 'big')");
                s.execute("UPDATE t_a SET id = 2 WHERE id = 1");
                s.execute("UPDATE t_b SET v = 'bigger'");
                s.execute("DELETE FROM t_a WHERE id = 2");
                try (ResultSet rs = s.executeQuery("SELECT txid_current()")) {
                    rs.next();
                    xid[0] = rs.getLong(1);
                }
                c.commit();
            }
        }));
        assertEquals(List.of("Begin", "Relation", "Insert", "Relation", "Insert", "Update", "Update", "Delete", "Commit"), kinds(messages));
        Begin begin = (Begin) messages.get(0);
        Commit commit = (Commit) messages.get(8);
        assertEquals(xid[0], begin.xid());
        assertEquals(begin.finalLsn(), commit.commitLsn());
        assertTrue(commit.endLsn().isAfter(commit.commitLsn()));
        assertEquals(begin.commitTime(), commit.commitTime());

        long aOid = oid("t_a");
        long bOid = oid("t_b");
        Relation a = (Relation) messages.get(1);
        assertEquals(aOid, a.oid());
        assertEquals("public.t_a", a.qualifiedName());
        assertEquals(ReplicaIdentity.DEFAULT, a.replicaIdentity());
        assertEquals(List.of(new PgOutputMessage.Column(1, "id", 23, -1), new PgOutputMessage.Column(0, "v", 25, -1)), a.columns());
        assertEquals(bOid, ((Relation) messages.get(3)).oid());

        Insert insert = (Insert) messages.get(2);
        assertEquals(aOid, insert.relationOid());
        assertEquals(List.of(TupleValue.text("1"), TupleValue.text("one")), insert.newTuple().values());

        Update keyChange = (Update) messages.get(5);
        assertNotNull(keyChange.oldTuple(), "a key change carries the old key");
        assertFalse(keyChange.oldTuple().full());
        assertEquals(List.of(TupleValue.text("1"), TupleValue.NULL), keyChange.oldTuple().tuple().values());
        assertEquals(List.of(TupleValue.text("2"), TupleValue.text("one")), keyChange.newTuple().values());

        Update valueChange = (Update) messages.get(6);
        assertEquals(bOid, valueChange.relationOid());
        assertNull(valueChange.oldTuple(), "an update that keeps the key carries no old tuple");

        Delete delete = (Delete) messages.get(7);
        assertFalse(delete.oldTuple().full());
        assertEquals(TupleValue.text("2"), delete.oldTuple().tuple().get(0));

        RelationCache cache = new RelationCache();
        messages.forEach(cache::accept);
        RelationSchema bSchema = RelationSchema.of(cache.get(bOid));
        Struct row = bSchema.row(valueChange.newTuple(), valueChange.oldTuple()).value();
        assertEquals(10_000_000_000L, bSchema.key(row).get("id"));
        assertEquals("bigger", row.get("v"));
    }

    @Test
    void multiTableTruncateNamesEveryTableAndItsOptions() throws Exception {
        List<PgOutputMessage> messages = messages(capture("truncate", "UTC", server -> server.execute(
                "INSERT INTO t_a VALUES (5, 'x')",
                "TRUNCATE t_a, t_b RESTART IDENTITY",
                "TRUNCATE t_a CASCADE")));
        // TRUNCATE gives the tables new storage, which invalidates what the walsender sent: it describes
        // every truncated relation again before the Truncate
        assertEquals(List.of("Begin", "Relation", "Insert", "Commit",
                "Begin", "Relation", "Relation", "Truncate", "Commit",
                "Begin", "Relation", "Truncate", "Commit"), kinds(messages));
        Truncate both = (Truncate) messages.get(7);
        assertEquals(Set.of(oid("t_a"), oid("t_b")), Set.copyOf(both.relationOids()));
        assertEquals(2, both.relationOids().size());
        assertTrue(both.restartIdentity());
        assertFalse(both.cascade());
        Truncate cascade = (Truncate) messages.get(11);
        assertEquals(List.of(oid("t_a")), cascade.relationOids());
        assertTrue(cascade.cascade());
        assertFalse(cascade.restartIdentity());
    }

    @Test
    void logicalMessagesAreTransactionalInsideTheirTransactionAndImmediateOutside() throws Exception {
        List<PgOutputMessage> messages = messages(capture("messages", "UTC", server -> {
            try (Connection c = server.connect(); Statement s = c.createStatement()) {
                c.setAutoCommit(false);
                s.execute("INSERT INTO t_a VALUES (7, 'with message')");
                s.execute("SELECT pg_logical_emit_message(true, 'tablecdc_ddl', 'ALTER TABLE ✓')");
                c.commit();
            }
            server.execute("SELECT pg_logical_emit_message(false, 'binary', '\\x00ff00'::bytea)");
        }));
        assertEquals(List.of("Begin", "Relation", "Insert", "LogicalMessage", "Commit", "LogicalMessage"), kinds(messages));
        LogicalMessage inside = (LogicalMessage) messages.get(3);
        assertTrue(inside.transactional());
        assertEquals("tablecdc_ddl", inside.prefix());
        assertEquals("ALTER TABLE ✓", inside.contentText());
        // a transactional message's LSN is the end of its WAL record: at most the commit record's start
        assertFalse(inside.lsn().isAfter(((Commit) messages.get(4)).commitLsn()));
        LogicalMessage outside = (LogicalMessage) messages.get(5);
        assertFalse(outside.transactional());
        assertEquals("binary", outside.prefix());
        assertArrayEquals(new byte[] {0, (byte) 0xFF, 0}, outside.content());
    }

    @Test
    void transactionReplayedFromAnotherNodeCarriesItsOrigin() throws Exception {
        List<PgOutputMessage> messages = messages(capture("origin", "UTC", server -> {
            server.execute("SELECT pg_replication_origin_create('upstream_node')");
            try (Connection c = server.connect(); Statement s = c.createStatement()) {
                s.execute("SELECT pg_replication_origin_session_setup('upstream_node')");
                c.setAutoCommit(false);
                s.execute("SELECT pg_replication_origin_xact_setup('0/ABCDEF12', now())");
                s.execute("INSERT INTO t_a VALUES (42, 'replayed')");
                c.commit();
                c.setAutoCommit(true);
                s.execute("SELECT pg_replication_origin_session_reset()");
            }
        }));
        assertEquals(List.of("Begin", "Origin", "Relation", "Insert", "Commit"), kinds(messages));
        PgOutputMessage.Origin origin = (PgOutputMessage.Origin) messages.get(1);
        assertEquals("upstream_node", origin.name());
        assertEquals(io.tablecdc.pg.wire.Lsn.parse("0/ABCDEF12"), origin.originLsn());
    }

    @Test
    void relationIsSentAgainWhenATableGainsAColumn() throws Exception {
        List<PgOutputMessage> messages = messages(capture("evolving", "UTC", server -> server.execute(
                "INSERT INTO t_evolving VALUES (1, 'a')",
                "ALTER TABLE t_evolving ADD COLUMN b numeric(5,2)",
                "INSERT INTO t_evolving VALUES (2, 'a', 1.5)")));
        assertEquals(List.of("Begin", "Relation", "Insert", "Commit", "Begin", "Relation", "Insert", "Commit"), kinds(messages));
        RelationCache cache = new RelationCache();
        assertTrue(cache.accept(messages.get(1)).isEmpty());
        Relation before = (Relation) messages.get(1);
        Relation after = (Relation) messages.get(5);
        assertEquals(before, cache.accept(after).orElseThrow(), "the cache hands back the replaced relation");
        assertEquals(3, after.columns().size());
        Struct row = RelationSchema.of(after).row(((Insert) messages.get(6)).newTuple()).value();
        assertEquals(new BigDecimal("1.50"), row.get("b"));
        assertEquals("5", RelationSchema.of(after).valueSchema().field("b").schema().parameters()
                .get(ValueConverter.DECIMAL_PRECISION_PARAMETER), "numeric(5,2) keeps its precision through the typmod");
    }

    @Test
    void unchangedToastIsMarkedUnderDefaultIdentityAndFilledFromTheOldRowUnderFull() throws Exception {
        String big = "repeat(md5(random()::text), 400)"; // 12800 bytes stored out of line, uncompressed
        List<PgOutputMessage> messages = messages(capture("toast", "UTC", server -> server.execute(
                "INSERT INTO t_toast VALUES (1, 's', " + big + ")",
                "INSERT INTO t_full VALUES (1, 's', " + big + ")",
                "UPDATE t_toast SET small = 't'",
                "UPDATE t_full SET small = 't'")));
        assertEquals(List.of("Begin", "Relation", "Insert", "Commit", "Begin", "Relation", "Insert", "Commit",
                "Begin", "Update", "Commit", "Begin", "Update", "Commit"), kinds(messages));
        String toastBig;
        String fullBig;
        try (Connection c = pg.connect(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT (SELECT big FROM t_toast), (SELECT big FROM t_full)")) {
            rs.next();
            toastBig = rs.getString(1);
            fullBig = rs.getString(2);
        }
        Relation toast = (Relation) messages.get(1);
        Update toastUpdate = (Update) messages.get(9);
        assertNull(toastUpdate.oldTuple());
        assertEquals(TupleValue.UNCHANGED_TOAST, toastUpdate.newTuple().get(2));
        RelationSchema.Row toastRow = RelationSchema.of(toast).row(toastUpdate.newTuple(), toastUpdate.oldTuple());
        assertEquals(Set.of("big"), toastRow.unchangedToastColumns());
        assertEquals("t", toastRow.value().get("small"));
        assertEquals(toastBig, ((TupleValue.Text) ((Insert) messages.get(2)).newTuple().get(2)).value());

        Relation full = (Relation) messages.get(5);
        assertEquals(ReplicaIdentity.FULL, full.replicaIdentity());
        assertTrue(full.columns().stream().allMatch(PgOutputMessage.Column::key), "FULL flags every column");
        Update fullUpdate = (Update) messages.get(12);
        assertTrue(fullUpdate.oldTuple().full());
        assertEquals(TupleValue.UNCHANGED_TOAST, fullUpdate.newTuple().get(2));
        RelationSchema fullSchema = RelationSchema.of(full, List.of("id"));
        RelationSchema.Row fullRow = fullSchema.row(fullUpdate.newTuple(), fullUpdate.oldTuple());
        assertTrue(fullRow.unchangedToastColumns().isEmpty());
        assertEquals(fullBig, fullRow.value().get("big"));
        assertEquals("t", fullRow.value().get("small"));
    }

    @Test
    void timestamptzInEverySessionOffsetShapeIsTheSameInstantAsOnTheServer() throws Exception {
        pg.execute("INSERT INTO tz_probe VALUES (1, '2024-05-06 07:08:09.123456+00'), (2, '1900-01-01 00:00:00+00'),"
                + " (3, '0044-03-15 12:00:00+00 BC'), (4, '1969-12-31 23:59:59.999999+00')");
        Map<Integer, Long> truth = new HashMap<>();
        try (Connection c = pg.connect(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT id, (extract(epoch FROM at) * 1000000)::bigint FROM tz_probe")) {
            while (rs.next()) {
                truth.put(rs.getInt(1), rs.getLong(2));
            }
        }
        for (String zone : List.of("Asia/Kolkata", "America/Sao_Paulo", "Europe/Amsterdam", "UTC")) {
            String slot = "tz_" + zone.toLowerCase().replace('/', '_');
            List<PgOutputMessage> messages = messages(capture(slot, zone,
                    server -> server.execute("UPDATE tz_probe SET at = at")));
            RelationCache cache = new RelationCache();
            int seen = 0;
            for (PgOutputMessage message : messages) {
                cache.accept(message);
                if (message instanceof Update update) {
                    Struct row = RelationSchema.of(cache.get(update.relationOid())).row(update.newTuple()).value();
                    int id = (Integer) row.get("id");
                    assertEquals(truth.get(id), row.get("at"), zone + " row " + id + ": " + update.newTuple().get(1));
                    seen++;
                }
            }
            assertEquals(4, seen, zone);
        }
    }

    @Test
    void intervalsAndByteaReadTheSameWhateverOutputStyleTheDatabaseSets() throws Exception {
        pg.execute("""
                INSERT INTO style_probe VALUES
                  (1, '1 year 2 mons 3 days 04:05:06.5', '\\x00015c7f80ff', '{"\\\\x00ff",NULL}'),
                  (2, '-1 year -2 mons +3 days -04:05:06', '', '{}'),
                  (3, '1 day -1 hour', 'a\\\\b', NULL),
                  (4, '-0.000001 seconds', NULL, NULL),
                  (5, '100 hours 59 minutes', NULL, NULL),
                  (6, '0', NULL, NULL),
                  (7, '-1 mon', NULL, NULL),
                  (8, '-178000000 years', NULL, NULL)""");
        Map<Integer, String[]> truth = new HashMap<>();
        try (Connection c = pg.connect(); Statement s = c.createStatement()) {
            s.execute("SET intervalstyle = iso_8601");
            try (ResultSet rs = s.executeQuery("SELECT id, i::text, encode(b, 'hex') FROM style_probe")) {
                while (rs.next()) {
                    truth.put(rs.getInt(1), new String[] {rs.getString(2), rs.getString(3)});
                }
            }
        }
        // database settings apply to the walsender's session too: both styles of each type must read the same
        List<String[]> styles = List.of(new String[] {"postgres", "hex"}, new String[] {"iso_8601", "escape"});
        for (String[] style : styles) {
            pg.execute("ALTER DATABASE postgres SET intervalstyle = " + style[0], "ALTER DATABASE postgres SET bytea_output = " + style[1]);
            List<PgOutputMessage> messages;
            try {
                messages = messages(capture("style_" + style[0], "UTC", server -> server.execute("UPDATE style_probe SET i = i")));
            } finally {
                pg.execute("ALTER DATABASE postgres RESET intervalstyle", "ALTER DATABASE postgres RESET bytea_output");
            }
            RelationCache cache = new RelationCache();
            int seen = 0;
            for (PgOutputMessage message : messages) {
                cache.accept(message);
                if (message instanceof Update update) {
                    Struct row = RelationSchema.of(cache.get(update.relationOid())).row(update.newTuple()).value();
                    int id = (Integer) row.get("id");
                    String at = style[0] + "/" + style[1] + " row " + id + " " + update.newTuple().values();
                    assertEquals(truth.get(id)[0], row.get("i"), at);
                    byte[] bytes = (byte[]) row.get("b");
                    assertEquals(truth.get(id)[1], bytes == null ? null : HexFormat.of().formatHex(bytes), at);
                    if (id == 1) {
                        @SuppressWarnings("unchecked")
                        List<byte[]> array = (List<byte[]>) row.get("b_arr");
                        assertArrayEquals(new byte[] {0, (byte) 0xFF}, array.get(0), at);
                        assertNull(array.get(1), at);
                    }
                    seen++;
                }
            }
            assertEquals(8, seen, style[0]);
        }
    }

    @Test
    void everySupportedTypeConvertsToWhatTheServerItselfComputes() throws Exception {
        List<PgOutputMessage> messages = messages(capture("all_types", "Asia/Kolkata", server -> server.execute(
                """
                INSERT INTO all_types VALUES (1, -32768, 9223372036854775807, 123456789.123,
                  '3.14159265358979323846264338327950288419716939937510', 12345, 3.4028235e38, '-Infinity', true,
                  E'line1\\nline2 "q" \\\\ ☃', 'abc', 'ab', 'pg_name', '\\x00ff5c', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
                  '{"a": [1, 2.50, null]}', '{"b": {"c": "d"}, "a": 1}', '2024-02-29', '24:00:00', '12:34:56.789+05:30',
                  '2024-05-06 07:08:09.123456', '2024-05-06 07:08:09.123456+00', '1 year 2 mons -3 days 04:05:06.789',
                  '{1,NULL,3}', ARRAY['a b', 'NULL', NULL, 'q"uo\\te', 'x,y', '{}', ''], '{1.5,NaN,-2.25}',
                  '{"2000-01-01 00:00:00+00",infinity}', '{t,f,NULL}', 'happy', '{happy,sad}')
                """,
                """
                INSERT INTO all_types VALUES (2, 32767, -9223372036854775808, 'NaN', '-Infinity', -99949, 'NaN', 1e-300, false,
                  '', '', '', '', '', '00000000-0000-0000-0000-000000000000', '[]', '"str"', '0044-03-15 BC',
                  '00:00:00.000001', '00:00:00-03', '0044-03-15 12:00:00 BC', '1969-12-31 23:59:59.999999+00',
                  '-00:00:00.000001', '[0:1]={7,8}', '{}', '{}', NULL, '{}', 'sad', '{}')
                """,
                "INSERT INTO all_types (id, c_date, c_ts, c_tstz) VALUES (3, 'infinity', '-infinity', 'infinity')")));

        // enum types are not built in: pgoutput describes them before the relation
        List<Type> types = messages.stream().filter(Type.class::isInstance).map(Type.class::cast).toList();
        assertTrue(types.stream().anyMatch(t -> t.name().equals("mood") && t.namespace().equals("public")), types.toString());

        RelationCache cache = new RelationCache();
        Map<Integer, Struct> rows = new HashMap<>();
        RelationSchema schema = null;
        for (PgOutputMessage message : messages) {
            cache.accept(message);
            if (message instanceof Insert insert) {
                schema = RelationSchema.of(cache.get(insert.relationOid()));
                Struct row = schema.row(insert.newTuple()).value();
                row.validate();
                rows.put((Integer) row.get("id"), row);
            }
        }
        assertEquals(Set.of(1, 2, 3), rows.keySet());

        // schemas
        assertEquals(List.of("id"), schema.keyColumns());
        assertEquals("3", schema.valueSchema().field("c_num").schema().parameters().get(Decimal.SCALE_FIELD));
        assertEquals("12", schema.valueSchema().field("c_num").schema().parameters().get(ValueConverter.DECIMAL_PRECISION_PARAMETER));
        assertEquals("5", schema.valueSchema().field("c_num_neg").schema().parameters().get(ValueConverter.DECIMAL_PRECISION_PARAMETER));
        assertTrue(TablecdcTypes.is(schema.valueSchema().field("c_uuid").schema(), TablecdcTypes.UUID));
        assertTrue(TablecdcTypes.is(schema.valueSchema().field("c_jsonb").schema(), TablecdcTypes.JSON));
        assertTrue(TablecdcTypes.is(schema.valueSchema().field("c_tstz").schema(), TablecdcTypes.MICRO_TIMESTAMP));
        assertTrue(TablecdcTypes.is(schema.valueSchema().field("c_time").schema(), TablecdcTypes.MICRO_TIME));
        assertEquals(Decimal.LOGICAL_NAME, schema.valueSchema().field("c_num_arr").schema().valueSchema().name());

        Struct r1 = rows.get(1);
        assertEquals((short) -32768, r1.get("c_int2"));
        assertEquals(Long.MAX_VALUE, r1.get("c_int8"));
        assertEquals(new BigDecimal("123456789.123"), r1.get("c_num"));
        assertEquals("3.14159265358979323846264338327950288419716939937510", r1.get("c_num_free"));
        assertEquals(new BigDecimal("12300"), r1.get("c_num_neg"));
        assertEquals(3.4028235e38f, r1.get("c_float4"));
        assertEquals(Double.NEGATIVE_INFINITY, r1.get("c_float8"));
        assertEquals(true, r1.get("c_bool"));
        assertEquals("line1\nline2 \"q\" \\ ☃", r1.get("c_text"));
        assertEquals("abc", r1.get("c_varchar"));
        assertEquals("ab   ", r1.get("c_bpchar"));
        assertEquals("pg_name", r1.get("c_name"));
        assertArrayEquals(new byte[] {0, (byte) 0xFF, 0x5C}, (byte[]) r1.get("c_bytea"));
        assertEquals("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", r1.get("c_uuid"));
        assertEquals("{\"a\": [1, 2.50, null]}", r1.get("c_json"));
        assertEquals("{\"a\": 1, \"b\": {\"c\": \"d\"}}", r1.get("c_jsonb"));
        assertEquals(86_400_000_000L, r1.get("c_time"));
        assertEquals("12:34:56.789+05:30", r1.get("c_timetz"));
        assertEquals("P1Y2M-3DT4H5M6.789S", r1.get("c_interval"));
        assertEquals(Arrays.asList(1, null, 3), r1.get("c_int_arr"));
        assertEquals(Arrays.asList("a b", "NULL", null, "q\"uo\\te", "x,y", "{}", ""), r1.get("c_text_arr"));
        assertEquals(Arrays.asList(new BigDecimal("1.50"), null, new BigDecimal("-2.25")), r1.get("c_num_arr"));
        // infinity is the type's largest value, as the server stores it, never null
        assertEquals(Arrays.asList(946_684_800_000_000L, Long.MAX_VALUE), r1.get("c_tstz_arr"));
        assertEquals(Arrays.asList(true, false, null), r1.get("c_bool_arr"));
        assertEquals("happy", r1.get("c_mood"));
        assertEquals("{happy,sad}", r1.get("c_mood_arr"), "arrays of non-built-in types stay text");

        Struct r2 = rows.get(2);
        assertEquals((short) 32767, r2.get("c_int2"));
        assertEquals(Long.MIN_VALUE, r2.get("c_int8"));
        assertNull(r2.get("c_num"), "NaN has no Decimal");
        assertEquals("-Infinity", r2.get("c_num_free"));
        assertEquals(new BigDecimal("-99900"), r2.get("c_num_neg"));
        assertTrue(Float.isNaN((Float) r2.get("c_float4")));
        assertEquals(1e-300, r2.get("c_float8"));
        assertEquals("", r2.get("c_text"));
        assertEquals("     ", r2.get("c_bpchar"));
        assertArrayEquals(new byte[0], (byte[]) r2.get("c_bytea"));
        assertEquals("[]", r2.get("c_json"));
        assertEquals("\"str\"", r2.get("c_jsonb"));
        assertEquals(1L, r2.get("c_time"));
        assertEquals("00:00:00-03", r2.get("c_timetz"));
        assertEquals("PT-0.000001S", r2.get("c_interval"));
        assertEquals(List.of(7, 8), r2.get("c_int_arr"));
        assertEquals(List.of(), r2.get("c_text_arr"));
        assertNull(r2.get("c_tstz_arr"));

        Struct r3 = rows.get(3);
        assertEquals(new java.util.Date(Integer.MAX_VALUE * 86_400_000L), r3.get("c_date"));
        assertEquals(Long.MIN_VALUE, r3.get("c_ts"));
        assertEquals(Long.MAX_VALUE, r3.get("c_tstz"));
        assertNull(r3.get("c_int2"));
        assertNull(r3.get("c_text_arr"));

        // temporal values, intervals and bytes against the server's own arithmetic
        try (Connection c = pg.connect(); Statement s = c.createStatement()) {
            s.execute("SET intervalstyle = iso_8601");
            try (ResultSet rs = s.executeQuery("""
                    SELECT id,
                      CASE WHEN c_date = 'infinity' THEN 2147483647 WHEN c_date = '-infinity' THEN -2147483648
                        ELSE c_date - date '1970-01-01' END,
                      (extract(epoch FROM c_time) * 1000000)::bigint,
                      CASE WHEN c_ts = 'infinity' THEN 9223372036854775807 WHEN c_ts = '-infinity' THEN -9223372036854775808
                        ELSE (extract(epoch FROM c_ts) * 1000000)::bigint END,
                      CASE WHEN c_tstz = 'infinity' THEN 9223372036854775807 WHEN c_tstz = '-infinity' THEN -9223372036854775808
                        ELSE (extract(epoch FROM c_tstz) * 1000000)::bigint END,
                      c_interval::text, encode(c_bytea, 'hex'), c_num::text
                    FROM all_types ORDER BY id""")) {
                while (rs.next()) {
                    Struct row = rows.get(rs.getInt(1));
                    String at = "row " + rs.getInt(1);
                    Object days = rs.getObject(2);
                    java.util.Date date = (java.util.Date) row.get("c_date");
                    assertEquals(days == null ? null : ((Number) days).longValue() * 86_400_000L, date == null ? null : date.getTime(), at + " date");
                    assertEquals(rs.getObject(3), row.get("c_time"), at + " time");
                    assertEquals(rs.getObject(4), row.get("c_ts"), at + " timestamp");
                    assertEquals(rs.getObject(5), row.get("c_tstz"), at + " timestamptz");
                    assertEquals(rs.getString(6), row.get("c_interval"), at + " interval");
                    byte[] bytes = (byte[]) row.get("c_bytea");
                    assertEquals(rs.getString(7), bytes == null ? null : HexFormat.of().formatHex(bytes), at + " bytea");
                    String num = rs.getString(8);
                    if (num != null && !num.equals("NaN")) {
                        assertEquals(new BigDecimal(num), row.get("c_num"), at + " numeric");
                    }
                }
            }
        }
        assertInstanceOf(Integer.class, r1.get("id"));
    }
}
