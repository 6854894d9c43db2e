package io.tablecdc.clickhouse;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.header.Headers;

import io.tablecdc.common.RecordHeaders;

/**
 * Not a test: the sink's per-record header reading before and after issue 20, side by side in one JVM, alternating
 * round by round: before, {@link SinkHeaders#of} and then the version looked up again by name and checked with a
 * regular expression; after, the version taken in the same pass and checked by hand. The headers are those of a
 * pipeline copy record as the worker's header converter hands them to the sink (numbers parsed, as
 * {@code SimpleHeaderConverter} does). Run with the module's test class path:
 * {@code java -cp … io.tablecdc.clickhouse.SinkHeadersBench [rounds]}.
 */
public final class SinkHeadersBench {
    private SinkHeadersBench() {
    }

    /** The version as {@code RecordHeaders.versionValue(Headers)} read it before issue 20. */
    private static BigInteger regexVersion(Headers headers) {
        Header header = headers.lastWithName(RecordHeaders.VERSION);
        Object value = header == null ? null : header.value();
        String text = value == null ? null : value instanceof byte[] b ? new String(b, StandardCharsets.UTF_8) : value.toString();
        if (text == null) {
            throw new IllegalArgumentException("the record has no " + RecordHeaders.VERSION + " header");
        }
        String trimmed = text.trim();
        if (!trimmed.matches("[0-9]{1,39}")) {
            throw new IllegalArgumentException("header " + RecordHeaders.VERSION + " is not a non-negative decimal integer");
        }
        BigInteger v = new BigInteger(trimmed);
        if (v.compareTo(RecordHeaders.VERSION_LIMIT) >= 0) {
            throw new IllegalArgumentException("not below 2^128");
        }
        return v;
    }

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 15;
        List<Headers> records = new ArrayList<>();
        for (int i = 0; i < 100_000; i++) {
            ConnectHeaders headers = new ConnectHeaders();
            headers.addString(RecordHeaders.FLOW, "bench-flow");
            headers.addString(RecordHeaders.TABLE, "bench.copy_src");
            headers.addString(RecordHeaders.OP, "r");
            // a copy record's version: (commit LSN, ordinal) in 80 bits, as decimal text
            long version = (0x1_6B37_4D48L << 16) + i;
            headers.add(RecordHeaders.VERSION, version, Schema.INT64_SCHEMA);
            headers.add(RecordHeaders.BATCH, (byte) 3, Schema.INT8_SCHEMA);
            if (i % 10_000 == 9_999) {
                headers.add(RecordHeaders.BATCH_LAST, true, Schema.BOOLEAN_SCHEMA);
            }
            records.add(headers);
        }
        double[] before = new double[rounds];
        double[] after = new double[rounds];
        long sink = 0;
        for (int r = 0; r < rounds; r++) {
            long start = System.nanoTime();
            for (Headers headers : records) {
                SinkHeaders read = SinkHeaders.of(headers);
                sink += read.batchId() + regexVersion(headers).longValue();
            }
            before[r] = (System.nanoTime() - start) / (double) records.size();
            start = System.nanoTime();
            for (Headers headers : records) {
                SinkHeaders read = SinkHeaders.of(headers);
                sink -= read.batchId() + read.versionValue().longValue();
            }
            after[r] = (System.nanoTime() - start) / (double) records.size();
        }
        if (sink != 0) {
            throw new AssertionError("before and after disagree");
        }
        double b = median(Arrays.copyOfRange(before, rounds / 3, rounds));
        double a = median(Arrays.copyOfRange(after, rounds / 3, rounds));
        System.out.printf("sink headers: before %.1f ns/record, after %.1f ns/record, ratio %.2f (%d records, %d rounds)%n",
                b, a, a / b, records.size(), rounds);
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
