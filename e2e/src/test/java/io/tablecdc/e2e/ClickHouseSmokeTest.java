package io.tablecdc.e2e;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.ServerException;
import com.clickhouse.client.api.data_formats.ClickHouseBinaryFormatReader;
import com.clickhouse.client.api.insert.InsertResponse;
import com.clickhouse.client.api.insert.InsertSettings;
import com.clickhouse.client.api.query.GenericRecord;
import com.clickhouse.client.api.query.QueryResponse;
import com.clickhouse.client.api.query.QuerySettings;
import com.clickhouse.data.ClickHouseFormat;
import io.tablecdc.e2e.clickhouse.LocalClickHouse;
import io.tablecdc.e2e.objectstore.LocalObjectStore;
import io.tablecdc.e2e.stack.LocalStack;
import org.apache.avro.Conversions;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.file.DataFileWriter;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecordBuilder;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.services.s3.S3Client;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.LocalDate;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The ClickHouse engine and the object store of the local stack, driven the way the sink drives a real
 * server: client-v2 over HTTP, ReplacingMergeTree with FINAL, and Avro stage files loaded by {@code s3()}
 * (pull) and by {@code INSERT … FORMAT Avro} (push).
 */
class ClickHouseSmokeTest {

    private static final Schema STAGE_SCHEMA = new Schema.Parser().parse("""
            {"type": "record", "name": "StageRow", "namespace": "io.tablecdc.e2e", "fields": [
              {"name": "id", "type": "long"},
              {"name": "name", "type": "string"},
              {"name": "note", "type": ["null", "string"], "default": null},
              {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 18, "scale": 4}},
              {"name": "updated_at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
              {"name": "birthday", "type": {"type": "int", "logicalType": "date"}}
            ]}""");
    private static final String STAGE_COLUMNS = "id Int64, name String, note Nullable(String), amount Decimal(18, 4),"
            + " updated_at DateTime64(6, 'UTC'), birthday Date32";
    private static final Instant T1 = Instant.parse("2024-03-01T12:34:56.123456Z");
    private static final Instant T2 = Instant.parse("2025-12-31T23:59:59.999999Z");

    private static LocalClickHouse clickHouse;
    private static LocalObjectStore objectStore;
    private static Client client;

    @BeforeAll
    static void startStack() {
        // the engine is one per JVM: take the stack's (other tests may have started it already)
        LocalStack stack = LocalStack.get();
        long rssBefore = rssKiB();
        long t0 = System.nanoTime();
        clickHouse = stack.clickhouse();
        long engineMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        long rssEngine = rssKiB();
        t0 = System.nanoTime();
        objectStore = stack.objectStore();
        long storeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        System.out.printf("stack: engine ready in %d ms (RSS %d -> %d MiB, +%d MiB), object store in %d ms"
                        + " (RSS now %d MiB)%n", engineMillis, rssBefore / 1024, rssEngine / 1024,
                (rssEngine - rssBefore) / 1024, storeMillis, rssKiB() / 1024);

        client = new Client.Builder()
                .addEndpoint(clickHouse.httpUrl())
                .setUsername(clickHouse.user())
                .setPassword(clickHouse.password())
                .compressServerResponse(false)
                .build();
    }

    @AfterAll
    static void stopClient() {
        client.close();
        System.out.printf("stack: RSS at the end %d MiB%n", rssKiB() / 1024);
    }

    @Test
    void pingAnswers() {
        assertTrue(client.ping());
    }

