-- The stage sink's record of how far it staged the records of other producers (topics without tablecdc headers,
-- whose batches the sink cuts itself and whose row versions are Kafka offsets): per table and consumed topic
-- partition, the highest offset a staged batch holds, and the latest record timestamp of the batches staged from it.
-- Written in the transaction that stores the batch's stage row, and kept after the batch is loaded. A record at or
-- below last_offset was staged before (a replay) and is dropped; one there with a timestamp later than max_timestamp
-- cannot have been staged (the topic was recreated, reset or failed over): the table is stopped. tablecdc-reload-table
-- deletes the table's rows.
CREATE TABLE cdc_sink_staged_offset (
    flow_name               text        NOT NULL,
    source_table_identifier text        NOT NULL,
    topic                   text        NOT NULL,
    kafka_partition         integer     NOT NULL,
    last_offset             bigint      NOT NULL,
    max_timestamp           bigint      NOT NULL DEFAULT -1,
    updated_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (flow_name, source_table_identifier, topic, kafka_partition)
);
