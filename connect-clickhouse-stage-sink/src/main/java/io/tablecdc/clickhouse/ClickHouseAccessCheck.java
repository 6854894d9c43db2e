package io.tablecdc.clickhouse;

import java.io.IOException;
import java.net.ConnectException;
import java.net.NoRouteToHostException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

import org.apache.avro.Schema;
import org.apache.avro.SchemaBuilder;
import org.apache.avro.file.DataFileWriter;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.ServerException;

import io.tablecdc.clickhouse.config.ClickHouseStageSinkConfig;
import io.tablecdc.clickhouse.destination.Sql;
import io.tablecdc.clickhouse.stage.StageStore;

/**
 * What the sink's {@code validate()} checks beyond single fields, each problem on the field at fault and named as
 * what it is: ClickHouse answers and accepts the user and password, the target database exists and the user holds the
 * grants the sink needs in it; the stage location accepts a write; in pull mode ClickHouse reads a test object from it.
 * No message holds a password or secret key.
 */
final class ClickHouseAccessCheck {
    /** ClickHouse error codes this check names. */
    static final int UNKNOWN_DATABASE = 81;
    static final int REQUIRED_PASSWORD = 194;
    static final int UNKNOWN_USER = 192;
    static final int WRONG_PASSWORD = 193;
    static final int ACCESS_DENIED = 497;
    static final int AUTHENTICATION_FAILED = 516;
    static final int SYNTAX_ERROR = 62;

    /** A problem and the field it belongs to. */
    record Problem(String field, String message) {
    }

    private ClickHouseAccessCheck() {
    }

    /** ClickHouse, then the stage location; ClickHouse's read of the test object only when ClickHouse accepted the user. */
    static List<Problem> check(ClickHouseStageSinkConfig config, Client client, StageStore store) {
        List<Problem> problems = new ArrayList<>();
        String database = config.clickHouseDatabase();
        try {
            long databases = count(client, "SELECT count() FROM system.databases WHERE name = {db:String}", Map.of("db", database));
            if (databases == 0) {
                problems.add(new Problem(ClickHouseStageSinkConfig.CLICKHOUSE_DATABASE_CONFIG, "database " + database
                        + " does not exist in ClickHouse at " + config.clickHouseUrlForLogs() + " (CREATE DATABASE " + Sql.id(database) + ")"));
                problems.addAll(stage(config, client, store, false));
                return scrub(problems, config);
            }
        } catch (Exception e) {
            problems.add(clickHouseProblem(config, e));
            problems.addAll(stage(config, client, store, false));
            return scrub(problems, config);
        }
        String grants = requiredGrants(config);
        try {
            long granted = count(client, "CHECK GRANT " + grants + " ON " + Sql.id(database) + ".*", Map.of());
            if (granted == 0) {
                problems.add(new Problem(ClickHouseStageSinkConfig.CLICKHOUSE_USER_CONFIG, "permission denied: user "
                        + config.clickHouseUser() + " lacks some of " + grants + " on database " + database
                        + " (GRANT " + grants + " ON " + Sql.id(database) + ".* TO " + config.clickHouseUser() + ")"));
            }
        } catch (Exception e) {
            ServerException server = cause(e, ServerException.class);
            if (server == null || server.getCode() != SYNTAX_ERROR) {
                problems.add(clickHouseProblem(config, e));
            } // else a server older than CHECK GRANT: the first load finds out about the grants instead
        }
        problems.addAll(stage(config, client, store, !config.pushMode()));
        return scrub(problems, config);
    }

    static String requiredGrants(ClickHouseStageSinkConfig config) {
        return config.tableAutoCreate() ? "SELECT, INSERT, ALTER ADD COLUMN, TRUNCATE, CREATE TABLE, CREATE VIEW, DROP VIEW"
                : "SELECT, INSERT, ALTER ADD COLUMN, TRUNCATE";
    }

