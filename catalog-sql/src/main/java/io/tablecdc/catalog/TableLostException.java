package io.tablecdc.catalog;

/**
 * A query CDC task's catalog write was refused because another task took the table over (a higher
 * {@code source_epoch}): this task must stop sending the table's records.
 */
public final class TableLostException extends CatalogException {
    private static final long serialVersionUID = 1L;

    public TableLostException(String message) {
        super(message);
    }
}
