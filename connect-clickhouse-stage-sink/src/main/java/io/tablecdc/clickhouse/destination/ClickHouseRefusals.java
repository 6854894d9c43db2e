package io.tablecdc.clickhouse.destination;

import java.util.Set;

import com.clickhouse.client.api.ServerException;

/**
 * Which failed loads are ClickHouse refusing the data itself: a server answer ({@link ServerException}) whose error code
 * says a value does not fit (a type mismatch, a value it cannot parse or convert, one out of a type's range, a null in a
 * column that takes none, a constraint it violates). Retrying such a load fails the same way for ever; only setting
 * the batch aside gets the table past it. Everything else is not a refusal: no answer (unreachable, timeout, connection
 * reset), and server errors about the server or the moment (too many parts, memory, quotas, timeouts, replicas,
 * Keeper, a table or column missing, permissions), which pass or need another fix. Codes from ClickHouse's
 * {@code src/Common/ErrorCodes.cpp}.
 */
public final class ClickHouseRefusals {
    /** Error codes of a refusal of the data. */
    static final Set<Integer> DATA_CODES = Set.of(
            6,   // CANNOT_PARSE_TEXT
            19,  // SIZE_OF_FIXED_STRING_DOESNT_MATCH
            25,  // CANNOT_PARSE_ESCAPE_SEQUENCE
            26,  // CANNOT_PARSE_QUOTED_STRING
            27,  // CANNOT_PARSE_INPUT_ASSERTION_FAILED
            38,  // CANNOT_PARSE_DATE
            41,  // CANNOT_PARSE_DATETIME
            53,  // TYPE_MISMATCH
            69,  // ARGUMENT_OUT_OF_BOUND
            70,  // CANNOT_CONVERT_TYPE
            72,  // CANNOT_PARSE_NUMBER
            117, // INCORRECT_DATA
            128, // TOO_LARGE_ARRAY_SIZE
            131, // TOO_LARGE_STRING_SIZE
            190, // SIZES_OF_ARRAYS_DOESNT_MATCH
            248, // INVALID_PARTITION_VALUE
            321, // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
            349, // CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
            376, // CANNOT_PARSE_UUID
            395, // FUNCTION_THROW_IF_VALUE_IS_NON_ZERO (a version a UInt64 version column cannot hold)
            407, // DECIMAL_OVERFLOW
            441, // CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING
            467, // CANNOT_PARSE_BOOL
            469, // VIOLATED_CONSTRAINT
            691  // UNKNOWN_ELEMENT_OF_ENUM
    );

    private ClickHouseRefusals() {
    }

    /** The ClickHouse error code of the server's answer in {@code e}'s causes, or null when no server answered. */
    public static Integer serverCode(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof ServerException server) {
                return server.getCode();
            }
        }
        return null;
    }

    /** Whether a failed load is ClickHouse refusing the data it was given (see the class comment). */
    public static boolean refusesData(Throwable e) {
        Integer code = serverCode(e);
        return code != null && DATA_CODES.contains(code);
    }
}
