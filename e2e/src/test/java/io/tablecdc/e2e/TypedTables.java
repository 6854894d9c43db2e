package io.tablecdc.e2e;

import java.sql.Connection;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import com.clickhouse.client.api.Client;
import com.clickhouse.client.api.query.GenericRecord;

import io.tablecdc.e2e.stack.LocalStack;

/**
 * The tables of the tests that carry every type through a record path other than the default one
 * ({@link RegistryConverterIT}, {@link RecordBlocksIT}): {@code <schema>.all}, a column of every type of docs/types.md
 * ({@link PgTypesIT.AllTypes}), and {@code <schema>.keyed}, keyed by a decimal, a timestamptz and a uuid; the changes
 * streamed into both after their copy; and the ClickHouse column types the sink must choose for them, as with
 * JsonConverter.
 */
final class TypedTables {
    private final String schema;
    private final PgTypesIT.AllTypes all;

    TypedTables(String schema) {
        this.schema = schema;
        this.all = PgTypesIT.AllTypes.in(schema);
    }

    /** Checks whose Postgres sessions print intervals as ISO 8601, as the types table says they arrive. */
    static PgChecks checks(LocalStack stack, String database, String catalogUrl, Client clickhouse) {
        return new PgChecks(stack, () -> {
            Connection c = stack.postgres().connect(database);
            try (Statement s = c.createStatement()) {
                s.execute("SET IntervalStyle = iso_8601");
            }
            return c;
        }, catalogUrl, clickhouse);
    }

    /** The schema (dropped first), its types, both tables and their rows. */
    List<String> create() {
        return List.of("DROP SCHEMA IF EXISTS " + schema + " CASCADE",
                "CREATE SCHEMA " + schema,
                "CREATE TYPE " + schema + ".pair AS (a int, b text)",
                "CREATE DOMAIN " + schema + ".posint AS int CHECK (VALUE > 0)",
                "CREATE TYPE " + schema + ".mood AS ENUM ('happy', 'sad')",
                all.ddl(),
                all.insert(),
                "INSERT INTO " + schema + ".all (id) VALUES (3)",
                "CREATE TABLE " + schema + ".keyed (k_n numeric(12,3), k_ts timestamptz, k_u uuid, v text, PRIMARY KEY (k_n, k_ts, k_u))",
                "INSERT INTO " + schema + ".keyed VALUES (-1.5, '2024-02-29 12:34:56.123456+05:30',"
                        + " 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'a'),"
                        + " (123456789.001, '1970-01-01 00:00:00+00', '00000000-0000-0000-0000-000000000000', NULL)");
    }

    /** Both tables' rows as text in Postgres and in ClickHouse, for {@link PgChecks#awaitEqual}. */
    Map<String, String[]> rows() {
        Map<String, String[]> tables = new LinkedHashMap<>();
        tables.put(schema + ".all", new String[] {all.pgRow(), all.chRow()});
        tables.put(schema + ".keyed", new String[] {"trim_scale(k_n)::text || '|' || to_char(k_ts AT TIME ZONE 'UTC',"
                + " 'YYYY-MM-DD HH24:MI:SS.US') || '|' || k_u::text || '|' || coalesce(v, '-')",
                "concat(toString(k_n), '|', toString(k_ts), '|', toString(k_u), '|', ifNull(v, '-'))"});
        return tables;
    }

    /**
     * Streamed after the copy: the same values again under new keys, updates (non-finite floats, nulls, a key column),
     * deletes. Afterwards {@code all} has 4 rows and {@code keyed} 2.
     */
    List<String> changes() {
        return new ArrayList<>(List.of("INSERT INTO " + schema + ".all SELECT id + 100" + all.names() + " FROM " + schema + ".all",
                "UPDATE " + schema + ".all SET t = t || '!', i4 = i4 - 1, n = 0.01, ai = ai || 4, f8i = '-Infinity',"
                        + " af8 = af8 || 'NaN'::float8 WHERE id = 101",
                "UPDATE " + schema + ".all SET tz = NULL, j = NULL, by = '\\xdeadbeef' WHERE id = 102",
                "DELETE FROM " + schema + ".all WHERE id IN (2, 103)",
                "INSERT INTO " + schema + ".keyed VALUES (0.001, '2299-12-31 23:59:59.999999+00',"
                        + " 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'c')",
                "UPDATE " + schema + ".keyed SET v = 'b' WHERE k_n = -1.5",
                "UPDATE " + schema + ".keyed SET k_n = 7.25 WHERE k_n = 123456789.001",
                "DELETE FROM " + schema + ".keyed WHERE k_n = -1.5"));
    }

    /** The ClickHouse types docs/types.md gives the columns (those JsonConverter's schemas give), by {@code table.column}. */
    Map<String, String> expectedTypes() {
        Map<String, String> types = new TreeMap<>();
        String a = schema + "_all.";
        types.put(a + "id", "Int32");
        types.put(a + "n", "Nullable(Decimal(10, 2))");
        types.put(a + "nfree", "Nullable(String)");
        types.put(a + "nwide", "Nullable(String)");
        types.put(a + "f4", "Nullable(Float32)");
        types.put(a + "f8", "Nullable(Float64)");
        types.put(a + "i2", "Nullable(Int16)");
        types.put(a + "o", "Nullable(Int64)");
        types.put(a + "b", "Nullable(Bool)");
        types.put(a + "by", "Nullable(String)");
        types.put(a + "u", "Nullable(UUID)");
        types.put(a + "j", "Nullable(String)");
        types.put(a + "jb", "Nullable(String)");
        types.put(a + "d", "Nullable(Date32)");
        types.put(a + "ts", "Nullable(DateTime64(6, 'UTC'))");
        types.put(a + "tz", "Nullable(DateTime64(6, 'UTC'))");
        types.put(a + "tm", "Nullable(Int64)");
        types.put(a + "ai", "Array(Nullable(Int32))");
        types.put(a + "af8", "Array(Nullable(Float64))");
        String k = schema + "_keyed.";
        types.put(k + "k_n", "Decimal(12, 3)");
        types.put(k + "k_ts", "DateTime64(6, 'UTC')");
        types.put(k + "k_u", "UUID");
        return types;
    }

    /** The types ClickHouse has for the columns {@link #expectedTypes} names. */
    Map<String, String> actualTypes(Client clickhouse) {
        Map<String, String> expected = expectedTypes();
        Map<String, String> types = new TreeMap<>();
        for (GenericRecord r : clickhouse.queryAll("SELECT concat(table, '.', name) AS c, type FROM system.columns"
                + " WHERE database = currentDatabase() AND table IN ('" + schema + "_all', '" + schema + "_keyed')")) {
            if (expected.containsKey(r.getString("c"))) {
                types.put(r.getString("c"), r.getString("type"));
            }
        }
        return types;
    }
}
