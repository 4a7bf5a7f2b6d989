-- Handler idempotency keys (DESIGN §3.5, seeds 001 and 002): every outcome, both modes, the
-- TTL policy, and the tests seed 002 asks for - each one asserting the key's row and counting
-- the external actions of a test handler.
--
-- Time is simulated with explicit p_now values: pg_temp.at(interval) is T0 + interval, with
-- T0 = 2024-03-01 12:00:00+00. Tokens come from a global sequence (other tests take tokens
-- too, and a rolled-back claim still uses one), so they are compared with each other, never
-- with fixed numbers.
--
-- The "handler" appends one row to pg_temp effects per external action it performs; the
-- count of rows is what must stay at one per key. Simultaneous duplicates and waiting
-- (p_wait) need two sessions: they are in test/isolation/specs/idempotency_*.spec.
BEGIN;
SELECT plan(127);
-- Expiry times are compared in UTC, so the file does not depend on the server's time zone.
SET LOCAL TimeZone = 'UTC';

-- ---------------------------------------------------------------------------------------
-- Test fixtures
-- ---------------------------------------------------------------------------------------

CREATE FUNCTION pg_temp.at(p_offset interval) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$ SELECT timestamptz '2024-03-01 12:00:00+00' + p_offset $$;

CREATE TEMP TABLE effects (scope text NOT NULL, key text NOT NULL, who text NOT NULL, done_at timestamptz NOT NULL);

CREATE FUNCTION pg_temp.effects(p_scope text, p_key text) RETURNS bigint
LANGUAGE sql AS $$ SELECT count(*) FROM effects WHERE scope = p_scope AND key = p_key $$;

-- The key's row, or NULL when there is none.
CREATE FUNCTION pg_temp.key_row(p_scope text, p_key text) RETURNS whizbang.wh_idempotency_keys
LANGUAGE sql AS $$
    SELECT k FROM whizbang.wh_idempotency_keys k
     WHERE k.scope = p_scope COLLATE "C" AND k.idempotency_key = p_key COLLATE "C"
$$;

CREATE FUNCTION pg_temp.key_rows(p_scope text) RETURNS bigint
LANGUAGE sql AS $$ SELECT count(*) FROM whizbang.wh_idempotency_keys WHERE scope = p_scope COLLATE "C" $$;

-- In-transaction mode, as one call: begin; only when claimed, perform the effect and
-- complete with the response in the same transaction. Replays return the stored response.
CREATE FUNCTION pg_temp.handle(p_scope text, p_key text, p_request jsonb, p_now timestamptz,
                               p_who text DEFAULT 'handler')
RETURNS TABLE (outcome text, token bigint, result jsonb, completed_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    b record;
    response jsonb;
BEGIN
    SELECT * INTO b FROM whizbang.idempotency_begin(p_scope, p_key, whizbang.fingerprint(p_request), p_now => p_now);
    IF b.outcome = 'claimed' THEN
        INSERT INTO effects VALUES (p_scope, p_key, p_who, p_now);
        response := jsonb_build_object('receipt', p_who, 'amount', p_request -> 'amount');
        IF whizbang.idempotency_complete(p_scope, p_key, b.token, response, p_now => p_now) <> 'completed' THEN
            RAISE EXCEPTION 'complete of a fresh claim failed';
        END IF;
        RETURN QUERY SELECT b.outcome, b.token, response, p_now;
    ELSE
        RETURN QUERY SELECT b.outcome, b.token, b.result, b.completed_at;
    END IF;
END
$$;

-- Lease mode, the finishing half: the effect and complete in one transaction, the effect
-- kept only when complete answers 'completed' (a stale owner's effect is undone).
CREATE FUNCTION pg_temp.finish(p_scope text, p_key text, p_token bigint, p_who text, p_now timestamptz)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    answer text;
BEGIN
    INSERT INTO effects VALUES (p_scope, p_key, p_who, p_now);
    answer := whizbang.idempotency_complete(p_scope, p_key, p_token, jsonb_build_object('done_by', p_who),
                                            p_now => p_now);
    IF answer <> 'completed' THEN
        DELETE FROM effects WHERE scope = p_scope AND key = p_key AND who = p_who AND done_at = p_now;
    END IF;
    RETURN answer;
END
$$;

-- Tokens handed out in this file, by name.
CREATE TEMP TABLE tokens (name text PRIMARY KEY, token bigint);
CREATE FUNCTION pg_temp.tok(p_name text) RETURNS bigint
LANGUAGE sql AS $$ SELECT token FROM tokens WHERE name = p_name $$;

-- Snapshots of key rows, to prove that a call changed nothing.
CREATE TEMP TABLE snapshots (name text PRIMARY KEY, row_image jsonb);

-- ---------------------------------------------------------------------------------------
-- claimed -> completed -> completed_duplicate (in-transaction mode)
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT outcome, token IS NOT NULL, result, completed_at
        FROM whizbang.idempotency_begin('basic', 'order-1', whizbang.fingerprint('{"amount": 10}'),
                                        p_owner => 'api-1', p_now => pg_temp.at('0'))$$,
    $$VALUES ('claimed', true, NULL::jsonb, NULL::timestamptz)$$,
    'a new key is claimed: a token, no result, no completed_at');
INSERT INTO tokens SELECT 'basic', token FROM whizbang.wh_idempotency_keys WHERE scope = 'basic' AND idempotency_key = 'order-1';

SELECT results_eq(
    $$SELECT state, token, owner, fingerprint, result, result_ttl, first_claimed_at, claimed_at, lease_expires_at,
             completed_at, result_expires_at, tombstone_expires_at
        FROM pg_temp.key_row('basic', 'order-1')$$,
    $$VALUES ('in_progress'::text, pg_temp.tok('basic'), 'api-1'::text, whizbang.fingerprint('{"amount": 10}'),
              NULL::jsonb, interval '86400 s', pg_temp.at('0'), pg_temp.at('0'), pg_temp.at('1800 s'),
              NULL::timestamptz, NULL::timestamptz, NULL::timestamptz)$$,
    'the claim row: in_progress, owner and fingerprint kept, lease = now + 1800 s, result TTL 86400 s intended');

SELECT is(whizbang.idempotency_complete('basic', 'order-1', pg_temp.tok('basic'), '{"receipt": "r-1"}',
                                        p_now => pg_temp.at('2 s')),
          'completed', 'the owner completes with its token');
SELECT results_eq(
    $$SELECT state, token, result, completed_at, result_expires_at, tombstone_expires_at
        FROM pg_temp.key_row('basic', 'order-1')$$,
    $$VALUES ('completed'::text, pg_temp.tok('basic'), '{"receipt": "r-1"}'::jsonb, pg_temp.at('2 s'),
              pg_temp.at('2 s') + interval '86400 s', pg_temp.at('2 s') + interval '86400 s' + interval '30 days')$$,
    'completed: result stored, result expires after the TTL intended at begin, tombstone 30 days after that');

SELECT results_eq(
    $$SELECT outcome, token, result, completed_at
        FROM whizbang.idempotency_begin('basic', 'order-1', whizbang.fingerprint('{"amount": 10}'),
                                        p_now => pg_temp.at('1 hour'))$$,
    $$VALUES ('completed_duplicate', NULL::bigint, '{"receipt": "r-1"}'::jsonb, pg_temp.at('2 s'))$$,
    'a repeat is completed_duplicate: no token, the stored result and completed_at');
SELECT results_eq(
    $$SELECT outcome, result FROM whizbang.idempotency_begin('basic', 'order-1', p_now => pg_temp.at('1 hour'))$$,
    $$VALUES ('completed_duplicate', '{"receipt": "r-1"}'::jsonb)$$,
    'a repeat without a fingerprint is completed_duplicate too (nothing to compare)');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('basic', 'order-1', whizbang.fingerprint('{"amount": 10.0}'),
                                                     p_now => pg_temp.at('1 hour'))$$,
    ARRAY['completed_duplicate'],
    'a payload that fingerprints the same (10.0 = 10) is the same request');
