package io.tablecdc.e2e.faults;

/** An exception with no constructor of a message alone, for {@link FaultInjectorTest}. */
public final class CauseOnlyException extends RuntimeException {
    public CauseOnlyException(String message, Throwable cause) {
        super(message, cause);
    }
}
