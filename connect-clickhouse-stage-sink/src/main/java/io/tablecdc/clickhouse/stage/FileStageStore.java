package io.tablecdc.clickhouse.stage;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Map;

/**
 * A stage store on a local or shared file system ({@code file:///dir}). ClickHouse reads it in pull mode
 * through {@code file()}, which works only when the ClickHouse process sees the same path (an embedded
 * engine or a shared mount); push mode works everywhere.
 */
public final class FileStageStore implements StageStore {
    private final Path root;

    public FileStageStore(URI uri) {
        this.root = Path.of(uri).toAbsolutePath().normalize();
    }

    @Override
    public String upload(Path localFile, String key) throws IOException {
        Path target = resolve(key);
        Files.createDirectories(target.getParent());
        Path tmp = target.resolveSibling(target.getFileName() + ".uploading");
        Files.copy(localFile, tmp, StandardCopyOption.REPLACE_EXISTING);
        // readers never see a half-written file
        Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        return target.toUri().toString();
    }

    @Override
    public InputStream open(String uri) throws IOException {
        return Files.newInputStream(Path.of(URI.create(uri)));
    }

    @Override
    public boolean exists(String uri) {
        return Files.exists(Path.of(URI.create(uri)));
    }

    @Override
    public void delete(String uri) throws IOException {
        Files.deleteIfExists(Path.of(URI.create(uri)));
    }

    @Override
    public PullSource pullSource(String uri) {
        return new PullSource("file({stage_path:String}, 'Avro')", Map.of("stage_path", Path.of(URI.create(uri)).toString()));
    }

    private Path resolve(String key) {
        Path target = root.resolve(key).normalize();
        if (!target.startsWith(root)) {
            throw new IllegalArgumentException("stage key escapes the stage folder: " + key);
        }
        return target;
    }

    @Override
    public void close() {
    }
}