    /** Writes a one-row Avro object to the stage location; with {@code readBack} has ClickHouse read it; then deletes it. */
    static List<Problem> stage(ClickHouseStageSinkConfig config, Client client, StageStore store, boolean readBack) {
        List<Problem> problems = new ArrayList<>();
        Path local = null;
        String uri = null;
        try {
            local = Files.createTempFile("tablecdc-validate-", ".avro");
            writeTestObject(local);
            try {
                uri = store.upload(local, "_tablecdc_validate/" + UUID.randomUUID() + ".avro");
            } catch (IOException | RuntimeException e) {
                problems.add(stageWriteProblem(config, e));
                return problems;
            }
            if (readBack) {
                StageStore.PullSource source = store.pullSource(uri);
                try {
                    long rows = count(client, "SELECT count() FROM " + source.tableFunction(), new HashMap<>(source.parameters()));
                    if (rows != 1) {
                        problems.add(new Problem(ClickHouseStageSinkConfig.STAGE_URI_CONFIG, "ClickHouse read " + rows
                                + " rows instead of 1 from a test object at the stage location " + config.stageUri()));
                    }
                } catch (Exception e) {
                    problems.add(new Problem(ClickHouseStageSinkConfig.STAGE_URI_CONFIG, "normalize.mode=pull: ClickHouse at "
                            + config.clickHouseUrlForLogs() + " cannot read a test object written to the stage location "
                            + config.stageUri() + " (it must reach the same store, with the same credentials): " + message(e)));
                }
            }
        } catch (IOException e) {
            problems.add(new Problem(ClickHouseStageSinkConfig.STAGE_LOCAL_DIR_CONFIG, "cannot write a local test file: " + e.getMessage()));
        } finally {
            try {
                if (uri != null) {
                    store.delete(uri);
                }
                if (local != null) {
                    Files.deleteIfExists(local);
                }
            } catch (IOException | RuntimeException e) {
                problems.add(new Problem(ClickHouseStageSinkConfig.STAGE_URI_CONFIG, "permission denied: the test object "
                        + uri + " was written but cannot be deleted (the sink deletes stage files after loading them): " + message(e)));
            }
        }
        return problems;
    }

    /** The field and message of a failed ClickHouse request: authentication, permission, network or other. */
    static Problem clickHouseProblem(ClickHouseStageSinkConfig config, Throwable e) {
        ServerException server = cause(e, ServerException.class);
        if (server != null) {
            int code = server.getCode();
            if (code == AUTHENTICATION_FAILED || code == WRONG_PASSWORD || code == REQUIRED_PASSWORD) {
                return new Problem(ClickHouseStageSinkConfig.CLICKHOUSE_PASSWORD_CONFIG, "authentication failed: ClickHouse at "
                        + config.clickHouseUrlForLogs() + " refused user " + config.clickHouseUser() + " with this password (code " + code + ")");
            }
            if (code == UNKNOWN_USER) {
                return new Problem(ClickHouseStageSinkConfig.CLICKHOUSE_USER_CONFIG, "authentication failed: ClickHouse at "
                        + config.clickHouseUrlForLogs() + " has no user " + config.clickHouseUser() + " (code " + code + ")");
            }
            if (code == ACCESS_DENIED) {
                return new Problem(ClickHouseStageSinkConfig.CLICKHOUSE_USER_CONFIG, "permission denied: " + message(e));
            }
            if (code == UNKNOWN_DATABASE) {
                return new Problem(ClickHouseStageSinkConfig.CLICKHOUSE_DATABASE_CONFIG, "database " + config.clickHouseDatabase()
                        + " does not exist in ClickHouse at " + config.clickHouseUrlForLogs());
            }
            return new Problem(ClickHouseStageSinkConfig.CLICKHOUSE_URL_CONFIG, "ClickHouse at " + config.clickHouseUrlForLogs()
                    + " answered with an error: " + message(e));
        }
        if (isNetwork(e)) {
            return new Problem(ClickHouseStageSinkConfig.CLICKHOUSE_URL_CONFIG, "network: cannot reach ClickHouse at "
                    + config.clickHouseUrlForLogs() + ": " + message(e));
        }
        return new Problem(ClickHouseStageSinkConfig.CLICKHOUSE_URL_CONFIG, "cannot use ClickHouse at " + config.clickHouseUrlForLogs()
                + ": " + message(e));
    }

