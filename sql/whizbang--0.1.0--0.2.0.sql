-- whizbang 0.1.0 -> 0.2.0: handler idempotency keys (DESIGN §3.5).

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.2.0'" to load this file. \quit

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
