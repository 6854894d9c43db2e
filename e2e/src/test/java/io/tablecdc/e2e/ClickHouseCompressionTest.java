package io.tablecdc.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.e2e.stack.LocalStack;

/**
 * client-v2 with its default settings, as the sink builds it: responses in ClickHouse's native LZ4 framing
 * ({@code compress=1}), and requests compressed the same way when asked ({@code decompress=1}), as a server speaks them.
 */
class ClickHouseCompressionTest {
    private static final LocalStack stack = LocalStack.get();

    private static Client.Builder defaults() {
        return new Client.Builder().addEndpoint(stack.clickhouse().httpUrl()).setUsername(stack.clickhouse().user())
                .setPassword(stack.clickhouse().password());
    }

    @Test
    void aClientWithDefaultSettingsReadsCompressedResponses() throws Exception {
        try (Client client = defaults().build()) {
            // several LZ4 blocks: more than one 1 MiB frame of result
            List<GenericRecord> rows = client.queryAll("SELECT number, repeat('x', 100) AS pad FROM numbers(30000)");
            assertEquals(30000, rows.size());
            assertEquals(29999L, rows.get(29999).getLong("number"));
            assertEquals("x".repeat(100), rows.get(5).getString("pad"));
            List<GenericRecord> one = client.queryAll("SELECT {n:UInt32} * 2 AS twice", Map.of("n", 21));
            assertEquals(42L, one.get(0).getLong("twice"));
        }
    }

    @Test
    void compressedRequestsAreDecompressed() throws Exception {
        try (Client client = defaults().compressClientRequest(true).build()) {
            client.execute("CREATE TABLE IF NOT EXISTS default.compression_test (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
                    .get().close();
            client.execute("TRUNCATE TABLE default.compression_test").get().close();
            client.execute("INSERT INTO default.compression_test SELECT number, toString(number) FROM numbers(1000)").get().close();
            List<GenericRecord> rows = client.queryAll("SELECT count() AS c, sum(id) AS s FROM default.compression_test");
            assertEquals(1000L, rows.get(0).getLong("c"));
            assertEquals(499500L, rows.get(0).getLong("s"));
        }
    }
}
