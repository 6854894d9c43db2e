package io.tablecdc.clickhouse.stage;

import java.nio.file.Path;

/**
 * One closed Avro file of a batch on local disk, before upload.
 *
 * @param file  the local file
 * @param rows  records in the file
 * @param bytes the file's size
 */
public record StagePart(Path file, long rows, long bytes) {
}
