-- Per-consumer operations (issue 13 item 7): queues() and the queues view (stats()' work
-- metrics per source and consumer, summing to stats()), peek (pending messages in claim order,
-- read without leases, locks or writes) and cancel_work (cancelled / leased / not_found; the
-- dedup record stays, so a redelivery is a duplicate).
--
-- Section 1 stores relative to now() (the transaction's start, which stats() counts at); the
-- others use explicit p_now values around T0 = 2030-01-01 00:00:00 UTC. Every section has its
-- own consumers.
BEGIN;
SELECT plan(56);

-- Stores in the simulated time of 2030 find their generations made by maintenance then (0.13.0: a
-- store makes none further ahead than now() plus one period).
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
CREATE FUNCTION pg_temp.msg(p_n int, p_stream int DEFAULT NULL, p_extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('MessageId', pg_temp.id(p_n), 'HandlerName', 'handler', 'MessageType', 'type',
                              'Destination', 'topic', 'Envelope', jsonb_build_object('n', p_n))
           || CASE WHEN p_stream IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('StreamId', pg_temp.sid(p_stream)) END
           || p_extra
$$;
-- Stores inbox messages for p_consumer at p_now, pre-leased to instance p_instance until
-- p_lease_expiry when one is given.
CREATE FUNCTION pg_temp.store(p_consumer text, p_messages jsonb, p_now timestamptz,
                              p_instance int DEFAULT NULL, p_lease_expiry timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM whizbang.store_inbox_messages(p_messages, pg_temp.inst(p_instance), p_lease_expiry, p_now,
                                                       10000, p_consumer)
$$;
CREATE FUNCTION pg_temp.store_outbox(p_messages jsonb, p_now timestamptz, p_instance int DEFAULT NULL,
                                     p_lease_expiry timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM whizbang.store_outbox_messages(p_messages, pg_temp.inst(p_instance), p_lease_expiry, p_now)
$$;
-- Inbox work of p_consumer as either lease store shows it: the row's own columns but the lease
-- ones, and its lease (holder, token, expiry, attempts of this delivery) from whizbang.leases.
-- Only compared with itself (before and after), so the row's attempts may be read while leased.
CREATE FUNCTION pg_temp.work_state(p_consumer text)
RETURNS TABLE (message_id uuid, stream_id uuid, stream_seq bigint, partition_number int, scheduled_for timestamptz,
               attempts int, last_error text, processed_at timestamptz, instance_id uuid, lease_token bigint,
               lease_expiry timestamptz, lease_attempts int)
LANGUAGE sql AS $$
    SELECT w.message_id, w.stream_id, w.stream_seq, w.partition_number, w.scheduled_for, w.attempts, w.last_error,
           w.processed_at, l.instance_id, l.lease_token, l.lease_expiry, l.attempts
      FROM whizbang.wh_inbox w
      LEFT JOIN whizbang.leases l ON l.source = 'inbox' AND l.consumer = w.consumer AND l.message_id = w.message_id
     WHERE w.consumer = p_consumer
$$;

-- pg_temp.writes() and pg_temp.attempt(sql).
\ir lib/writes.sql

-- The call raises p_state and wrote nothing before it did.
CREATE FUNCTION pg_temp.fails(p_sql text, p_state text, p_description text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    SELECT * INTO r FROM pg_temp.attempt(p_sql);
    RETURN is(ARRAY[r.state, (r.writes_before = r.writes_after)::text], ARRAY[p_state, 'true'], p_description)
           || CASE WHEN r.state IS DISTINCT FROM p_state THEN E'\n' || diag('    message: ' || r.message) ELSE '' END;
END
$$;

-- ---------------------------------------------------------------------------------------
-- 1. queues: counts per (source, consumer), summing to stats()
-- ---------------------------------------------------------------------------------------

-- qa: 1, 2 (stream 1 head), 3 (behind it), 5 pending; 4 scheduled in an hour; 7 pre-leased for
-- five minutes; 6 dead-lettered. qb: 11, stored ten minutes ago. qc: 21, dead-lettered only.
-- qd: 31, pre-leased until half an hour ago (a lapsed lease is no lease). The outbox: 41, 42
-- pending, 43 pre-leased, 44 dead-lettered.
SELECT pg_temp.store('qa', jsonb_build_array(pg_temp.msg(1), pg_temp.msg(2, 1), pg_temp.msg(3, 1),
                                             pg_temp.msg(4, NULL, jsonb_build_object('ScheduledFor', now() + interval '1 hour')),
                                             pg_temp.msg(5), pg_temp.msg(6)), now() - interval '1 hour');
SELECT pg_temp.store('qa', jsonb_build_array(pg_temp.msg(7)), now() - interval '1 hour', 1, now() + interval '5 minutes');
SELECT pg_temp.store('qb', jsonb_build_array(pg_temp.msg(11)), now() - interval '10 minutes');
SELECT pg_temp.store('qc', jsonb_build_array(pg_temp.msg(21)), now() - interval '10 minutes');
SELECT pg_temp.store('qd', jsonb_build_array(pg_temp.msg(31)), now() - interval '1 hour', 1, now() - interval '30 minutes');
SELECT pg_temp.store_outbox(jsonb_build_array(pg_temp.msg(41), pg_temp.msg(42), pg_temp.msg(44)), now() - interval '2 hours');
SELECT pg_temp.store_outbox(jsonb_build_array(pg_temp.msg(43)), now() - interval '2 hours', 2, now() + interval '5 minutes');
SELECT * FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(6)], '{poison}', NULL, '{false}', 'qa');
SELECT * FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(21)], '{poison}', NULL, '{false}', 'qc');
SELECT * FROM whizbang.fail_work('outbox', ARRAY[pg_temp.id(44)], '{poison}', NULL, '{false}');

SELECT results_eq(
    $$SELECT * FROM whizbang.queues()$$,
    $$VALUES ('inbox', 'qa', 4::bigint, 1::bigint, 1::bigint, 1::bigint, 3600::bigint),
             ('inbox', 'qb', 1, 0, 0, 0, 600),
             ('inbox', 'qc', 0, 0, 0, 1, 0),
             ('inbox', 'qd', 1, 0, 0, 0, 3600),
             ('outbox', NULL, 2, 1, 0, 1, 7200)$$,
    'queues(): pending (a stream''s follower and a lapsed lease included), leased, scheduled, dead letters, oldest age; outbox consumer NULL');
SELECT results_eq($$SELECT * FROM whizbang.queues$$, $$SELECT * FROM whizbang.queues()$$,
    'the queues view is queues() at now()');
SELECT results_eq(
    $$SELECT m.metric, m.value FROM whizbang.stats() m
       WHERE m.metric ~ '^(inbox|outbox)_' ORDER BY m.metric$$,
    $$SELECT q.source || s.suffix, CASE s.suffix WHEN '_pending' THEN sum(q.pending)
                                                WHEN '_leased' THEN sum(q.leased)
                                                WHEN '_scheduled' THEN sum(q.scheduled)
                                                WHEN '_dead_lettered' THEN sum(q.dead_lettered)
                                                ELSE max(q.oldest_pending_seconds) END::bigint
        FROM whizbang.queues q
       CROSS JOIN (VALUES ('_pending'), ('_leased'), ('_scheduled'), ('_dead_lettered'),
                          ('_oldest_pending_seconds')) AS s(suffix)
       GROUP BY q.source, s.suffix ORDER BY 1$$,
    'stats(): each work metric of a source is the sum (the age: the maximum) of its queues rows');
SELECT results_eq($$SELECT DISTINCT consumer FROM whizbang.queues WHERE source = 'inbox' ORDER BY 1$$,
    $$VALUES ('qa'), ('qb'), ('qc'), ('qd')$$, 'the inbox consumers: SELECT DISTINCT consumer FROM whizbang.queues');
SELECT results_eq(
    $$SELECT source, consumer, pending, leased, scheduled, oldest_pending_seconds
        FROM whizbang.queues(now() + interval '2 hours') WHERE pending > 0$$,
    $$VALUES ('inbox', 'qa', 6::bigint, 0::bigint, 0::bigint, 10800::bigint), ('inbox', 'qb', 1, 0, 0, 7800),
             ('inbox', 'qd', 1, 0, 0, 10800), ('outbox', NULL, 3, 0, 0, 14400)$$,
    'queues(p_now): two hours later the scheduled row is due and the pre-leases have lapsed');
SELECT pg_temp.fails($$SELECT * FROM whizbang.queues(NULL)$$, '22004', 'queues: NULL p_now');
SELECT pg_temp.fails($$SELECT * FROM whizbang.queues('infinity')$$, '22023', 'queues: p_now infinity');

-- ---------------------------------------------------------------------------------------
-- 2. peek: claim order, no leases, no locks, no writes
-- ---------------------------------------------------------------------------------------

-- pk: 51 (no stream, due T0-10m); stream 2: 52 due at T0+5m (a retry, say) and 53 behind it,
-- due since T0-20m; stream 3: 54, 55, 56 due at T0-5m; 57 (no stream, due T0-1m); 58 under a
-- live pre-lease.
SELECT pg_temp.store('pk', jsonb_build_array(pg_temp.msg(51)), '2030-01-01 00:00:00+00'::timestamptz - interval '10 minutes');
SELECT pg_temp.store('pk', jsonb_build_array(pg_temp.msg(52, 2, '{"ScheduledFor": "2030-01-01T00:05:00Z"}'),
                                             pg_temp.msg(53, 2)), '2030-01-01 00:00:00+00'::timestamptz - interval '20 minutes');
SELECT pg_temp.store('pk', jsonb_build_array(pg_temp.msg(54, 3), pg_temp.msg(55, 3), pg_temp.msg(56, 3)),
                     '2030-01-01 00:00:00+00'::timestamptz - interval '5 minutes');
SELECT pg_temp.store('pk', jsonb_build_array(pg_temp.msg(57)), '2030-01-01 00:00:00+00'::timestamptz - interval '1 minute');
SELECT pg_temp.store('pk', jsonb_build_array(pg_temp.msg(58)), '2030-01-01 00:00:00+00', 3, '2030-01-01 01:00:00+00');


-- At T0+10m: 51 (ready T0-10m), stream 3 (ready T0-5m, in arrival order), 57 (T0-1m), then
-- stream 2 at T0+5m: 53 waits for 52 although it was due first.
SELECT is(ARRAY(SELECT message_id FROM whizbang.peek('inbox', 'pk', 100, '2030-01-01 00:10:00+00')),
          pg_temp.ids('{51,54,55,56,57,52,53}'),
          'peek: earliest due first, a stream''s rows in arrival order behind its head; a leased row left out');
SELECT is(ARRAY(SELECT message_id FROM whizbang.peek('inbox', 'pk', 2, '2030-01-01 00:10:00+00')),
          pg_temp.ids('{51,54}'), 'peek: p_limit takes the first rows of that order');
-- At T0 52 is not due (scheduled); 53 is pending (it is due) and comes at 52's time.
SELECT is(ARRAY(SELECT message_id FROM whizbang.peek('inbox', 'pk', 100, '2030-01-01 00:00:00+00')),
          pg_temp.ids('{51,54,55,56,57,53}'), 'peek: a row not yet due is left out; its stream''s followers stay behind it');
SELECT is((SELECT count(*) FROM whizbang.peek('inbox', 'pk', 1000, '2030-01-01 00:00:00+00')),
          (SELECT pending FROM whizbang.queues('2030-01-01 00:00:00+00') WHERE consumer = 'pk'),
          'peek: an unlimited peek returns queues()'' pending rows');
SELECT results_eq(
    $$SELECT source, message_id, stream_id, partition_number, handler_name, destination, message_type, envelope,
             metadata, scope, attempts, consumer, scheduled_for, lease_expiry, last_error
        FROM whizbang.peek('inbox', 'pk', 1, '2030-01-01 00:10:00+00')$$,
    $$VALUES ('inbox', pg_temp.id(51), NULL::uuid, whizbang.partition_of(pg_temp.id(51), 10000), 'handler', NULL::text,
              'type', '{"n": 51}'::jsonb, NULL::jsonb, NULL::jsonb, 0, 'pk', '2029-12-31 23:50:00+00'::timestamptz,
              NULL::timestamptz, NULL::text)$$,
    'peek: the columns of claim_work (no token) and scheduled_for, lease_expiry, last_error');

-- pr: 61 and 62 claimed with a 60 s lease; 61 fails (a retry), 62's lease lapses.
SELECT pg_temp.store('pr', jsonb_build_array(pg_temp.msg(61), pg_temp.msg(62)), '2030-01-01 00:00:00+00');
SELECT count(*) FROM whizbang.claim_work(pg_temp.inst(4), 'inbox', 10, 60, NULL, 10000, 100, '2030-01-01 00:00:02+00', 'pr');
SELECT outcome FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(61)], '{boom}', NULL, NULL, 'pr', '2030-01-01 00:00:03+00');
SELECT results_eq(
    $$SELECT message_id, attempts, lease_expiry, last_error FROM whizbang.peek('inbox', 'pr', 100, '2030-01-01 01:00:00+00')
       ORDER BY message_id$$,
    $$VALUES (pg_temp.id(61), 1, NULL::timestamptz, 'boom'), (pg_temp.id(62), 1, '2030-01-01 00:01:02+00', NULL)$$,
    'peek: a retry shows its attempts and last error; a lapsed lease its expiry');
