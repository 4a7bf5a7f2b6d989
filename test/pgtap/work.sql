-- Work coordination (DESIGN §3.4): claim_work's per-stream order and p_max_per_stream, lease
-- expiry and fencing tokens, complete / fail / renew / release outcomes, attempts, backoff,
-- max_attempts and dead letters, retry_dead_letters, the p_partitions filter and debug_mode.
--
-- Time is simulated with explicit p_now values from T0 = 2030-01-01 00:00:00 UTC.
-- pg_temp.claim(label, ...) calls claim_work, keeps what it handed out in the temp table
-- claims (so later steps can use the tokens) and returns the message ids in claim order;
-- pg_temp.tok(label) is the lease token of that claim.
-- Every section uses its own consumer, so claims only see that section's rows.
BEGIN;
SELECT plan(157);

-- Stores in the simulated time of 2030 find their generations made by maintenance then (0.13.0: a
-- store makes none further ahead than now() plus one period).
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2030-01-01 00:00:00+00'); END $$;

SET LOCAL TimeZone = 'UTC';

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.sid(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('5eeeeeee-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.msg(p_n int, p_stream int DEFAULT NULL, p_extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('MessageId', pg_temp.id(p_n), 'HandlerName', 'handler', 'MessageType', 'type',
                              'Envelope', jsonb_build_object('n', p_n))
           || CASE WHEN p_stream IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('StreamId', pg_temp.sid(p_stream)) END
           || p_extra
$$;
CREATE FUNCTION pg_temp.store(p_consumer text, p_messages jsonb, p_now timestamptz DEFAULT '2030-01-01 00:00:00+00')
RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM whizbang.store_inbox_messages(p_messages, NULL, NULL, p_now, 10000, p_consumer)
$$;
CREATE FUNCTION pg_temp.inst(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('c0000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;

CREATE TEMP TABLE claims (label text, ord bigint, message_id uuid, stream_id uuid, partition_number int, attempts int,
                          lease_token bigint, lease_expiry timestamptz);
CREATE FUNCTION pg_temp.claim(p_label text, p_instance int, p_now timestamptz, p_consumer text,
                              p_max_rows int DEFAULT 100, p_max_per_stream int DEFAULT 100,
                              p_lease_seconds int DEFAULT 300, p_partitions int[] DEFAULT NULL,
                              p_partition_count int DEFAULT 10000)
RETURNS SETOF uuid LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO claims
    SELECT p_label, row_number() OVER (), c.message_id, c.stream_id, c.partition_number, c.attempts, c.lease_token,
           c.lease_expiry
      FROM whizbang.claim_work(pg_temp.inst(p_instance), 'inbox', p_max_rows, p_lease_seconds, p_partitions,
                               p_partition_count, p_max_per_stream, p_now, p_consumer) c;
    RETURN QUERY SELECT message_id FROM claims WHERE label = p_label ORDER BY ord;
END
$$;
CREATE FUNCTION pg_temp.tok(p_label text) RETURNS bigint
LANGUAGE sql AS $$ SELECT max(lease_token) FROM claims WHERE label = p_label $$;
-- The lease on an inbox message as whizbang.leases shows it (either lease store); NULL when
-- none is held. Tests read leases here or from claims, never from the work rows' lease columns.
CREATE FUNCTION pg_temp.lease_of(p_consumer text, p_message_id uuid) RETURNS whizbang.leases
LANGUAGE sql AS $$
    SELECT * FROM whizbang.leases WHERE source = 'inbox' AND consumer = p_consumer AND message_id = p_message_id
$$;
-- A work row as text: its own columns but the lease ones, and its lease. Only compared with
-- itself (before and after), so the row's attempts may be read even while it is leased.
CREATE FUNCTION pg_temp.work_row(p_consumer text, p_n int) RETURNS text
LANGUAGE sql AS $$
    SELECT row(w.consumer, w.message_id, w.stream_id, w.stream_seq, w.partition_number, w.scheduled_for, w.attempts,
               w.last_error, w.processed_at, pg_temp.lease_of(w.consumer, w.message_id))::text
      FROM whizbang.wh_inbox w WHERE consumer = p_consumer AND message_id = pg_temp.id(p_n)
$$;

-- ---------------------------------------------------------------------------------------
-- Per-stream order
-- ---------------------------------------------------------------------------------------

-- Stream 1: 1, 2, 3. Stream 2 in one batch in element order 0x23, 0x21, 0x22 (not id order).
-- 4 and 5 have no stream.
SELECT is(pg_temp.store('order', jsonb_build_array(pg_temp.msg(1, 1), pg_temp.msg(2, 1), pg_temp.msg(3, 1),
          pg_temp.msg(35, 2), pg_temp.msg(33, 2), pg_temp.msg(34, 2), pg_temp.msg(4), pg_temp.msg(5))),
          8::bigint, 'order: eight messages stored');
SELECT results_eq(
    $$SELECT message_id, stream_seq FROM whizbang.wh_inbox WHERE consumer = 'order' AND stream_id = pg_temp.sid(2)
       ORDER BY stream_seq$$,
    $$VALUES (pg_temp.id(35), 1::bigint), (pg_temp.id(33), 2::bigint), (pg_temp.id(34), 3::bigint)$$,
    'order: inside one batch a stream is numbered in element order, not id order');
SELECT results_eq(
    $$SELECT x FROM pg_temp.claim('o1', 1, '2030-01-01 00:00:00+00', 'order', p_max_per_stream => 1) x ORDER BY 1$$,
    $$VALUES (pg_temp.id(1)), (pg_temp.id(4)), (pg_temp.id(5)), (pg_temp.id(35))$$,
    'order: p_max_per_stream 1 hands out the two stream heads and both stream-less rows');
SELECT is((SELECT count(DISTINCT lease_token) FROM claims WHERE label = 'o1'), 1::bigint,
          'order: one token for the whole claim');
SELECT is_empty($$SELECT * FROM pg_temp.claim('o2', 2, '2030-01-01 00:00:01+00', 'order')$$,
                'order: while the heads are leased, no later row of their streams is handed out');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(1)], ARRAY[pg_temp.tok('o1')], 'order',
                                                '2030-01-01 00:00:02+00')$$,
    $$VALUES ('completed')$$, 'order: the head of stream 1 completed');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('o3', 2, '2030-01-01 00:00:03+00', 'order', p_max_per_stream => 1)$$,
    $$VALUES (pg_temp.id(2))$$, 'order: then the next row of stream 1, and nothing of stream 2');
