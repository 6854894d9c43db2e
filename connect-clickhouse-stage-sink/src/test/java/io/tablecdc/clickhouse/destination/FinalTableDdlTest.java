package io.tablecdc.clickhouse.destination;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import io.tablecdc.clickhouse.schema.StageColumn;

/**
 * The SQL text of final-table statements on one server and on a cluster: identifiers quoted, engine
 * arguments escaped, every statement safe to run again. A cluster cannot run on the test machines (chDB is
 * one embedded engine), so the cluster forms are checked here as text only.
 */
class FinalTableDdlTest {
    private static final List<StageColumn> KEYED = List.of(
            new StageColumn("id", "id", "Int64", true),
            new StageColumn("region", "region", "String", true),
            new StageColumn("name", "name", "Nullable(String)", false),
            new StageColumn("_tablecdc_version", "_tablecdc_version", "UInt64", false),
            new StageColumn("_tablecdc_is_deleted", "_tablecdc_is_deleted", "UInt8", false));
    private static final List<StageColumn> KEYLESS = List.of(
            new StageColumn("msg", "msg", "String", false),
            new StageColumn("_tablecdc_version", "_tablecdc_version", "UInt64", false),
            new StageColumn("_tablecdc_is_deleted", "_tablecdc_is_deleted", "UInt8", false));
    private static final String COLUMNS = "(`id` Int64, `region` String, `name` Nullable(String), `_tablecdc_version` UInt64,"
            + " `_tablecdc_is_deleted` UInt8)";
    private static final StageColumn NEW_COLUMN = new StageColumn("color", "color", "Nullable(String)", false);

    private static final FinalTableDdl SINGLE = new FinalTableDdl("an`alytics", Cluster.single());
    private static final Cluster REPLICATED = new Cluster("prod", "/clickhouse/tables/{shard}/{database}/{table}", "{replica}",
            false, "auto", 60_000);
    private static final Cluster SHARDED = new Cluster("prod", "/clickhouse/tables/{shard}/{database}/{table}", "{replica}",
            true, "2", 30_000);

    @Test
    void oneServerCreatesAReplacingMergeTreeWithItsDeduplicationWindow() {
        assertEquals(List.of("CREATE TABLE IF NOT EXISTS `an\\`alytics`.`orders` " + COLUMNS
                        + " ENGINE = ReplacingMergeTree(`_tablecdc_version`, `_tablecdc_is_deleted`) ORDER BY (`id`, `region`)"
                        + " SETTINGS non_replicated_deduplication_window = 1000"),
                SINGLE.createTable("orders", KEYED, 1000));
        assertEquals(List.of("CREATE TABLE IF NOT EXISTS `an\\`alytics`.`log` (`msg` String, `_tablecdc_version` UInt64,"
                        + " `_tablecdc_is_deleted` UInt8) ENGINE = MergeTree ORDER BY tuple() SETTINGS non_replicated_deduplication_window = 5"),
                SINGLE.createTable("log", KEYLESS, 5));
        assertEquals("CREATE VIEW IF NOT EXISTS `an\\`alytics`.`orders_current` AS SELECT * FROM `an\\`alytics`.`orders` FINAL"
                + " WHERE `_tablecdc_is_deleted` = 0", SINGLE.createCurrentView("orders"));
        assertEquals("CREATE OR REPLACE VIEW `an\\`alytics`.`orders_current` AS SELECT * FROM `an\\`alytics`.`orders` FINAL"
                + " WHERE `_tablecdc_is_deleted` = 0", SINGLE.replaceCurrentView("orders"));
        assertEquals(List.of("ALTER TABLE `an\\`alytics`.`orders` ADD COLUMN IF NOT EXISTS `color` Nullable(String)"),
                SINGLE.addColumn("orders", NEW_COLUMN));
        assertEquals(Map.of(), Cluster.single().insertSettings(), "no quorum on one server");
    }

    @Test
    void truncateQuotesItsIdentifiersAndToleratesATableNotCreatedYet() {
        assertEquals("TRUNCATE TABLE IF EXISTS `an\\`alytics`.`shop_orders`", SINGLE.truncate("shop_orders"));
    }

    @Test
    void insertSelectNamesTheColumnsAndReadsTheAvroFieldsOfTheStageFile() {
        List<StageColumn> renamed = List.of(new StageColumn("f_0", "order id", "Int64", true));
        assertEquals("INSERT INTO `db`.`orders` (`order id`) SELECT `f_0` FROM s3({url:String}, 'Avro')",
                new FinalTableDdl("db", SHARDED).insertSelect("orders", renamed, "s3({url:String}, 'Avro')"),
                "loads go into the Distributed table, which routes each row to its shard");
    }

