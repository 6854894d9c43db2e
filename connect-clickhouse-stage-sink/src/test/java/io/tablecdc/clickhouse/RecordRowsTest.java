package io.tablecdc.clickhouse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.sink.SinkRecord;
import org.junit.jupiter.api.Test;

import io.tablecdc.common.RecordHeaders;
import io.tablecdc.common.RowBlock;

class RecordRowsTest {

    /**
     * Blocks of 100 tables, each table's columns its own, arrive in turn twice: each table's second block comes with the
     * same schema objects as its first (what keeps a table's blocks in one stage file). With one reader for the task,
     * which keeps the last 64 schema sections, every table's second block came with new ones.
     */
    @Test
    void aTablesBlocksShareTheirSchemaPastSixtyFourTables() {
        int tables = 100;
        List<Schema> schemas = new ArrayList<>();
        for (int t = 0; t < tables; t++) {
            schemas.add(SchemaBuilder.struct().name("t" + t).field("id", Schema.INT64_SCHEMA).field("c" + t, Schema.OPTIONAL_STRING_SCHEMA).build());
        }
        RecordRows rows = new RecordRows();
        Schema[] first = new Schema[tables];
        for (int round = 0; round < 2; round++) {
            for (int t = 0; t < tables; t++) {
                RowBlock.Writer writer = new RowBlock.Writer(schemas.get(t), null);
                writer.add(RecordHeaders.Op.CREATE, BigInteger.valueOf(round + 1), new Struct(schemas.get(t)).put("id", (long) round),
                        Set.of(), false, List.of(), null);
                ConnectHeaders headers = new ConnectHeaders();
                headers.addString(RecordHeaders.FLOW, "flow");
                headers.addString(RecordHeaders.TABLE, "public.t" + t);
                headers.addString(RecordHeaders.BATCH, Integer.toString(round + 1));
                headers.addString(RowBlock.HEADER, RowBlock.FORMAT);
                SinkRecord record = new SinkRecord("topic" + t, 0, null, null, null, writer.finish(), round, null, null, headers);
                RowBlock.Decoded[] read = new RowBlock.Decoded[1];
                List<TableSink.Row> out = rows.blockRows(record, SinkHeaders.of(record.headers()), d -> read[0] = d);
                assertEquals(1, out.size());
                if (round == 0) {
                    first[t] = read[0].valueSchema();
                } else {
                    assertSame(first[t], read[0].valueSchema(), "table t" + t + ": its second block's schema object");
                }
            }
        }
    }
}
