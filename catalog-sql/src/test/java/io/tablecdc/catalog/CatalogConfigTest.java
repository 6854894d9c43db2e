package io.tablecdc.catalog;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tablecdc.catalog.CatalogConfig.CatalogSettings;
import java.util.Map;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

class CatalogConfigTest {

    private static final String URL = "jdbc:postgresql://catalog:5432/tablecdc";

    @Test
    void everyCatalogKeyIsDocumentedAndGrouped() {
        ConfigDef def = CatalogConfig.addTo(new ConfigDef().define("other", ConfigDef.Type.STRING,
                ConfigDef.Importance.LOW, "another connector setting"));
        assertEquals(7, def.configKeys().size());
        for (ConfigDef.ConfigKey key : def.configKeys().values()) {
            if (key.name.startsWith("catalog.")) {
                assertNotNull(key.documentation, key.name);
                assertFalse(key.documentation.isBlank(), key.name);
                assertEquals(CatalogConfig.GROUP, key.group, key.name);
            }
        }
        assertEquals(ConfigDef.Type.PASSWORD, def.configKeys().get(CatalogConfig.PASSWORD_CONFIG).type);
        assertTrue(def.toRst().contains("a JDBC URL starting with jdbc:postgresql:"));
    }

    @Test
    void readsSettingsWithDefaultsAndHidesThePassword() {
        AbstractConfig config = new AbstractConfig(CatalogConfig.addTo(new ConfigDef()), Map.of(
                CatalogConfig.JDBC_URL_CONFIG, URL,
                CatalogConfig.USER_CONFIG, "tablecdc",
                CatalogConfig.PASSWORD_CONFIG, "s3cret-pw"));
        CatalogSettings settings = CatalogConfig.settings(config);
        assertEquals(URL, settings.jdbcUrl());
        assertEquals("tablecdc", settings.user());
        assertEquals("s3cret-pw", settings.password().value());
        assertTrue(settings.migrate());
        assertEquals(2, settings.poolSize());
        assertEquals(10_000L, settings.connectionTimeoutMs());
        assertFalse(settings.toString().contains("s3cret-pw"), settings.toString());
        assertFalse(settings.toString().contains(URL), "the URL may carry credentials");
    }

    @Test
    void rejectsANonPostgresUrlWithoutRepeatingIt() {
        ConfigException e = assertThrows(ConfigException.class, () -> new AbstractConfig(
                CatalogConfig.addTo(new ConfigDef()),
                Map.of(CatalogConfig.JDBC_URL_CONFIG, "jdbc:mysql://h/db?password=s3cret-pw")));
        assertTrue(e.getMessage().contains(CatalogConfig.JDBC_URL_CONFIG), e.getMessage());
        assertFalse(e.getMessage().contains("s3cret-pw"), e.getMessage());
        assertThrows(ConfigException.class, () -> new AbstractConfig(CatalogConfig.addTo(new ConfigDef()),
                Map.of(CatalogConfig.JDBC_URL_CONFIG, URL, CatalogConfig.POOL_SIZE_CONFIG, "0")));
    }
}
