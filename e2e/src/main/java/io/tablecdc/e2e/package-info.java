/** The local stack started in-process without Docker, end-to-end tests, benchmarks and the quickstart. */
package io.tablecdc.e2e;