SELECT results_eq(
    $$SELECT state, token, claimed_at, completed_at FROM pg_temp.key_row('basic', 'order-1')$$,
    $$VALUES ('completed'::text, pg_temp.tok('basic'), pg_temp.at('0'), pg_temp.at('2 s'))$$,
    'duplicates changed nothing: same token, still completed at +2 s');

SELECT is(whizbang.idempotency_complete('basic', 'order-1', pg_temp.tok('basic'), '{"receipt": "again"}',
                                        p_now => pg_temp.at('2 hours')),
          'complete_conflict', 'a second complete with the same token: complete_conflict');
SELECT is((pg_temp.key_row('basic', 'order-1')).result, '{"receipt": "r-1"}'::jsonb,
          'the second complete did not overwrite the result');
SELECT is(whizbang.idempotency_release('basic', 'order-1', pg_temp.tok('basic')), 'not_owner',
          'a completed key cannot be released, even by its token: not_owner');
SELECT is(pg_temp.key_rows('basic'), 1::bigint, 'the completed key is still there');

-- The handler: one effect, however often the request is repeated.
SELECT results_eq(
    $$SELECT outcome, result FROM pg_temp.handle('shop', 'cart-1', '{"amount": 5}', pg_temp.at('0'))$$,
    $$VALUES ('claimed', '{"receipt": "handler", "amount": 5}'::jsonb)$$,
    'handler: first request claims, performs the effect and completes');
SELECT results_eq(
    $$SELECT outcome, result, completed_at FROM pg_temp.handle('shop', 'cart-1', '{"amount": 5}', pg_temp.at('1 min'))$$,
    $$VALUES ('completed_duplicate', '{"receipt": "handler", "amount": 5}'::jsonb, pg_temp.at('0'))$$,
    'handler: the repeat replays the stored response');
SELECT results_eq(
    $$SELECT outcome FROM pg_temp.handle('shop', 'cart-1', '{"amount": 5}', pg_temp.at('2 min'))$$,
    ARRAY['completed_duplicate'], 'handler: and again');
SELECT is(pg_temp.effects('shop', 'cart-1'), 1::bigint, 'handler: three requests, one effect');

-- Scopes are independent namespaces.
SELECT results_eq(
    $$SELECT outcome FROM pg_temp.handle('payments:alice', 'k-1', '{"amount": 1}', pg_temp.at('0'))
      UNION ALL
      SELECT outcome FROM pg_temp.handle('payments:bob', 'k-1', '{"amount": 2}', pg_temp.at('0'))$$,
    ARRAY['claimed', 'claimed'], 'the same key in two scopes: two claims');
SELECT is(pg_temp.effects('payments:alice', 'k-1') + pg_temp.effects('payments:bob', 'k-1'), 2::bigint,
          'one effect per scope');
SELECT results_eq(
    $$SELECT outcome, result FROM pg_temp.handle('payments:bob', 'k-1', '{"amount": 2}', pg_temp.at('1 min'))$$,
    $$VALUES ('completed_duplicate', '{"receipt": "handler", "amount": 2}'::jsonb)$$,
    'each scope replays its own result');

-- Keys are compared byte for byte.
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('case', 'Key', p_now => pg_temp.at('0'))
      UNION ALL SELECT outcome FROM whizbang.idempotency_begin('case', 'key', p_now => pg_temp.at('0'))
      UNION ALL SELECT outcome FROM whizbang.idempotency_begin('case', 'key ', p_now => pg_temp.at('0'))$$,
    ARRAY['claimed', 'claimed', 'claimed'], 'keys differing in case or trailing space are different keys');