SELECT is_empty($$SELECT * FROM whizbang.peek('inbox', 'pr', 100, '2030-01-01 00:00:30+00') WHERE message_id = pg_temp.id(62)$$,
    'peek: a row under a live lease is left out');

-- No writes, no lease, attempts unchanged.
CREATE TEMP TABLE work_before AS SELECT * FROM pg_temp.work_state('pk') UNION ALL SELECT * FROM pg_temp.work_state('pr');
SELECT pg_temp.writes() AS writes_before \gset
SELECT count(*) FROM whizbang.peek(NULL, NULL, 1000, '2030-01-01 01:00:00+00');
SELECT is(pg_temp.writes(), :'writes_before', 'peek writes nothing');
SELECT set_eq($$SELECT * FROM pg_temp.work_state('pk') UNION ALL SELECT * FROM pg_temp.work_state('pr')$$,
              $$SELECT * FROM work_before$$,
    'peek: work rows unchanged (attempts, leases)');
SELECT is(ARRAY(SELECT message_id FROM whizbang.claim_work(pg_temp.inst(5), 'inbox', 100, 60, NULL, 10000, 1,
                                                           '2030-01-01 00:10:00+00', 'pk') ORDER BY message_id),
          pg_temp.ids('{51,52,54,57}'), 'a claim after a peek takes what it would have taken');

