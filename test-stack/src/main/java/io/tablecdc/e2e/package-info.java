/**
 * The local stack started in-process without Docker ({@code stack}, {@code clickhouse}, {@code objectstore},
 * {@code bigquery}), fault injection ({@code faults}), the flows tests and benchmarks deploy ({@code flows}) and the
 * quickstart. The end-to-end tests (module {@code e2e}) and the benchmarks (module {@code bench}) run on it.
 */
package io.tablecdc.e2e;
