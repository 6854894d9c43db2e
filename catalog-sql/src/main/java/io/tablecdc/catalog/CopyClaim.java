package io.tablecdc.catalog;

import java.time.Instant;

/**
 * A table a copy task won: its name, which copy attempt this is (1 for the first; with the owner it identifies the
 * claim), until when the lease holds unless renewed, and how many copy attempts failed since the table was last ready
 * (its retry budget spent). A detached table's claim (its rejoin) also names its private slot and the detach
 * marker's LSN.
 */
public record CopyClaim(String table, int attempt, Instant leaseUntil, int failures, String detachSlot,
                        String detachLsn) {
    public CopyClaim(String table, int attempt, Instant leaseUntil) {
        this(table, attempt, leaseUntil, 0, null, null);
    }

    public CopyClaim(String table, int attempt, Instant leaseUntil, int failures) {
        this(table, attempt, leaseUntil, failures, null, null);
    }

    /** Whether this claim is a detached table's rejoin: caught up from {@code detachSlot} from {@code detachLsn}. */
    public boolean rejoin() {
        return detachLsn != null;
    }
}
