-- The transactional outbox (DESIGN §3.3) and the outbox side of the work functions (§3.4):
-- store_outbox_messages (one row per input, an id stored once), claim_work for 'outbox' and for
-- both sources, per-stream order and ScheduledFor, pre-leased rows, complete_outbox_published
-- (the seed's contract), complete / fail / renew / release with p_source 'outbox', dead letters
-- and retry_dead_letters, bad input (nothing written), and the seed's troubleshooting query.
--
-- Time is simulated with explicit p_now values from T0 = 2030-01-01 00:00:00 UTC.
BEGIN;
SELECT plan(91);

-- Stores in the simulated time of 2030 find their generations made by maintenance then (0.13.0: a
-- store makes none further ahead than now() plus one period).
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2030-01-01 00:00:00+00'); END $$;

SET LOCAL TimeZone = 'UTC';

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('0b000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.sid(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('5b000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.inst(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('cb000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.msg(p_n int, p_stream int DEFAULT NULL, p_extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('MessageId', pg_temp.id(p_n), 'Destination', 'orders', 'MessageType', 'OrderCreated',
                              'Envelope', jsonb_build_object('n', p_n))
           || CASE WHEN p_stream IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('StreamId', pg_temp.sid(p_stream)) END
           || p_extra
$$;
CREATE FUNCTION pg_temp.store(p_messages jsonb, p_now timestamptz DEFAULT '2030-01-01 00:00:00+00')
RETURNS TABLE (message_id uuid, stream_id uuid, was_newly_created boolean) LANGUAGE sql AS $$
    SELECT * FROM whizbang.store_outbox_messages(p_messages, NULL, NULL, p_now)
$$;
-- Claims of the outbox at T0 + p_seconds by instance p_instance: the message numbers, in order.
CREATE TEMP TABLE claims (label text, ord bigint, message_id uuid, lease_token bigint);
CREATE FUNCTION pg_temp.claim(p_label text, p_instance int, p_seconds int, p_max_rows int DEFAULT 100,
                              p_max_per_stream int DEFAULT 100, p_lease int DEFAULT 60)
RETURNS int[] LANGUAGE sql AS $$
    WITH c AS (SELECT c.*, row_number() OVER () AS ord
                 FROM whizbang.claim_work(pg_temp.inst(p_instance), 'outbox', p_max_rows, p_lease, NULL, 10000,
                                          p_max_per_stream, '2030-01-01 00:00:00+00'::timestamptz
                                          + make_interval(secs => p_seconds)) c),
         kept AS (INSERT INTO claims SELECT p_label, ord, message_id, lease_token FROM c RETURNING *)
    -- Sorted: DESIGN orders rows within a stream, not across streams.
    SELECT coalesce(array_agg(('x' || right(message_id::text, 8))::bit(32)::int ORDER BY message_id), '{}') FROM kept
$$;
CREATE FUNCTION pg_temp.tok(p_label text) RETURNS bigint
LANGUAGE sql AS $$ SELECT max(lease_token) FROM claims WHERE label = p_label $$;
CREATE FUNCTION pg_temp.counts() RETURNS bigint[]
LANGUAGE sql AS $$ SELECT ARRAY[(SELECT count(*) FROM whizbang.wh_outbox), (SELECT count(*) FROM whizbang.wh_outbox)] $$;

-- ---------------------------------------------------------------------------------------
-- store_outbox_messages
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT message_id, stream_id, was_newly_created
        FROM pg_temp.store(jsonb_build_array(pg_temp.msg(1), pg_temp.msg(2, 1), pg_temp.msg(1), pg_temp.msg(3, 1)))$$,
    $$VALUES (pg_temp.id(1), NULL::uuid, true), (pg_temp.id(2), pg_temp.sid(1), true), (pg_temp.id(1), NULL, false),
             (pg_temp.id(3), pg_temp.sid(1), true)$$,
    'store: one row per input, in input order; a repeated id inside the batch is not new after its first');
SELECT is(pg_temp.counts(), ARRAY[3, 3]::bigint[], 'store: three messages, each with its work row');
SELECT results_eq(
    $$SELECT was_newly_created FROM pg_temp.store(jsonb_build_array(pg_temp.msg(1, NULL, '{"Envelope": {"other": true}}'),
                                                                   pg_temp.msg(4)))$$,
    $$VALUES (false), (true)$$, 'store: an id already in the outbox is not new (whatever its envelope); a new one is');
SELECT is((SELECT event_data FROM whizbang.wh_outbox WHERE message_id = pg_temp.id(1)), '{"n": 1}'::jsonb,
          'store: the stored message is not overwritten by a second store of its id');
SELECT is(pg_temp.counts(), ARRAY[4, 4]::bigint[], 'store: never a second row for an id');
SELECT results_eq(
    $$SELECT destination, message_type, event_data, stream_id, is_event, created_at FROM whizbang.wh_outbox
       WHERE message_id = pg_temp.id(2)$$,
    $$VALUES ('orders', 'OrderCreated', '{"n": 2}'::jsonb, pg_temp.sid(1), false, '2030-01-01 00:00:00+00'::timestamptz)$$,
    'store: the message row keeps Destination, MessageType, Envelope (event_data), StreamId, IsEvent, the store time');
SELECT results_eq(
    $$SELECT stream_seq, partition_number, scheduled_for, attempts FROM whizbang.wh_outbox
       WHERE message_id IN (pg_temp.id(2), pg_temp.id(3)) ORDER BY stream_seq$$,
    $$VALUES (1::bigint, whizbang.partition_of(pg_temp.sid(1), 10000), '2030-01-01 00:00:00+00'::timestamptz, 0),
             (2, whizbang.partition_of(pg_temp.sid(1), 10000), '2030-01-01 00:00:00+00', 0)$$,
    'store: stream rows are numbered in element order, partitioned by stream, due at once');
SELECT is((SELECT partition_number FROM whizbang.wh_outbox WHERE message_id = pg_temp.id(1)),
          whizbang.partition_of(pg_temp.id(1), 10000), 'store: a row without a stream is partitioned by its id');
SELECT is_empty($$SELECT * FROM pg_temp.store('[]')$$, 'store: an empty array stores nothing');
SELECT results_eq(
    $$SELECT count(*) FROM whizbang.store_outbox_messages(jsonb_build_array(pg_temp.msg(5, NULL,
        '{"Metadata": {"trace": "t"}, "Scope": {"tenant": "a"}, "IsEvent": true, "HandlerName": "ignored", "Unknown": 1}')),
        NULL, NULL, '2030-01-01 00:00:00+00', 16)$$,
    $$VALUES (1::bigint)$$, 'store: optional fields and unknown fields are accepted');
SELECT results_eq(
    $$SELECT metadata, scope, is_event FROM whizbang.wh_outbox WHERE message_id = pg_temp.id(5)$$,
    $$VALUES ('{"trace": "t"}'::jsonb, '{"tenant": "a"}'::jsonb, true)$$, 'store: Metadata, Scope and IsEvent are kept');
SELECT is((SELECT partition_number FROM whizbang.wh_outbox WHERE message_id = pg_temp.id(5)),
          whizbang.partition_of(pg_temp.id(5), 16), 'store: p_partition_count is used');

-- Seed 000, "Outbox: Duplicate Events Published": the troubleshooting query runs as written.
SET LOCAL search_path = whizbang, public;
SELECT is_empty($$SELECT destination, message_type, event_data::TEXT, COUNT(*) FROM wh_outbox
                   GROUP BY destination, message_type, event_data::TEXT HAVING COUNT(*) > 1$$,
                'the seed''s troubleshooting query runs and finds no duplicate entries');
RESET search_path;

-- Bad input: a clear error, nothing written.
CREATE FUNCTION pg_temp.bad(p_messages text, p_state text, p_like text, p_description text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    before bigint[] := pg_temp.counts();
BEGIN
    RETURN NEXT throws_like(format('SELECT * FROM whizbang.store_outbox_messages(%L::jsonb)', p_messages), p_like,
                            p_description);
    BEGIN
        PERFORM * FROM whizbang.store_outbox_messages(p_messages::jsonb);
    EXCEPTION WHEN OTHERS THEN
        RETURN NEXT is(SQLSTATE, p_state, p_description || ' (' || p_state || ')');
    END;
    RETURN NEXT is(pg_temp.counts(), before, p_description || ': nothing written');
END $$;
SELECT * FROM pg_temp.bad('[{"MessageId": "0b000000-0000-4000-8000-0000000000aa", "MessageType": "t", "Envelope": {}}, {"MessageId": "0b000000-0000-4000-8000-0000000000ab", "MessageType": "t", "Envelope": {}, "Destination": "d"}]',
                          '22023', '%p_messages[0].Destination is required%', 'bad: a missing Destination');
SELECT * FROM pg_temp.bad('[{"MessageId": "0b000000-0000-4000-8000-0000000000ab", "MessageType": "t", "Envelope": {}, "Destination": "d"}, {"MessageId": "nope", "MessageType": "t", "Envelope": {}, "Destination": "d"}]',
                          '22023', '%p_messages[1].MessageId is not a valid uuid%', 'bad: a malformed MessageId in the second element');
SELECT * FROM pg_temp.bad('[{"MessageId": "0b000000-0000-4000-8000-0000000000ab", "MessageType": "t", "Destination": "d"}]',
                          '22023', '%p_messages[0].Envelope is required%', 'bad: a missing Envelope');
SELECT * FROM pg_temp.bad('[{"MessageId": "0b000000-0000-4000-8000-0000000000ab", "MessageType": "t", "Envelope": {}, "Destination": 7}]',
                          '22023', '%p_messages[0].Destination must be a string%', 'bad: a number as Destination');
SELECT * FROM pg_temp.bad('[{"MessageId": "0b000000-0000-4000-8000-0000000000ab", "MessageType": "t", "Envelope": {}, "Destination": "d", "ScheduledFor": "soon"}]',
                          '22023', '%p_messages[0].ScheduledFor is not a valid timestamp%', 'bad: a malformed ScheduledFor');
SELECT * FROM pg_temp.bad('{"MessageId": "0b000000-0000-4000-8000-0000000000ab"}',
                          '22023', '%p_messages must be a JSON array%', 'bad: an object instead of an array');
SELECT throws_ok($$SELECT * FROM whizbang.store_outbox_messages(NULL)$$, '22004', NULL, 'bad: NULL p_messages (22004)');
SELECT throws_ok($$SELECT * FROM whizbang.store_outbox_messages('[]', NULL, NULL, NULL)$$, '22004', NULL,
                 'bad: NULL p_now (22004)');
SELECT throws_ok($$SELECT * FROM whizbang.store_outbox_messages('[]', NULL, NULL, now(), 0)$$, '22023', NULL,
                 'bad: p_partition_count 0 (22023)');

-- ---------------------------------------------------------------------------------------
-- claim_work for the outbox: fields, per-stream order, ScheduledFor
-- ---------------------------------------------------------------------------------------

-- Messages 1-5 are stored; 1, 4 and 5 have no stream; 2 and 3 are stream 1.
-- A claim with a one-second lease: it lapses before the next claim.
SELECT results_eq(
    $$SELECT c.source, c.handler_name, c.destination, c.message_type, c.envelope, c.consumer, c.attempts,
             c.stream_id IS NOT DISTINCT FROM o.stream_id, c.partition_number = w.partition_number
        FROM whizbang.claim_work(pg_temp.inst(9), 'outbox', 100, 1, NULL, 10000, 1, '2030-01-01 00:00:00+00') c
        JOIN whizbang.wh_outbox o USING (message_id) JOIN whizbang.wh_outbox w USING (message_id)
       ORDER BY c.message_id$$,
    $$SELECT 'outbox', NULL::text, 'orders', 'OrderCreated', jsonb_build_object('n', n), NULL::text, 1, true, true
        FROM unnest(ARRAY[1, 2, 4, 5]) n ORDER BY n$$,
    'claim: outbox rows come with source outbox, destination, envelope, stream, partition; no handler, no consumer');
SELECT is(pg_temp.claim('a', 1, 1, 100, 1), ARRAY[1, 2, 4, 5], 'claim: stream 1 gives its oldest row only (p_max_per_stream 1)');
SELECT is(whizbang.complete_outbox_published(ARRAY[pg_temp.id(1)]), 1,
          'complete_outbox_published: a leased row is deleted too (the seed''s contract has no fencing)');
SELECT is(pg_temp.claim('b', 2, 2), '{}'::int[], 'claim: the next row of stream 1 waits while its head is leased');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('outbox', ARRAY[pg_temp.id(2)], ARRAY[pg_temp.tok('a')],
                                                 p_now => '2030-01-01 00:00:03+00')$$,
    $$VALUES ('completed')$$, 'complete_work outbox: the current token completes');
SELECT is(pg_temp.claim('c', 2, 4), ARRAY[3], 'claim: then the next row of the stream comes');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('outbox', ARRAY[pg_temp.id(3), pg_temp.id(3)], ARRAY[pg_temp.tok('a'), pg_temp.tok('c')],
                                                 p_now => '2030-01-01 00:00:05+00')$$,
    $$VALUES ('lease_lost'), ('completed')$$, 'complete_work outbox: another claim''s token is lease_lost; the current one completes');
SELECT ok(NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox WHERE message_id IN (pg_temp.id(2), pg_temp.id(3)))
          AND NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox WHERE message_id IN (pg_temp.id(2), pg_temp.id(3))),
          'complete_work outbox: completed rows leave the outbox and its work state');

