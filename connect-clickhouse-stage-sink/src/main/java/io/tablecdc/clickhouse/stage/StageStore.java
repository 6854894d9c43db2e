package io.tablecdc.clickhouse.stage;

import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Path;
import java.util.Map;

/**
 * Where stage files wait to be normalized: {@code file://}, {@code s3://} (any S3-compatible endpoint) or
 * {@code gs://}. Every method may be called again with the same arguments after a crash.
 */
public interface StageStore extends Closeable {

    /** Uploads {@code localFile} under {@code key} (relative to the store's prefix); returns its URI. Overwrites. */
    String upload(Path localFile, String key) throws IOException;

    /** Opens a staged file for reading (push mode streams it to ClickHouse). */
    InputStream open(String uri) throws IOException;

    /** Whether the staged file exists. */
    boolean exists(String uri) throws IOException;

    /** Deletes a staged file; a file that is already gone is not an error. */
    void delete(String uri) throws IOException;

    /**
     * The ClickHouse table function that reads the staged file in pull mode, with placeholders
     * ({@code {name:String}}) whose values are in {@link PullSource#parameters()}, so that neither the
     * location nor a credential is ever spliced into SQL text.
     */
    PullSource pullSource(String uri);

    /**
     * One table function that reads all of {@code uris} (stage files of one Avro schema) in one statement, or null when
     * this store cannot name them together (then each is loaded on its own).
     */
    default PullSource pullSource(java.util.List<String> uris) {
        return uris.size() == 1 ? pullSource(uris.get(0)) : null;
    }

    /** A table function expression and the query parameters it needs. */
    record PullSource(String tableFunction, Map<String, Object> parameters) {
    }
}
