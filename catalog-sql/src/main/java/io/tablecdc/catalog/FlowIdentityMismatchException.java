package io.tablecdc.catalog;

/**
 * A flow resumed against another source or destination than the one recorded in {@code cdc_flow}.
 * The message names each recorded value and the value now seen.
 */
public class FlowIdentityMismatchException extends CatalogException {

    private static final long serialVersionUID = 1L;

    public FlowIdentityMismatchException(String message) {
        super(message);
    }
}