-- ---------------------------------------------------------------------------------------
-- Lease mode: begin commits, complete later; in_progress_duplicate meanwhile
-- ---------------------------------------------------------------------------------------

INSERT INTO tokens SELECT 'lease', token FROM whizbang.idempotency_begin('jobs', 'job-1', '\x01', p_owner => 'worker-1',
                                                                          p_now => pg_temp.at('0'));
SELECT isnt(pg_temp.tok('lease'), NULL, 'lease mode: worker-1 claims job-1');
SELECT results_eq(
    $$SELECT outcome, token, result, completed_at
        FROM whizbang.idempotency_begin('jobs', 'job-1', '\x01', p_owner => 'worker-2', p_now => pg_temp.at('10 min'))$$,
    $$VALUES ('in_progress_duplicate', NULL::bigint, NULL::jsonb, NULL::timestamptz)$$,
    'another worker during the lease: in_progress_duplicate, no token');
SELECT results_eq(
    $$SELECT outcome, token FROM whizbang.idempotency_begin('jobs', 'job-1', '\x01', p_owner => 'worker-1',
                                                            p_now => pg_temp.at('10 min'))$$,
    $$VALUES ('in_progress_duplicate', NULL::bigint)$$,
    'the same owner again: in_progress_duplicate too (ownership is the token, not the owner name)');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('jobs', 'job-1', '\x01', p_now => pg_temp.at('1800 s') - interval '1 microsecond')$$,
    ARRAY['in_progress_duplicate'], 'one microsecond before the lease expires: still in_progress_duplicate');
SELECT is((pg_temp.key_row('jobs', 'job-1')).token, pg_temp.tok('lease'), 'duplicates did not touch the claim');
SELECT is(pg_temp.finish('jobs', 'job-1', pg_temp.tok('lease'), 'worker-1', pg_temp.at('20 min')), 'completed',
          'worker-1 finishes later in another transaction: completed');
SELECT results_eq(
    $$SELECT outcome, result, completed_at FROM whizbang.idempotency_begin('jobs', 'job-1', '\x01', p_now => pg_temp.at('21 min'))$$,
    $$VALUES ('completed_duplicate', '{"done_by": "worker-1"}'::jsonb, pg_temp.at('20 min'))$$,
    'after complete: completed_duplicate with the result');
SELECT is(pg_temp.effects('jobs', 'job-1'), 1::bigint, 'lease mode: one effect');

-- p_wait on a key nobody else can finish (this transaction holds it): it waits the whole
-- time, then answers in_progress_duplicate. (Waiting for another session to finish is in
-- the isolation spec idempotency_lease.)
INSERT INTO tokens SELECT 'wait', token FROM whizbang.idempotency_begin('jobs', 'job-wait', p_now => pg_temp.at('0'));
CREATE TEMP TABLE wait_start AS SELECT clock_timestamp() AS started;
CREATE TEMP TABLE wait_probe AS
SELECT b.outcome, b.token, clock_timestamp() - (SELECT started FROM wait_start) AS elapsed
  FROM whizbang.idempotency_begin('jobs', 'job-wait', p_wait => '150 ms', p_now => pg_temp.at('1 s')) b;
SELECT results_eq($$SELECT outcome, token FROM wait_probe$$, $$VALUES ('in_progress_duplicate', NULL::bigint)$$,
                  'p_wait runs out: in_progress_duplicate');
SELECT cmp_ok((SELECT elapsed FROM wait_probe), '>=', interval '150 ms', 'p_wait waited its full length');
SELECT cmp_ok((SELECT elapsed FROM wait_probe), '<', interval '5 s', 'p_wait did not wait much longer');
SELECT results_eq(
    $$SELECT outcome, result FROM whizbang.idempotency_begin('basic', 'order-1', p_wait => '10 s', p_now => pg_temp.at('1 hour'))$$,
    $$VALUES ('completed_duplicate', '{"receipt": "r-1"}'::jsonb)$$,
    'p_wait on a completed key answers at once');

-- ---------------------------------------------------------------------------------------
-- Seed 002: timeout after commit - the stale owner is fenced off
-- ---------------------------------------------------------------------------------------

INSERT INTO tokens SELECT 'stale', token
  FROM whizbang.idempotency_begin('mail', 'welcome-42', '\x42', p_in_progress_ttl => '1 min', p_owner => 'worker-1',
                                  p_now => pg_temp.at('0'));
SELECT is((pg_temp.key_row('mail', 'welcome-42')).lease_expires_at, pg_temp.at('1 min'),
          'stale owner: claimed with a 1 minute in-progress TTL (p_in_progress_ttl overrides the policy)');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('mail', 'welcome-42', '\x42', p_owner => 'worker-2',
                                                     p_now => pg_temp.at('59 s'))$$,
    ARRAY['in_progress_duplicate'], 'stale owner: before its lease ends, a second worker is turned away');
INSERT INTO tokens SELECT 'fresh', token
  FROM whizbang.idempotency_begin('mail', 'welcome-42', '\x42', p_owner => 'worker-2', p_now => pg_temp.at('1 min'));
SELECT isnt(pg_temp.tok('fresh'), NULL, 'stale owner: at the lease end, a second worker re-claims the key');
SELECT cmp_ok(pg_temp.tok('fresh'), '>', pg_temp.tok('stale'), 'the re-claim has a new, larger token');
SELECT results_eq(
    $$SELECT state, token, owner, fingerprint, first_claimed_at, claimed_at, lease_expires_at, completed_at
        FROM pg_temp.key_row('mail', 'welcome-42')$$,
    $$VALUES ('in_progress'::text, pg_temp.tok('fresh'), 'worker-2'::text, '\x42'::bytea, pg_temp.at('0'),
              pg_temp.at('1 min'), pg_temp.at('1 min') + interval '1800 s', NULL::timestamptz)$$,
    're-claimed row: new token and owner, first_claimed_at kept, a fresh lease from the scope policy');
