-- Which sink holds a table: sink_name (V2) is the sink connector that loads it, and sink_lease_until how long that
-- sink's hold lasts (the catalog's clock). A running sink renews its hold on the tables it loads; a stopped sink gives
-- it up, a crashed one lets it run out. While one sink holds a table another sink's claim is refused, so that two
-- sinks never load some batches each of one table, and the operator commands refuse to start its loads over under it.
ALTER TABLE cdc_table_replication_state
    ADD COLUMN sink_lease_until timestamptz;