    @Test
    void replacingMergeTreeResolvesUpdatesAndDeletesWithFinal() throws Exception {
        execute("""
                CREATE OR REPLACE TABLE rmt
                (id UInt64, name String, note Nullable(String), ver UInt64, is_deleted UInt8)
                ENGINE = ReplacingMergeTree(ver, is_deleted) ORDER BY id""");
        // keeps both inserts in separate parts, so FINAL (not a background merge) has to resolve the versions
        execute("SYSTEM STOP MERGES rmt");

        // version 1 of three rows, as RowBinary through client-v2's POJO serializer
        client.register(RmtRow.class, client.getTableSchema("rmt"));
        InsertResponse first = client.insert("rmt", List.of(
                new RmtRow(1, "one", "first", 1, 0),
                new RmtRow(2, "two", null, 1, 0),
                new RmtRow(3, "three", null, 1, 0))).get(30, TimeUnit.SECONDS);
        assertEquals(3, first.getWrittenRows());

        // then an update of 2, a delete of 3 and a stale version of 1, as JSONEachRow in another part
        String changes = """
                {"id": 2, "name": "two v2", "note": "updated", "ver": 2, "is_deleted": 0}
                {"id": 3, "name": "three", "note": null, "ver": 2, "is_deleted": 1}
                {"id": 1, "name": "one stale", "note": null, "ver": 0, "is_deleted": 0}
                """;
        InsertResponse second = client.insert("rmt", new ByteArrayInputStream(changes.getBytes(StandardCharsets.UTF_8)),
                ClickHouseFormat.JSONEachRow, new InsertSettings().setDeduplicationToken("rmt-batch-2"))
                .get(30, TimeUnit.SECONDS);
        assertEquals(3, second.getWrittenRows());

        List<GenericRecord> rows = client.queryAll("SELECT id, name, note, ver FROM rmt FINAL ORDER BY id");
        assertEquals(2, rows.size(), "the deleted row must not survive FINAL");
        assertEquals(1, rows.get(0).getLong("id"));
        assertEquals("one", rows.get(0).getString("name"), "an older version must not replace a newer one");
        assertEquals("first", rows.get(0).getString("note"));
        assertEquals(2, rows.get(1).getLong("id"));
        assertEquals("two v2", rows.get(1).getString("name"));
        assertEquals(2, rows.get(1).getLong("ver"));

        // the default reader: RowBinaryWithNamesAndTypes streamed through ClickHouseBinaryFormatReader
        List<String> read = new ArrayList<>();
        try (QueryResponse response = client.query("SELECT id, name, note FROM rmt FINAL ORDER BY id")
                .get(30, TimeUnit.SECONDS);
             ClickHouseBinaryFormatReader reader = client.newBinaryFormatReader(response)) {
            while (reader.hasNext()) {
                reader.next();
                read.add(reader.getLong("id") + ":" + reader.getString("name") + ":" + reader.getString("note"));
            }
        }
        assertEquals(List.of("1:one:first", "2:two v2:updated"), read);

        // without FINAL every inserted version is still there
        assertEquals(6, client.queryAll("SELECT count() AS c FROM rmt").getFirst().getLong("c"));
    }

    @Test
    void queryParametersAreBoundByTheEngine() {
        Map<String, Object> params = new LinkedHashMap<>();
        params.put("id", 42);
        params.put("name", "O'Hara; DROP TABLE x --");
        params.put("day", "2024-02-29");
        List<GenericRecord> rows = client.queryAll(
                "SELECT {id:UInt64} * 2 AS doubled, {name:String} AS name, toDayOfYear({day:Date}) AS doy", params);
        assertEquals(1, rows.size());
        assertEquals(84, rows.getFirst().getLong("doubled"));
        assertEquals("O'Hara; DROP TABLE x --", rows.getFirst().getString("name"));
        assertEquals(60, rows.getFirst().getLong("doy"));
    }

    @Test
    void settingsAndDatabaseApplyToOneRequestOnly() throws Exception {
        execute("CREATE DATABASE IF NOT EXISTS smoke_other");
        execute("CREATE OR REPLACE TABLE smoke_other.marker (x UInt8) ENGINE = Memory");
        QuerySettings scoped = new QuerySettings()
                .setDatabase("smoke_other")
                .serverSetting("max_threads", "1")
                // a setting the engine does not know must not fail the request
                .serverSetting("tablecdc_not_a_clickhouse_setting", "1");
        GenericRecord inside = client.queryAll("SELECT currentDatabase() AS db, getSetting('max_threads') AS threads,"
                + " (SELECT count() FROM marker) AS markers", scoped).getFirst();
        assertEquals("smoke_other", inside.getString("db"));
        assertEquals(1, inside.getLong("threads"));
        assertEquals(0, inside.getLong("markers"));

        GenericRecord after = client.queryAll("SELECT currentDatabase() AS db, getSetting('max_threads') AS threads")
                .getFirst();
        assertEquals("default", after.getString("db"));
        assertTrue(after.getLong("threads") != 1 || Runtime.getRuntime().availableProcessors() == 1,
                "max_threads of the previous request leaked into this one");
    }

