package io.tablecdc.catalog;

/**
 * The catalog's schema cannot be used by this release: it is newer than the migrations this release
 * knows, older while migrations are disabled, or a migration failed. The message names the versions
 * involved and what to do; it never contains connection settings.
 */
public class CatalogSchemaException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public CatalogSchemaException(String message) {
        super(message);
    }

    public CatalogSchemaException(String message, Throwable cause) {
        super(message, cause);
    }
}
