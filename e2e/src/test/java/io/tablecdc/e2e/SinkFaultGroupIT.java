package io.tablecdc.e2e;

import static io.tablecdc.e2e.SinkFaultIT.KEY;
import static io.tablecdc.e2e.SinkFaultIT.ROWS_PER_BATCH;
import static io.tablecdc.e2e.SinkFaultIT.VALUE;
import static io.tablecdc.e2e.SinkFaultIT.assertLoadedOnce;
import static io.tablecdc.e2e.SinkFaultIT.lastError;
import static io.tablecdc.e2e.SinkFaultIT.normalizedBatch;
import static io.tablecdc.e2e.SinkFaultIT.stack;
import static io.tablecdc.e2e.SinkFaultIT.stagedRows;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.tablecdc.e2e.SinkFaultIT.Case;
import io.tablecdc.e2e.faults.Fault;
import io.tablecdc.e2e.faults.NamedFaults;
import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.stack.ConnectWorker;

/**
 * {@link SinkFaultIT}'s cases where batches that waited together are loaded by one INSERT, and two races of a load with
 * the stage it reads: the sink's worker process dies (Byteman halts it, as SIGKILL would) after a grouped load, or a
 * load is held while its batch is staged again or its file replaced; a second worker takes over without faults.
 * ClickHouse {@code FINAL} ends equal to what was produced, every row once, no stage row left. (Split from
 * {@link SinkFaultIT} so that the two run side by side in the suite's forks.)
 */
