package io.tablecdc.e2e.stack;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;

/**
 * The Confluent Hub archives built by the connector modules, unzipped into a {@code plugin.path} folder the
 * way a user installs them, so tests exercise exactly what users install.
 */
public final class PluginArchives {
    /** The connector modules whose {@code target/components/packages/*.zip} make up the plugin path. */
    public static final List<String> MODULES = List.of(
            "connect-bigquery-query-cdc", "connect-pg-pipeline", "connect-clickhouse-stage-sink");

    private PluginArchives() {
    }

    /** The built archives, one per connector module; fails naming the module whose archive is missing. */
    public static List<Path> archives() throws IOException {
        Path root = StackPaths.projectRoot();
        List<Path> found = new ArrayList<>();
        for (String module : MODULES) {
            Path packages = root.resolve(module).resolve("target/components/packages");
            Path zip = null;
            if (Files.isDirectory(packages)) {
                try (DirectoryStream<Path> zips = Files.newDirectoryStream(packages, "tablecdc-" + module + "-*.zip")) {
                    for (Path candidate : zips) {
                        zip = candidate;
                    }
                }
            }
            if (zip == null) {
                throw new IllegalStateException("no Hub archive in " + packages + ": build the plugins first ("
                        + "./mvnw -DskipTests package, or run the tests through the README's test command)");
            }
            found.add(zip);
        }
        return found;
    }

    /** Unzips every archive into {@code pluginPath} (one folder per archive) and returns {@code pluginPath}. */
    public static Path unzipInto(Path pluginPath) throws IOException {
        Files.createDirectories(pluginPath);
        for (Path zip : archives()) {
            unzip(zip, pluginPath);
        }
        return pluginPath;
    }

    private static void unzip(Path zip, Path target) throws IOException {
        Path base = target.toAbsolutePath().normalize();
        try (InputStream in = Files.newInputStream(zip); ZipInputStream entries = new ZipInputStream(in)) {
            for (ZipEntry entry; (entry = entries.getNextEntry()) != null; ) {
                Path out = base.resolve(entry.getName()).normalize();
                if (!out.startsWith(base)) {
                    throw new IOException("archive " + zip + " has an entry outside its folder: " + entry.getName());
                }
                if (entry.isDirectory()) {
                    Files.createDirectories(out);
                } else {
                    Files.createDirectories(out.getParent());
                    Files.copy(entries, out, StandardCopyOption.REPLACE_EXISTING);
                }
            }
        }
    }
}
