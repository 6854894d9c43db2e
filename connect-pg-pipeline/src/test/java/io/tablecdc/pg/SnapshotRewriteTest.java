package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.postgresql.PGConnection;
import org.postgresql.PGProperty;
import org.postgresql.replication.ReplicationSlotInfo;

import io.tablecdc.pg.wire.PgOutputMessage.Relation;

/**
 * A table truncated or rewritten between the copy slot's snapshot and the copy, against a real PostgreSQL 17: the
 * snapshot then reads the table's new, empty storage (and the stream carries no rows for it), so a copy would load
 * an empty table. The copy's reader takes ACCESS SHARE right after {@code SET TRANSACTION SNAPSHOT} and compares the
 * snapshot's relfilenode with the current one; a mismatch starts the copy over from a new snapshot.
 */
class SnapshotRewriteTest {
    private static PgoutputServer pg;

    @BeforeAll
    static void startPostgres() throws Exception {
        pg = PgoutputServer.start("snapshot-rewrite");
        pg.execute("CREATE PUBLICATION rw_pub FOR ALL TABLES");
    }

    @AfterAll
    static void stop() throws Exception {
        if (pg != null) {
            pg.close();
        }
    }

    private static Connection replication() throws SQLException {
        Properties props = new Properties();
        PGProperty.USER.set(props, "postgres");
        PGProperty.PASSWORD.set(props, "");
        PGProperty.REPLICATION.set(props, "database");
        PGProperty.ASSUME_MIN_SERVER_VERSION.set(props, "10");
        PGProperty.PREFER_QUERY_MODE.set(props, "simple");
        return DriverManager.getConnection("jdbc:postgresql://127.0.0.1:" + pg.port() + "/" + PgoutputServer.DATABASE,
                props);
    }

    /** A reader in {@code snapshot}, as a copy task opens it. */
    private static Connection reader(String snapshot) throws SQLException {
        Connection reader = pg.connect();
        reader.setAutoCommit(false);
        reader.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
        reader.setReadOnly(true);
        try (Statement s = reader.createStatement()) {
            s.execute("SET TRANSACTION SNAPSHOT '" + snapshot + "'");
        }
        return reader;
    }

    private static long count(Connection c, String table) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT count(*) FROM " + table)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"ALTER TABLE %s ALTER COLUMN n TYPE bigint", "TRUNCATE %s", "VACUUM FULL %s", "none"})
    void aTableRewrittenAfterTheSnapshotIsDetectedOnceLocked(String change) throws Exception {
        String table = "public.rw_" + Math.abs(change.hashCode() % 10_000);
        pg.execute("CREATE TABLE " + table + " (id int PRIMARY KEY, n int NOT NULL)",
                "INSERT INTO " + table + " SELECT g, g FROM generate_series(1, 500) g");
        try (Connection replication = replication()) {
            ReplicationSlotInfo slot = replication.unwrap(PGConnection.class).getReplicationAPI()
                    .createReplicationSlot().logical().withSlotName("rw_copy_" + Math.abs(change.hashCode() % 10_000))
                    .withOutputPlugin("pgoutput").withTemporaryOption().make();
            boolean rewritten = !change.equals("none");
            if (rewritten) {
                // committed after the snapshot was exported, before the copy reads
                pg.execute(String.format(change, table));
            }
            try (Connection reader = reader(slot.getSnapshotName())) {
                Relation relation = SourceDatabase.describe(reader, "rw_pub", table).orElseThrow();
                boolean intact = SourceDatabase.lockUnrewritten(reader, relation);
                assertEquals(!rewritten, intact, change);
                if (!rewritten) {
                    assertEquals(500, count(reader, table));
                } else if (!change.startsWith("VACUUM")) {
                    // what a copy in this snapshot would have loaded: nothing (VACUUM FULL keeps the rows' xmin)
                    assertEquals(0, count(reader, table), "the snapshot reads the new storage");
                }
                // the lock keeps a rewrite out while the copy's transaction lasts
                try (Connection other = pg.connect(); Statement s = other.createStatement()) {
                    s.execute("SET lock_timeout = '200ms'");
                    SQLException blocked = org.junit.jupiter.api.Assertions.assertThrows(SQLException.class,
                            () -> s.execute("TRUNCATE " + table));
                    assertEquals("55P03", blocked.getSQLState(), blocked.getMessage());
                }
                reader.rollback();
            }
            // a new snapshot after the rewrite is consistent again
            ReplicationSlotInfo again = replication.unwrap(PGConnection.class).getReplicationAPI()
                    .createReplicationSlot().logical().withSlotName("rw_again_" + Math.abs(change.hashCode() % 10_000))
                    .withOutputPlugin("pgoutput").withTemporaryOption().make();
            try (Connection reader = reader(again.getSnapshotName())) {
                Relation relation = SourceDatabase.describe(reader, "rw_pub", table).orElseThrow();
                assertTrue(SourceDatabase.lockUnrewritten(reader, relation));
                assertEquals(change.startsWith("TRUNCATE") ? 0 : 500, count(reader, table));
                reader.rollback();
            }
        }
        assertFalse(table.isEmpty());
    }
}
