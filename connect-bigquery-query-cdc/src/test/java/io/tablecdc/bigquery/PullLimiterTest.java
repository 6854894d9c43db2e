package io.tablecdc.bigquery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.Semaphore;

import org.junit.jupiter.api.Test;

class PullLimiterTest {
    @Test
    void tasksOfOneConnectorShareItsPermitsAndOtherConnectorsHaveTheirOwn() {
        Semaphore a = PullLimiter.of("limiter-test-a", 2);
        assertSame(a, PullLimiter.of("limiter-test-a", 2), "a second task of the same connector");
        assertNotSame(a, PullLimiter.of("limiter-test-b", 2));
        assertEquals(2, a.availablePermits());
        assertTrue(a.tryAcquire());
        assertTrue(PullLimiter.of("limiter-test-a", 2).tryAcquire());
        assertFalse(PullLimiter.of("limiter-test-a", 2).tryAcquire(), "a third concurrent query of the connector");
        assertTrue(PullLimiter.of("limiter-test-b", 2).tryAcquire(), "another connector is not held up");
        a.release(2);
    }
}
