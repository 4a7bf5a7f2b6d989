-- Retry policy per consumer (0.16.0, issue 33 item 4; DESIGN §3.11): wh_retry_policies
-- overrides max_attempts, the backoff's base and cap and its jitter for one (source, consumer);
-- NULL columns and consumers without a row keep the database settings. Claims dead-letter by
-- the row's consumer's max_attempts, fail_work retries by its consumer's backoff. A change is
-- seen by the next call, in the writing transaction too. Run once per lease store.
BEGIN;
SELECT plan(23);

DO $$ BEGIN PERFORM whizbang.perform_maintenance('2029-12-31 00:00:00+00'); END $$;
SET LOCAL TimeZone = 'UTC';

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.inst(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('c0000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.at(p_seconds numeric) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$ SELECT '2030-01-01 00:00:00+00'::timestamptz + p_seconds * interval '1 second' $$;
CREATE FUNCTION pg_temp.store(p_consumer text, p_n int) RETURNS bigint
LANGUAGE sql AS $$
    SELECT count(*) FROM whizbang.store_inbox_messages(
        jsonb_build_array(jsonb_build_object('MessageId', pg_temp.id(p_n), 'HandlerName', 'h', 'MessageType', 't',
                                             'Envelope', '{}'::jsonb)),
        NULL, NULL, pg_temp.at(0), 10000, p_consumer)
$$;
-- One claim of p_consumer's inbox work at T0 + p_seconds, leased for 60 s: id, token, attempts.
CREATE FUNCTION pg_temp.claim(p_consumer text, p_seconds numeric)
RETURNS TABLE (message_id uuid, lease_token bigint, attempts int)
LANGUAGE sql AS $$
    SELECT c.message_id, c.lease_token, c.attempts
      FROM whizbang.claim_work(pg_temp.inst(1), 'inbox', 100, 60, NULL, 10000, 100, pg_temp.at(p_seconds), p_consumer) c
$$;
-- Fails p_consumer's message p_n (retryable) with the token of its claim: outcome and due time.
CREATE FUNCTION pg_temp.fail(p_consumer text, p_n int, p_token bigint, p_seconds numeric)
RETURNS TABLE (outcome text, scheduled_for timestamptz)
LANGUAGE sql AS $$
    SELECT f.outcome, f.scheduled_for
      FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(p_n)], ARRAY['e'], ARRAY[p_token], NULL, p_consumer,
                              pg_temp.at(p_seconds)) f
$$;

-- ---- the table and its checks
INSERT INTO whizbang.wh_retry_policies (source, consumer, max_attempts, retry_base_seconds, retry_max_seconds,
                                        retry_jitter_percent, description)
VALUES ('inbox', 'rp-a', 2, 10, 10, 0, 'two tries, ten seconds apart'),
       ('inbox', 'rp-c', 1, NULL, NULL, NULL, 'one try');
SELECT throws_ok($$INSERT INTO whizbang.wh_retry_policies (source, consumer, max_attempts) VALUES ('inbox', 'x', 0)$$,
                 '23514', NULL, 'max_attempts below 1 is refused (23514)');
SELECT throws_ok($$INSERT INTO whizbang.wh_retry_policies (source, consumer, retry_jitter_percent) VALUES ('inbox', 'x', 101)$$,
                 '23514', NULL, 'a jitter above 100 percent is refused');
SELECT throws_ok($$INSERT INTO whizbang.wh_retry_policies (source, consumer, retry_base_seconds) VALUES ('inbox', 'x', -1)$$,
                 '23514', NULL, 'a negative base is refused');
