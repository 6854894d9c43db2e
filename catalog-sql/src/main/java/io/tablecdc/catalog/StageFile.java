package io.tablecdc.catalog;

import java.util.Objects;

/** One Avro file of a staged batch: where it is, how many rows and bytes it holds. */
public record StageFile(String uri, long rows, long bytes) {

    public StageFile {
        Objects.requireNonNull(uri, "uri");
        if (rows < 0 || bytes < 0) {
            throw new IllegalArgumentException("rows and bytes cannot be negative: " + rows + ", " + bytes);
        }
    }
}
