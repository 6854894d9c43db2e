package io.tablecdc.catalog;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Properties;


/**
 * The catalog part of every connector's {@code validate()}: connects with the configured settings and puts what
 * went wrong on the field at fault, as what it is (a refused password on {@code catalog.password}, an unknown user
 * on {@code catalog.user}, an unreachable server or a missing database on {@code catalog.jdbc.url}, a user that may
 * not create the catalog's tables on {@code catalog.user}). Messages never hold the password or the JDBC URL.
 */
public final class CatalogConnectionCheck {
    private CatalogConnectionCheck() {
    }

    /** A problem found, and the field it belongs to. */
    public record Problem(String field, String message) {
    }

    /** Connects to the catalog; null when it accepts the connection and the user may do what the settings ask. */
    public static Problem check(CatalogConfig.CatalogSettings settings) {
        Properties props = new Properties();
        props.setProperty("user", settings.user());
        if (settings.password() != null && settings.password().value() != null) {
            props.setProperty("password", settings.password().value());
        }
        props.setProperty("connectTimeout", "5");
        props.setProperty("loginTimeout", "5");
        props.setProperty("ApplicationName", "tablecdc validate");
        // the driver directly: DriverManager does not see drivers inside a plugin's class loader
        try (Connection connection = new org.postgresql.Driver().connect(settings.jdbcUrl(), props)) {
            if (connection == null) {
                return new Problem(CatalogConfig.JDBC_URL_CONFIG, "not a PostgreSQL JDBC URL");
            }
            return settings.migrate() ? creationRights(connection, settings.user()) : null;
        } catch (SQLException e) {
            return problemOf(e, settings.user());
        }
    }

    /** The field and message of a refused connection, by SQLSTATE. */
    public static Problem problemOf(SQLException e, String user) {
        String state = e.getSQLState() == null ? "" : e.getSQLState();
        String detail = (e.getMessage() == null ? "" : e.getMessage()) + " (SQLSTATE " + state + ")";
        if (state.equals("28P01")) {
            return new Problem(CatalogConfig.PASSWORD_CONFIG, "authentication failed: the catalog refused the password of user '"
                    + user + "': " + detail);
        }
        if (state.startsWith("28")) {
            return new Problem(CatalogConfig.USER_CONFIG, "authentication failed: the catalog refused user '" + user + "': "
                    + detail);
        }
        if (state.equals("3D000")) {
            return new Problem(CatalogConfig.JDBC_URL_CONFIG, "the catalog database does not exist: " + detail);
        }
        if (state.equals("42501")) {
            return new Problem(CatalogConfig.USER_CONFIG, "permission denied: user '" + user + "' may not connect to the catalog"
                    + " database: " + detail);
        }
        if (state.startsWith("08")) {
            return new Problem(CatalogConfig.JDBC_URL_CONFIG, "network: cannot reach the catalog: " + detail);
        }
        return new Problem(CatalogConfig.JDBC_URL_CONFIG, "cannot connect to the catalog: " + detail);
    }

    /**
     * With {@code catalog.migrate=true} the connector creates or alters the catalog's tables: while they do not exist
     * yet, the user needs CREATE on the schema they go into.
     */
    private static Problem creationRights(Connection connection, String user) throws SQLException {
        try (PreparedStatement st = connection.prepareStatement(
                "SELECT current_schema(), to_regclass('cdc_catalog_schema_history') IS NOT NULL,"
                        + " current_schema() IS NOT NULL AND has_schema_privilege(current_schema(), 'CREATE')");
             ResultSet rs = st.executeQuery()) {
            rs.next();
            String schema = rs.getString(1);
            if (schema == null) {
                return new Problem(CatalogConfig.JDBC_URL_CONFIG, "the catalog's schema does not exist (currentSchema in"
                        + " catalog.jdbc.url names a schema that is not there, or the search_path is empty)");
            }
            if (!rs.getBoolean(2) && !rs.getBoolean(3)) {
                return new Problem(CatalogConfig.USER_CONFIG, "permission denied: user '" + user + "' may not create the"
                        + " catalog's tables in schema " + schema + " (GRANT CREATE ON SCHEMA " + schema + " TO " + user
                        + "), or migrate by hand with bin/tablecdc-catalog-migrate and set catalog.migrate=false");
            }
            return null;
        }
    }
}