-- The outbox: consumer NULL, destination set; p_consumer selects inbox rows only.
SELECT results_eq(
    $$SELECT source, message_id, consumer, destination, handler_name FROM whizbang.peek('outbox', NULL, 100, now())$$,
    $$VALUES ('outbox', pg_temp.id(41), NULL::text, 'topic', NULL::text), ('outbox', pg_temp.id(42), NULL, 'topic', NULL)$$,
    'peek(''outbox''): the outbox''s pending rows, consumer NULL, with their destination');
SELECT is(ARRAY(SELECT DISTINCT coalesce(consumer, '(outbox)') FROM whizbang.peek(NULL, 'qb', 100, now()) ORDER BY 1),
          ARRAY['(outbox)', 'qb'], 'peek(NULL, consumer): that consumer''s inbox rows and the outbox''s, as claim_work');
SELECT is(ARRAY(SELECT DISTINCT source FROM whizbang.peek('inbox', NULL, 100, now())), ARRAY['inbox'],
          'peek(''inbox''): inbox rows only');

SELECT pg_temp.fails($$SELECT * FROM whizbang.peek('queue')$$, '22023', 'peek: an unknown p_source');
SELECT pg_temp.fails($$SELECT * FROM whizbang.peek(p_limit => 0)$$, '22023', 'peek: p_limit 0');
SELECT pg_temp.fails($$SELECT * FROM whizbang.peek(p_limit => NULL)$$, '22004', 'peek: NULL p_limit');
SELECT pg_temp.fails($$SELECT * FROM whizbang.peek(p_now => NULL)$$, '22004', 'peek: NULL p_now');
SELECT pg_temp.fails($$SELECT * FROM whizbang.peek(p_consumer => repeat('x', 1025))$$, '22023',
                     'peek: a p_consumer of 1025 bytes');