SELECT is((SELECT count(*) FROM pg_temp.store(jsonb_build_array(
              pg_temp.msg(10, 2, '{"ScheduledFor": "2030-01-01 00:10:00+00"}'), pg_temp.msg(11, 2),
              pg_temp.msg(12, NULL, '{"ScheduledFor": "2030-01-01 00:10:00+00"}')), '2030-01-01 00:00:06+00')
           WHERE was_newly_created), 3::bigint, 'ScheduledFor: three rows stored');
SELECT is(pg_temp.claim('d', 3, 7), '{}'::int[], 'ScheduledFor: a scheduled head holds its stream back; a scheduled row waits');
SELECT is(pg_temp.claim('e', 3, 601), ARRAY[4, 5, 10, 11, 12], 'ScheduledFor: once due, the stream in order, and the other rows (4 and 5: their leases lapsed)');

-- Lease expiry and renewal.
SELECT results_eq(
    $$SELECT outcome FROM whizbang.renew_leases('outbox', ARRAY[pg_temp.id(10)], ARRAY[pg_temp.tok('e')], 600,
                                                p_now => '2030-01-01 00:10:30+00')$$,
    $$VALUES ('renewed')$$, 'renew outbox: renewed');
SELECT is(pg_temp.claim('f', 4, 700), ARRAY[4, 5, 12], 'lease expiry: rows whose lease ran out come again; 11 waits behind its renewed head');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.release_work('outbox', ARRAY[pg_temp.id(10)], ARRAY[pg_temp.tok('e')],
                                                p_now => '2030-01-01 00:11:50+00')$$,
    $$VALUES ('released')$$, 'release outbox: released');