INSERT INTO snapshots SELECT 'stale', to_jsonb(pg_temp.key_row('mail', 'welcome-42'));
SELECT is(pg_temp.finish('mail', 'welcome-42', pg_temp.tok('stale'), 'worker-1', pg_temp.at('2 min')),
          'complete_conflict', 'the stale owner wakes up: its complete answers complete_conflict');
SELECT is(to_jsonb(pg_temp.key_row('mail', 'welcome-42')), (SELECT row_image FROM snapshots WHERE name = 'stale'),
          'complete_conflict changed nothing in the row');
SELECT is(whizbang.idempotency_release('mail', 'welcome-42', pg_temp.tok('stale')), 'not_owner',
          'the stale owner cannot release it either: not_owner');
SELECT is(to_jsonb(pg_temp.key_row('mail', 'welcome-42')), (SELECT row_image FROM snapshots WHERE name = 'stale'),
          'not_owner changed nothing in the row');
SELECT is(pg_temp.finish('mail', 'welcome-42', pg_temp.tok('fresh'), 'worker-2', pg_temp.at('3 min')), 'completed',
          'the new owner completes');
SELECT is(pg_temp.finish('mail', 'welcome-42', pg_temp.tok('stale'), 'worker-1', pg_temp.at('4 min')),
          'complete_conflict', 'the stale owner after that: still complete_conflict');
SELECT results_eq(
    $$SELECT state, token, result, completed_at FROM pg_temp.key_row('mail', 'welcome-42')$$,
    $$VALUES ('completed'::text, pg_temp.tok('fresh'), '{"done_by": "worker-2"}'::jsonb, pg_temp.at('3 min'))$$,
    'the key holds the new owner''s token and result');
SELECT is(pg_temp.effects('mail', 'welcome-42'), 1::bigint, 'timeout after commit: one effect');

-- A current token completes even after its lease, as long as nobody re-claimed the key.
INSERT INTO tokens SELECT 'late', token
  FROM whizbang.idempotency_begin('mail', 'late-1', p_in_progress_ttl => '1 min', p_now => pg_temp.at('0'));
SELECT is(pg_temp.finish('mail', 'late-1', pg_temp.tok('late'), 'worker-1', pg_temp.at('10 min')), 'completed',
          'an owner past its lease that nobody replaced still completes');
SELECT results_eq(
    $$SELECT outcome, result FROM whizbang.idempotency_begin('mail', 'late-1', p_now => pg_temp.at('11 min'))$$,
    $$VALUES ('completed_duplicate', '{"done_by": "worker-1"}'::jsonb)$$,
    'and the key is completed, not re-claimable');

-- An abandoned claim without a fingerprint takes the re-claimer's.
INSERT INTO tokens SELECT 'nofp', token FROM whizbang.idempotency_begin('mail', 'nofp-1', p_in_progress_ttl => '1 s',
                                                                         p_now => pg_temp.at('0'));
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('mail', 'nofp-1', '\xaa', p_now => pg_temp.at('1 s'))$$,
    ARRAY['claimed'], 'an abandoned claim without a fingerprint is re-claimed');
SELECT is((pg_temp.key_row('mail', 'nofp-1')).fingerprint, '\xaa'::bytea, 'and takes the new fingerprint');

-- ---------------------------------------------------------------------------------------
-- Seed 002: a changed payload under one key -> conflict, no effect
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT outcome FROM pg_temp.handle('pay', 'p-1', '{"amount": 100, "currency": "EUR"}', pg_temp.at('0'))$$,
    ARRAY['claimed'], 'changed payload: the first request is handled');
INSERT INTO snapshots SELECT 'conflict', to_jsonb(pg_temp.key_row('pay', 'p-1'));
SELECT results_eq(
    $$SELECT outcome, token, result, completed_at
        FROM pg_temp.handle('pay', 'p-1', '{"amount": 900, "currency": "EUR"}', pg_temp.at('1 min'))$$,
    $$VALUES ('conflict', NULL::bigint, NULL::jsonb, NULL::timestamptz)$$,
    'the same key with another amount: conflict, no token, no result');
SELECT results_eq(
    $$SELECT outcome FROM pg_temp.handle('pay', 'p-1', '{"currency": "EUR", "amount": 100.00}', pg_temp.at('2 min'))$$,
    ARRAY['completed_duplicate'], 'field order and trailing zeros do not matter: completed_duplicate');
SELECT is(to_jsonb(pg_temp.key_row('pay', 'p-1')), (SELECT row_image FROM snapshots WHERE name = 'conflict'),
          'the conflict changed nothing in the row');
SELECT is(pg_temp.effects('pay', 'p-1'), 1::bigint, 'changed payload: one effect');

-- Conflict also while in progress, and also past the lease: an abandoned claim is not taken
-- over by a different request.
INSERT INTO tokens SELECT 'conflict_ip', token FROM whizbang.idempotency_begin('pay', 'p-2', '\x01', p_in_progress_ttl => '1 min',
                                                                                p_now => pg_temp.at('0'));
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('pay', 'p-2', '\x02', p_now => pg_temp.at('30 s'))
      UNION ALL
      SELECT outcome FROM whizbang.idempotency_begin('pay', 'p-2', '\x02', p_now => pg_temp.at('2 min'))$$,
    ARRAY['conflict', 'conflict'], 'a different fingerprint on a claimed key: conflict, during and after the lease');
SELECT is((pg_temp.key_row('pay', 'p-2')).token, pg_temp.tok('conflict_ip'), 'the conflicting calls did not take the key');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('pay', 'p-2', NULL, p_now => pg_temp.at('30 s'))$$,
    ARRAY['in_progress_duplicate'], 'no fingerprint given: nothing to compare, in_progress_duplicate');

