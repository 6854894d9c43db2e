package io.tablecdc.bigquery;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

import com.google.cloud.NoCredentials;
import com.google.cloud.bigquery.BigQueryOptions;
import com.google.cloud.bigquery.JobInfo;
import com.google.cloud.bigquery.QueryJobConfiguration;
import com.google.cloud.bigquery.QueryParameterValue;
import com.google.cloud.bigquery.TableId;

import io.tablecdc.bigquery.config.BigQueryQueryCdcConfig;
import io.tablecdc.bigquery.config.TableSpec;

/**
 * Issue 16, query.destination.dataset: the query job a snapshot chunk or change window runs (its destination table,
 * write and create dispositions), the destination's name per task start, and the setting itself. No request is sent:
 * the client below points at a port that refuses connections.
 */
class DestinationTableTest {
    private static SourceClient client() {
        return new SourceClient(BigQueryOptions.newBuilder().setProjectId("p").setHost("http://127.0.0.1:9")
                .setCredentials(NoCredentials.getInstance()).build().getService(), "", 1_000_000_000L, 500);
    }

    private static Map<String, String> props() {
        Map<String, String> props = new HashMap<>();
        props.put("bigquery.project", "p");
        props.put("bigquery.dataset", "d");
        props.put("tables", "orders:ts:id");
        props.put("topic.prefix", "cdc");
        props.put("catalog.jdbc.url", "jdbc:postgresql://127.0.0.1:9/catalog");
        return props;
    }

    @Test
    void aQueryWithADestinationWritesIntoItReplacingItsRows() {
        TableId destination = TableId.of("p", "scratch", "tablecdc_f_d_orders_1");
        QueryJobConfiguration job = client().queryConfiguration("SELECT 1", Map.of("lower",
                QueryParameterValue.int64(1L)), destination);
        assertEquals(destination, job.getDestinationTable());
        assertEquals(JobInfo.WriteDisposition.WRITE_TRUNCATE, job.getWriteDisposition());
        assertEquals(JobInfo.CreateDisposition.CREATE_IF_NEEDED, job.getCreateDisposition());
        assertEquals(false, job.useLegacySql());
        assertEquals(1_000_000_000L, job.getMaximumBytesBilled());
        assertEquals(1, job.getNamedParameters().size());
    }

    @Test
    void aQueryWithoutADestinationLeavesTheResultToBigQuery() {
        QueryJobConfiguration job = client().queryConfiguration("SELECT 1", Map.of(), null);
        assertNull(job.getDestinationTable());
        assertNull(job.getWriteDisposition());
        assertNull(job.getCreateDisposition());
    }

    /**
     * Two task starts of the same table (a rebalance, a zombie task) never write into the same table: the name carries
     * the start's ownership epoch, so a start also knows (and drops) the names its predecessors used. Flows and tables
     * whose names read the same once cleaned get names of their own.
     */
    @Test
    void everyTaskStartHasADestinationOfItsOwn() {
        TableSpec table = TableSpec.parse("tables", "orders:ts:id", "my-project", "shop", "");
        String first = TablePoller.destinationTable("bq-shop", table, 1);
        String second = TablePoller.destinationTable("bq-shop", table, 2);
        assertNotEquals(first, second);
        assertEquals(first, TablePoller.destinationTable("bq-shop", table, 1), "a start's name is known to the next one");
        assertTrue(first.startsWith("tablecdc_bq_shop_shop_orders_"), first);
        assertTrue(first.endsWith("_1") && second.endsWith("_2"), first + " " + second);
        assertTrue(first.matches("[A-Za-z0-9_]{1,1024}"), first);
        assertNotEquals(TablePoller.destinationTable("bq.shop", table, 1), first, "flow names equal once cleaned");
        assertNotEquals(TablePoller.destinationTable("a_b", TableSpec.parse("tables", "t:ts:id", "p", "c", ""), 1),
                TablePoller.destinationTable("a", TableSpec.parse("tables", "t:ts:id", "p", "b_c", ""), 1),
                "flow a_b with dataset c, and flow a with dataset b_c");
        String longest = TablePoller.destinationTable("f".repeat(2_000),
                TableSpec.parse("tables", "t".repeat(1_024) + ":ts:id", "p", "d".repeat(1_024), ""), Long.MAX_VALUE);
        assertTrue(longest.length() <= 1_024, "a table name has at most 1024 characters: " + longest.length());
    }

    @Test
    void theDestinationPollerUsesFollowsTheSetting() {
        Map<String, String> props = props();
        assertNull(new BigQueryQueryCdcConfig(props).destinationDataset(), "empty by default");
        props.put("query.destination.dataset", "scratch");
        assertArrayEquals(new String[] {"p", "scratch"}, new BigQueryQueryCdcConfig(props).destinationDataset());
        props.put("bigquery.billing.project", "billing");
        assertArrayEquals(new String[] {"billing", "scratch"}, new BigQueryQueryCdcConfig(props).destinationDataset(),
                "without a project, the jobs' project");
        props.put("query.destination.dataset", "example.com:other.scratch");
        assertArrayEquals(new String[] {"example.com:other", "scratch"}, new BigQueryQueryCdcConfig(props).destinationDataset());
        props.put("query.destination.dataset", "scratch-1");
        ConfigException e = assertThrows(ConfigException.class, () -> new BigQueryQueryCdcConfig(props));
        assertTrue(e.getMessage().contains("query.destination.dataset"), e.getMessage());
    }
}
