-- Operating the queues (0.16.0, issue 33 items 3 and 4; DESIGN §3.11): requeue and reschedule
-- (requeued / rescheduled / leased / not_found; a live lease is refused unless p_take_over, a
-- lapsed one is no lease; attempts and stream order kept), fail_work's p_retry_after, dead letters
-- discarded by id or by filter and retried by filter. Run once per lease store (./scripts/test).
--
-- Times are explicit p_now values around T0 = 2030-01-01 00:00:00 UTC; every section has its own
-- consumers.
BEGIN;
SELECT plan(64);

DO $$ BEGIN PERFORM whizbang.perform_maintenance('2029-12-31 00:00:00+00'); END $$;
SET LOCAL TimeZone = 'UTC';

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.sid(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('5eeeeeee-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.inst(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('c0000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.ids(p_ns int[]) RETURNS uuid[]
LANGUAGE sql IMMUTABLE AS $$ SELECT array_agg(pg_temp.id(n) ORDER BY o) FROM unnest(p_ns) WITH ORDINALITY AS u(n, o) $$;
CREATE FUNCTION pg_temp.at(p_seconds int) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$ SELECT '2030-01-01 00:00:00+00'::timestamptz + make_interval(secs => p_seconds) $$;
CREATE FUNCTION pg_temp.msg(p_n int, p_stream int DEFAULT NULL, p_type text DEFAULT 'type') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('MessageId', pg_temp.id(p_n), 'HandlerName', 'handler', 'MessageType', p_type,
                              'Destination', 'topic', 'Envelope', jsonb_build_object('n', p_n))
           || CASE WHEN p_stream IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('StreamId', pg_temp.sid(p_stream)) END
$$;
CREATE FUNCTION pg_temp.store(p_consumer text, p_messages jsonb, p_seconds int DEFAULT 0) RETURNS bigint
LANGUAGE sql AS $$
    SELECT count(*) FROM whizbang.store_inbox_messages(p_messages, NULL, NULL, pg_temp.at(p_seconds), 10000, p_consumer)
$$;
-- Claims p_consumer's due inbox work at T0 + p_seconds for instance p_instance, leased for
-- p_lease seconds: the ids, tokens and attempts handed out.
CREATE FUNCTION pg_temp.claim(p_consumer text, p_seconds int, p_instance int DEFAULT 1, p_lease int DEFAULT 300)
RETURNS TABLE (message_id uuid, lease_token bigint, attempts int)
LANGUAGE sql AS $$
    SELECT c.message_id, c.lease_token, c.attempts
      FROM whizbang.claim_work(pg_temp.inst(p_instance), 'inbox', 100, p_lease, NULL, 10000, 100, pg_temp.at(p_seconds),
                               p_consumer) c
     ORDER BY c.message_id
$$;

-- pg_temp.writes(), pg_temp.attempt(sql) and pg_temp.fails(sql, state, pattern, description).
\ir lib/writes.sql


-- ---------------------------------------------------------------------------------------
-- 1. fail_work(..., p_retry_after): the handler's own delay instead of the backoff
-- ---------------------------------------------------------------------------------------
SELECT pg_temp.store('ra', jsonb_build_array(pg_temp.msg(1), pg_temp.msg(2)));
CREATE TEMP TABLE ra_claim AS SELECT * FROM pg_temp.claim('ra', 0);
SELECT results_eq(
    $$SELECT message_id, outcome, scheduled_for FROM whizbang.fail_work('inbox', pg_temp.ids('{1}'), ARRAY['429'],
        ARRAY(SELECT lease_token FROM ra_claim WHERE message_id = pg_temp.id(1)), NULL, 'ra', pg_temp.at(10),
        p_retry_after => interval '1 hour')$$,
    $$VALUES (pg_temp.id(1), 'retry_scheduled', pg_temp.at(3610))$$,
    'fail_work: p_retry_after schedules the retry exactly that long after p_now (no backoff, no jitter)');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('inbox', pg_temp.ids('{2}'), ARRAY['gone'],
        ARRAY(SELECT lease_token FROM ra_claim WHERE message_id = pg_temp.id(2)), ARRAY[false], 'ra', pg_temp.at(10),
        p_retry_after => interval '1 minute')$$,
    $$VALUES ('dead_lettered')$$, 'fail_work: p_retry_after does not retry what is not retryable');
SELECT is((SELECT count(*) FROM pg_temp.claim('ra', 3609, 2) WHERE message_id = pg_temp.id(1)), 0::bigint,
          'fail_work: not handed out before p_now + p_retry_after');
SELECT is((SELECT attempts FROM pg_temp.claim('ra', 3610, 2) WHERE message_id = pg_temp.id(1)), 2,
          'fail_work: handed out at p_now + p_retry_after, the failed delivery counted');
SELECT pg_temp.fails($$SELECT * FROM whizbang.fail_work('inbox', pg_temp.ids('{1}'), ARRAY['e'], NULL, NULL, 'ra',
                         pg_temp.at(3700), p_retry_after => interval '-1 second')$$,
                     '22023', NULL, 'fail_work: a negative p_retry_after is 22023, nothing written');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('inbox', pg_temp.ids('{99}'), ARRAY['e'], NULL, NULL, 'ra', pg_temp.at(3700),
        p_retry_after => NULL)$$,
    $$VALUES ('not_found')$$, 'fail_work: a NULL p_retry_after is the backoff (and an unknown id not_found)');
