package io.tablecdc.catalog;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.common.config.ConfigDef.Width;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;

/**
 * The catalog settings every tablecdc connector shares. Each connector's {@code ConfigDef} calls
 * {@link #addTo(ConfigDef)}; its config class then reads them with {@link #settings(AbstractConfig)}.
 */
public final class CatalogConfig {

    public static final String GROUP = "Catalog";

    public static final String JDBC_URL_CONFIG = "catalog.jdbc.url";
    public static final String JDBC_URL_DOC = "JDBC URL of the catalog, a PostgreSQL 14+ database shared by all"
            + " connectors of a deployment, e.g. jdbc:postgresql://catalog-host:5432/tablecdc. Put the password"
            + " in catalog.password, not in the URL.";

    public static final String USER_CONFIG = "catalog.user";
    public static final String USER_DOC = "Database user for the catalog.";
    public static final String USER_DEFAULT = "";

    public static final String PASSWORD_CONFIG = "catalog.password";
    public static final String PASSWORD_DOC = "Password of catalog.user. Never logged; use a Connect config"
            + " provider (e.g. ${file:...}) to keep it out of the connector config.";

    public static final String MIGRATE_CONFIG = "catalog.migrate";
    public static final String MIGRATE_DOC = "Apply pending catalog migrations when the connector starts. When"
            + " false, the connector only checks that the catalog's schema is the one it needs and refuses to"
            + " start otherwise.";
    public static final boolean MIGRATE_DEFAULT = true;

    public static final String POOL_SIZE_CONFIG = "catalog.pool.size";
    public static final String POOL_SIZE_DOC = "Maximum number of catalog connections each connector and each"
            + " task keeps open. Catalog writes are a few per batch, so a small pool is enough.";
    public static final int POOL_SIZE_DEFAULT = 2;

    public static final String CONNECTION_TIMEOUT_MS_CONFIG = "catalog.connection.timeout.ms";
    public static final String CONNECTION_TIMEOUT_MS_DOC = "How long a catalog operation waits for a connection"
            + " before it fails as 'catalog unavailable' (and the affected task retries).";
    public static final long CONNECTION_TIMEOUT_MS_DEFAULT = 10_000L;

    private CatalogConfig() {
    }

    /** Adds the catalog settings, in their own group, to {@code def} and returns it. */
    public static ConfigDef addTo(ConfigDef def) {
        int order = 0;
        return def
                .define(JDBC_URL_CONFIG, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new PostgresJdbcUrl(),
                        Importance.HIGH, JDBC_URL_DOC, GROUP, ++order, Width.LONG, "Catalog JDBC URL")
                .define(USER_CONFIG, Type.STRING, USER_DEFAULT, Importance.HIGH, USER_DOC, GROUP, ++order,
                        Width.MEDIUM, "Catalog user")
                .define(PASSWORD_CONFIG, Type.PASSWORD, null, Importance.HIGH, PASSWORD_DOC, GROUP, ++order,
                        Width.MEDIUM, "Catalog password")
                .define(MIGRATE_CONFIG, Type.BOOLEAN, MIGRATE_DEFAULT, Importance.MEDIUM, MIGRATE_DOC, GROUP,
                        ++order, Width.SHORT, "Apply catalog migrations")
                .define(POOL_SIZE_CONFIG, Type.INT, POOL_SIZE_DEFAULT, ConfigDef.Range.between(1, 50),
                        Importance.LOW, POOL_SIZE_DOC, GROUP, ++order, Width.SHORT, "Catalog pool size")
                .define(CONNECTION_TIMEOUT_MS_CONFIG, Type.LONG, CONNECTION_TIMEOUT_MS_DEFAULT,
                        ConfigDef.Range.between(250L, 600_000L), Importance.LOW, CONNECTION_TIMEOUT_MS_DOC, GROUP,
                        ++order, Width.SHORT, "Catalog connection timeout (ms)");
    }

    /** Reads the catalog settings from a config whose definition went through {@link #addTo(ConfigDef)}. */
    public static CatalogSettings settings(AbstractConfig config) {
        return new CatalogSettings(
                config.getString(JDBC_URL_CONFIG),
                config.getString(USER_CONFIG),
                config.getPassword(PASSWORD_CONFIG),
                config.getBoolean(MIGRATE_CONFIG),
                config.getInt(POOL_SIZE_CONFIG),
                config.getLong(CONNECTION_TIMEOUT_MS_CONFIG));
    }

    /**
     * Accepts only {@code jdbc:postgresql:} URLs. Its messages never repeat the value, which could hold
     * credentials.
     */
    static final class PostgresJdbcUrl implements ConfigDef.Validator {
        @Override
        public void ensureValid(String name, Object value) {
            if (value == null || !value.toString().startsWith("jdbc:postgresql:")) {
                throw new ConfigException(name + " must be a PostgreSQL JDBC URL starting with jdbc:postgresql:");
            }
        }

        @Override
        public String toString() {
            return "a JDBC URL starting with jdbc:postgresql:";
        }
    }

    /** Catalog connection settings. {@link #toString()} hides the password. */
    public record CatalogSettings(String jdbcUrl, String user, Password password, boolean migrate, int poolSize,
                                  long connectionTimeoutMs) {
        @Override
        public String toString() {
            return "CatalogSettings[user=" + user + ", migrate=" + migrate + ", poolSize=" + poolSize
                    + ", connectionTimeoutMs=" + connectionTimeoutMs + "]";
        }
    }
}
