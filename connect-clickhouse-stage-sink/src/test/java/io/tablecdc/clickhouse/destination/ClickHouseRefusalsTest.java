package io.tablecdc.clickhouse.destination;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.ConnectException;
import java.net.SocketTimeoutException;
import java.util.concurrent.TimeoutException;

import org.junit.jupiter.api.Test;

import com.clickhouse.client.api.ClientException;
import com.clickhouse.client.api.ServerException;

/** Which failed loads count as ClickHouse refusing a batch's data, on the exceptions client-v2 raises. */
class ClickHouseRefusalsTest {

    private static ServerException server(int code, String name) {
        return new ServerException(code, "Code: " + code + ". DB::Exception: … (" + name + ") (version 26.5.1.1)", 500, "q");
    }

    @Test
    void serverErrorsAboutTheDataAreRefusals() {
        assertTrue(ClickHouseRefusals.refusesData(server(469, "VIOLATED_CONSTRAINT")));
        assertTrue(ClickHouseRefusals.refusesData(server(53, "TYPE_MISMATCH")));
        assertTrue(ClickHouseRefusals.refusesData(server(27, "CANNOT_PARSE_INPUT_ASSERTION_FAILED")));
        assertTrue(ClickHouseRefusals.refusesData(server(321, "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE")));
        // as queryAll raises it: the server's answer wrapped in a ClientException
        assertTrue(ClickHouseRefusals.refusesData(new ClientException("Failed to get query response",
                server(349, "CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN"))));
        assertEquals(469, ClickHouseRefusals.serverCode(new RuntimeException(server(469, "VIOLATED_CONSTRAINT"))));
    }

    @Test
    void serverErrorsAboutTheServerOrTheMomentAreNot() {
        assertFalse(ClickHouseRefusals.refusesData(server(252, "TOO_MANY_PARTS")));
        assertFalse(ClickHouseRefusals.refusesData(server(159, "TIMEOUT_EXCEEDED")));
        assertFalse(ClickHouseRefusals.refusesData(server(241, "MEMORY_LIMIT_EXCEEDED")));
        assertFalse(ClickHouseRefusals.refusesData(server(202, "TOO_MANY_SIMULTANEOUS_QUERIES")));
        assertFalse(ClickHouseRefusals.refusesData(server(242, "TABLE_IS_READ_ONLY")));
        assertFalse(ClickHouseRefusals.refusesData(server(60, "UNKNOWN_TABLE")));
        assertFalse(ClickHouseRefusals.refusesData(server(497, "ACCESS_DENIED")));
        assertFalse(ClickHouseRefusals.refusesData(server(516, "AUTHENTICATION_FAILED")));
        assertFalse(ClickHouseRefusals.refusesData(server(499, "S3_ERROR")));
    }

    @Test
    void noAnswerIsNotARefusal() {
        assertFalse(ClickHouseRefusals.refusesData(new ClientException("Failed to get query response",
                new ConnectException("Connection refused"))));
        assertFalse(ClickHouseRefusals.refusesData(new ClientException("Query request failed (attempt: 4)",
                new SocketTimeoutException("Read timed out"))));
        assertFalse(ClickHouseRefusals.refusesData(new TimeoutException("ClickHouse did not answer within 300000 ms")));
        assertNull(ClickHouseRefusals.serverCode(new IllegalStateException("the normalize lease of this table was lost")));
    }
}