SELECT results_eq($$SELECT w.attempts, l.lease_token FROM whizbang.wh_outbox w
                     LEFT JOIN whizbang.leases l ON l.source = 'outbox' AND l.message_id = w.message_id
                     WHERE w.message_id = pg_temp.id(10)$$,
                  $$VALUES (0, NULL::bigint)$$, 'release outbox: the attempt is refunded, the lease cleared');

-- ---------------------------------------------------------------------------------------
-- complete_outbox_published (seed contract)
-- ---------------------------------------------------------------------------------------

SELECT is(whizbang.complete_outbox_published(ARRAY[pg_temp.id(10), pg_temp.id(10), pg_temp.id(999), NULL, pg_temp.id(12)]),
          2, 'complete_outbox_published: returns how many rows it deleted (a repeated, unknown or NULL id counts nothing)');
SELECT ok(NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox WHERE message_id IN (pg_temp.id(10), pg_temp.id(12))),
          'complete_outbox_published: the rows are deleted');
SELECT is(whizbang.complete_outbox_published(ARRAY[pg_temp.id(10)]), 0, 'complete_outbox_published: a second completion is a no-op');
SELECT is(whizbang.complete_outbox_published(NULL), 0, 'complete_outbox_published: NULL returns 0');
SELECT is(whizbang.complete_outbox_published('{}'), 0, 'complete_outbox_published: an empty array returns 0');
SELECT is(whizbang.complete_outbox_published(ARRAY[pg_temp.id(11)], true), 1,
          'complete_outbox_published debug mode: counts the row');