-- ---------------------------------------------------------------------------------------
-- 3. cancel_work
-- ---------------------------------------------------------------------------------------

-- cx: 71, 72 plain; 73 due in an hour; 74 pre-leased for an hour; 75 pre-leased for a minute;
-- stream 4: 76, 77.
SELECT pg_temp.store('cx', jsonb_build_array(pg_temp.msg(71), pg_temp.msg(72),
                                             pg_temp.msg(73, NULL, '{"ScheduledFor": "2030-01-01T01:00:00Z"}'),
                                             pg_temp.msg(76, 4), pg_temp.msg(77, 4)), '2030-01-01 00:00:00+00');
SELECT pg_temp.store('cx', jsonb_build_array(pg_temp.msg(74)), '2030-01-01 00:00:00+00', 6, '2030-01-01 01:00:00+00');
SELECT pg_temp.store('cx', jsonb_build_array(pg_temp.msg(75)), '2030-01-01 00:00:00+00', 6, '2030-01-01 00:01:00+00');
CREATE TEMP TABLE leased_before AS SELECT * FROM pg_temp.work_state('cx') WHERE message_id = pg_temp.id(74);

SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.cancel_work('inbox',
        pg_temp.ids('{71,74,99,71,74,73,75}'), 'cx', '2030-01-01 00:02:00+00')$$,
    $$SELECT * FROM unnest(pg_temp.ids('{71,74,99,71,74,73,75}'),
                          '{cancelled,leased,not_found,not_found,leased,cancelled,cancelled}'::text[])$$,
    'cancel_work: one outcome per element in input order: a pending, scheduled or lapsed row is cancelled, a live lease '
    'leased, an unknown id not_found, a repeat of a cancelled id not_found, of a leased id leased');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'cx' AND message_id = ANY (pg_temp.ids('{71,73,75}'))),
          0::bigint, 'cancel_work: the cancelled work rows are gone');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'cx' AND message_id = ANY (pg_temp.ids('{71,73,75}'))),
          0::bigint, 'cancel_work: and their messages');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication
            WHERE consumer = 'cx' AND message_id = ANY (pg_temp.ids('{71,73,75}'))),
          3::bigint, 'cancel_work: the dedup records stay');