SELECT ok(pg_temp.tok('o3') > pg_temp.tok('o1'), 'order: a later claim has a larger token');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(2)], ARRAY['boom'], ARRAY[pg_temp.tok('o3')],
                                            NULL, 'order', '2030-01-01 00:00:04+00')$$,
    $$VALUES ('retry_scheduled')$$, 'order: row 2 failed, retry scheduled');
SELECT is_empty($$SELECT * FROM pg_temp.claim('o4', 3, '2030-01-01 00:00:05+00', 'order')$$,
                'order: row 3 waits while row 2 is scheduled for retry');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('o5', 3, '2030-01-01 00:01:00+00', 'order', p_max_per_stream => 2)$$,
    $$VALUES (pg_temp.id(2)), (pg_temp.id(3))$$, 'order: when the retry is due, rows 2 and 3 go out in order');
SELECT results_eq(
    $$SELECT message_id, attempts FROM claims WHERE label = 'o5' ORDER BY ord$$,
    $$VALUES (pg_temp.id(2), 2), (pg_temp.id(3), 1)$$, 'order: row 2 on its second attempt, row 3 on its first');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(35), pg_temp.id(4), pg_temp.id(5)],
        ARRAY[pg_temp.tok('o1'), pg_temp.tok('o1'), pg_temp.tok('o1')], 'order', '2030-01-01 00:01:01+00')$$,
    $$VALUES ('completed'), ('completed'), ('completed')$$, 'order: stream 2''s head and the stream-less rows completed');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('o6', 1, '2030-01-01 00:01:02+00', 'order')$$,
    $$VALUES (pg_temp.id(33)), (pg_temp.id(34))$$, 'order: stream 2 continues in element order');

-- A pending (not yet due) older row holds back the rest of its stream; stream-less rows do not.
SELECT is(pg_temp.store('pending', jsonb_build_array(
              pg_temp.msg(6, 3, '{"ScheduledFor": "2030-01-01 01:00:00+00"}'), pg_temp.msg(7, 3),
              pg_temp.msg(8, NULL, '{"ScheduledFor": "2030-01-01 01:00:00+00"}'), pg_temp.msg(9),
              pg_temp.msg(10, NULL, '{"ScheduledFor": "2029-12-31 23:40:00+00"}'),
              pg_temp.msg(11, NULL, '{"ScheduledFor": "2029-12-31 23:30:00+00"}'))),
          6::bigint, 'pending: six messages stored');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('p1', 1, '2030-01-01 00:00:00+00', 'pending', p_max_rows => 1)$$,
    $$VALUES (pg_temp.id(11))$$, 'pending: the oldest scheduled due row goes first');
SELECT results_eq(
    $$SELECT x FROM pg_temp.claim('p2', 1, '2030-01-01 00:00:00+00', 'pending') x ORDER BY 1$$,
    $$VALUES (pg_temp.id(9)), (pg_temp.id(10))$$,
    'pending: a due row of a stream waits behind its not-yet-due older row; a stream-less row does not wait');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(9), pg_temp.id(10), pg_temp.id(11)], NULL,
                                                'pending', '2030-01-01 00:00:01+00')$$,
    $$VALUES ('completed'), ('completed'), ('completed')$$, 'pending: the claimed rows completed');
SELECT results_eq(
    $$SELECT x FROM pg_temp.claim('p3', 1, '2030-01-01 01:00:00+00', 'pending') x ORDER BY 1$$,
    $$VALUES (pg_temp.id(6)), (pg_temp.id(7)), (pg_temp.id(8))$$, 'pending: at 01:00 the rest is due');
SELECT results_eq(
    $$SELECT message_id FROM claims WHERE label = 'p3' AND stream_id IS NOT NULL ORDER BY ord$$,
    $$VALUES (pg_temp.id(6)), (pg_temp.id(7))$$, 'pending: stream 3 in order');

-- ---------------------------------------------------------------------------------------
-- p_max_per_stream, p_max_rows and runs of followers
-- ---------------------------------------------------------------------------------------

SELECT is(pg_temp.store('runs', jsonb_build_array(pg_temp.msg(20, 4), pg_temp.msg(21, 4), pg_temp.msg(22, 4))), 3::bigint,
          'runs: three rows of stream 4');
SELECT is(pg_temp.store('runs', jsonb_build_array(pg_temp.msg(23, 4), pg_temp.msg(24, 4)), '2030-01-01 00:00:01+00'),
          2::bigint, 'runs: two more rows of stream 4 in a later call');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('r1', 1, '2030-01-01 00:00:02+00', 'runs', p_max_per_stream => 3)$$,
    $$VALUES (pg_temp.id(20)), (pg_temp.id(21)), (pg_temp.id(22))$$,
    'runs: p_max_per_stream 3 hands out three consecutive rows, in order');
SELECT results_eq(
    $$SELECT count(DISTINCT lease_token), min(attempts), max(attempts) FROM claims WHERE label = 'r1'$$,
    $$VALUES (1::bigint, 1, 1)$$, 'runs: one token, first attempt each');
SELECT is_empty($$SELECT * FROM pg_temp.claim('r2', 2, '2030-01-01 00:00:03+00', 'runs')$$,
                'runs: the stream is held by one lease holder');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(22), pg_temp.id(20)],
        ARRAY[pg_temp.tok('r1'), pg_temp.tok('r1')], 'runs', '2030-01-01 00:00:04+00')$$,
    $$VALUES ('completed'), ('completed')$$, 'runs: rows 22 and 20 completed (21 still leased)');
SELECT is_empty($$SELECT * FROM pg_temp.claim('r3', 2, '2030-01-01 00:00:05+00', 'runs')$$,
                'runs: row 23 waits while the older row 21 is leased');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(21)], ARRAY[pg_temp.tok('r1')], 'runs',
                                                '2030-01-01 00:00:06+00')$$,
    $$VALUES ('completed')$$, 'runs: row 21 completed');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('r4', 2, '2030-01-01 00:00:07+00', 'runs', p_max_per_stream => 3)$$,
    $$VALUES (pg_temp.id(23)), (pg_temp.id(24))$$, 'runs: then rows 23 and 24');

SELECT is(pg_temp.store('runs', jsonb_build_array(pg_temp.msg(25, 5), pg_temp.msg(26, 5), pg_temp.msg(27, 5),
                        pg_temp.msg(28, 5))), 4::bigint, 'runs: four rows of stream 5');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('r5', 1, '2030-01-01 00:00:10+00', 'runs', p_max_rows => 2)$$,
    $$VALUES (pg_temp.id(25)), (pg_temp.id(26))$$, 'runs: p_max_rows 2 bounds the run');
SELECT is_empty($$SELECT * FROM pg_temp.claim('r6', 2, '2030-01-01 00:00:11+00', 'runs')$$,
                'runs: rows 27 and 28 wait behind the leased run');