SELECT results_eq(
    $$SELECT (SELECT count(*) FROM whizbang.wh_outbox WHERE message_id = pg_temp.id(11)),
             (SELECT processed_at IS NOT NULL FROM whizbang.wh_outbox WHERE message_id = pg_temp.id(11))
             AND NOT EXISTS (SELECT FROM whizbang.leases WHERE source = 'outbox' AND message_id = pg_temp.id(11))$$,
    $$VALUES (1::bigint, true)$$, 'complete_outbox_published debug mode: the row is kept, marked processed');
SELECT is(whizbang.complete_outbox_published(ARRAY[pg_temp.id(11)], true), 0,
          'complete_outbox_published debug mode: a second completion is a no-op');
SELECT is(pg_temp.claim('g', 5, 800), ARRAY[4, 5], 'claim: a processed row is never handed out again (4 and 5 lapsed)');
SELECT is((SELECT was_newly_created FROM pg_temp.store(jsonb_build_array(pg_temp.msg(11)))), false,
          'store: a processed row kept by debug mode is still on record');
UPDATE whizbang.wh_settings SET setting_value = 'true' WHERE setting_key = 'debug_mode';
SELECT is(whizbang.complete_outbox_published(ARRAY[pg_temp.id(4)]), 1, 'complete_outbox_published: the debug_mode setting marks too');
SELECT is((SELECT count(*) FROM whizbang.wh_outbox WHERE message_id = pg_temp.id(4)), 1::bigint,
          'complete_outbox_published: with the debug_mode setting the row is kept');
