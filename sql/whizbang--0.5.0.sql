-- whizbang 0.5.0, complete install script: the 0.4.1 install script followed by the 0.4.1 -> 0.5.0
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
