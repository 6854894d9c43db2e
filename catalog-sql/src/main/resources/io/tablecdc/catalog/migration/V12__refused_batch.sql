-- The stage sink's record of a batch ClickHouse refused: a server error about the batch's data (a type mismatch, a
-- value it cannot parse, a constraint it violates), not an outage, a timeout or a wait for another sink task. Written
-- with the error it belongs to: refused_at equals last_error_at while the table's last error is that refusal, and any
-- later error replaces both. tablecdc-quarantine-batch without --batch acts only on such a refusal.
ALTER TABLE cdc_table_replication_state
    ADD COLUMN refused_batch_id bigint,
    ADD COLUMN refused_at       timestamptz;