SELECT is((SELECT p.pronargs FROM pg_proc p WHERE p.oid = 'whizbang.fail_work'::regproc), 8::smallint,
          'fail_work: one function, with p_retry_after last (the 7-argument one is gone)');

-- ---------------------------------------------------------------------------------------
-- 2. requeue: due now
-- ---------------------------------------------------------------------------------------
-- rq: 10 scheduled by a failure (backoff of hours); 11 claimed (live lease); 12 claimed with a
-- one-minute lease that lapses; 13 pending. Another consumer holds 14.
SELECT pg_temp.store('rq', jsonb_build_array(pg_temp.msg(10), pg_temp.msg(11), pg_temp.msg(12)));
SELECT pg_temp.store('rq-other', jsonb_build_array(pg_temp.msg(14)));
CREATE TEMP TABLE rq_claim AS SELECT * FROM pg_temp.claim('rq', 0, 1, 60);
SELECT is((SELECT count(*) FROM rq_claim), 3::bigint, 'fixture: three rows claimed');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('inbox', pg_temp.ids('{10}'), ARRAY['later'],
        ARRAY(SELECT lease_token FROM rq_claim WHERE message_id = pg_temp.id(10)), NULL, 'rq', pg_temp.at(1),
        p_retry_after => interval '5 hours')$$,
    $$VALUES ('retry_scheduled')$$, 'fixture: 10 scheduled five hours ahead');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.renew_leases('inbox', pg_temp.ids('{11}'),
        ARRAY(SELECT lease_token FROM rq_claim WHERE message_id = pg_temp.id(11)), 3600, 'rq', pg_temp.at(1))$$,
    $$VALUES ('renewed')$$, 'fixture: 11 leased for an hour, 12''s lease lapses at T0 + 60 s');
SELECT pg_temp.store('rq', jsonb_build_array(pg_temp.msg(13)), 100);

SELECT results_eq(
    $$SELECT message_id, outcome, scheduled_for FROM whizbang.requeue('inbox', pg_temp.ids('{10,11,12,13,99,10,14}'), 'rq',
        p_now => pg_temp.at(120))$$,
    $$SELECT * FROM unnest(pg_temp.ids('{10,11,12,13,99,10,14}'),
                          '{requeued,leased,requeued,requeued,not_found,requeued,not_found}'::text[],
                          ARRAY[pg_temp.at(120), NULL, pg_temp.at(0), pg_temp.at(100), NULL, pg_temp.at(120), NULL])$$,
    'requeue: one row per element in input order: scheduled, lapsed and pending work requeued (due at p_now, or at '
    'its own earlier due time), a live lease leased, an unknown id or another consumer''s not_found, a repeated id '
    'the same answer');
SELECT is((SELECT scheduled_for FROM whizbang.wh_inbox WHERE consumer = 'rq' AND message_id = pg_temp.id(10)),
          pg_temp.at(120), 'requeue: the row is due at p_now');
SELECT is((SELECT attempts FROM whizbang.wh_inbox WHERE consumer = 'rq' AND message_id = pg_temp.id(10)), 1,
          'requeue: the row keeps its attempts');