    @Test
    void aFileWithUnchangedValuesTakesThemFromTheFinalTableInTheSameStatement() {
        List<StageColumn> lookup = List.of(
                new StageColumn("_tablecdc_unchanged", "_tablecdc_unchanged", "Array(String)", false),
                new StageColumn("_tablecdc_lookup_0", "_tablecdc_lookup_0", "Int64", true),
                new StageColumn("_tablecdc_lookup_1", "_tablecdc_lookup_1", "String", true),
                new StageColumn("_tablecdc_lookup_version", "_tablecdc_lookup_version", "UInt128", false));
        String sql = new FinalTableDdl("db", Cluster.single()).insertSelectFilling("shop.orders", "orders", KEYED, lookup,
                "file({path:String}, 'Avro')");
        String versions = "SELECT `id` AS `_tablecdc_k0`, `region` AS `_tablecdc_k1`, `name` AS `_tablecdc_c0`,"
                + " toUInt128(`_tablecdc_version`) AS `_tablecdc_v`, `_tablecdc_is_deleted` AS `_tablecdc_d`, toUInt8(1) AS"
                + " `_tablecdc_f` FROM `db`.`orders` WHERE (`id`, `region`) IN (SELECT ";
        String marked = " FROM file({path:String}, 'Avro') WHERE notEmpty(`_tablecdc_unchanged`))";
        assertEquals("INSERT INTO `db`.`orders` (`id`, `region`, `name`, `_tablecdc_version`, `_tablecdc_is_deleted`)"
                + " SELECT s.`id`, s.`region`, if(has(s.`_tablecdc_unchanged`, 'name'), if(o.`_tablecdc_f` = 1,"
                + " o.`_tablecdc_c0`, p.`_tablecdc_c0`), s.`name`), s.`_tablecdc_sv`, s.`_tablecdc_is_deleted`"
                + " FROM (SELECT *, reinterpretAsUInt128(`_tablecdc_version`) AS `_tablecdc_sv`,"
                + " reinterpretAsUInt128(`_tablecdc_lookup_version`) AS `_tablecdc_lv`, CAST(`_tablecdc_lookup_0` AS Int64) AS `_tablecdc_l0`, CAST(`id` AS Int64) AS `_tablecdc_o0`,"
                + " CAST(`_tablecdc_lookup_1` AS String) AS `_tablecdc_l1`, CAST(`region` AS String) AS `_tablecdc_o1`"
                + " FROM file({path:String}, 'Avro')) AS s"
                + " ASOF LEFT JOIN (" + versions + "CAST(`_tablecdc_lookup_0` AS Int64), CAST(`_tablecdc_lookup_1` AS String)"
                + marked + ") AS p"
                + " ON s.`_tablecdc_l0` = p.`_tablecdc_k0` AND s.`_tablecdc_l1` = p.`_tablecdc_k1`"
                + " AND s.`_tablecdc_lv` > p.`_tablecdc_v`"
                + " ASOF LEFT JOIN (" + versions + "CAST(`id` AS Int64), CAST(`region` AS String)" + marked + ") AS o"
                + " ON s.`_tablecdc_o0` = o.`_tablecdc_k0` AND s.`_tablecdc_o1` = o.`_tablecdc_k1`"
                + " AND s.`_tablecdc_sv` <= o.`_tablecdc_v`"
                + " WHERE throwIf(notEmpty(s.`_tablecdc_unchanged`) AND o.`_tablecdc_f` = 0 AND (p.`_tablecdc_f` = 0"
                + " OR p.`_tablecdc_d` = 1), 'table shop.orders: a row updated with unchanged (TOAST) values in db.orders"
                + " has no earlier live version to keep them from (the row was never loaded, or was deleted)') = 0", sql);
        assertThrows(IllegalArgumentException.class, () -> new FinalTableDdl("db", Cluster.single())
                .insertSelectFilling("shop.orders", "orders", KEYED, lookup.subList(0, 2), "file({path:String}, 'Avro')"));
    }

    @Test
    void aClusterCreatesReplicatedTablesOnClusterWithTheReplicationPathAsLiterals() {
        FinalTableDdl ddl = new FinalTableDdl("db", REPLICATED);
        assertEquals(List.of("CREATE TABLE IF NOT EXISTS `db`.`orders` ON CLUSTER `prod` " + COLUMNS
                        + " ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}',"
                        + " `_tablecdc_version`, `_tablecdc_is_deleted`) ORDER BY (`id`, `region`)"
                        + " SETTINGS replicated_deduplication_window = 1000"),
                ddl.createTable("orders", KEYED, 1000));
        assertEquals(List.of("CREATE TABLE IF NOT EXISTS `db`.`log` ON CLUSTER `prod` (`msg` String, `_tablecdc_version` UInt64,"
                        + " `_tablecdc_is_deleted` UInt8) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/{table}',"
                        + " '{replica}') ORDER BY tuple() SETTINGS replicated_deduplication_window = 1000"),
                ddl.createTable("log", KEYLESS, 1000));
        assertEquals("CREATE VIEW IF NOT EXISTS `db`.`orders_current` ON CLUSTER `prod` AS SELECT * FROM `db`.`orders` FINAL"
                + " WHERE `_tablecdc_is_deleted` = 0", ddl.createCurrentView("orders"));
        assertEquals("CREATE OR REPLACE VIEW `db`.`orders_current` ON CLUSTER `prod` AS SELECT * FROM `db`.`orders` FINAL"
                + " WHERE `_tablecdc_is_deleted` = 0", ddl.replaceCurrentView("orders"));
        assertEquals(List.of("ALTER TABLE `db`.`orders` ON CLUSTER `prod` ADD COLUMN IF NOT EXISTS `color` Nullable(String)"),
                ddl.addColumn("orders", NEW_COLUMN));
        assertEquals("TRUNCATE TABLE IF EXISTS `db`.`orders` ON CLUSTER `prod`", ddl.truncate("orders"));
    }

