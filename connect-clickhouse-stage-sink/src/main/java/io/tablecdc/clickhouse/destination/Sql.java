package io.tablecdc.clickhouse.destination;

import java.util.List;
import java.util.stream.Collectors;

/**
 * ClickHouse SQL text helpers: identifiers are always quoted. Values are bound as query parameters; only
 * DDL engine arguments, which cannot be parameters, are written as {@link #literal} strings.
 */
public final class Sql {
    private Sql() {
    }

    /** A quoted identifier: {@code `name`} with backticks and backslashes escaped. */
    public static String id(String name) {
        return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`";
    }

    /** {@code `db`.`table`}. */
    public static String table(String database, String table) {
        return id(database) + "." + id(table);
    }

    /** A quoted string literal: {@code 'text'} with quotes and backslashes escaped (DDL arguments only). */
    public static String literal(String text) {
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'";
    }

    public static String idList(List<String> names) {
        return names.stream().map(Sql::id).collect(Collectors.joining(", "));
    }
}
