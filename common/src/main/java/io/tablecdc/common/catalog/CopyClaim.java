package io.tablecdc.common.catalog;

import java.time.Instant;

/**
 * A table a copy task won: its name, which copy attempt this is (1 for the first) and until when the
 * lease holds unless renewed.
 */
public record CopyClaim(String table, int attempt, Instant leaseUntil) {
}
