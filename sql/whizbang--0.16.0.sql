-- whizbang 0.16.0, complete install script: the 0.15.0 install script followed by the 0.15.0 -> 0.16.0
-- update, so a fresh install and an updated one are the same (test/scripts/upgrade.sh checks it).
-- Every name is schema-qualified; nothing is granted to PUBLIC (docs/security.md).

\echo Use "CREATE EXTENSION whizbang" to load this file. \quit

-- ---------------------------------------------------------------------------------------
-- Settings
-- ---------------------------------------------------------------------------------------

-- What whizbang ships: one row per key it reads, with its type and bounds. Owned by the
-- extension and rebuilt by CREATE EXTENSION, so it is not dumped.
CREATE TABLE whizbang.wh_setting_defaults (
    setting_key    text PRIMARY KEY,
    default_value  text NOT NULL,
    value_type     text NOT NULL CHECK (value_type IN ('integer', 'boolean', 'text')),
    min_value      bigint,
    max_value      bigint,
    allowed_values text[],
    description    text NOT NULL
);

INSERT INTO whizbang.wh_setting_defaults
    (setting_key, default_value, value_type, min_value, max_value, allowed_values, description)
VALUES
    ('dedup_retention_days', '30', 'integer', 1, 36500, NULL,
     'Days to retain message deduplication entries; also the replay horizon'),
    ('max_attempts', '10', 'integer', 1, 1000000, NULL,
     'Deliveries of one message before it is dead-lettered'),
    ('retry_base_seconds', '30', 'integer', 0, 31536000, NULL,
     'First retry delay; doubles per attempt'),
    ('retry_max_seconds', '300', 'integer', 0, 31536000, NULL,
     'Upper bound of the retry delay'),
    ('dead_letter_retention_days', '30', 'integer', 1, 36500, NULL,
     'Days to keep dead letters'),
    ('idempotency_in_progress_ttl_seconds', '1800', 'integer', 1, 31536000, NULL,
     'How long an abandoned idempotency claim blocks its key'),
    ('idempotency_result_ttl_seconds', '86400', 'integer', 1, 315360000, NULL,
     'Default time a completed idempotency result is kept'),
    ('idempotency_result_ttl_min_seconds', '1', 'integer', 1, 315360000, NULL,
     'Smallest result TTL a caller may ask for'),
    ('idempotency_result_ttl_max_seconds', '2592000', 'integer', 1, 315360000, NULL,
     'Largest result TTL a caller may ask for'),
    ('idempotency_tombstone_days', '30', 'integer', 0, 36500, NULL,
     'Days a purged idempotency result is remembered as a tombstone'),
    ('replay_policy', 'reject', 'text', NULL, NULL, ARRAY['reject', 'accept'],
     'What happens to a message sent before the replay horizon: reject (expired) or accept'),
    ('outbox_notify', 'false', 'boolean', NULL, NULL, NULL,
     'Send NOTIFY whizbang_outbox once per transaction that stored outbox rows'),
    ('debug_mode', 'false', 'boolean', NULL, NULL, NULL,
     'Mark completed rows as processed instead of deleting them');

-- What users set. Seeded with the defaults so the seed's queries and its
-- INSERT ... ON CONFLICT (setting_key) DO UPDATE work unchanged.
CREATE TABLE whizbang.wh_settings (
    setting_key   text PRIMARY KEY,
    setting_value text NOT NULL,
    value_type    text NOT NULL,
    description   text
);

-- Validates a write and fills in type and description. An INSERT of a key that exists
-- updates it instead, so a pg_dump restore (which replays the rows after CREATE EXTENSION
-- seeded them) reproduces the user's values without a conflict.
CREATE FUNCTION whizbang.wh_settings_validate() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d whizbang.wh_setting_defaults%ROWTYPE;
    v bigint;
BEGIN
    SELECT * INTO d FROM whizbang.wh_setting_defaults WHERE setting_key = NEW.setting_key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown whizbang setting "%"', NEW.setting_key
            USING ERRCODE = 'undefined_object',
                  HINT = 'SELECT setting_key FROM whizbang.settings lists the known settings.';
    END IF;
    IF NEW.setting_value IS NULL THEN
        RAISE EXCEPTION 'setting "%" must not be null', NEW.setting_key
            USING ERRCODE = 'not_null_violation', HINT = 'Delete the row to go back to the default.';
    END IF;
    IF NEW.value_type IS NOT NULL AND NEW.value_type <> d.value_type THEN
        RAISE EXCEPTION 'setting "%" has type %, not %', NEW.setting_key, d.value_type, NEW.value_type
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    NEW.value_type := d.value_type;
    NEW.description := coalesce(NEW.description, d.description);

    IF d.value_type = 'integer' THEN
        IF NEW.setting_value !~ '^\s*[+-]?[0-9]{1,18}\s*$' THEN
            RAISE EXCEPTION 'invalid value for setting "%": "%" is not an integer', NEW.setting_key, NEW.setting_value
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v := NEW.setting_value::bigint;
        IF v < d.min_value OR v > d.max_value THEN
            RAISE EXCEPTION 'invalid value for setting "%": % is outside [%, %]', NEW.setting_key, v, d.min_value, d.max_value
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        NEW.setting_value := v::text;
    ELSIF d.value_type = 'boolean' THEN
        IF lower(btrim(NEW.setting_value)) NOT IN ('true', 'false', 't', 'f', 'on', 'off', 'yes', 'no', '1', '0') THEN
            RAISE EXCEPTION 'invalid value for setting "%": "%" is not a boolean', NEW.setting_key, NEW.setting_value
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        NEW.setting_value := NEW.setting_value::boolean::text;
    ELSIF d.allowed_values IS NOT NULL AND NOT (NEW.setting_value = ANY (d.allowed_values)) THEN
        RAISE EXCEPTION 'invalid value for setting "%": "%"', NEW.setting_key, NEW.setting_value
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Allowed values: %s.', array_to_string(d.allowed_values, ', '));
    END IF;

    IF TG_OP = 'INSERT' THEN
        UPDATE whizbang.wh_settings
           SET setting_value = NEW.setting_value, value_type = NEW.value_type, description = NEW.description
         WHERE setting_key = NEW.setting_key;
        IF FOUND THEN
            RETURN NULL;
        END IF;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER wh_settings_validate
    BEFORE INSERT OR UPDATE ON whizbang.wh_settings
    FOR EACH ROW EXECUTE FUNCTION whizbang.wh_settings_validate();

INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type, description)
SELECT setting_key, default_value, value_type, description FROM whizbang.wh_setting_defaults;

-- Backends cache the effective settings; a committed change drops those caches.
CREATE FUNCTION whizbang._table_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'wb_table_changed' LANGUAGE C;

CREATE TRIGGER wh_settings_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON whizbang.wh_settings
    FOR EACH STATEMENT EXECUTE FUNCTION whizbang._table_changed();

-- Only values that differ from the shipped default are dumped, so a restore into a newer
-- version keeps that version's defaults for everything the user never changed.
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_settings',
    'WHERE setting_value OPERATOR(pg_catalog.<>) (SELECT d.default_value FROM whizbang.wh_setting_defaults d'
    ' WHERE d.setting_key OPERATOR(pg_catalog.=) wh_settings.setting_key)');

-- Each key's effective value (a deleted row falls back to the default), default and type.
CREATE VIEW whizbang.settings AS
SELECT d.setting_key,
       coalesce(s.setting_value, d.default_value) AS value,
       d.default_value,
       d.value_type,
       (s.setting_value IS NULL OR s.setting_value = d.default_value) AS is_default,
       d.description
  FROM whizbang.wh_setting_defaults d
  LEFT JOIN whizbang.wh_settings s ON s.setting_key = d.setting_key
 ORDER BY d.setting_key;

-- ---------------------------------------------------------------------------------------
-- Deduplication
-- ---------------------------------------------------------------------------------------

CREATE TABLE whizbang.wh_message_deduplication (
    consumer          text COLLATE "C" NOT NULL DEFAULT '',
    message_id        uuid        NOT NULL,
    first_seen_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
    observation_count integer     NOT NULL DEFAULT 1,   -- deliveries seen, 1 at the first
    conflict_count    integer     NOT NULL DEFAULT 0,   -- deliveries whose fingerprint differed
    fingerprint       bytea,
    -- The unique key is (consumer, message_id); message_id leads the index because it is
    -- fixed-width and decides almost every comparison, which makes each probe cheaper.
    CONSTRAINT wh_message_deduplication_pkey PRIMARY KEY (message_id, consumer)
)
-- Room on each page for the new version of a counted redelivery: the update then stays HOT
-- (no new index entries), since observation_count is not indexed.
WITH (fillfactor = 90);

-- Used by perform_maintenance's retention purge (as in the seed).
CREATE INDEX idx_message_dedup_first_seen ON whizbang.wh_message_deduplication (first_seen_at);

SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_message_deduplication', '');

-- ---------------------------------------------------------------------------------------
-- Functions
-- ---------------------------------------------------------------------------------------

-- STABLE, not IMMUTABLE: it reports the loaded library, which an update replaces.
CREATE FUNCTION whizbang.version() RETURNS text
    AS 'MODULE_PATHNAME', 'wb_version' LANGUAGE C STABLE PARALLEL SAFE;

