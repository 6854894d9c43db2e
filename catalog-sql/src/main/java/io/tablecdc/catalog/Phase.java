package io.tablecdc.catalog;

import java.util.Locale;

/**
 * A Postgres pipeline table's phase: {@code pending → copying → catchup(lsn) → ready(lsn)}, plus
 * {@code errored}. Query CDC tables have no phase.
 */
public enum Phase {
    /** Known to the flow, waiting for a copy task. */
    PENDING,
    /** A copy task holds a lease on it and is copying or catching up. */
    COPYING,
    /** The copy stopped at {@code phase_lsn}; the apply task keeps changes committed at or after it. */
    CATCHUP,
    /** The apply task's durable position passed {@code phase_lsn}; only the apply task streams it. */
    READY,
    /** Failed; retried by a copy task from {@code next_retry_at} when that is set. */
    ERRORED;

    /** The value stored in {@code cdc_table_replication_state.phase}. */
    public String sqlName() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** The phase for a stored value; null for null (query CDC tables). */
    public static Phase fromSqlName(String value) {
        return value == null ? null : valueOf(value.toUpperCase(Locale.ROOT));
    }
}
