package io.tablecdc.bigquery;

import java.time.Instant;
import java.util.Map;

/**
 * A table's source offset {@code {"cursor": "<RFC 3339>", "batch": <id>}}, plus {@code "snapshot": "<RFC 3339>"} while
 * the initial snapshot is read chunk by chunk and, in QUERY mode, {@code "zone": "<watermark.time.zone>"} the cursor was
 * read in, read with type checks.
 *
 * @param cursor   the cursor, or null when the table has none yet ({@code ""})
 * @param batch    the last batch id used, 0 for none
 * @param snapshot the upper bound of the initial snapshot still being read, or null
 * @param zone     the {@code watermark.time.zone} the cursor was read in, or null when the offset does not say
 */
record OffsetValue(Instant cursor, long batch, Instant snapshot, String zone) {

    static final OffsetValue NONE = new OffsetValue(null, 0, null, null);

    OffsetValue(Instant cursor, long batch) {
        this(cursor, batch, null, null);
    }

    /**
     * Reads a stored or proposed offset; null is no offset.
     *
     * @throws IllegalArgumentException saying which field is wrong and what it should be
     */
    static OffsetValue of(Map<String, ?> offset) {
        if (offset == null) {
            return NONE;
        }
        for (String key : offset.keySet()) {
            if (!TablePoller.CURSOR_KEY.equals(key) && !TablePoller.BATCH_KEY.equals(key) && !TablePoller.SNAPSHOT_KEY.equals(key)
                    && !TablePoller.ZONE_KEY.equals(key)) {
                throw new IllegalArgumentException("unknown offset field '" + key + "': an offset is {\"cursor\": \"<RFC 3339 UTC"
                        + " timestamp>\", \"batch\": <last batch id>} (and \"snapshot\": \"<RFC 3339 UTC timestamp>\" while"
                        + " the initial snapshot is read, \"zone\": \"<the watermark.time.zone the cursor was read in>\")");
            }
        }
        Object cursor = offset.get(TablePoller.CURSOR_KEY);
        if (!(cursor instanceof String text)) {
            throw new IllegalArgumentException("offset field 'cursor' must be a string such as \"2024-03-01T10:00:00.123456000Z\""
                    + " (or \"\" to start with the initial load), not " + describe(cursor));
        }
        Instant instant = Cursor.parse(text);
        Object batch = offset.get(TablePoller.BATCH_KEY);
        long id;
        if (batch == null) {
            id = 0;
        } else if (batch instanceof Long || batch instanceof Integer || batch instanceof Short || batch instanceof Byte) {
            id = ((Number) batch).longValue();
        } else {
            throw new IllegalArgumentException("offset field 'batch' must be an integer (the last batch id), not " + describe(batch));
        }
        if (id < 0) {
            throw new IllegalArgumentException("offset field 'batch' cannot be negative: " + id);
        }
        Object snapshot = offset.get(TablePoller.SNAPSHOT_KEY);
        Instant snapshotUntil = null;
        if (snapshot != null) {
            if (!(snapshot instanceof String snapshotText)) {
                throw new IllegalArgumentException("offset field 'snapshot' must be a string such as \"2024-03-01T10:00:00.123456000Z\","
                        + " not " + describe(snapshot));
            }
            snapshotUntil = Cursor.parse(snapshotText);
        }
        Object zone = offset.get(TablePoller.ZONE_KEY);
        if (zone != null && !(zone instanceof String)) {
            throw new IllegalArgumentException("offset field 'zone' must be a time zone id such as \"UTC\", not " + describe(zone));
        }
        return new OffsetValue(instant, id, snapshotUntil, zone == null || ((String) zone).isBlank() ? null : (String) zone);
    }

    private static String describe(Object value) {
        return value == null ? "null" : value.getClass().getSimpleName() + " " + value;
    }
}
