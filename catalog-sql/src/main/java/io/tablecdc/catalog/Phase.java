package io.tablecdc.catalog;

import java.util.Locale;

/**
 * A Postgres pipeline table's phase: {@code pending → copying → catchup(lsn) → ready(lsn)}, plus
 * {@code errored}, and {@code ready → lagging(lsn) → copying → catchup → ready} for a table detached from the shared
 * slot while its ClickHouse side catches up. Query CDC tables have no phase.
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
    /**
     * Detached from the flow's shared slot at {@code phase_lsn} ({@code detach_lsn}): its changes committed at or
     * after it wait in its private slot ({@code detach_slot}) until a copy task catches it up and hands it back.
     */
    LAGGING,
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
