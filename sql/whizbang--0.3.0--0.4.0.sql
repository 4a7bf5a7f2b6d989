-- whizbang 0.3.0 -> 0.4.0: the transactional outbox (DESIGN §3.3) and the outbox side of the
-- work functions (§3.4); retention and maintenance (§3.6) and stats (§3.7).

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.4.0'" to load this file. \quit

-- A message the application sends, written in its own transaction with the business change.
-- Immutable; deleted when it is published. No consumer: the key is the message id.
CREATE TABLE whizbang.wh_outbox (
    message_id    uuid        NOT NULL,
    destination   text        NOT NULL,
    message_type  text        NOT NULL,
    -- The Envelope. Named as in the seed, whose troubleshooting query reads wh_outbox.event_data.
    event_data    jsonb       NOT NULL,
    metadata      jsonb,
    scope         jsonb,
    stream_id     uuid,
    is_event      boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL,
    CONSTRAINT wh_outbox_pkey PRIMARY KEY (message_id)
);

-- The outbox's work state: the same shape as wh_inbox_work, so one claim engine serves both
-- (the consumer column is always ''), and narrow, so leases are HOT updates (DESIGN §1.6).
CREATE TABLE whizbang.wh_outbox_work (
    consumer         text COLLATE "C" NOT NULL DEFAULT '' CHECK (consumer = ''),
    message_id       uuid        NOT NULL,
    stream_id        uuid,
    stream_seq       bigint,                 -- arrival order within stream_id
    partition_number integer     NOT NULL,   -- partition_of(coalesce(stream_id, message_id), count at store)
    scheduled_for    timestamptz NOT NULL,   -- not handed out before
    attempts         integer     NOT NULL DEFAULT 0,
    lease_instance   uuid,
    lease_token      bigint,
    lease_expiry     timestamptz,
    last_error       text,
    processed_at     timestamptz,            -- debug_mode: published, kept for inspection
    CONSTRAINT wh_outbox_work_pkey PRIMARY KEY (message_id, consumer)
)
WITH (fillfactor = 70);
CREATE INDEX wh_outbox_work_due ON whizbang.wh_outbox_work (scheduled_for)
    WHERE processed_at IS NULL AND stream_id IS NULL;
CREATE INDEX wh_outbox_work_stream ON whizbang.wh_outbox_work (consumer, stream_id, stream_seq)
    WHERE stream_id IS NOT NULL AND processed_at IS NULL;

-- debug_mode leftovers, for perform_maintenance's purge_processed: the index holds completed rows
-- only (none outside debug_mode), so it costs nothing on the hot path and the purge does not scan
-- the pending work. The inbox gets the same.
CREATE INDEX wh_outbox_work_processed ON whizbang.wh_outbox_work (processed_at) WHERE processed_at IS NOT NULL;
CREATE INDEX wh_inbox_work_processed ON whizbang.wh_inbox_work (processed_at) WHERE processed_at IS NOT NULL;

CREATE TABLE whizbang.wh_outbox_preleased (
    instance_id uuid   NOT NULL,
    consumer    text COLLATE "C" NOT NULL CHECK (consumer = ''),
    message_id  uuid   NOT NULL,
    lease_token bigint NOT NULL,
    CONSTRAINT wh_outbox_preleased_pkey PRIMARY KEY (instance_id, message_id, consumer)
);

CREATE TABLE whizbang.wh_outbox_streams (
    consumer  text COLLATE "C" NOT NULL CHECK (consumer = ''),
    stream_id uuid   NOT NULL,
    last_seq  bigint NOT NULL,
    CONSTRAINT wh_outbox_streams_pkey PRIMARY KEY (stream_id, consumer)
);

SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_outbox', '');
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_outbox_work', '');
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_outbox_preleased', '');
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_outbox_streams', '');

CREATE FUNCTION whizbang.store_outbox_messages(
    p_messages jsonb,
    p_instance_id uuid DEFAULT NULL,
    p_lease_expiry timestamptz DEFAULT NULL,
    p_now timestamptz DEFAULT pg_catalog.now(),
    p_partition_count integer DEFAULT 10000)
RETURNS TABLE (message_id uuid, stream_id uuid, was_newly_created boolean)
    AS 'MODULE_PATHNAME', 'wb_store_outbox_messages' LANGUAGE C VOLATILE ROWS 100;

CREATE FUNCTION whizbang.complete_outbox_published(p_ids uuid[], p_debug_mode boolean DEFAULT false)
RETURNS integer
    AS 'MODULE_PATHNAME', 'wb_complete_outbox_published' LANGUAGE C VOLATILE;

REVOKE ALL ON FUNCTION whizbang.store_outbox_messages(jsonb, uuid, timestamptz, timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.complete_outbox_published(uuid[], boolean) FROM PUBLIC;

-- ---------------------------------------------------------------------------------------
-- Retention and maintenance (DESIGN §3.6); observability (§3.7)
-- ---------------------------------------------------------------------------------------

CREATE FUNCTION whizbang.perform_maintenance(
    p_now timestamptz DEFAULT pg_catalog.now(),
    p_batch_size integer DEFAULT 10000)
RETURNS TABLE (task_name text, rows_affected bigint, duration_ms double precision, status text)
    AS 'MODULE_PATHNAME', 'wb_perform_maintenance' LANGUAGE C VOLATILE ROWS 4;

CREATE FUNCTION whizbang.stats()
RETURNS TABLE (metric text, value bigint)
    AS 'MODULE_PATHNAME', 'wb_stats' LANGUAGE C STABLE ROWS 20;

CREATE VIEW whizbang.stats AS SELECT s.metric, s.value FROM whizbang.stats() s;

REVOKE ALL ON FUNCTION whizbang.perform_maintenance(timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.stats() FROM PUBLIC;
REVOKE ALL ON whizbang.stats FROM PUBLIC;
