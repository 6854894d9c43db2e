-- Batches an operator set aside with tablecdc-quarantine-batch because ClickHouse refuses them: moved out of
-- cdc_table_avro_stage, so that the sink loads the table's later batches, with their stage files (left in place in
-- the stage store, never deleted by the sink), row counts and the error ClickHouse gave.
CREATE TABLE cdc_table_quarantined_batch (
    flow_name               text        NOT NULL,
    source_table_identifier text        NOT NULL,
    batch_id                bigint      NOT NULL,
    avro_files              jsonb       NOT NULL,
    rows                    bigint      NOT NULL,
    truncate_before         boolean     NOT NULL,
    error                   text,
    quarantined_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (flow_name, source_table_identifier, batch_id)
);
