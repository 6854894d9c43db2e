-- A staged batch that starts with a TRUNCATE of its source table: the sink empties the final table before it
-- loads the batch's files (a truncate batch may have no file at all).
ALTER TABLE cdc_table_avro_stage
    ADD COLUMN truncate_before boolean NOT NULL DEFAULT false;

-- Progress of a Postgres pipeline table's initial copy: rows sent so far and the expected total (the
-- planner's estimate when the copy starts, raised to the rows sent if the estimate was low). Null when the
-- table has never been copied.
ALTER TABLE cdc_table_replication_state
    ADD COLUMN copy_rows_done bigint,
    ADD COLUMN copy_rows_total bigint;
