package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import com.clickhouse.client.api.query.GenericRecord;
import com.google.cloud.bigquery.BigQuery;
import com.google.cloud.bigquery.DatasetInfo;
import com.google.cloud.bigquery.Field;
import com.google.cloud.bigquery.Schema;
import com.google.cloud.bigquery.StandardSQLTypeName;
import com.google.cloud.bigquery.StandardTableDefinition;
import com.google.cloud.bigquery.TableId;
import com.google.cloud.bigquery.TableInfo;

import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.flows.SourceConfigs;
import io.tablecdc.e2e.stack.ConnectWorker;
import io.tablecdc.e2e.stack.LocalStack;

/**
 * The BigQuery setup the query CDC end-to-end tests share: a dataset in the emulator, a catalog database, tables of
 * {@code (id INT64 REQUIRED, val STRING, ts TIMESTAMP)}, the source and sink configs of a flow, the properties of a
 * worker of its own group, and {@link Rows}, a writer that remembers what it wrote so that ClickHouse can be compared
 * with it. Rows are stamped in the past (an hour ago, a microsecond apart, rising), so that the safety lag never holds
 * one back and every row is read by the first window after its insert.
 */
final class BigQueryFixture {
    final LocalStack stack;
    final BigQuery bigQuery;
    final String project;
    final String dataset;
    final String catalogDatabase;
    final String catalogUrl;
    final CdcChecks checks;

    private BigQueryFixture(LocalStack stack, String dataset, String catalogDatabase) throws java.sql.SQLException {
        this.stack = stack;
        this.bigQuery = stack.bigquery().client();
        this.project = stack.bigquery().projectId();
        this.dataset = dataset;
        this.catalogDatabase = catalogDatabase;
        if (bigQuery.getDataset(dataset) == null) {
            bigQuery.create(DatasetInfo.of(dataset));
        }
        this.catalogUrl = stack.postgres().createDatabase(catalogDatabase);
        this.checks = new CdcChecks(stack, catalogDatabase);
    }

    /** The dataset {@code dataset} in the stack's emulator (made if missing) and the catalog database {@code catalog}. */
    static BigQueryFixture create(LocalStack stack, String dataset, String catalog) throws java.sql.SQLException {
        return new BigQueryFixture(stack, dataset, catalog);
    }

    /** A new, empty table {@code (id, val, ts)} (dropped first if it exists). */
    TableId table(String name) {
        return idValTsTable(bigQuery, TableId.of(project, dataset, name));
    }

    /** Creates {@code id} as a new, empty table {@code (id INT64 REQUIRED, val STRING, ts TIMESTAMP)}, dropped first. */
    static TableId idValTsTable(BigQuery bigQuery, TableId id) {
        bigQuery.delete(id);
        bigQuery.create(TableInfo.of(id, StandardTableDefinition.of(Schema.of(
                Field.newBuilder("id", StandardSQLTypeName.INT64).setMode(Field.Mode.REQUIRED).build(),
                Field.of("val", StandardSQLTypeName.STRING),
                Field.of("ts", StandardSQLTypeName.TIMESTAMP)))));
        return id;
    }

    /** {@code project.dataset.table}: the table's name in the connector, the catalog and the topic. */
    String fullName(TableId id) {
        return project + "." + dataset + "." + id.getTable();
    }

    /** The table's name in ClickHouse (the sink's {@code ${table}} format). */
    String chTable(TableId id) {
        return fullName(id).replaceAll("[^A-Za-z0-9_]", "_");
    }

    /** The topic of {@code id} in a flow whose topics start with {@code topicPrefix}. */
    String topic(String topicPrefix, TableId id) {
        return topicPrefix + "." + fullName(id);
    }

    /** A query CDC source of {@code tables} ({@code table:watermark:keys} entries), see {@link SourceConfigs#queryCdc}. */
    Map<String, String> source(String tables, int tasks, String topicPrefix) {
        return SourceConfigs.queryCdc(stack, catalogUrl, dataset, tables, tasks, topicPrefix);
    }