class SinkFaultGroupIT {
    /**
     * The batches that wait together are loaded by one INSERT (the default), and the worker dies after that INSERT or
     * after the catalog recorded it; a second worker groups them again as it finds them. The first load (batch 1 alone)
     * is slowed for 3 s, so that the later batches wait together.
     */
    static Stream<Fault> groupedSteps() {
        return Stream.of(NamedFaults.sinkGroupLoadedNotRecorded().kill(),
                NamedFaults.sinkRecordedNotCleaned().kill().onOccurrence(2));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("groupedSteps")
    void aWorkerKilledAfterALoadOfSeveralBatchesLosesAndDoublesNothing(Fault fault) throws Exception {
        Case.grouped(fault).killAndTakeOver();
    }

    /**
     * A normalize run loaded batch 1's file; before it recorded the load, the sink staged batch 1 again, complete now
     * (its 40 rows and 20 more, delivered after batch 12), replacing the stage row and its files. The run must not
     * record the load nor delete the new row: the next run loads the new files. Byteman holds the run right after its
     * first load until the new row is in the catalog.
     */
    @Test
    void aBatchStagedAgainWhileItsLoadIsRecordedKeepsItsNewRows() throws Exception {
        Fault hold = Fault.at("sink-loaded-then-restaged", "io.tablecdc.clickhouse.TableNormalizer", "normalizeAll",
                "AFTER INVOKE load").hang(30_000);
        Case c = Case.of(hold);
        Map<Long, String> expected = new HashMap<>(c.expected());
        ConnectWorker worker = c.startWorkerWithFault("worker-1");
        try {
            c.deployAndAwaitFault(worker);
            try (RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(c.topic())) {
                // batch 1 as it was (its versions are below every later batch's, so FINAL keeps the later values)
                for (int i = 0; i < ROWS_PER_BATCH; i++) {
                    long id = i + 1;
                    producer.send(c.topic(), new Struct(KEY).put("id", id), new Struct(VALUE).put("id", id)
                                    .put("customer", "c" + id + "-b1").put("amount", new BigDecimal(id).movePointLeft(2)),
                            Headers.of(c.flow(), c.table(), "c", id, 1, false));
                }
                for (int i = 0; i < 20; i++) {
                    long id = 100_001 + i;
                    producer.send(c.topic(), new Struct(KEY).put("id", id), new Struct(VALUE).put("id", id)
                                    .put("customer", "late-" + id).put("amount", new BigDecimal(id).movePointLeft(2)),
                            Headers.of(c.flow(), c.table(), "c", 10_000 + i, 1, i == 19));
                    expected.put(id, "late-" + id);
                }
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (stagedRows(c.database(), c.flow(), c.table(), 1) != ROWS_PER_BATCH + 20 && System.nanoTime() < deadline) {
                Thread.sleep(100);
            }
            assertEquals(ROWS_PER_BATCH + 20, stagedRows(c.database(), c.flow(), c.table(), 1), "batch 1 staged again");
            assertEquals(0, normalizedBatch(c.database(), c.flow(), c.table()),
                    "the load of batch 1's first copy is still held, not recorded, when its new copy is staged");
            assertLoadedOnce(worker, c.name(), c.database(), c.flow(), c.table(), c.clickhouseTable(), expected);
        } finally {
            worker.close();
        }
    }

    /**
     * Batches that waited together are loaded by one INSERT; the stage file of the group's first batch is replaced in
     * the object store, after the run checked that it exists and before the INSERT (Byteman holds the INSERT), by a
     * valid Avro file holding the last half of its rows (an object overwritten, or a glob that matched fewer files: the
     * load reads fewer rows than the stage row says). The run must see that ClickHouse wrote fewer rows than staged,
     * fail naming the flow, table and batches, and record nothing; once the file is back, every row loads.
     */
    @Test
    void aGroupLoadThatReadsFewerRowsThanStagedIsNotRecorded() throws Exception {
        Fault hold = Fault.at("sink-group-load-file-short", "io.tablecdc.clickhouse.TableNormalizer", "loadTogether",
                "AT INVOKE loadPull").hang(20_000);
        Case c = Case.grouped(hold);
        ConnectWorker worker = c.startWorkerWithFault("worker-1");
        try {
            c.deployAndAwaitFault(worker);
            long first;
            String uri;
            try (Connection db = stack.postgres().connect(c.database()); PreparedStatement ps = db.prepareStatement(
                    "SELECT batch_id, avro_files -> 0 ->> 'uri' FROM cdc_table_avro_stage st WHERE flow_name = ?"
                            + " AND source_table_identifier = ? AND batch_id > (SELECT normalized_batch_id FROM"
                            + " cdc_table_replication_state s WHERE s.flow_name = st.flow_name"
                            + " AND s.source_table_identifier = st.source_table_identifier) ORDER BY batch_id LIMIT 1")) {
                ps.setString(1, c.flow());
                ps.setString(2, c.table());
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    first = rs.getLong(1);
                    uri = rs.getString(2);
                }
            }
            String bucket = stack.objectStore().bucket();
            String key = uri.substring(("s3://" + bucket + "/").length());
            try (var s3 = stack.objectStore().newClient()) {
                byte[] file = s3.getObjectAsBytes(b -> b.bucket(bucket).key(key)).asByteArray();
                s3.putObject(b -> b.bucket(bucket).key(key), software.amazon.awssdk.core.sync.RequestBody.fromBytes(lastHalf(file)));
                List<String> errors = new java.util.ArrayList<>();
                long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
                while (System.nanoTime() < deadline && normalizedBatch(c.database(), c.flow(), c.table()) < first
                        && errors.stream().noneMatch(e -> e.contains("ClickHouse wrote"))) {
                    String error = lastError(c.database(), c.flow(), c.table());
                    if (error != null && !errors.contains(error)) {
                        errors.add(error);
                    }
                    Thread.sleep(100);
                }
                s3.putObject(b -> b.bucket(bucket).key(key), software.amazon.awssdk.core.sync.RequestBody.fromBytes(file));
                String expectedError = "flow " + c.flow() + ", table " + c.table() + ": batches " + first + " to ";
                assertTrue(errors.stream().anyMatch(e -> e.contains(expectedError) && e.contains("not recorded as loaded")),
                        "the load that read part of batch " + first + "'s rows fails naming it; errors seen: " + errors
                                + "; normalized batch id " + normalizedBatch(c.database(), c.flow(), c.table()));
            }
            assertLoadedOnce(worker, c.name(), c.database(), c.flow(), c.table(), c.clickhouseTable(), c.expected());
        } finally {
            worker.close();
        }
    }

    /** An Avro file of the same schema holding the last half of {@code avro}'s records. */
    private static byte[] lastHalf(byte[] avro) throws Exception {
        List<org.apache.avro.generic.GenericRecord> records = new java.util.ArrayList<>();
        org.apache.avro.Schema schema;
        try (var in = new org.apache.avro.file.DataFileStream<org.apache.avro.generic.GenericRecord>(
                new java.io.ByteArrayInputStream(avro), new org.apache.avro.generic.GenericDatumReader<>())) {
            schema = in.getSchema();
            in.forEach(records::add);
        }
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        try (var writer = new org.apache.avro.file.DataFileWriter<org.apache.avro.generic.GenericRecord>(
                new org.apache.avro.generic.GenericDatumWriter<>(schema))) {
            writer.create(schema, out);
            for (org.apache.avro.generic.GenericRecord record : records.subList(records.size() / 2, records.size())) {
                writer.append(record);
            }
        }
        return out.toByteArray();
    }

}
