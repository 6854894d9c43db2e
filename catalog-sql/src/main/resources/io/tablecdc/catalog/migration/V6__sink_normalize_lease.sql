-- Which sink normalize loop loads a table into ClickHouse, and until when (the catalog's clock). A loop holds this
-- lease while it loads, so that exactly one loop per table loads, truncates and raises its normalized batch id, also
-- while a rebalance moves the table from one sink task to another.
ALTER TABLE cdc_table_replication_state
    ADD COLUMN normalize_lease_owner text,
    ADD COLUMN normalize_lease_until timestamptz;

-- How many times an operator reloaded the table into ClickHouse (tablecdc-reload-table): part of every load's
-- deduplication token, so that a reload is not skipped as a repeat of the loads before it.
ALTER TABLE cdc_table_replication_state
    ADD COLUMN normalize_epoch int NOT NULL DEFAULT 0;

-- The ClickHouse table a sink loads the table into (server, database and table). Two source tables never share one:
-- their rows and truncates would mix, so the sink refuses the second one.
ALTER TABLE cdc_table_replication_state
    ADD COLUMN destination_table text;

CREATE UNIQUE INDEX cdc_table_replication_state_destination_idx
    ON cdc_table_replication_state (destination_table) WHERE destination_table IS NOT NULL;
