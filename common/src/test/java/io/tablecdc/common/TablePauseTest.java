package io.tablecdc.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.slf4j.Logger;

/** A table's back-pressure pause on a clock of its own: states, lengths, and which lines go at info. */
class TablePauseTest {
    private static final long SECOND = Duration.ofSeconds(1).toNanos();

    /** Log lines as "level: message". */
    private final List<String> logged = new ArrayList<>();
    private long now = 1_000 * SECOND;

    private final Logger log = (Logger) Proxy.newProxyInstance(Logger.class.getClassLoader(), new Class<?>[] {Logger.class},
            (proxy, method, args) -> {
                if (method.getName().matches("trace|debug|info|warn|error") && args != null && args[0] instanceof String m) {
                    logged.add(method.getName() + ": " + m);
                }
                return method.getReturnType() == boolean.class ? true : null;
            });

    private TablePause pause(Duration quiet) {
        return new TablePause(log, quiet, () -> now);
    }

    @Test
    void beginsOnceAndEndsWithItsLength() {
        TablePause pause = pause(Duration.ofMinutes(1));
        assertFalse(pause.paused());
        assertTrue(pause.begin());
        now += 3 * SECOND;
        assertFalse(pause.begin(), "a table already paused does not begin again");
        assertTrue(pause.paused());
        now += 2 * SECOND;
        assertEquals(5 * SECOND, pause.end());
        assertFalse(pause.paused());
        assertEquals(0, pause.end(), "a table not paused has no pause to end");
        assertEquals(5 * SECOND, pause.pausedNanos());
    }

    @Test
    void pausesAndResumesWithinAMinuteOfTheLastResumeLogAtDebug() {
        TablePause pause = pause(Duration.ofMinutes(1));
        pause.begin();
        pause.log("pause 1");
        now += SECOND;
        pause.end();
        pause.log("resume 1");
        now += 10 * SECOND;
        pause.begin();
        pause.log("pause 2");
        now += SECOND;
        pause.end();
        pause.log("resume 2");
        now += 61 * SECOND;
        pause.begin();
        pause.log("pause 3");
        now += 61 * SECOND;
        pause.end();
        pause.log("resume 3");
        assertEquals(List.of("info: pause 1", "info: resume 1", "debug: pause 2", "debug: resume 2", "info: pause 3",
                "info: resume 3"), logged);
    }

    @Test
    void noQuietPeriodLogsEveryLineAtInfo() {
        TablePause pause = pause(Duration.ZERO);
        for (int i = 0; i < 3; i++) {
            pause.begin();
            pause.log("pause");
            pause.end();
            pause.log("resume");
        }
        assertTrue(logged.stream().allMatch(l -> l.startsWith("info: ")), logged.toString());
        assertEquals(6, logged.size());
    }

    @Test
    void anAbandonedPauseIsNeitherAResumeNorCounted() {
        TablePause pause = pause(Duration.ofMinutes(1));
        pause.begin();
        now += 4 * SECOND;
        assertTrue(pause.abandon());
        assertFalse(pause.paused());
        assertFalse(pause.abandon());
        assertEquals(0, pause.pausedNanos());
        assertTrue(pause.begin());
        assertFalse(pause.quiet(), "no resume came before: the next pause logs at info");
    }
}
