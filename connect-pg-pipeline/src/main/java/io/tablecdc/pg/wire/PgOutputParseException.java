package io.tablecdc.pg.wire;

/** The bytes are not a pgoutput protocol version 1 message {@link PgOutputParser} understands. */
public class PgOutputParseException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public PgOutputParseException(String message) {
        super(message);
    }

    public PgOutputParseException(String message, Throwable cause) {
        super(message, cause);
    }
}
