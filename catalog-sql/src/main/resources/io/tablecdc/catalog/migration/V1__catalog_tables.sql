-- tablecdc catalog, version 1: flows, per-table replication state and staged batches.
-- Released migrations are never edited; later changes go into V2__..., V3__..., and so on.

-- One row per flow (a source connector's replication job). The identity columns let a resumed flow
-- check that it still talks to the same source and destination; null means "not recorded yet".
CREATE TABLE cdc_flow (
    flow_name                text        PRIMARY KEY,
    source_kind              text,
    source_system_identifier text,
    source_timeline          bigint,
    source_slot              text,
    source_publication       text,
    destination_identity     text,
    config_hash              text,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now()
);

-- One row per (flow, table): where the table is and whether it is healthy.
CREATE TABLE cdc_table_replication_state (
    flow_name               text        NOT NULL,
    source_table_identifier text        NOT NULL,
    cursor_text             text        NOT NULL DEFAULT '',
    last_attempt_at         timestamptz,
    last_synced_at          timestamptz,
    last_normalized_at      timestamptz,
    synced_batch_id         bigint      NOT NULL DEFAULT 0,
    normalized_batch_id     bigint      NOT NULL DEFAULT 0,
    synced_rows_count       bigint      NOT NULL DEFAULT 0,
    phase                   text,
    phase_lsn               text,
    copy_attempt            int         NOT NULL DEFAULT 0,
    copy_lease_owner        text,
    copy_lease_until        timestamptz,
    paused_reason           text,
    paused_at               timestamptz,
    last_error              text,
    last_error_at           timestamptz,
    error_count             int         NOT NULL DEFAULT 0,
    next_retry_at           timestamptz,
    inserts_count           bigint      NOT NULL DEFAULT 0,
    updates_count           bigint      NOT NULL DEFAULT 0,
    deletes_count           bigint      NOT NULL DEFAULT 0,
    first_row_received_at   timestamptz,
    first_row_commit_time   timestamptz,
    updated_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (flow_name, source_table_identifier),
    CONSTRAINT cdc_table_replication_state_phase_check
        CHECK (phase IS NULL OR phase IN ('pending', 'copying', 'catchup', 'ready', 'errored')),
    CONSTRAINT cdc_table_replication_state_batch_check
        CHECK (synced_batch_id >= 0 AND normalized_batch_id >= 0)
);

-- One row per staged batch: the Avro files the sink wrote, waiting to be normalized.
CREATE TABLE cdc_table_avro_stage (
    flow_name               text        NOT NULL,
    source_table_identifier text        NOT NULL,
    batch_id                bigint      NOT NULL,
    avro_files              jsonb       NOT NULL DEFAULT '[]'::jsonb,
    rows                    bigint      NOT NULL DEFAULT 0,
    inserts                 bigint      NOT NULL DEFAULT 0,
    updates                 bigint      NOT NULL DEFAULT 0,
    deletes                 bigint      NOT NULL DEFAULT 0,
    created_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (flow_name, source_table_identifier, batch_id),
    CONSTRAINT cdc_table_avro_stage_batch_check CHECK (batch_id >= 1)
);

-- Copy tasks look for claimable tables of one flow by phase.
CREATE INDEX cdc_table_replication_state_flow_phase_idx
    ON cdc_table_replication_state (flow_name, phase);

-- Writes are idempotent: an UPDATE (or ON CONFLICT DO UPDATE) that would leave a row exactly as it is
-- is skipped, so re-running a write after a crash changes nothing, not even updated_at, and the
-- statement reports 0 rows (which the client reads as "nothing new").
CREATE FUNCTION cdc_skip_unchanged_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION cdc_touch_updated_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := OLD.updated_at;
    IF NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NULL;
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END
$$;

CREATE TRIGGER cdc_flow_touch BEFORE UPDATE ON cdc_flow
    FOR EACH ROW EXECUTE FUNCTION cdc_touch_updated_at();
CREATE TRIGGER cdc_table_replication_state_touch BEFORE UPDATE ON cdc_table_replication_state
    FOR EACH ROW EXECUTE FUNCTION cdc_touch_updated_at();
CREATE TRIGGER cdc_table_avro_stage_skip_unchanged BEFORE UPDATE ON cdc_table_avro_stage
    FOR EACH ROW EXECUTE FUNCTION cdc_skip_unchanged_update();