SELECT is((SELECT last_error FROM whizbang.wh_inbox WHERE consumer = 'rq' AND message_id = pg_temp.id(10)), 'later',
          'requeue: and its last error');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', pg_temp.ids('{12}'),
        ARRAY(SELECT lease_token FROM rq_claim WHERE message_id = pg_temp.id(12)), 'rq', pg_temp.at(121))$$,
    $$VALUES ('lease_lost')$$, 'requeue: the lapsed lease ended with it: its holder''s token is lease_lost');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', pg_temp.ids('{11}'),
        ARRAY(SELECT lease_token FROM rq_claim WHERE message_id = pg_temp.id(11)), 'rq', pg_temp.at(121))$$,
    $$VALUES ('completed')$$, 'requeue: a live lease refused (leased) is unchanged: its holder completes it');
SELECT is(ARRAY(SELECT message_id FROM pg_temp.claim('rq', 120, 2)), pg_temp.ids('{10,12,13}'),
          'requeue: the requeued rows are claimed at p_now');

-- p_take_over: a live lease ends with the call; the delivery it had stays counted.
SELECT pg_temp.store('rt', jsonb_build_array(pg_temp.msg(20)));
CREATE TEMP TABLE rt_claim AS SELECT * FROM pg_temp.claim('rt', 0, 1, 3600);
SELECT results_eq(
    $$SELECT outcome FROM whizbang.requeue('inbox', pg_temp.ids('{20}'), 'rt', p_now => pg_temp.at(10))$$,
    $$VALUES ('leased')$$, 'requeue: a live lease is leased without p_take_over');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.requeue('inbox', pg_temp.ids('{20}'), 'rt', p_take_over => true, p_now => pg_temp.at(10))$$,
    $$VALUES ('requeued')$$, 'requeue: p_take_over takes a live lease over');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', pg_temp.ids('{20}'),
        ARRAY(SELECT lease_token FROM rt_claim), 'rt', pg_temp.at(11))$$,
    $$VALUES ('lease_lost')$$, 'requeue: the old holder''s token answers lease_lost after a take-over');
SELECT results_eq($$SELECT message_id, attempts FROM pg_temp.claim('rt', 11, 2)$$,
                  $$VALUES (pg_temp.id(20), 2)$$, 'requeue: claimed again at once, the taken-over delivery counted');

-- The outbox: p_consumer ignored.
SELECT is((SELECT count(*) FROM whizbang.store_outbox_messages(jsonb_build_array(jsonb_build_object(
                'MessageId', pg_temp.id(30), 'MessageType', 'type', 'Destination', 'topic', 'Envelope', '{}'::jsonb)),
                NULL, NULL, pg_temp.at(0))),
          1::bigint, 'fixture: an outbox message');
SELECT results_eq(
    $$SELECT outcome, scheduled_for FROM whizbang.reschedule('outbox', pg_temp.ids('{30}'), pg_temp.at(600), 'ignored',
        p_now => pg_temp.at(0))$$,
    $$VALUES ('rescheduled', pg_temp.at(600))$$, 'reschedule: an outbox message (p_consumer ignored)');
SELECT is((SELECT count(*) FROM whizbang.claim_work(pg_temp.inst(3), 'outbox', 10, 60, NULL, 10000, 100, pg_temp.at(599))),
          0::bigint, 'reschedule: the outbox message is not handed out before p_at');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.requeue('outbox', pg_temp.ids('{30}'), p_now => pg_temp.at(1))$$,
    $$VALUES ('requeued')$$, 'requeue: an outbox message');
SELECT is((SELECT count(*) FROM whizbang.claim_work(pg_temp.inst(3), 'outbox', 10, 60, NULL, 10000, 100, pg_temp.at(1))),
          1::bigint, 'requeue: the outbox message is handed out at once');

-- ---------------------------------------------------------------------------------------
-- 3. reschedule: due at p_at; a stream's order is kept
-- ---------------------------------------------------------------------------------------
-- rs: 40 alone; stream 1: 41 (head), 42.
SELECT pg_temp.store('rs', jsonb_build_array(pg_temp.msg(40), pg_temp.msg(41, 1), pg_temp.msg(42, 1)));
SELECT results_eq(
    $$SELECT message_id, outcome, scheduled_for FROM whizbang.reschedule('inbox', pg_temp.ids('{40,41}'), pg_temp.at(3600),
        'rs', p_now => pg_temp.at(0))$$,
    $$SELECT * FROM unnest(pg_temp.ids('{40,41}'), '{rescheduled,rescheduled}'::text[], ARRAY[pg_temp.at(3600), pg_temp.at(3600)])$$,
    'reschedule: rescheduled, due at p_at');
