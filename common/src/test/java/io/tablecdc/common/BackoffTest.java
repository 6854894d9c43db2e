package io.tablecdc.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class BackoffTest {
    @Test
    void doublesFromInitialUpToTheCap() {
        Backoff backoff = new Backoff(60_000, 300_000);
        assertEquals(60_000, backoff.failed());
        assertEquals(120_000, backoff.failed());
        assertEquals(240_000, backoff.failed());
        assertEquals(300_000, backoff.failed());
        assertEquals(300_000, backoff.failed());
    }

    @Test
    void successStartsOver() {
        Backoff backoff = new Backoff(5_000, 60_000);
        backoff.failed();
        backoff.failed();
        backoff.succeeded();
        assertEquals(5_000, backoff.failed());
    }

    @Test
    void manyFailuresNeverOverflow() {
        assertEquals(300_000, new Backoff(60_000, 300_000).delayMs(10_000));
    }

    @Test
    void nonsenseBoundsAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> new Backoff(0, 10));
        assertThrows(IllegalArgumentException.class, () -> new Backoff(10, 5));
    }
}