CREATE FUNCTION whizbang.dedup_insert(
    p_message_id uuid,
    p_consumer text DEFAULT '',
    p_fingerprint bytea DEFAULT NULL,
    p_sent_at timestamptz DEFAULT NULL,
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS text
    AS 'MODULE_PATHNAME', 'wb_dedup_insert' LANGUAGE C VOLATILE;

CREATE FUNCTION whizbang.dedup_insert_many(
    p_message_ids uuid[],
    p_consumer text DEFAULT '',
    p_fingerprints bytea[] DEFAULT NULL,
    p_sent_at timestamptz[] DEFAULT NULL,
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, outcome text)
    AS 'MODULE_PATHNAME', 'wb_dedup_insert_many' LANGUAGE C VOLATILE ROWS 100;

CREATE FUNCTION whizbang.fingerprint(p_payload jsonb, p_ignore_paths text[] DEFAULT NULL)
RETURNS bytea
    AS 'MODULE_PATHNAME', 'wb_fingerprint' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION whizbang.event_uuid(p_source text, p_id text) RETURNS uuid
    AS 'MODULE_PATHNAME', 'wb_event_uuid' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION whizbang.uuid_v7(p_at timestamptz DEFAULT pg_catalog.clock_timestamp()) RETURNS uuid
    AS 'MODULE_PATHNAME', 'wb_uuid_v7' LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE FUNCTION whizbang.partition_of(p_stream_id uuid, p_partition_count integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'wb_partition_of' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Internal: exercises the C++/PostgreSQL error boundary (test/ and docs/internals.md).
CREATE FUNCTION whizbang._bridge_selftest(p_mode text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'wb_bridge_selftest' LANGUAGE C VOLATILE;

-- Nothing is granted to PUBLIC: docs/security.md shows what an application role needs.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA whizbang FROM PUBLIC;

-- ---------------------------------------------------------------------------------------
-- Handler idempotency keys (0.2.0)
-- ---------------------------------------------------------------------------------------


-- One row per (scope, key). A completed row keeps its result until result_expires_at; after
-- that it is a tombstone (result purged, the key still remembered) until tombstone_expires_at.
CREATE TABLE whizbang.wh_idempotency_keys (
    scope                text COLLATE "C" NOT NULL,
    idempotency_key      text COLLATE "C" NOT NULL,
    state                text        NOT NULL CHECK (state IN ('in_progress', 'completed')),
    token                bigint      NOT NULL,           -- fencing token of the current owner
    owner                text,
    fingerprint          bytea,
    result               jsonb,
    result_ttl           interval    NOT NULL,           -- intended at begin, checked then
    first_claimed_at     timestamptz NOT NULL,
    claimed_at           timestamptz NOT NULL,
    lease_expires_at     timestamptz NOT NULL,           -- an abandoned claim may be taken over after this
    completed_at         timestamptz,
    result_expires_at    timestamptz,
    tombstone_expires_at timestamptz,
    CONSTRAINT wh_idempotency_keys_pkey PRIMARY KEY (scope, idempotency_key),
    CONSTRAINT wh_idempotency_keys_completed CHECK (
        state <> 'completed' OR (completed_at IS NOT NULL AND result_expires_at IS NOT NULL
                                 AND tombstone_expires_at IS NOT NULL))
);
-- For retention: results and tombstones to purge in time order.
CREATE INDEX wh_idempotency_keys_result_expiry ON whizbang.wh_idempotency_keys (result_expires_at)
    WHERE state = 'completed';

-- Fencing tokens: strictly increasing across all scopes.
CREATE SEQUENCE whizbang.wh_idempotency_token_seq AS bigint;

-- Per-scope TTL policy; a NULL column falls back to the global setting.
CREATE TABLE whizbang.wh_idempotency_policies (
    scope              text COLLATE "C" PRIMARY KEY,
    in_progress_ttl    interval CHECK (in_progress_ttl > interval '0'),
    default_result_ttl interval CHECK (default_result_ttl > interval '0'),
    min_result_ttl     interval CHECK (min_result_ttl > interval '0'),
    max_result_ttl     interval CHECK (max_result_ttl > interval '0'),
    tombstone_ttl      interval CHECK (tombstone_ttl >= interval '0'),
    description        text,
    CHECK (min_result_ttl IS NULL OR max_result_ttl IS NULL OR min_result_ttl <= max_result_ttl),
    CHECK (default_result_ttl IS NULL OR min_result_ttl IS NULL OR default_result_ttl >= min_result_ttl),
    CHECK (default_result_ttl IS NULL OR max_result_ttl IS NULL OR default_result_ttl <= max_result_ttl)
);

-- Backends cache policies; a committed change drops those caches.
CREATE TRIGGER wh_idempotency_policies_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON whizbang.wh_idempotency_policies
    FOR EACH STATEMENT EXECUTE FUNCTION whizbang._table_changed();

SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_idempotency_keys', '');
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_idempotency_policies', '');
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_idempotency_token_seq', '');

-- The effective policy of a scope: its row over the global settings.
CREATE FUNCTION whizbang.idempotency_policy(p_scope text)
RETURNS TABLE (in_progress_ttl interval, default_result_ttl interval, min_result_ttl interval,
               max_result_ttl interval, tombstone_ttl interval)
    AS 'MODULE_PATHNAME', 'wb_idempotency_policy' LANGUAGE C STABLE STRICT ROWS 1;

CREATE FUNCTION whizbang.idempotency_begin(
    p_scope text,
    p_key text,
    p_fingerprint bytea DEFAULT NULL,
    p_in_progress_ttl interval DEFAULT NULL,
    p_owner text DEFAULT NULL,
    p_wait interval DEFAULT '0',
    p_now timestamptz DEFAULT pg_catalog.now(),
    p_result_ttl interval DEFAULT NULL)
RETURNS TABLE (outcome text, token bigint, result jsonb, completed_at timestamptz)
    AS 'MODULE_PATHNAME', 'wb_idempotency_begin' LANGUAGE C VOLATILE ROWS 1;

CREATE FUNCTION whizbang.idempotency_complete(
    p_scope text,
    p_key text,
    p_token bigint,
    p_result jsonb DEFAULT NULL,
    p_result_ttl interval DEFAULT NULL,
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS text
    AS 'MODULE_PATHNAME', 'wb_idempotency_complete' LANGUAGE C VOLATILE;

CREATE FUNCTION whizbang.idempotency_release(
    p_scope text,
    p_key text,
    p_token bigint,
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS text
    AS 'MODULE_PATHNAME', 'wb_idempotency_release' LANGUAGE C VOLATILE;

REVOKE ALL ON FUNCTION whizbang.idempotency_policy(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.idempotency_begin(text, text, bytea, interval, text, interval, timestamptz, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.idempotency_complete(text, text, bigint, jsonb, interval, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.idempotency_release(text, text, bigint, timestamptz) FROM PUBLIC;

-- ---------------------------------------------------------------------------------------
-- Inbox and work coordination (0.3.0)
-- ---------------------------------------------------------------------------------------


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

-- ---------------------------------------------------------------------------------------
-- 0.3.0 -> 0.4.0
-- ---------------------------------------------------------------------------------------

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

-- ---------------------------------------------------------------------------------------
-- 0.4.0 -> 0.4.1
-- ---------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------
-- search_path immunity (issue 10, item 1; DESIGN §4, docs/security.md "search_path")
-- ---------------------------------------------------------------------------------------
-- Every function runs with search_path = pg_catalog, pg_temp in force, whatever the caller's
-- or the database's: a name that whizbang's SQL leaves unqualified by mistake (its SQL is
-- qualified throughout) still cannot reach an object planted in public by a role that may
-- create there, which would run with the caller's rights (a superuser's, the worker's).
-- The pure functions (fingerprint, event_uuid, uuid_v7, partition_of, version) look up no
-- names today; they get the clause too, so the rule has no exception to remember.
ALTER FUNCTION whizbang.version() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang._bridge_selftest(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang._table_changed() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.dedup_insert(uuid, text, bytea, timestamptz, timestamptz)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.dedup_insert_many(uuid[], text, bytea[], timestamptz[], timestamptz)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.fingerprint(jsonb, text[]) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.event_uuid(text, text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.uuid_v7(timestamptz) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.partition_of(uuid, integer) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.idempotency_policy(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.idempotency_begin(text, text, bytea, interval, text, interval, timestamptz, interval)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.idempotency_complete(text, text, bigint, jsonb, interval, timestamptz)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.idempotency_release(text, text, bigint, timestamptz) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.store_inbox_messages(jsonb, uuid, timestamptz, timestamptz, integer, text)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.inbox_receive(jsonb, text, timestamptz, integer) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.complete_work(text, uuid[], bigint[], text, timestamptz) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.renew_leases(text, uuid[], bigint[], integer, text, timestamptz)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.release_work(text, uuid[], bigint[], text, timestamptz) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.retry_dead_letters(bigint[]) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.store_outbox_messages(jsonb, uuid, timestamptz, timestamptz, integer)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.complete_outbox_published(uuid[], boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.perform_maintenance(timestamptz, integer) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.stats() SET search_path = pg_catalog, pg_temp;

-- ---------------------------------------------------------------------------------------
-- run_maintenance: perform_maintenance's tasks, committing after every batch (issue 10, item 7)
-- ---------------------------------------------------------------------------------------
-- perform_maintenance runs every batch in the caller's transaction, which holds its row locks
-- and the xmin horizon to the end. CALLed outside a transaction block (pg_cron does), this
-- procedure commits after every batch, like the background worker. It has no SET search_path
-- clause on purpose: PostgreSQL forbids COMMIT in a procedure that has one; it sets
-- search_path = pg_catalog, pg_temp itself in each of its transactions
-- (src/pg/maintenance_procedure.cpp).
CREATE PROCEDURE whizbang.run_maintenance(
    p_now timestamptz DEFAULT pg_catalog.now(),
    p_batch_size integer DEFAULT 10000)
    AS 'MODULE_PATHNAME', 'wb_run_maintenance' LANGUAGE C;

COMMENT ON PROCEDURE whizbang.run_maintenance(timestamptz, integer) IS
    'perform_maintenance''s four tasks, committing after every batch; CALL it outside a transaction block. '
    'Reports one NOTICE per task: ok or skipped, rows affected, batches, milliseconds.';

REVOKE ALL ON PROCEDURE whizbang.run_maintenance(timestamptz, integer) FROM PUBLIC;

-- ---------------------------------------------------------------------------------------
-- 0.4.1 -> 0.5.0
-- ---------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------
-- The catalog describes itself (issue 13, item 1; DESIGN §3.7)
-- ---------------------------------------------------------------------------------------
-- Every function, procedure, table, view, sequence and column of whizbang carries a COMMENT,
-- so `\df+ whizbang.*` and `\d+ whizbang.<table>` are a usable reference: what it is, its
-- outcome words as DESIGN and docs/reference.md name them, its main errors (SQLSTATE).
-- Internal helpers have a `_` name and a comment that starts with "internal:".
-- test/pgtap/catalog_comments.sql fails for any object without a comment.

-- The settings trigger function is internal: out of the API's way with a `_` name. The
-- trigger (still called wh_settings_validate) refers to the function by oid, so it keeps
-- working; nothing else calls the function by name.
ALTER FUNCTION whizbang.wh_settings_validate() RENAME TO _settings_validate;

-- Functions ------------------------------------------------------------------------------

COMMENT ON FUNCTION whizbang.version() IS
    'Version of the loaded shared library (whizbang.control at build time). It differs from '
    'pg_extension.extversion (the SQL objects) until ALTER EXTENSION whizbang UPDATE runs. No errors.';

COMMENT ON FUNCTION whizbang.dedup_insert(uuid, text, bytea, timestamptz, timestamptz) IS
    'Records one delivery of p_message_id for consumer p_consumer in the caller''s transaction. '
    'Outcome: new | duplicate | conflict (same id, different non-null fingerprint) | expired '
    '(p_sent_at before the replay horizon, id not on record: nothing recorded). '
    'Errors: 22004 null argument, 22023 bad p_consumer or p_now, 25006 read-only, '
    '40001 above READ COMMITTED, 42501 missing grant.';

COMMENT ON FUNCTION whizbang.dedup_insert_many(uuid[], text, bytea[], timestamptz[], timestamptz) IS
    'Batch form of dedup_insert: one row per input element, in input order, ids locked in sorted '
    'order (no deadlocks). Outcome: new | duplicate (also a repeat inside the batch) | conflict | expired. '
    'Errors: 22004 null argument or element, 22023 arrays of different lengths, 2202E multi-dimensional, '
    '54000 over 1,000,000 elements, 25006, 40001, 42501; nothing written on error.';

COMMENT ON FUNCTION whizbang.fingerprint(jsonb, text[]) IS
    'SHA-256 (32 bytes) of the canonical text of p_payload (keys sorted, no whitespace, one number form; '
    'docs/fingerprint.md), the dotted p_ignore_paths removed first. NULL in, NULL out. '
    'Errors: 22004 null path, 22023 empty path or segment, 2202E, 54000 nested deeper than 10000 levels.';

COMMENT ON FUNCTION whizbang.event_uuid(text, text) IS
    'Stable uuid of a string identity (a CloudEvents source and id): UUIDv5 (RFC 9562) in the URL '
    'namespace of octet_length(p_source) || '':'' || p_source || p_id. STRICT: NULL in, NULL out. No errors.';

COMMENT ON FUNCTION whizbang.uuid_v7(timestamptz) IS
    'RFC 9562 UUIDv7 of p_at (Unix milliseconds, then random bits), strictly increasing within a backend. '
    'Errors: 22004 null p_at, 22023 infinite, 22008 before 1970, 22003 after the year 10889.';

COMMENT ON FUNCTION whizbang.partition_of(uuid, integer) IS
    'Partition number in [0, p_partition_count) of a stream id; stable across databases, machines and '
    'versions, never negative. STRICT: NULL in, NULL out. Errors: 22023 p_partition_count below 1.';

COMMENT ON FUNCTION whizbang.idempotency_begin(text, text, bytea, interval, text, interval, timestamptz, interval) IS
    'Claims the operation key (p_scope, p_key) before a handler runs, or reports what happened to it; '
    'one row. Outcome: claimed (token: your fencing token) | in_progress_duplicate | completed_duplicate '
    '(the stored result) | expired_duplicate (result purged, key remembered) | conflict (different fingerprint). '
    'Errors: 22004, 22023 (empty or over 255 bytes, TTL not positive or outside the scope''s policy), '
    '22015, 22008, 25006, 40001, 42501.';

COMMENT ON FUNCTION whizbang.idempotency_complete(text, text, bigint, jsonb, interval, timestamptz) IS
    'Completes the key with p_result if p_token still owns its in-progress claim. '
    'Outcome: completed | complete_conflict (the token no longer owns the key: nothing changed, roll back). '
    'Errors: 22004, 22023 (result TTL outside the policy), 22015, 22008, 25006, 42501.';

COMMENT ON FUNCTION whizbang.idempotency_release(text, text, bigint, timestamptz) IS
    'Gives up the in-progress claim that p_token owns (deletes it), so the key can be claimed again at once. '
    'Outcome: released | not_owner (nothing changed) | not_found. Errors: 22004, 22023, 25006, 42501.';

COMMENT ON FUNCTION whizbang.idempotency_policy(text) IS
    'The TTLs in effect for p_scope, one row: its wh_idempotency_policies row, each NULL column (or a '
    'missing row) falling back to the global setting. STRICT. Errors: 42501 missing grant.';

COMMENT ON FUNCTION whizbang.store_inbox_messages(jsonb, uuid, timestamptz, timestamptz, integer, text) IS
    'Records each element of p_messages (JSON array; MessageId, HandlerName, MessageType, Envelope required) '
    'in the dedup table for p_consumer and stores the new ones as work; returns a row only per newly stored '
    'message (duplicates and expired ones return nothing). With p_instance_id they are stored pre-leased. '
    'Errors: 22004, 22023 (bad element, named p_messages[i].Field), 54000, 22008, 25006, 40001, 42501; '
    'nothing written on error.';

COMMENT ON FUNCTION whizbang.inbox_receive(jsonb, text, timestamptz, integer) IS
    'Stores p_messages as store_inbox_messages does, but returns one row per input element, in input order. '
    'Outcome: new (stored as work) | duplicate | conflict (same id, different Envelope fingerprint) | '
    'expired (before the replay horizon). Errors: 22004, 22023, 54000, 25006, 40001, 42501; '
    'nothing written on error.';

COMMENT ON FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text) IS
    'Leases up to p_max_rows due messages of p_source (inbox, outbox, or NULL for both) to p_instance_id '
    'until p_now + p_lease_seconds, oldest first per stream, with a fresh fencing token (lease_token); '
    'attempts + 1, and a message past max_attempts is dead-lettered instead. Never waits. '
    'Errors: 22004, 22023 (a count below 1, unknown source, p_consumer over 1024 bytes), 2202E, 54000, '
    '22008, 40001, 42501.';

COMMENT ON FUNCTION whizbang.complete_work(text, uuid[], bigint[], text, timestamptz) IS
    'Finishes leased messages: one row per id. Outcome: completed (work row and message deleted, or marked '
    'processed under debug_mode; the dedup record stays) | not_found | lease_lost (token no longer current: '
    'nothing changed). NULL p_lease_tokens skips the fencing check. '
    'Errors: 22004, 22023 (arrays of different lengths, unknown source), 2202E, 54000, 25006, 42501.';

COMMENT ON FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz) IS
    'Records failed deliveries, keeping p_errors as last_error: one row per id. Outcome: retry_scheduled '
    '(due again at scheduled_for, after backoff) | dead_lettered (not retryable, or attempts exhausted) | '
    'not_found | lease_lost (nothing changed). Errors: 22004, 22023, 2202E, 54000, 22008, 25006, 42501.';

COMMENT ON FUNCTION whizbang.renew_leases(text, uuid[], bigint[], integer, text, timestamptz) IS
    'Extends leases to p_now + p_lease_seconds: one row per id. Outcome: renewed | not_found | lease_lost '
    '(token not current, or NULL: nothing changed). Errors: 22004 (tokens required), 22023, 2202E, 54000, '
    '22008, 25006, 42501.';

COMMENT ON FUNCTION whizbang.release_work(text, uuid[], bigint[], text, timestamptz) IS
    'Hands leased, unstarted messages back: one row per id. Outcome: released (lease cleared, the attempt '
    'refunded, claimable at once) | not_found | lease_lost (nothing changed). '
    'Errors: 22004, 22023, 2202E, 54000, 25006, 42501.';

COMMENT ON FUNCTION whizbang.retry_dead_letters(bigint[]) IS
    'Puts the named dead letters back as fresh work (attempts 0, at the end of their stream) and returns '
    'how many; dedup records are kept, unknown ids skipped. Errors: 22004 null element, 2202E, 54000, '
    '25006, 42501.';

COMMENT ON FUNCTION whizbang.store_outbox_messages(jsonb, uuid, timestamptz, timestamptz, integer) IS
    'Stores each element of p_messages (MessageId, Destination, MessageType, Envelope required) as an '
    'outbox message with its work row, in the caller''s transaction; one row per input element, '
    'was_newly_created false for an id already in wh_outbox. Sends NOTIFY whizbang_outbox when outbox_notify '
    'is on. Errors: 22004, 22023 (bad element), 54000, 22008, 25006, 40001, 42501; nothing written on error.';

COMMENT ON FUNCTION whizbang.complete_outbox_published(uuid[], boolean) IS
    'Deletes the named published outbox messages (with p_debug_mode or debug_mode: marks them processed) '
    'and returns how many; unknown or finished ids are no-ops. Not fenced: a relay that can lose its lease '
    'uses complete_work(''outbox'', ids, tokens). Errors: 2202E, 54000, 25006, 42501.';

COMMENT ON FUNCTION whizbang.perform_maintenance(timestamptz, integer) IS
    'Runs the retention tasks purge_old_deduplication, purge_expired_idempotency, purge_dead_letters and '
    'purge_processed in batches, all in the caller''s transaction; one row per task, status ok | skipped '
    '(another transaction runs it). Never deletes pending work. Errors: 22004, 22023, 25006, 42501.';

COMMENT ON PROCEDURE whizbang.run_maintenance(timestamptz, integer) IS
    'perform_maintenance''s four tasks, committing after every batch; CALL it outside a transaction block. '
    'Reports one NOTICE per task: ok or skipped, rows affected, batches, milliseconds. '
    'Errors: 25001 inside a transaction block, and those of perform_maintenance (22004, 22023, 25006, 42501).';

COMMENT ON FUNCTION whizbang.stats() IS
    'Sixteen counters from one snapshot: inbox_ and outbox_ pending, leased, scheduled, dead_lettered, '
    'oldest_pending_seconds; dedup_rows, dedup_duplicates_observed, dedup_conflicts_observed; '
    'idempotency_in_progress, idempotency_completed, idempotency_tombstones. Read-only. '
    'Errors: 42501 without SELECT on a counted table.';

COMMENT ON FUNCTION whizbang._bridge_selftest(text) IS
    'internal: exercises the C++/PostgreSQL error boundary for the test suite (docs/internals.md). '
    'Not part of the API.';

COMMENT ON FUNCTION whizbang._table_changed() IS
    'internal: statement trigger function of wh_settings and wh_idempotency_policies; drops the backends'' '
    'settings and policy caches when a change commits. Not part of the API.';

COMMENT ON FUNCTION whizbang._settings_validate() IS
    'internal: row trigger function of wh_settings (trigger wh_settings_validate; the function had that '
    'name before 0.5.0). Validates and normalises a value; an INSERT of an existing key updates it. '
    'Errors: 42704 unknown key, 23502 null value, 42804 wrong value_type, 22023 bad value.';

-- Settings -------------------------------------------------------------------------------

COMMENT ON TABLE whizbang.wh_setting_defaults IS
    'What whizbang ships: one row per setting key it reads, with its default, type and bounds. Belongs to '
    'the extension and is rebuilt by CREATE EXTENSION: do not edit. Effective values: view whizbang.settings.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.setting_key IS 'Setting key, e.g. dedup_retention_days.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.default_value IS 'The shipped default, as text.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.value_type IS 'integer, boolean or text.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.min_value IS
    'Smallest value of an integer setting, in its unit (the key''s suffix: _days, _seconds); NULL otherwise.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.max_value IS
    'Largest value of an integer setting, in its unit; NULL otherwise.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.allowed_values IS
    'The values a text setting may take; NULL otherwise.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.description IS 'What the setting does.';

COMMENT ON TABLE whizbang.wh_settings IS
    'What users set (the seed''s table): one row per setting key, validated by trigger wh_settings_validate '
    '(an INSERT of an existing key updates it). Seeded with the defaults; pg_dump keeps the values that '
    'differ. Effective values: view whizbang.settings; docs/settings.md.';
COMMENT ON COLUMN whizbang.wh_settings.setting_key IS 'A key of wh_setting_defaults; another is error 42704.';
COMMENT ON COLUMN whizbang.wh_settings.setting_value IS
    'The value set, checked against the key''s type and bounds (22023) and stored in normal form '
    '('' +007 '' becomes 7, YES becomes true); never NULL (23502: delete the row for the default).';
COMMENT ON COLUMN whizbang.wh_settings.value_type IS
    'integer, boolean or text, filled in from wh_setting_defaults; another type is error 42804.';
COMMENT ON COLUMN whizbang.wh_settings.description IS 'Filled in from wh_setting_defaults when NULL.';

COMMENT ON VIEW whizbang.settings IS
    'Each setting key''s effective value: its wh_settings row, else the shipped default. whizbang''s '
    'functions read settings through this view and cache them per backend.';
COMMENT ON COLUMN whizbang.settings.setting_key IS 'Setting key.';
COMMENT ON COLUMN whizbang.settings.value IS 'Effective value: the wh_settings row''s, else the default.';
COMMENT ON COLUMN whizbang.settings.default_value IS 'The shipped default.';
COMMENT ON COLUMN whizbang.settings.value_type IS 'integer, boolean or text.';
COMMENT ON COLUMN whizbang.settings.is_default IS 'True when no row is set or the row holds the default value.';
COMMENT ON COLUMN whizbang.settings.description IS 'What the setting does (from wh_setting_defaults).';

-- Deduplication --------------------------------------------------------------------------

COMMENT ON TABLE whizbang.wh_message_deduplication IS
    'One row per (consumer, message_id) received: the dedup decision of dedup_insert, dedup_insert_many, '
    'store_inbox_messages and inbox_receive. Kept after completion; perform_maintenance purges it after '
    'dedup_retention_days, never while its message waits. Do not alter the table: whizbang writes it natively.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.consumer IS
    'The dedup scope (receiving service or subscription), compared byte for byte; '''' is the default scope.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.message_id IS 'The message id.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.first_seen_at IS
    'p_now of the call that recorded it (outcome new); retention counts from here.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.observation_count IS
    'Deliveries seen: 1 at the first, + 1 per duplicate or conflict.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.conflict_count IS
    'Deliveries whose fingerprint differed from the stored one (outcome conflict).';
COMMENT ON COLUMN whizbang.wh_message_deduplication.fingerprint IS
    'Payload fingerprint of the delivery that recorded the id (normally whizbang.fingerprint, 32 bytes), '
    'or NULL; never changed afterwards.';

-- Handler idempotency keys ---------------------------------------------------------------

COMMENT ON TABLE whizbang.wh_idempotency_keys IS
    'One row per (scope, idempotency_key) begun: in_progress or completed, with its fencing token and '
    'stored result. Past result_expires_at a completed key is a tombstone (result purged); past '
    'tombstone_expires_at it is forgotten and deleted. Written by the idempotency_* functions.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.scope IS 'p_scope: the namespace of keys, compared byte for byte.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.idempotency_key IS 'p_key: the operation key, compared byte for byte.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.state IS 'in_progress or completed.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.token IS
    'Fencing token of the current claim (from wh_idempotency_token_seq); kept when the key completes.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.owner IS
    'p_owner of the current claim, for troubleshooting only: ownership is the token.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.fingerprint IS
    'p_fingerprint of the claim, or NULL; a different one at begin answers conflict.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.result IS
    'p_result of idempotency_complete, returned with completed_duplicate; NULL once purged (tombstone).';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.result_ttl IS
    'Result TTL chosen at begin (an interval); idempotency_complete may use another.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.first_claimed_at IS
    'p_now of the first claim; kept when an abandoned claim is taken over, reset when a forgotten key is claimed again.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.claimed_at IS 'p_now of the current claim.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.lease_expires_at IS
    'claimed_at + the in-progress TTL; from then on the claim can be taken over.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.completed_at IS 'p_now of idempotency_complete; NULL while in progress.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.result_expires_at IS
    'From this time on begin answers expired_duplicate instead of completed_duplicate.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.tombstone_expires_at IS
    'From this time on the key is forgotten (claimable again) and maintenance deletes the row.';

COMMENT ON SEQUENCE whizbang.wh_idempotency_token_seq IS
    'Fencing tokens of idempotency_begin: strictly increasing across all scopes, with gaps.';

COMMENT ON TABLE whizbang.wh_idempotency_policies IS
    'Optional TTL policy per idempotency scope; a NULL column falls back to the global setting. Written by '
    'an operator role; idempotency_policy(scope) shows the values in effect.';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.scope IS 'The exact scope the row applies to (no patterns).';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.in_progress_ttl IS
    'Lease of a claim (interval > 0); NULL: setting idempotency_in_progress_ttl_seconds.';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.default_result_ttl IS
    'Result TTL when begin passes none (interval > 0); NULL: setting idempotency_result_ttl_seconds.';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.min_result_ttl IS
    'Smallest result TTL allowed (interval > 0); NULL: setting idempotency_result_ttl_min_seconds.';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.max_result_ttl IS
    'Largest result TTL allowed (interval > 0); NULL: setting idempotency_result_ttl_max_seconds.';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.tombstone_ttl IS
    'How long a key is remembered after its result expired (interval >= 0); NULL: setting idempotency_tombstone_days.';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.description IS 'Free text.';

-- Inbox and work -------------------------------------------------------------------------

COMMENT ON TABLE whizbang.wh_inbox IS
    'The immutable inbox message as received, one row per (consumer, message_id) stored as work. Written '
    'once by the stores; deleted when its work completes, moved to wh_dead_letters by dead-lettering.';
COMMENT ON COLUMN whizbang.wh_inbox.consumer IS 'The consumer (dedup scope) the message was stored for.';
COMMENT ON COLUMN whizbang.wh_inbox.message_id IS 'MessageId.';
COMMENT ON COLUMN whizbang.wh_inbox.handler_name IS 'HandlerName: the handler that processes it.';
COMMENT ON COLUMN whizbang.wh_inbox.message_type IS 'MessageType.';
COMMENT ON COLUMN whizbang.wh_inbox.envelope IS 'Envelope: the message body.';
COMMENT ON COLUMN whizbang.wh_inbox.metadata IS 'Metadata, or NULL.';
COMMENT ON COLUMN whizbang.wh_inbox.scope IS 'Scope, or NULL.';
COMMENT ON COLUMN whizbang.wh_inbox.stream_id IS 'StreamId: a stream''s messages are handed out in arrival order; NULL for none.';
COMMENT ON COLUMN whizbang.wh_inbox.is_event IS 'IsEvent (false when not given).';
COMMENT ON COLUMN whizbang.wh_inbox.sent_at IS 'SentAt: when the sender sent it, checked against the replay horizon; NULL when not given.';
COMMENT ON COLUMN whizbang.wh_inbox.received_at IS 'p_now of the store (of retry_dead_letters: its transaction''s start).';

COMMENT ON TABLE whizbang.wh_inbox_work IS
    'The mutable work state of each wh_inbox message (schedule, attempts, lease), kept narrow so that '
    'claims, renewals and releases are HOT updates.';
COMMENT ON COLUMN whizbang.wh_inbox_work.consumer IS 'The message''s consumer.';
COMMENT ON COLUMN whizbang.wh_inbox_work.message_id IS 'The message (wh_inbox.message_id).';
COMMENT ON COLUMN whizbang.wh_inbox_work.stream_id IS 'The message''s StreamId; NULL for none.';
COMMENT ON COLUMN whizbang.wh_inbox_work.stream_seq IS 'Arrival number within (consumer, stream_id); NULL without a stream.';
COMMENT ON COLUMN whizbang.wh_inbox_work.partition_number IS
    'partition_of(coalesce(stream_id, message_id), p_partition_count) with the count given at store.';
COMMENT ON COLUMN whizbang.wh_inbox_work.scheduled_for IS
    'Not handed out before this time: ScheduledFor, the store''s p_now, or the retry time of fail_work.';
COMMENT ON COLUMN whizbang.wh_inbox_work.attempts IS 'Deliveries so far: + 1 per claim, - 1 per release.';
COMMENT ON COLUMN whizbang.wh_inbox_work.lease_instance IS 'Instance (p_instance_id) holding the current lease; NULL when unleased.';
COMMENT ON COLUMN whizbang.wh_inbox_work.lease_token IS 'Fencing token of the current lease (wh_lease_token_seq); NULL when unleased.';
COMMENT ON COLUMN whizbang.wh_inbox_work.lease_expiry IS 'End of the current lease; NULL when unleased.';
COMMENT ON COLUMN whizbang.wh_inbox_work.last_error IS 'Error text of the last fail_work.';
COMMENT ON COLUMN whizbang.wh_inbox_work.processed_at IS 'With debug_mode: when it was completed (kept, not deleted); NULL otherwise.';

COMMENT ON TABLE whizbang.wh_inbox_preleased IS
    'Inbox messages stored pre-leased to an instance (store_inbox_messages with p_instance_id) that its '
    'next claim_work has not handed back yet.';
COMMENT ON COLUMN whizbang.wh_inbox_preleased.instance_id IS 'The instance whose next claim_work hands the message back.';
COMMENT ON COLUMN whizbang.wh_inbox_preleased.consumer IS 'The message''s consumer.';
COMMENT ON COLUMN whizbang.wh_inbox_preleased.message_id IS 'The message.';
COMMENT ON COLUMN whizbang.wh_inbox_preleased.lease_token IS 'The token it was stored leased with; that claim returns it.';

COMMENT ON TABLE whizbang.wh_inbox_streams IS
    'One row per (consumer, stream_id) that has had messages: its arrival counter. A store locks it, '
    'which orders concurrent stores; maintenance deletes it once the stream has no work left.';
COMMENT ON COLUMN whizbang.wh_inbox_streams.consumer IS 'The consumer.';
COMMENT ON COLUMN whizbang.wh_inbox_streams.stream_id IS 'The stream.';
COMMENT ON COLUMN whizbang.wh_inbox_streams.last_seq IS 'stream_seq of the stream''s latest stored message.';

COMMENT ON TABLE whizbang.wh_dead_letters IS
    'Messages of both sources that failed for good (not retryable, or attempts past max_attempts), with '
    'their last error. retry_dead_letters puts them back; maintenance purges them after dead_letter_retention_days.';
COMMENT ON COLUMN whizbang.wh_dead_letters.dead_letter_id IS 'Identity: pass it to retry_dead_letters.';
COMMENT ON COLUMN whizbang.wh_dead_letters.source IS 'inbox or outbox.';
COMMENT ON COLUMN whizbang.wh_dead_letters.consumer IS 'The inbox message''s consumer; NULL for the outbox.';
COMMENT ON COLUMN whizbang.wh_dead_letters.message_id IS 'The message id.';
COMMENT ON COLUMN whizbang.wh_dead_letters.handler_name IS 'HandlerName (inbox); NULL for the outbox.';
COMMENT ON COLUMN whizbang.wh_dead_letters.destination IS 'Destination (outbox); NULL for the inbox.';
COMMENT ON COLUMN whizbang.wh_dead_letters.message_type IS 'MessageType.';
COMMENT ON COLUMN whizbang.wh_dead_letters.envelope IS 'Envelope (wh_inbox.envelope or wh_outbox.event_data).';
COMMENT ON COLUMN whizbang.wh_dead_letters.metadata IS 'Metadata, or NULL.';
COMMENT ON COLUMN whizbang.wh_dead_letters.scope IS 'Scope, or NULL.';
COMMENT ON COLUMN whizbang.wh_dead_letters.stream_id IS 'StreamId, or NULL.';
COMMENT ON COLUMN whizbang.wh_dead_letters.is_event IS 'IsEvent.';
COMMENT ON COLUMN whizbang.wh_dead_letters.sent_at IS 'SentAt (inbox); NULL for the outbox or when not given.';
COMMENT ON COLUMN whizbang.wh_dead_letters.received_at IS 'received_at of the inbox message, created_at of the outbox message.';
COMMENT ON COLUMN whizbang.wh_dead_letters.attempts IS 'Deliveries made before it was dead-lettered.';
COMMENT ON COLUMN whizbang.wh_dead_letters.last_error IS 'Error text of the last fail_work.';
COMMENT ON COLUMN whizbang.wh_dead_letters.dead_lettered_at IS 'p_now of the call that dead-lettered it; retention counts from here.';

COMMENT ON SEQUENCE whizbang.wh_dead_letters_dead_letter_id_seq IS 'Identity sequence of wh_dead_letters.dead_letter_id.';
COMMENT ON SEQUENCE whizbang.wh_lease_token_seq IS
    'Fencing tokens of claims and pre-leased stores of both sources: strictly increasing.';

-- Outbox ---------------------------------------------------------------------------------

COMMENT ON TABLE whizbang.wh_outbox IS
    'The immutable message an application sends, stored by store_outbox_messages in its own transaction. '
    'No consumer: the key is message_id. Deleted when published (completed), moved to wh_dead_letters by dead-lettering.';
COMMENT ON COLUMN whizbang.wh_outbox.message_id IS 'MessageId, the primary key.';
COMMENT ON COLUMN whizbang.wh_outbox.destination IS 'Destination: where the relay publishes it.';
COMMENT ON COLUMN whizbang.wh_outbox.message_type IS 'MessageType.';
COMMENT ON COLUMN whizbang.wh_outbox.event_data IS 'Envelope: the message body, under the seed''s column name.';
COMMENT ON COLUMN whizbang.wh_outbox.metadata IS 'Metadata, or NULL.';
COMMENT ON COLUMN whizbang.wh_outbox.scope IS 'Scope, or NULL.';
COMMENT ON COLUMN whizbang.wh_outbox.stream_id IS 'StreamId: a stream''s messages are handed out in arrival order; NULL for none.';
COMMENT ON COLUMN whizbang.wh_outbox.is_event IS 'IsEvent (false when not given).';
COMMENT ON COLUMN whizbang.wh_outbox.created_at IS 'p_now of the store (of retry_dead_letters: its transaction''s start).';

COMMENT ON TABLE whizbang.wh_outbox_work IS
    'The mutable work state of each wh_outbox message, the same shape as wh_inbox_work so that one claim '
    'engine serves both; narrow, so that leases are HOT updates.';
COMMENT ON COLUMN whizbang.wh_outbox_work.consumer IS 'Always '''' (CHECK): the outbox has no consumer.';
COMMENT ON COLUMN whizbang.wh_outbox_work.message_id IS 'The message (wh_outbox.message_id).';
COMMENT ON COLUMN whizbang.wh_outbox_work.stream_id IS 'The message''s StreamId; NULL for none.';
COMMENT ON COLUMN whizbang.wh_outbox_work.stream_seq IS 'Arrival number within stream_id; NULL without a stream.';
COMMENT ON COLUMN whizbang.wh_outbox_work.partition_number IS
    'partition_of(coalesce(stream_id, message_id), p_partition_count) with the count given at store.';
COMMENT ON COLUMN whizbang.wh_outbox_work.scheduled_for IS
    'Not handed out before this time: ScheduledFor, the store''s p_now, or the retry time of fail_work.';
COMMENT ON COLUMN whizbang.wh_outbox_work.attempts IS 'Deliveries so far: + 1 per claim, - 1 per release.';
COMMENT ON COLUMN whizbang.wh_outbox_work.lease_instance IS 'Instance (p_instance_id) holding the current lease; NULL when unleased.';
COMMENT ON COLUMN whizbang.wh_outbox_work.lease_token IS 'Fencing token of the current lease (wh_lease_token_seq); NULL when unleased.';
COMMENT ON COLUMN whizbang.wh_outbox_work.lease_expiry IS 'End of the current lease; NULL when unleased.';
COMMENT ON COLUMN whizbang.wh_outbox_work.last_error IS 'Error text of the last fail_work.';
COMMENT ON COLUMN whizbang.wh_outbox_work.processed_at IS 'With debug_mode: when it was published (kept, not deleted); NULL otherwise.';

COMMENT ON TABLE whizbang.wh_outbox_preleased IS
    'Outbox messages stored pre-leased to an instance (store_outbox_messages with p_instance_id) that its '
    'next claim_work has not handed back yet.';
COMMENT ON COLUMN whizbang.wh_outbox_preleased.instance_id IS 'The instance whose next claim_work hands the message back.';
COMMENT ON COLUMN whizbang.wh_outbox_preleased.consumer IS 'Always '''' (CHECK): the outbox has no consumer.';
COMMENT ON COLUMN whizbang.wh_outbox_preleased.message_id IS 'The message.';
COMMENT ON COLUMN whizbang.wh_outbox_preleased.lease_token IS 'The token it was stored leased with; that claim returns it.';

COMMENT ON TABLE whizbang.wh_outbox_streams IS
    'One row per outbox stream that has had messages: its arrival counter. A store locks it, which orders '
    'concurrent stores; maintenance deletes it once the stream has no work left.';
COMMENT ON COLUMN whizbang.wh_outbox_streams.consumer IS 'Always '''' (CHECK): the outbox has no consumer.';
COMMENT ON COLUMN whizbang.wh_outbox_streams.stream_id IS 'The stream.';
COMMENT ON COLUMN whizbang.wh_outbox_streams.last_seq IS 'stream_seq of the stream''s latest stored message.';

-- Observability --------------------------------------------------------------------------

COMMENT ON VIEW whizbang.stats IS
    'whizbang.stats() as a view: one row per metric, counted when read (docs/reference.md#stats).';
COMMENT ON COLUMN whizbang.stats.metric IS 'Metric name, e.g. inbox_pending.';
COMMENT ON COLUMN whizbang.stats.value IS 'A count, or seconds for the *_oldest_pending_seconds metrics.';

-- ---------------------------------------------------------------------------------------
-- Per-consumer operations: queues, peek, cancel_work (issue 13, item 7)
-- ---------------------------------------------------------------------------------------
-- stats()' work metrics per source and consumer, reading pending messages without leasing
-- them, and cancelling pending messages (docs/reference.md, docs/inbox.md "Operating the
-- queues"). All three are C functions (src/pg/queues.cpp, peek.cpp, work_outcomes.cpp).

CREATE FUNCTION whizbang.queues(p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (source text, consumer text, pending bigint, leased bigint, scheduled bigint, dead_lettered bigint,
               oldest_pending_seconds bigint)
    AS 'MODULE_PATHNAME', 'wb_queues' LANGUAGE C STABLE ROWS 10
    SET search_path = pg_catalog, pg_temp;

CREATE VIEW whizbang.queues AS
SELECT q.source, q.consumer, q.pending, q.leased, q.scheduled, q.dead_lettered, q.oldest_pending_seconds
  FROM whizbang.queues() q;

CREATE FUNCTION whizbang.peek(
    p_source text DEFAULT NULL,
    p_consumer text DEFAULT NULL,
    p_limit integer DEFAULT 100,
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (source text, message_id uuid, stream_id uuid, partition_number integer, handler_name text,
               destination text, message_type text, envelope jsonb, metadata jsonb, scope jsonb, attempts integer,
               consumer text, scheduled_for timestamptz, lease_expiry timestamptz, last_error text)
    AS 'MODULE_PATHNAME', 'wb_peek' LANGUAGE C STABLE ROWS 100
    SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION whizbang.cancel_work(
    p_source text,
    p_message_ids uuid[],
    p_consumer text DEFAULT '',
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, outcome text)
    AS 'MODULE_PATHNAME', 'wb_cancel_work' LANGUAGE C VOLATILE ROWS 100
    SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION whizbang.queues(timestamptz) IS
    'Work per source and consumer at p_now: one row per (source, consumer) with unprocessed work or dead letters; '
    'the outbox''s consumer is NULL. Counted as stats() counts (its per-source metrics are these rows'' sums). '
    'Errors: 22004 NULL p_now, 22023 p_now not finite.';
COMMENT ON VIEW whizbang.queues IS
    'whizbang.queues() at now(): pending, leased, scheduled and dead-lettered messages per source and consumer. '
    'SELECT DISTINCT consumer FROM whizbang.queues lists the consumers.';
COMMENT ON COLUMN whizbang.queues.source IS 'inbox or outbox';
COMMENT ON COLUMN whizbang.queues.consumer IS 'The inbox consumer (p_consumer of the inbox functions, '''' by default); NULL for the outbox, which has none';
COMMENT ON COLUMN whizbang.queues.pending IS
    'Messages due (scheduled_for <= now) and not under a live lease, rows waiting behind their stream''s head included';
COMMENT ON COLUMN whizbang.queues.leased IS 'Messages under a live lease (lease_expiry > now): being handled';
COMMENT ON COLUMN whizbang.queues.scheduled IS 'Messages not due yet and not leased: retries and future ScheduledFor';
COMMENT ON COLUMN whizbang.queues.dead_lettered IS 'Rows of wh_dead_letters of this source and consumer';
COMMENT ON COLUMN whizbang.queues.oldest_pending_seconds IS
    'Seconds since the oldest pending message was stored (received_at, created_at), floored; 0 when none is pending';
COMMENT ON FUNCTION whizbang.peek(text, text, integer, timestamptz) IS
    'The pending messages (as queues() counts them) in the order claims take them, earliest due first and a stream''s '
    'rows in arrival order, without leasing or locking them and without counting an attempt. p_source NULL: both; '
    'p_consumer NULL: every consumer (it selects inbox rows only, as in claim_work); at most p_limit rows. '
    'Errors: 22004 NULL p_limit or p_now, 22023 unknown p_source, p_limit < 1, p_consumer over 1024 bytes.';
COMMENT ON FUNCTION whizbang.cancel_work(text, uuid[], text, timestamptz) IS
    'Removes messages that are not being handled (pending, scheduled, or with a lapsed lease), work row and message; '
    'the inbox''s dedup record stays, so a redelivery is a duplicate. One row per element, in input order: '
    'cancelled; leased (under a live lease: unchanged, its holder completes or fails it); not_found (unknown, '
    'completed, dead-lettered, another consumer''s, or cancelled earlier in the call). p_consumer is ignored for the '
    'outbox. Errors: 22004 NULL p_source, p_consumer, p_now or element; 22023 unknown p_source; 2202E; 54000 over '
    '1,000,000 ids.';

REVOKE ALL ON FUNCTION whizbang.queues(timestamptz) FROM PUBLIC;
REVOKE ALL ON whizbang.queues FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.peek(text, text, integer, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.cancel_work(text, uuid[], text, timestamptz) FROM PUBLIC;

-- ---------------------------------------------------------------------------------------
-- Live leases (DESIGN §3.8 whizbang.leases), for operators: who holds what, until when
-- ---------------------------------------------------------------------------------------

-- Leases live in the work rows (the row lease store); a lapsed lease is listed until the row is
-- handed out again, completed, failed or released, since its token still completes the row
-- (DESIGN §3.4). Rows stored pre-leased and not handed back yet are listed too.
CREATE VIEW whizbang.leases AS
SELECT 'inbox'::text AS source, w.consumer::text AS consumer, w.message_id, w.stream_id,
       w.lease_instance AS instance_id, w.lease_token, w.lease_expiry, w.attempts
  FROM whizbang.wh_inbox_work w
 WHERE w.lease_token IS NOT NULL AND w.processed_at IS NULL
UNION ALL
SELECT 'outbox'::text, NULL::text, o.message_id, o.stream_id, o.lease_instance, o.lease_token, o.lease_expiry,
       o.attempts
  FROM whizbang.wh_outbox_work o
 WHERE o.lease_token IS NOT NULL AND o.processed_at IS NULL;

COMMENT ON VIEW whizbang.leases IS
    'Every lease held on inbox and outbox work: holder instance, fencing token, expiry. A lease whose expiry has '
    'passed is listed until the message is handed out again or finished (its token still completes it); live ones '
    'are WHERE lease_expiry > now().';
COMMENT ON COLUMN whizbang.leases.source IS 'inbox or outbox';
COMMENT ON COLUMN whizbang.leases.consumer IS 'The inbox consumer; NULL for the outbox, which has none';
COMMENT ON COLUMN whizbang.leases.message_id IS 'The leased message';
COMMENT ON COLUMN whizbang.leases.stream_id IS 'Its stream, NULL when it has none';
COMMENT ON COLUMN whizbang.leases.instance_id IS 'The holder: p_instance_id of the claim (or of the pre-leasing store)';
COMMENT ON COLUMN whizbang.leases.lease_token IS 'The fencing token the holder must pass to complete, fail, renew or release it';
COMMENT ON COLUMN whizbang.leases.lease_expiry IS 'When the lease lapses; after it another claim may take the message';
COMMENT ON COLUMN whizbang.leases.attempts IS 'Deliveries so far, this one included';

REVOKE ALL ON whizbang.leases FROM PUBLIC;

-- ---------------------------------------------------------------------------------------
-- 0.5.0 -> 0.6.0
-- ---------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------
-- Which lease store runs (DESIGN §3.8)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang.lease_store() RETURNS text
    LANGUAGE c STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'wb_lease_store';
COMMENT ON FUNCTION whizbang.lease_store() IS
    'The lease store this server runs: shared_memory (whizbang in shared_preload_libraries: a claim writes '
    'nothing) or table (leases in the work rows, as before 0.6.0). Chosen at server start. No errors.';
REVOKE ALL ON FUNCTION whizbang.lease_store() FROM PUBLIC;

-- ---------------------------------------------------------------------------------------
-- whizbang.leases reads whichever store runs (DESIGN §3.8)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang._leases()
    RETURNS TABLE(source text, consumer text, message_id uuid, stream_id uuid, instance_id uuid,
                  lease_token bigint, lease_expiry timestamptz, attempts integer)
    LANGUAGE c STABLE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'wb_leases';
COMMENT ON FUNCTION whizbang._leases() IS
    'internal: the rows of whizbang.leases, from the shared-memory lease store or from the work rows. '
    'Errors: 42501 without SELECT on the work tables.';
REVOKE ALL ON FUNCTION whizbang._leases() FROM PUBLIC;

CREATE OR REPLACE VIEW whizbang.leases AS
SELECT l.source, l.consumer COLLATE pg_catalog."C" AS consumer, l.message_id, l.stream_id, l.instance_id, l.lease_token, l.lease_expiry, l.attempts
  FROM whizbang._leases() l;
COMMENT ON VIEW whizbang.leases IS
    'Every lease held on inbox and outbox work, in whichever lease store runs (whizbang.lease_store()): holder '
    'instance, fencing token, expiry, deliveries. A lease whose expiry has passed is listed until the message is '
    'handed out again or finished (its token still completes it); live ones are WHERE lease_expiry > now(). '
    'Reading it needs SELECT on the view and on the work tables, and EXECUTE on whizbang._leases().';

-- ---------------------------------------------------------------------------------------
-- A work row deleted by hand ends its shared lease (DESIGN §3.8)
-- ---------------------------------------------------------------------------------------
-- whizbang's own calls end a row's lease when they finish the row. These triggers cover every
-- other way a work row goes (a DELETE by hand, a TRUNCATE, a cascade), so a message stored
-- again under the same id is not held by the lease of a row that no longer exists. With the
-- table store they return at once.
CREATE FUNCTION whizbang._lease_row_deleted() RETURNS trigger
    LANGUAGE c
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'wb_lease_row_deleted';
COMMENT ON FUNCTION whizbang._lease_row_deleted() IS
    'internal: trigger of the work tables; a deleted or truncated work row''s shared-memory lease ends with the '
    'deleting transaction. Errors: 39P01 when called other than as a trigger.';
REVOKE ALL ON FUNCTION whizbang._lease_row_deleted() FROM PUBLIC;

CREATE TRIGGER wh_inbox_work_lease_end AFTER DELETE ON whizbang.wh_inbox_work
    FOR EACH ROW EXECUTE FUNCTION whizbang._lease_row_deleted('inbox');
CREATE TRIGGER wh_inbox_work_lease_truncate AFTER TRUNCATE ON whizbang.wh_inbox_work
    FOR EACH STATEMENT EXECUTE FUNCTION whizbang._lease_row_deleted('inbox');
CREATE TRIGGER wh_outbox_work_lease_end AFTER DELETE ON whizbang.wh_outbox_work
    FOR EACH ROW EXECUTE FUNCTION whizbang._lease_row_deleted('outbox');
CREATE TRIGGER wh_outbox_work_lease_truncate AFTER TRUNCATE ON whizbang.wh_outbox_work
    FOR EACH STATEMENT EXECUTE FUNCTION whizbang._lease_row_deleted('outbox');

-- ---------------------------------------------------------------------------------------
-- The work rows' lease columns hold the table store's leases only
-- ---------------------------------------------------------------------------------------
COMMENT ON COLUMN whizbang.wh_inbox_work.attempts IS
    'Deliveries so far. Table lease store: + 1 per claim, - 1 per release. Shared-memory store: the ended '
    'deliveries only (written by fail_work, a takeover of a lapsed lease, dead-lettering); the current one is in '
    'whizbang.leases.';
COMMENT ON COLUMN whizbang.wh_inbox_work.lease_instance IS
    'Table lease store: instance (p_instance_id) holding the current lease; NULL when unleased, and always with '
    'the shared-memory store (read whizbang.leases).';
COMMENT ON COLUMN whizbang.wh_inbox_work.lease_token IS
    'Table lease store: fencing token of the current lease (wh_lease_token_seq); NULL when unleased, and always '
    'with the shared-memory store (read whizbang.leases).';
COMMENT ON COLUMN whizbang.wh_inbox_work.lease_expiry IS
    'Table lease store: end of the current lease; NULL when unleased, and always with the shared-memory store '
    '(read whizbang.leases).';
COMMENT ON COLUMN whizbang.wh_outbox_work.attempts IS
    'Deliveries so far. Table lease store: + 1 per claim, - 1 per release. Shared-memory store: the ended '
    'deliveries only (written by fail_work, a takeover of a lapsed lease, dead-lettering); the current one is in '
    'whizbang.leases.';
COMMENT ON COLUMN whizbang.wh_outbox_work.lease_instance IS
    'Table lease store: instance (p_instance_id) holding the current lease; NULL when unleased, and always with '
    'the shared-memory store (read whizbang.leases).';
COMMENT ON COLUMN whizbang.wh_outbox_work.lease_token IS
    'Table lease store: fencing token of the current lease (wh_lease_token_seq); NULL when unleased, and always '
    'with the shared-memory store (read whizbang.leases).';
COMMENT ON COLUMN whizbang.wh_outbox_work.lease_expiry IS
    'Table lease store: end of the current lease; NULL when unleased, and always with the shared-memory store '
    '(read whizbang.leases).';

-- ---------------------------------------------------------------------------------------
-- 0.6.0 -> 0.7.0
-- ---------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------
-- claim_work(..., p_wait interval DEFAULT '0') (issue 12, item 1; DESIGN §3.4)
-- ---------------------------------------------------------------------------------------
-- A new parameter makes a new function: the 10-argument claim_work is created next to the
-- 9-argument one, takes over every grant the old one carried (docs/security.md tells users to
-- grant EXECUTE on it), and the old one is dropped. Calls without p_wait are unchanged.
CREATE FUNCTION whizbang.claim_work(
    p_instance_id uuid,
    p_source text DEFAULT NULL,
    p_max_rows integer DEFAULT 100,
    p_lease_seconds integer DEFAULT 300,
    p_partitions integer[] DEFAULT NULL,
    p_partition_count integer DEFAULT 10000,
    p_max_per_stream integer DEFAULT 100,
    p_now timestamptz DEFAULT pg_catalog.now(),
    p_consumer text DEFAULT NULL,
    p_wait interval DEFAULT '0')
RETURNS TABLE (source text, message_id uuid, stream_id uuid, partition_number integer, handler_name text,
               destination text, message_type text, envelope jsonb, metadata jsonb, scope jsonb,
               attempts integer, lease_token bigint, lease_expiry timestamptz, consumer text)
    AS 'MODULE_PATHNAME', 'wb_claim_work' LANGUAGE C VOLATILE ROWS 100
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text, interval)
    FROM PUBLIC;
COMMENT ON FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text, interval) IS
    'Leases up to p_max_rows due messages of p_source (inbox, outbox, or NULL for both) to p_instance_id '
    'until p_now + p_lease_seconds, oldest first per stream, with a fresh fencing token (lease_token); '
    'attempts + 1, and a message past max_attempts is dead-lettered instead. Never waits on locks. '
    'p_wait > 0: when nothing is claimable, sleeps up to p_wait (never beyond statement_timeout) until a '
    'transaction that stored matching work commits or work falls due, then claims; no rows when the time '
    'is up. Woken at commit with whizbang in shared_preload_libraries, else it polls. READ COMMITTED only. '
    'Errors: 22004 (incl. a NULL p_wait), 22023 (a count below 1, unknown source, p_consumer over 1024 '
    'bytes, a negative p_wait), 0A000 (p_wait > 0 above READ COMMITTED), 2202E, 54000, 22008, 25006, '
    '40001, 42501, 57014 (canceled while waiting).';

-- The grants of the old function, carried over. A grant given by a role other than the owner
-- (one holding the grant option) is given again by that role, so the grantor is kept; those
-- are given once their grantor holds the grant option on the new function. The new function
-- takes the old one's owner (a different superuser may run the update).
DO $carry_grants$
DECLARE
    v_old pg_catalog.oid := 'whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text)'
                            ::pg_catalog.regprocedure;
    v_new pg_catalog.regprocedure := 'whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text, interval)'
                            ::pg_catalog.regprocedure;
    v_owner pg_catalog.oid;
    v_old_acl pg_catalog.aclitem[];
    v_initial pg_catalog.aclitem[];
    v_updater pg_catalog.name := pg_catalog.current_user();
    v_granted integer;
    v_pass integer;
    g record;
BEGIN
    SELECT p.proowner, coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner)) INTO v_owner, v_old_acl
      FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) v_old;
    IF v_owner OPERATOR(pg_catalog.<>) (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) v_new) THEN
        EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO %I', v_new, pg_catalog.pg_get_userbyid(v_owner));
    END IF;
    -- What a fresh install leaves: the owner's EXECUTE only. It is the function's initial
    -- privilege (pg_init_privs, below).
    SELECT p.proacl INTO v_initial FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) v_new::pg_catalog.oid;

    -- A chain of grantors is at most as long as the list, so passes that many at most.
    FOR v_pass IN 1 .. pg_catalog.cardinality(v_old_acl) LOOP
        v_granted := 0;
        FOR g IN
            SELECT a.grantor, a.grantee, a.is_grantable
              FROM pg_catalog.aclexplode(v_old_acl) a
             WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
               -- not there yet (or there without the grant option the old one had)
               AND NOT EXISTS (SELECT FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) b
                                WHERE p.oid OPERATOR(pg_catalog.=) v_new::pg_catalog.oid
                                  AND b.grantor OPERATOR(pg_catalog.=) a.grantor
                                  AND b.grantee OPERATOR(pg_catalog.=) a.grantee
                                  AND (b.is_grantable OR NOT a.is_grantable))
               -- its grantor may give it by now
               AND (a.grantor OPERATOR(pg_catalog.=) v_owner
                    OR EXISTS (SELECT FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) b
                                WHERE p.oid OPERATOR(pg_catalog.=) v_new::pg_catalog.oid
                                  AND b.grantee OPERATOR(pg_catalog.=) a.grantor AND b.is_grantable))
        LOOP
            IF g.grantor OPERATOR(pg_catalog.<>) v_owner THEN
                EXECUTE pg_catalog.format('SET LOCAL ROLE %I', pg_catalog.pg_get_userbyid(g.grantor));
            END IF;
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', v_new,
                CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                     ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END,
                CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
            IF g.grantor OPERATOR(pg_catalog.<>) v_owner THEN
                EXECUTE pg_catalog.format('SET LOCAL ROLE %I', v_updater);
            END IF;
            v_granted := v_granted OPERATOR(pg_catalog.+) 1;
        END LOOP;
        EXIT WHEN v_granted OPERATOR(pg_catalog.=) 0;
    END LOOP;
    -- An owner who had revoked its own EXECUTE stays without it.
    IF NOT EXISTS (SELECT FROM pg_catalog.aclexplode(v_old_acl) a
                    WHERE a.grantee OPERATOR(pg_catalog.=) v_owner AND a.grantor OPERATOR(pg_catalog.=) v_owner) THEN
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %I', v_new, pg_catalog.pg_get_userbyid(v_owner));
    END IF;

    -- A GRANT run by an extension script is recorded as the extension's initial privilege
    -- (pg_init_privs), and pg_dump dumps only the grants that differ from those: left so, the
    -- users' grants would vanish from their dumps. The initial privileges are what a fresh
    -- install records, the users' grants stay theirs.
    UPDATE pg_catalog.pg_init_privs i SET initprivs = v_initial
     WHERE i.objoid OPERATOR(pg_catalog.=) v_new::pg_catalog.oid
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND i.objsubid OPERATOR(pg_catalog.=) 0;
END
$carry_grants$;

DROP FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text);

-- ---------------------------------------------------------------------------------------
-- 0.7.0 -> 0.8.0
-- ---------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------
-- The distribution column (docs/scaleout.md). The work tables have carried partition_number
-- since 0.3.0; the other tables of a message get it here. Nullable, and no default: adding it
-- rewrites nothing, and a single server keeps its keys (message_id, consumer) and its speed.
-- ---------------------------------------------------------------------------------------
ALTER TABLE whizbang.wh_message_deduplication ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_inbox ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_inbox_streams ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_inbox_preleased ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_outbox ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_outbox_streams ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_outbox_preleased ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_dead_letters ADD COLUMN partition_number integer;

COMMENT ON COLUMN whizbang.wh_message_deduplication.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the work partition of the message.';
COMMENT ON COLUMN whizbang.wh_inbox.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the partition of the message''s work row.';
COMMENT ON COLUMN whizbang.wh_inbox_streams.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the stream''s partition.';
COMMENT ON COLUMN whizbang.wh_inbox_preleased.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the partition of the message''s work row.';
COMMENT ON COLUMN whizbang.wh_outbox.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the partition of the message''s work row.';
COMMENT ON COLUMN whizbang.wh_outbox_streams.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the stream''s partition.';
COMMENT ON COLUMN whizbang.wh_outbox_preleased.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the partition of the message''s work row.';
COMMENT ON COLUMN whizbang.wh_dead_letters.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the work partition of the message.';

-- ---------------------------------------------------------------------------------------
-- Routed calls (docs/scaleout.md "How a call reaches its node"). On a distributed install a
-- whizbang function sends each part of its work to the node that holds the part's shard as one
-- router query on wh_partitions (one row per partition, colocated with the work tables), which
-- calls the same function there with its first argument passed through _on_shard(). Empty on
-- a single server.
-- ---------------------------------------------------------------------------------------
CREATE TABLE whizbang.wh_partitions (
    partition_number integer NOT NULL,
    CONSTRAINT wh_partitions_pkey PRIMARY KEY (partition_number)
);
COMMENT ON TABLE whizbang.wh_partitions IS
    'Routing anchor of a distributed install (0.8.0, docs/scaleout.md): one row per work partition, filled by whizbang.distribute(); empty on a single server.';
COMMENT ON COLUMN whizbang.wh_partitions.partition_number IS
    'A work partition, 0 to 9999; the Citus distribution column.';

CREATE FUNCTION whizbang._on_shard(p_partition integer, p_value anyelement, p_token bigint DEFAULT NULL,
                                   p_node boolean DEFAULT false, p_partitions integer[] DEFAULT NULL)
RETURNS anyelement
    AS 'MODULE_PATHNAME', 'wb_on_shard' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[]) IS
    'internal: the first argument of a routed call on a distributed install (0.8.0): returns p_value; the whizbang function it is passed to runs next to the local shards of p_partition (with p_node: splits its work among the shards of this node, p_partitions: those of the rows it names) and hands out lease token p_token.';
REVOKE ALL ON FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[]) FROM PUBLIC;
ALTER FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[]) SET search_path = pg_catalog, pg_temp;

-- ---------------------------------------------------------------------------------------
-- The settings trigger: an INSERT of a known key updates that key in the trigger's own table,
-- which on a distributed install is a node's placement of the reference table (a statement on
-- wh_settings itself would be a distributed query inside one). Unchanged on a single server.
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION whizbang._settings_validate() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d whizbang.wh_setting_defaults%ROWTYPE;
    v bigint;
    updated bigint;
BEGIN
    SELECT * INTO d FROM whizbang.wh_setting_defaults WHERE setting_key = NEW.setting_key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown whizbang setting "%"', NEW.setting_key
            USING ERRCODE = 'undefined_object',
                  HINT = 'SELECT setting_key FROM whizbang.settings lists the known settings.';
    END IF;
    IF NEW.setting_value IS NULL THEN
        RAISE EXCEPTION 'setting "%" must not be null', NEW.setting_key
            USING ERRCODE = 'not_null_violation', HINT = 'Delete the row to go back to the default.';
    END IF;
    IF NEW.value_type IS NOT NULL AND NEW.value_type <> d.value_type THEN
        RAISE EXCEPTION 'setting "%" has type %, not %', NEW.setting_key, d.value_type, NEW.value_type
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    NEW.value_type := d.value_type;
    NEW.description := coalesce(NEW.description, d.description);

    IF d.value_type = 'integer' THEN
        IF NEW.setting_value !~ '^\s*[+-]?[0-9]{1,18}\s*$' THEN
            RAISE EXCEPTION 'invalid value for setting "%": "%" is not an integer', NEW.setting_key, NEW.setting_value
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v := NEW.setting_value::bigint;
        IF v < d.min_value OR v > d.max_value THEN
            RAISE EXCEPTION 'invalid value for setting "%": % is outside [%, %]', NEW.setting_key, v, d.min_value, d.max_value
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        NEW.setting_value := v::text;
    ELSIF d.value_type = 'boolean' THEN
        IF lower(btrim(NEW.setting_value)) NOT IN ('true', 'false', 't', 'f', 'on', 'off', 'yes', 'no', '1', '0') THEN
            RAISE EXCEPTION 'invalid value for setting "%": "%" is not a boolean', NEW.setting_key, NEW.setting_value
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        NEW.setting_value := NEW.setting_value::boolean::text;
    ELSIF d.allowed_values IS NOT NULL AND NOT (NEW.setting_value = ANY (d.allowed_values)) THEN
        RAISE EXCEPTION 'invalid value for setting "%": "%"', NEW.setting_key, NEW.setting_value
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Allowed values: %s.', array_to_string(d.allowed_values, ', '));
    END IF;

    IF TG_OP = 'INSERT' THEN
        -- The trigger's own table: wh_settings on a single server, the node's placement of it on a
        -- distributed install (a reference table), which must not start a distributed query.
        EXECUTE format('UPDATE %I.%I SET setting_value = $1, value_type = $2, description = $3 WHERE setting_key = $4',
                       TG_TABLE_SCHEMA, TG_TABLE_NAME)
            USING NEW.setting_value, NEW.value_type, NEW.description, NEW.setting_key;
        GET DIAGNOSTICS updated = ROW_COUNT;
        IF updated > 0 THEN
            RETURN NULL;
        END IF;
    END IF;
    RETURN NEW;
END
$$;

-- ---------------------------------------------------------------------------------------
-- _distribution_keys(): one node's share of distribute(). Fills the distribution column of the
-- rows there, makes it NOT NULL and part of every primary key, and drops the triggers Citus
-- would refuse (the shared-memory lease store's: a distributed install keeps leases in the
-- rows). Run on the coordinator and, by distribute(), on every worker, whose whizbang tables
-- are the shells Citus keeps for an extension's tables and must have the coordinator's keys.
-- Idempotent: a key that already includes partition_number is left alone.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang._distribution_keys() RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- The partition count of every distributed call (DESIGN §3.4's default).
    c CONSTANT integer := 10000;
    t record;
BEGIN
    -- A message's tables take its work row's partition (computed at store with the caller's
    -- p_partition_count); what has no work row left takes partition_of(stream or id, 10000).
    UPDATE whizbang.wh_inbox i SET partition_number = w.partition_number
      FROM whizbang.wh_inbox_work w
     WHERE i.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) i.message_id
       AND w.consumer OPERATOR(pg_catalog.=) i.consumer;
    UPDATE whizbang.wh_inbox SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox o SET partition_number = w.partition_number
      FROM whizbang.wh_outbox_work w
     WHERE o.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) o.message_id;
    UPDATE whizbang.wh_outbox SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_inbox_preleased p SET partition_number = w.partition_number
      FROM whizbang.wh_inbox_work w
     WHERE p.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) p.message_id
       AND w.consumer OPERATOR(pg_catalog.=) p.consumer;
    UPDATE whizbang.wh_inbox_preleased SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox_preleased p SET partition_number = w.partition_number
      FROM whizbang.wh_outbox_work w
     WHERE p.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) p.message_id;
    UPDATE whizbang.wh_outbox_preleased SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    -- A stream's rows and its counter: the stream's partition (the work rows' value where the
    -- stream has rows, so that a count other than 10000 still keeps them together).
    UPDATE whizbang.wh_inbox_streams s SET partition_number = w.partition_number
      FROM (SELECT DISTINCT ON (consumer, stream_id) consumer, stream_id, partition_number
              FROM whizbang.wh_inbox_work WHERE stream_id IS NOT NULL) w
     WHERE s.partition_number IS NULL AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id
       AND w.consumer OPERATOR(pg_catalog.=) s.consumer;
    UPDATE whizbang.wh_inbox_streams SET partition_number = whizbang.partition_of(stream_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox_streams s SET partition_number = w.partition_number
      FROM (SELECT DISTINCT ON (stream_id) stream_id, partition_number
              FROM whizbang.wh_outbox_work WHERE stream_id IS NOT NULL) w
     WHERE s.partition_number IS NULL AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id;
    UPDATE whizbang.wh_outbox_streams SET partition_number = whizbang.partition_of(stream_id, c)
     WHERE partition_number IS NULL;
    -- Dedup records: the inbox message's partition while it is there; a record whose message
    -- is gone (completed) does not know its stream and takes its id's partition (docs/scaleout.md).
    UPDATE whizbang.wh_message_deduplication d SET partition_number = i.partition_number
      FROM whizbang.wh_inbox i
     WHERE d.partition_number IS NULL AND i.message_id OPERATOR(pg_catalog.=) d.message_id
       AND i.consumer OPERATOR(pg_catalog.=) d.consumer;
    UPDATE whizbang.wh_message_deduplication SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_dead_letters SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), c)
     WHERE partition_number IS NULL;

    FOR t IN SELECT * FROM (VALUES
        ('wh_message_deduplication', 'message_id, consumer, partition_number'),
        ('wh_inbox',                 'message_id, consumer, partition_number'),
        ('wh_inbox_work',            'message_id, consumer, partition_number'),
        ('wh_inbox_streams',         'stream_id, consumer, partition_number'),
        ('wh_inbox_preleased',       'instance_id, message_id, consumer, partition_number'),
        ('wh_outbox',                'message_id, partition_number'),
        ('wh_outbox_work',           'message_id, consumer, partition_number'),
        ('wh_outbox_streams',        'stream_id, consumer, partition_number'),
        ('wh_outbox_preleased',      'instance_id, message_id, consumer, partition_number'),
        ('wh_dead_letters',          'dead_letter_id, partition_number')) AS k(tab, cols)
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE whizbang.%I ALTER COLUMN partition_number SET NOT NULL', t.tab);
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_constraint k
                        WHERE k.conrelid OPERATOR(pg_catalog.=) pg_catalog.format('whizbang.%I', t.tab)::pg_catalog.regclass
                          AND k.contype OPERATOR(pg_catalog.=) 'p'
                          AND k.conkey OPERATOR(pg_catalog.@>) ARRAY[(
                              SELECT a.attnum FROM pg_catalog.pg_attribute a
                               WHERE a.attrelid OPERATOR(pg_catalog.=) k.conrelid
                                 AND a.attname OPERATOR(pg_catalog.=) 'partition_number')]) THEN
            EXECUTE pg_catalog.format('ALTER TABLE whizbang.%1$I DROP CONSTRAINT %2$I, ADD CONSTRAINT %2$I PRIMARY KEY (%3$s)',
                                      t.tab, t.tab || '_pkey', t.cols);
        END IF;
    END LOOP;

    DROP TRIGGER IF EXISTS wh_inbox_work_lease_end ON whizbang.wh_inbox_work;
    DROP TRIGGER IF EXISTS wh_inbox_work_lease_truncate ON whizbang.wh_inbox_work;
    DROP TRIGGER IF EXISTS wh_outbox_work_lease_end ON whizbang.wh_outbox_work;
    DROP TRIGGER IF EXISTS wh_outbox_work_lease_truncate ON whizbang.wh_outbox_work;
END
$$;

COMMENT ON FUNCTION whizbang._distribution_keys() IS
    'internal: one node''s share of whizbang.distribute() (0.8.0): fills partition_number, makes it NOT NULL and part of every primary key.';

-- ---------------------------------------------------------------------------------------
-- distribute(p_shard_count): hands whizbang's tables to Citus (DESIGN §3.9, docs/scaleout.md).
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang.distribute(p_shard_count integer DEFAULT 32) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    failed text;
    tab text;
BEGIN
    IF p_shard_count IS NULL THEN
        RAISE EXCEPTION 'p_shard_count must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF p_shard_count < 1 OR p_shard_count > 64000 THEN
        RAISE EXCEPTION 'p_shard_count must be between 1 and 64000, not %', p_shard_count USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RAISE EXCEPTION 'whizbang.distribute() needs the citus extension in this database'
            USING ERRCODE = '55000', HINT = 'docs/scaleout.md shows how to set up a Citus cluster.';
    END IF;
    IF NOT pg_catalog.citus_is_coordinator() THEN
        RAISE EXCEPTION 'whizbang.distribute() runs on the Citus coordinator' USING ERRCODE = '55000';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
                WHERE logicalrelid OPERATOR(pg_catalog.=) 'whizbang.wh_inbox_work'::pg_catalog.regclass) THEN
        RAISE NOTICE 'whizbang is distributed already';
        RETURN;
    END IF;

    PERFORM whizbang._distribution_keys();
    -- The workers' whizbang tables (Citus keeps them as the shells of the extension's tables)
    -- must have the same keys before Citus creates the shards.
    SELECT pg_catalog.string_agg(pg_catalog.format('%s:%s: %s', r.nodename, r.nodeport, r.result), '; ')
      INTO failed
      FROM pg_catalog.run_command_on_workers('SELECT whizbang._distribution_keys()') r
     WHERE NOT r.success;
    IF failed IS NOT NULL THEN
        RAISE EXCEPTION 'whizbang.distribute(): a worker could not take the distribution keys: %', failed
            USING ERRCODE = '55000', HINT = 'Every node needs whizbang at the coordinator''s version.';
    END IF;

    -- The settings' validation and cache triggers go with the reference tables (Citus asks
    -- for this setting to keep triggers on a distributed table).
    PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    PERFORM pg_catalog.create_reference_table('whizbang.wh_setting_defaults');
    -- The rows were validated when written; copying them to the placements must not run the
    -- validation again (its INSERT-of-a-known-key path writes wh_settings from inside the copy).
    ALTER TABLE whizbang.wh_settings DISABLE TRIGGER wh_settings_validate;
    PERFORM pg_catalog.create_reference_table('whizbang.wh_settings');
    ALTER TABLE whizbang.wh_settings ENABLE TRIGGER wh_settings_validate;
    PERFORM pg_catalog.create_reference_table('whizbang.wh_idempotency_policies');

    PERFORM pg_catalog.create_distributed_table('whizbang.wh_inbox_work', 'partition_number',
                                                shard_count => p_shard_count, colocate_with => 'none');
    INSERT INTO whizbang.wh_partitions (partition_number)
    SELECT p FROM pg_catalog.generate_series(0, 9999) AS p ON CONFLICT DO NOTHING;
    FOREACH tab IN ARRAY ARRAY['wh_partitions', 'wh_inbox', 'wh_inbox_streams', 'wh_inbox_preleased', 'wh_outbox_work',
                               'wh_outbox', 'wh_outbox_streams', 'wh_outbox_preleased',
                               'wh_message_deduplication', 'wh_dead_letters'] LOOP
        PERFORM pg_catalog.create_distributed_table(pg_catalog.format('whizbang.%I', tab), 'partition_number',
                                                    colocate_with => 'whizbang.wh_inbox_work');
    END LOOP;
    -- Idempotency keys go by a hash of their scope (Citus hashes the text): one scope, one node.
    PERFORM pg_catalog.create_distributed_table('whizbang.wh_idempotency_keys', 'scope',
                                                shard_count => p_shard_count, colocate_with => 'none');

    -- The coordinator's own copies are empty shells from now on.
    FOREACH tab IN ARRAY ARRAY['wh_setting_defaults', 'wh_settings', 'wh_idempotency_policies', 'wh_inbox_work',
                               'wh_inbox', 'wh_inbox_streams', 'wh_inbox_preleased', 'wh_outbox_work', 'wh_outbox',
                               'wh_outbox_streams', 'wh_outbox_preleased', 'wh_message_deduplication',
                               'wh_dead_letters', 'wh_idempotency_keys', 'wh_partitions'] LOOP
        PERFORM pg_catalog.truncate_local_data_after_distributing_table(pg_catalog.format('whizbang.%I', tab));
    END LOOP;
END
$$;

COMMENT ON FUNCTION whizbang.distribute(integer) IS
    'Scale-out on Citus (0.8.0, docs/scaleout.md): on the coordinator, distributes whizbang''s tables by partition_number (idempotency keys by scope) with p_shard_count shards, settings and policies as reference tables. Errors: 22004 NULL p_shard_count; 22023 p_shard_count outside 1..64000; 55000 no citus extension, not the coordinator, or a worker without whizbang.';

REVOKE ALL ON FUNCTION whizbang._distribution_keys() FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.distribute(integer) FROM PUBLIC;

-- ---------------------------------------------------------------------------------------
-- 0.8.0 -> 0.9.0
-- ---------------------------------------------------------------------------------------

COMMENT ON FUNCTION whizbang.lease_store() IS
    'The lease store this server runs: shared_memory (whizbang in shared_preload_libraries: a claim writes '
    'nothing) or table (leases in the work rows, as before 0.6.0). Chosen at server start. In both a lease '
    'changes with its transaction: a rollback (also to a savepoint, also ROLLBACK PREPARED) restores the '
    'leases before it, and a prepared completion keeps its row from every claim until it is settled. No errors.';

COMMENT ON VIEW whizbang.leases IS
    'Every lease held on inbox and outbox work, in whichever lease store runs (whizbang.lease_store()): holder '
    'instance, fencing token, expiry, deliveries. A lease whose expiry has passed is listed until the message is '
    'handed out again or finished (its token still completes it); live ones are WHERE lease_expiry > now(). '
    'A lease another transaction is changing is listed as it was until that transaction ends (a prepared one '
    'included). Reading it needs SELECT on the view and on the work tables, and EXECUTE on whizbang._leases().';

-- ---------------------------------------------------------------------------------------
-- 0.9.0 -> 0.10.0
-- ---------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------
-- 0.10.0 -> 0.11.0
-- ---------------------------------------------------------------------------------------

-- What each capability needs: docs/security.md, docs/inbox.md and docs/scaleout.md name the same
-- grants. kind: routine (every overload of the name), table (also views), sequence.
CREATE FUNCTION whizbang._capability_grants()
RETURNS TABLE (capability text, kind text, object_name text, privileges text)
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.capability, c.kind, c.object_name, c.privileges FROM (VALUES
        -- grant_worker
        ('dedup', 'routine', 'dedup_insert', 'EXECUTE'),
        ('dedup', 'routine', 'dedup_insert_many', 'EXECUTE'),
        ('dedup', 'routine', 'fingerprint', 'EXECUTE'),
        ('dedup', 'routine', 'event_uuid', 'EXECUTE'),
        ('dedup', 'routine', 'uuid_v7', 'EXECUTE'),
        ('dedup', 'routine', 'partition_of', 'EXECUTE'),
        ('dedup', 'routine', 'version', 'EXECUTE'),
        ('dedup', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('dedup', 'table', 'settings', 'SELECT'),
        ('idempotency', 'routine', 'idempotency_begin', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_complete', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_release', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_policy', 'EXECUTE'),
        ('idempotency', 'routine', 'fingerprint', 'EXECUTE'),
        ('idempotency', 'table', 'wh_idempotency_keys', 'SELECT, INSERT, UPDATE, DELETE'),
        ('idempotency', 'sequence', 'wh_idempotency_token_seq', 'USAGE'),
        ('idempotency', 'table', 'wh_idempotency_policies', 'SELECT'),
        ('idempotency', 'table', 'settings', 'SELECT'),
        ('inbox', 'routine', 'store_inbox_messages', 'EXECUTE'),
        ('inbox', 'routine', 'inbox_receive', 'EXECUTE'),
        ('inbox', 'routine', 'claim_work', 'EXECUTE'),
        ('inbox', 'routine', 'complete_work', 'EXECUTE'),
        ('inbox', 'routine', 'fail_work', 'EXECUTE'),
        ('inbox', 'routine', 'renew_leases', 'EXECUTE'),
        ('inbox', 'routine', 'release_work', 'EXECUTE'),
        ('inbox', 'routine', 'partition_of', 'EXECUTE'),
        ('inbox', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox', 'SELECT, INSERT, DELETE'),
        ('inbox', 'table', 'wh_inbox_work', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('inbox', 'table', 'wh_inbox_preleased', 'SELECT, INSERT, DELETE'),
        ('inbox', 'table', 'wh_dead_letters', 'INSERT'),
        ('inbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('inbox', 'table', 'settings', 'SELECT'),
        ('outbox', 'routine', 'store_outbox_messages', 'EXECUTE'),
        ('outbox', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('outbox', 'table', 'wh_outbox_work', 'SELECT, INSERT'),
        ('outbox', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('outbox', 'table', 'wh_outbox_preleased', 'INSERT'),
        ('outbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('outbox', 'table', 'settings', 'SELECT'),
        ('relay', 'routine', 'claim_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_work', 'EXECUTE'),
        ('relay', 'routine', 'fail_work', 'EXECUTE'),
        ('relay', 'routine', 'renew_leases', 'EXECUTE'),
        ('relay', 'routine', 'release_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_outbox_published', 'EXECUTE'),
        ('relay', 'routine', 'partition_of', 'EXECUTE'),
        ('relay', 'table', 'wh_outbox', 'SELECT, DELETE'),
        ('relay', 'table', 'wh_outbox_work', 'SELECT, UPDATE, DELETE'),
        ('relay', 'table', 'wh_outbox_preleased', 'SELECT, DELETE'),
        ('relay', 'table', 'wh_dead_letters', 'INSERT'),
        ('relay', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('relay', 'table', 'settings', 'SELECT'),
        -- grant_admin
        ('dead_letters', 'routine', 'retry_dead_letters', 'EXECUTE'),
        ('dead_letters', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('dead_letters', 'table', 'wh_inbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_inbox_work', 'INSERT'),
        ('dead_letters', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('dead_letters', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_outbox_work', 'INSERT'),
        ('dead_letters', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('settings', 'table', 'wh_settings', 'SELECT, INSERT, UPDATE, DELETE'),
        ('settings', 'table', 'wh_setting_defaults', 'SELECT'),
        ('settings', 'table', 'settings', 'SELECT'),
        ('policies', 'table', 'wh_idempotency_policies', 'SELECT, INSERT, UPDATE, DELETE'),
        ('maintenance', 'routine', 'perform_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'run_maintenance', 'EXECUTE'),
        ('maintenance', 'table', 'settings', 'SELECT'),
        ('maintenance', 'table', 'wh_inbox', 'SELECT, DELETE'),
        ('maintenance', 'table', 'wh_outbox', 'SELECT, DELETE'),
        ('maintenance', 'table', 'wh_message_deduplication', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_idempotency_keys', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_work', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_work', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_streams', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_streams', 'SELECT, UPDATE, DELETE'),
        ('monitor', 'routine', 'stats', 'EXECUTE'),
        ('monitor', 'routine', 'queues', 'EXECUTE'),
        ('monitor', 'routine', '_leases', 'EXECUTE'),
        ('monitor', 'routine', 'check', 'EXECUTE'),
        ('monitor', 'table', 'stats', 'SELECT'),
        ('monitor', 'table', 'queues', 'SELECT'),
        ('monitor', 'table', 'leases', 'SELECT'),
        ('monitor', 'table', 'wh_inbox', 'SELECT'),
        ('monitor', 'table', 'wh_inbox_work', 'SELECT'),
        ('monitor', 'table', 'wh_outbox', 'SELECT'),
        ('monitor', 'table', 'wh_outbox_work', 'SELECT'),
        ('monitor', 'table', 'wh_dead_letters', 'SELECT'),
        ('monitor', 'table', 'wh_message_deduplication', 'SELECT'),
        ('monitor', 'table', 'wh_idempotency_keys', 'SELECT'),
        ('monitor', 'table', 'wh_partitions', 'SELECT')
    ) AS c(capability, kind, object_name, privileges)
$$;
REVOKE ALL ON FUNCTION whizbang._capability_grants() FROM PUBLIC;
COMMENT ON FUNCTION whizbang._capability_grants() IS
    'internal: the grants of each capability that whizbang.grant_worker and whizbang.grant_admin apply (docs/security.md).';

-- Applies the grants of `p_capabilities` to `p_role`. Runs as the caller, who must be able to
-- grant them (the extension's owner, a superuser). One statement: all of it or, on an error,
-- nothing. On a Citus coordinator, Citus propagates the table grants to the nodes; whizbang's
-- routed code runs there as the extension's owner and needs none of the role's.
CREATE FUNCTION whizbang._grant_capabilities(p_role regrole, p_capabilities text[], p_allowed text[])
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_unknown text[];
    v_grant record;
    v_routine regprocedure;
    v_sql text;
BEGIN
    IF p_role IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'p_role must not be NULL';
    END IF;
    IF p_capabilities IS NULL OR pg_catalog.cardinality(p_capabilities) OPERATOR(pg_catalog.=) 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'p_capabilities must name at least one capability',
            HINT = 'One or more of: ' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(p_allowed, ', ');
    END IF;
    SELECT pg_catalog.array_agg(DISTINCT c) INTO v_unknown
      FROM pg_catalog.unnest(p_capabilities) AS u(c)
     WHERE c IS NULL OR NOT (c OPERATOR(pg_catalog.=) ANY (p_allowed));
    IF v_unknown IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('unknown capability %s', pg_catalog.array_to_string(v_unknown, ', ', 'NULL')),
            HINT = 'One or more of: ' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(p_allowed, ', ');
    END IF;
    v_sql := pg_catalog.format('GRANT USAGE ON SCHEMA whizbang TO %s', p_role);
    EXECUTE v_sql;
    RETURN NEXT v_sql;
    FOR v_grant IN
        SELECT g.kind, g.object_name, g.privileges
          FROM whizbang._capability_grants() g
         WHERE g.capability OPERATOR(pg_catalog.=) ANY (p_capabilities)
         GROUP BY g.kind, g.object_name, g.privileges
         ORDER BY g.kind, g.object_name, g.privileges
    LOOP
        IF v_grant.kind OPERATOR(pg_catalog.=) 'routine' THEN
            FOR v_routine IN
                SELECT p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace OPERATOR(pg_catalog.=) 'whizbang'::pg_catalog.regnamespace
                   AND p.proname OPERATOR(pg_catalog.=) v_grant.object_name
                 ORDER BY p.oid
            LOOP
                v_sql := pg_catalog.format('GRANT EXECUTE ON ROUTINE %s TO %s', v_routine, p_role);
                EXECUTE v_sql;
                RETURN NEXT v_sql;
            END LOOP;
        ELSE
            v_sql := pg_catalog.format('GRANT %s ON %s whizbang.%I TO %s', v_grant.privileges,
                                       CASE v_grant.kind WHEN 'sequence' THEN 'SEQUENCE' ELSE 'TABLE' END,
                                       v_grant.object_name, p_role);
            EXECUTE v_sql;
            RETURN NEXT v_sql;
        END IF;
    END LOOP;
END;
$$;
REVOKE ALL ON FUNCTION whizbang._grant_capabilities(regrole, text[], text[]) FROM PUBLIC;
COMMENT ON FUNCTION whizbang._grant_capabilities(regrole, text[], text[]) IS
    'internal: applies the grants of p_capabilities (each one of p_allowed) to p_role for grant_worker and grant_admin; returns the statements.';

CREATE FUNCTION whizbang.grant_worker(p_role regrole,
    p_capabilities text[] DEFAULT ARRAY['dedup', 'idempotency', 'inbox', 'outbox', 'relay'])
RETURNS SETOF text
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT whizbang._grant_capabilities(p_role, p_capabilities,
                                        ARRAY['dedup', 'idempotency', 'inbox', 'outbox', 'relay'])
$$;
REVOKE ALL ON FUNCTION whizbang.grant_worker(regrole, text[]) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.grant_worker(regrole, text[]) IS
    'Grants p_role what the application capabilities need (dedup, idempotency, inbox, outbox, relay; '
    'default: all) and returns the GRANT statements it ran. The caller must be able to grant them. '
    'Errors: 22004 null p_role or no capability, 22023 unknown capability, 42501 the caller may not grant.';

CREATE FUNCTION whizbang.grant_admin(p_role regrole,
    p_capabilities text[] DEFAULT ARRAY['dead_letters', 'settings', 'policies', 'maintenance', 'monitor'])
RETURNS SETOF text
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT whizbang._grant_capabilities(p_role, p_capabilities,
                                        ARRAY['dead_letters', 'settings', 'policies', 'maintenance', 'monitor'])
$$;
REVOKE ALL ON FUNCTION whizbang.grant_admin(regrole, text[]) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.grant_admin(regrole, text[]) IS
    'Grants p_role what the operator capabilities need (dead_letters, settings, policies, maintenance, '
    'monitor; default: all) and returns the GRANT statements it ran. The caller must be able to grant them. '
    'Errors: 22004 null p_role or no capability, 22023 unknown capability, 42501 the caller may not grant.';

-- The install's consistency as whizbang sees it: one row per item, ok or not, and why.
CREATE FUNCTION whizbang.check()
RETURNS TABLE (item text, ok boolean, detail text)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_distributed boolean := false;
    v_have integer[];
    v_missing integer[];
    v_missing_count integer;
    v_extra bigint;
    v_owner oid;
    v_holders text[];
    v_groups bigint;
BEGIN
    SELECT e.extowner INTO v_owner FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'whizbang';
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox_work''::pg_catalog.regclass)'
           INTO v_distributed;
    END IF;

    item := 'distributed'; ok := true;
    detail := CASE WHEN v_distributed THEN 'whizbang''s tables are Citus tables (docs/scaleout.md)'
                   ELSE 'a single server' END;
    RETURN NEXT;

    -- Every privilege that changes the routing state (reading wh_partitions is harmless: a
    -- monitoring role's check() does), held by a role that is not the extension's owner.
    SELECT pg_catalog.array_agg(DISTINCT h ORDER BY h) INTO v_holders FROM (
        SELECT pg_catalog.format('%s on wh_partitions: %s',
                   CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
                   a.privilege_type) AS h
          FROM pg_catalog.pg_class c, LATERAL pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) 'whizbang.wh_partitions'::pg_catalog.regclass
           AND a.grantee OPERATOR(pg_catalog.<>) v_owner
           AND a.privilege_type OPERATOR(pg_catalog.<>) 'SELECT'
        UNION ALL
        SELECT pg_catalog.format('%s on %s: EXECUTE',
                   CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
                   p.oid::pg_catalog.regprocedure)
          FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
         WHERE p.pronamespace OPERATOR(pg_catalog.=) 'whizbang'::pg_catalog.regnamespace
           AND p.proname OPERATOR(pg_catalog.=) '_on_shard'
           AND a.grantee OPERATOR(pg_catalog.<>) v_owner) s;
    item := 'routing privileges';
    ok := v_holders IS NULL;
    detail := CASE WHEN ok THEN 'only the extension''s owner may change routing rows or call _on_shard'
                   ELSE 'revoke: ' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(v_holders, '; ') END;
    RETURN NEXT;

    IF v_distributed THEN
        SELECT pg_catalog.array_agg(p.partition_number) INTO v_have FROM whizbang.wh_partitions p;
        SELECT pg_catalog.count(*)::integer,
               (pg_catalog.array_agg(g.n ORDER BY g.n))[1:20]
          INTO v_missing_count, v_missing
          FROM pg_catalog.generate_series(0, 9999) AS g(n)
          LEFT JOIN pg_catalog.unnest(v_have) AS h(p) ON h.p OPERATOR(pg_catalog.=) g.n
         WHERE h.p IS NULL;
        SELECT pg_catalog.count(*) INTO v_extra
          FROM pg_catalog.unnest(v_have) AS h(p)
         WHERE h.p IS NULL OR h.p OPERATOR(pg_catalog.<) 0 OR h.p OPERATOR(pg_catalog.>) 9999;
        item := 'routing rows';
        ok := v_missing_count OPERATOR(pg_catalog.=) 0 AND v_extra OPERATOR(pg_catalog.=) 0;
        detail := CASE WHEN ok THEN '10000 partitions, each with its routing row'
                       ELSE pg_catalog.format('%s of the partitions 0..9999 have no routing row (first: %s), '
                                              '%s rows are outside 0..9999; restore with INSERT INTO '
                                              'whizbang.wh_partitions SELECT g FROM pg_catalog.generate_series(0, 9999) g '
                                              'ON CONFLICT DO NOTHING',
                                              v_missing_count, pg_catalog.array_to_string(v_missing, ', '), v_extra) END;
        RETURN NEXT;

        EXECUTE 'SELECT pg_catalog.count(DISTINCT p.colocationid) FROM pg_catalog.pg_dist_partition p'
                ' JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.logicalrelid'
                ' WHERE c.relnamespace OPERATOR(pg_catalog.=) ''whizbang''::pg_catalog.regnamespace'
                '   AND p.partmethod OPERATOR(pg_catalog.=) ''h'''
                '   AND c.relname OPERATOR(pg_catalog.<>) ''wh_idempotency_keys'''
           INTO v_groups;
        item := 'colocation';
        ok := v_groups OPERATOR(pg_catalog.=) 1;
        detail := pg_catalog.format('the distributed work tables are in %s colocation group(s); routing needs 1', v_groups);
        RETURN NEXT;
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION whizbang.check() FROM PUBLIC;
COMMENT ON FUNCTION whizbang.check() IS
    'The install''s consistency, one row per item (distributed, routing privileges, and on a distributed '
    'install routing rows and colocation): ok, and what to do where it is not. '
    'Errors: 42501 a role that may not read wh_partitions (on a distributed install).';

-- Each C function's routing policy on a distributed install, as the library declares it.
CREATE FUNCTION whizbang._routing_policies()
RETURNS TABLE (symbol text, policy text)
    AS 'MODULE_PATHNAME', 'wb_routing_policies' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION whizbang._routing_policies() IS
    'internal: the routing policy the library declares for each SQL-callable C function (WB_ROUTED_FUNCTION: local, by_message, by_partition, by_claimed_id, by_lookup, every_node, citus_sql), for the test that every one has one.';
REVOKE ALL ON FUNCTION whizbang._routing_policies() FROM PUBLIC;
ALTER FUNCTION whizbang._routing_policies() SET search_path = pg_catalog, pg_temp;

-- _on_shard gains p_shard_anchors: a fan-out's node call names the shards the coordinator routed
-- to the node, which checks each under its lock (docs/scaleout.md "How a call reaches its node").
-- Dropping the old signature also takes back any EXECUTE grant on it: 0.8.0 to 0.10.0 told
-- application roles to hold one, which let them choose a node's lease token.
DROP FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[]);
CREATE FUNCTION whizbang._on_shard(p_partition integer, p_value anyelement, p_token bigint DEFAULT NULL,
                                   p_node boolean DEFAULT false, p_partitions integer[] DEFAULT NULL,
                                   p_shard_anchors integer[] DEFAULT NULL)
RETURNS anyelement
    AS 'MODULE_PATHNAME', 'wb_on_shard' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[], integer[]) IS
    'internal: the first argument of a routed call on a distributed install (0.8.0): returns p_value; the whizbang function it is passed to runs next to the local shards of p_partition (with p_node: splits its work among the shards of this node, p_partitions: those of the rows it names, p_shard_anchors (0.11.0): the shards a fan-out visits here, one partition each) and hands out lease token p_token. Only the extension''s owner calls it: routed calls run on the nodes as the owner.';
REVOKE ALL ON FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[], integer[]) FROM PUBLIC;
ALTER FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[], integer[]) SET search_path = pg_catalog, pg_temp;

-- 0.8.0 to 0.10.0 told application roles to hold SELECT, DELETE on wh_partitions (the no-op
-- DELETE that buys two-phase commit). Routed code runs as the extension's owner since 0.11.0:
-- the grant only lets an application break routing. Taken back.
DO $$
DECLARE
    v_owner oid;
    v_grantee record;
BEGIN
    SELECT e.extowner INTO v_owner FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'whizbang';
    FOR v_grantee IN
        SELECT DISTINCT a.grantee
          FROM pg_catalog.pg_class c, LATERAL pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) 'whizbang.wh_partitions'::pg_catalog.regclass
           AND a.grantee OPERATOR(pg_catalog.<>) v_owner AND a.grantee OPERATOR(pg_catalog.<>) 0
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON whizbang.wh_partitions FROM %s', v_grantee.grantee::pg_catalog.regrole);
    END LOOP;
END;
$$;

-- run_maintenance on a distributed install commits after every batch on every node: the
-- coordinator calls this on one shard at a time, one batch of each unfinished task per call and
-- per transaction, handing back each task's position (p_state, 7 numbers per task in
-- perform_maintenance's task order; NULL: a fresh run).
CREATE FUNCTION whizbang._maintenance_batch(p_now timestamptz, p_batch_size integer, p_state bigint[])
RETURNS TABLE (task_name text, rows_affected bigint, duration_ms double precision, status text, state bigint[])
    AS 'MODULE_PATHNAME', 'wb_maintenance_batch' LANGUAGE C VOLATILE ROWS 4;
COMMENT ON FUNCTION whizbang._maintenance_batch(timestamptz, integer, bigint[]) IS
    'internal: (0.11.0) one batch of each unfinished maintenance task on one shard, the part run_maintenance sends to a node of a distributed install; state: the task''s position for the next call, status: ok, skipped or more. Only the extension''s owner calls it.';
REVOKE ALL ON FUNCTION whizbang._maintenance_batch(timestamptz, integer, bigint[]) FROM PUBLIC;
ALTER FUNCTION whizbang._maintenance_batch(timestamptz, integer, bigint[]) SET search_path = pg_catalog, pg_temp;

-- distribute() moves the nodes' dead-letter id sequences past the ids of dead letters restored from a
-- dump (docs/scaleout.md "Backup: pg_dump and restore"); otherwise the same as 0.8.0's.
CREATE OR REPLACE FUNCTION whizbang.distribute(p_shard_count integer DEFAULT 32) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    failed text;
    tab text;
    v_dead_letter_seq bigint;
BEGIN
    IF p_shard_count IS NULL THEN
        RAISE EXCEPTION 'p_shard_count must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF p_shard_count < 1 OR p_shard_count > 64000 THEN
        RAISE EXCEPTION 'p_shard_count must be between 1 and 64000, not %', p_shard_count USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RAISE EXCEPTION 'whizbang.distribute() needs the citus extension in this database'
            USING ERRCODE = '55000', HINT = 'docs/scaleout.md shows how to set up a Citus cluster.';
    END IF;
    IF NOT pg_catalog.citus_is_coordinator() THEN
        RAISE EXCEPTION 'whizbang.distribute() runs on the Citus coordinator' USING ERRCODE = '55000';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
                WHERE logicalrelid OPERATOR(pg_catalog.=) 'whizbang.wh_inbox_work'::pg_catalog.regclass) THEN
        RAISE NOTICE 'whizbang is distributed already';
        RETURN;
    END IF;

    -- Dead letters restored from a dump of a cluster (docs/scaleout.md "Backup"): their ids came
    -- from that cluster's nodes, each made of the node's group id (the top 16 bits) and the node's
    -- own sequence, which no dump holds. A fresh cluster's nodes have the same group ids and start
    -- their sequences at 1, so they must start past the restored ids, or two dead letters share one.
    SELECT pg_catalog.max(d.dead_letter_id OPERATOR(pg_catalog.&) 281474976710655) INTO v_dead_letter_seq
      FROM whizbang.wh_dead_letters d;

    PERFORM whizbang._distribution_keys();
    -- The workers' whizbang tables (Citus keeps them as the shells of the extension's tables)
    -- must have the same keys before Citus creates the shards.
    SELECT pg_catalog.string_agg(pg_catalog.format('%s:%s: %s', r.nodename, r.nodeport, r.result), '; ')
      INTO failed
      FROM pg_catalog.run_command_on_workers('SELECT whizbang._distribution_keys()') r
     WHERE NOT r.success;
    IF failed IS NOT NULL THEN
        RAISE EXCEPTION 'whizbang.distribute(): a worker could not take the distribution keys: %', failed
            USING ERRCODE = '55000', HINT = 'Every node needs whizbang at the coordinator''s version.';
    END IF;

    -- The settings' validation and cache triggers go with the reference tables (Citus asks
    -- for this setting to keep triggers on a distributed table).
    PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    PERFORM pg_catalog.create_reference_table('whizbang.wh_setting_defaults');
    -- The rows were validated when written; copying them to the placements must not run the
    -- validation again (its INSERT-of-a-known-key path writes wh_settings from inside the copy).
    ALTER TABLE whizbang.wh_settings DISABLE TRIGGER wh_settings_validate;
    PERFORM pg_catalog.create_reference_table('whizbang.wh_settings');
    ALTER TABLE whizbang.wh_settings ENABLE TRIGGER wh_settings_validate;
    PERFORM pg_catalog.create_reference_table('whizbang.wh_idempotency_policies');

    PERFORM pg_catalog.create_distributed_table('whizbang.wh_inbox_work', 'partition_number',
                                                shard_count => p_shard_count, colocate_with => 'none');
    INSERT INTO whizbang.wh_partitions (partition_number)
    SELECT p FROM pg_catalog.generate_series(0, 9999) AS p ON CONFLICT DO NOTHING;
    FOREACH tab IN ARRAY ARRAY['wh_partitions', 'wh_inbox', 'wh_inbox_streams', 'wh_inbox_preleased', 'wh_outbox_work',
                               'wh_outbox', 'wh_outbox_streams', 'wh_outbox_preleased',
                               'wh_message_deduplication', 'wh_dead_letters'] LOOP
        PERFORM pg_catalog.create_distributed_table(pg_catalog.format('whizbang.%I', tab), 'partition_number',
                                                    colocate_with => 'whizbang.wh_inbox_work');
    END LOOP;
    -- Idempotency keys go by a hash of their scope (Citus hashes the text): one scope, one node.
    PERFORM pg_catalog.create_distributed_table('whizbang.wh_idempotency_keys', 'scope',
                                                shard_count => p_shard_count, colocate_with => 'none');

    -- The coordinator's own copies are empty shells from now on.
    FOREACH tab IN ARRAY ARRAY['wh_setting_defaults', 'wh_settings', 'wh_idempotency_policies', 'wh_inbox_work',
                               'wh_inbox', 'wh_inbox_streams', 'wh_inbox_preleased', 'wh_outbox_work', 'wh_outbox',
                               'wh_outbox_streams', 'wh_outbox_preleased', 'wh_message_deduplication',
                               'wh_dead_letters', 'wh_idempotency_keys', 'wh_partitions'] LOOP
        PERFORM pg_catalog.truncate_local_data_after_distributing_table(pg_catalog.format('whizbang.%I', tab));
    END LOOP;

    IF v_dead_letter_seq IS NOT NULL THEN
        SELECT pg_catalog.string_agg(pg_catalog.format('%s:%s: %s', r.nodename, r.nodeport, r.result), '; ')
          INTO failed
          FROM pg_catalog.run_command_on_workers(pg_catalog.format(
                   $c$SELECT pg_catalog.setval('whizbang.wh_dead_letters_dead_letter_id_seq', GREATEST(%s,
                          (SELECT s.last_value FROM whizbang.wh_dead_letters_dead_letter_id_seq s)))$c$,
                   v_dead_letter_seq)) r
         WHERE NOT r.success;
        IF failed IS NOT NULL THEN
            RAISE EXCEPTION 'whizbang.distribute(): a worker''s dead-letter id sequence could not be moved past the restored ids: %', failed
                USING ERRCODE = '55000';
        END IF;
    END IF;
END
$$;

-- ---------------------------------------------------------------------------------------
-- 0.11.0 -> 0.12.0
-- ---------------------------------------------------------------------------------------

-- On a distributed install the settings are reference tables: the coordinator's update writes
-- the new setting to every node's placement, and Citus runs this script again on each worker,
-- inside the coordinator's command, where a write to a reference table would be a distributed
-- query from a shard (refused). So a worker of a distributed install leaves the rows to the
-- coordinator.
DO $settings$
BEGIN
    -- Nested: the inner test names Citus objects, parsed only where Citus is installed.
    IF EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        IF NOT pg_catalog.citus_is_coordinator()
           AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                        WHERE p.logicalrelid OPERATOR(pg_catalog.=) 'whizbang.wh_setting_defaults'::pg_catalog.regclass) THEN
            RETURN;
        END IF;
    END IF;
    INSERT INTO whizbang.wh_setting_defaults
        (setting_key, default_value, value_type, min_value, max_value, allowed_values, description)
    VALUES
        ('dedup_generations', '30', 'integer', 1, 1000, NULL,
         'Dedup generations the retention window is cut into: a generation lasts dedup_retention_days '
         '* 24 / dedup_generations hours, rounded up (a day by default)');
    -- Seeded as CREATE EXTENSION seeds every setting.
    INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type, description)
    SELECT setting_key, default_value, value_type, description FROM whizbang.wh_setting_defaults
     WHERE setting_key OPERATOR(pg_catalog.=) 'dedup_generations';
END
$settings$;

DO $convert$
DECLARE
    newest timestamptz;
    g record;
BEGIN
    -- Citus keeps the single table (docs/scaleout.md): its shards are plain tables, and the
    -- generations' DDL would have to be made on every node at once.
    IF EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RETURN;
    END IF;
    -- Stores wait for this transaction: the rename and the attach take a moment, the attach's
    -- check of the records' first_seen_at reads the table once (docs/performance.md, "Retention by generations", has figures).
    LOCK TABLE whizbang.wh_message_deduplication IN ACCESS EXCLUSIVE MODE;
    SELECT pg_catalog.max(first_seen_at) INTO newest FROM whizbang.wh_message_deduplication;
    ALTER TABLE whizbang.wh_message_deduplication RENAME TO wh_message_deduplication_legacy;
    ALTER INDEX whizbang.wh_message_deduplication_pkey RENAME TO wh_message_deduplication_legacy_pkey;

    CREATE TABLE whizbang.wh_message_deduplication (
        consumer          text COLLATE "C" NOT NULL DEFAULT '',
        message_id        uuid        NOT NULL,
        first_seen_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
        observation_count integer     NOT NULL DEFAULT 1,
        conflict_count    integer     NOT NULL DEFAULT 0,
        fingerprint       bytea,
        partition_number  integer
    ) PARTITION BY RANGE (first_seen_at);

    -- The applications' grants go with the name.
    FOR g IN SELECT a.grantee, a.privilege_type, a.is_grantable
               FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
              WHERE c.oid OPERATOR(pg_catalog.=) 'whizbang.wh_message_deduplication_legacy'::pg_catalog.regclass
                AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON whizbang.wh_message_deduplication TO %s%s', g.privilege_type,
                                  CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                       ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END,
                                  CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    -- A GRANT run by an extension script is recorded as the extension's initial privilege
    -- (pg_init_privs), and pg_dump dumps only the grants that differ from those: left so, the
    -- applications' grants would vanish from their dumps. A fresh install records none.
    DELETE FROM pg_catalog.pg_init_privs i
     WHERE i.objoid OPERATOR(pg_catalog.=) 'whizbang.wh_message_deduplication'::pg_catalog.regclass
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass;

    IF newest IS NULL THEN
        DROP TABLE whizbang.wh_message_deduplication_legacy;
    ELSE
        -- No longer a member of the extension: like every generation, pg_dump dumps it whole.
        ALTER EXTENSION whizbang DROP TABLE whizbang.wh_message_deduplication_legacy;
        COMMENT ON TABLE whizbang.wh_message_deduplication_legacy IS
            'The dedup records stored before whizbang 0.12.0, a generation of whizbang.wh_message_deduplication: '
            'purged row by row by perform_maintenance until all of it has left the retention window, then dropped whole.';
        EXECUTE pg_catalog.format('ALTER TABLE whizbang.wh_message_deduplication ATTACH PARTITION '
                                  'whizbang.wh_message_deduplication_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
                                  newest OPERATOR(pg_catalog.+) interval '1 microsecond');
    END IF;
END
$convert$;

-- The comments go with the name (a new table): the 0.11.0 ones, first_seen_at's and the table's
-- telling of generations.
COMMENT ON TABLE whizbang.wh_message_deduplication IS
    'One row per (consumer, message_id) received: the dedup decision of dedup_insert, dedup_insert_many, '
    'store_inbox_messages and inbox_receive. Kept after completion; perform_maintenance purges it after '
    'dedup_retention_days, never while its message waits. From 0.12.0 partitioned by first_seen_at into '
    'generations that maintenance drops whole (whizbang.dedup_generations; a database with Citus keeps one '
    'table). Do not alter the table: whizbang writes it natively.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.consumer IS
    'The dedup scope (receiving service or subscription), compared byte for byte; '''' is the default scope.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.message_id IS 'The message id.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.first_seen_at IS
    'p_now of the call that recorded it (outcome new); retention counts from here, and it decides the '
    'generation. A record whose message still waited when its generation was dropped moved forward first: '
    'it then holds the start of the generation it moved to.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.observation_count IS
    'Deliveries seen: 1 at the first, + 1 per duplicate or conflict.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.conflict_count IS
    'Deliveries whose fingerprint differed from the stored one (outcome conflict).';
COMMENT ON COLUMN whizbang.wh_message_deduplication.fingerprint IS
    'Payload fingerprint of the delivery that recorded the id (normally whizbang.fingerprint, 32 bytes), '
    'or NULL; never changed afterwards.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the work partition of the message.';

-- ---------------------------------------------------------------------------------------
-- dedup_generations(): the generations, for operators (docs/operations.md).
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang.dedup_generations()
RETURNS TABLE (generation text, starts_at timestamptz, ends_at timestamptz, records bigint,
               leaves_window_at timestamptz)
    AS 'MODULE_PATHNAME', 'wb_dedup_generations' LANGUAGE C STABLE ROWS 40
    SET search_path = pg_catalog, pg_temp;

CREATE VIEW whizbang.dedup_generations AS
SELECT g.generation, g.starts_at, g.ends_at, g.records, g.leaves_window_at FROM whizbang.dedup_generations() g;

REVOKE ALL ON FUNCTION whizbang.dedup_generations() FROM PUBLIC;
REVOKE ALL ON whizbang.dedup_generations FROM PUBLIC;

COMMENT ON FUNCTION whizbang.dedup_generations() IS
    'The generations of whizbang.wh_message_deduplication (0.12.0), oldest first: the table of each, the span '
    'of first_seen_at it holds (starts_at NULL: the records stored before 0.12.0), its records counted now (a '
    'scan of each), and when maintenance drops it (ends_at + dedup_retention_days). No rows on a table that is '
    'not in generations (a database with Citus). No errors.';
COMMENT ON VIEW whizbang.dedup_generations IS 'whizbang.dedup_generations() as a view.';
COMMENT ON COLUMN whizbang.dedup_generations.generation IS 'The generation''s table, in schema whizbang.';
COMMENT ON COLUMN whizbang.dedup_generations.starts_at IS
    'The first first_seen_at it holds; NULL for the records stored before 0.12.0 (from MINVALUE).';
COMMENT ON COLUMN whizbang.dedup_generations.ends_at IS 'The first first_seen_at it no longer holds.';
COMMENT ON COLUMN whizbang.dedup_generations.records IS 'Its records, counted now.';
COMMENT ON COLUMN whizbang.dedup_generations.leaves_window_at IS
    'From when maintenance drops it whole: ends_at + dedup_retention_days (its waiting messages'' records move forward first).';

COMMENT ON FUNCTION whizbang.stats() IS
    'Counters from one snapshot: inbox_ and outbox_ pending, leased, scheduled, dead_lettered, '
    'oldest_pending_seconds; dedup_rows, dedup_duplicates_observed, dedup_conflicts_observed; '
    'idempotency_in_progress, idempotency_completed, idempotency_tombstones; the lease store''s and claim '
    'waits''; dedup_generations (how many, 0.12.0: 0 when the table is not in generations) and '
    'dedup_oldest_generation_seconds (the age of the oldest one''s start). Read-only. '
    'Errors: 42501 without SELECT on a counted table.';

-- ---------------------------------------------------------------------------------------
-- Grants of a capability: monitor reads the generations.
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION whizbang._capability_grants()
RETURNS TABLE (capability text, kind text, object_name text, privileges text)
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.capability, c.kind, c.object_name, c.privileges FROM (VALUES
        -- grant_worker
        ('dedup', 'routine', 'dedup_insert', 'EXECUTE'),
        ('dedup', 'routine', 'dedup_insert_many', 'EXECUTE'),
        ('dedup', 'routine', 'fingerprint', 'EXECUTE'),
        ('dedup', 'routine', 'event_uuid', 'EXECUTE'),
        ('dedup', 'routine', 'uuid_v7', 'EXECUTE'),
        ('dedup', 'routine', 'partition_of', 'EXECUTE'),
        ('dedup', 'routine', 'version', 'EXECUTE'),
        ('dedup', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('dedup', 'table', 'settings', 'SELECT'),
        ('idempotency', 'routine', 'idempotency_begin', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_complete', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_release', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_policy', 'EXECUTE'),
        ('idempotency', 'routine', 'fingerprint', 'EXECUTE'),
        ('idempotency', 'table', 'wh_idempotency_keys', 'SELECT, INSERT, UPDATE, DELETE'),
        ('idempotency', 'sequence', 'wh_idempotency_token_seq', 'USAGE'),
        ('idempotency', 'table', 'wh_idempotency_policies', 'SELECT'),
        ('idempotency', 'table', 'settings', 'SELECT'),
        ('inbox', 'routine', 'store_inbox_messages', 'EXECUTE'),
        ('inbox', 'routine', 'inbox_receive', 'EXECUTE'),
        ('inbox', 'routine', 'claim_work', 'EXECUTE'),
        ('inbox', 'routine', 'complete_work', 'EXECUTE'),
        ('inbox', 'routine', 'fail_work', 'EXECUTE'),
        ('inbox', 'routine', 'renew_leases', 'EXECUTE'),
        ('inbox', 'routine', 'release_work', 'EXECUTE'),
        ('inbox', 'routine', 'partition_of', 'EXECUTE'),
        ('inbox', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox', 'SELECT, INSERT, DELETE'),
        ('inbox', 'table', 'wh_inbox_work', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('inbox', 'table', 'wh_inbox_preleased', 'SELECT, INSERT, DELETE'),
        ('inbox', 'table', 'wh_dead_letters', 'INSERT'),
        ('inbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('inbox', 'table', 'settings', 'SELECT'),
        ('outbox', 'routine', 'store_outbox_messages', 'EXECUTE'),
        ('outbox', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('outbox', 'table', 'wh_outbox_work', 'SELECT, INSERT'),
        ('outbox', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('outbox', 'table', 'wh_outbox_preleased', 'INSERT'),
        ('outbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('outbox', 'table', 'settings', 'SELECT'),
        ('relay', 'routine', 'claim_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_work', 'EXECUTE'),
        ('relay', 'routine', 'fail_work', 'EXECUTE'),
        ('relay', 'routine', 'renew_leases', 'EXECUTE'),
        ('relay', 'routine', 'release_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_outbox_published', 'EXECUTE'),
        ('relay', 'routine', 'partition_of', 'EXECUTE'),
        ('relay', 'table', 'wh_outbox', 'SELECT, DELETE'),
        ('relay', 'table', 'wh_outbox_work', 'SELECT, UPDATE, DELETE'),
        ('relay', 'table', 'wh_outbox_preleased', 'SELECT, DELETE'),
        ('relay', 'table', 'wh_dead_letters', 'INSERT'),
        ('relay', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('relay', 'table', 'settings', 'SELECT'),
        -- grant_admin
        ('dead_letters', 'routine', 'retry_dead_letters', 'EXECUTE'),
        ('dead_letters', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('dead_letters', 'table', 'wh_inbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_inbox_work', 'INSERT'),
        ('dead_letters', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('dead_letters', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_outbox_work', 'INSERT'),
        ('dead_letters', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('settings', 'table', 'wh_settings', 'SELECT, INSERT, UPDATE, DELETE'),
        ('settings', 'table', 'wh_setting_defaults', 'SELECT'),
        ('settings', 'table', 'settings', 'SELECT'),
        ('policies', 'table', 'wh_idempotency_policies', 'SELECT, INSERT, UPDATE, DELETE'),
        ('maintenance', 'routine', 'perform_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'run_maintenance', 'EXECUTE'),
        ('maintenance', 'table', 'settings', 'SELECT'),
        ('maintenance', 'table', 'wh_inbox', 'SELECT, DELETE'),
        ('maintenance', 'table', 'wh_outbox', 'SELECT, DELETE'),
        ('maintenance', 'table', 'wh_message_deduplication', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_idempotency_keys', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_work', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_work', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_streams', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_streams', 'SELECT, UPDATE, DELETE'),
        ('monitor', 'routine', 'stats', 'EXECUTE'),
        ('monitor', 'routine', 'queues', 'EXECUTE'),
        ('monitor', 'routine', '_leases', 'EXECUTE'),
        ('monitor', 'routine', 'check', 'EXECUTE'),
        ('monitor', 'table', 'stats', 'SELECT'),
        ('monitor', 'table', 'queues', 'SELECT'),
        ('monitor', 'table', 'leases', 'SELECT'),
        ('monitor', 'table', 'wh_inbox', 'SELECT'),
        ('monitor', 'table', 'wh_inbox_work', 'SELECT'),
        ('monitor', 'table', 'wh_outbox', 'SELECT'),
        ('monitor', 'table', 'wh_outbox_work', 'SELECT'),
        ('monitor', 'table', 'wh_dead_letters', 'SELECT'),
        ('monitor', 'table', 'wh_message_deduplication', 'SELECT'),
        ('monitor', 'table', 'wh_idempotency_keys', 'SELECT'),
        ('monitor', 'table', 'wh_partitions', 'SELECT'),
        ('monitor', 'routine', 'dedup_generations', 'EXECUTE'),
        ('monitor', 'table', 'dedup_generations', 'SELECT')
    ) AS c(capability, kind, object_name, privileges)
$$;

-- ---------------------------------------------------------------------------------------
-- _distribution_keys(): as in 0.8.0, refusing a table in generations with a clear error.
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION whizbang._distribution_keys() RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- The partition count of every distributed call (DESIGN §3.4's default).
    c CONSTANT integer := 10000;
    t record;
BEGIN
    -- A table in generations (0.12.0: whizbang was created before citus in this database) is
    -- not distributed: a database with Citus keeps the single table (docs/scaleout.md).
    IF (SELECT r.relkind FROM pg_catalog.pg_class r
         WHERE r.oid OPERATOR(pg_catalog.=) 'whizbang.wh_message_deduplication'::pg_catalog.regclass)
       OPERATOR(pg_catalog.=) 'p' THEN
        RAISE EXCEPTION 'whizbang.wh_message_deduplication is in generations, which Citus does not distribute'
            USING ERRCODE = '55000',
                  DETAIL = 'whizbang was created (or updated to 0.12.0) before the citus extension in this database.',
                  HINT = 'Create the citus extension first, then whizbang: it then keeps one dedup table (docs/scaleout.md).';
    END IF;
    -- A message's tables take its work row's partition (computed at store with the caller's
    -- p_partition_count); what has no work row left takes partition_of(stream or id, 10000).
    UPDATE whizbang.wh_inbox i SET partition_number = w.partition_number
      FROM whizbang.wh_inbox_work w
     WHERE i.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) i.message_id
       AND w.consumer OPERATOR(pg_catalog.=) i.consumer;
    UPDATE whizbang.wh_inbox SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox o SET partition_number = w.partition_number
      FROM whizbang.wh_outbox_work w
     WHERE o.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) o.message_id;
    UPDATE whizbang.wh_outbox SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_inbox_preleased p SET partition_number = w.partition_number
      FROM whizbang.wh_inbox_work w
     WHERE p.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) p.message_id
       AND w.consumer OPERATOR(pg_catalog.=) p.consumer;
    UPDATE whizbang.wh_inbox_preleased SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox_preleased p SET partition_number = w.partition_number
      FROM whizbang.wh_outbox_work w
     WHERE p.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) p.message_id;
    UPDATE whizbang.wh_outbox_preleased SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    -- A stream's rows and its counter: the stream's partition (the work rows' value where the
    -- stream has rows, so that a count other than 10000 still keeps them together).
    UPDATE whizbang.wh_inbox_streams s SET partition_number = w.partition_number
      FROM (SELECT DISTINCT ON (consumer, stream_id) consumer, stream_id, partition_number
              FROM whizbang.wh_inbox_work WHERE stream_id IS NOT NULL) w
     WHERE s.partition_number IS NULL AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id
       AND w.consumer OPERATOR(pg_catalog.=) s.consumer;
    UPDATE whizbang.wh_inbox_streams SET partition_number = whizbang.partition_of(stream_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox_streams s SET partition_number = w.partition_number
      FROM (SELECT DISTINCT ON (stream_id) stream_id, partition_number
              FROM whizbang.wh_outbox_work WHERE stream_id IS NOT NULL) w
     WHERE s.partition_number IS NULL AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id;
    UPDATE whizbang.wh_outbox_streams SET partition_number = whizbang.partition_of(stream_id, c)
     WHERE partition_number IS NULL;
    -- Dedup records: the inbox message's partition while it is there; a record whose message
    -- is gone (completed) does not know its stream and takes its id's partition (docs/scaleout.md).
    UPDATE whizbang.wh_message_deduplication d SET partition_number = i.partition_number
      FROM whizbang.wh_inbox i
     WHERE d.partition_number IS NULL AND i.message_id OPERATOR(pg_catalog.=) d.message_id
       AND i.consumer OPERATOR(pg_catalog.=) d.consumer;
    UPDATE whizbang.wh_message_deduplication SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_dead_letters SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), c)
     WHERE partition_number IS NULL;

    FOR t IN SELECT * FROM (VALUES
        ('wh_message_deduplication', 'message_id, consumer, partition_number'),
        ('wh_inbox',                 'message_id, consumer, partition_number'),
        ('wh_inbox_work',            'message_id, consumer, partition_number'),
        ('wh_inbox_streams',         'stream_id, consumer, partition_number'),
        ('wh_inbox_preleased',       'instance_id, message_id, consumer, partition_number'),
        ('wh_outbox',                'message_id, partition_number'),
        ('wh_outbox_work',           'message_id, consumer, partition_number'),
        ('wh_outbox_streams',        'stream_id, consumer, partition_number'),
        ('wh_outbox_preleased',      'instance_id, message_id, consumer, partition_number'),
        ('wh_dead_letters',          'dead_letter_id, partition_number')) AS k(tab, cols)
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE whizbang.%I ALTER COLUMN partition_number SET NOT NULL', t.tab);
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_constraint k
                        WHERE k.conrelid OPERATOR(pg_catalog.=) pg_catalog.format('whizbang.%I', t.tab)::pg_catalog.regclass
                          AND k.contype OPERATOR(pg_catalog.=) 'p'
                          AND k.conkey OPERATOR(pg_catalog.@>) ARRAY[(
                              SELECT a.attnum FROM pg_catalog.pg_attribute a
                               WHERE a.attrelid OPERATOR(pg_catalog.=) k.conrelid
                                 AND a.attname OPERATOR(pg_catalog.=) 'partition_number')]) THEN
            EXECUTE pg_catalog.format('ALTER TABLE whizbang.%1$I DROP CONSTRAINT %2$I, ADD CONSTRAINT %2$I PRIMARY KEY (%3$s)',
                                      t.tab, t.tab || '_pkey', t.cols);
        END IF;
    END LOOP;

    DROP TRIGGER IF EXISTS wh_inbox_work_lease_end ON whizbang.wh_inbox_work;
    DROP TRIGGER IF EXISTS wh_inbox_work_lease_truncate ON whizbang.wh_inbox_work;
    DROP TRIGGER IF EXISTS wh_outbox_work_lease_end ON whizbang.wh_outbox_work;
    DROP TRIGGER IF EXISTS wh_outbox_work_lease_truncate ON whizbang.wh_outbox_work;
END
$$;


-- ---------------------------------------------------------------------------------------
-- 0.12.0 -> 0.13.0
-- ---------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------
-- One table of required privileges (issue 30): what each function needs of the caller on
-- whizbang's tables, checked when a call starts, on one server and on a Citus coordinator.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang._required_privileges()
RETURNS TABLE (function_name text, needed_when text, object_name text, privileges text)
    AS 'MODULE_PATHNAME', 'wb_required_privileges' LANGUAGE C IMMUTABLE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang._required_privileges() FROM PUBLIC;
COMMENT ON FUNCTION whizbang._required_privileges() IS
    'internal: the privileges each whizbang function needs of its caller on whizbang''s tables, views and '
    'sequences (needed_when: always, inbox, outbox, p_instance_id, p_sent_at), checked when a call starts, on '
    'one server and on a Citus coordinator alike; a missing one is 42501 before anything is written (docs/security.md).';

-- ---------------------------------------------------------------------------------------
-- Grants of a capability: every function documented for an admin capability (issue 30):
-- maintenance cancels pending work (cancel_work), monitor peeks and reads the lease store.
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION whizbang._capability_grants()
RETURNS TABLE (capability text, kind text, object_name text, privileges text)
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.capability, c.kind, c.object_name, c.privileges FROM (VALUES
        -- grant_worker
        ('dedup', 'routine', 'dedup_insert', 'EXECUTE'),
        ('dedup', 'routine', 'dedup_insert_many', 'EXECUTE'),
        ('dedup', 'routine', 'fingerprint', 'EXECUTE'),
        ('dedup', 'routine', 'event_uuid', 'EXECUTE'),
        ('dedup', 'routine', 'uuid_v7', 'EXECUTE'),
        ('dedup', 'routine', 'partition_of', 'EXECUTE'),
        ('dedup', 'routine', 'version', 'EXECUTE'),
        ('dedup', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('dedup', 'table', 'settings', 'SELECT'),
        ('idempotency', 'routine', 'idempotency_begin', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_complete', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_release', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_policy', 'EXECUTE'),
        ('idempotency', 'routine', 'fingerprint', 'EXECUTE'),
        ('idempotency', 'table', 'wh_idempotency_keys', 'SELECT, INSERT, UPDATE, DELETE'),
        ('idempotency', 'sequence', 'wh_idempotency_token_seq', 'USAGE'),
        ('idempotency', 'table', 'wh_idempotency_policies', 'SELECT'),
        ('idempotency', 'table', 'settings', 'SELECT'),
        ('inbox', 'routine', 'store_inbox_messages', 'EXECUTE'),
        ('inbox', 'routine', 'inbox_receive', 'EXECUTE'),
        ('inbox', 'routine', 'claim_work', 'EXECUTE'),
        ('inbox', 'routine', 'complete_work', 'EXECUTE'),
        ('inbox', 'routine', 'fail_work', 'EXECUTE'),
        ('inbox', 'routine', 'renew_leases', 'EXECUTE'),
        ('inbox', 'routine', 'release_work', 'EXECUTE'),
        ('inbox', 'routine', 'partition_of', 'EXECUTE'),
        ('inbox', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox', 'SELECT, INSERT, DELETE'),
        ('inbox', 'table', 'wh_inbox_work', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('inbox', 'table', 'wh_inbox_preleased', 'SELECT, INSERT, DELETE'),
        ('inbox', 'table', 'wh_dead_letters', 'INSERT'),
        ('inbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('inbox', 'table', 'settings', 'SELECT'),
        ('outbox', 'routine', 'store_outbox_messages', 'EXECUTE'),
        ('outbox', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('outbox', 'table', 'wh_outbox_work', 'SELECT, INSERT'),
        ('outbox', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('outbox', 'table', 'wh_outbox_preleased', 'INSERT'),
        ('outbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('outbox', 'table', 'settings', 'SELECT'),
        ('relay', 'routine', 'claim_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_work', 'EXECUTE'),
        ('relay', 'routine', 'fail_work', 'EXECUTE'),
        ('relay', 'routine', 'renew_leases', 'EXECUTE'),
        ('relay', 'routine', 'release_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_outbox_published', 'EXECUTE'),
        ('relay', 'routine', 'partition_of', 'EXECUTE'),
        ('relay', 'table', 'wh_outbox', 'SELECT, DELETE'),
        ('relay', 'table', 'wh_outbox_work', 'SELECT, UPDATE, DELETE'),
        ('relay', 'table', 'wh_outbox_preleased', 'SELECT, DELETE'),
        ('relay', 'table', 'wh_dead_letters', 'INSERT'),
        ('relay', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('relay', 'table', 'settings', 'SELECT'),
        -- grant_admin
        ('dead_letters', 'routine', 'retry_dead_letters', 'EXECUTE'),
        ('dead_letters', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('dead_letters', 'table', 'wh_inbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_inbox_work', 'INSERT'),
        ('dead_letters', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('dead_letters', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_outbox_work', 'INSERT'),
        ('dead_letters', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('settings', 'table', 'wh_settings', 'SELECT, INSERT, UPDATE, DELETE'),
        ('settings', 'table', 'wh_setting_defaults', 'SELECT'),
        ('settings', 'table', 'settings', 'SELECT'),
        ('policies', 'table', 'wh_idempotency_policies', 'SELECT, INSERT, UPDATE, DELETE'),
        ('maintenance', 'routine', 'perform_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'run_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'cancel_work', 'EXECUTE'),
        ('maintenance', 'table', 'settings', 'SELECT'),
        ('maintenance', 'table', 'wh_inbox', 'SELECT, DELETE'),
        ('maintenance', 'table', 'wh_outbox', 'SELECT, DELETE'),
        ('maintenance', 'table', 'wh_message_deduplication', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_idempotency_keys', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_work', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_work', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_streams', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_streams', 'SELECT, UPDATE, DELETE'),
        ('monitor', 'routine', 'stats', 'EXECUTE'),
        ('monitor', 'routine', 'queues', 'EXECUTE'),
        ('monitor', 'routine', '_leases', 'EXECUTE'),
        ('monitor', 'routine', 'check', 'EXECUTE'),
        ('monitor', 'table', 'stats', 'SELECT'),
        ('monitor', 'table', 'queues', 'SELECT'),
        ('monitor', 'table', 'leases', 'SELECT'),
        ('monitor', 'table', 'wh_inbox', 'SELECT'),
        ('monitor', 'table', 'wh_inbox_work', 'SELECT'),
        ('monitor', 'table', 'wh_outbox', 'SELECT'),
        ('monitor', 'table', 'wh_outbox_work', 'SELECT'),
        ('monitor', 'table', 'wh_dead_letters', 'SELECT'),
        ('monitor', 'table', 'wh_message_deduplication', 'SELECT'),
        ('monitor', 'table', 'wh_idempotency_keys', 'SELECT'),
        ('monitor', 'table', 'wh_partitions', 'SELECT'),
        ('monitor', 'routine', 'dedup_generations', 'EXECUTE'),
        ('monitor', 'table', 'dedup_generations', 'SELECT'),
        ('monitor', 'routine', 'peek', 'EXECUTE'),
        ('monitor', 'routine', 'lease_store', 'EXECUTE')
    ) AS c(capability, kind, object_name, privileges)
$$;

COMMENT ON FUNCTION whizbang.grant_admin(regrole, text[]) IS
    'Grants p_role what the operator capabilities need (dead_letters: retry_dead_letters; settings; policies; '
    'maintenance: perform_maintenance, run_maintenance, cancel_work; monitor: stats, queues, peek, leases, '
    'lease_store, dedup_generations, check; default: all) and returns the GRANT statements it ran. The caller '
    'must be able to grant them. Errors: 22004 null p_role or no capability, 22023 unknown capability, 42501 the '
    'caller may not grant.';

-- ---------------------------------------------------------------------------------------
-- 0.13.0 -> 0.14.0
-- ---------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------
-- One row per message and consumer (issue 31): the work state moves into the message row.
-- ---------------------------------------------------------------------------------------
-- Until 0.13.0 every stored message wrote two heap rows and three index entries beyond its
-- dedup record (the message, its work row, the work row's key and due entry). With leases in
-- shared memory a claim writes nothing to the row, so keeping the work state apart no longer
-- buys cheap lease updates; it only costs a row, a key and a second delete per message. The
-- work columns are appended to wh_inbox / wh_outbox (an update in place keeps the columns of a
-- fresh install), the rows are copied over, and the work tables go. With the row lease store a
-- claim now updates the wide message row (docs/performance.md measures that trade).

-- On a distributed install (Citus) the coordinator's update changes the distributed tables, and
-- Citus applies each change to every shard and every worker's copy. Citus also runs this script
-- on each worker after the coordinator's own run, when the changes to the distributed tables have
-- reached the worker already: the workers leave those tables alone. Each such change is EXECUTEd
-- on the coordinator: Citus sends on the statement itself (a plain statement of an extension
-- script has the whole script as its text: several commands, refused). (Dropped at the end.)
CREATE FUNCTION whizbang._update_runs_here() RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    worker boolean := false;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT NOT pg_catalog.citus_is_coordinator() AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox''::pg_catalog.regclass)'
           INTO worker;
    END IF;
    RETURN NOT worker;
END
$f$;

DO $$
BEGIN
    IF NOT whizbang._update_runs_here() THEN
        RETURN;
    END IF;
    EXECUTE $ddl$ALTER TABLE whizbang.wh_inbox
    ADD COLUMN stream_seq     bigint,
    ADD COLUMN scheduled_for  timestamptz,
    ADD COLUMN attempts       integer NOT NULL DEFAULT 0,
    ADD COLUMN lease_instance uuid,
    ADD COLUMN lease_token    bigint,
    ADD COLUMN lease_expiry   timestamptz,
    ADD COLUMN last_error     text,
    ADD COLUMN processed_at   timestamptz$ddl$;
END
$$;


-- The outbox's rows take the inbox's shape (consumer always ''), so one claim engine serves both.
DO $$
BEGIN
    IF NOT whizbang._update_runs_here() THEN
        RETURN;
    END IF;
    EXECUTE $ddl$ALTER TABLE whizbang.wh_outbox
    ADD COLUMN consumer       text COLLATE "C" NOT NULL DEFAULT '' CONSTRAINT wh_outbox_consumer_check CHECK (consumer = ''),
    ADD COLUMN stream_seq     bigint,
    ADD COLUMN scheduled_for  timestamptz,
    ADD COLUMN attempts       integer NOT NULL DEFAULT 0,
    ADD COLUMN lease_instance uuid,
    ADD COLUMN lease_token    bigint,
    ADD COLUMN lease_expiry   timestamptz,
    ADD COLUMN last_error     text,
    ADD COLUMN processed_at   timestamptz$ddl$;
END
$$;

-- The work rows' values move over. Distributed (Citus) tables are joined on their distribution
-- column too (the message row has the work row's partition there); on a single server the
-- message rows' partition_number is NULL until now and the work row's is taken.
DO $$
DECLARE
    distributed boolean := pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL;
    same_part text := '';
BEGIN
    IF distributed THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox_work''::pg_catalog.regclass)'
           INTO distributed;
    END IF;
    IF NOT whizbang._update_runs_here() THEN
        RETURN;
    END IF;
    IF distributed THEN
        same_part := ' AND w.partition_number OPERATOR(pg_catalog.=) m.partition_number';
    END IF;
    EXECUTE 'UPDATE whizbang.wh_inbox m'
            '   SET stream_seq = w.stream_seq, scheduled_for = w.scheduled_for, attempts = w.attempts,'
            '       lease_instance = w.lease_instance, lease_token = w.lease_token, lease_expiry = w.lease_expiry,'
            '       last_error = w.last_error, processed_at = w.processed_at'
            || CASE WHEN distributed THEN '' ELSE ', partition_number = w.partition_number' END ||
            '  FROM whizbang.wh_inbox_work w'
            ' WHERE w.message_id OPERATOR(pg_catalog.=) m.message_id AND w.consumer OPERATOR(pg_catalog.=) m.consumer'
            || same_part;
    EXECUTE 'UPDATE whizbang.wh_outbox m'
            '   SET stream_seq = w.stream_seq, scheduled_for = w.scheduled_for, attempts = w.attempts,'
            '       lease_instance = w.lease_instance, lease_token = w.lease_token, lease_expiry = w.lease_expiry,'
            '       last_error = w.last_error, processed_at = w.processed_at'
            || CASE WHEN distributed THEN '' ELSE ', partition_number = w.partition_number' END ||
            '  FROM whizbang.wh_outbox_work w'
            ' WHERE w.message_id OPERATOR(pg_catalog.=) m.message_id'
            || same_part;
    -- A message without a work row (written by hand) is due since it arrived.
    UPDATE whizbang.wh_inbox SET scheduled_for = received_at WHERE scheduled_for IS NULL;
    UPDATE whizbang.wh_outbox SET scheduled_for = created_at WHERE scheduled_for IS NULL;
    IF NOT distributed THEN
        UPDATE whizbang.wh_inbox SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), 10000)
         WHERE partition_number IS NULL;
        UPDATE whizbang.wh_outbox SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), 10000)
         WHERE partition_number IS NULL;
        -- A message row deleted by hand ends its shared lease (as the work rows' triggers did;
        -- Citus keeps no triggers on distributed tables, _distribution_keys() dropped them there).
        CREATE TRIGGER wh_inbox_lease_end AFTER DELETE ON whizbang.wh_inbox
            FOR EACH ROW EXECUTE FUNCTION whizbang._lease_row_deleted('inbox');
        CREATE TRIGGER wh_inbox_lease_truncate AFTER TRUNCATE ON whizbang.wh_inbox
            FOR EACH STATEMENT EXECUTE FUNCTION whizbang._lease_row_deleted('inbox');
        CREATE TRIGGER wh_outbox_lease_end AFTER DELETE ON whizbang.wh_outbox
            FOR EACH ROW EXECUTE FUNCTION whizbang._lease_row_deleted('outbox');
        CREATE TRIGGER wh_outbox_lease_truncate AFTER TRUNCATE ON whizbang.wh_outbox
            FOR EACH STATEMENT EXECUTE FUNCTION whizbang._lease_row_deleted('outbox');
    END IF;
END
$$;
DO $$
BEGIN
    IF NOT whizbang._update_runs_here() THEN
        RETURN;
    END IF;
    EXECUTE $ddl$ALTER TABLE whizbang.wh_inbox ALTER COLUMN scheduled_for SET NOT NULL, ALTER COLUMN partition_number SET NOT NULL$ddl$;
    EXECUTE $ddl$ALTER TABLE whizbang.wh_outbox ALTER COLUMN scheduled_for SET NOT NULL, ALTER COLUMN partition_number SET NOT NULL$ddl$;
END
$$;

-- What roles were granted on the work tables (by hand, or by grant_worker / grant_admin) they
-- keep on the message tables that now hold the work state.
DO $$
DECLARE
    g record;
    v_initial pg_catalog.pg_init_privs[];
BEGIN
    IF NOT whizbang._update_runs_here() THEN
        RETURN;
    END IF;
    -- A GRANT run by an extension script is recorded as the extension's initial privilege
    -- (pg_init_privs), and pg_dump dumps only the grants that differ from those: left so, the
    -- copied grants would vanish from the applications' dumps. What the message tables had
    -- there before (a fresh install has the same) is put back after the grants.
    SELECT pg_catalog.array_agg(i) INTO v_initial
      FROM pg_catalog.pg_init_privs i
     WHERE i.objoid OPERATOR(pg_catalog.=) ANY (ARRAY['whizbang.wh_inbox'::pg_catalog.regclass,
                                                      'whizbang.wh_outbox'::pg_catalog.regclass]::pg_catalog.oid[])
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass;
    FOR g IN
        SELECT t.message, a.grantee, a.privilege_type, a.is_grantable
          FROM (VALUES ('wh_inbox_work', 'wh_inbox'), ('wh_outbox_work', 'wh_outbox')) AS t(work, message)
          JOIN pg_catalog.pg_class c
            ON c.relname OPERATOR(pg_catalog.=) t.work
           AND c.relnamespace OPERATOR(pg_catalog.=) 'whizbang'::pg_catalog.regnamespace
         CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
         WHERE a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON whizbang.%I TO %s%s', g.privilege_type, g.message,
                                  CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                       ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END,
                                  CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    DELETE FROM pg_catalog.pg_init_privs i
     WHERE i.objoid OPERATOR(pg_catalog.=) ANY (ARRAY['whizbang.wh_inbox'::pg_catalog.regclass,
                                                      'whizbang.wh_outbox'::pg_catalog.regclass]::pg_catalog.oid[])
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass;
    INSERT INTO pg_catalog.pg_init_privs SELECT (pg_catalog.unnest(v_initial)).*;
END
$$;
-- The work tables go; claims find due rows through partial indexes of the message tables:
-- wh_*_due the rows without a stream in due order, wh_*_stream the head of each stream (its
-- oldest unfinished row) by skipping from stream to stream, so rows waiting behind a busy head
-- are never visited (it also answers "is there an older unfinished row of this stream?" with
-- one probe), wh_*_processed debug_mode's leftovers for purge_processed.
DO $$
BEGIN
    IF NOT whizbang._update_runs_here() THEN
        -- The coordinator's DROP took the work tables out of Citus's metadata here, and left
        -- this node's copies: plain tables now, which only this script may drop.
        DROP TABLE IF EXISTS whizbang.wh_inbox_work, whizbang.wh_outbox_work;
        RETURN;
    END IF;
    EXECUTE $ddl$DROP TABLE whizbang.wh_inbox_work$ddl$;
    EXECUTE $ddl$DROP TABLE whizbang.wh_outbox_work$ddl$;
    EXECUTE $ddl$CREATE INDEX wh_inbox_due ON whizbang.wh_inbox (scheduled_for)
    WHERE processed_at IS NULL AND stream_id IS NULL$ddl$;
    EXECUTE $ddl$CREATE INDEX wh_inbox_stream ON whizbang.wh_inbox (consumer, stream_id, stream_seq)
    WHERE stream_id IS NOT NULL AND processed_at IS NULL$ddl$;
    EXECUTE $ddl$CREATE INDEX wh_inbox_processed ON whizbang.wh_inbox (processed_at) WHERE processed_at IS NOT NULL$ddl$;
    EXECUTE $ddl$CREATE INDEX wh_outbox_due ON whizbang.wh_outbox (scheduled_for)
    WHERE processed_at IS NULL AND stream_id IS NULL$ddl$;
    EXECUTE $ddl$CREATE INDEX wh_outbox_stream ON whizbang.wh_outbox (consumer, stream_id, stream_seq)
    WHERE stream_id IS NOT NULL AND processed_at IS NULL$ddl$;
    EXECUTE $ddl$CREATE INDEX wh_outbox_processed ON whizbang.wh_outbox (processed_at) WHERE processed_at IS NOT NULL$ddl$;
    EXECUTE $ddl$COMMENT ON TABLE whizbang.wh_inbox IS
    'One row per received message and consumer: the message as received and its work state (schedule, '
    'attempts, lease, stream position). Deleted when its work completes (debug_mode: marked processed).'$ddl$;
    EXECUTE $ddl$COMMENT ON TABLE whizbang.wh_outbox IS
    'One row per message to publish: the message and its work state (as wh_inbox). Deleted when published '
    '(debug_mode: marked processed).'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.stream_seq IS 'Arrival number within (consumer, stream_id); NULL without a stream.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.partition_number IS
    'partition_of(coalesce(stream_id, message_id), p_partition_count of the store): claim_work''s p_partitions, and the distribution column under Citus.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.scheduled_for IS 'Not handed out before this time (ScheduledFor, or a retry''s backoff).'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.attempts IS 'Deliveries so far: + 1 per claim, - 1 per release.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.lease_instance IS
    'Row lease store: instance (p_instance_id) holding the current lease; NULL when unleased, and always NULL with leases in shared memory (whizbang.leases lists those).'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.lease_token IS
    'Row lease store: fencing token of the current lease (wh_lease_token_seq); NULL when unleased or with leases in shared memory.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.lease_expiry IS
    'Row lease store: end of the current lease; NULL when unleased or with leases in shared memory.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.last_error IS 'Error text of the last fail_work.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.processed_at IS 'With debug_mode: when it was completed (kept, not deleted); NULL otherwise.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.consumer IS 'Always '''' (CHECK): the outbox has no consumer; kept so one claim engine serves both.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.stream_seq IS 'Arrival number within stream_id; NULL without a stream.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.partition_number IS
    'partition_of(coalesce(stream_id, message_id), p_partition_count of the store): claim_work''s p_partitions, and the distribution column under Citus.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.scheduled_for IS 'Not handed out before this time (ScheduledFor, or a retry''s backoff).'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.attempts IS 'Deliveries so far: + 1 per claim, - 1 per release.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.lease_instance IS
    'Row lease store: instance (p_instance_id) holding the current lease; NULL when unleased or with leases in shared memory.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.lease_token IS
    'Row lease store: fencing token of the current lease; NULL when unleased or with leases in shared memory.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.lease_expiry IS
    'Row lease store: end of the current lease; NULL when unleased or with leases in shared memory.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.last_error IS 'Error text of the last fail_work.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.processed_at IS 'With debug_mode: when it was published (kept, not deleted); NULL otherwise.'$ddl$;
END
$$;

COMMENT ON VIEW whizbang.leases IS
    'Every lease held on inbox and outbox work, in whichever lease store runs (whizbang.lease_store()): holder '
    'instance, fencing token, expiry, deliveries. A lease whose expiry has passed is listed until the message is '
    'handed out again or finished (its token still completes it); live ones are WHERE lease_expiry > now(). '
    'A lease another transaction is changing is listed as it was until that transaction ends (a prepared one '
    'included). Reading it needs SELECT on the view and on wh_inbox and wh_outbox, and EXECUTE on whizbang._leases().';

-- The functions that named the work tables, again without them.
CREATE OR REPLACE FUNCTION whizbang.check()
RETURNS TABLE (item text, ok boolean, detail text)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_distributed boolean := false;
    v_have integer[];
    v_missing integer[];
    v_missing_count integer;
    v_extra bigint;
    v_owner oid;
    v_holders text[];
    v_groups bigint;
BEGIN
    SELECT e.extowner INTO v_owner FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'whizbang';
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox''::pg_catalog.regclass)'
           INTO v_distributed;
    END IF;

    item := 'distributed'; ok := true;
    detail := CASE WHEN v_distributed THEN 'whizbang''s tables are Citus tables (docs/scaleout.md)'
                   ELSE 'a single server' END;
    RETURN NEXT;

    -- Every privilege that changes the routing state (reading wh_partitions is harmless: a
    -- monitoring role's check() does), held by a role that is not the extension's owner.
    SELECT pg_catalog.array_agg(DISTINCT h ORDER BY h) INTO v_holders FROM (
        SELECT pg_catalog.format('%s on wh_partitions: %s',
                   CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
                   a.privilege_type) AS h
          FROM pg_catalog.pg_class c, LATERAL pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) 'whizbang.wh_partitions'::pg_catalog.regclass
           AND a.grantee OPERATOR(pg_catalog.<>) v_owner
           AND a.privilege_type OPERATOR(pg_catalog.<>) 'SELECT'
        UNION ALL
        SELECT pg_catalog.format('%s on %s: EXECUTE',
                   CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
                   p.oid::pg_catalog.regprocedure)
          FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
         WHERE p.pronamespace OPERATOR(pg_catalog.=) 'whizbang'::pg_catalog.regnamespace
           AND p.proname OPERATOR(pg_catalog.=) '_on_shard'
           AND a.grantee OPERATOR(pg_catalog.<>) v_owner) s;
    item := 'routing privileges';
    ok := v_holders IS NULL;
    detail := CASE WHEN ok THEN 'only the extension''s owner may change routing rows or call _on_shard'
                   ELSE 'revoke: ' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(v_holders, '; ') END;
    RETURN NEXT;

    IF v_distributed THEN
        SELECT pg_catalog.array_agg(p.partition_number) INTO v_have FROM whizbang.wh_partitions p;
        SELECT pg_catalog.count(*)::integer,
               (pg_catalog.array_agg(g.n ORDER BY g.n))[1:20]
          INTO v_missing_count, v_missing
          FROM pg_catalog.generate_series(0, 9999) AS g(n)
          LEFT JOIN pg_catalog.unnest(v_have) AS h(p) ON h.p OPERATOR(pg_catalog.=) g.n
         WHERE h.p IS NULL;
        SELECT pg_catalog.count(*) INTO v_extra
          FROM pg_catalog.unnest(v_have) AS h(p)
         WHERE h.p IS NULL OR h.p OPERATOR(pg_catalog.<) 0 OR h.p OPERATOR(pg_catalog.>) 9999;
        item := 'routing rows';
        ok := v_missing_count OPERATOR(pg_catalog.=) 0 AND v_extra OPERATOR(pg_catalog.=) 0;
        detail := CASE WHEN ok THEN '10000 partitions, each with its routing row'
                       ELSE pg_catalog.format('%s of the partitions 0..9999 have no routing row (first: %s), '
                                              '%s rows are outside 0..9999; restore with INSERT INTO '
                                              'whizbang.wh_partitions SELECT g FROM pg_catalog.generate_series(0, 9999) g '
                                              'ON CONFLICT DO NOTHING',
                                              v_missing_count, pg_catalog.array_to_string(v_missing, ', '), v_extra) END;
        RETURN NEXT;

        EXECUTE 'SELECT pg_catalog.count(DISTINCT p.colocationid) FROM pg_catalog.pg_dist_partition p'
                ' JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.logicalrelid'
                ' WHERE c.relnamespace OPERATOR(pg_catalog.=) ''whizbang''::pg_catalog.regnamespace'
                '   AND p.partmethod OPERATOR(pg_catalog.=) ''h'''
                '   AND c.relname OPERATOR(pg_catalog.<>) ''wh_idempotency_keys'''
           INTO v_groups;
        item := 'colocation';
        ok := v_groups OPERATOR(pg_catalog.=) 1;
        detail := pg_catalog.format('the distributed work tables are in %s colocation group(s); routing needs 1', v_groups);
        RETURN NEXT;
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION whizbang.distribute(p_shard_count integer DEFAULT 32) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    failed text;
    tab text;
    v_dead_letter_seq bigint;
BEGIN
    IF p_shard_count IS NULL THEN
        RAISE EXCEPTION 'p_shard_count must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF p_shard_count < 1 OR p_shard_count > 64000 THEN
        RAISE EXCEPTION 'p_shard_count must be between 1 and 64000, not %', p_shard_count USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RAISE EXCEPTION 'whizbang.distribute() needs the citus extension in this database'
            USING ERRCODE = '55000', HINT = 'docs/scaleout.md shows how to set up a Citus cluster.';
    END IF;
    IF NOT pg_catalog.citus_is_coordinator() THEN
        RAISE EXCEPTION 'whizbang.distribute() runs on the Citus coordinator' USING ERRCODE = '55000';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
                WHERE logicalrelid OPERATOR(pg_catalog.=) 'whizbang.wh_inbox'::pg_catalog.regclass) THEN
        RAISE NOTICE 'whizbang is distributed already';
        RETURN;
    END IF;

    -- Dead letters restored from a dump of a cluster (docs/scaleout.md "Backup"): their ids came
    -- from that cluster's nodes, each made of the node's group id (the top 16 bits) and the node's
    -- own sequence, which no dump holds. A fresh cluster's nodes have the same group ids and start
    -- their sequences at 1, so they must start past the restored ids, or two dead letters share one.
    SELECT pg_catalog.max(d.dead_letter_id OPERATOR(pg_catalog.&) 281474976710655) INTO v_dead_letter_seq
      FROM whizbang.wh_dead_letters d;

    PERFORM whizbang._distribution_keys();
    -- The workers' whizbang tables (Citus keeps them as the shells of the extension's tables)
    -- must have the same keys before Citus creates the shards.
    SELECT pg_catalog.string_agg(pg_catalog.format('%s:%s: %s', r.nodename, r.nodeport, r.result), '; ')
      INTO failed
      FROM pg_catalog.run_command_on_workers('SELECT whizbang._distribution_keys()') r
     WHERE NOT r.success;
    IF failed IS NOT NULL THEN
        RAISE EXCEPTION 'whizbang.distribute(): a worker could not take the distribution keys: %', failed
            USING ERRCODE = '55000', HINT = 'Every node needs whizbang at the coordinator''s version.';
    END IF;

    -- The settings' validation and cache triggers go with the reference tables (Citus asks
    -- for this setting to keep triggers on a distributed table).
    PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    PERFORM pg_catalog.create_reference_table('whizbang.wh_setting_defaults');
    -- The rows were validated when written; copying them to the placements must not run the
    -- validation again (its INSERT-of-a-known-key path writes wh_settings from inside the copy).
    ALTER TABLE whizbang.wh_settings DISABLE TRIGGER wh_settings_validate;
    PERFORM pg_catalog.create_reference_table('whizbang.wh_settings');
    ALTER TABLE whizbang.wh_settings ENABLE TRIGGER wh_settings_validate;
    PERFORM pg_catalog.create_reference_table('whizbang.wh_idempotency_policies');

    PERFORM pg_catalog.create_distributed_table('whizbang.wh_inbox', 'partition_number',
                                                shard_count => p_shard_count, colocate_with => 'none');
    INSERT INTO whizbang.wh_partitions (partition_number)
    SELECT p FROM pg_catalog.generate_series(0, 9999) AS p ON CONFLICT DO NOTHING;
    FOREACH tab IN ARRAY ARRAY['wh_partitions', 'wh_inbox_streams', 'wh_inbox_preleased',
                               'wh_outbox', 'wh_outbox_streams', 'wh_outbox_preleased',
                               'wh_message_deduplication', 'wh_dead_letters'] LOOP
        PERFORM pg_catalog.create_distributed_table(pg_catalog.format('whizbang.%I', tab), 'partition_number',
                                                    colocate_with => 'whizbang.wh_inbox');
    END LOOP;
    -- Idempotency keys go by a hash of their scope (Citus hashes the text): one scope, one node.
    PERFORM pg_catalog.create_distributed_table('whizbang.wh_idempotency_keys', 'scope',
                                                shard_count => p_shard_count, colocate_with => 'none');

    -- The coordinator's own copies are empty shells from now on.
    FOREACH tab IN ARRAY ARRAY['wh_setting_defaults', 'wh_settings', 'wh_idempotency_policies',
                               'wh_inbox', 'wh_inbox_streams', 'wh_inbox_preleased', 'wh_outbox',
                               'wh_outbox_streams', 'wh_outbox_preleased', 'wh_message_deduplication',
                               'wh_dead_letters', 'wh_idempotency_keys', 'wh_partitions'] LOOP
        PERFORM pg_catalog.truncate_local_data_after_distributing_table(pg_catalog.format('whizbang.%I', tab));
    END LOOP;

    IF v_dead_letter_seq IS NOT NULL THEN
        SELECT pg_catalog.string_agg(pg_catalog.format('%s:%s: %s', r.nodename, r.nodeport, r.result), '; ')
          INTO failed
          FROM pg_catalog.run_command_on_workers(pg_catalog.format(
                   $c$SELECT pg_catalog.setval('whizbang.wh_dead_letters_dead_letter_id_seq', GREATEST(%s,
                          (SELECT s.last_value FROM whizbang.wh_dead_letters_dead_letter_id_seq s)))$c$,
                   v_dead_letter_seq)) r
         WHERE NOT r.success;
        IF failed IS NOT NULL THEN
            RAISE EXCEPTION 'whizbang.distribute(): a worker''s dead-letter id sequence could not be moved past the restored ids: %', failed
                USING ERRCODE = '55000';
        END IF;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION whizbang._distribution_keys() RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- The partition count of every distributed call (DESIGN §3.4's default).
    c CONSTANT integer := 10000;
    t record;
BEGIN
    -- A table in generations (0.12.0: whizbang was created before citus in this database) is
    -- not distributed: a database with Citus keeps the single table (docs/scaleout.md).
    IF (SELECT r.relkind FROM pg_catalog.pg_class r
         WHERE r.oid OPERATOR(pg_catalog.=) 'whizbang.wh_message_deduplication'::pg_catalog.regclass)
       OPERATOR(pg_catalog.=) 'p' THEN
        RAISE EXCEPTION 'whizbang.wh_message_deduplication is in generations, which Citus does not distribute'
            USING ERRCODE = '55000',
                  DETAIL = 'whizbang was created (or updated to 0.12.0) before the citus extension in this database.',
                  HINT = 'Create the citus extension first, then whizbang: it then keeps one dedup table (docs/scaleout.md).';
    END IF;
    -- A message row carries its partition since 0.14.0 (computed at store with the caller's
    -- p_partition_count); its companions take it from there, and what has none left takes
    -- partition_of(stream or id, 10000).
    UPDATE whizbang.wh_inbox_preleased p SET partition_number = w.partition_number
      FROM whizbang.wh_inbox w
     WHERE p.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) p.message_id
       AND w.consumer OPERATOR(pg_catalog.=) p.consumer;
    UPDATE whizbang.wh_inbox_preleased SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox_preleased p SET partition_number = w.partition_number
      FROM whizbang.wh_outbox w
     WHERE p.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) p.message_id;
    UPDATE whizbang.wh_outbox_preleased SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    -- A stream's rows and its counter: the stream's partition (the work rows' value where the
    -- stream has rows, so that a count other than 10000 still keeps them together).
    UPDATE whizbang.wh_inbox_streams s SET partition_number = w.partition_number
      FROM (SELECT DISTINCT ON (consumer, stream_id) consumer, stream_id, partition_number
              FROM whizbang.wh_inbox WHERE stream_id IS NOT NULL) w
     WHERE s.partition_number IS NULL AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id
       AND w.consumer OPERATOR(pg_catalog.=) s.consumer;
    UPDATE whizbang.wh_inbox_streams SET partition_number = whizbang.partition_of(stream_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox_streams s SET partition_number = w.partition_number
      FROM (SELECT DISTINCT ON (stream_id) stream_id, partition_number
              FROM whizbang.wh_outbox WHERE stream_id IS NOT NULL) w
     WHERE s.partition_number IS NULL AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id;
    UPDATE whizbang.wh_outbox_streams SET partition_number = whizbang.partition_of(stream_id, c)
     WHERE partition_number IS NULL;
    -- Dedup records: the inbox message's partition while it is there; a record whose message
    -- is gone (completed) does not know its stream and takes its id's partition (docs/scaleout.md).
    UPDATE whizbang.wh_message_deduplication d SET partition_number = i.partition_number
      FROM whizbang.wh_inbox i
     WHERE d.partition_number IS NULL AND i.message_id OPERATOR(pg_catalog.=) d.message_id
       AND i.consumer OPERATOR(pg_catalog.=) d.consumer;
    UPDATE whizbang.wh_message_deduplication SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_dead_letters SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), c)
     WHERE partition_number IS NULL;

    FOR t IN SELECT * FROM (VALUES
        ('wh_message_deduplication', 'message_id, consumer, partition_number'),
        ('wh_inbox',                 'message_id, consumer, partition_number'),
        ('wh_inbox_streams',         'stream_id, consumer, partition_number'),
        ('wh_inbox_preleased',       'instance_id, message_id, consumer, partition_number'),
        ('wh_outbox',                'message_id, partition_number'),
        ('wh_outbox_streams',        'stream_id, consumer, partition_number'),
        ('wh_outbox_preleased',      'instance_id, message_id, consumer, partition_number'),
        ('wh_dead_letters',          'dead_letter_id, partition_number')) AS k(tab, cols)
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE whizbang.%I ALTER COLUMN partition_number SET NOT NULL', t.tab);
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_constraint k
                        WHERE k.conrelid OPERATOR(pg_catalog.=) pg_catalog.format('whizbang.%I', t.tab)::pg_catalog.regclass
                          AND k.contype OPERATOR(pg_catalog.=) 'p'
                          AND k.conkey OPERATOR(pg_catalog.@>) ARRAY[(
                              SELECT a.attnum FROM pg_catalog.pg_attribute a
                               WHERE a.attrelid OPERATOR(pg_catalog.=) k.conrelid
                                 AND a.attname OPERATOR(pg_catalog.=) 'partition_number')]) THEN
            EXECUTE pg_catalog.format('ALTER TABLE whizbang.%1$I DROP CONSTRAINT %2$I, ADD CONSTRAINT %2$I PRIMARY KEY (%3$s)',
                                      t.tab, t.tab || '_pkey', t.cols);
        END IF;
    END LOOP;

    DROP TRIGGER IF EXISTS wh_inbox_lease_end ON whizbang.wh_inbox;
    DROP TRIGGER IF EXISTS wh_inbox_lease_truncate ON whizbang.wh_inbox;
    DROP TRIGGER IF EXISTS wh_outbox_lease_end ON whizbang.wh_outbox;
    DROP TRIGGER IF EXISTS wh_outbox_lease_truncate ON whizbang.wh_outbox;
