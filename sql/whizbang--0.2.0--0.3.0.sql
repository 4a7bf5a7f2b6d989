-- whizbang 0.2.0 -> 0.3.0: the inbox and work coordination (DESIGN §3.2, §3.4).

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.3.0'" to load this file. \quit

-- The immutable message, as received. Written once, deleted when its work completes.
CREATE TABLE whizbang.wh_inbox (
    consumer      text COLLATE "C" NOT NULL DEFAULT '',
    message_id    uuid        NOT NULL,
    handler_name  text        NOT NULL,
    message_type  text        NOT NULL,
    envelope      jsonb       NOT NULL,
    metadata      jsonb,
    scope         jsonb,
    stream_id     uuid,
    is_event      boolean     NOT NULL DEFAULT false,
    sent_at       timestamptz,
    received_at   timestamptz NOT NULL,
    CONSTRAINT wh_inbox_pkey PRIMARY KEY (message_id, consumer)
);

-- The mutable work state of each inbox message, kept apart from the message so that claims,
-- renewals and releases are small HOT updates of narrow rows (DESIGN §1.6).
CREATE TABLE whizbang.wh_inbox_work (
    consumer         text COLLATE "C" NOT NULL DEFAULT '',
    message_id       uuid        NOT NULL,
    stream_id        uuid,
    stream_seq       bigint,                 -- arrival order within (consumer, stream_id)
    partition_number integer     NOT NULL,   -- partition_of(coalesce(stream_id, message_id), count at store)
    scheduled_for    timestamptz NOT NULL,   -- not handed out before
    attempts         integer     NOT NULL DEFAULT 0,
    lease_instance   uuid,
    lease_token      bigint,
    lease_expiry     timestamptz,
    last_error       text,
    processed_at     timestamptz,            -- debug_mode: completed, kept for inspection
    -- No foreign key to wh_inbox: whizbang writes and deletes both rows together, and a
    -- key check per stored message would cost a row lock and a trigger call each.
    CONSTRAINT wh_inbox_work_pkey PRIMARY KEY (message_id, consumer)
)
-- No index covers a lease column, and pages keep room for new row versions: a claim, renewal
-- or release is a HOT update (no index entries written).
WITH (fillfactor = 70);
-- Claims find rows without a stream in due order ...
CREATE INDEX wh_inbox_work_due ON whizbang.wh_inbox_work (scheduled_for)
    WHERE processed_at IS NULL AND stream_id IS NULL;
-- ... and the head of each stream (its oldest unfinished row) by skipping from stream to
-- stream in this index, so rows waiting behind a busy head are never visited. It also answers
-- "is there an older unfinished row of this stream?" with one probe.
CREATE INDEX wh_inbox_work_stream ON whizbang.wh_inbox_work (consumer, stream_id, stream_seq)
    WHERE stream_id IS NOT NULL AND processed_at IS NULL;
-- Rows stored pre-leased to an instance (store_inbox_messages with p_instance_id) and not
-- handed to it yet. Kept apart so that no index on wh_inbox_work covers lease columns.
CREATE TABLE whizbang.wh_inbox_preleased (
    instance_id uuid   NOT NULL,
    consumer    text COLLATE "C" NOT NULL,
    message_id  uuid   NOT NULL,
    lease_token bigint NOT NULL,
    CONSTRAINT wh_inbox_preleased_pkey PRIMARY KEY (instance_id, message_id, consumer)
);

-- One row per (consumer, stream): the arrival counter. Storing locks it, so the messages of one
-- stream are numbered in the commit order of the storing transactions.
CREATE TABLE whizbang.wh_inbox_streams (
    consumer  text COLLATE "C" NOT NULL,
    stream_id uuid   NOT NULL,
    last_seq  bigint NOT NULL,
    CONSTRAINT wh_inbox_streams_pkey PRIMARY KEY (stream_id, consumer)
);

CREATE TABLE whizbang.wh_dead_letters (
    dead_letter_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source           text        NOT NULL CHECK (source IN ('inbox', 'outbox')),
    consumer         text COLLATE "C",
    message_id       uuid        NOT NULL,
    handler_name     text,
    destination      text,
    message_type     text        NOT NULL,
    envelope         jsonb       NOT NULL,
    metadata         jsonb,
    scope            jsonb,
    stream_id        uuid,
    is_event         boolean     NOT NULL,
    sent_at          timestamptz,
    received_at      timestamptz NOT NULL,
    attempts         integer     NOT NULL,
    last_error       text,
    dead_lettered_at timestamptz NOT NULL
);
CREATE INDEX wh_dead_letters_message ON whizbang.wh_dead_letters (message_id, consumer);
CREATE INDEX wh_dead_letters_age ON whizbang.wh_dead_letters (dead_lettered_at);

