package io.tablecdc.e2e.faults;

import java.util.Objects;

/**
 * A fault at a named step of a connector: where (a class, a method and a Byteman location such as {@code AT EXIT}
 * or {@code AFTER INVOKE upsertStage}), when (the n-th time the step is reached after the fault is armed, for a
 * number of times) and what (the process dies, the call throws, or the call hangs). {@link FaultInjector} turns
 * faults into Byteman rules for a worker process, so the build under test is not modified.
 *
 * @param name       the step's name, used in logs, marker files and test output
 * @param className  the class whose method the fault is injected into (the connector's own classes are found in
 *                   their plugin class loader by name)
 * @param method     the method name (every overload)
 * @param location   a Byteman location: {@code AT ENTRY}, {@code AT EXIT}, {@code AFTER INVOKE name}, …
 * @param action     what happens when the fault fires
 * @param occurrence the first armed occurrence of the step that fires (from 1)
 * @param times      how many occurrences fire from there ({@code KILL} fires once)
 * @param armed      whether the fault is armed from the start; otherwise {@link FaultInjector#arm} arms it
 */
public record Fault(String name, String className, String method, String location, Action action,
                    int occurrence, int times, boolean armed) {

    /** What a fault does. */
    public enum Kind {
        /** The worker process halts at once (as after SIGKILL: no shutdown hooks, no offset flush, no task stop). */
        KILL,
        /**
         * The call throws {@link Action#exceptionClass()} with a message naming the fault (and a null cause when
         * {@link Action#causeArgument()}: for exceptions whose only constructor takes one).
         */
        THROW,
        /** The call sleeps {@link Action#hangMillis()} before it goes on. */
        HANG
    }

    /**
     * The action of a fault. A thrown exception is created with the fault's message, and with a null cause after it
     * when {@code causeArgument}, or with {@code statusCode} before it when that is not null (an exception such as
     * BigQuery's, created with the HTTP status of the answer).
     */
    public record Action(Kind kind, String exceptionClass, boolean causeArgument, Integer statusCode, long hangMillis) {
        public Action {
            Objects.requireNonNull(kind, "kind");
        }
    }

    public Fault {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(className, "className");
        Objects.requireNonNull(method, "method");
        Objects.requireNonNull(location, "location");
        Objects.requireNonNull(action, "action");
        if (!name.matches("[A-Za-z0-9_.-]+")) {
            throw new IllegalArgumentException("a fault name is letters, digits, '_', '.' and '-': " + name);
        }
        if (occurrence < 1 || times < 1) {
            throw new IllegalArgumentException("occurrence and times start at 1");
        }
    }

    /** A step: {@code name} at {@code location} of {@code className.method}, to be given an action. */
    public static Step at(String name, String className, String method, String location) {
        return new Step(name, className, method, location);
    }

    /** The same fault firing first at the n-th armed occurrence of its step. */
    public Fault onOccurrence(int n) {
        return new Fault(name, className, method, location, action, n, times, armed);
    }

    /** The same fault firing at {@code n} consecutive occurrences (for THROW and HANG). */
    public Fault times(int n) {
        return new Fault(name, className, method, location, action, occurrence, n, armed);
    }

    /** The same fault, inert until {@link FaultInjector#arm} is called for it. */
    public Fault disarmed() {
        return new Fault(name, className, method, location, action, occurrence, times, false);
    }

    /** A step without an action yet. */
    public record Step(String name, String className, String method, String location) {
        public Fault kill() {
            return new Fault(name, className, method, location, new Action(Kind.KILL, null, false, null, 0), 1, 1, true);
        }

        /** The call throws {@code new exceptionClass(message)}. */
        public Fault fail(String exceptionClass) {
            return new Fault(name, className, method, location, new Action(Kind.THROW, exceptionClass, false, null, 0), 1, 1,
                    true);
        }

        /**
         * The call throws {@code new exceptionClass(message, null)}: an exception such as the catalog's
         * {@code CatalogUnavailableException}, which the product only ever creates with its cause.
         */
        public Fault failWithCause(String exceptionClass) {
            return new Fault(name, className, method, location, new Action(Kind.THROW, exceptionClass, true, null, 0), 1, 1,
                    true);
        }

        /**
         * The call throws {@code new exceptionClass(statusCode, message)}: a client's exception that carries the
         * HTTP status of the answer it failed on (BigQuery's {@code BigQueryException}).
         */
        public Fault failWithStatus(String exceptionClass, int statusCode) {
            return new Fault(name, className, method, location, new Action(Kind.THROW, exceptionClass, false, statusCode,
                    0), 1, 1, true);
        }

        public Fault hang(long millis) {
            return new Fault(name, className, method, location, new Action(Kind.HANG, null, false, null, millis), 1, 1, true);
        }
    }
}
