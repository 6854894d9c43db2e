package io.tablecdc.pg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The held changes' weight: per table, the open transaction's share, and the two limits. */
class HoldBudgetTest {
    @Test
    void anAbortedTransactionTakesOnlyItsShare() {
        HoldBudget hold = new HoldBudget(1_000, 10);
        hold.held("a", 100);
        hold.held("b", 50);
        hold.committed();
        hold.held("a", 30);
        hold.held("c", 20);
        assertEquals(200, hold.bytes());
        hold.aborted();
        assertEquals(150, hold.bytes(), "the committed changes stay held");
        hold.gone("a");
        assertEquals(50, hold.bytes());
        hold.gone("c");
        assertEquals(50, hold.bytes(), "c held nothing committed");
        hold.clear();
        assertEquals(0, hold.bytes());
    }

    @Test
    void fullPastEitherLimit() {
        HoldBudget hold = new HoldBudget(1_000, 10);
        assertEquals(200, hold.maxRows(), "20 x batch.rows");
        hold.held("a", 1_000);
        assertFalse(hold.full(200));
        assertTrue(hold.full(201));
        hold.held("a", 1);
        assertTrue(hold.full(0));
        hold.gone("a");
        assertFalse(hold.full(0));
    }
}
