package io.tablecdc.catalog;

/**
 * A catalog operation of a Postgres pipeline flow's apply task was refused because another apply task took the flow
 * over (a higher {@code cdc_flow.apply_epoch}): this task must stop; retrying will not help.
 */
public final class ApplyTakenOverException extends CatalogException {
    private static final long serialVersionUID = 1L;

    public ApplyTakenOverException(String message) {
        super(message);
    }
}
