/**
 * From pgoutput's text values to Connect: the schema and value of each PostgreSQL type
 * ({@link io.tablecdc.pg.convert.ValueConverter}) and a table's key and value schemas and row images
 * ({@link io.tablecdc.pg.convert.RelationSchema}). The type mapping is documented in
 * {@code docs/pg-pipeline-wire.md}.
 */
package io.tablecdc.pg.convert;