SELECT is((SELECT count(*) FROM pg_temp.claim('rs', 3599)), 0::bigint,
          'reschedule: nothing before p_at — a later head holds its stream back (42 waits behind 41)');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.reschedule('inbox', pg_temp.ids('{42}'), pg_temp.at(0), 'rs', p_now => pg_temp.at(0))$$,
    $$VALUES ('rescheduled')$$, 'reschedule: a row behind the head to an earlier time');
SELECT is((SELECT count(*) FROM pg_temp.claim('rs', 10)), 0::bigint,
          'reschedule: a row behind a later head still waits for it (stream order)');
SELECT is(ARRAY(SELECT message_id FROM pg_temp.claim('rs', 3600)), pg_temp.ids('{40,41,42}'),
          'reschedule: all handed out at p_at, the stream in order');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.reschedule('inbox', pg_temp.ids('{40}'), pg_temp.at(9000), 'rs', p_now => pg_temp.at(3601))$$,
    $$VALUES ('leased')$$, 'reschedule: work under a live lease is leased');

-- Bad input: an error, nothing written.
SELECT pg_temp.fails($$SELECT * FROM whizbang.requeue(NULL, pg_temp.ids('{13}'), 'rq')$$, '22004', NULL, 'requeue: NULL p_source');
SELECT pg_temp.fails($$SELECT * FROM whizbang.requeue('queue', pg_temp.ids('{13}'), 'rq')$$, '22023', NULL, 'requeue: an unknown p_source');
SELECT pg_temp.fails($$SELECT * FROM whizbang.requeue('inbox', ARRAY[NULL::uuid], 'rq')$$, '22004', NULL, 'requeue: a NULL id');
SELECT pg_temp.fails($$SELECT * FROM whizbang.requeue('inbox', pg_temp.ids('{13}'), NULL)$$, '22004', NULL, 'requeue: NULL p_consumer');
SELECT pg_temp.fails($$SELECT * FROM whizbang.requeue('inbox', pg_temp.ids('{13}'), 'rq', NULL)$$, '22004', NULL,
                     'requeue: NULL p_take_over');
SELECT pg_temp.fails($$SELECT * FROM whizbang.requeue('inbox', pg_temp.ids('{13}'), 'rq', p_now => 'infinity')$$, '22023', NULL,
                     'requeue: p_now not finite');
SELECT pg_temp.fails($$SELECT * FROM whizbang.reschedule('inbox', pg_temp.ids('{13}'), NULL, 'rq')$$, '22004', NULL,
                     'reschedule: NULL p_at');
SELECT pg_temp.fails($$SELECT * FROM whizbang.reschedule('inbox', pg_temp.ids('{13}'), 'infinity', 'rq')$$, '22023', NULL,
                     'reschedule: p_at not finite');
SELECT pg_temp.fails($$SELECT * FROM whizbang.reschedule('inbox', ARRAY[ARRAY[pg_temp.id(13)]], pg_temp.at(0), 'rq')$$,
                     '2202E', NULL, 'reschedule: a two-dimensional id array');
SELECT is((SELECT count(*) FROM whizbang.requeue('inbox', NULL)), 0::bigint, 'requeue: NULL ids: no rows');
SELECT is((SELECT count(*) FROM whizbang.reschedule('inbox', '{}', pg_temp.at(0))), 0::bigint, 'reschedule: no ids: no rows');

-- ---------------------------------------------------------------------------------------
-- 4. Dead letters: discarded by id or by filter, retried by filter
-- ---------------------------------------------------------------------------------------
-- dl: 50, 51 of type a, 52 of type b; dl2: 53 of type a. All dead-lettered (not retryable).
SELECT pg_temp.store('dl', jsonb_build_array(pg_temp.msg(50, NULL, 'a'), pg_temp.msg(51, NULL, 'a'),
                                             pg_temp.msg(52, NULL, 'b')));
SELECT pg_temp.store('dl2', jsonb_build_array(pg_temp.msg(53, NULL, 'a')));
SELECT is((SELECT count(*) FROM whizbang.fail_work('inbox', pg_temp.ids('{50,51,52}'), ARRAY['x', 'x', 'x'], NULL,
                                                   ARRAY[false, false, false], 'dl', pg_temp.at(100))
            WHERE outcome = 'dead_lettered'), 3::bigint, 'fixture: three dead letters of dl at T0 + 100 s');
SELECT is((SELECT count(*) FROM whizbang.fail_work('inbox', pg_temp.ids('{53}'), ARRAY['x'], NULL, ARRAY[false], 'dl2',
                                                   pg_temp.at(5000))
            WHERE outcome = 'dead_lettered'), 1::bigint, 'fixture: one of dl2 at T0 + 5000 s');