SELECT is(pg_temp.store('runs', jsonb_build_array(pg_temp.msg(29, 6),
                        pg_temp.msg(30, 6, '{"ScheduledFor": "2030-01-01 01:00:00+00"}'), pg_temp.msg(31, 6))),
          3::bigint, 'runs: stream 6 with a not-yet-due row in the middle');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('r7', 1, '2030-01-01 00:00:20+00', 'runs')$$,
    $$VALUES (pg_temp.id(29))$$, 'runs: a not-ready row ends the run; the row after it waits too');

-- ---------------------------------------------------------------------------------------
-- Lease expiry, fencing tokens and stale tokens
-- ---------------------------------------------------------------------------------------

SELECT is(pg_temp.store('lease', jsonb_build_array(pg_temp.msg(40, 7), pg_temp.msg(41, 7),
                        pg_temp.msg(42, NULL, '{"ScheduledFor": "2030-01-01 00:00:30+00"}'))), 3::bigint,
          'lease: three messages');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('l1', 1, '2030-01-01 00:00:00+00', 'lease', p_max_per_stream => 1, p_lease_seconds => 60)$$,
    $$VALUES (pg_temp.id(40))$$, 'lease: instance 1 takes row 40 for 60 s (41 is behind it, 42 not due)');
SELECT results_eq(
    $$SELECT lease_expiry, attempts FROM claims WHERE label = 'l1'$$,
    $$VALUES ('2030-01-01 00:01:00+00'::timestamptz, 1)$$, 'lease: lease_expiry is p_now + p_lease_seconds');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('l2', 2, '2030-01-01 00:00:59.999999+00', 'lease', p_max_per_stream => 1)$$,
    $$VALUES (pg_temp.id(42))$$, 'lease: just before expiry another instance gets only the stream-less row');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('l3', 2, '2030-01-01 00:01:00+00', 'lease', p_max_per_stream => 1)$$,
    $$VALUES (pg_temp.id(40))$$, 'lease: at expiry row 40 is handed out again');
SELECT results_eq(
    $$SELECT attempts, lease_token > pg_temp.tok('l1'), lease_token > pg_temp.tok('l2'), lease_expiry FROM claims WHERE label = 'l3'$$,
    $$VALUES (2, true, true, '2030-01-01 00:06:00+00'::timestamptz)$$,
    'lease: second attempt, a new larger token, a new lease');

CREATE TEMP TABLE lease_before AS SELECT pg_temp.work_row('lease', 40) AS r;
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(40)], ARRAY[pg_temp.tok('l1')], 'lease',
                                                '2030-01-01 00:01:01+00')$$,
    $$VALUES ('lease_lost')$$, 'stale: complete with the old token is lease_lost');
SELECT results_eq(
    $$SELECT outcome, scheduled_for FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(40)], ARRAY['late'],
        ARRAY[pg_temp.tok('l1')], NULL, 'lease', '2030-01-01 00:01:02+00')$$,
    $$VALUES ('lease_lost', NULL::timestamptz)$$, 'stale: fail with the old token is lease_lost');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(40)], ARRAY['late'],
        ARRAY[pg_temp.tok('l1')], ARRAY[false], 'lease', '2030-01-01 00:01:02+00')$$,
    $$VALUES ('lease_lost')$$, 'stale: a non-retryable fail with the old token is lease_lost (no dead letter)');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(40)], ARRAY[pg_temp.tok('l1')], 600, 'lease',
                                               '2030-01-01 00:01:03+00')$$,
    $$VALUES ('lease_lost')$$, 'stale: renew with the old token is lease_lost');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.release_work('inbox', ARRAY[pg_temp.id(40)], ARRAY[pg_temp.tok('l1')], 'lease',
                                               '2030-01-01 00:01:04+00')$$,
    $$VALUES ('lease_lost')$$, 'stale: release with the old token is lease_lost');
SELECT is(pg_temp.work_row('lease', 40), (SELECT r FROM lease_before), 'stale: the work row is exactly as before');
SELECT is((SELECT count(*) FROM whizbang.wh_dead_letters WHERE consumer = 'lease'), 0::bigint, 'stale: no dead letter');

SELECT results_eq(
    $$SELECT outcome FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(40)], ARRAY[pg_temp.tok('l3')], 30, 'lease',
                                               '2030-01-01 00:02:00+00')$$,
    $$VALUES ('renewed')$$, 'renew: the current token renews');
SELECT results_eq(
    $$SELECT lease_expiry, lease_token = pg_temp.tok('l3'), attempts FROM pg_temp.lease_of('lease', pg_temp.id(40))$$,
    $$VALUES ('2030-01-01 00:02:30+00'::timestamptz, true, 2)$$,
    'renew: lease_expiry is p_now + p_lease_seconds, token and attempts unchanged');
SELECT is_empty($$SELECT * FROM pg_temp.claim('l4', 3, '2030-01-01 00:02:29+00', 'lease')$$,
                'renew: the renewed lease holds the stream');
SELECT results_eq(
    $$SELECT outcome, outcome = 'released' FROM whizbang.release_work('inbox', ARRAY[pg_temp.id(40), pg_temp.id(40)],
        ARRAY[pg_temp.tok('l3'), pg_temp.tok('l3')], 'lease', '2030-01-01 00:02:10+00') LIMIT 1$$,
    $$VALUES ('released', true)$$, 'release: the current token releases');
SELECT results_eq(
    $$SELECT w.attempts, l.instance_id, l.lease_token, l.lease_expiry
        FROM whizbang.wh_inbox w, pg_temp.lease_of(w.consumer, w.message_id) l
       WHERE w.consumer = 'lease' AND w.message_id = pg_temp.id(40)$$,
    $$VALUES (1, NULL::uuid, NULL::bigint, NULL::timestamptz)$$, 'release: lease cleared, the attempt refunded (2 -> 1)');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(40)], ARRAY[pg_temp.tok('l3')], 30, 'lease',
                                               '2030-01-01 00:02:11+00')$$,
    $$VALUES ('lease_lost')$$, 'release: renew after release is lease_lost');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(40)], ARRAY[pg_temp.tok('l3')], 'lease',
                                                '2030-01-01 00:02:12+00')$$,
    $$VALUES ('lease_lost')$$, 'release: complete with the released token is lease_lost');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('l5', 3, '2030-01-01 00:02:13+00', 'lease', p_max_per_stream => 1)$$,
    $$VALUES (pg_temp.id(40))$$, 'release: the released row is claimable at once');