    @Test
    void aQuoteInAReplicationPathCannotEndItsLiteral() {
        Cluster odd = new Cluster("c", "/t/{table}/it's", "r\\'1", false, "off", 1000);
        assertEquals("CREATE TABLE IF NOT EXISTS `db`.`log` ON CLUSTER `c` (`msg` String, `_tablecdc_version` UInt64,"
                        + " `_tablecdc_is_deleted` UInt8) ENGINE = ReplicatedMergeTree('/t/{table}/it\\'s', 'r\\\\\\'1') ORDER BY tuple()"
                        + " SETTINGS replicated_deduplication_window = 10",
                new FinalTableDdl("db", odd).createTable("log", KEYLESS, 10).get(0));
    }

    @Test
    void aDistributedTableFrontsALocalReplicatedTableShardedByTheKey() {
        FinalTableDdl ddl = new FinalTableDdl("db", SHARDED);
        assertEquals(List.of(
                        "CREATE TABLE IF NOT EXISTS `db`.`orders_local` ON CLUSTER `prod` " + COLUMNS
                                + " ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}',"
                                + " `_tablecdc_version`, `_tablecdc_is_deleted`) ORDER BY (`id`, `region`)"
                                + " SETTINGS replicated_deduplication_window = 1000",
                        "CREATE TABLE IF NOT EXISTS `db`.`orders` ON CLUSTER `prod` " + COLUMNS
                                + " ENGINE = Distributed('prod', 'db', 'orders_local', cityHash64(`id`, `region`))"),
                ddl.createTable("orders", KEYED, 1000));
        assertEquals("CREATE TABLE IF NOT EXISTS `db`.`log` ON CLUSTER `prod` (`msg` String, `_tablecdc_version` UInt64,"
                        + " `_tablecdc_is_deleted` UInt8) ENGINE = Distributed('prod', 'db', 'log_local', rand())",
                ddl.createTable("log", KEYLESS, 1000).get(1), "rows without a key have nothing to shard by");
        assertEquals("CREATE VIEW IF NOT EXISTS `db`.`orders_current` ON CLUSTER `prod` AS SELECT * FROM `db`.`orders` FINAL"
                + " WHERE `_tablecdc_is_deleted` = 0", ddl.createCurrentView("orders"), "the view reads every shard");
        assertEquals(List.of(
                        "ALTER TABLE `db`.`orders_local` ON CLUSTER `prod` ADD COLUMN IF NOT EXISTS `color` Nullable(String)",
                        "ALTER TABLE `db`.`orders` ON CLUSTER `prod` ADD COLUMN IF NOT EXISTS `color` Nullable(String)"),
                ddl.addColumn("orders", NEW_COLUMN), "the stored table first, so the Distributed one never names a missing column");
        assertEquals("TRUNCATE TABLE IF EXISTS `db`.`orders_local` ON CLUSTER `prod`", ddl.truncate("orders"),
                "a truncate empties the shards' tables (truncating a Distributed table only drops its pending sends)");
    }

    @Test
    void loadsOnAClusterWaitForTheirQuorumOrFail() {
        assertEquals(Map.of("insert_quorum", "auto", "insert_quorum_timeout", "60000", "insert_quorum_parallel", "0"),
                REPLICATED.insertSettings());
        assertEquals(Map.of("insert_quorum", "2", "insert_quorum_timeout", "30000", "insert_quorum_parallel", "0",
                "insert_distributed_sync", "1"), SHARDED.insertSettings());
        Cluster noQuorum = new Cluster("prod", "/p/{table}", "{replica}", true, "off", 30_000);
        assertEquals(Map.of("insert_distributed_sync", "1"), noQuorum.insertSettings(),
                "without a quorum a Distributed insert is still synchronous, never queued on the initiator");
    }

    @Test
    void aDistributedTableWithoutAClusterIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> new Cluster("", "/p/{table}", "{replica}", true, "auto", 1000));
    }
}
