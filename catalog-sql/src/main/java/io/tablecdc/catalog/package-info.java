/**
 * The catalog: its schema ({@link io.tablecdc.catalog.CatalogMigrations}) and its client ({@link
 * io.tablecdc.catalog.Catalog}: a connection pool and one class per concern over one connection core).
 */
package io.tablecdc.catalog;