END
$$;

CREATE OR REPLACE FUNCTION whizbang._capability_grants()
RETURNS TABLE (capability text, kind text, object_name text, privileges text)
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.capability, c.kind, c.object_name, c.privileges FROM (VALUES
        -- grant_worker
        ('dedup', 'routine', 'dedup_insert', 'EXECUTE'),
        ('dedup', 'routine', 'dedup_insert_many', 'EXECUTE'),
        ('dedup', 'routine', 'fingerprint', 'EXECUTE'),
        ('dedup', 'routine', 'event_uuid', 'EXECUTE'),
        ('dedup', 'routine', 'uuid_v7', 'EXECUTE'),
        ('dedup', 'routine', 'partition_of', 'EXECUTE'),
        ('dedup', 'routine', 'version', 'EXECUTE'),
        ('dedup', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('dedup', 'table', 'settings', 'SELECT'),
        ('idempotency', 'routine', 'idempotency_begin', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_complete', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_release', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_policy', 'EXECUTE'),
        ('idempotency', 'routine', 'fingerprint', 'EXECUTE'),
        ('idempotency', 'table', 'wh_idempotency_keys', 'SELECT, INSERT, UPDATE, DELETE'),
        ('idempotency', 'sequence', 'wh_idempotency_token_seq', 'USAGE'),
        ('idempotency', 'table', 'wh_idempotency_policies', 'SELECT'),
        ('idempotency', 'table', 'settings', 'SELECT'),
        ('inbox', 'routine', 'store_inbox_messages', 'EXECUTE'),
        ('inbox', 'routine', 'inbox_receive', 'EXECUTE'),
        ('inbox', 'routine', 'claim_work', 'EXECUTE'),
        ('inbox', 'routine', 'complete_work', 'EXECUTE'),
        ('inbox', 'routine', 'fail_work', 'EXECUTE'),
        ('inbox', 'routine', 'renew_leases', 'EXECUTE'),
        ('inbox', 'routine', 'release_work', 'EXECUTE'),
        ('inbox', 'routine', 'partition_of', 'EXECUTE'),
        ('inbox', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('inbox', 'table', 'wh_inbox_preleased', 'SELECT, INSERT, DELETE'),
        ('inbox', 'table', 'wh_dead_letters', 'INSERT'),
        ('inbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('inbox', 'table', 'settings', 'SELECT'),
        ('outbox', 'routine', 'store_outbox_messages', 'EXECUTE'),
        ('outbox', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('outbox', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('outbox', 'table', 'wh_outbox_preleased', 'INSERT'),
        ('outbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('outbox', 'table', 'settings', 'SELECT'),
        ('relay', 'routine', 'claim_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_work', 'EXECUTE'),
        ('relay', 'routine', 'fail_work', 'EXECUTE'),
        ('relay', 'routine', 'renew_leases', 'EXECUTE'),
        ('relay', 'routine', 'release_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_outbox_published', 'EXECUTE'),
        ('relay', 'routine', 'partition_of', 'EXECUTE'),
        ('relay', 'table', 'wh_outbox', 'SELECT, UPDATE, DELETE'),
        ('relay', 'table', 'wh_outbox_preleased', 'SELECT, DELETE'),
        ('relay', 'table', 'wh_dead_letters', 'INSERT'),
        ('relay', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('relay', 'table', 'settings', 'SELECT'),
        -- grant_admin
        ('dead_letters', 'routine', 'retry_dead_letters', 'EXECUTE'),
        ('dead_letters', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('dead_letters', 'table', 'wh_inbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('dead_letters', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('settings', 'table', 'wh_settings', 'SELECT, INSERT, UPDATE, DELETE'),
        ('settings', 'table', 'wh_setting_defaults', 'SELECT'),
        ('settings', 'table', 'settings', 'SELECT'),
        ('policies', 'table', 'wh_idempotency_policies', 'SELECT, INSERT, UPDATE, DELETE'),
        ('maintenance', 'routine', 'perform_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'run_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'cancel_work', 'EXECUTE'),
        ('maintenance', 'table', 'settings', 'SELECT'),
        ('maintenance', 'table', 'wh_inbox', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_message_deduplication', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_idempotency_keys', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_streams', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_streams', 'SELECT, UPDATE, DELETE'),
        ('monitor', 'routine', 'stats', 'EXECUTE'),
        ('monitor', 'routine', 'queues', 'EXECUTE'),
        ('monitor', 'routine', '_leases', 'EXECUTE'),
        ('monitor', 'routine', 'check', 'EXECUTE'),
        ('monitor', 'table', 'stats', 'SELECT'),
        ('monitor', 'table', 'queues', 'SELECT'),
        ('monitor', 'table', 'leases', 'SELECT'),
        ('monitor', 'table', 'wh_inbox', 'SELECT'),
        ('monitor', 'table', 'wh_outbox', 'SELECT'),
        ('monitor', 'table', 'wh_dead_letters', 'SELECT'),
        ('monitor', 'table', 'wh_message_deduplication', 'SELECT'),
        ('monitor', 'table', 'wh_idempotency_keys', 'SELECT'),
        ('monitor', 'table', 'wh_partitions', 'SELECT'),
        ('monitor', 'routine', 'dedup_generations', 'EXECUTE'),
        ('monitor', 'table', 'dedup_generations', 'SELECT'),
        ('monitor', 'routine', 'peek', 'EXECUTE'),
        ('monitor', 'routine', 'lease_store', 'EXECUTE')
    ) AS c(capability, kind, object_name, privileges)
$$;

-- Sealed dedup generations (issue 31 item 3, DESIGN §3.6 "Generations"): maintenance seals a
-- generation whose span has ended and stores a Bloom filter of its keys; a store looks a new id
-- up in a sealed generation's index only when the filter says the id may be there. Sealed means
-- the generation carries the trigger wh_sealed (whizbang._refuse_sealed_write), which refuses
-- every record written into it by SQL; whizbang's own writers unseal it first.
-- ---------------------------------------------------------------------------------------
CREATE TABLE whizbang.wh_dedup_filters (
    generation  pg_catalog.regclass    PRIMARY KEY,
    key_count   bigint                 NOT NULL,
    bit_count   bigint                 NOT NULL,
    hash_count  integer                NOT NULL,
    bits        bytea                  NOT NULL,
    sealed_at   timestamptz            NOT NULL DEFAULT pg_catalog.now()
);
-- Random bits do not compress: stored out of line without trying.
ALTER TABLE whizbang.wh_dedup_filters ALTER COLUMN bits SET STORAGE EXTERNAL;
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_dedup_filters', '');
REVOKE ALL ON whizbang.wh_dedup_filters FROM PUBLIC;

COMMENT ON TABLE whizbang.wh_dedup_filters IS
    'The membership filters of sealed dedup generations (0.14.0): one Bloom filter of the keys '
    '(message_id, consumer) per generation, written by maintenance when it seals the generation and '
    'removed when it is unsealed or dropped. Internal: stores read it, nobody writes it by hand.';
COMMENT ON COLUMN whizbang.wh_dedup_filters.generation IS 'The sealed generation (a partition of whizbang.wh_message_deduplication).';
COMMENT ON COLUMN whizbang.wh_dedup_filters.key_count IS 'The records the generation held when it was sealed.';
COMMENT ON COLUMN whizbang.wh_dedup_filters.bit_count IS 'The size of the filter in bits (10 per key, in whole blocks of 512 bits: a key''s bits lie in one block).';
COMMENT ON COLUMN whizbang.wh_dedup_filters.hash_count IS 'Bits set per key (7: about 1% false positives).';
COMMENT ON COLUMN whizbang.wh_dedup_filters.bits IS 'The filter''s 64-bit words, in the server''s byte order.';
COMMENT ON COLUMN whizbang.wh_dedup_filters.sealed_at IS 'When the generation was sealed.';

CREATE FUNCTION whizbang._refuse_sealed_write()
RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'dedup generation %.% is sealed', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = 'Stores skip a sealed generation whose membership filter lacks an id: a record '
                       'added unseen would let that id be new twice.',
              HINT = format('Unseal it first: SELECT whizbang.unseal_dedup_generation(%L); maintenance seals it again.',
                            TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME);
END
$$;
REVOKE ALL ON FUNCTION whizbang._refuse_sealed_write() FROM PUBLIC;
COMMENT ON FUNCTION whizbang._refuse_sealed_write() IS
    'internal: the trigger wh_sealed of a sealed dedup generation (0.14.0): refuses every record written into it '
    '(INSERT, or an UPDATE of message_id or consumer) with 55000.';

CREATE FUNCTION whizbang.seal_dedup_generations(p_now timestamptz DEFAULT pg_catalog.now())
RETURNS integer
    AS 'MODULE_PATHNAME', 'wb_seal_dedup_generations' LANGUAGE C VOLATILE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang.seal_dedup_generations(timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.seal_dedup_generations(timestamptz) IS
    'Seals the dedup generations whose span ended at or before p_now and that are still in the window, '
    'as perform_maintenance does (0.14.0): waits for their writers, stores a membership filter of each '
    'and gives it the trigger wh_sealed. Returns how many it sealed (a generation whose lock is not '
    'granted is left alone). Errors: 42501 without DELETE on whizbang.wh_message_deduplication (the '
    'maintenance capability), 55000 on a table not in generations.';

CREATE FUNCTION whizbang.unseal_dedup_generation(p_generation pg_catalog.regclass)
RETURNS boolean
    AS 'MODULE_PATHNAME', 'wb_unseal_dedup_generation' LANGUAGE C VOLATILE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang.unseal_dedup_generation(pg_catalog.regclass) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.unseal_dedup_generation(pg_catalog.regclass) IS
    'Unseals a dedup generation (0.14.0) so that SQL may write into it: takes ACCESS EXCLUSIVE on it '
    '(waits for the stores that hold it open, holds the next ones off until the transaction ends), drops '
    'its trigger wh_sealed and its filter. Returns false when it was not sealed. Errors: 22004 NULL '
    'p_generation, 22023 a table that is not a generation, 42501 without DELETE on '
    'whizbang.wh_message_deduplication (the maintenance capability), 55000 on a table not in generations.';

DROP FUNCTION whizbang._update_runs_here();

-- ---------------------------------------------------------------------------------------
-- 0.14.0 -> 0.15.0
-- ---------------------------------------------------------------------------------------

CREATE FUNCTION whizbang.emit_outbox_messages(
    p_messages jsonb,
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, stream_id uuid, emitted boolean)
    AS 'MODULE_PATHNAME', 'wb_emit_outbox_messages' LANGUAGE C VOLATILE ROWS 100;
REVOKE ALL ON FUNCTION whizbang.emit_outbox_messages(jsonb, timestamptz) FROM PUBLIC;
ALTER FUNCTION whizbang.emit_outbox_messages(jsonb, timestamptz) SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION whizbang.emit_outbox_messages(jsonb, timestamptz) IS
    'Emits each element of p_messages (the store_outbox_messages envelope; no ScheduledFor) as a transactional '
    'logical decoding message with the prefix whizbang.outbox, in the caller''s transaction: decoded only if it '
    'commits, relayed by whizbang-relay in commit order; no row is written. One row per input element, emitted '
    'false for an id repeated in the call. Errors: 22004, 22023, 54000, 0A000 (ScheduledFor), 25006, 55000 '
    '(wal_level below logical, or no logical slot in this database); nothing emitted on error.';

-- The relay's slot and publication in one call. pgoutput sends logical decoding messages only
-- to a subscriber that names a publication, so the relay names an empty one; the slot is made
-- first because a transaction that has written (CREATE PUBLICATION writes the catalog) may not
-- create a logical slot.
CREATE FUNCTION whizbang.create_outbox_relay(
    p_slot name DEFAULT 'whizbang_outbox',
    p_publication name DEFAULT 'whizbang_outbox',
    p_failover boolean DEFAULT false)
RETURNS TABLE (slot_name name, publication_name name, lsn pg_lsn)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lsn pg_lsn;
BEGIN
    IF p_slot IS NULL OR p_publication IS NULL OR p_failover IS NULL THEN
        RAISE EXCEPTION 'whizbang.create_outbox_relay: p_slot, p_publication and p_failover must not be null'
            USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.current_setting('wal_level') OPERATOR(pg_catalog.<>) 'logical' THEN
        RAISE EXCEPTION 'whizbang.create_outbox_relay needs wal_level = logical (it is %)',
                        pg_catalog.current_setting('wal_level')
            USING ERRCODE = '55000', HINT = 'Set wal_level = logical and restart the server.';
    END IF;
    IF p_failover THEN
        IF pg_catalog.current_setting('server_version_num')::integer OPERATOR(pg_catalog.<) 170000 THEN
            RAISE EXCEPTION 'whizbang.create_outbox_relay: failover slots need PostgreSQL 17 or later'
                USING ERRCODE = '0A000';
        END IF;
        -- 17's five-argument form, called by name so that the script also loads on 15 and 16
        EXECUTE 'SELECT s.lsn FROM pg_catalog.pg_create_logical_replication_slot($1, ''pgoutput'','
                ' false, false, true) s'
           INTO v_lsn USING p_slot;
    ELSE
        SELECT s.lsn INTO v_lsn
          FROM pg_catalog.pg_create_logical_replication_slot(p_slot, 'pgoutput', false, false) s;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_publication p WHERE p.pubname OPERATOR(pg_catalog.=) p_publication) THEN
        EXECUTE pg_catalog.format('CREATE PUBLICATION %I', p_publication);
    END IF;
    RETURN QUERY SELECT p_slot, p_publication, v_lsn;
END
$$;
REVOKE ALL ON FUNCTION whizbang.create_outbox_relay(name, name, boolean) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.create_outbox_relay(name, name, boolean) IS
    'Creates the logical replication slot (pgoutput, not two_phase; failover on 17+ when p_failover) and the '
    'empty publication that whizbang-relay reads; the slot receives what commits after it was created. Needs '
    'wal_level = logical and a role with REPLICATION (or superuser) and CREATE on the database; must be the '
    'first write of its transaction (docs/outbox.md#the-wal-outbox-0150). Errors: 22004, 55000 (wal_level not '
    'logical), 0A000 (p_failover before PostgreSQL 17), 42710 (the slot exists), 42501.';

CREATE FUNCTION whizbang.drop_outbox_relay(
    p_slot name DEFAULT 'whizbang_outbox',
    p_publication name DEFAULT 'whizbang_outbox')
RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_slot IS NULL OR p_publication IS NULL THEN
        RAISE EXCEPTION 'whizbang.drop_outbox_relay: p_slot and p_publication must not be null'
            USING ERRCODE = '22004';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_replication_slots s WHERE s.slot_name OPERATOR(pg_catalog.=) p_slot) THEN
        PERFORM pg_catalog.pg_drop_replication_slot(p_slot);
    END IF;
    EXECUTE pg_catalog.format('DROP PUBLICATION IF EXISTS %I', p_publication);
END
$$;
REVOKE ALL ON FUNCTION whizbang.drop_outbox_relay(name, name) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.drop_outbox_relay(name, name) IS
    'Drops the relay''s slot and publication (each if it exists). What the slot had not yet confirmed is not '
    'relayed: stop emitting first (docs/outbox.md#the-wal-outbox-0150). Errors: 22004, 55006 (a relay is using '
    'the slot), 42501.';

-- grant_worker's 'outbox' capability covers the WAL path too: emitting is storing by other means.
CREATE OR REPLACE FUNCTION whizbang._capability_grants()
RETURNS TABLE (capability text, kind text, object_name text, privileges text)
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.capability, c.kind, c.object_name, c.privileges FROM (VALUES
        -- grant_worker
        ('dedup', 'routine', 'dedup_insert', 'EXECUTE'),
        ('dedup', 'routine', 'dedup_insert_many', 'EXECUTE'),
        ('dedup', 'routine', 'fingerprint', 'EXECUTE'),
        ('dedup', 'routine', 'event_uuid', 'EXECUTE'),
        ('dedup', 'routine', 'uuid_v7', 'EXECUTE'),
        ('dedup', 'routine', 'partition_of', 'EXECUTE'),
        ('dedup', 'routine', 'version', 'EXECUTE'),
        ('dedup', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('dedup', 'table', 'settings', 'SELECT'),
        ('idempotency', 'routine', 'idempotency_begin', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_complete', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_release', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_policy', 'EXECUTE'),
        ('idempotency', 'routine', 'fingerprint', 'EXECUTE'),
        ('idempotency', 'table', 'wh_idempotency_keys', 'SELECT, INSERT, UPDATE, DELETE'),
        ('idempotency', 'sequence', 'wh_idempotency_token_seq', 'USAGE'),
        ('idempotency', 'table', 'wh_idempotency_policies', 'SELECT'),
        ('idempotency', 'table', 'settings', 'SELECT'),
        ('inbox', 'routine', 'store_inbox_messages', 'EXECUTE'),
        ('inbox', 'routine', 'inbox_receive', 'EXECUTE'),
        ('inbox', 'routine', 'claim_work', 'EXECUTE'),
        ('inbox', 'routine', 'complete_work', 'EXECUTE'),
        ('inbox', 'routine', 'fail_work', 'EXECUTE'),
        ('inbox', 'routine', 'renew_leases', 'EXECUTE'),
        ('inbox', 'routine', 'release_work', 'EXECUTE'),
        ('inbox', 'routine', 'partition_of', 'EXECUTE'),
        ('inbox', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('inbox', 'table', 'wh_inbox_preleased', 'SELECT, INSERT, DELETE'),
        ('inbox', 'table', 'wh_dead_letters', 'INSERT'),
        ('inbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('inbox', 'table', 'settings', 'SELECT'),
        ('outbox', 'routine', 'store_outbox_messages', 'EXECUTE'),
        ('outbox', 'routine', 'emit_outbox_messages', 'EXECUTE'),
        ('outbox', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('outbox', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('outbox', 'table', 'wh_outbox_preleased', 'INSERT'),
        ('outbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('outbox', 'table', 'settings', 'SELECT'),
        ('relay', 'routine', 'claim_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_work', 'EXECUTE'),
        ('relay', 'routine', 'fail_work', 'EXECUTE'),
        ('relay', 'routine', 'renew_leases', 'EXECUTE'),
        ('relay', 'routine', 'release_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_outbox_published', 'EXECUTE'),
        ('relay', 'routine', 'partition_of', 'EXECUTE'),
        ('relay', 'table', 'wh_outbox', 'SELECT, UPDATE, DELETE'),
        ('relay', 'table', 'wh_outbox_preleased', 'SELECT, DELETE'),
        ('relay', 'table', 'wh_dead_letters', 'INSERT'),
        ('relay', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('relay', 'table', 'settings', 'SELECT'),
        -- grant_admin
        ('dead_letters', 'routine', 'retry_dead_letters', 'EXECUTE'),
        ('dead_letters', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('dead_letters', 'table', 'wh_inbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('dead_letters', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('settings', 'table', 'wh_settings', 'SELECT, INSERT, UPDATE, DELETE'),
        ('settings', 'table', 'wh_setting_defaults', 'SELECT'),
        ('settings', 'table', 'settings', 'SELECT'),
        ('policies', 'table', 'wh_idempotency_policies', 'SELECT, INSERT, UPDATE, DELETE'),
        ('maintenance', 'routine', 'perform_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'run_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'cancel_work', 'EXECUTE'),
        ('maintenance', 'table', 'settings', 'SELECT'),
        ('maintenance', 'table', 'wh_inbox', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_message_deduplication', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_idempotency_keys', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_streams', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_streams', 'SELECT, UPDATE, DELETE'),
        ('monitor', 'routine', 'stats', 'EXECUTE'),
        ('monitor', 'routine', 'queues', 'EXECUTE'),
        ('monitor', 'routine', '_leases', 'EXECUTE'),
        ('monitor', 'routine', 'check', 'EXECUTE'),
        ('monitor', 'table', 'stats', 'SELECT'),
        ('monitor', 'table', 'queues', 'SELECT'),
        ('monitor', 'table', 'leases', 'SELECT'),
        ('monitor', 'table', 'wh_inbox', 'SELECT'),
        ('monitor', 'table', 'wh_outbox', 'SELECT'),
        ('monitor', 'table', 'wh_dead_letters', 'SELECT'),
        ('monitor', 'table', 'wh_message_deduplication', 'SELECT'),
        ('monitor', 'table', 'wh_idempotency_keys', 'SELECT'),
        ('monitor', 'table', 'wh_partitions', 'SELECT'),
        ('monitor', 'routine', 'dedup_generations', 'EXECUTE'),
        ('monitor', 'table', 'dedup_generations', 'SELECT'),
        ('monitor', 'routine', 'peek', 'EXECUTE'),
        ('monitor', 'routine', 'lease_store', 'EXECUTE')
    ) AS c(capability, kind, object_name, privileges)
$$;

-- ---------------------------------------------------------------------------------------
-- 0.15.0 -> 0.16.0
-- ---------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------
-- fail_work(..., p_retry_after interval DEFAULT NULL)
-- ---------------------------------------------------------------------------------------
-- A new parameter makes a new function: the 8-argument fail_work is created next to the
-- 7-argument one, takes over every grant the old one carried (_carry_grants, below), and the old
-- one is dropped. Calls without p_retry_after are unchanged.
CREATE FUNCTION whizbang.fail_work(
    p_source text,
    p_message_ids uuid[],
    p_errors text[],
    p_lease_tokens bigint[] DEFAULT NULL,
    p_retryable boolean[] DEFAULT NULL,
    p_consumer text DEFAULT '',
    p_now timestamptz DEFAULT pg_catalog.now(),
    p_retry_after interval DEFAULT NULL)
RETURNS TABLE (message_id uuid, outcome text, scheduled_for timestamptz)
    AS 'MODULE_PATHNAME', 'wb_fail_work' LANGUAGE C VOLATILE ROWS 100
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz, interval)
    FROM PUBLIC;
COMMENT ON FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz, interval) IS
    'Records failed deliveries, keeping p_errors as last_error: one row per id. Outcome: retry_scheduled '
    '(due again at scheduled_for: after the backoff, or after p_retry_after when given, e.g. an HTTP '
    'Retry-After) | dead_lettered (not retryable, or attempts exhausted) | not_found | lease_lost (nothing '
    'changed). Errors: 22004, 22023 (incl. a negative p_retry_after), 2202E, 54000, 22008, 25006, 42501.';

-- Used by this script only (dropped at its end): gives p_new every EXECUTE grant p_old carries
-- and p_old's owner. A grant given by a role other than the owner (one holding the grant
-- option) is given again by that role, so the grantor is kept; those are given once their
-- grantor holds the grant option on the new function.
CREATE FUNCTION whizbang._carry_grants(p_old pg_catalog.regprocedure, p_new pg_catalog.regprocedure)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $carry_grants$
DECLARE
    v_owner pg_catalog.oid;
    v_old_acl pg_catalog.aclitem[];
    v_initial pg_catalog.aclitem[];
    v_updater pg_catalog.name := pg_catalog.current_user();
    v_granted integer;
    v_pass integer;
    g record;
BEGIN
    SELECT p.proowner, coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner)) INTO v_owner, v_old_acl
      FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) p_old::pg_catalog.oid;
    IF v_owner OPERATOR(pg_catalog.<>) (SELECT p.proowner FROM pg_catalog.pg_proc p
                                         WHERE p.oid OPERATOR(pg_catalog.=) p_new::pg_catalog.oid) THEN
        EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO %I', p_new, pg_catalog.pg_get_userbyid(v_owner));
    END IF;
    -- What a fresh install leaves: the owner's EXECUTE only. It is the function's initial
    -- privilege (pg_init_privs, below).
    SELECT p.proacl INTO v_initial FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) p_new::pg_catalog.oid;

    -- A chain of grantors is at most as long as the list, so passes that many at most.
    FOR v_pass IN 1 .. pg_catalog.cardinality(v_old_acl) LOOP
        v_granted := 0;
        FOR g IN
            SELECT a.grantor, a.grantee, a.is_grantable
              FROM pg_catalog.aclexplode(v_old_acl) a
             WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
               -- not there yet (or there without the grant option the old one had)
               AND NOT EXISTS (SELECT FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) b
                                WHERE p.oid OPERATOR(pg_catalog.=) p_new::pg_catalog.oid
                                  AND b.grantor OPERATOR(pg_catalog.=) a.grantor
                                  AND b.grantee OPERATOR(pg_catalog.=) a.grantee
                                  AND (b.is_grantable OR NOT a.is_grantable))
               -- its grantor may give it by now
               AND (a.grantor OPERATOR(pg_catalog.=) v_owner
                    OR EXISTS (SELECT FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) b
                                WHERE p.oid OPERATOR(pg_catalog.=) p_new::pg_catalog.oid
                                  AND b.grantee OPERATOR(pg_catalog.=) a.grantor AND b.is_grantable))
        LOOP
            IF g.grantor OPERATOR(pg_catalog.<>) v_owner THEN
                EXECUTE pg_catalog.format('SET LOCAL ROLE %I', pg_catalog.pg_get_userbyid(g.grantor));
            END IF;
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', p_new,
                CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                     ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END,
                CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
            IF g.grantor OPERATOR(pg_catalog.<>) v_owner THEN
                EXECUTE pg_catalog.format('SET LOCAL ROLE %I', v_updater);
            END IF;
            v_granted := v_granted OPERATOR(pg_catalog.+) 1;
        END LOOP;
        EXIT WHEN v_granted OPERATOR(pg_catalog.=) 0;
    END LOOP;
    -- An owner who had revoked its own EXECUTE stays without it.
    IF NOT EXISTS (SELECT FROM pg_catalog.aclexplode(v_old_acl) a
                    WHERE a.grantee OPERATOR(pg_catalog.=) v_owner AND a.grantor OPERATOR(pg_catalog.=) v_owner) THEN
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %I', p_new, pg_catalog.pg_get_userbyid(v_owner));
    END IF;

    -- A GRANT run by an extension script is recorded as the extension's initial privilege
    -- (pg_init_privs), and pg_dump dumps only the grants that differ from those: left so, the
    -- users' grants would vanish from their dumps. The initial privileges are what a fresh
    -- install records, the users' grants stay theirs.
    UPDATE pg_catalog.pg_init_privs i SET initprivs = v_initial
     WHERE i.objoid OPERATOR(pg_catalog.=) p_new::pg_catalog.oid
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND i.objsubid OPERATOR(pg_catalog.=) 0;
END
$carry_grants$;

SELECT whizbang._carry_grants(
    'whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz)',
    'whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz, interval)');
DROP FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz);
DROP FUNCTION whizbang._carry_grants(pg_catalog.regprocedure, pg_catalog.regprocedure);

-- ---------------------------------------------------------------------------------------
-- requeue, reschedule: an operator moves named work to a new due time
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang.requeue(
    p_source text,
    p_message_ids uuid[],
    p_consumer text DEFAULT '',
    p_take_over boolean DEFAULT false,
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, outcome text, scheduled_for timestamptz)
    AS 'MODULE_PATHNAME', 'wb_requeue' LANGUAGE C VOLATILE ROWS 100
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang.requeue(text, uuid[], text, boolean, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.requeue(text, uuid[], text, boolean, timestamptz) IS
    'Makes named pending or scheduled work due now: at p_now, or at its own earlier due time (attempts and stream '
    'order kept): one row per element, in input order. Outcome: requeued (scheduled_for: the due time) | leased (under a live lease: unchanged; '
    'p_take_over => true ends that lease, its holder''s token then answers lease_lost) | not_found (unknown, '
    'completed, dead-lettered, another consumer''s). p_consumer is ignored for the outbox. Errors: 22004, 22023, '
    '2202E, 54000, 25006, 42501.';

CREATE FUNCTION whizbang.reschedule(
    p_source text,
    p_message_ids uuid[],
    p_at timestamptz,
    p_consumer text DEFAULT '',
    p_take_over boolean DEFAULT false,
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, outcome text, scheduled_for timestamptz)
    AS 'MODULE_PATHNAME', 'wb_reschedule' LANGUAGE C VOLATILE ROWS 100
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang.reschedule(text, uuid[], timestamptz, text, boolean, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.reschedule(text, uuid[], timestamptz, text, boolean, timestamptz) IS
    'Makes named work due at p_at, earlier or later (attempts and stream order kept: a later time on a stream''s '
    'head holds the stream back): one row per element, in input order. Outcome: rescheduled (scheduled_for = '
    'p_at) | leased (under a live lease: unchanged unless p_take_over) | not_found. Errors: 22004 (incl. NULL '
    'p_at), 22023 (p_at not finite), 2202E, 54000, 25006, 42501.';

-- ---------------------------------------------------------------------------------------
-- Dead letters: discarded by id or by filter, retried by filter
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang.discard_dead_letters(p_dead_letter_ids bigint[])
RETURNS integer LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_position integer;
    v_count integer;
BEGIN
    IF pg_catalog.array_ndims(p_dead_letter_ids) OPERATOR(pg_catalog.>) 1 THEN
        RAISE EXCEPTION 'p_dead_letter_ids must be a one-dimensional array' USING ERRCODE = '2202E',
            DETAIL = pg_catalog.format('It has %s dimensions.', pg_catalog.array_ndims(p_dead_letter_ids));
    END IF;
    IF pg_catalog.cardinality(p_dead_letter_ids) OPERATOR(pg_catalog.>) 1000000 THEN
        RAISE EXCEPTION 'p_dead_letter_ids has % elements, more than the limit of 1000000 per call',
            pg_catalog.cardinality(p_dead_letter_ids) USING ERRCODE = '54000', HINT = 'Split the batch into several calls.';
    END IF;
    v_position := pg_catalog.array_position(p_dead_letter_ids, NULL);
    IF v_position IS NOT NULL THEN
        RAISE EXCEPTION 'p_dead_letter_ids[%] must not be null', v_position USING ERRCODE = '22004';
    END IF;
    DELETE FROM whizbang.wh_dead_letters d
     WHERE d.dead_letter_id OPERATOR(pg_catalog.=) ANY (p_dead_letter_ids);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION whizbang.discard_dead_letters(bigint[]) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.discard_dead_letters(bigint[]) IS
    'Deletes the dead letters named by id and returns how many there were; unknown and repeated ids are no-ops, '
    'NULL or empty input returns 0. An inbox message''s dedup record stays until its retention ends, so a '
    'redelivery is still a duplicate. Errors: 22004 a NULL element, 2202E a multidimensional array, 54000 over '
    '1,000,000 ids, 42501.';

-- The dead letters a filter selects, oldest id first: every filter given must match; at least one
-- is required, so that no call acts on every dead letter by mistake.
CREATE FUNCTION whizbang._dead_letters_matching(
    p_function text,
    p_source text,
    p_consumer text,
    p_message_type text,
    p_dead_lettered_before timestamptz,
    p_dead_lettered_after timestamptz,
    p_limit integer)
RETURNS bigint[] LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF p_source IS NULL AND p_consumer IS NULL AND p_message_type IS NULL
       AND p_dead_lettered_before IS NULL AND p_dead_lettered_after IS NULL THEN
        RAISE EXCEPTION 'whizbang.%: name at least one filter', p_function USING ERRCODE = '22023',
            HINT = 'To act on every dead letter of a source, pass p_source => ''inbox'' or ''outbox''.';
    END IF;
    IF p_source IS NOT NULL AND p_source OPERATOR(pg_catalog.<>) ALL (ARRAY['inbox', 'outbox']) THEN
        RAISE EXCEPTION 'p_source must be ''inbox'' or ''outbox'' (or NULL for both), not %',
            pg_catalog.quote_literal(p_source) USING ERRCODE = '22023';
    END IF;
    IF p_limit OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'p_limit must be at least 1 (NULL: no limit)' USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.isfinite(p_dead_lettered_before) IS FALSE OR pg_catalog.isfinite(p_dead_lettered_after) IS FALSE THEN
        RAISE EXCEPTION 'p_dead_lettered_before and p_dead_lettered_after must be finite timestamps'
            USING ERRCODE = '22023';
    END IF;
    RETURN ARRAY(
        SELECT d.dead_letter_id FROM whizbang.wh_dead_letters d
         WHERE (p_source IS NULL OR d.source OPERATOR(pg_catalog.=) p_source)
           AND (p_consumer IS NULL OR d.consumer OPERATOR(pg_catalog.=) p_consumer)
           AND (p_message_type IS NULL OR d.message_type OPERATOR(pg_catalog.=) p_message_type)
           AND (p_dead_lettered_before IS NULL OR d.dead_lettered_at OPERATOR(pg_catalog.<) p_dead_lettered_before)
           AND (p_dead_lettered_after IS NULL OR d.dead_lettered_at OPERATOR(pg_catalog.>=) p_dead_lettered_after)
         ORDER BY d.dead_letter_id
         LIMIT p_limit);
END
$$;
REVOKE ALL ON FUNCTION whizbang._dead_letters_matching(text, text, text, text, timestamptz, timestamptz, integer)
    FROM PUBLIC;
COMMENT ON FUNCTION whizbang._dead_letters_matching(text, text, text, text, timestamptz, timestamptz, integer) IS
    'internal: the ids of the dead letters that discard_dead_letters_matching / retry_dead_letters_matching act on.';

CREATE FUNCTION whizbang.discard_dead_letters_matching(
    p_source text DEFAULT NULL,
    p_consumer text DEFAULT NULL,
    p_message_type text DEFAULT NULL,
    p_dead_lettered_before timestamptz DEFAULT NULL,
    p_dead_lettered_after timestamptz DEFAULT NULL,
    p_limit integer DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ids bigint[] := whizbang._dead_letters_matching('discard_dead_letters_matching', p_source, p_consumer,
                                                      p_message_type, p_dead_lettered_before, p_dead_lettered_after,
                                                      p_limit);
    v_count integer;
BEGIN
    -- By id, as selected: one statement a Citus coordinator sends to the shards as it is.
    DELETE FROM whizbang.wh_dead_letters d WHERE d.dead_letter_id OPERATOR(pg_catalog.=) ANY (v_ids);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION whizbang.discard_dead_letters_matching(text, text, text, timestamptz, timestamptz, integer)
    FROM PUBLIC;
COMMENT ON FUNCTION whizbang.discard_dead_letters_matching(text, text, text, timestamptz, timestamptz, integer) IS
    'Deletes the dead letters that match every filter given (p_source, p_consumer, p_message_type, dead-lettered '
    'before p_dead_lettered_before / at or after p_dead_lettered_after), at most p_limit of them oldest first, and '
    'returns how many. At least one filter is required. Errors: 22023 no filter, an unknown p_source, p_limit below 1, '
    'a timestamp not finite; 42501.';

CREATE FUNCTION whizbang.retry_dead_letters_matching(
    p_source text DEFAULT NULL,
    p_consumer text DEFAULT NULL,
    p_message_type text DEFAULT NULL,
    p_dead_lettered_before timestamptz DEFAULT NULL,
    p_dead_lettered_after timestamptz DEFAULT NULL,
    p_limit integer DEFAULT NULL)
RETURNS integer LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
RETURN whizbang.retry_dead_letters(whizbang._dead_letters_matching(
    'retry_dead_letters_matching', p_source, p_consumer, p_message_type, p_dead_lettered_before,
    p_dead_lettered_after, p_limit));
REVOKE ALL ON FUNCTION whizbang.retry_dead_letters_matching(text, text, text, timestamptz, timestamptz, integer)
    FROM PUBLIC;
COMMENT ON FUNCTION whizbang.retry_dead_letters_matching(text, text, text, timestamptz, timestamptz, integer) IS
    'Puts the dead letters that match every filter given back as fresh work, as retry_dead_letters does (oldest '
    'first, at most p_limit, at most 1,000,000 per call), and returns how many went back. At least one filter is '
    'required. Errors: 22023 no filter, an unknown p_source, p_limit below 1, a timestamp not finite; 54000 over '
    '1,000,000 matches (pass p_limit); 42501.';

-- ---------------------------------------------------------------------------------------
-- Retry policy per consumer (issue 33 item 4)
-- ---------------------------------------------------------------------------------------
-- One row per (source, consumer) with a policy of its own; each NULL column is the database
-- setting. Read by claims (max_attempts: a row past it is dead-lettered) and fail_work (all of
-- it), as the extension's owner: the roles that claim and fail work need no grant on it.
CREATE TABLE whizbang.wh_retry_policies (
    source               text NOT NULL CHECK (source IN ('inbox', 'outbox')),
    consumer             text COLLATE "C" NOT NULL DEFAULT ''
                              CHECK (pg_catalog.octet_length(consumer) OPERATOR(pg_catalog.<=) 1024),
    max_attempts         integer CHECK (max_attempts BETWEEN 1 AND 1000000),
    retry_base_seconds   integer CHECK (retry_base_seconds BETWEEN 0 AND 31536000),
    retry_max_seconds    integer CHECK (retry_max_seconds BETWEEN 0 AND 31536000),
    retry_jitter_percent integer CHECK (retry_jitter_percent BETWEEN 0 AND 100),
    description          text,
    PRIMARY KEY (source, consumer),
    CONSTRAINT wh_retry_policies_outbox_consumer CHECK (source OPERATOR(pg_catalog.=) 'inbox' OR consumer OPERATOR(pg_catalog.=) '')
);

-- Backends cache the policies; a committed change drops those caches.
CREATE TRIGGER wh_retry_policies_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON whizbang.wh_retry_policies
    FOR EACH STATEMENT EXECUTE FUNCTION whizbang._table_changed();
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_retry_policies', '');

COMMENT ON TABLE whizbang.wh_retry_policies IS
    'Retry policy per source and consumer (0.16.0): each column overrides the database setting of the same name '
    'for that consumer''s work (NULL: the setting). Read by claim_work (max_attempts) and fail_work (all). The '
    'outbox has one consumer, ''''.';
COMMENT ON COLUMN whizbang.wh_retry_policies.source IS 'inbox or outbox.';
COMMENT ON COLUMN whizbang.wh_retry_policies.consumer IS 'The inbox consumer the row applies to (exact, byte for byte; '''' for the outbox).';
COMMENT ON COLUMN whizbang.wh_retry_policies.max_attempts IS
    'Deliveries of one message before it is dead-lettered (1..1000000; NULL: the max_attempts setting).';
COMMENT ON COLUMN whizbang.wh_retry_policies.retry_base_seconds IS
    'First retry delay, doubled per attempt (0..31536000; NULL: the retry_base_seconds setting).';
COMMENT ON COLUMN whizbang.wh_retry_policies.retry_max_seconds IS
    'Cap of the retry delay (0..31536000; NULL: the retry_max_seconds setting).';
COMMENT ON COLUMN whizbang.wh_retry_policies.retry_jitter_percent IS
    'Random share of each retry delay: the delay is multiplied by a factor in [1 - percent/100, 1] (0..100; '
    'NULL: 25).';
COMMENT ON COLUMN whizbang.wh_retry_policies.description IS 'Free text.';
COMMENT ON TRIGGER wh_retry_policies_changed ON whizbang.wh_retry_policies IS
    'Drops the backends'' cached policies when a change commits.';

-- A distributed install: the policies are a reference table, on every node, as the settings.
CREATE OR REPLACE FUNCTION whizbang.distribute(p_shard_count integer DEFAULT 32) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    failed text;
    tab text;
    v_dead_letter_seq bigint;
BEGIN
    IF p_shard_count IS NULL THEN
        RAISE EXCEPTION 'p_shard_count must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF p_shard_count < 1 OR p_shard_count > 64000 THEN
        RAISE EXCEPTION 'p_shard_count must be between 1 and 64000, not %', p_shard_count USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RAISE EXCEPTION 'whizbang.distribute() needs the citus extension in this database'
            USING ERRCODE = '55000', HINT = 'docs/scaleout.md shows how to set up a Citus cluster.';
    END IF;
    IF NOT pg_catalog.citus_is_coordinator() THEN
        RAISE EXCEPTION 'whizbang.distribute() runs on the Citus coordinator' USING ERRCODE = '55000';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
                WHERE logicalrelid OPERATOR(pg_catalog.=) 'whizbang.wh_inbox'::pg_catalog.regclass) THEN
        -- An install distributed before 0.16.0: the update made the retry policies' table on every
        -- node, each its own; it is shared from here on (the coordinator's rows are copied).
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition
                        WHERE logicalrelid OPERATOR(pg_catalog.=) 'whizbang.wh_retry_policies'::pg_catalog.regclass) THEN
            PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
            PERFORM pg_catalog.create_reference_table('whizbang.wh_retry_policies');
            PERFORM pg_catalog.truncate_local_data_after_distributing_table('whizbang.wh_retry_policies');
            RAISE NOTICE 'whizbang: wh_retry_policies is a reference table now, on every node';
            RETURN;
        END IF;
        RAISE NOTICE 'whizbang is distributed already';
        RETURN;
    END IF;

    -- Dead letters restored from a dump of a cluster (docs/scaleout.md "Backup"): their ids came
    -- from that cluster's nodes, each made of the node's group id (the top 16 bits) and the node's
    -- own sequence, which no dump holds. A fresh cluster's nodes have the same group ids and start
    -- their sequences at 1, so they must start past the restored ids, or two dead letters share one.
    SELECT pg_catalog.max(d.dead_letter_id OPERATOR(pg_catalog.&) 281474976710655) INTO v_dead_letter_seq
      FROM whizbang.wh_dead_letters d;

    PERFORM whizbang._distribution_keys();
    -- The workers' whizbang tables (Citus keeps them as the shells of the extension's tables)
    -- must have the same keys before Citus creates the shards.
    SELECT pg_catalog.string_agg(pg_catalog.format('%s:%s: %s', r.nodename, r.nodeport, r.result), '; ')
      INTO failed
      FROM pg_catalog.run_command_on_workers('SELECT whizbang._distribution_keys()') r
     WHERE NOT r.success;
    IF failed IS NOT NULL THEN
        RAISE EXCEPTION 'whizbang.distribute(): a worker could not take the distribution keys: %', failed
            USING ERRCODE = '55000', HINT = 'Every node needs whizbang at the coordinator''s version.';
    END IF;

    -- The settings' validation and cache triggers go with the reference tables (Citus asks
    -- for this setting to keep triggers on a distributed table).
    PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    PERFORM pg_catalog.create_reference_table('whizbang.wh_setting_defaults');
    -- The rows were validated when written; copying them to the placements must not run the
    -- validation again (its INSERT-of-a-known-key path writes wh_settings from inside the copy).
    ALTER TABLE whizbang.wh_settings DISABLE TRIGGER wh_settings_validate;
    PERFORM pg_catalog.create_reference_table('whizbang.wh_settings');
    ALTER TABLE whizbang.wh_settings ENABLE TRIGGER wh_settings_validate;
    PERFORM pg_catalog.create_reference_table('whizbang.wh_idempotency_policies');
    PERFORM pg_catalog.create_reference_table('whizbang.wh_retry_policies');

    PERFORM pg_catalog.create_distributed_table('whizbang.wh_inbox', 'partition_number',
                                                shard_count => p_shard_count, colocate_with => 'none');
    INSERT INTO whizbang.wh_partitions (partition_number)
    SELECT p FROM pg_catalog.generate_series(0, 9999) AS p ON CONFLICT DO NOTHING;
    FOREACH tab IN ARRAY ARRAY['wh_partitions', 'wh_inbox_streams', 'wh_inbox_preleased',
                               'wh_outbox', 'wh_outbox_streams', 'wh_outbox_preleased',
                               'wh_message_deduplication', 'wh_dead_letters'] LOOP
        PERFORM pg_catalog.create_distributed_table(pg_catalog.format('whizbang.%I', tab), 'partition_number',
                                                    colocate_with => 'whizbang.wh_inbox');
    END LOOP;
    -- Idempotency keys go by a hash of their scope (Citus hashes the text): one scope, one node.
    PERFORM pg_catalog.create_distributed_table('whizbang.wh_idempotency_keys', 'scope',
                                                shard_count => p_shard_count, colocate_with => 'none');

    -- The coordinator's own copies are empty shells from now on.
    FOREACH tab IN ARRAY ARRAY['wh_setting_defaults', 'wh_settings', 'wh_idempotency_policies', 'wh_retry_policies',
                               'wh_inbox', 'wh_inbox_streams', 'wh_inbox_preleased', 'wh_outbox',
                               'wh_outbox_streams', 'wh_outbox_preleased', 'wh_message_deduplication',
                               'wh_dead_letters', 'wh_idempotency_keys', 'wh_partitions'] LOOP
        PERFORM pg_catalog.truncate_local_data_after_distributing_table(pg_catalog.format('whizbang.%I', tab));
    END LOOP;

    IF v_dead_letter_seq IS NOT NULL THEN
        SELECT pg_catalog.string_agg(pg_catalog.format('%s:%s: %s', r.nodename, r.nodeport, r.result), '; ')
          INTO failed
          FROM pg_catalog.run_command_on_workers(pg_catalog.format(
                   $c$SELECT pg_catalog.setval('whizbang.wh_dead_letters_dead_letter_id_seq', GREATEST(%s,
                          (SELECT s.last_value FROM whizbang.wh_dead_letters_dead_letter_id_seq s)))$c$,
                   v_dead_letter_seq)) r
         WHERE NOT r.success;
        IF failed IS NOT NULL THEN
            RAISE EXCEPTION 'whizbang.distribute(): a worker''s dead-letter id sequence could not be moved past the restored ids: %', failed
                USING ERRCODE = '55000';
        END IF;
    END IF;
END
$$;

-- An install distributed before this update: the table can become a reference table only once
-- every node has it, and Citus updates the workers after the coordinator. Until the operator runs
-- whizbang.distribute() again (docs/scaleout.md; check() says so), every node reads its own,
-- empty copy: the database settings apply everywhere.
DO $$
DECLARE
    v_distributed boolean := false;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT pg_catalog.citus_is_coordinator() AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox''::pg_catalog.regclass)'
           INTO v_distributed;
    END IF;
    IF v_distributed THEN
        RAISE NOTICE 'whizbang 0.16.0: run SELECT whizbang.distribute() once every node is updated, so that the retry '
                     'policies (wh_retry_policies) are shared by every node';
    END IF;
END
$$;

-- ---------------------------------------------------------------------------------------
-- Throughput counters per source and consumer (issue 33 item 6)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang._counters()
RETURNS TABLE (source text, consumer text, stored bigint, claimed bigint, completed bigint, failed bigint,
               dead_lettered bigint)
    AS 'MODULE_PATHNAME', 'wb_counters' LANGUAGE C VOLATILE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang._counters() FROM PUBLIC;
COMMENT ON FUNCTION whizbang._counters() IS
    'internal: this server''s throughput counters for this database (shared memory; no rows without '
    'shared_preload_libraries = whizbang); counters() adds up every node''s on a Citus coordinator.';

-- On a distributed install the work is counted where it runs, on the nodes: the coordinator adds
-- up its own and every worker's (a node that cannot be reached is left out, with a NOTICE).
CREATE FUNCTION whizbang.counters()
RETURNS TABLE (source text, consumer text, stored bigint, claimed bigint, completed bigint, failed bigint,
               dead_lettered bigint)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_distributed boolean := false;
    v_unreachable bigint;
    v_results text[];
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT pg_catalog.citus_is_coordinator() AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox''::pg_catalog.regclass)'
           INTO v_distributed;
    END IF;
    IF NOT v_distributed THEN
        RETURN QUERY SELECT c.source, c.consumer, c.stored, c.claimed, c.completed, c.failed, c.dead_lettered
                       FROM whizbang._counters() c ORDER BY 1, 2;
        RETURN;
    END IF;
    EXECUTE $q$SELECT pg_catalog.array_agg(r.result) FILTER (WHERE r.success),
                      pg_catalog.count(*) FILTER (WHERE NOT r.success)
                 FROM pg_catalog.run_command_on_workers(
                        'SELECT COALESCE(pg_catalog.json_agg(c), ''[]'') FROM whizbang._counters() c') r$q$
       INTO v_results, v_unreachable;
    IF v_unreachable OPERATOR(pg_catalog.>) 0 THEN
        RAISE NOTICE 'whizbang: counters() could not reach % node(s); their counts are missing', v_unreachable;
    END IF;
    RETURN QUERY
    SELECT a.source, a.consumer, pg_catalog.sum(a.stored)::bigint, pg_catalog.sum(a.claimed)::bigint,
           pg_catalog.sum(a.completed)::bigint, pg_catalog.sum(a.failed)::bigint, pg_catalog.sum(a.dead_lettered)::bigint
      FROM (SELECT c.source, c.consumer, c.stored, c.claimed, c.completed, c.failed, c.dead_lettered
              FROM whizbang._counters() c
            UNION ALL
            SELECT x.source, x.consumer, x.stored, x.claimed, x.completed, x.failed, x.dead_lettered
              FROM pg_catalog.unnest(v_results) AS n(result),
                   LATERAL pg_catalog.jsonb_to_recordset(n.result::pg_catalog.jsonb)
                       AS x(source text, consumer text, stored bigint, claimed bigint, completed bigint, failed bigint,
                            dead_lettered bigint)) a
     GROUP BY a.source, a.consumer
     ORDER BY 1, 2;
END
$$;
REVOKE ALL ON FUNCTION whizbang.counters() FROM PUBLIC;
COMMENT ON FUNCTION whizbang.counters() IS
    'Throughput per source and consumer since the server started: messages stored, claimed (deliveries), completed, '
    'failed (fail_work calls'' ids) and dead-lettered, monotonic (a restart starts them at 0 again); a transaction''s '
    'counts are added when it commits. consumer NULL: the consumers beyond whizbang.max_counted_consumers, together. '
    'Needs shared_preload_libraries = whizbang (no rows without it). On a Citus coordinator: every node''s, added up. '
    'Errors: 42501 (a missing grant).';

CREATE VIEW whizbang.counters AS
    SELECT c.source, c.consumer, c.stored, c.claimed, c.completed, c.failed, c.dead_lettered FROM whizbang.counters() c;
REVOKE ALL ON whizbang.counters FROM PUBLIC;
COMMENT ON VIEW whizbang.counters IS 'whizbang.counters(): throughput per source and consumer since the server started.';
COMMENT ON COLUMN whizbang.counters.source IS 'inbox or outbox.';
COMMENT ON COLUMN whizbang.counters.consumer IS
    'The inbox consumer ('''' for the outbox); NULL: the consumers beyond whizbang.max_counted_consumers, together.';
COMMENT ON COLUMN whizbang.counters.stored IS 'Messages stored as work (duplicates not; retried dead letters too).';
COMMENT ON COLUMN whizbang.counters.claimed IS 'Deliveries handed out by claim_work.';
COMMENT ON COLUMN whizbang.counters.completed IS 'Messages completed (complete_work, complete_outbox_published).';
COMMENT ON COLUMN whizbang.counters.failed IS 'Failed deliveries reported by fail_work (retried or dead-lettered).';
COMMENT ON COLUMN whizbang.counters.dead_lettered IS 'Messages moved to wh_dead_letters (by fail_work or by a claim).';

-- check() reports whether the retry policies are shared on a distributed install.
CREATE OR REPLACE FUNCTION whizbang.check()
RETURNS TABLE (item text, ok boolean, detail text)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_distributed boolean := false;
    v_have integer[];
    v_missing integer[];
    v_missing_count integer;
    v_extra bigint;
    v_owner oid;
    v_holders text[];
    v_groups bigint;
BEGIN
    SELECT e.extowner INTO v_owner FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'whizbang';
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox''::pg_catalog.regclass)'
           INTO v_distributed;
    END IF;

    item := 'distributed'; ok := true;
    detail := CASE WHEN v_distributed THEN 'whizbang''s tables are Citus tables (docs/scaleout.md)'
                   ELSE 'a single server' END;
    RETURN NEXT;

    -- Every privilege that changes the routing state (reading wh_partitions is harmless: a
    -- monitoring role's check() does), held by a role that is not the extension's owner.
    SELECT pg_catalog.array_agg(DISTINCT h ORDER BY h) INTO v_holders FROM (
        SELECT pg_catalog.format('%s on wh_partitions: %s',
                   CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
                   a.privilege_type) AS h
          FROM pg_catalog.pg_class c, LATERAL pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) 'whizbang.wh_partitions'::pg_catalog.regclass
           AND a.grantee OPERATOR(pg_catalog.<>) v_owner
           AND a.privilege_type OPERATOR(pg_catalog.<>) 'SELECT'
        UNION ALL
        SELECT pg_catalog.format('%s on %s: EXECUTE',
                   CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
                   p.oid::pg_catalog.regprocedure)
          FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
         WHERE p.pronamespace OPERATOR(pg_catalog.=) 'whizbang'::pg_catalog.regnamespace
           AND p.proname OPERATOR(pg_catalog.=) '_on_shard'
           AND a.grantee OPERATOR(pg_catalog.<>) v_owner) s;
    item := 'routing privileges';
    ok := v_holders IS NULL;
    detail := CASE WHEN ok THEN 'only the extension''s owner may change routing rows or call _on_shard'
                   ELSE 'revoke: ' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(v_holders, '; ') END;
    RETURN NEXT;

    IF v_distributed THEN
        SELECT pg_catalog.array_agg(p.partition_number) INTO v_have FROM whizbang.wh_partitions p;
        SELECT pg_catalog.count(*)::integer,
               (pg_catalog.array_agg(g.n ORDER BY g.n))[1:20]
          INTO v_missing_count, v_missing
          FROM pg_catalog.generate_series(0, 9999) AS g(n)
          LEFT JOIN pg_catalog.unnest(v_have) AS h(p) ON h.p OPERATOR(pg_catalog.=) g.n
         WHERE h.p IS NULL;
        SELECT pg_catalog.count(*) INTO v_extra
          FROM pg_catalog.unnest(v_have) AS h(p)
         WHERE h.p IS NULL OR h.p OPERATOR(pg_catalog.<) 0 OR h.p OPERATOR(pg_catalog.>) 9999;
        item := 'routing rows';
        ok := v_missing_count OPERATOR(pg_catalog.=) 0 AND v_extra OPERATOR(pg_catalog.=) 0;
        detail := CASE WHEN ok THEN '10000 partitions, each with its routing row'
                       ELSE pg_catalog.format('%s of the partitions 0..9999 have no routing row (first: %s), '
                                              '%s rows are outside 0..9999; restore with INSERT INTO '
                                              'whizbang.wh_partitions SELECT g FROM pg_catalog.generate_series(0, 9999) g '
                                              'ON CONFLICT DO NOTHING',
                                              v_missing_count, pg_catalog.array_to_string(v_missing, ', '), v_extra) END;
        RETURN NEXT;

        EXECUTE 'SELECT pg_catalog.count(DISTINCT p.colocationid) FROM pg_catalog.pg_dist_partition p'
                ' JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.logicalrelid'
                ' WHERE c.relnamespace OPERATOR(pg_catalog.=) ''whizbang''::pg_catalog.regnamespace'
                '   AND p.partmethod OPERATOR(pg_catalog.=) ''h'''
                '   AND c.relname OPERATOR(pg_catalog.<>) ''wh_idempotency_keys'''
           INTO v_groups;
        item := 'colocation';
        ok := v_groups OPERATOR(pg_catalog.=) 1;
        detail := pg_catalog.format('the distributed work tables are in %s colocation group(s); routing needs 1', v_groups);
        RETURN NEXT;

        -- 0.16.0's retry policies on an install distributed before it (the update cannot share them).
        item := 'retry policies';
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_retry_policies''::pg_catalog.regclass)'
           INTO ok;
        detail := CASE WHEN ok THEN 'wh_retry_policies is a reference table: every node applies the same policies'
                       ELSE 'wh_retry_policies is not shared yet (an install distributed before 0.16.0): run SELECT '
                            'whizbang.distribute() on the coordinator once every node is updated' END;
        RETURN NEXT;
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION whizbang._capability_grants()
RETURNS TABLE (capability text, kind text, object_name text, privileges text)
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.capability, c.kind, c.object_name, c.privileges FROM (VALUES
        -- grant_worker
        ('dedup', 'routine', 'dedup_insert', 'EXECUTE'),
        ('dedup', 'routine', 'dedup_insert_many', 'EXECUTE'),
        ('dedup', 'routine', 'fingerprint', 'EXECUTE'),
        ('dedup', 'routine', 'event_uuid', 'EXECUTE'),
        ('dedup', 'routine', 'uuid_v7', 'EXECUTE'),
        ('dedup', 'routine', 'partition_of', 'EXECUTE'),
        ('dedup', 'routine', 'version', 'EXECUTE'),
        ('dedup', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('dedup', 'table', 'settings', 'SELECT'),
        ('idempotency', 'routine', 'idempotency_begin', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_complete', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_release', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_policy', 'EXECUTE'),
        ('idempotency', 'routine', 'fingerprint', 'EXECUTE'),
        ('idempotency', 'table', 'wh_idempotency_keys', 'SELECT, INSERT, UPDATE, DELETE'),
        ('idempotency', 'sequence', 'wh_idempotency_token_seq', 'USAGE'),
        ('idempotency', 'table', 'wh_idempotency_policies', 'SELECT'),
        ('idempotency', 'table', 'settings', 'SELECT'),
        ('inbox', 'routine', 'store_inbox_messages', 'EXECUTE'),
        ('inbox', 'routine', 'inbox_receive', 'EXECUTE'),
        ('inbox', 'routine', 'claim_work', 'EXECUTE'),
        ('inbox', 'routine', 'complete_work', 'EXECUTE'),
        ('inbox', 'routine', 'fail_work', 'EXECUTE'),
        ('inbox', 'routine', 'renew_leases', 'EXECUTE'),
        ('inbox', 'routine', 'release_work', 'EXECUTE'),
        ('inbox', 'routine', 'partition_of', 'EXECUTE'),
        ('inbox', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('inbox', 'table', 'wh_inbox_preleased', 'SELECT, INSERT, DELETE'),
        ('inbox', 'table', 'wh_dead_letters', 'INSERT'),
        ('inbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('inbox', 'table', 'settings', 'SELECT'),
        ('outbox', 'routine', 'store_outbox_messages', 'EXECUTE'),
        ('outbox', 'routine', 'emit_outbox_messages', 'EXECUTE'),
        ('outbox', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('outbox', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('outbox', 'table', 'wh_outbox_preleased', 'INSERT'),
        ('outbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('outbox', 'table', 'settings', 'SELECT'),
        ('relay', 'routine', 'claim_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_work', 'EXECUTE'),
        ('relay', 'routine', 'fail_work', 'EXECUTE'),
        ('relay', 'routine', 'renew_leases', 'EXECUTE'),
        ('relay', 'routine', 'release_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_outbox_published', 'EXECUTE'),
        ('relay', 'routine', 'partition_of', 'EXECUTE'),
        ('relay', 'table', 'wh_outbox', 'SELECT, UPDATE, DELETE'),
        ('relay', 'table', 'wh_outbox_preleased', 'SELECT, DELETE'),
        ('relay', 'table', 'wh_dead_letters', 'INSERT'),
        ('relay', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('relay', 'table', 'settings', 'SELECT'),
        -- grant_admin
        ('dead_letters', 'routine', 'retry_dead_letters', 'EXECUTE'),
        ('dead_letters', 'routine', 'retry_dead_letters_matching', 'EXECUTE'),
        ('dead_letters', 'routine', 'discard_dead_letters', 'EXECUTE'),
        ('dead_letters', 'routine', 'discard_dead_letters_matching', 'EXECUTE'),
        ('dead_letters', 'routine', '_dead_letters_matching', 'EXECUTE'),
        ('dead_letters', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('dead_letters', 'table', 'wh_inbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('dead_letters', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('settings', 'table', 'wh_settings', 'SELECT, INSERT, UPDATE, DELETE'),
        ('settings', 'table', 'wh_setting_defaults', 'SELECT'),
        ('settings', 'table', 'settings', 'SELECT'),
        ('policies', 'table', 'wh_idempotency_policies', 'SELECT, INSERT, UPDATE, DELETE'),
        ('policies', 'table', 'wh_retry_policies', 'SELECT, INSERT, UPDATE, DELETE'),
        ('maintenance', 'routine', 'perform_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'run_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'cancel_work', 'EXECUTE'),
        ('maintenance', 'routine', 'requeue', 'EXECUTE'),
        ('maintenance', 'routine', 'reschedule', 'EXECUTE'),
        ('maintenance', 'table', 'settings', 'SELECT'),
        ('maintenance', 'table', 'wh_inbox', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_message_deduplication', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_idempotency_keys', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_streams', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_streams', 'SELECT, UPDATE, DELETE'),
        ('monitor', 'routine', 'stats', 'EXECUTE'),
        ('monitor', 'routine', 'queues', 'EXECUTE'),
        ('monitor', 'routine', '_leases', 'EXECUTE'),
        ('monitor', 'routine', 'check', 'EXECUTE'),
        ('monitor', 'table', 'stats', 'SELECT'),
        ('monitor', 'table', 'queues', 'SELECT'),
        ('monitor', 'table', 'leases', 'SELECT'),
        ('monitor', 'table', 'wh_inbox', 'SELECT'),
        ('monitor', 'table', 'wh_outbox', 'SELECT'),
        ('monitor', 'table', 'wh_dead_letters', 'SELECT'),
        ('monitor', 'table', 'wh_message_deduplication', 'SELECT'),
        ('monitor', 'table', 'wh_idempotency_keys', 'SELECT'),
        ('monitor', 'table', 'wh_partitions', 'SELECT'),
        ('monitor', 'table', 'wh_retry_policies', 'SELECT'),
        ('monitor', 'routine', 'counters', 'EXECUTE'),
        ('monitor', 'routine', '_counters', 'EXECUTE'),
        ('monitor', 'table', 'counters', 'SELECT'),
        ('monitor', 'routine', 'dedup_generations', 'EXECUTE'),
        ('monitor', 'table', 'dedup_generations', 'SELECT'),
        ('monitor', 'routine', 'peek', 'EXECUTE'),
        ('monitor', 'routine', 'lease_store', 'EXECUTE')
    ) AS c(capability, kind, object_name, privileges)
$$;
COMMENT ON FUNCTION whizbang.grant_admin(regrole, text[]) IS
    'Grants p_role what the operator capabilities need (dead_letters: retry_dead_letters, '
    'retry_dead_letters_matching, discard_dead_letters, discard_dead_letters_matching; settings; policies: '
    'wh_idempotency_policies, wh_retry_policies; '
    'maintenance: perform_maintenance, run_maintenance, cancel_work, requeue, reschedule; monitor: stats, queues, '
    'counters, peek, leases, lease_store, dedup_generations, check; default: all) and returns the GRANT statements it ran. '
    'The caller must be able to grant them. Errors: 22004 null p_role or no capability, 22023 unknown capability, '
    '42501 the caller may not grant.';