UPDATE whizbang.wh_settings SET setting_value = 'false' WHERE setting_key = 'debug_mode';

-- ---------------------------------------------------------------------------------------
-- fail_work, dead letters, retry_dead_letters
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT outcome, scheduled_for > '2030-01-01 00:13:20+00' FROM whizbang.fail_work('outbox', ARRAY[pg_temp.id(5)],
        ARRAY['broker down'], ARRAY[pg_temp.tok('g')], NULL, p_now => '2030-01-01 00:13:20+00')$$,
    $$VALUES ('retry_scheduled', true)$$, 'fail outbox: retry_scheduled, later');
SELECT results_eq($$SELECT w.last_error, l.lease_token FROM whizbang.wh_outbox w
                     LEFT JOIN whizbang.leases l ON l.source = 'outbox' AND l.message_id = w.message_id
                     WHERE w.message_id = pg_temp.id(5)$$,
                  $$VALUES ('broker down', NULL::bigint)$$, 'fail outbox: the error is kept, the lease cleared');
SELECT is(pg_temp.claim('h', 6, 2000), ARRAY[5], 'fail outbox: the row comes back when its retry is due');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('outbox', ARRAY[pg_temp.id(5)], ARRAY['rejected'], ARRAY[pg_temp.tok('h')],
                                             ARRAY[false], p_now => '2030-01-01 00:33:21+00')$$,
    $$VALUES ('dead_lettered')$$, 'fail outbox: not retryable is dead_lettered');
SELECT results_eq(
    $$SELECT source, consumer, destination, handler_name, message_type, envelope, metadata, is_event, attempts, last_error
        FROM whizbang.wh_dead_letters WHERE message_id = pg_temp.id(5)$$,
    $$VALUES ('outbox', NULL::text, 'orders', NULL::text, 'OrderCreated', '{"n": 5}'::jsonb, '{"trace": "t"}'::jsonb, true, 6, 'rejected')$$,
    'dead letter: the outbox message with its destination, attempts and error');
SELECT ok(NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox WHERE message_id = pg_temp.id(5)),
          'dead letter: the message left the outbox');
SELECT is(whizbang.retry_dead_letters(ARRAY(SELECT dead_letter_id FROM whizbang.wh_dead_letters WHERE message_id = pg_temp.id(5))),
          1, 'retry_dead_letters: an outbox dead letter goes back');
SELECT results_eq($$SELECT o.destination, w.attempts FROM whizbang.wh_outbox o JOIN whizbang.wh_outbox w USING (message_id)
                     WHERE message_id = pg_temp.id(5)$$,
                  $$VALUES ('orders', 0)$$, 'retry_dead_letters: back in the outbox as fresh work');
SELECT ok(NOT EXISTS (SELECT 1 FROM whizbang.wh_dead_letters WHERE message_id = pg_temp.id(5)), 'retry_dead_letters: the dead letter is gone');

