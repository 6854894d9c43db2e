package io.tablecdc.e2e.bench;

import java.io.OutputStream;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Locale;
import java.util.Set;

import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;

import io.tablecdc.clickhouse.schema.StageSchema;
import io.tablecdc.common.TablecdcTypes;

/**
 * The sink's per-row staging work without Kafka, the object store or ClickHouse: a Connect {@code Struct} of the
 * 10-column benchmark table turned into its Avro stage record ({@link StageSchema#toAvro}) and encoded as Avro binary,
 * for {@code rows} rows per round. Run it with the sink's jar of one build on the class path, then of another, to
 * compare two builds of the staging code side by side ({@code scripts/bench-stage-schema.sh} does both). Not part of
 * the Maven build: the bench module does not put the sink on its class path (the worker loads it as a plugin).
 * Prints rows per second of each round after {@code warm-up} rounds.
 * {@code StageSchemaBench [rows per round (1000000)] [rounds (5)] [warm-up rounds (3)]}.
 */
public final class StageSchemaBench {
    /** Suite 3's table ({@code SinkSuite}), repeated here: this file is compiled on its own, against two builds. */
    private static final Schema VALUE = SchemaBuilder.struct().name("bench").field("id", Schema.INT64_SCHEMA)
            .field("name", Schema.STRING_SCHEMA).field("email", Schema.STRING_SCHEMA).field("city", Schema.OPTIONAL_STRING_SCHEMA)
            .field("score", Schema.FLOAT64_SCHEMA).field("ratio", Schema.OPTIONAL_FLOAT64_SCHEMA)
            .field("visits", Schema.INT64_SCHEMA).field("level", Schema.INT32_SCHEMA)
            .field("balance", Decimal.builder(2).parameter("connect.decimal.precision", "18").build())
            .field("updated_at", TablecdcTypes.microTimestamp().build()).build();

    private StageSchemaBench() {
    }

    public static void main(String[] args) throws Exception {
        int rows = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        int warmup = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        // the rows are built once: the converter's work is not what is measured
        Struct[] values = new Struct[10_000];
        for (int i = 0; i < values.length; i++) {
            values[i] = new Struct(VALUE).put("id", (long) i).put("name", "name-" + i).put("email", "user" + i + "@example.com")
                    .put("city", i % 7 == 0 ? null : "city-" + (i % 100)).put("score", i * 0.5)
                    .put("ratio", i % 5 == 0 ? null : 1.0 / (i + 1)).put("visits", i * 3L).put("level", i % 10)
                    .put("balance", new BigDecimal(i).movePointLeft(2)).put("updated_at", 1_700_000_000_000_000L + i);
        }
        StageSchema schema = StageSchema.of("bench.sink", VALUE, Set.of("id"));
        GenericDatumWriter<GenericRecord> writer = new GenericDatumWriter<>(schema.avroSchema());
        BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(OutputStream.nullOutputStream(), null);
        long sink = 0;
        for (int round = 0; round < warmup + rounds; round++) {
            long start = System.nanoTime();
            for (int i = 0; i < rows; i++) {
                GenericRecord record = schema.toAvro(values[i % values.length], BigInteger.valueOf(i + 1), false);
                writer.write(record, encoder);
                sink += schema.lastClamps().size();
            }
            encoder.flush();
            double seconds = (System.nanoTime() - start) / 1e9;
            if (round >= warmup) {
                System.out.printf(Locale.ROOT, "round %d: %.0f rows/s%n", round - warmup + 1, rows / seconds);
            }
        }
        if (sink != 0) {
            System.out.println("clamped values: " + sink);
        }
    }
}