-- ---------------------------------------------------------------------------------------
-- Seed 002: handler failure -> release -> a retry claims and succeeds
-- ---------------------------------------------------------------------------------------

INSERT INTO tokens SELECT 'fail1', token FROM whizbang.idempotency_begin('ship', 's-1', '\x51', p_now => pg_temp.at('0'));
-- ... the handler fails before its effect ...
SELECT is(whizbang.idempotency_release('ship', 's-1', pg_temp.tok('fail1'), p_now => pg_temp.at('5 s')), 'released',
          'handler failure: the owner releases the key');
SELECT is(pg_temp.key_rows('ship'), 0::bigint, 'release deletes the claim');
SELECT is(whizbang.idempotency_release('ship', 's-1', pg_temp.tok('fail1')), 'not_found', 'a second release: not_found');
SELECT is(whizbang.idempotency_complete('ship', 's-1', pg_temp.tok('fail1'), '{}'), 'complete_conflict',
          'completing a released claim: complete_conflict');
SELECT is(pg_temp.key_rows('ship'), 0::bigint, 'and it wrote nothing');
INSERT INTO tokens SELECT 'retry1', token FROM whizbang.idempotency_begin('ship', 's-1', '\x51', p_now => pg_temp.at('10 s'));
SELECT cmp_ok(pg_temp.tok('retry1'), '>', pg_temp.tok('fail1'), 'the retry claims with a new, larger token');
SELECT results_eq(
    $$SELECT state, first_claimed_at, claimed_at FROM pg_temp.key_row('ship', 's-1')$$,
    $$VALUES ('in_progress'::text, pg_temp.at('10 s'), pg_temp.at('10 s'))$$,
    'the retry''s claim is a fresh row');
SELECT is(pg_temp.finish('ship', 's-1', pg_temp.tok('retry1'), 'retry', pg_temp.at('11 s')), 'completed',
          'the retry succeeds');
SELECT is(whizbang.idempotency_release('ship', 's-1', pg_temp.tok('fail1')), 'not_owner',
          'the failed attempt''s token on the completed key: not_owner');
SELECT is(pg_temp.effects('ship', 's-1'), 1::bigint, 'handler failure and retry: one effect');

