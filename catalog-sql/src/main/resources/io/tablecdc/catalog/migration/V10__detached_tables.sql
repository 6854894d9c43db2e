-- A Postgres pipeline table detached from the flow's shared slot because its ClickHouse side fell behind: a private
-- slot (detach_slot) keeps its changes from the detach marker (detach_lsn) on, the apply task stops sending them, and
-- the table is 'lagging' until it has drained and a copy task catches it up from its private slot and hands it back.
ALTER TABLE cdc_table_replication_state
    ADD COLUMN detach_slot text,
    ADD COLUMN detach_lsn  text,
    ADD COLUMN detached_at timestamptz,
    DROP CONSTRAINT cdc_table_replication_state_phase_check,
    ADD CONSTRAINT cdc_table_replication_state_phase_check
        CHECK (phase IS NULL OR phase IN ('pending', 'copying', 'catchup', 'ready', 'lagging', 'errored'));
