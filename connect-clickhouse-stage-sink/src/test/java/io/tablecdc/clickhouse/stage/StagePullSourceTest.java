package io.tablecdc.clickhouse.stage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.net.URI;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Several stage files named to ClickHouse as one source: an S3 store names them with one glob (their common folder,
 * then each one's rest of the key); names a glob would read as patterns, and a store without globs, name none.
 */
class StagePullSourceTest {

    @Test
    void severalS3FilesAreOneGlobOfTheirCommonFolder() throws Exception {
        try (S3StageStore store = new S3StageStore(URI.create("s3://bucket/stage"), "http://127.0.0.1:9", "us-east-1", "key",
                "secret")) {
            StageStore.PullSource source = store.pullSource(List.of("s3://bucket/stage/f__t/12/ab-0.avro",
                    "s3://bucket/stage/f__t/12/ab-1.avro", "s3://bucket/stage/f__t/13/cd-0.avro"));
            assertEquals("s3({stage_url:String}, {stage_access_key:String}, {stage_secret_key:String}, 'Avro')",
                    source.tableFunction());
            assertEquals(Map.of("stage_url", "http://127.0.0.1:9/bucket/stage/f__t/{12/ab-0.avro,12/ab-1.avro,13/cd-0.avro}",
                    "stage_access_key", "key", "stage_secret_key", "secret"), source.parameters());

            StageStore.PullSource one = store.pullSource(List.of("s3://bucket/stage/f__t/12/ab-0.avro"));
            assertEquals("http://127.0.0.1:9/bucket/stage/f__t/12/ab-0.avro", one.parameters().get("stage_url"));

            // two tables' files (not grouped by the sink, but named right): the common folder is the stage prefix
            assertEquals("http://127.0.0.1:9/bucket/stage/{a/1/x.avro,b/2/y.avro}", store.pullSource(
                    List.of("s3://bucket/stage/a/1/x.avro", "s3://bucket/stage/b/2/y.avro")).parameters().get("stage_url"));
        }
    }

    @Test
    void aNameAGlobWouldReadAsAPatternIsNotGrouped() throws Exception {
        try (S3StageStore store = new S3StageStore(URI.create("s3://bucket/stage"), "http://127.0.0.1:9", "us-east-1", "key",
                "secret")) {
            assertNull(store.pullSource(List.of("s3://bucket/stage/t/1/a,b.avro", "s3://bucket/stage/t/2/c.avro")));
            assertNull(store.pullSource(List.of("s3://bucket/stage/t/1/a*.avro", "s3://bucket/stage/t/2/c.avro")));
        }
    }

    @Test
    void aFileStoreNamesFilesOneByOne(@TempDir Path dir) throws Exception {
        try (FileStageStore store = new FileStageStore(dir.toUri())) {
            String a = dir.resolve("t/1/a.avro").toUri().toString();
            String b = dir.resolve("t/2/b.avro").toUri().toString();
            assertNull(store.pullSource(List.of(a, b)));
            assertEquals(store.pullSource(a), store.pullSource(List.of(a)));
        }
    }
}
