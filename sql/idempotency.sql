-- Handler idempotency keys (DESIGN §3.5): idempotency_begin, _complete, _release, their
-- outcome words, fencing tokens, TTLs and the policy table. Scopes 'idem_*'.
-- Tokens come from a sequence: they are kept in t and shown as has_token / larger_token.
SET client_min_messages = warning;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
\set SHOW_CONTEXT never

CREATE TEMP TABLE t (scope text, key text, token bigint);
-- begin, recording a claimed token; prints the outcome, whether a token came back and whether
-- it is larger than every earlier one of this test, and the stored result.
CREATE FUNCTION pg_temp.idem_begin(p_scope text, p_key text, p_now timestamptz, p_fingerprint bytea DEFAULT NULL,
                              p_owner text DEFAULT NULL, p_in_progress_ttl interval DEFAULT NULL,
                              p_result_ttl interval DEFAULT NULL)
  RETURNS TABLE(outcome text, has_token boolean, larger_token boolean, result jsonb, completed_at timestamptz)
  LANGUAGE sql AS $$
  WITH b AS (SELECT * FROM whizbang.idempotency_begin(p_scope, p_key, p_fingerprint, p_in_progress_ttl, p_owner,
                                                      p_now => p_now, p_result_ttl => p_result_ttl)),
       rec AS (INSERT INTO t SELECT p_scope, p_key, b.token FROM b WHERE b.token IS NOT NULL)
  SELECT b.outcome, b.token IS NOT NULL, b.token > ALL (SELECT token FROM t), b.result, b.completed_at FROM b $$;
CREATE FUNCTION pg_temp.tok(p_scope text, p_key text, p_nth int DEFAULT 1) RETURNS bigint LANGUAGE sql
  AS $$ SELECT token FROM t WHERE scope = p_scope AND key = p_key ORDER BY token OFFSET p_nth - 1 LIMIT 1 $$;

-- Lease mode. The first begin claims the key; others (any owner, the same owner too) are
-- in_progress_duplicate while the claim lives.
SELECT * FROM pg_temp.idem_begin('idem_pay', 'order-1', '2030-05-01 00:00:00Z', '\x01', 'worker-a');
SELECT * FROM pg_temp.idem_begin('idem_pay', 'order-1', '2030-05-01 00:00:10Z', '\x01', 'worker-b');
SELECT * FROM pg_temp.idem_begin('idem_pay', 'order-1', '2030-05-01 00:00:10Z', '\x01', 'worker-a');
-- A different fingerprint under the same key is a conflict.
SELECT * FROM pg_temp.idem_begin('idem_pay', 'order-1', '2030-05-01 00:00:10Z', '\x02');
-- The owner completes with its token and a result; repeats get the result back.
SELECT whizbang.idempotency_complete('idem_pay', 'order-1', pg_temp.tok('idem_pay', 'order-1'),
                                     '{"charge": "ch_1"}', p_now => '2030-05-01 00:01:00Z');
SELECT * FROM pg_temp.idem_begin('idem_pay', 'order-1', '2030-05-01 00:02:00Z', '\x01');
-- A second complete, or one with a token that never owned the key: complete_conflict.
SELECT whizbang.idempotency_complete('idem_pay', 'order-1', pg_temp.tok('idem_pay', 'order-1'),
                                     '{"charge": "ch_2"}', p_now => '2030-05-01 00:03:00Z');
SELECT whizbang.idempotency_complete('idem_pay', 'order-9', 1, p_now => '2030-05-01 00:03:00Z');
-- The key's row: completed, expiries from the result TTL (default 1 day) and the tombstone
-- TTL (default 30 days).
SELECT state, owner, result, completed_at, result_expires_at, tombstone_expires_at
  FROM whizbang.wh_idempotency_keys WHERE scope = 'idem_pay' AND idempotency_key = 'order-1';
-- Past the result TTL: expired_duplicate (no result, the completion time kept); past the
-- tombstone: the key is forgotten and claimed afresh.
SELECT * FROM pg_temp.idem_begin('idem_pay', 'order-1', '2030-05-02 00:01:00Z', '\x01');
SELECT * FROM pg_temp.idem_begin('idem_pay', 'order-1', '2030-06-01 00:01:00Z', '\x02');

-- Release after a failure frees the key: a wrong token is not_owner, a key that is not there
-- not_found; the next begin claims with a larger token.
SELECT * FROM pg_temp.idem_begin('idem_pay', 'order-2', '2030-05-01 00:00:00Z');
SELECT whizbang.idempotency_release('idem_pay', 'order-2', pg_temp.tok('idem_pay', 'order-2') - 1,
                                    '2030-05-01 00:00:30Z') AS wrong_token;
SELECT whizbang.idempotency_release('idem_pay', 'order-2', pg_temp.tok('idem_pay', 'order-2'),
                                    '2030-05-01 00:00:30Z') AS owner;
SELECT whizbang.idempotency_release('idem_pay', 'order-2', pg_temp.tok('idem_pay', 'order-2'),
                                    '2030-05-01 00:00:31Z') AS again;