SELECT results_eq(
    $$SELECT attempts, lease_token > pg_temp.tok('l3') FROM claims WHERE label = 'l5'$$,
    $$VALUES (2, true)$$, 'release: the refunded attempt is counted again, with a new token');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(40)], ARRAY[pg_temp.tok('l5')], 'lease',
                                                '2030-01-01 00:30:00+00')$$,
    $$VALUES ('completed')$$, 'lease: a current token completes after its lease lapsed, when nobody re-claimed');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(41), pg_temp.id(99), pg_temp.id(41)], NULL,
                                                'lease', '2030-01-01 00:30:01+00')$$,
    $$VALUES ('completed'), ('not_found'), ('not_found')$$,
    'lease: NULL p_lease_tokens completes an unclaimed row; unknown and repeated ids are not_found');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(42)], ARRAY[pg_temp.tok('l2')], 'other',
                                                '2030-01-01 00:30:02+00')$$,
    $$VALUES ('not_found')$$, 'lease: another consumer''s row is not_found');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(42)], ARRAY[NULL::bigint], 30, 'lease',
                                               '2030-01-01 00:30:03+00')$$,
    $$VALUES ('lease_lost')$$, 'lease: renew with a NULL token element is lease_lost');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.release_work('inbox', ARRAY[pg_temp.id(42)], ARRAY[NULL::bigint], 'lease',
                                               '2030-01-01 00:30:03+00')$$,
    $$VALUES ('lease_lost')$$, 'lease: release with a NULL token element is lease_lost');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.release_work('inbox', ARRAY[pg_temp.id(98)], ARRAY[1::bigint], 'lease',
                                               '2030-01-01 00:30:03+00')$$,
    $$VALUES ('not_found')$$, 'lease: release of an unknown id is not_found');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(98)], ARRAY[1::bigint], 30, 'lease',
                                               '2030-01-01 00:30:03+00')$$,
    $$VALUES ('not_found')$$, 'lease: renew of an unknown id is not_found');
SELECT results_eq(
    $$SELECT outcome, scheduled_for FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(98)], ARRAY['x'], NULL, NULL,
                                                           'lease', '2030-01-01 00:30:03+00')$$,
    $$VALUES ('not_found', NULL::timestamptz)$$, 'lease: fail of an unknown id is not_found');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(42)], ARRAY[pg_temp.tok('l2')], 'lease',
                                                '2030-01-01 00:30:04+00')$$,
    $$VALUES ('completed')$$, 'lease: the stream-less row completes with its token');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'lease')
          + (SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'lease'), 0::bigint,
          'lease: completed rows left wh_inbox and wh_inbox');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'lease'), 3::bigint,
          'lease: their dedup records stay');
SELECT is(pg_temp.store('lease', jsonb_build_array(pg_temp.msg(40, 7), pg_temp.msg(41, 7), pg_temp.msg(42)),
                        '2030-01-01 00:31:00+00'), 0::bigint, 'lease: a redelivery of completed messages is a duplicate');

-- Only a NULL p_lease_tokens array skips fencing: a NULL element is not the current token.
SELECT is(pg_temp.store('nulltok', jsonb_build_array(pg_temp.msg(45), pg_temp.msg(46))), 2::bigint, 'null token: two messages');
SELECT results_eq($$SELECT x FROM pg_temp.claim('n1', 1, '2030-01-01 00:00:00+00', 'nulltok') x ORDER BY 1$$,
                  $$VALUES (pg_temp.id(45)), (pg_temp.id(46))$$, 'null token: both leased');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(45)], ARRAY[NULL::bigint], 'nulltok',
                                                '2030-01-01 00:00:01+00')$$,
    $$VALUES ('lease_lost')$$, 'null token: complete with a NULL token element is lease_lost');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(46)], ARRAY['e'], ARRAY[NULL::bigint], ARRAY[false],
                                            'nulltok', '2030-01-01 00:00:01+00')$$,
    $$VALUES ('lease_lost')$$, 'null token: fail with a NULL token element is lease_lost');
SELECT results_eq(
    $$SELECT message_id, lease_token FROM whizbang.leases WHERE source = 'inbox' AND consumer = 'nulltok' ORDER BY 1$$,
    $$VALUES (pg_temp.id(45), pg_temp.tok('n1')), (pg_temp.id(46), pg_temp.tok('n1'))$$,
    'null token: both rows still leased with their token');

-- ---------------------------------------------------------------------------------------
-- Backoff: delay = min(retry_base_seconds * 2^(attempts-1), retry_max_seconds) * [0.75, 1.0]
-- ---------------------------------------------------------------------------------------

