package io.tablecdc.pg.wire;

/** The bytes are not a pgoutput protocol version 1 message this decoder understands. */
public class PgOutputDecodeException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public PgOutputDecodeException(String message) {
        super(message);
    }

    public PgOutputDecodeException(String message, Throwable cause) {
        super(message, cause);
    }
}
