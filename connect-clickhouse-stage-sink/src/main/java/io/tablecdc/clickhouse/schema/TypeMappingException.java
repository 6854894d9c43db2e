package io.tablecdc.clickhouse.schema;

/** A Connect schema or value that cannot be written to a stage file; the message names table and column. */
public class TypeMappingException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public TypeMappingException(String message) {
        super(message);
    }

    public TypeMappingException(String message, Throwable cause) {
        super(message, cause);
    }
}
