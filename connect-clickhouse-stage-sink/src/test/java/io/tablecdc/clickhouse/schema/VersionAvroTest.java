package io.tablecdc.clickhouse.schema;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigInteger;

import org.apache.avro.generic.GenericFixed;
import org.junit.jupiter.api.Test;

class VersionAvroTest {
    /** ClickHouse reads Avro fixed(16) into UInt128 little-endian (checked against the engine in VersionWidthIT). */
    @Test
    void versionsAreStagedAsLittleEndianFixed16AndReadBack() {
        byte[] five = new byte[16];
        five[0] = 5;
        assertArrayEquals(five, ((GenericFixed) ClickHouseTypes.versionAvroValue(BigInteger.valueOf(5))).bytes());
        byte[] twoTo64 = new byte[16];
        twoTo64[8] = 1;
        assertArrayEquals(twoTo64, ((GenericFixed) ClickHouseTypes.versionAvroValue(BigInteger.ONE.shiftLeft(64))).bytes());
        BigInteger max = BigInteger.ONE.shiftLeft(128).subtract(BigInteger.ONE);
        for (BigInteger v : new BigInteger[] {BigInteger.ZERO, BigInteger.valueOf(Long.MAX_VALUE),
            BigInteger.ONE.shiftLeft(63), BigInteger.ONE.shiftLeft(79).add(BigInteger.ONE), max}) {
            assertEquals(v, ClickHouseTypes.versionOf(ClickHouseTypes.versionAvroValue(v)), v.toString());
        }
        assertThrows(TypeMappingException.class, () -> ClickHouseTypes.versionAvroValue(max.add(BigInteger.ONE)));
        assertThrows(TypeMappingException.class, () -> ClickHouseTypes.versionAvroValue(BigInteger.valueOf(-1)));
    }
}