SELECT is(pg_temp.store('backoff', jsonb_build_array(pg_temp.msg(50, 8))), 1::bigint, 'backoff: one message');
CREATE TEMP TABLE backoff_at AS SELECT '2030-01-01 00:00:00+00'::timestamptz AS t;
-- Claims the message at its scheduled time, fails it, returns (attempts, delay in seconds).
CREATE FUNCTION pg_temp.claim_and_fail(p_error text) RETURNS TABLE(attempts int, delay double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_t     timestamptz := (SELECT t FROM backoff_at);
    v_claim record;
    v_fail  record;
BEGIN
    SELECT * INTO STRICT v_claim FROM whizbang.claim_work(pg_temp.inst(9), 'inbox', p_now => v_t, p_consumer => 'backoff');
    SELECT * INTO STRICT v_fail FROM whizbang.fail_work('inbox', ARRAY[v_claim.message_id], ARRAY[p_error],
                                                        ARRAY[v_claim.lease_token], NULL, 'backoff', v_t);
    IF v_fail.outcome <> 'retry_scheduled' THEN
        RAISE EXCEPTION 'unexpected outcome %', v_fail.outcome;
    END IF;
    UPDATE backoff_at SET t = v_fail.scheduled_for;
    RETURN QUERY SELECT v_claim.attempts, extract(epoch FROM v_fail.scheduled_for - v_t)::double precision;
END
$$;
SELECT ok(d.delay BETWEEN 22.5 AND 30 AND d.attempts = 1, format('backoff: attempt 1 waits 30 s x [0.75, 1]: %s', d.delay))
  FROM pg_temp.claim_and_fail('error 1') d;
SELECT ok(d.delay BETWEEN 45 AND 60 AND d.attempts = 2, format('backoff: attempt 2 waits 60 s x [0.75, 1]: %s', d.delay))
  FROM pg_temp.claim_and_fail('error 2') d;
SELECT ok(d.delay BETWEEN 90 AND 120 AND d.attempts = 3, format('backoff: attempt 3 waits 120 s x [0.75, 1]: %s', d.delay))
  FROM pg_temp.claim_and_fail('error 3') d;
SELECT ok(d.delay BETWEEN 180 AND 240 AND d.attempts = 4, format('backoff: attempt 4 waits 240 s x [0.75, 1]: %s', d.delay))
  FROM pg_temp.claim_and_fail('error 4') d;
SELECT ok(d.delay BETWEEN 225 AND 300 AND d.attempts = 5, format('backoff: attempt 5 is capped at 300 s x [0.75, 1]: %s', d.delay))
  FROM pg_temp.claim_and_fail('error 5') d;
SELECT ok(d.delay BETWEEN 225 AND 300 AND d.attempts = 6, format('backoff: attempt 6 is capped at 300 s x [0.75, 1]: %s', d.delay))
  FROM pg_temp.claim_and_fail('error 6') d;
SELECT results_eq(
    $$SELECT w.attempts, w.last_error, w.scheduled_for = (SELECT t FROM backoff_at), l.lease_token
        FROM whizbang.wh_inbox w, pg_temp.lease_of(w.consumer, w.message_id) l
       WHERE w.consumer = 'backoff'$$,
    $$VALUES (6, 'error 6'::text, true, NULL::bigint)$$,
    'backoff: the row keeps the last error, the retry time, and no lease');
SELECT is_empty(
    $$SELECT * FROM whizbang.claim_work(pg_temp.inst(9), p_now => (SELECT t FROM backoff_at) - interval '1 microsecond',
                                       p_consumer => 'backoff')$$,
    'backoff: not handed out before its retry time');
UPDATE whizbang.wh_settings SET setting_value = '10' WHERE setting_key = 'retry_base_seconds';
UPDATE whizbang.wh_settings SET setting_value = '15' WHERE setting_key = 'retry_max_seconds';
SELECT ok(d.delay BETWEEN 11.25 AND 15 AND d.attempts = 7,
          format('backoff: the settings apply: 10 s base, capped at 15 s: %s', d.delay))
  FROM pg_temp.claim_and_fail('error 7') d;
UPDATE whizbang.wh_settings SET setting_value = '1000' WHERE setting_key = 'retry_base_seconds';
UPDATE whizbang.wh_settings SET setting_value = '3600' WHERE setting_key = 'retry_max_seconds';
SELECT ok(d.delay BETWEEN 2700 AND 3600 AND d.attempts = 8,
          format('backoff: a large base doubles past the cap and is capped: %s', d.delay))
  FROM pg_temp.claim_and_fail('error 8') d;
UPDATE whizbang.wh_settings SET setting_value = '30' WHERE setting_key = 'retry_base_seconds';
UPDATE whizbang.wh_settings SET setting_value = '300' WHERE setting_key = 'retry_max_seconds';

-- ---------------------------------------------------------------------------------------
-- max_attempts and dead letters
-- ---------------------------------------------------------------------------------------

UPDATE whizbang.wh_settings SET setting_value = '3' WHERE setting_key = 'max_attempts';
SELECT is(pg_temp.store('dead', jsonb_build_array(pg_temp.msg(60, 9, '{"Metadata": {"m": 1}, "IsEvent": true,
                        "SentAt": "2029-12-31 12:00:00+00"}'), pg_temp.msg(61, 9), pg_temp.msg(62), pg_temp.msg(63),
                        pg_temp.msg(64), pg_temp.msg(65))),
          6::bigint, 'dead: six messages');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('d1', 1, '2030-01-01 00:00:00+00', 'dead', p_max_per_stream => 1) x ORDER BY 1$$,
    $$VALUES (pg_temp.id(60)), (pg_temp.id(62)), (pg_temp.id(63)), (pg_temp.id(64)), (pg_temp.id(65))$$,
    'dead: first claim');
SELECT results_eq(
    $$SELECT outcome, scheduled_for IS NOT NULL FROM whizbang.fail_work('inbox',
        ARRAY[pg_temp.id(60), pg_temp.id(64), pg_temp.id(65), pg_temp.id(63)], ARRAY['first', 'fatal', 'e65', 'boom'],
        ARRAY[pg_temp.tok('d1'), pg_temp.tok('d1'), pg_temp.tok('d1'), pg_temp.tok('d1')],
        ARRAY[true, false, NULL, true], 'dead', '2030-01-01 00:00:01+00')$$,
    $$VALUES ('retry_scheduled', true), ('dead_lettered', false), ('retry_scheduled', true), ('retry_scheduled', true)$$,
    'dead: per element, in input order: retryable -> retry, p_retryable false -> dead letter, NULL -> retryable');
SELECT results_eq(
    $$SELECT source, consumer COLLATE "default", message_id, handler_name, message_type, envelope, attempts, last_error,
             dead_lettered_at FROM whizbang.wh_dead_letters WHERE consumer = 'dead'$$,
    $$VALUES ('inbox'::text, 'dead'::text, pg_temp.id(64), 'handler'::text, 'type'::text, '{"n": 64}'::jsonb, 1,
              'fatal'::text, '2030-01-01 00:00:01+00'::timestamptz)$$,
    'dead: the non-retryable message is a dead letter with its error, after one attempt');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'dead' AND message_id = pg_temp.id(64))
          + (SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'dead' AND message_id = pg_temp.id(64)),
          0::bigint, 'dead: it left wh_inbox and wh_inbox');
-- Attempts 2 and 3 of 60; 63 is left leased to expire; 62 just expires.
SELECT results_eq(
    $$SELECT x FROM pg_temp.claim('d2', 1, '2030-01-01 00:10:00+00', 'dead', p_max_per_stream => 1) x ORDER BY 1$$,
    $$VALUES (pg_temp.id(60)), (pg_temp.id(62)), (pg_temp.id(63)), (pg_temp.id(65))$$,
    'dead: second claim (62 after its lease expired, the others after their retry time)');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(60)], ARRAY['second'], ARRAY[pg_temp.tok('d2')],
                                            NULL, 'dead', '2030-01-01 00:10:01+00')$$,
    $$VALUES ('retry_scheduled')$$, 'dead: attempt 2 of 60 failed, retry');
SELECT results_eq(
    $$SELECT x FROM pg_temp.claim('d3', 1, '2030-01-01 00:20:00+00', 'dead', p_max_per_stream => 1) x ORDER BY 1$$,
    $$VALUES (pg_temp.id(60)), (pg_temp.id(62)), (pg_temp.id(63)), (pg_temp.id(65))$$,
    'dead: third claim');
SELECT results_eq(
    $$SELECT message_id, attempts FROM claims WHERE label = 'd3' ORDER BY 1$$,
    $$VALUES (pg_temp.id(60), 3), (pg_temp.id(62), 3), (pg_temp.id(63), 3), (pg_temp.id(65), 3)$$,
    'dead: each on its third attempt');
