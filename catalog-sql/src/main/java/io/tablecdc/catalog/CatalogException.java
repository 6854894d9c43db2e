package io.tablecdc.catalog;

import org.apache.kafka.connect.errors.ConnectException;

/**
 * A catalog operation failed in a way retrying will not fix (a bug, a constraint, a schema this release
 * cannot use). The message names the operation, the flow and the table; it never holds credentials.
 */
public class CatalogException extends ConnectException {

    private static final long serialVersionUID = 1L;

    public CatalogException(String message) {
        super(message);
    }

    public CatalogException(String message, Throwable cause) {
        super(message, cause);
    }
}
