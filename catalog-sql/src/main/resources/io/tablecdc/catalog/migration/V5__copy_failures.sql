-- The retry budget of a Postgres pipeline table's copy (max.table.retries): failed copy attempts since the table was
-- last ready. A copy interrupted by a task stop or a lost lease does not count; reaching ready resets it to 0.
-- copy_attempt keeps counting every claim: with copy_lease_owner it identifies one claim, and every write of a copy
-- task checks both (and that the lease has not expired) in the statement that writes.
ALTER TABLE cdc_table_replication_state
    ADD COLUMN copy_failures int NOT NULL DEFAULT 0;