SELECT results_eq(
    $$SELECT outcome, scheduled_for FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(60)], ARRAY['third'],
        ARRAY[pg_temp.tok('d3')], NULL, 'dead', '2030-01-01 00:20:01+00')$$,
    $$VALUES ('dead_lettered', NULL::timestamptz)$$, 'dead: the failure of attempt 3 of 3 dead-letters 60');
SELECT results_eq(
    $$SELECT message_id, stream_id, metadata, is_event, sent_at, received_at, attempts, last_error, dead_lettered_at
        FROM whizbang.wh_dead_letters WHERE consumer = 'dead' AND message_id = pg_temp.id(60)$$,
    $$VALUES (pg_temp.id(60), pg_temp.sid(9), '{"m": 1}'::jsonb, true, '2029-12-31 12:00:00+00'::timestamptz,
              '2030-01-01 00:00:00+00'::timestamptz, 3, 'third'::text, '2030-01-01 00:20:01+00'::timestamptz)$$,
    'dead: the dead letter keeps the message, its attempts and the error of the last failure');
SELECT results_eq(
    $$SELECT * FROM pg_temp.claim('d4', 2, '2030-01-01 00:20:02+00', 'dead', p_max_per_stream => 1,
                                 p_lease_seconds => 3600)$$,
    $$VALUES (pg_temp.id(61))$$, 'dead: the next row of the stream is free to go');
-- 62, 63 and 65 are on attempt 3 of 3; when their leases expire, the next claim moves them to
-- the dead letters instead of handing them out.
SELECT is_empty($$SELECT * FROM pg_temp.claim('d5', 2, '2030-01-01 00:30:00+00', 'dead')$$,
                'dead: rows whose next delivery would exceed max_attempts are not handed out');
SELECT results_eq(
    $$SELECT message_id, attempts, last_error, dead_lettered_at FROM whizbang.wh_dead_letters
       WHERE consumer = 'dead' AND message_id IN (pg_temp.id(62), pg_temp.id(63), pg_temp.id(65)) ORDER BY 1$$,
    $$VALUES (pg_temp.id(62), 3, NULL::text, '2030-01-01 00:30:00+00'::timestamptz),
             (pg_temp.id(63), 3, 'boom', '2030-01-01 00:30:00+00'),
             (pg_temp.id(65), 3, 'e65', '2030-01-01 00:30:00+00')$$,
    'dead: they are dead letters with 3 attempts and their last error');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'dead'), 1::bigint,
          'dead: only row 61 is still work');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'dead'), 1::bigint,
          'dead: only message 61 is still in wh_inbox');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'dead'), 6::bigint,
          'dead: every dedup record stays');

-- retry_dead_letters: back as fresh work (attempts 0); a redelivery is still a duplicate.
SELECT is(whizbang.retry_dead_letters(ARRAY(SELECT dead_letter_id FROM whizbang.wh_dead_letters
                                            WHERE consumer = 'dead' AND message_id IN (pg_temp.id(60), pg_temp.id(64)))),
          2, 'retry: two dead letters put back');
SELECT is((SELECT count(*) FROM whizbang.wh_dead_letters WHERE consumer = 'dead'), 3::bigint,
          'retry: they left wh_dead_letters');
SELECT results_eq(
    $$SELECT w.message_id, w.attempts, (pg_temp.lease_of(w.consumer, w.message_id)).lease_token, w.processed_at,
             i.envelope, i.metadata, i.is_event
        FROM whizbang.wh_inbox w JOIN whizbang.wh_inbox i USING (consumer, message_id)
       WHERE consumer = 'dead' AND message_id IN (pg_temp.id(60), pg_temp.id(64)) ORDER BY 1$$,
    $$VALUES (pg_temp.id(60), 0, NULL::bigint, NULL::timestamptz, '{"n": 60}'::jsonb, '{"m": 1}'::jsonb, true),
             (pg_temp.id(64), 0, NULL, NULL, '{"n": 64}', NULL, false)$$,
    'retry: fresh work with attempts 0 and the original message');
SELECT is(pg_temp.store('dead', jsonb_build_array(pg_temp.msg(60, 9), pg_temp.msg(64)), '2030-01-01 00:40:00+00'),
          0::bigint, 'retry: a redelivery of the retried messages is still a duplicate');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(62), pg_temp.msg(64)), 'dead',
                                                '2030-01-01 00:40:00+00')$$,
    $$VALUES ('duplicate'), ('duplicate')$$,
    'retry: a dead letter and a retried message are both still duplicates to inbox_receive');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'dead'), 3::bigint, 'retry: nothing stored twice');
SELECT results_eq(
    $$SELECT x FROM pg_temp.claim('d6', 1, '2030-01-01 00:40:00+00', 'dead') x ORDER BY 1$$,
    $$VALUES (pg_temp.id(64))$$, 'retry: 64 is claimable; 60 waits behind the leased row 61 of its stream');
SELECT results_eq(
    $$SELECT attempts FROM claims WHERE label = 'd6'$$, $$VALUES (1)$$, 'retry: counted from 0 again');
SELECT is(whizbang.retry_dead_letters(ARRAY(SELECT dead_letter_id FROM whizbang.wh_dead_letters WHERE consumer = 'dead'
                                            AND message_id = pg_temp.id(62)) || ARRAY[-1::bigint, 999999999]),
          1, 'retry: unknown ids are ignored and not counted');
SELECT is(whizbang.retry_dead_letters(ARRAY[-1::bigint]), 0, 'retry: only unknown ids: 0');
UPDATE whizbang.wh_settings SET setting_value = '10' WHERE setting_key = 'max_attempts';

-- ---------------------------------------------------------------------------------------
-- p_partitions: partition_of(coalesce(stream_id, message_id), p_partition_count) = ANY(p_partitions)
-- ---------------------------------------------------------------------------------------

SELECT is(pg_temp.store('part', (SELECT jsonb_agg(pg_temp.msg(1000 + g, CASE WHEN g % 2 = 0 THEN 100 + g % 10 END))
                                    FROM generate_series(1, 60) g)),
          60::bigint, 'partitions: 60 messages, half of them in 5 streams');
CREATE TEMP TABLE part_of AS
SELECT message_id, stream_id, whizbang.partition_of(coalesce(stream_id, message_id), 4) AS p4
  FROM whizbang.wh_inbox WHERE consumer = 'part';