    @Test
    void jvmKeepsItsSignalHandlersAfterTheEngineBoots() {
        // Compiled Java code turns a null dereference into SIGSEGV and lets the JVM's handler raise the
        // NullPointerException; with the engine's default handlers in place this loop kills the process.
        String[] values = {null, "x"};
        long nulls = 0;
        for (int i = 0; i < 500_000; i++) {
            try {
                nulls -= values[i & 1].length();
            } catch (NullPointerException e) {
                nulls++;
            }
        }
        assertEquals(0, nulls);
    }

    @Test
    void serverErrorsKeepTheirClickHouseCode() {
        assertEquals(60, serverError(() -> client.queryAll("SELECT * FROM no_such_table")).getCode()); // UNKNOWN_TABLE
        assertEquals(62, serverError(() -> client.queryAll("SELEKT 1")).getCode()); // SYNTAX_ERROR
        // the engine's own exception, raised while the query runs
        ServerException thrown = serverError(() ->
                client.queryAll("SELECT throwIf(number = 0, 'boom') FROM numbers(1)"));
        assertEquals(395, thrown.getCode());
        assertTrue(thrown.getMessage().contains("boom"), thrown.getMessage());
        // and the connection's session is still usable afterwards
        assertEquals(1, client.queryAll("SELECT 1 AS one").getFirst().getLong("one"));
    }

    @Test
    void avroStageFileLoadsFromTheObjectStoreWithS3() throws Exception {
        byte[] avro = stageFile();
        String key = "stage/smoke/batch-1.avro";
        try (S3Client s3 = objectStore.newClient()) {
            s3.putObject(b -> b.bucket(objectStore.bucket()).key(key), RequestBody.fromBytes(avro));
        }
        Map<String, Object> source = Map.of("url", objectStore.url(key),
                "access_key", objectStore.accessKey(), "secret_key", objectStore.secretKey());

        // the types ClickHouse infers from the Avro schema are the ones the sink's final tables use
        List<String> inferred = new ArrayList<>();
        for (GenericRecord column : client.queryAll(
                "DESCRIBE TABLE s3({url:String}, {access_key:String}, {secret_key:String}, 'Avro')", source)) {
            inferred.add(column.getString("name") + " " + column.getString("type"));
        }
        assertEquals(List.of("id Int64", "name String", "note Nullable(String)", "amount Decimal(18, 4)",
                "updated_at DateTime64(6)", "birthday Date32"), inferred);

        execute("CREATE OR REPLACE TABLE avro_pull (" + STAGE_COLUMNS + ") ENGINE = MergeTree ORDER BY id");
        client.execute("""
                INSERT INTO avro_pull
                SELECT id, name, note, amount, updated_at, birthday
                FROM s3({url:String}, {access_key:String}, {secret_key:String}, 'Avro')""", source)
                .get(30, TimeUnit.SECONDS).close();
        assertStageRows("avro_pull");
    }

    @Test
    void avroStageFileLoadsAsAnInsertBody() throws Exception {
        execute("CREATE OR REPLACE TABLE avro_push (" + STAGE_COLUMNS + ") ENGINE = MergeTree ORDER BY id");
        InsertResponse response = client
                .insert("avro_push", new ByteArrayInputStream(stageFile()), ClickHouseFormat.Avro)
                .get(30, TimeUnit.SECONDS);
        assertEquals(2, response.getWrittenRows());
        assertStageRows("avro_push");
    }