    /** The field and message of a failed write to the stage location. */
    static Problem stageWriteProblem(ClickHouseStageSinkConfig config, Throwable e) {
        String scheme = config.stageUri().getScheme();
        String text = message(e);
        boolean s3 = "s3".equals(scheme);
        boolean gcs = "gs".equals(scheme);
        String where = "the stage location " + config.stageUri();
        if (text.contains("InvalidAccessKeyId") || text.contains("Access Key Id") || text.contains("does not exist in our records")) {
            return new Problem(gcs ? ClickHouseStageSinkConfig.STAGE_GCS_HMAC_ACCESS_ID_CONFIG : ClickHouseStageSinkConfig.STAGE_S3_ACCESS_KEY_CONFIG,
                    "authentication failed: the object store does not know this access key (" + where + "): " + text);
        }
        if (text.contains("SignatureDoesNotMatch")) {
            return new Problem(gcs ? ClickHouseStageSinkConfig.STAGE_GCS_HMAC_SECRET_CONFIG : ClickHouseStageSinkConfig.STAGE_S3_SECRET_KEY_CONFIG,
                    "authentication failed: the object store refused the secret key (" + where + ")");
        }
        if (text.contains("AccessDenied") || text.contains("Status Code: 403") || e instanceof java.nio.file.AccessDeniedException
                || cause(e, java.nio.file.AccessDeniedException.class) != null) {
            return new Problem(ClickHouseStageSinkConfig.STAGE_URI_CONFIG, "permission denied: cannot write to " + where + ": " + text);
        }
        if (isNetwork(e) || text.contains("Unable to execute HTTP request")) {
            return new Problem(s3 ? ClickHouseStageSinkConfig.STAGE_S3_ENDPOINT_CONFIG : gcs ? ClickHouseStageSinkConfig.STAGE_GCS_ENDPOINT_CONFIG
                    : ClickHouseStageSinkConfig.STAGE_URI_CONFIG, "network: cannot reach the object store of " + where + ": " + text);
        }
        return new Problem(ClickHouseStageSinkConfig.STAGE_URI_CONFIG, "cannot write a test object to " + where + ": " + text);
    }

    private static long count(Client client, String sql, Map<String, Object> params) throws Exception {
        List<com.clickhouse.client.api.query.GenericRecord> rows = client.queryAll(sql, params);
        return rows.isEmpty() ? 0 : rows.get(0).getLong(1);
    }

    private static void writeTestObject(Path file) throws IOException {
        Schema schema = SchemaBuilder.record("tablecdc_validate").fields().requiredLong("x").endRecord();
        GenericRecord row = new GenericData.Record(schema);
        row.put("x", 1L);
        try (DataFileWriter<GenericRecord> writer = new DataFileWriter<>(new GenericDatumWriter<GenericRecord>(schema))) {
            writer.create(schema, file.toFile());
            writer.append(row);
        }
    }

    static boolean isNetwork(Throwable e) {
        return cause(e, ConnectException.class) != null || cause(e, UnknownHostException.class) != null
                || cause(e, NoRouteToHostException.class) != null || cause(e, SocketTimeoutException.class) != null
                || cause(e, java.util.concurrent.TimeoutException.class) != null
                || cause(e, com.clickhouse.client.api.ConnectionInitiationException.class) != null;
    }

    private static <T extends Throwable> T cause(Throwable e, Class<T> type) {
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (type.isInstance(t)) {
                return type.cast(t);
            }
        }
        return null;
    }

    private static String message(Throwable e) {
        Throwable t = e;
        while ((t.getMessage() == null || t.getMessage().isBlank()) && t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        String m = t.getMessage() == null ? t.getClass().getSimpleName() : t.getMessage();
        return m.strip();
    }

    /** Removes every configured secret from the messages, should a server or library have echoed one. */
    static List<Problem> scrub(List<Problem> problems, ClickHouseStageSinkConfig config) {
        List<String> secrets = new ArrayList<>();
        for (var p : List.of(config.clickHousePassword(), config.s3SecretKey(), config.gcsHmacSecret())) {
            if (p != null && p.value() != null && p.value().length() >= 3) {
                secrets.add(p.value());
            }
        }
        List<Problem> out = new ArrayList<>();
        for (Problem p : problems) {
            String m = p.message();
            for (String s : secrets) {
                m = m.replace(s, "[hidden]");
            }
            out.add(new Problem(p.field(), m));
        }
        return out;
    }
}