-- In-transaction mode: a failing handler rolls its whole transaction back, the claim with it.
CREATE FUNCTION pg_temp.failing_handler(p_key text, p_now timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    b record;
BEGIN
    BEGIN
        SELECT * INTO b FROM whizbang.idempotency_begin('ship', p_key, '\x52', p_now => p_now);
        INSERT INTO effects VALUES ('ship', p_key, 'failing', p_now);
        RAISE EXCEPTION 'payment provider timed out';
    EXCEPTION WHEN raise_exception THEN
        RETURN 'rolled back after ' || b.outcome;
    END;
END
$$;
SELECT is(pg_temp.failing_handler('s-2', pg_temp.at('0')), 'rolled back after claimed',
          'in-transaction failure: the handler claimed, wrote, then failed and rolled back');
SELECT is(pg_temp.key_row('ship', 's-2') IS NULL, true, 'the rollback removed the claim: no row');
SELECT is(pg_temp.effects('ship', 's-2'), 0::bigint, 'and the effect');
SELECT results_eq(
    $$SELECT outcome FROM pg_temp.handle('ship', 's-2', '{"amount": 3}', pg_temp.at('1 s'))$$,
    ARRAY['claimed'], 'the retry claims at once (no lease to wait out) and succeeds');
SELECT is(pg_temp.effects('ship', 's-2'), 1::bigint, 'in-transaction failure and retry: one effect');

-- ---------------------------------------------------------------------------------------
-- Seed 002: replay after retention - result TTL, tombstone TTL, then claimable again
-- ---------------------------------------------------------------------------------------

INSERT INTO whizbang.wh_idempotency_policies (scope, in_progress_ttl, default_result_ttl, min_result_ttl, max_result_ttl,
                                              tombstone_ttl, description)
VALUES ('retention', '5 min', '1 hour', '1 min', '1 day', '1 day', 'short retention for the replay-after-retention test');

SELECT results_eq(
    $$SELECT outcome FROM pg_temp.handle('retention', 'r-1', '{"amount": 7}', pg_temp.at('0'))$$,
    ARRAY['claimed'], 'retention: handled once');
SELECT results_eq(
    $$SELECT result_ttl, result_expires_at, tombstone_expires_at FROM pg_temp.key_row('retention', 'r-1')$$,
    $$VALUES (interval '1 hour', pg_temp.at('1 hour'), pg_temp.at('1 hour') + interval '1 day')$$,
    'retention: the scope''s policy sets result TTL 1 hour and tombstone TTL 1 day');
SELECT results_eq(
    $$SELECT outcome, result FROM pg_temp.handle('retention', 'r-1', '{"amount": 7}', pg_temp.at('1 hour') - interval '1 microsecond')$$,
    $$VALUES ('completed_duplicate', '{"receipt": "handler", "amount": 7}'::jsonb)$$,
    'just before the result TTL: completed_duplicate with the result');
SELECT results_eq(
    $$SELECT outcome, token, result, completed_at FROM pg_temp.handle('retention', 'r-1', '{"amount": 7}', pg_temp.at('1 hour'))$$,
    $$VALUES ('expired_duplicate', NULL::bigint, NULL::jsonb, pg_temp.at('0'))$$,
    'at the result TTL: expired_duplicate from the tombstone - no result, but completed_at');
SELECT results_eq(
    $$SELECT outcome FROM pg_temp.handle('retention', 'r-1', '{"amount": 7}', pg_temp.at('1 hour') + interval '1 day' - interval '1 microsecond')$$,
    ARRAY['expired_duplicate'], 'just before the tombstone TTL: still expired_duplicate');
SELECT results_eq(
    $$SELECT outcome FROM pg_temp.handle('retention', 'r-1', '{"amount": 8}', pg_temp.at('2 hours'))$$,
    ARRAY['conflict'], 'the tombstone keeps the fingerprint: a different payload is still a conflict');
SELECT is(pg_temp.effects('retention', 'r-1'), 1::bigint, 'replays within the tombstone TTL: still one effect');
SELECT results_eq(
    $$SELECT state, completed_at FROM pg_temp.key_row('retention', 'r-1')$$,
    $$VALUES ('completed'::text, pg_temp.at('0'))$$,
    'replays did not change the completed row');
SELECT results_eq(
    $$SELECT outcome FROM pg_temp.handle('retention', 'r-1', '{"amount": 8}', pg_temp.at('1 hour') + interval '1 day')$$,
    ARRAY['claimed'],
    'at the tombstone TTL the key is forgotten: claimable again, even with another payload (the policy)');
SELECT results_eq(
    $$SELECT state, fingerprint, first_claimed_at, claimed_at, result
        FROM pg_temp.key_row('retention', 'r-1')$$,
    $$VALUES ('completed'::text, whizbang.fingerprint('{"amount": 8}'), pg_temp.at('1 hour') + interval '1 day',
              pg_temp.at('1 hour') + interval '1 day', '{"receipt": "handler", "amount": 8}'::jsonb)$$,
    'the forgotten key starts afresh: new fingerprint, first_claimed_at, result');
SELECT is(pg_temp.effects('retention', 'r-1'), 2::bigint,
          'after the tombstone TTL a replay runs the effect again: retention must cover the replay horizon');

-- A tombstone TTL of 0: the key is forgotten as soon as its result expires.
INSERT INTO whizbang.wh_idempotency_policies (scope, default_result_ttl, tombstone_ttl)
VALUES ('no-tombstone', '10 min', '0');
SELECT results_eq(
    $$SELECT outcome FROM pg_temp.handle('no-tombstone', 'n-1', '{}', pg_temp.at('0'))
      UNION ALL SELECT outcome FROM pg_temp.handle('no-tombstone', 'n-1', '{}', pg_temp.at('10 min') - interval '1 microsecond')
      UNION ALL SELECT outcome FROM pg_temp.handle('no-tombstone', 'n-1', '{}', pg_temp.at('10 min'))$$,
    ARRAY['claimed', 'completed_duplicate', 'claimed'],
    'tombstone TTL 0: completed_duplicate until the result TTL, then claimable at once (no expired_duplicate)');

-- ---------------------------------------------------------------------------------------
-- Seed 002: a TTL outside the policy bounds -> error at begin, no row written
-- ---------------------------------------------------------------------------------------

INSERT INTO whizbang.wh_idempotency_policies (scope, default_result_ttl, min_result_ttl, max_result_ttl, description)
VALUES ('bounded', '30 min', '1 min', '1 hour', 'results kept between 1 minute and 1 hour');

SELECT throws_ok(
    $$SELECT * FROM whizbang.idempotency_begin('bounded', 'b-1', p_result_ttl => '2 hours', p_now => pg_temp.at('0'))$$,
    '22023', NULL, 'p_result_ttl above the scope''s max_result_ttl: 22023 at begin');
SELECT throws_like(
    $$SELECT * FROM whizbang.idempotency_begin('bounded', 'b-1', p_result_ttl => '2 hours', p_now => pg_temp.at('0'))$$,
    '%result TTL%bounded%', 'the error names the result TTL and the scope');
SELECT throws_ok(
    $$SELECT * FROM whizbang.idempotency_begin('bounded', 'b-1', p_result_ttl => '30 s', p_now => pg_temp.at('0'))$$,
    '22023', NULL, 'p_result_ttl below the scope''s min_result_ttl: 22023 at begin');
SELECT is(pg_temp.key_rows('bounded'), 0::bigint, 'no row was written by the refused begins');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('bounded', 'b-1', p_result_ttl => '1 min', p_now => pg_temp.at('0'))
      UNION ALL
      SELECT outcome FROM whizbang.idempotency_begin('bounded', 'b-2', p_result_ttl => '1 hour', p_now => pg_temp.at('0'))$$,
    ARRAY['claimed', 'claimed'], 'the bounds themselves are allowed');
SELECT is((pg_temp.key_row('bounded', 'b-2')).result_ttl, interval '1 hour', 'the intended result TTL is kept on the claim');

-- A result TTL given at complete is checked against the same bounds, and a refusal changes
-- nothing.
INSERT INTO snapshots SELECT 'bounded', to_jsonb(pg_temp.key_row('bounded', 'b-2'));
SELECT throws_ok(
    format($$SELECT whizbang.idempotency_complete('bounded', 'b-2', %s, '{}', p_result_ttl => '3 hours',
                                                  p_now => pg_temp.at('1 min'))$$, (pg_temp.key_row('bounded', 'b-2')).token),
    '22023', NULL, 'complete with p_result_ttl above the bounds: 22023');
SELECT is(to_jsonb(pg_temp.key_row('bounded', 'b-2')), (SELECT row_image FROM snapshots WHERE name = 'bounded'),
          'the refused complete changed nothing: still in progress');
SELECT is(whizbang.idempotency_complete('bounded', 'b-2', (pg_temp.key_row('bounded', 'b-2')).token, '{}',
                                        p_result_ttl => '5 min', p_now => pg_temp.at('1 min')),
          'completed', 'complete with p_result_ttl within the bounds');
SELECT results_eq(
    $$SELECT result_ttl, result_expires_at FROM pg_temp.key_row('bounded', 'b-2')$$,
    $$VALUES (interval '1 hour', pg_temp.at('6 min'))$$,
    'complete''s p_result_ttl decides result_expires_at (the begin''s intention stays recorded)');