SELECT throws_ok($$INSERT INTO whizbang.wh_retry_policies (source, consumer) VALUES ('outbox', 'x')$$,
                 '23514', NULL, 'an outbox policy has consumer ''''');
SELECT throws_ok($$INSERT INTO whizbang.wh_retry_policies (source, consumer) VALUES ('queue', '')$$,
                 '23514', NULL, 'an unknown source is refused');
SELECT throws_ok($$INSERT INTO whizbang.wh_retry_policies (source, consumer) VALUES ('inbox', 'rp-a')$$,
                 '23505', NULL, 'one policy per source and consumer');

-- ---- fail_work: the consumer's backoff and attempt limit
SELECT pg_temp.store('rp-a', 1);
SELECT pg_temp.store('rp-b', 2);
CREATE TEMP TABLE a1 AS SELECT * FROM pg_temp.claim('rp-a', 0);
SELECT results_eq($$SELECT outcome, scheduled_for FROM pg_temp.fail('rp-a', 1, (SELECT lease_token FROM a1), 1)$$,
                  $$VALUES ('retry_scheduled', pg_temp.at(11))$$,
                  'fail_work: the policy''s base (10 s) without jitter: due exactly 10 s later');
SELECT is((SELECT count(*) FROM pg_temp.claim('rp-a', 10.9)), 0::bigint, 'not handed out before then');
CREATE TEMP TABLE a2 AS SELECT * FROM pg_temp.claim('rp-a', 11);
SELECT is((SELECT attempts FROM a2), 2, 'the second delivery');
SELECT results_eq($$SELECT outcome FROM pg_temp.fail('rp-a', 1, (SELECT lease_token FROM a2), 12)$$,
                  $$VALUES ('dead_lettered')$$, 'fail_work: the policy''s max_attempts (2) is reached: dead-lettered');

CREATE TEMP TABLE b1 AS SELECT * FROM pg_temp.claim('rp-b', 0);
CREATE TEMP TABLE b1_fail AS SELECT * FROM pg_temp.fail('rp-b', 2, (SELECT lease_token FROM b1), 1);
SELECT is((SELECT outcome FROM b1_fail), 'retry_scheduled', 'a consumer without a policy: retried');
SELECT ok((SELECT scheduled_for BETWEEN pg_temp.at(1 + 22.5) AND pg_temp.at(1 + 30) FROM b1_fail),
          'a consumer without a policy: the settings'' backoff (30 s, jitter 25 %)');

-- A NULL column is the setting: rp-b gets a policy with only a base of 100 s, cap 100 s.
INSERT INTO whizbang.wh_retry_policies (source, consumer, retry_base_seconds, retry_max_seconds, retry_jitter_percent)
VALUES ('inbox', 'rp-b', 100, 100, 0);
CREATE TEMP TABLE b2 AS SELECT * FROM pg_temp.claim('rp-b', 31);
SELECT results_eq($$SELECT outcome, scheduled_for FROM pg_temp.fail('rp-b', 2, (SELECT lease_token FROM b2), 40)$$,
                  $$VALUES ('retry_scheduled', pg_temp.at(140))$$,
                  'a policy written in this transaction is in effect at the next call (base 100 s)');
SELECT is((SELECT attempts FROM whizbang.wh_inbox WHERE consumer = 'rp-b'), 2,
          'its NULL max_attempts is the setting (10): not dead-lettered at 2');
UPDATE whizbang.wh_retry_policies SET max_attempts = 3 WHERE consumer = 'rp-b';
CREATE TEMP TABLE b3 AS SELECT * FROM pg_temp.claim('rp-b', 140);
SELECT results_eq($$SELECT outcome FROM pg_temp.fail('rp-b', 2, (SELECT lease_token FROM b3), 141)$$,
                  $$VALUES ('dead_lettered')$$, 'an updated policy is in effect at the next call (max_attempts 3)');

-- ---- claims: the row's consumer's attempt limit
SELECT pg_temp.store('rp-c', 3);
SELECT is((SELECT attempts FROM pg_temp.claim('rp-c', 0)), 1, 'rp-c: the first delivery');
SELECT is((SELECT count(*) FROM pg_temp.claim('rp-c', 120)), 0::bigint,
          'rp-c: after the lease lapsed, the next delivery would be the second: not handed out');
SELECT is((SELECT count(*) FROM whizbang.wh_dead_letters WHERE consumer = 'rp-c' AND message_id = pg_temp.id(3)), 1::bigint,
          'rp-c: dead-lettered by the claim (max_attempts 1)');
-- A claim over every consumer applies each row's own limit.
SELECT pg_temp.store('rp-c', 4);
SELECT pg_temp.store('rp-d', 4);
SELECT is((SELECT count(*) FROM whizbang.claim_work(pg_temp.inst(2), 'inbox', 100, 60, NULL, 10000, 100, pg_temp.at(0))
            WHERE message_id = pg_temp.id(4)), 2::bigint, 'a claim of every consumer: both deliveries of message 4');
SELECT is((SELECT array_agg(consumer ORDER BY consumer)
             FROM whizbang.claim_work(pg_temp.inst(2), 'inbox', 100, 60, NULL, 10000, 100, pg_temp.at(120))
            WHERE message_id = pg_temp.id(4)), ARRAY['rp-d'],
          'after the leases lapsed: rp-d''s is handed out again, rp-c''s (max_attempts 1) is not');

-- ---- the outbox's policy
INSERT INTO whizbang.wh_retry_policies (source, consumer, max_attempts) VALUES ('outbox', '', 1);
SELECT is((SELECT count(*) FROM whizbang.store_outbox_messages(jsonb_build_array(jsonb_build_object(
            'MessageId', pg_temp.id(5), 'MessageType', 't', 'Destination', 'd', 'Envelope', '{}'::jsonb)), NULL, NULL,
            pg_temp.at(0))), 1::bigint, 'an outbox message');
CREATE TEMP TABLE o1 AS SELECT * FROM whizbang.claim_work(pg_temp.inst(3), 'outbox', 10, 60, NULL, 10000, 100, pg_temp.at(0));
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('outbox', ARRAY[pg_temp.id(5)], ARRAY['e'], ARRAY(SELECT lease_token FROM o1),
                                             NULL, '', pg_temp.at(1))$$,
    $$VALUES ('dead_lettered')$$, 'the outbox''s policy (max_attempts 1): dead-lettered at the first failure');
DELETE FROM whizbang.wh_retry_policies;
SELECT is((SELECT count(*) FROM whizbang.wh_retry_policies), 0::bigint, 'policies removed (the settings again)');

SELECT * FROM finish();
ROLLBACK;
