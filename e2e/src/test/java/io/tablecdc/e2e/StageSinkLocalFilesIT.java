package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.junit.jupiter.api.Test;

import io.tablecdc.e2e.faults.FaultProxy;
import io.tablecdc.e2e.flows.Headers;
import io.tablecdc.e2e.flows.RecordProducer;
import io.tablecdc.e2e.flows.SinkConfigs;
import io.tablecdc.e2e.stack.ConnectRestClient;
import io.tablecdc.e2e.stack.LocalStack;
import io.tablecdc.e2e.stack.StackPaths;

/** The sink's local stage folder ({@code stage.local.dir}) keeps no file of a batch its task let go. */
class StageSinkLocalFilesIT {
    private static final LocalStack stack = LocalStack.get();
    private static final Schema KEY = SchemaBuilder.struct().name("k").field("id", Schema.INT64_SCHEMA).build();
    private static final Schema VALUE = SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
            .field("customer", Schema.STRING_SCHEMA).build();

    /**
     * A complete batch whose upload fails (the object store refuses connections) waits in the task with its local
     * files; when the connector is deleted the task drops it (its records come again to the next owner) and its local
     * files go with it.
     */
    @Test
    void theLocalFilesOfABatchWaitingForItsUploadAreRemovedWhenTheTaskLetsItGo() throws Exception {
        String catalogUrl = stack.postgres().createDatabase("sink_local_files_catalog");
        String flow = "flow-localfiles";
        String topic = "sinklocal.files";
        Path localDir = StackPaths.workDir("sink-local-files-" + System.nanoTime());
        URI storeUri = URI.create(stack.objectStore().endpoint());
        ConnectRestClient rest = stack.connect().rest();
        try (FaultProxy proxy = FaultProxy.start("localfiles-store", storeUri.getHost(), storeUri.getPort());
             RecordProducer producer = new RecordProducer(stack.kafka().bootstrapServers()).topic(topic)) {
            Map<String, String> config = SinkConfigs.stageSink(stack, catalogUrl, "localfiles");
            config.put("topics", topic);
            config.put("stage.local.dir", localDir.toString());
            config.put("stage.s3.endpoint", "http://127.0.0.1:" + proxy.port());
            rest.putConfig("sink-localfiles", config);
            rest.awaitRunning("sink-localfiles", 1, Duration.ofSeconds(60));
            proxy.refuse();
            for (long id = 1; id <= 3; id++) {
                producer.send(topic, new Struct(KEY).put("id", id), new Struct(VALUE).put("id", id).put("customer", "c" + id),
                        Headers.of(flow, "localfiles.t", "c", id, 1, id == 3));
            }
            producer.flush();
            // the batch is complete and its upload failed: its local file waits for the retry
            awaitUploadError(flow, "localfiles.t", Duration.ofSeconds(90));
            awaitFiles(localDir, files -> !files.isEmpty(), Duration.ofSeconds(10), "a local file of the batch waiting for its upload");
            assertTrue(proxy.accepted() > 0, "the upload reached the object store's proxy");
            rest.delete("sink-localfiles");
            awaitFiles(localDir, List::isEmpty, Duration.ofSeconds(60), "no local file once the connector is deleted");
        } finally {
            try {
                rest.delete("sink-localfiles");
            } catch (RuntimeException gone) {
                // deleted above
            }
        }
    }

    /** Waits until the catalog records the failed upload of the table's batch ({@code last_error} starting with stage:). */
    private static void awaitUploadError(String flow, String table, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            try (java.sql.Connection c = stack.postgres().connect("sink_local_files_catalog");
                 java.sql.PreparedStatement ps = c.prepareStatement("SELECT count(*) FROM cdc_table_replication_state"
                         + " WHERE flow_name = ? AND source_table_identifier = ? AND last_error LIKE 'stage:%'")) {
                ps.setString(1, flow);
                ps.setString(2, table);
                try (java.sql.ResultSet rs = ps.executeQuery()) {
                    if (rs.next() && rs.getLong(1) > 0) {
                        return;
                    }
                }
            } catch (java.sql.SQLException notYet) {
                // the catalog's tables are created by the sink's first start
            }
            Thread.sleep(300);
        }
        assertFalse(true, "the catalog never recorded the failed upload of " + flow + "/" + table);
    }

    private static void awaitFiles(Path dir, java.util.function.Predicate<List<Path>> done, Duration timeout, String what)
            throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        List<Path> files = List.of();
        while (System.nanoTime() < deadline) {
            files = files(dir);
            if (done.test(files)) {
                return;
            }
            Thread.sleep(200);
        }
        assertFalse(true, what + "; files in " + dir + ": " + files);
    }

    private static List<Path> files(Path dir) throws Exception {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            return walk.filter(Files::isRegularFile).toList();
        }
    }
}
