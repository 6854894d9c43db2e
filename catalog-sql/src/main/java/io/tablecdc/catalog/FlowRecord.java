package io.tablecdc.catalog;

import java.time.Instant;

/** A {@code cdc_flow} row. */
public record FlowRecord(String flow, FlowIdentity identity, String configHash, Instant createdAt,
                         Instant updatedAt) {
}