SELECT ok((SELECT count(DISTINCT p4) FROM part_of) = 4, 'partitions: the messages fall in all 4 partitions');
SELECT set_eq(
    $$SELECT * FROM pg_temp.claim('pa1', 1, '2030-01-01 00:00:00+00', 'part', p_partitions => ARRAY[0, 2],
                                 p_partition_count => 4)$$,
    $$SELECT message_id FROM part_of WHERE p4 IN (0, 2)$$,
    'partitions: {0,2} of 4 hands out exactly the rows of those partitions (streams by stream id, others by id)');
SELECT set_eq(
    $$SELECT * FROM pg_temp.claim('pa2', 2, '2030-01-01 00:00:00+00', 'part', p_partitions => ARRAY[3, 1, 3],
                                 p_partition_count => 4)$$,
    $$SELECT message_id FROM part_of WHERE p4 IN (1, 3)$$,
    'partitions: {3,1,3} of 4 hands out the rest');
SELECT is_empty($$SELECT * FROM pg_temp.claim('pa0', 3, '2030-01-01 00:00:00+00', 'part')$$,
                'partitions: nothing left for a claim of every partition');
SELECT results_eq(
    $$SELECT outcome, count(*) FROM whizbang.release_work('inbox', ARRAY(SELECT message_id FROM claims WHERE label = 'pa1'),
        ARRAY(SELECT lease_token FROM claims WHERE label = 'pa1'), 'part', '2030-01-01 00:00:01+00') GROUP BY 1$$,
    $$VALUES ('released', (SELECT count(*) FROM claims WHERE label = 'pa1'))$$, 'partitions: the first claim released');
SELECT set_eq(
    $$SELECT * FROM pg_temp.claim('pa3', 3, '2030-01-01 00:00:02+00', 'part', p_partitions => ARRAY[5],
                                 p_partition_count => 7)$$,
    $$SELECT message_id FROM part_of p JOIN claims c USING (message_id)
       WHERE c.label = 'pa1' AND whizbang.partition_of(coalesce(p.stream_id, p.message_id), 7) = 5$$,
    'partitions: the claim''s p_partition_count is used, not the one given at store');
SELECT results_eq(
    $$SELECT c.message_id, c.partition_number FROM claims c WHERE c.label = 'pa1' ORDER BY 1$$,
    $$SELECT c.message_id, whizbang.partition_of(coalesce(c.stream_id, c.message_id), 10000) FROM claims c
       WHERE c.label = 'pa1' ORDER BY 1$$,
    'partitions: partition_number is partition_of(coalesce(stream_id, message_id), p_partition_count of the store)');

-- ---------------------------------------------------------------------------------------
-- debug_mode: completion marks processed_at instead of deleting
-- ---------------------------------------------------------------------------------------

UPDATE whizbang.wh_settings SET setting_value = 'true' WHERE setting_key = 'debug_mode';
SELECT is(pg_temp.store('debug', jsonb_build_array(pg_temp.msg(70, 10), pg_temp.msg(71, 10))), 2::bigint,
          'debug: two rows of one stream');
SELECT results_eq($$SELECT * FROM pg_temp.claim('g1', 1, '2030-01-01 00:00:00+00', 'debug', p_max_per_stream => 1)$$,
                  $$VALUES (pg_temp.id(70))$$, 'debug: the head is claimed');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(70)], ARRAY[pg_temp.tok('g1')], 'debug',
                                                '2030-01-01 00:00:05+00')$$,
    $$VALUES ('completed')$$, 'debug: completed');
SELECT results_eq(
    $$SELECT w.processed_at, l.lease_token, l.lease_expiry
        FROM whizbang.wh_inbox w, pg_temp.lease_of(w.consumer, w.message_id) l
       WHERE w.consumer = 'debug' AND w.message_id = pg_temp.id(70)$$,
    $$VALUES ('2030-01-01 00:00:05+00'::timestamptz, NULL::bigint, NULL::timestamptz)$$,
    'debug: the work row stays, processed_at = p_now, no lease');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'debug'), 2::bigint, 'debug: the message stays');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(70)], NULL, 'debug', '2030-01-01 00:00:06+00')$$,
    $$VALUES ('not_found')$$, 'debug: a second completion finds nothing');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(70)], ARRAY['x'], NULL, NULL, 'debug',
                                            '2030-01-01 00:00:06+00')$$,
    $$VALUES ('not_found')$$, 'debug: a processed row cannot be failed');
SELECT results_eq($$SELECT * FROM pg_temp.claim('g2', 1, '2030-01-01 00:00:07+00', 'debug')$$,
                  $$VALUES (pg_temp.id(71))$$, 'debug: a processed row does not hold its stream, and is not handed out again');
SELECT is(pg_temp.store('debug', jsonb_build_array(pg_temp.msg(70, 10)), '2030-01-01 00:00:08+00'), 0::bigint,
          'debug: a redelivery of the processed message is a duplicate');
UPDATE whizbang.wh_settings SET setting_value = 'false' WHERE setting_key = 'debug_mode';
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(71)], ARRAY[pg_temp.tok('g2')], 'debug',
                                                '2030-01-01 00:00:09+00')$$,
    $$VALUES ('completed')$$, 'debug off: completed');
SELECT results_eq(
    $$SELECT message_id FROM whizbang.wh_inbox WHERE consumer = 'debug'$$,
    $$VALUES (pg_temp.id(70))$$, 'debug off: the completed row is deleted; the debug leftover stays');

-- ---------------------------------------------------------------------------------------
-- One holder per stream: a lapsed run taken over, runs ended by fail and release, long runs
-- ---------------------------------------------------------------------------------------

-- Stream 20 (consumer 'lapse'): 80, 81, 82. A takes all three with a 10 s lease; it lapses;
-- B takes only the head. A's tokens are then lost for every row of the stream.
SELECT is(pg_temp.store('lapse', jsonb_build_array(pg_temp.msg(80, 20), pg_temp.msg(81, 20), pg_temp.msg(82, 20))),
          3::bigint, 'lapse: three rows of one stream');
SELECT results_eq($$SELECT * FROM pg_temp.claim('la', 1, '2030-01-01 00:00:01+00', 'lapse', p_lease_seconds => 10)$$,
                  $$VALUES (pg_temp.id(80)), (pg_temp.id(81)), (pg_temp.id(82))$$, 'lapse: A holds the run');
SELECT results_eq($$SELECT * FROM pg_temp.claim('lb', 2, '2030-01-01 00:00:30+00', 'lapse', p_max_rows => 1)$$,
                  $$VALUES (pg_temp.id(80))$$, 'lapse: after the lease lapsed B takes the head');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(81)], ARRAY[pg_temp.tok('la')], 'lapse',
                                                '2030-01-01 00:00:31+00')$$,
    $$VALUES ('lease_lost')$$, 'lapse: A cannot complete row 81 ahead of the head B now holds');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(82)], ARRAY[pg_temp.tok('la')], 60, 'lapse',
                                               '2030-01-01 00:00:31+00')$$,
    $$VALUES ('lease_lost')$$, 'lapse: nor renew row 82');