-- Fencing tokens of claims: strictly increasing.
CREATE SEQUENCE whizbang.wh_lease_token_seq AS bigint;

SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_inbox', '');
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_inbox_work', '');
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_inbox_streams', '');
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_inbox_preleased', '');
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_dead_letters', '');
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_dead_letters_dead_letter_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_lease_token_seq', '');

CREATE FUNCTION whizbang.store_inbox_messages(
    p_messages jsonb,
    p_instance_id uuid DEFAULT NULL,
    p_lease_expiry timestamptz DEFAULT NULL,
    p_now timestamptz DEFAULT pg_catalog.now(),
    p_partition_count integer DEFAULT 10000,
    p_consumer text DEFAULT '')
RETURNS TABLE (message_id uuid, stream_id uuid, was_newly_created boolean)
    AS 'MODULE_PATHNAME', 'wb_store_inbox_messages' LANGUAGE C VOLATILE ROWS 100;

CREATE FUNCTION whizbang.inbox_receive(
    p_messages jsonb,
    p_consumer text DEFAULT '',
    p_now timestamptz DEFAULT pg_catalog.now(),
    p_partition_count integer DEFAULT 10000)
RETURNS TABLE (message_id uuid, stream_id uuid, outcome text)
    AS 'MODULE_PATHNAME', 'wb_inbox_receive' LANGUAGE C VOLATILE ROWS 100;

CREATE FUNCTION whizbang.claim_work(
    p_instance_id uuid,
    p_source text DEFAULT NULL,
    p_max_rows integer DEFAULT 100,
    p_lease_seconds integer DEFAULT 300,
    p_partitions integer[] DEFAULT NULL,
    p_partition_count integer DEFAULT 10000,
    p_max_per_stream integer DEFAULT 100,
    p_now timestamptz DEFAULT pg_catalog.now(),
    p_consumer text DEFAULT NULL)
RETURNS TABLE (source text, message_id uuid, stream_id uuid, partition_number integer, handler_name text,
               destination text, message_type text, envelope jsonb, metadata jsonb, scope jsonb,
               attempts integer, lease_token bigint, lease_expiry timestamptz, consumer text)
    AS 'MODULE_PATHNAME', 'wb_claim_work' LANGUAGE C VOLATILE ROWS 100;

CREATE FUNCTION whizbang.complete_work(
    p_source text,
    p_message_ids uuid[],
    p_lease_tokens bigint[] DEFAULT NULL,
    p_consumer text DEFAULT '',
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, outcome text)
    AS 'MODULE_PATHNAME', 'wb_complete_work' LANGUAGE C VOLATILE ROWS 100;

CREATE FUNCTION whizbang.fail_work(
    p_source text,
    p_message_ids uuid[],
    p_errors text[],
    p_lease_tokens bigint[] DEFAULT NULL,
    p_retryable boolean[] DEFAULT NULL,
    p_consumer text DEFAULT '',
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, outcome text, scheduled_for timestamptz)
    AS 'MODULE_PATHNAME', 'wb_fail_work' LANGUAGE C VOLATILE ROWS 100;

CREATE FUNCTION whizbang.renew_leases(
    p_source text,
    p_message_ids uuid[],
    p_lease_tokens bigint[],
    p_lease_seconds integer DEFAULT 300,
    p_consumer text DEFAULT '',
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, outcome text)
    AS 'MODULE_PATHNAME', 'wb_renew_leases' LANGUAGE C VOLATILE ROWS 100;

CREATE FUNCTION whizbang.release_work(
    p_source text,
    p_message_ids uuid[],
    p_lease_tokens bigint[],
    p_consumer text DEFAULT '',
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, outcome text)
    AS 'MODULE_PATHNAME', 'wb_release_work' LANGUAGE C VOLATILE ROWS 100;

CREATE FUNCTION whizbang.retry_dead_letters(p_dead_letter_ids bigint[]) RETURNS integer
    AS 'MODULE_PATHNAME', 'wb_retry_dead_letters' LANGUAGE C VOLATILE;

REVOKE ALL ON FUNCTION whizbang.store_inbox_messages(jsonb, uuid, timestamptz, timestamptz, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.inbox_receive(jsonb, text, timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.complete_work(text, uuid[], bigint[], text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.renew_leases(text, uuid[], bigint[], integer, text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.release_work(text, uuid[], bigint[], text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.retry_dead_letters(bigint[]) FROM PUBLIC;