    @Test
    void largeRowBinaryInsertBodyLoadsWhole() throws Exception {
        execute("CREATE OR REPLACE TABLE big_insert (id Int64, note String) ENGINE = MergeTree ORDER BY id");
        // 20 000 RowBinary rows of about 60 bytes, over a MiB; inline in the statement, the engine would keep the
        // first 2 570 rows and drop the rest without an error
        ByteArrayOutputStream rb = new ByteArrayOutputStream();
        for (int i = 0; i < 20_000; i++) {
            long v = i;
            for (int b = 0; b < 8; b++) {
                rb.write((int) (v >>> (8 * b)) & 0xFF);
            }
            byte[] note = ("note-" + i + "-" + "x".repeat(40)).getBytes(StandardCharsets.UTF_8);
            rb.write(note.length);
            rb.write(note, 0, note.length);
        }
        InsertResponse response = client.insert("big_insert", new ByteArrayInputStream(rb.toByteArray()),
                ClickHouseFormat.RowBinary).get(60, TimeUnit.SECONDS);
        assertEquals(20_000, response.getWrittenRows());
        List<GenericRecord> rows = client.queryAll("SELECT count() AS n, sum(id) AS s, max(note) AS m FROM big_insert");
        assertEquals(20_000, rows.get(0).getLong("n"));
        assertEquals(19_999L * 20_000 / 2, rows.get(0).getLong("s"));
        assertEquals("note-9999-" + "x".repeat(40), rows.get(0).getString("m"));
    }

    @Test
    void largeAvroStageFileLoadsAsAnInsertBody() throws Exception {
        execute("CREATE OR REPLACE TABLE avro_push_large (" + STAGE_COLUMNS + ") ENGINE = MergeTree ORDER BY id");
        Schema amount = STAGE_SCHEMA.getField("amount").schema();
        Conversions.DecimalConversion decimals = new Conversions.DecimalConversion();
        ByteArrayOutputStream file = new ByteArrayOutputStream();
        try (DataFileWriter<GenericData.Record> writer = new DataFileWriter<>(new GenericDatumWriter<GenericData.Record>(STAGE_SCHEMA))) {
            writer.setCodec(org.apache.avro.file.CodecFactory.zstandardCodec(3));
            writer.create(STAGE_SCHEMA, file);
            for (long i = 0; i < 20_000; i++) {
                writer.append(new GenericRecordBuilder(STAGE_SCHEMA).set("id", i).set("name", "name-" + Long.toHexString(i * 0x9E3779B97F4A7C15L))
                        .set("note", i % 3 == 0 ? null : "note-" + i)
                        .set("amount", decimals.toBytes(new BigDecimal(i).movePointLeft(4), amount, amount.getLogicalType()))
                        .set("updated_at", micros(T1) + i).set("birthday", 7_000 + (int) (i % 1000)).build());
            }
        }
        // a stage file of the size the sink pushes (over 100 KB compressed), where inline data was cut short
        assertTrue(file.size() > 256 * 1024, "file of " + file.size() + " bytes");
        InsertResponse response = client.insert("avro_push_large", new ByteArrayInputStream(file.toByteArray()), ClickHouseFormat.Avro)
                .get(60, TimeUnit.SECONDS);
        assertEquals(20_000, response.getWrittenRows());
        List<GenericRecord> rows = client.queryAll("SELECT count() AS n, sum(id) AS s FROM avro_push_large");
        assertEquals(20_000, rows.get(0).getLong("n"));
        assertEquals(19_999L * 20_000 / 2, rows.get(0).getLong("s"));
    }

    private static void assertStageRows(String table) {
        List<GenericRecord> rows = client.queryAll("SELECT id, name, note, amount, updated_at, birthday,"
                + " toTypeName(amount) AS amount_type, toTypeName(updated_at) AS ts_type"
                + " FROM " + table + " ORDER BY id");
        assertEquals(2, rows.size());
        GenericRecord first = rows.get(0);
        assertEquals(1, first.getLong("id"));
        assertEquals("alpha", first.getString("name"));
        assertEquals("first note", first.getString("note"));
        assertEquals(new BigDecimal("12345.6789"), first.getBigDecimal("amount"));
        assertEquals(T1, first.getInstant("updated_at"));
        assertEquals(LocalDate.of(1990, 5, 17), first.getLocalDate("birthday"));
        assertEquals("Decimal(18, 4)", first.getString("amount_type"));
        assertEquals("DateTime64(6, 'UTC')", first.getString("ts_type"));
        GenericRecord second = rows.get(1);
        assertEquals(2, second.getLong("id"));
        assertEquals("beta", second.getString("name"));
        assertNull(second.getString("note"));
        assertEquals(new BigDecimal("-0.0001"), second.getBigDecimal("amount"));
        assertEquals(T2, second.getInstant("updated_at"));
        assertEquals(LocalDate.of(2000, 2, 29), second.getLocalDate("birthday"));
    }