-- max_attempts: a row whose next claim would exceed it is dead-lettered by the claim.
UPDATE whizbang.wh_outbox SET attempts = 10 WHERE message_id = pg_temp.id(5);
SELECT is(pg_temp.claim('i', 6, 2100), '{}'::int[], 'max_attempts: an exhausted row is not handed out');
SELECT is((SELECT attempts FROM whizbang.wh_dead_letters WHERE message_id = pg_temp.id(5)), 10,
          'max_attempts: it is dead-lettered instead');

-- ---------------------------------------------------------------------------------------
-- Pre-leased rows; both sources in one claim
-- ---------------------------------------------------------------------------------------

SELECT is((SELECT count(*) FROM whizbang.store_outbox_messages(jsonb_build_array(pg_temp.msg(20, 3), pg_temp.msg(21, 3), pg_temp.msg(22)),
                                                              pg_temp.inst(7), '2030-01-01 01:00:00+00', '2030-01-01 00:59:00+00')),
          3::bigint, 'pre-lease: three rows stored for instance 7');
SELECT results_eq($$SELECT w.message_id, l.instance_id IS NOT NULL FROM whizbang.wh_outbox w
                     LEFT JOIN whizbang.leases l ON l.source = 'outbox' AND l.message_id = w.message_id
                     WHERE w.message_id IN (pg_temp.id(20), pg_temp.id(21), pg_temp.id(22)) ORDER BY w.message_id$$,
                  $$VALUES (pg_temp.id(20), true), (pg_temp.id(21), false), (pg_temp.id(22), true)$$,
                  'pre-lease: the head of the idle stream and the row without a stream are leased; the follower is not');
SELECT is(pg_temp.claim('j', 8, 3545), '{}'::int[], 'pre-lease: another instance does not get them while the lease lasts');
SELECT results_eq(
    $$SELECT message_id, lease_token = (SELECT lease_token FROM whizbang.leases WHERE source = 'outbox' AND message_id = pg_temp.id(20))
        FROM whizbang.claim_work(pg_temp.inst(7), 'outbox', 1, 60, NULL, 10000, 100, '2030-01-01 00:59:10+00')$$,
    $$VALUES (pg_temp.id(20), true)$$, 'pre-lease: the same instance gets its row back first, with its stored token');

DELETE FROM whizbang.wh_outbox;
SELECT is((SELECT count(*) FROM pg_temp.store(jsonb_build_array(pg_temp.msg(30), pg_temp.msg(31)), '2030-01-02 00:00:00+00')),
          2::bigint, 'both sources: two outbox rows');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(
              jsonb_build_array(pg_temp.msg(30) - 'Destination' || '{"HandlerName": "h"}', pg_temp.msg(32) - 'Destination' || '{"HandlerName": "h"}'),
              NULL, NULL, '2030-01-02 00:00:00+00', 10000, 'outbox_test')), 2::bigint,
          'both sources: two inbox rows of consumer outbox_test (one shares an id with an outbox row)');
SELECT results_eq(
    $$SELECT source, count(*), count(DISTINCT lease_token) FROM whizbang.claim_work(pg_temp.inst(9), NULL, 10, 60, NULL, 10000, 100,
        '2030-01-02 00:00:01+00', 'outbox_test') GROUP BY source ORDER BY source$$,
    $$VALUES ('inbox', 2::bigint, 1::bigint), ('outbox', 2, 1)$$,
    'both sources: NULL p_source claims inbox rows of p_consumer and outbox rows, one token per claim');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('outbox', ARRAY[pg_temp.id(30)], NULL, p_now => '2030-01-02 00:00:02+00')$$,
    $$VALUES ('completed')$$, 'both sources: completing the outbox row of a shared id ...');
SELECT results_eq(
    $$SELECT (SELECT count(*) FROM whizbang.wh_inbox WHERE message_id = pg_temp.id(30)),
             (SELECT count(*) FROM whizbang.wh_outbox WHERE message_id = pg_temp.id(30))$$,
    $$VALUES (1::bigint, 0::bigint)$$, '... leaves the inbox row of that id alone');