-- The scope's default result TTL must lie within the bounds too: a policy whose max is below
-- the global default (86400 s) refuses every begin that does not pass p_result_ttl.
INSERT INTO whizbang.wh_idempotency_policies (scope, max_result_ttl) VALUES ('tight', '1 hour');
SELECT throws_ok(
    $$SELECT * FROM whizbang.idempotency_begin('tight', 't-1', p_now => pg_temp.at('0'))$$,
    '22023', NULL, 'the scope''s default result TTL (the global 86400 s) above its max: 22023 at begin');
SELECT is(pg_temp.key_rows('tight'), 0::bigint, 'no row written');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('tight', 't-1', p_result_ttl => '30 min', p_now => pg_temp.at('0'))$$,
    ARRAY['claimed'], 'with a p_result_ttl inside the bounds it works');

-- Settings are the bounds of scopes without a policy row.
UPDATE whizbang.wh_settings SET setting_value = '600' WHERE setting_key = 'idempotency_result_ttl_max_seconds';
SELECT throws_ok(
    $$SELECT * FROM whizbang.idempotency_begin('unbounded', 'u-1', p_result_ttl => '11 min', p_now => pg_temp.at('0'))$$,
    '22023', NULL, 'idempotency_result_ttl_max_seconds bounds scopes without a policy row');
SELECT throws_ok(
    $$SELECT * FROM whizbang.idempotency_begin('unbounded', 'u-1', p_now => pg_temp.at('0'))$$,
    '22023', NULL, 'the global default result TTL (86400 s) above a lowered global max: 22023');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('unbounded', 'u-1', p_result_ttl => '10 min', p_now => pg_temp.at('0'))$$,
    ARRAY['claimed'], 'a result TTL at the lowered max works');
SELECT is(pg_temp.key_rows('unbounded'), 1::bigint, 'only the accepted begin wrote a row');
UPDATE whizbang.wh_settings SET setting_value = '2592000' WHERE setting_key = 'idempotency_result_ttl_max_seconds';

-- ---------------------------------------------------------------------------------------
-- TTL policy: idempotency_policy() and how begin / complete apply it
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT * FROM whizbang.idempotency_policy('no-such-scope')$$,
    $$VALUES (interval '1800 s', interval '86400 s', interval '1 s', interval '2592000 s', interval '30 days')$$,
    'a scope without a policy row: the global settings (1800 s, 86400 s, 1 s, 2592000 s, 30 days)');
SELECT results_eq(
    $$SELECT * FROM whizbang.idempotency_policy('retention')$$,
    $$VALUES (interval '5 min', interval '1 hour', interval '1 min', interval '1 day', interval '1 day')$$,
    'a full policy row is the effective policy');
SELECT results_eq(
    $$SELECT * FROM whizbang.idempotency_policy('tight')$$,
    $$VALUES (interval '1800 s', interval '86400 s', interval '1 s', interval '1 hour', interval '30 days')$$,
    'NULL columns of a policy row fall back to the settings');

UPDATE whizbang.wh_settings SET setting_value = CASE setting_key
        WHEN 'idempotency_in_progress_ttl_seconds' THEN '120'
        WHEN 'idempotency_result_ttl_seconds' THEN '3600'
        WHEN 'idempotency_tombstone_days' THEN '2' END
 WHERE setting_key IN ('idempotency_in_progress_ttl_seconds', 'idempotency_result_ttl_seconds', 'idempotency_tombstone_days');
SELECT results_eq(
    $$SELECT in_progress_ttl, default_result_ttl, tombstone_ttl FROM whizbang.idempotency_policy('no-such-scope')$$,
    $$VALUES (interval '120 s', interval '3600 s', interval '2 days')$$,
    'changed settings show in the effective policy at once, in the same transaction');
SELECT results_eq(
    $$SELECT outcome FROM pg_temp.handle('global', 'g-1', '{}', pg_temp.at('0'))$$,
    ARRAY['claimed'], 'a scope on the changed global settings');
SELECT results_eq(
    $$SELECT result_ttl, result_expires_at, tombstone_expires_at FROM pg_temp.key_row('global', 'g-1')$$,
    $$VALUES (interval '3600 s', pg_temp.at('3600 s'), pg_temp.at('3600 s') + interval '2 days')$$,
    'begin and complete apply the changed global result TTL and tombstone days');
INSERT INTO tokens SELECT 'global', token FROM whizbang.idempotency_begin('global', 'g-2', p_now => pg_temp.at('0'));
SELECT is((pg_temp.key_row('global', 'g-2')).lease_expires_at, pg_temp.at('120 s'),
          'begin applies the changed global in-progress TTL');
UPDATE whizbang.wh_settings SET setting_value = CASE setting_key
        WHEN 'idempotency_in_progress_ttl_seconds' THEN '1800'
        WHEN 'idempotency_result_ttl_seconds' THEN '86400'
        WHEN 'idempotency_tombstone_days' THEN '30' END
 WHERE setting_key IN ('idempotency_in_progress_ttl_seconds', 'idempotency_result_ttl_seconds', 'idempotency_tombstone_days');

-- A policy's in_progress_ttl sets the lease; p_in_progress_ttl overrides it.
INSERT INTO tokens SELECT 'policy_lease', token FROM whizbang.idempotency_begin('retention', 'lease-1', p_now => pg_temp.at('0'));
SELECT is((pg_temp.key_row('retention', 'lease-1')).lease_expires_at, pg_temp.at('5 min'),
          'the scope''s in_progress_ttl (5 min) sets the lease');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('retention', 'lease-1', p_now => pg_temp.at('5 min'))$$,
    ARRAY['claimed'], 'and after it the key can be re-claimed');
INSERT INTO tokens SELECT 'arg_lease', token FROM whizbang.idempotency_begin('retention', 'lease-2', p_in_progress_ttl => '2 hours',
                                                                              p_now => pg_temp.at('0'));
SELECT is((pg_temp.key_row('retention', 'lease-2')).lease_expires_at, pg_temp.at('2 hours'),
          'p_in_progress_ttl overrides the policy (the in-progress TTL is not bounded by min/max result TTL)');