    /** A sink of the topics {@code topicPrefix.*} into ClickHouse, see {@link SinkConfigs#flowSink}. */
    Map<String, String> sink(String topicPrefix) {
        return SinkConfigs.flowSink(stack, catalogUrl, topicPrefix + "-stage", topicPrefix);
    }

    /** The properties of a worker of the Connect cluster {@code group} (its own topics), on the stack's broker. */
    Map<String, String> workerProps(String group) {
        return ConnectWorker.workerProperties(stack.kafka().bootstrapServers(), group, stack.pluginPath());
    }

    void catalog(String sql) throws Exception {
        try (Connection c = stack.postgres().connect(catalogDatabase); Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }

    CdcChecks.State awaitState(String flow, TableId id, java.util.function.Predicate<CdcChecks.State> done, Duration timeout)
            throws Exception {
        return checks.awaitState(flow, fullName(id), done, timeout);
    }

    /** Waits until ClickHouse {@code FINAL} holds exactly {@code expected} (id → val); says what differs if never. */
    void awaitEqual(TableId id, Map<Long, String> expected, Duration timeout) throws InterruptedException {
        String sql = "SELECT id, val FROM " + chTable(id) + " FINAL ORDER BY id";
        try {
            checks.awaitRows(sql, rows -> toMap(rows).equals(expected), timeout);
        } catch (AssertionError e) {
            Map<Long, String> actual;
            try {
                actual = toMap(checks.clickhouse().queryAll(sql));
            } catch (RuntimeException noTable) {
                actual = Map.of();
            }
            List<String> differences = new ArrayList<>();
            for (Map.Entry<Long, String> row : expected.entrySet()) {
                if (!row.getValue().equals(actual.get(row.getKey()))) {
                    differences.add(row.getKey() + ": expected " + row.getValue() + ", found " + actual.get(row.getKey()));
                }
            }
            for (Long extra : actual.keySet()) {
                if (!expected.containsKey(extra)) {
                    differences.add(extra + ": never written");
                }
            }
            throw new AssertionError(id.getTable() + ": " + expected.size() + " rows written, " + actual.size()
                    + " in ClickHouse FINAL; differences " + differences, e);
        }
    }

    private static Map<Long, String> toMap(List<GenericRecord> rows) {
        Map<Long, String> map = new TreeMap<>();
        rows.forEach(r -> map.put(r.getLong("id"), r.getString("val")));
        return map;
    }

    /**
     * The (id, version) pairs ClickHouse holds more than once, read without {@code FINAL}: a row sent twice (by two
     * owners of the table, say) shows here, whatever {@code FINAL} makes of it. A background merge may fold a pair.
     */
    List<String> doubledInClickHouse(TableId id) {
        List<String> doubled = new ArrayList<>();
        checks.clickhouse().queryAll("SELECT id, toString(_tablecdc_version) AS v, count() AS n FROM " + chTable(id)
                + " GROUP BY id, v HAVING n > 1 ORDER BY id").forEach(r -> doubled.add(r.getLong("id") + "@"
                + r.getString("v") + " x" + r.getLong("n")));
        return doubled;
    }

    /**
     * The records of a one-partition topic that carry the same key and {@code tablecdc.version} as an earlier record
     * of it, as "key@version xN": each row version sent more than once. Read from the start to the current end.
     */
    List<String> doubledInTopic(String topic) {
        Map<String, Object> props = new HashMap<>();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, stack.kafka().bootstrapServers());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        TopicPartition partition = new TopicPartition(topic, 0);
        Map<String, Integer> seen = new TreeMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (consumer.position(partition) < end && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    Header version = record.headers().lastHeader("tablecdc.version");
                    if (record.key() == null || version == null) {
                        continue;
                    }
                    String key = new String(record.key(), java.nio.charset.StandardCharsets.UTF_8)
                            .replaceAll(".*\"payload\":", "").replace("}", "");
                    seen.merge(key + "@" + new String(version.value(), java.nio.charset.StandardCharsets.UTF_8), 1,
                            Integer::sum);
                }
            }
        }
        List<String> doubled = new ArrayList<>();
        seen.forEach((k, n) -> {
            if (n > 1) {
                doubled.add(k + " x" + n);
            }
        });
        return doubled;
    }

    /** Asserts that neither the topic nor ClickHouse (without {@code FINAL}) holds a row version twice. */
    void assertNoRowDoubled(String topic, TableId id) {
        assertEquals(List.of(), doubledInTopic(topic), "row versions sent more than once to " + topic);
        assertEquals(List.of(), doubledInClickHouse(id), "(id, version) pairs held more than once in " + chTable(id));
    }

    Rows rows(TableId id) {
        return new Rows(id);
    }

    /**
     * What a test writes to one table and what it expects in ClickHouse: id → the value written last. Every row is
     * stamped later than every earlier one, an hour before now.
     */
    final class Rows {
        private final TableId table;
        private final ConcurrentSkipListMap<Long, String> expected = new ConcurrentSkipListMap<>();
        private final AtomicLong sequence = new AtomicLong();
        private final Instant base = Instant.now().minus(Duration.ofHours(1)).truncatedTo(ChronoUnit.SECONDS);
        private long lastId;

        private Rows(TableId table) {
            this.table = table;
        }

        /** Inserts new rows {@code from .. to}. */
        synchronized void insert(long from, long to) {
            List<Long> ids = new ArrayList<>();
            for (long id = from; id <= to; id++) {
                ids.add(id);
            }
            write(ids, "v");
            lastId = Math.max(lastId, to);
        }

        /** Writes a new version of each of {@code ids} (an update: the same id, a later stamp, a new value). */
        synchronized void update(List<Long> ids) {
            write(ids, "u");
        }

        /** Inserts the next new id and updates an earlier one: one writer step. */
        synchronized void step() {
            long next = lastId + 1;
            insert(next, next);
            update(List.of(1 + (next * 7) % Math.max(1, next - 1)));
        }

        private void write(List<Long> ids, String tag) {
            List<Map<String, Object>> rows = new ArrayList<>();
            Map<Long, String> values = new LinkedHashMap<>();
            for (long id : ids) {
                long n = sequence.incrementAndGet();
                String val = tag + n;
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("id", id);
                row.put("val", val);
                row.put("ts", base.plus(n, ChronoUnit.MILLIS).toString());
                rows.add(row);
                values.put(id, val);
            }
            CdcChecks.insert(bigQuery, table, rows);
            expected.putAll(values);
        }

        /** How many rows and versions were written so far. */
        long written() {
            return sequence.get();
        }

        TreeMap<Long, String> expected() {
            return new TreeMap<>(expected);
        }

        /** {@link #step()} every {@code periodMs} on a thread of its own until the returned writer is closed. */
        Writer background(long periodMs) {
            return new Writer(this, periodMs);
        }
    }

    /** A background writer of {@link Rows#step()}; {@link #close()} stops it and reports its failure. */
    static final class Writer implements AutoCloseable {
        private final Rows rows;
        private final Background loop;

        Writer(Rows rows, long periodMs) {
            this.rows = rows;
            this.loop = new Background("bq-fixture-writer", rows::step, periodMs);
        }

        /** Waits until {@code more} further rows or versions were written. */
        void awaitMore(long more, Duration timeout) throws InterruptedException {
            long target = rows.written() + more;
            long deadline = System.nanoTime() + timeout.toNanos();
            while (rows.written() < target) {
                if (loop.failure() != null) {
                    throw new AssertionError("the writer failed", loop.failure());
                }
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("the writer wrote fewer than " + more + " rows in " + timeout);
                }
                Thread.sleep(50);
            }
        }

        @Override
        public void close() throws InterruptedException {
            loop.stop();
        }
    }
}