SELECT results_eq(
    $$SELECT pg_temp.lease_of(consumer, message_id) IS NULL, attempts FROM whizbang.wh_inbox
       WHERE consumer = 'lapse' AND message_id = pg_temp.id(81)$$,
    $$VALUES (true, 1)$$, 'lapse: the rest of A''s run is unleased; A''s delivery still counts');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(80)], ARRAY[pg_temp.tok('lb')], 'lapse',
                                                '2030-01-01 00:00:32+00')$$,
    $$VALUES ('completed')$$, 'lapse: B completes the head');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(81)], ARRAY[pg_temp.tok('la')], 'lapse',
                                                '2030-01-01 00:00:33+00')$$,
    $$VALUES ('lease_lost')$$, 'lapse: A''s token stays lost after the head is done');
SELECT results_eq($$SELECT * FROM pg_temp.claim('lc', 3, '2030-01-01 00:00:34+00', 'lapse')$$,
                  $$VALUES (pg_temp.id(81)), (pg_temp.id(82))$$, 'lapse: the rest comes back after the head, in order');
SELECT results_eq($$SELECT attempts FROM claims WHERE label = 'lc' ORDER BY ord$$, $$VALUES (2), (2)$$,
                  'lapse: second delivery of each');

-- Stream 21 (consumer 'endrun'): 83, 84, 85. Failing or releasing a row gives back the rows
-- of the run behind it: they wait for it.
SELECT is(pg_temp.store('endrun', jsonb_build_array(pg_temp.msg(83, 21), pg_temp.msg(84, 21), pg_temp.msg(85, 21))),
          3::bigint, 'end of run: three rows of one stream');
SELECT results_eq($$SELECT * FROM pg_temp.claim('ea', 1, '2030-01-01 00:00:01+00', 'endrun')$$,
                  $$VALUES (pg_temp.id(83)), (pg_temp.id(84)), (pg_temp.id(85))$$, 'end of run: A holds the run');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(84)], ARRAY['boom'], ARRAY[pg_temp.tok('ea')],
                                            NULL, 'endrun', '2030-01-01 00:00:02+00')$$,
    $$VALUES ('retry_scheduled')$$, 'end of run: A fails row 84');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(85), pg_temp.id(83)],
                                                ARRAY[pg_temp.tok('ea'), pg_temp.tok('ea')], 'endrun',
                                                '2030-01-01 00:00:03+00')$$,
    $$VALUES ('lease_lost'), ('completed')$$,
    'end of run: row 85 waits behind the failed 84 (lease_lost); the older 83 is still A''s');
SELECT results_eq(
    $$SELECT message_id, attempts, pg_temp.lease_of(consumer, message_id) IS NULL FROM whizbang.wh_inbox
       WHERE consumer = 'endrun' ORDER BY stream_seq$$,
    $$VALUES (pg_temp.id(84), 1, true), (pg_temp.id(85), 0, true)$$,
    'end of run: 85 was given back with its delivery refunded');
SELECT is_empty($$SELECT * FROM pg_temp.claim('eb', 2, '2030-01-01 00:00:04+00', 'endrun')$$,
                'end of run: nothing before the retry of 84 is due');
SELECT results_eq($$SELECT * FROM pg_temp.claim('ec', 2, '2030-01-01 01:00:00+00', 'endrun')$$,
                  $$VALUES (pg_temp.id(84)), (pg_temp.id(85))$$, 'end of run: then 84 and 85, in order');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.release_work('inbox', ARRAY[pg_temp.id(84)], ARRAY[pg_temp.tok('ec')], 'endrun',
                                               '2030-01-01 01:00:01+00')$$,
    $$VALUES ('released')$$, 'end of run: B releases the head');
SELECT results_eq($$SELECT * FROM pg_temp.claim('ed', 3, '2030-01-01 01:00:02+00', 'endrun')$$,
                  $$VALUES (pg_temp.id(84)), (pg_temp.id(85))$$,
                  'end of run: a release gives back the whole run at once');

-- Stream 22 (consumer 'long'): a run of 2,000 rows, longer than any look-ahead.
SELECT is(pg_temp.store('long', (SELECT jsonb_agg(pg_temp.msg(1000 + n, 22) ORDER BY n) FROM generate_series(1, 2000) n)),
          2000::bigint, 'long run: 2,000 rows of one stream');
SELECT is((SELECT count(*) FROM pg_temp.claim('na', 1, '2030-01-01 00:00:01+00', 'long', 2000, 2000)), 2000::bigint,
          'long run: A takes all of it');
SELECT results_eq(
    $$SELECT count(*) FILTER (WHERE outcome = 'completed') FROM whizbang.complete_work('inbox',
        (SELECT array_agg(pg_temp.id(1000 + n)) FROM generate_series(1, 1500) n),
        (SELECT array_agg(pg_temp.tok('na')) FROM generate_series(1, 1500)), 'long', '2030-01-01 00:00:02+00')$$,
    $$VALUES (1500::bigint)$$, 'long run: A completes the first 1,500');
SELECT is_empty($$SELECT * FROM pg_temp.claim('nb', 2, '2030-01-01 00:00:03+00', 'long')$$,
                'long run: 500 leased rows hold the stream against B');
SELECT results_eq(
    $$SELECT count(*) FILTER (WHERE outcome = 'released') FROM whizbang.release_work('inbox',
        (SELECT array_agg(pg_temp.id(1000 + n)) FROM generate_series(1501, 1600) n),
        (SELECT array_agg(pg_temp.tok('na')) FROM generate_series(1501, 1600)), 'long', '2030-01-01 00:00:04+00')$$,
    $$VALUES (100::bigint)$$, 'long run: A releases the next 100');
SELECT results_eq(
    $$SELECT count(*) FROM whizbang.leases WHERE source = 'inbox' AND consumer = 'long'$$,
    $$VALUES (0::bigint)$$, 'long run: and with them the 400 behind them');
SELECT is((SELECT count(*) FROM pg_temp.claim('nc', 2, '2030-01-01 00:00:05+00', 'long', 1000, 1000)), 500::bigint,
          'long run: B takes the stream whole');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(2900)], ARRAY[pg_temp.tok('na')], 'long',
                                                '2030-01-01 00:00:06+00')$$,
    $$VALUES ('lease_lost')$$, 'long run: A''s token is lost on the far end of the run too');

SELECT * FROM finish();
ROLLBACK;