-- The tombstone TTL in force at complete is the one applied.
UPDATE whizbang.wh_idempotency_policies SET tombstone_ttl = '3 days' WHERE scope = 'retention';
SELECT is(whizbang.idempotency_complete('retention', 'lease-2', pg_temp.tok('arg_lease'), '{}', p_now => pg_temp.at('1 min')),
          'completed', 'complete after a policy change');
SELECT is((pg_temp.key_row('retention', 'lease-2')).tombstone_expires_at, pg_temp.at('1 min') + interval '1 hour' + interval '3 days',
          'the changed tombstone TTL applies to keys completed after the change');

-- ---------------------------------------------------------------------------------------
-- Lease, result and tombstone boundaries are half-open: [start, expiry)
-- ---------------------------------------------------------------------------------------

INSERT INTO tokens SELECT 'edge', token
  FROM whizbang.idempotency_begin('edge', 'e-1', p_in_progress_ttl => '10 s', p_result_ttl => '20 s', p_now => pg_temp.at('0'));
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('edge', 'e-1', p_now => pg_temp.at('10 s') - interval '1 microsecond')$$,
    ARRAY['in_progress_duplicate'], 'lease: in_progress_duplicate until lease_expires_at');
INSERT INTO tokens SELECT 'edge2', token FROM whizbang.idempotency_begin('edge', 'e-1', p_result_ttl => '20 s', p_now => pg_temp.at('10 s'));
SELECT isnt(pg_temp.tok('edge2'), NULL, 'lease: claimed exactly at lease_expires_at');
SELECT is(whizbang.idempotency_complete('edge', 'e-1', pg_temp.tok('edge2'), '"ok"', p_now => pg_temp.at('10 s')),
          'completed', 'completed at +10 s, result TTL 20 s');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('edge', 'e-1', p_now => pg_temp.at('30 s') - interval '1 microsecond')
      UNION ALL SELECT outcome FROM whizbang.idempotency_begin('edge', 'e-1', p_now => pg_temp.at('30 s'))$$,
    ARRAY['completed_duplicate', 'expired_duplicate'], 'result: completed_duplicate until result_expires_at, then expired_duplicate');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.idempotency_begin('edge', 'e-1', p_now => pg_temp.at('30 s') + interval '30 days' - interval '1 microsecond')
      UNION ALL SELECT outcome FROM whizbang.idempotency_begin('edge', 'e-1', p_now => pg_temp.at('30 s') + interval '30 days')$$,
    ARRAY['expired_duplicate', 'claimed'], 'tombstone: expired_duplicate until tombstone_expires_at, then claimed');

-- ---------------------------------------------------------------------------------------
-- Fencing tokens: strictly increasing across scopes
-- ---------------------------------------------------------------------------------------

INSERT INTO tokens SELECT 'seq1', token FROM whizbang.idempotency_begin('seq-a', 'x', p_now => pg_temp.at('0'));
INSERT INTO tokens SELECT 'seq2', token FROM whizbang.idempotency_begin('seq-b', 'x', p_now => pg_temp.at('0'));
INSERT INTO tokens SELECT 'seq3', token FROM whizbang.idempotency_begin('seq-a', 'y', p_now => pg_temp.at('0'));
SELECT ok(pg_temp.tok('seq1') < pg_temp.tok('seq2') AND pg_temp.tok('seq2') < pg_temp.tok('seq3'),
          'tokens increase from claim to claim, across scopes');
SELECT is(whizbang.idempotency_complete('seq-a', 'x', pg_temp.tok('seq2'), '{}'), 'complete_conflict',
          'a token of another scope does not complete a key');
SELECT is(whizbang.idempotency_release('seq-a', 'x', pg_temp.tok('seq3')), 'not_owner',
          'a token of another key does not release it');
SELECT is(whizbang.idempotency_complete('seq-a', 'x', pg_temp.tok('seq1'), '{}'), 'completed',
          'its own token does');

-- ---------------------------------------------------------------------------------------
-- Defaults: p_now = now(), NULL fingerprint and owner, result NULL
-- ---------------------------------------------------------------------------------------

INSERT INTO tokens SELECT 'defaults', token FROM whizbang.idempotency_begin('defaults', 'd-1');
SELECT results_eq(
    $$SELECT fingerprint, owner, claimed_at, lease_expires_at FROM pg_temp.key_row('defaults', 'd-1')$$,
    $$VALUES (NULL::bytea, NULL::text, now(), now() + interval '1800 s')$$,
    'begin''s defaults: no fingerprint, no owner, p_now = now()');
SELECT is(whizbang.idempotency_complete('defaults', 'd-1', pg_temp.tok('defaults')), 'completed',
          'complete with only scope, key and token');
SELECT results_eq(
    $$SELECT state, result, completed_at FROM pg_temp.key_row('defaults', 'd-1')$$,
    $$VALUES ('completed'::text, NULL::jsonb, now())$$, 'a NULL result is stored; completed_at = now()');
SELECT results_eq(
    $$SELECT outcome, result, completed_at FROM whizbang.idempotency_begin('defaults', 'd-1')$$,
    $$VALUES ('completed_duplicate', NULL::jsonb, now())$$,
    'a completed key with a NULL result: completed_duplicate, told apart from expired_duplicate by the outcome');

-- ---------------------------------------------------------------------------------------
-- Effects, all together
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT scope, key, count(*) FROM effects GROUP BY scope, key HAVING count(*) <> 1 ORDER BY 1, 2$$,
    $$VALUES ('no-tombstone'::text, 'n-1'::text, 2::bigint), ('retention', 'r-1', 2)$$,
    'every key had exactly one effect, except the two deliberately replayed after their keys were forgotten');

SELECT * FROM finish();
ROLLBACK;
