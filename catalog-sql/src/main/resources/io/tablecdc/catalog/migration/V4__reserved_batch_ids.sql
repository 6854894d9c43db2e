-- The highest batch id handed out for a table. Sources reserve blocks of ids here before they send a batch, so an
-- id is never used twice, not even by a task that died after Kafka took batches it never recorded as synced.
ALTER TABLE cdc_table_replication_state
    ADD COLUMN reserved_batch_id bigint NOT NULL DEFAULT 0;