SELECT * FROM pg_temp.idem_begin('idem_pay', 'order-2', '2030-05-01 00:00:40Z');
-- A completed key cannot be released.
SELECT whizbang.idempotency_complete('idem_pay', 'order-2', pg_temp.tok('idem_pay', 'order-2', 2),
                                     p_now => '2030-05-01 00:00:50Z');
SELECT whizbang.idempotency_release('idem_pay', 'order-2', pg_temp.tok('idem_pay', 'order-2', 2),
                                    '2030-05-01 00:00:55Z');

-- An abandoned claim (in-progress TTL of 1 minute) is taken over with a new token after its
-- lease; the old owner's complete is then complete_conflict and changes nothing.
SELECT * FROM pg_temp.idem_begin('idem_pay', 'order-3', '2030-05-01 00:00:00Z', p_in_progress_ttl => '1 minute');
SELECT * FROM pg_temp.idem_begin('idem_pay', 'order-3', '2030-05-01 00:00:59Z');
SELECT * FROM pg_temp.idem_begin('idem_pay', 'order-3', '2030-05-01 00:01:00Z');
SELECT whizbang.idempotency_complete('idem_pay', 'order-3', pg_temp.tok('idem_pay', 'order-3', 1),
                                     '{"by": "old owner"}', p_now => '2030-05-01 00:01:10Z');
SELECT whizbang.idempotency_complete('idem_pay', 'order-3', pg_temp.tok('idem_pay', 'order-3', 2),
                                     '{"by": "new owner"}', p_now => '2030-05-01 00:01:20Z');
SELECT outcome, result FROM whizbang.idempotency_begin('idem_pay', 'order-3', p_now => '2030-05-01 00:01:30Z');

-- In-transaction mode: begin, effect and complete in one transaction; a rollback leaves the
-- key free.
BEGIN;
SELECT * FROM pg_temp.idem_begin('idem_tx', 'k', '2030-05-01 00:00:00Z');
SELECT whizbang.idempotency_complete('idem_tx', 'k', pg_temp.tok('idem_tx', 'k'), '"done"',
                                     p_now => '2030-05-01 00:00:00Z');
ROLLBACK;
SELECT outcome, token IS NOT NULL AS has_token
  FROM whizbang.idempotency_begin('idem_tx', 'k', p_now => '2030-05-01 00:00:10Z');

-- TTL policy per scope, with the settings for what a row leaves NULL. The intended result
-- TTL is checked at begin, before anything is written.
SELECT * FROM whizbang.idempotency_policy('idem_default');
INSERT INTO whizbang.wh_idempotency_policies (scope, in_progress_ttl, max_result_ttl, tombstone_ttl)
VALUES ('idem_pol', '5 minutes', '1 day', '0');
SELECT * FROM whizbang.idempotency_policy('idem_pol');
SELECT * FROM pg_temp.idem_begin('idem_pol', 'k', '2030-05-01 00:00:00Z', p_result_ttl => '2 days');
\echo :SQLSTATE
SELECT count(*) AS keys FROM whizbang.wh_idempotency_keys WHERE scope = 'idem_pol';
-- Within the policy: the claim's lease is the scope's 5 minutes; with tombstone_ttl 0 the key
-- is forgotten when its result expires.
SELECT * FROM pg_temp.idem_begin('idem_pol', 'k', '2030-05-01 00:00:00Z', p_result_ttl => '1 hour');
SELECT lease_expires_at - claimed_at AS lease, result_ttl FROM whizbang.wh_idempotency_keys WHERE scope = 'idem_pol';
SELECT whizbang.idempotency_complete('idem_pol', 'k', pg_temp.tok('idem_pol', 'k'), '1', p_now => '2030-05-01 00:00:10Z');
SELECT * FROM pg_temp.idem_begin('idem_pol', 'k', '2030-05-01 01:00:10Z');
INSERT INTO whizbang.wh_idempotency_policies (scope, min_result_ttl, max_result_ttl) VALUES ('idem_bad', '2 days', '1 day');
\echo :SQLSTATE
DELETE FROM whizbang.wh_idempotency_policies WHERE scope = 'idem_pol';

-- Bad arguments.
SELECT * FROM whizbang.idempotency_begin('', 'k', p_now => '2030-05-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.idempotency_begin('idem_bad', NULL, p_now => '2030-05-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.idempotency_begin('idem_bad', repeat('k', 256), p_now => '2030-05-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.idempotency_begin('idem_bad', 'k', p_in_progress_ttl => '-1 second', p_now => '2030-05-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.idempotency_begin('idem_bad', 'k', p_wait => '-1 second', p_now => '2030-05-01 00:00:00Z');
\echo :SQLSTATE
SELECT whizbang.idempotency_complete('idem_bad', 'k', NULL, p_now => '2030-05-01 00:00:00Z');
\echo :SQLSTATE
SELECT count(*) AS keys FROM whizbang.wh_idempotency_keys WHERE scope = 'idem_bad';
