package io.tablecdc.pg.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.junit.jupiter.api.Test;
import org.postgresql.Driver;

/** The table → topic rule, the clashes validate() reports, and the database name in the JDBC URL. */
class TopicNamesTest {
    private static final String VALID = "[A-Za-z0-9._-]{1,249}";

    private static String hash(String table) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
                .digest(table.getBytes(StandardCharsets.UTF_8))).substring(0, 12);
    }

    @Test
    void validNamesKeepTheirTopic() {
        assertEquals("pg.public.orders", TopicNames.topic("pg", "public.orders"));
        assertEquals("pg.Sales-2024.line_items", TopicNames.topic("pg", "Sales-2024.line_items"));
    }

    @Test
    void otherCharactersBecomeUnderscoresWithAHashOfTheName() throws Exception {
        for (String table : List.of("public.my table", "public.it's", "public.semi;colon", "public.\"quoted\"",
                "public.ünïcödé", "public.emoji😀", "public.new\nline")) {
            String topic = TopicNames.topic("pg", table);
            assertTrue(topic.matches(VALID), topic);
            assertTrue(topic.endsWith("_" + hash(table)), topic);
        }
        assertEquals("pg.public.my_table_" + hash("public.my table"), TopicNames.topic("pg", "public.my table"));
        assertEquals("pg.public.emoji__" + hash("public.emoji😀"), TopicNames.topic("pg", "public.emoji😀"),
                "one underscore per character, also outside the BMP");
        // the same escaped text, different names: different topics
        assertNotEquals(TopicNames.topic("pg", "s.a b"), TopicNames.topic("pg", "s.a;b"));
        // a name that is valid as it stands never gets a hash, even when it looks like an escaped one
        assertEquals("pg.s.a_b", TopicNames.topic("pg", "s.a_b"));
    }

    @Test
    void longNamesAreCutToKafkasLimitWithTheirHash() throws Exception {
        String prefix = "p".repeat(100);
        String fits = "s." + "t".repeat(249 - 101 - 2);
        assertEquals(prefix + "." + fits, TopicNames.topic(prefix, fits), "249 characters: as it is");
        String tooLong = fits + "x";
        String topic = TopicNames.topic(prefix, tooLong);
        assertEquals(249, topic.length(), topic);
        assertTrue(topic.matches(VALID));
        assertTrue(topic.endsWith("_" + hash(tooLong)), topic);
        assertNotEquals(topic, TopicNames.topic(prefix, fits + "y"), "names cut to the same text keep apart");
    }

    @Test
    void clashesAreTopicsEqualOnceDotAndUnderscoreAreOne() {
        List<Map<String, String>> clashes = TopicNames.collisions("pg", List.of("s.a_b", "s.a.b", "s.c", "s_c.d", "s.c_d",
                "t.x"));
        assertEquals(2, clashes.size(), clashes.toString());
        assertEquals(Map.of("s.a_b", "pg.s.a_b", "s.a.b", "pg.s.a.b"), clashes.get(0));
        assertEquals(Map.of("s_c.d", "pg.s_c.d", "s.c_d", "pg.s.c_d"), clashes.get(1));
        assertEquals("s.a_b (topic pg.s.a_b) and s.a.b (topic pg.s.a.b)", TopicNames.describe(clashes.get(0)));
        assertEquals(List.of(), TopicNames.collisions("pg", List.of("s.a b", "s.a;b", "s.a_b")));
    }

    @Test
    void theDatabaseNameReachesTheDriverAsItIs() {
        for (String database : List.of("plain", "my db", "a/b?c=d&e", "50%+x", "ünï", "it's")) {
            Map<String, String> props = ConfigDocsTest.minimal();
            props.put("database.dbname", database);
            PgPipelineConfig config = new PgPipelineConfig(props);
            Properties parsed = Driver.parseURL(config.jdbcUrl(), new Properties());
            assertEquals(database, parsed.getProperty("PGDBNAME"), config.jdbcUrl());
            assertEquals("5432", parsed.getProperty("PGPORT"));
        }
    }
}
