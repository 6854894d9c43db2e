-- Which sink connector loads a table, and from which topic, so that a sink task that restarts finds the
-- staged batches of its partitions' tables and normalizes them even when no new record arrives for them.
ALTER TABLE cdc_table_replication_state
    ADD COLUMN sink_name text,
    ADD COLUMN sink_topic text;

CREATE INDEX cdc_table_replication_state_sink_idx
    ON cdc_table_replication_state (sink_name, sink_topic);
