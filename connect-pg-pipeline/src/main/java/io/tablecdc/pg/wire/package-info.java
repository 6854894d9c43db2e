/**
 * The logical replication wire protocol: LSNs and the pgoutput (protocol version 1) messages, decoded byte
 * for byte from what pgjdbc's {@code PGReplicationStream} returns. Deliberately free of Connect and Kafka
 * types, so that it is tested against captured bytes alone. See {@code docs/pg-pipeline-wire.md}.
 */
package io.tablecdc.pg.wire;
