package io.tablecdc.catalog;

import org.apache.kafka.connect.errors.RetriableException;

/**
 * The catalog could not be reached (connection refused or lost, pool timeout, server shutting down,
 * serialization conflict). Retriable: the task retries the same step later and never skips it. The
 * message names the operation, the flow and the table; it never holds credentials.
 */
public class CatalogUnavailableException extends RetriableException {

    private static final long serialVersionUID = 1L;

    public CatalogUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
