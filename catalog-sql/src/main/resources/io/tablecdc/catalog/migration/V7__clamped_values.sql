-- Values the sink changed to fit a ClickHouse type (a date or timestamp outside ClickHouse's Date32/DateTime64 range,
-- stored at the range's edge): per stage row, and per table once its batches are normalized.
ALTER TABLE cdc_table_avro_stage
    ADD COLUMN clamped_values bigint NOT NULL DEFAULT 0;

ALTER TABLE cdc_table_replication_state
    ADD COLUMN clamped_values_count bigint NOT NULL DEFAULT 0;
