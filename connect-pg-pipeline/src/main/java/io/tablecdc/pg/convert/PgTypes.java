package io.tablecdc.pg.convert;

import java.util.Map;

/**
 * Object ids of the built-in PostgreSQL types the converter knows (they are fixed in {@code pg_type.dat} and
 * never change between versions), and the element type of each of their array types.
 */
public final class PgTypes {
    public static final long BOOL = 16;
    public static final long BYTEA = 17;
    public static final long CHAR = 18;
    public static final long NAME = 19;
    public static final long INT8 = 20;
    public static final long INT2 = 21;
    public static final long INT4 = 23;
    public static final long TEXT = 25;
    public static final long OID = 26;
    public static final long JSON = 114;
    public static final long XML = 142;
    public static final long FLOAT4 = 700;
    public static final long FLOAT8 = 701;
    public static final long BPCHAR = 1042;
    public static final long VARCHAR = 1043;
    public static final long DATE = 1082;
    public static final long TIME = 1083;
    public static final long TIMESTAMP = 1114;
    public static final long TIMESTAMPTZ = 1184;
    public static final long INTERVAL = 1186;
    public static final long TIMETZ = 1266;
    public static final long NUMERIC = 1700;
    public static final long UUID = 2950;
    public static final long JSONB = 3802;

    private static final Map<Long, Long> ARRAY_ELEMENTS = Map.ofEntries(
            Map.entry(1000L, BOOL),
            Map.entry(1001L, BYTEA),
            Map.entry(1002L, CHAR),
            Map.entry(1003L, NAME),
            Map.entry(1005L, INT2),
            Map.entry(1007L, INT4),
            Map.entry(1009L, TEXT),
            Map.entry(1014L, BPCHAR),
            Map.entry(1015L, VARCHAR),
            Map.entry(1016L, INT8),
            Map.entry(1021L, FLOAT4),
            Map.entry(1022L, FLOAT8),
            Map.entry(1028L, OID),
            Map.entry(1115L, TIMESTAMP),
            Map.entry(1182L, DATE),
            Map.entry(1183L, TIME),
            Map.entry(1185L, TIMESTAMPTZ),
            Map.entry(1187L, INTERVAL),
            Map.entry(1231L, NUMERIC),
            Map.entry(1270L, TIMETZ),
            Map.entry(2951L, UUID),
            Map.entry(199L, JSON),
            Map.entry(143L, XML),
            Map.entry(3807L, JSONB));

    private PgTypes() {
    }

    /** The element type of a built-in array type, or -1 when {@code oid} is not one. */
    public static long arrayElement(long oid) {
        return ARRAY_ELEMENTS.getOrDefault(oid, -1L);
    }
}