CREATE TEMP TABLE dl_ids AS
    SELECT message_id, consumer, dead_letter_id FROM whizbang.wh_dead_letters WHERE consumer IN ('dl', 'dl2');

SELECT is(whizbang.discard_dead_letters(ARRAY[(SELECT dead_letter_id FROM dl_ids WHERE message_id = pg_temp.id(50)),
                                              (SELECT dead_letter_id FROM dl_ids WHERE message_id = pg_temp.id(50)),
                                              -1]), 1,
          'discard_dead_letters: the count of dead letters deleted (repeated and unknown ids are no-ops)');
SELECT is((SELECT count(*) FROM whizbang.wh_dead_letters WHERE consumer = 'dl' AND message_id = pg_temp.id(50)), 0::bigint,
          'discard_dead_letters: it is gone');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(50, NULL, 'a')), 'dl', pg_temp.at(200))$$,
    $$VALUES ('duplicate')$$, 'discard_dead_letters: the dedup record stays: a redelivery is a duplicate');
SELECT is(whizbang.discard_dead_letters(NULL), 0, 'discard_dead_letters: NULL is 0');
SELECT is(whizbang.discard_dead_letters('{}'), 0, 'discard_dead_letters: empty is 0');
SELECT pg_temp.fails($$SELECT whizbang.discard_dead_letters(ARRAY[1, NULL])$$, '22004', NULL,
                     'discard_dead_letters: a NULL element is 22004, nothing deleted');
SELECT pg_temp.fails($$SELECT whizbang.discard_dead_letters(ARRAY[ARRAY[1]])$$, '2202E', NULL,
                     'discard_dead_letters: a two-dimensional array is 2202E');

-- By filter: every filter given must match.
SELECT pg_temp.fails($$SELECT whizbang.discard_dead_letters_matching()$$, '22023', NULL,
                     'discard_dead_letters_matching: no filter is 22023');
SELECT pg_temp.fails($$SELECT whizbang.retry_dead_letters_matching(p_limit => 5)$$, '22023', NULL,
                     'retry_dead_letters_matching: p_limit alone is no filter');
SELECT pg_temp.fails($$SELECT whizbang.retry_dead_letters_matching(p_source => 'queue')$$, '22023', NULL,
                     'retry_dead_letters_matching: an unknown p_source');
SELECT pg_temp.fails($$SELECT whizbang.discard_dead_letters_matching(p_consumer => 'dl', p_limit => 0)$$, '22023', NULL,
                     'discard_dead_letters_matching: p_limit 0');
SELECT pg_temp.fails($$SELECT whizbang.discard_dead_letters_matching(p_dead_lettered_before => 'infinity')$$, '22023', NULL,
                     'discard_dead_letters_matching: a timestamp not finite');
SELECT is(whizbang.discard_dead_letters_matching(p_consumer => 'nobody'), 0, 'discard_dead_letters_matching: no match is 0');

SELECT is(whizbang.retry_dead_letters_matching(p_consumer => 'dl', p_message_type => 'a'), 1,
          'retry_dead_letters_matching: by consumer and type (51 only: 50 was discarded, 52 is of type b)');
SELECT is(ARRAY(SELECT message_id FROM whizbang.wh_inbox WHERE consumer = 'dl' AND processed_at IS NULL),
          pg_temp.ids('{51}'), 'retry_dead_letters_matching: 51 is work again');
SELECT is((SELECT attempts FROM whizbang.wh_inbox WHERE consumer = 'dl' AND message_id = pg_temp.id(51)), 0,
          'retry_dead_letters_matching: as fresh work (attempts 0)');
SELECT is(whizbang.discard_dead_letters_matching(p_message_type => 'a', p_dead_lettered_before => pg_temp.at(1000)), 0,
          'discard_dead_letters_matching: by age: none of type a older than T0 + 1000 s is left');
SELECT is(whizbang.discard_dead_letters_matching(p_source => 'inbox', p_message_type => 'a',
                                                 p_dead_lettered_after => pg_temp.at(1000)), 1,
          'discard_dead_letters_matching: dead-lettered at or after a time (53 of dl2)');
SELECT is(ARRAY(SELECT message_id FROM whizbang.wh_dead_letters WHERE consumer IN ('dl', 'dl2')), pg_temp.ids('{52}'),
          'discard_dead_letters_matching: only the dead letter no filter matched is left');

SELECT * FROM finish();
ROLLBACK;
