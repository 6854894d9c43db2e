package io.tablecdc.clickhouse.destination;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The SQL text of final-table statements: identifiers quoted, every statement safe to run again. */
class FinalTableDdlTest {

    @Test
    void truncateQuotesItsIdentifiersAndToleratesATableNotCreatedYet() {
        assertEquals("TRUNCATE TABLE IF EXISTS `an\\`alytics`.`shop_orders`", FinalTableDdl.truncate("an`alytics", "shop_orders"));
    }
}
