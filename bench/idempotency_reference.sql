-- PL/pgSQL reference of the handler idempotency contract (DESIGN §3.5), the baseline that
-- bench/idempotency.sh compares whizbang.idempotency_begin / _complete with. Same table
-- shape, same outcome rules; it reads the policy the way a PL/pgSQL implementation would,
-- with one query over the settings and the scope's policy row (whizbang caches both per
-- backend, invalidated when they change: that is part of what is measured).
CREATE SCHEMA IF NOT EXISTS bench;
DROP TABLE IF EXISTS bench.idem_keys;
CREATE TABLE bench.idem_keys (LIKE whizbang.wh_idempotency_keys INCLUDING ALL);
CREATE SEQUENCE IF NOT EXISTS bench.idem_token_seq AS bigint;

CREATE OR REPLACE FUNCTION bench.plpgsql_policy(p_scope text)
RETURNS TABLE (in_progress_ttl interval, default_result_ttl interval, min_result_ttl interval,
               max_result_ttl interval, tombstone_ttl interval)
LANGUAGE sql STABLE AS $$
    SELECT coalesce(p.in_progress_ttl, make_interval(secs => s.in_progress)),
           coalesce(p.default_result_ttl, make_interval(secs => s.result)),
           coalesce(p.min_result_ttl, make_interval(secs => s.result_min)),
           coalesce(p.max_result_ttl, make_interval(secs => s.result_max)),
           coalesce(p.tombstone_ttl, make_interval(days => s.tombstone_days))
      FROM (SELECT max(value) FILTER (WHERE setting_key = 'idempotency_in_progress_ttl_seconds')::float8 AS in_progress,
                   max(value) FILTER (WHERE setting_key = 'idempotency_result_ttl_seconds')::float8 AS result,
                   max(value) FILTER (WHERE setting_key = 'idempotency_result_ttl_min_seconds')::float8 AS result_min,
                   max(value) FILTER (WHERE setting_key = 'idempotency_result_ttl_max_seconds')::float8 AS result_max,
                   max(value) FILTER (WHERE setting_key = 'idempotency_tombstone_days')::int AS tombstone_days
              FROM whizbang.settings) s
      LEFT JOIN whizbang.wh_idempotency_policies p ON p.scope = p_scope
$$;

CREATE OR REPLACE FUNCTION bench.plpgsql_begin(p_scope text, p_key text, p_fingerprint bytea DEFAULT NULL,
                                               p_now timestamptz DEFAULT now())
RETURNS TABLE (outcome text, token bigint, result jsonb, completed_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
  pol record;
  k bench.idem_keys%ROWTYPE;
  t bigint;
BEGIN
  IF p_scope IS NULL OR p_scope = '' OR p_key IS NULL OR p_key = '' OR octet_length(p_key) > 255 THEN
    RAISE EXCEPTION 'invalid scope or key' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT * INTO pol FROM bench.plpgsql_policy(p_scope);
  IF pol.default_result_ttl < pol.min_result_ttl OR pol.default_result_ttl > pol.max_result_ttl THEN
    RAISE EXCEPTION 'result TTL outside the policy' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  LOOP
    INSERT INTO bench.idem_keys AS ik (scope, idempotency_key, state, token, fingerprint, result_ttl,
                                       first_claimed_at, claimed_at, lease_expires_at)
    VALUES (p_scope, p_key, 'in_progress', nextval('bench.idem_token_seq'), p_fingerprint, pol.default_result_ttl,
            p_now, p_now, p_now + pol.in_progress_ttl)
    ON CONFLICT (scope, idempotency_key) DO NOTHING
    RETURNING ik.token INTO t;
    IF t IS NOT NULL THEN
      RETURN QUERY SELECT 'claimed'::text, t, NULL::jsonb, NULL::timestamptz;
      RETURN;
    END IF;
    SELECT * INTO k FROM bench.idem_keys i WHERE i.scope = p_scope AND i.idempotency_key = p_key;
    CONTINUE WHEN NOT FOUND;
    IF NOT (k.state = 'completed' AND p_now >= k.tombstone_expires_at) THEN
      IF p_fingerprint IS NOT NULL AND k.fingerprint IS NOT NULL AND p_fingerprint <> k.fingerprint THEN
        RETURN QUERY SELECT 'conflict'::text, NULL::bigint, NULL::jsonb, NULL::timestamptz;
        RETURN;
      END IF;
      IF k.state = 'in_progress' AND p_now < k.lease_expires_at THEN
        RETURN QUERY SELECT 'in_progress_duplicate'::text, NULL::bigint, NULL::jsonb, NULL::timestamptz;
        RETURN;
      END IF;
      IF k.state = 'completed' THEN
        IF p_now < k.result_expires_at THEN
          RETURN QUERY SELECT 'completed_duplicate'::text, NULL::bigint, k.result, k.completed_at;
        ELSE
          RETURN QUERY SELECT 'expired_duplicate'::text, NULL::bigint, NULL::jsonb, k.completed_at;
        END IF;
        RETURN;
      END IF;
    END IF;
    UPDATE bench.idem_keys i SET token = nextval('bench.idem_token_seq'), state = 'in_progress', result = NULL,
           claimed_at = p_now, lease_expires_at = p_now + pol.in_progress_ttl, completed_at = NULL,
           result_expires_at = NULL, tombstone_expires_at = NULL
     WHERE i.scope = p_scope AND i.idempotency_key = p_key AND i.token = k.token
    RETURNING i.token INTO t;
    IF t IS NOT NULL THEN
      RETURN QUERY SELECT 'claimed'::text, t, NULL::jsonb, NULL::timestamptz;
      RETURN;
    END IF;
  END LOOP;
END $$;

CREATE OR REPLACE FUNCTION bench.plpgsql_complete(p_scope text, p_key text, p_token bigint, p_result jsonb,
                                                  p_now timestamptz DEFAULT now())
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  UPDATE bench.idem_keys i
     SET state = 'completed', result = p_result, completed_at = p_now,
         result_expires_at = p_now + i.result_ttl,
         tombstone_expires_at = p_now + i.result_ttl + (SELECT p.tombstone_ttl FROM bench.plpgsql_policy(p_scope) p)
   WHERE i.scope = p_scope AND i.idempotency_key = p_key AND i.state = 'in_progress' AND i.token = p_token;
  RETURN CASE WHEN FOUND THEN 'completed' ELSE 'complete_conflict' END;
END $$;
