package io.tablecdc.catalog;

import java.time.Instant;

/**
 * A table a copy task won: its name, which copy attempt this is (1 for the first; with the owner it identifies the
 * claim), until when the lease holds unless renewed, and how many copy attempts failed since the table was last ready
 * (its retry budget spent).
 */
public record CopyClaim(String table, int attempt, Instant leaseUntil, int failures) {
    public CopyClaim(String table, int attempt, Instant leaseUntil) {
        this(table, attempt, leaseUntil, 0);
    }
}