SELECT is((SELECT count(*) FROM whizbang.claim_work(pg_temp.inst(9), NULL, 1, 60, NULL, 10000, 100, '2030-01-02 00:10:00+00', 'outbox_test')
            ) + (SELECT count(*) FROM whizbang.claim_work(pg_temp.inst(9), NULL, 1, 60, NULL, 10000, 100, '2030-01-02 00:10:00+00', 'outbox_test')),
          2::bigint, 'both sources: p_max_rows holds across sources');

-- A worker role granted the inbox only (docs/inbox.md#grants): the default p_source claims
-- what it may update, the inbox, instead of failing on the outbox's tables.
CREATE ROLE wb_test_inbox_only;
GRANT USAGE ON SCHEMA whizbang TO wb_test_inbox_only;
GRANT EXECUTE ON FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text, interval)
  TO wb_test_inbox_only;
-- DELETE: a claim dead-letters a row out of attempts; checked when every claim starts (0.13.0,
-- whizbang._required_privileges()).
GRANT SELECT, DELETE ON whizbang.wh_inbox TO wb_test_inbox_only;
GRANT SELECT, UPDATE, DELETE ON whizbang.wh_inbox TO wb_test_inbox_only;
GRANT SELECT, DELETE ON whizbang.wh_inbox_preleased TO wb_test_inbox_only;
GRANT INSERT ON whizbang.wh_dead_letters TO wb_test_inbox_only;
GRANT USAGE ON SEQUENCE whizbang.wh_lease_token_seq TO wb_test_inbox_only;
GRANT SELECT ON whizbang.settings TO wb_test_inbox_only;
SET LOCAL ROLE wb_test_inbox_only;
SELECT results_eq(
    $$SELECT DISTINCT source FROM whizbang.claim_work(pg_temp.inst(9), NULL, 10, 60, NULL, 10000, 100, '2030-01-02 01:00:00+00', 'outbox_test')$$,
    $$VALUES ('inbox')$$, 'grants: a role granted the inbox only claims the inbox with the default p_source');
SELECT throws_ok($$SELECT * FROM whizbang.claim_work(pg_temp.inst(9), 'outbox', 10, 60, NULL, 10000, 100, '2030-01-02 01:00:00+00')$$,
                 '42501', NULL, 'grants: ... and asking for the outbox is refused (42501)');
RESET ROLE;

-- ---------------------------------------------------------------------------------------
-- Big batches: 100,000 elements work; more than 1,000,000 are refused (54000), nothing written
-- ---------------------------------------------------------------------------------------

DELETE FROM whizbang.wh_outbox;
SELECT throws_like($$SELECT * FROM whizbang.store_outbox_messages(('[' || repeat('{},', 1000000) || '{}]')::jsonb)$$,
                   '%1000001%', 'big: 1,000,001 elements are refused');
SELECT throws_ok($$SELECT whizbang.complete_outbox_published(array_fill('0b000000-0000-4000-8000-000000000001'::uuid, ARRAY[1000001]))$$,
                 '54000', NULL, 'big: complete_outbox_published refuses 1,000,001 ids (54000)');
CREATE TEMP TABLE big AS
SELECT jsonb_agg(jsonb_build_object('MessageId', ('b2000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
                                    'Destination', 'd', 'MessageType', 't', 'Envelope', jsonb_build_object('g', g),
                                    'StreamId', ('5b200000-0000-4000-8000-' || lpad(to_hex(g % 100), 12, '0'))::uuid)) AS batch
  FROM generate_series(1, 100000) g;
SELECT is((SELECT count(*) FROM big, whizbang.store_outbox_messages(big.batch) WHERE was_newly_created), 100000::bigint,
          'big: 100,000 messages in one call');
SELECT is(pg_temp.counts(), ARRAY[100000, 100000]::bigint[], 'big: 100,000 rows and work rows');
SELECT is((SELECT count(*) FROM big, whizbang.store_outbox_messages(big.batch) WHERE NOT was_newly_created), 100000::bigint,
          'big: storing them again writes nothing');
SELECT is(whizbang.complete_outbox_published(ARRAY(SELECT message_id FROM whizbang.wh_outbox)), 100000,
          'big: one completion publishes all 100,000');
SELECT is(pg_temp.counts(), ARRAY[0, 0]::bigint[], 'big: the outbox is empty');

SELECT * FROM finish();
ROLLBACK;
