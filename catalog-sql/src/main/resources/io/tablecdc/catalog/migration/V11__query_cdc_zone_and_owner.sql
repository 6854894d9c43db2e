-- BigQuery query CDC: the watermark.time.zone a table's cursor was read in (a DATETIME or DATE watermark moves relative
-- to the cursor when the zone changes, so a task refuses a change), and the table's owner: every task that starts on
-- the table takes the next source_epoch, and each of its catalog writes of the table carries it, so a task that lost
-- the table (cut off from its Connect group while another task took it over) is refused by the catalog.
ALTER TABLE cdc_table_replication_state
    ADD COLUMN watermark_time_zone text,
    ADD COLUMN source_epoch        bigint NOT NULL DEFAULT 0,
    ADD COLUMN source_owner        text;