SELECT set_eq($$SELECT * FROM pg_temp.work_state('cx') WHERE message_id = pg_temp.id(74)$$,
              $$SELECT * FROM leased_before$$, 'cancel_work: a leased row is unchanged (token, expiry, attempts)');
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(71)), 'cx', '2030-01-01 00:03:00+00')$$,
    $$VALUES (pg_temp.id(71), 'duplicate')$$, 'cancel_work: a redelivery of a cancelled message is a duplicate');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'cx' AND message_id = pg_temp.id(71)),
          0::bigint, 'cancel_work: and stores no work');

-- A stream's head cancelled: the next row is the head.
SELECT results_eq($$SELECT outcome FROM whizbang.cancel_work('inbox', pg_temp.ids('{76}'), 'cx', '2030-01-01 00:02:00+00')$$,
    $$VALUES ('cancelled')$$, 'cancel_work: a stream''s head');
SELECT is(ARRAY(SELECT message_id FROM whizbang.claim_work(pg_temp.inst(7), 'inbox', 10, 60, NULL, 10000, 100,
                                                           '2030-01-01 00:02:00+00', 'cx') ORDER BY message_id),
          pg_temp.ids('{72,77}'), 'cancel_work: the follower of a cancelled head is claimed next');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.cancel_work('inbox', pg_temp.ids('{77}'), 'cx', '2030-01-01 00:02:30+00')
      UNION ALL
      SELECT outcome FROM whizbang.cancel_work('inbox', pg_temp.ids('{77}'), 'cx', '2030-01-01 00:03:01+00')$$,
    $$VALUES ('leased'), ('cancelled')$$, 'cancel_work: a claimed row is leased until its lease lapses');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', pg_temp.ids('{72}'), NULL, 'cx', '2030-01-01 00:02:00+00')
      UNION ALL
      SELECT outcome FROM whizbang.cancel_work('inbox', pg_temp.ids('{72}'), 'cx', '2030-01-01 00:02:00+00')$$,
    $$VALUES ('completed'), ('not_found')$$, 'cancel_work: a completed message is not_found');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.cancel_work('inbox', pg_temp.ids('{6}'), 'qa')
      UNION ALL SELECT outcome FROM whizbang.cancel_work('inbox', pg_temp.ids('{74}'), 'other', '2030-01-01 02:00:00+00')
      UNION ALL SELECT outcome FROM whizbang.cancel_work('inbox', pg_temp.ids('{74}'), p_now => '2030-01-01 02:00:00+00')$$,
    $$VALUES ('not_found'), ('not_found'), ('not_found')$$,
    'cancel_work: a dead letter, and a message of another consumer (p_consumer defaults to ''''), are not_found');

-- debug_mode keeps completed rows, not cancelled ones.
UPDATE whizbang.wh_settings SET setting_value = 'true' WHERE setting_key = 'debug_mode';
SELECT results_eq($$SELECT outcome FROM whizbang.cancel_work('inbox', pg_temp.ids('{74}'), 'cx', '2030-01-01 02:00:00+00')$$,
    $$VALUES ('cancelled')$$, 'cancel_work: a lease that lapsed is no lease');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'cx' AND message_id = pg_temp.id(74)),
          0::bigint, 'cancel_work: under debug_mode too the row is deleted (it was not completed)');
UPDATE whizbang.wh_settings SET setting_value = 'false' WHERE setting_key = 'debug_mode';

-- The outbox: p_consumer is ignored.
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.cancel_work('outbox', pg_temp.ids('{41,43,42}'), 'ignored', now())$$,
    $$VALUES (pg_temp.id(41), 'cancelled'), (pg_temp.id(43), 'leased'), (pg_temp.id(42), 'cancelled')$$,
    'cancel_work(''outbox''): pending messages cancelled, a pre-leased one leased; p_consumer ignored');
SELECT is((SELECT count(*) FROM whizbang.wh_outbox WHERE message_id = ANY (pg_temp.ids('{41,42}')))
        + (SELECT count(*) FROM whizbang.wh_outbox WHERE message_id = ANY (pg_temp.ids('{41,42}'))),
          0::bigint, 'cancel_work(''outbox''): message and work row gone');
SELECT results_eq($$SELECT source, consumer, pending, leased FROM whizbang.queues WHERE source = 'outbox'$$,
    $$VALUES ('outbox', NULL::text, 0::bigint, 1::bigint)$$, 'queues: the cancelled messages are no longer pending');

SELECT is_empty($$SELECT * FROM whizbang.cancel_work('inbox', '{}', 'cx')$$, 'cancel_work: an empty array, no rows');
SELECT is_empty($$SELECT * FROM whizbang.cancel_work('inbox', NULL, 'cx')$$, 'cancel_work: a NULL array counts as empty');

SELECT pg_temp.fails($$SELECT * FROM whizbang.cancel_work(NULL, pg_temp.ids('{72}'))$$, '22004', 'cancel_work: NULL p_source');
SELECT pg_temp.fails($$SELECT * FROM whizbang.cancel_work('queue', pg_temp.ids('{72}'))$$, '22023',
                     'cancel_work: an unknown p_source');
SELECT pg_temp.fails($$SELECT * FROM whizbang.cancel_work('inbox', ARRAY[pg_temp.id(57), NULL])$$, '22004',
                     'cancel_work: a NULL element');
SELECT pg_temp.fails($$SELECT * FROM whizbang.cancel_work('inbox', ARRAY[[pg_temp.id(57)], [pg_temp.id(56)]], 'pk')$$,
                     '2202E', 'cancel_work: a two-dimensional p_message_ids');
SELECT pg_temp.fails($$SELECT * FROM whizbang.cancel_work('inbox', array_fill(pg_temp.id(57), ARRAY[1000001]), 'pk')$$,
                     '54000', 'cancel_work: 1,000,001 ids');
SELECT pg_temp.fails($$SELECT * FROM whizbang.cancel_work('inbox', pg_temp.ids('{57}'), NULL)$$, '22004',
                     'cancel_work: NULL p_consumer');
SELECT pg_temp.fails($$SELECT * FROM whizbang.cancel_work('inbox', pg_temp.ids('{57}'), repeat('x', 1025))$$, '22023',
                     'cancel_work: a p_consumer of 1025 bytes');
SELECT pg_temp.fails($$SELECT * FROM whizbang.cancel_work('inbox', pg_temp.ids('{57}'), 'pk', NULL)$$, '22004',
                     'cancel_work: NULL p_now');

-- ---------------------------------------------------------------------------------------
-- 4. Grants: a role granted the inbox's tables only peeks and cancels in the inbox
-- ---------------------------------------------------------------------------------------

CREATE ROLE wb_test_inbox_operator NOLOGIN;
GRANT USAGE ON SCHEMA whizbang TO wb_test_inbox_operator;
GRANT EXECUTE ON FUNCTION whizbang.peek(text, text, integer, timestamptz),
                          whizbang.cancel_work(text, uuid[], text, timestamptz),
                          whizbang.queues(timestamptz) TO wb_test_inbox_operator;
GRANT SELECT ON whizbang.wh_inbox TO wb_test_inbox_operator;
GRANT UPDATE, DELETE ON whizbang.wh_inbox TO wb_test_inbox_operator;
GRANT DELETE ON whizbang.wh_inbox TO wb_test_inbox_operator;
SET LOCAL ROLE wb_test_inbox_operator;
SELECT is(ARRAY(SELECT message_id FROM whizbang.peek('inbox', 'pk', 1, '2030-01-01 00:10:00+00')), pg_temp.ids('{55}'),
          'grants: peek(''inbox'') needs the inbox''s tables only');
SELECT results_eq($$SELECT outcome FROM whizbang.cancel_work('inbox', pg_temp.ids('{55}'), 'pk', '2030-01-01 00:10:00+00')$$,
    $$VALUES ('cancelled')$$, 'grants: cancel_work(''inbox'') needs SELECT, UPDATE, DELETE on the inbox''s tables only');
SELECT throws_ok($$SELECT * FROM whizbang.peek(NULL, 'pk')$$, '42501', NULL,
                 'grants: peek of both sources needs the outbox''s tables too (42501)');
SELECT throws_ok($$SELECT * FROM whizbang.queues$$, '42501', NULL, 'grants: the queues view needs SELECT on it (42501)');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