    /** Two rows in an Avro container file, written as the sink writes a stage. */
    private static byte[] stageFile() throws IOException {
        Schema amount = STAGE_SCHEMA.getField("amount").schema();
        Conversions.DecimalConversion decimals = new Conversions.DecimalConversion();
        List<GenericData.Record> rows = List.of(
                new GenericRecordBuilder(STAGE_SCHEMA).set("id", 1L).set("name", "alpha").set("note", "first note")
                        .set("amount", decimals.toBytes(new BigDecimal("12345.6789"), amount, amount.getLogicalType()))
                        .set("updated_at", micros(T1))
                        .set("birthday", (int) LocalDate.of(1990, 5, 17).toEpochDay()).build(),
                new GenericRecordBuilder(STAGE_SCHEMA).set("id", 2L).set("name", "beta").set("note", null)
                        .set("amount", decimals.toBytes(new BigDecimal("-0.0001"), amount, amount.getLogicalType()))
                        .set("updated_at", micros(T2))
                        .set("birthday", (int) LocalDate.of(2000, 2, 29).toEpochDay()).build());
        assertTrue(amount.getLogicalType() instanceof LogicalTypes.Decimal);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (DataFileWriter<GenericData.Record> writer = new DataFileWriter<>(new GenericDatumWriter<>(STAGE_SCHEMA))) {
            writer.create(STAGE_SCHEMA, out);
            for (GenericData.Record row : rows) {
                writer.append(row);
            }
        }
        return out.toByteArray();
    }

    private static long micros(Instant instant) {
        return ChronoUnit.MICROS.between(Instant.EPOCH, instant);
    }

    private static void execute(String sql) throws Exception {
        client.execute(sql).get(30, TimeUnit.SECONDS).close();
    }

    /** client-v2 wraps the server's error in a ClientException; the ServerException is its cause. */
    private static ServerException serverError(Runnable call) {
        Throwable thrown = assertThrows(Exception.class, call::run);
        for (Throwable t = thrown; t != null; t = t.getCause()) {
            if (t instanceof ServerException server) {
                return server;
            }
        }
        throw new AssertionError("expected a ServerException, got " + thrown, thrown);
    }

    private static long rssKiB() {
        try {
            return Files.readAllLines(Path.of("/proc/self/status")).stream()
                    .filter(l -> l.startsWith("VmRSS:"))
                    .mapToLong(l -> Long.parseLong(l.replaceAll("\\D", "")))
                    .findFirst().orElse(-1);
        } catch (IOException e) {
            return -1;
        }
    }

    /** A row of {@code rmt} for client-v2's POJO serializer, which maps getters to columns by name. */
    public static final class RmtRow {
        private long id;
        private String name;
        private String note;
        private long ver;
        private int isDeleted;

        public RmtRow() {
        }

        RmtRow(long id, String name, String note, long ver, int isDeleted) {
            this.id = id;
            this.name = name;
            this.note = note;
            this.ver = ver;
            this.isDeleted = isDeleted;
        }

        public long getId() { return id; }
        public void setId(long id) { this.id = id; }
        public String getName() { return name; }
        public void setName(String name) { this.name = name; }
        public String getNote() { return note; }
        public void setNote(String note) { this.note = note; }
        public long getVer() { return ver; }
        public void setVer(long ver) { this.ver = ver; }
        public int getIs_deleted() { return isDeleted; }
        public void setIs_deleted(int isDeleted) { this.isDeleted = isDeleted; }
    }
}
