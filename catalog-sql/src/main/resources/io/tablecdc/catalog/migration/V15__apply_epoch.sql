-- The Postgres pipeline's apply task owns its flow by an epoch: every apply task that starts streaming takes the next
-- apply_epoch (apply_owner names it), and each of its catalog writes about the flow or its tables carries that epoch in
-- the same statement, so the writes of an apply task that was replaced (a zombie: cut off from its Connect group, or
-- blocked while the task was restarted elsewhere) are refused once the new one has started.
ALTER TABLE cdc_flow
    ADD COLUMN apply_epoch bigint NOT NULL DEFAULT 0,
    ADD COLUMN apply_owner text;
