-- Documented inbox behaviour (DESIGN §1.1, §3.2, §3.6 replay horizon; seed 000_…):
-- store_inbox_messages returns rows only for new messages, inbox_receive one outcome per
-- input, conflicts and expired messages are never stored, a rolled-back store leaves the
-- message storable again, consumers are separate dedup scopes, pre-leased rows come back to
-- their instance with their token, and the defaults of the optional element fields.
--
-- Times that matter are passed explicitly (p_now, SentAt, ScheduledFor), in UTC.
-- Every section uses its own consumer so that counts only see that section's rows.
BEGIN;
SELECT plan(74);

-- Stores in the simulated time of 2030 find their generations made by maintenance then (0.13.0: a
-- store makes none further ahead than now() plus one period).
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2030-01-01 00:00:00+00'); END $$;

SET LOCAL TimeZone = 'UTC';

-- Message ids and stream ids from small numbers, so expected values are easy to read.
CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.sid(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('5eeeeeee-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
-- One element with the required fields (Envelope names the message), plus StreamId and extras.
CREATE FUNCTION pg_temp.msg(p_n int, p_stream int DEFAULT NULL, p_extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('MessageId', pg_temp.id(p_n), 'HandlerName', 'handler', 'MessageType', 'type',
                              'Envelope', jsonb_build_object('n', p_n))
           || CASE WHEN p_stream IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('StreamId', pg_temp.sid(p_stream)) END
           || p_extra
$$;
CREATE FUNCTION pg_temp.inbox_rows(p_consumer text) RETURNS bigint
LANGUAGE sql AS $$ SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = p_consumer $$;
CREATE FUNCTION pg_temp.work_rows(p_consumer text) RETURNS bigint
LANGUAGE sql AS $$ SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = p_consumer $$;
CREATE FUNCTION pg_temp.dedup_rows(p_consumer text) RETURNS bigint
LANGUAGE sql AS $$ SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = p_consumer $$;

-- ---------------------------------------------------------------------------------------
-- The seed's case: the same MessageId twice; the second call returns nothing
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT message_id, stream_id, was_newly_created FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(1, 1)), NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'seed')$$,
    $$VALUES (pg_temp.id(1), pg_temp.sid(1), true)$$,
    'seed: the first store returns the new message, its stream and was_newly_created = true');
SELECT is_empty(
    $$SELECT * FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(1, 1)), NULL, NULL, '2030-01-01 00:01:00+00', 10000, 'seed')$$,
    'seed: the second store of the same MessageId returns nothing');
SELECT is(pg_temp.inbox_rows('seed'), 1::bigint, 'seed: one wh_inbox row');
SELECT is(pg_temp.work_rows('seed'), 1::bigint, 'seed: one work row');
SELECT results_eq(
    $$SELECT message_id, first_seen_at, observation_count FROM whizbang.wh_message_deduplication WHERE consumer = 'seed'$$,
    $$VALUES (pg_temp.id(1), '2030-01-01 00:00:00+00'::timestamptz, 2)$$,
    'seed: one dedup record, first seen at the first store, two deliveries observed');
SELECT is_empty(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1, 1)), p_consumer => 'seed')$$,
    'seed: a third store with default p_now returns nothing too');
SELECT is(pg_temp.inbox_rows('seed'), 1::bigint, 'seed: still one wh_inbox row');
SELECT results_eq(
    $$SELECT message_id, stream_id, was_newly_created
        FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(2)))$$,
    $$VALUES (pg_temp.id(2), NULL::uuid, true)$$,
    'default consumer: a message without a stream returns stream_id NULL');
SELECT is((SELECT consumer COLLATE "default" FROM whizbang.wh_inbox WHERE message_id = pg_temp.id(2)), '',
          'the default consumer is stored as ''''');

-- ---------------------------------------------------------------------------------------
-- Repeats inside one batch
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT message_id, was_newly_created FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(11), pg_temp.msg(12), pg_temp.msg(11), pg_temp.msg(13), pg_temp.msg(12)),
        NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'batch')$$,
    $$VALUES (pg_temp.id(11), true), (pg_temp.id(12), true), (pg_temp.id(13), true)$$,
    'in-batch repeat: one row per distinct new message, in input order of first occurrence');
SELECT is(pg_temp.inbox_rows('batch'), 3::bigint, 'in-batch repeat: three wh_inbox rows');
SELECT is(pg_temp.work_rows('batch'), 3::bigint, 'in-batch repeat: three work rows');
SELECT results_eq(
    $$SELECT message_id, observation_count FROM whizbang.wh_message_deduplication
       WHERE consumer = 'batch' ORDER BY message_id$$,
    $$VALUES (pg_temp.id(11), 2), (pg_temp.id(12), 2), (pg_temp.id(13), 1)$$,
    'in-batch repeat: each repeat is observed as a delivery');
SELECT results_eq(
    $$SELECT message_id, stream_id, outcome FROM whizbang.inbox_receive(
        jsonb_build_array(pg_temp.msg(14, 1), pg_temp.msg(11), pg_temp.msg(14, 1), pg_temp.msg(15)),
        'batch', '2030-01-01 00:00:00+00')$$,
    $$VALUES (pg_temp.id(14), pg_temp.sid(1), 'new'), (pg_temp.id(11), NULL::uuid, 'duplicate'),
             (pg_temp.id(14), pg_temp.sid(1), 'duplicate'), (pg_temp.id(15), NULL::uuid, 'new')$$,
    'inbox_receive: one row per input in input order; a repeat in the batch is duplicate');
SELECT is(pg_temp.inbox_rows('batch'), 5::bigint, 'inbox_receive: the two new messages were stored');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'batch' AND message_id = pg_temp.id(14)),
          1::bigint, 'inbox_receive: the repeated message has one work row');

-- ---------------------------------------------------------------------------------------
-- Conflict: same MessageId, different Envelope — counted, never stored as work
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT outcome FROM whizbang.inbox_receive(
        '[{"MessageId": "00000000-0000-4000-8000-000000000015", "HandlerName": "h", "MessageType": "t",
           "Envelope": {"amount": 1.50, "to": "a"}}]', 'conflict', '2030-01-01 00:00:00+00')$$,
    $$VALUES ('new')$$, 'conflict: first delivery is new');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.inbox_receive(
        '[{"MessageId": "00000000-0000-4000-8000-000000000015", "HandlerName": "h", "MessageType": "t",
           "Envelope": {"to": "a", "amount": 1.5}}]', 'conflict', '2030-01-01 00:00:01+00')$$,
    $$VALUES ('duplicate')$$,
    'conflict: the same envelope (other key order, 1.50 = 1.5) is duplicate');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.inbox_receive(
        '[{"MessageId": "00000000-0000-4000-8000-000000000015", "HandlerName": "h2", "MessageType": "t2",
           "Envelope": {"to": "b", "amount": 1.5}}]', 'conflict', '2030-01-01 00:00:02+00')$$,
    $$VALUES ('conflict')$$, 'conflict: a different envelope under the same MessageId is conflict');
SELECT results_eq(
    $$SELECT handler_name, message_type, envelope FROM whizbang.wh_inbox WHERE consumer = 'conflict'$$,
    $$VALUES ('h'::text, 't'::text, '{"to": "a", "amount": 1.50}'::jsonb)$$,
    'conflict: the stored message is still the first one');
SELECT is(pg_temp.work_rows('conflict'), 1::bigint, 'conflict: still one work row');
SELECT results_eq(
    $$SELECT observation_count, conflict_count FROM whizbang.wh_message_deduplication WHERE consumer = 'conflict'$$,
    $$VALUES (3, 1)$$, 'conflict: three deliveries observed, one conflict');
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.inbox_receive(
        jsonb_build_array(pg_temp.msg(22), pg_temp.msg(22, NULL, '{"Envelope": {"other": true}}')),
        'conflict', '2030-01-01 00:00:03+00')$$,
    $$VALUES (pg_temp.id(22), 'new'), (pg_temp.id(22), 'conflict')$$,
    'conflict: a repeat with another envelope inside one batch is conflict');
SELECT results_eq(
    $$SELECT envelope FROM whizbang.wh_inbox WHERE consumer = 'conflict' AND message_id = pg_temp.id(22)$$,
    $$VALUES ('{"n": 22}'::jsonb)$$, 'conflict: in a batch, the first envelope is the one stored');
SELECT is_empty(
    $$SELECT * FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(21, NULL, '{"Envelope": {"to": "c"}}')),
        NULL, NULL, '2030-01-01 00:00:04+00', 10000, 'conflict')$$,
    'conflict: store_inbox_messages returns nothing for the id either');
SELECT is(pg_temp.inbox_rows('conflict'), 2::bigint, 'conflict: nothing more stored');
-- store_inbox_messages records no fingerprint (the seed's contract, and the hot path), so its
-- id is on record without one: a later inbox_receive of it is a duplicate whatever its
-- envelope (a conflict needs two non-null fingerprints), and adopts none.
SELECT lives_ok(
    $$SELECT whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(23)), NULL, NULL, '2030-01-01 00:00:00+00',
                                          10000, 'conflict_mix')$$,
    'conflict (mixed): message 23 stored by store_inbox_messages with envelope {"n": 23}');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(23, NULL, '{"Envelope": {"n": -1}}')),
                                                'conflict_mix', '2030-01-01 00:00:01+00')$$,
    $$VALUES ('duplicate')$$, 'conflict (mixed): inbox_receive with a different envelope is a duplicate');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(23)), 'conflict_mix',
                                                '2030-01-01 00:00:02+00')$$,
    $$VALUES ('duplicate')$$, 'conflict (mixed): inbox_receive with the stored envelope is duplicate');

-- ---------------------------------------------------------------------------------------
-- Replay horizon: SentAt before now - dedup_retention_days (30) is expired, not stored
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.inbox_receive(
        jsonb_build_array(pg_temp.msg(31, NULL, '{"SentAt": "2029-12-01 23:59:59+00"}'),
                          pg_temp.msg(32, NULL, '{"SentAt": "2029-12-02 00:00:00+00"}'),
                          pg_temp.msg(33)),
        'replay', '2030-01-01 00:00:00+00')$$,
    $$VALUES (pg_temp.id(31), 'expired'), (pg_temp.id(32), 'new'), (pg_temp.id(33), 'new')$$,
    'replay: sent 30 days and 1 s ago is expired; exactly 30 days ago and no SentAt are new');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'replay' AND message_id = pg_temp.id(31)),
          0::bigint, 'replay: the expired message is not in wh_inbox');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'replay' AND message_id = pg_temp.id(31)),
          0::bigint, 'replay: the expired message has no work row');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'replay' AND message_id = pg_temp.id(31)),
          0::bigint, 'replay: nothing recorded for the expired message');
SELECT is_empty(
    $$SELECT * FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(34, NULL, '{"SentAt": "2029-11-01 00:00:00+00"}')),
        NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'replay')$$,
    'replay: store_inbox_messages returns nothing for an expired message');
SELECT is(pg_temp.inbox_rows('replay'), 2::bigint, 'replay: only the two new messages are stored');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.inbox_receive(
        jsonb_build_array(pg_temp.msg(32, NULL, '{"SentAt": "2029-01-01 00:00:00+00"}')),
        'replay', '2030-01-01 00:00:00+00')$$,
    $$VALUES ('duplicate')$$, 'replay: an id still on record is duplicate whatever its SentAt');

UPDATE whizbang.wh_settings SET setting_value = 'accept' WHERE setting_key = 'replay_policy';
SELECT results_eq(
    $$SELECT message_id, stream_id, was_newly_created FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(34, 3, '{"SentAt": "2029-11-01 00:00:00+00"}')),
        NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'replay')$$,
    $$VALUES (pg_temp.id(34), pg_temp.sid(3), true)$$,
    'replay_policy accept: an old message is stored as new');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.inbox_receive(
        jsonb_build_array(pg_temp.msg(31, NULL, '{"SentAt": "2029-12-01 23:59:59+00"}')),
        'replay', '2030-01-01 00:00:00+00')$$,
    $$VALUES ('new')$$, 'replay_policy accept: inbox_receive answers new');
SELECT is(pg_temp.inbox_rows('replay'), 4::bigint, 'replay_policy accept: both old messages stored');
SELECT is((SELECT sent_at FROM whizbang.wh_inbox WHERE consumer = 'replay' AND message_id = pg_temp.id(34)),
          '2029-11-01 00:00:00+00'::timestamptz, 'replay_policy accept: SentAt is kept');
UPDATE whizbang.wh_settings SET setting_value = 'reject' WHERE setting_key = 'replay_policy';

-- ---------------------------------------------------------------------------------------
-- A rolled-back store leaves the message storable again (DESIGN §1.1)
-- ---------------------------------------------------------------------------------------

SAVEPOINT before_store;
SELECT results_eq(
    $$SELECT message_id, was_newly_created FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(41, 4)), NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'rollback')$$,
    $$VALUES (pg_temp.id(41), true)$$, 'rollback: stored inside a savepoint');
SELECT is(pg_temp.inbox_rows('rollback'), 1::bigint, 'rollback: visible before the rollback');
ROLLBACK TO SAVEPOINT before_store;
SELECT is(pg_temp.inbox_rows('rollback') + pg_temp.work_rows('rollback') + pg_temp.dedup_rows('rollback'), 0::bigint,
          'rollback: no inbox, work or dedup row survives');
SELECT results_eq(
    $$SELECT message_id, was_newly_created FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(41, 4)), NULL, NULL, '2030-01-01 00:00:01+00', 10000, 'rollback')$$,
    $$VALUES (pg_temp.id(41), true)$$, 'rollback: the same message is new again');
SELECT results_eq(
    $$SELECT message_id, stream_seq FROM whizbang.wh_inbox WHERE consumer = 'rollback'$$,
    $$VALUES (pg_temp.id(41), 1::bigint)$$, 'rollback: it is the first of its stream');
SELECT is(pg_temp.dedup_rows('rollback'), 1::bigint, 'rollback: one dedup record');

-- ---------------------------------------------------------------------------------------
-- Consumers are separate scopes
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT was_newly_created FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(51, 5)), NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'consumer_a')$$,
    $$VALUES (true)$$, 'consumers: new for consumer_a');
SELECT results_eq(
    $$SELECT was_newly_created FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(51, 5, '{"Envelope": {"other": 1}}')),
        NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'consumer_b')$$,
    $$VALUES (true)$$, 'consumers: the same id is new for consumer_b');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(51, 5)), 'consumer_c',
                                                '2030-01-01 00:00:00+00')$$,
    $$VALUES ('new')$$, 'consumers: and new for consumer_c through inbox_receive');
SELECT is_empty(
    $$SELECT * FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(51, 5)), NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'consumer_a')$$,
    'consumers: a second delivery to consumer_a is a duplicate');
SELECT results_eq(
    $$SELECT consumer COLLATE "default", envelope, stream_seq FROM whizbang.wh_inbox
       WHERE message_id = pg_temp.id(51) ORDER BY 1$$,
    $$VALUES ('consumer_a'::text, '{"n": 51}'::jsonb, 1::bigint), ('consumer_b', '{"other": 1}', 1),
             ('consumer_c', '{"n": 51}', 1)$$,
    'consumers: three messages, each first of its own (consumer, stream)');
SELECT results_eq(
    $$SELECT message_id, consumer FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001',
        p_now => '2030-01-01 00:00:10+00', p_consumer => 'consumer_b')$$,
    $$VALUES (pg_temp.id(51), 'consumer_b'::text)$$,
    'consumers: a claim for consumer_b gets consumer_b''s row only');
SELECT results_eq(
    $$SELECT message_id, consumer FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001',
        p_now => '2030-01-01 00:00:10+00', p_consumer => 'consumer_a')$$,
    $$VALUES (pg_temp.id(51), 'consumer_a'::text)$$,
    'consumers: the stream of consumer_a is not held by consumer_b''s lease');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(51)], NULL, 'consumer_b',
                                                '2030-01-01 00:00:11+00')$$,
    $$VALUES ('completed')$$, 'consumers: completing for consumer_b');
SELECT results_eq(
    $$SELECT consumer COLLATE "default" FROM whizbang.wh_inbox WHERE message_id = pg_temp.id(51) ORDER BY 1$$,
    $$VALUES ('consumer_a'::text), ('consumer_c')$$,
    'consumers: only consumer_b''s message left the inbox');
SELECT results_eq(
    $$SELECT consumer COLLATE "default" FROM whizbang.wh_message_deduplication WHERE message_id = pg_temp.id(51) ORDER BY 1$$,
    $$VALUES ('consumer_a'::text), ('consumer_b'), ('consumer_c')$$,
    'consumers: every dedup record stays');

-- ---------------------------------------------------------------------------------------
-- Pre-leased store: the same instance's claim hands the rows back with their token
-- ---------------------------------------------------------------------------------------

CREATE TEMP TABLE pre_token AS
SELECT 0::bigint AS token;

SELECT results_eq(
    $$SELECT message_id, was_newly_created FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(61, 6), pg_temp.msg(62)),
        'a0000000-0000-4000-8000-00000000000a', '2030-01-01 00:10:00+00', '2030-01-01 00:00:00+00', 10000, 'pre')$$,
    $$VALUES (pg_temp.id(61), true), (pg_temp.id(62), true)$$,
    'pre-leased: stored for instance a');
UPDATE pre_token SET token = (SELECT lease_token FROM whizbang.leases
                                WHERE source = 'inbox' AND consumer = 'pre' AND message_id = pg_temp.id(61));
SELECT results_eq(
    $$SELECT message_id, attempts, instance_id, lease_token IS NOT NULL, lease_token = (SELECT token FROM pre_token),
             lease_expiry FROM whizbang.leases WHERE source = 'inbox' AND consumer = 'pre' ORDER BY message_id$$,
    $$VALUES (pg_temp.id(61), 0, 'a0000000-0000-4000-8000-00000000000a'::uuid, true, true, '2030-01-01 00:10:00+00'::timestamptz),
             (pg_temp.id(62), 0, 'a0000000-0000-4000-8000-00000000000a'::uuid, true, true, '2030-01-01 00:10:00+00'::timestamptz)$$,
    'pre-leased: both rows leased to instance a until p_lease_expiry, one token, no attempt yet');
SELECT is_empty(
    $$SELECT * FROM whizbang.claim_work('b0000000-0000-4000-8000-00000000000b',
        p_now => '2030-01-01 00:01:00+00', p_consumer => 'pre')$$,
    'pre-leased: another instance gets nothing while the lease lives');
SELECT results_eq(
    $$SELECT message_id, stream_id, attempts, lease_token = (SELECT token FROM pre_token), lease_expiry, handler_name,
             envelope FROM whizbang.claim_work('a0000000-0000-4000-8000-00000000000a', p_lease_seconds => 60,
                                                p_now => '2030-01-01 00:01:00+00', p_consumer => 'pre')
       ORDER BY message_id$$,
    $$VALUES (pg_temp.id(61), pg_temp.sid(6), 1, true, '2030-01-01 00:02:00+00'::timestamptz, 'handler'::text, '{"n": 61}'::jsonb),
             (pg_temp.id(62), NULL, 1, true, '2030-01-01 00:02:00+00'::timestamptz, 'handler', '{"n": 62}')$$,
    'pre-leased: instance a''s claim hands both back with the store''s token, attempt 1, a new lease');
SELECT is_empty(
    $$SELECT * FROM whizbang.claim_work('a0000000-0000-4000-8000-00000000000a',
        p_now => '2030-01-01 00:01:01+00', p_consumer => 'pre')$$,
    'pre-leased: a second claim of instance a gets nothing (handed out once)');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(61), pg_temp.id(62)],
        ARRAY[(SELECT token FROM pre_token), (SELECT token FROM pre_token)], 'pre', '2030-01-01 00:01:02+00')$$,
    $$VALUES ('completed'), ('completed')$$, 'pre-leased: the store''s token completes them (fencing holds)');

-- A row of a stream with unfinished work, and a row not yet due, are stored unleased.
SELECT lives_ok(
    $$SELECT whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(63, 7)), NULL, NULL,
        '2030-01-01 00:00:00+00', 10000, 'pre')$$,
    'pre-leased: an unleased row starts stream 7');
SELECT lives_ok(
    $$SELECT whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(64, 7), pg_temp.msg(65, NULL, '{"ScheduledFor": "2030-01-01 01:00:00+00"}')),
        'a0000000-0000-4000-8000-00000000000a', NULL, '2030-01-01 00:00:00+00', 10000, 'pre')$$,
    'pre-leased: stored for instance a behind unfinished work / not yet due');
SELECT results_eq(
    $$SELECT w.message_id, l.instance_id, l.lease_token, l.lease_expiry FROM whizbang.wh_inbox w
        LEFT JOIN whizbang.leases l ON l.source = 'inbox' AND l.consumer = w.consumer AND l.message_id = w.message_id
       WHERE w.consumer = 'pre' AND w.message_id IN (pg_temp.id(63), pg_temp.id(64), pg_temp.id(65)) ORDER BY w.message_id$$,
    $$VALUES (pg_temp.id(63), NULL::uuid, NULL::bigint, NULL::timestamptz), (pg_temp.id(64), NULL, NULL, NULL),
             (pg_temp.id(65), NULL, NULL, NULL)$$,
    'pre-leased: a row behind unfinished work of its stream and a not-yet-due row are stored unleased');
SELECT results_eq(
    $$SELECT message_id FROM whizbang.claim_work('a0000000-0000-4000-8000-00000000000a', p_max_per_stream => 1,
        p_now => '2030-01-01 00:00:01+00', p_consumer => 'pre')$$,
    $$VALUES (pg_temp.id(63))$$, 'pre-leased: instance a gets the head of stream 7 only');

-- Two new rows of one idle stream in one batch: only the first has no other unfinished row in
-- its stream, so only it is pre-leased; the second waits its turn and obeys p_max_per_stream.
SELECT lives_ok(
    $$SELECT whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(66, 8), pg_temp.msg(67, 8)),
        'a0000000-0000-4000-8000-00000000000a', '2030-01-01 00:10:00+00', '2030-01-01 00:00:00+00', 10000, 'pre')$$,
    'pre-leased: two rows of idle stream 8 in one batch');
SELECT results_eq(
    $$SELECT w.message_id, l.instance_id IS NOT NULL FROM whizbang.wh_inbox w
        LEFT JOIN whizbang.leases l ON l.source = 'inbox' AND l.consumer = w.consumer AND l.message_id = w.message_id
       WHERE w.consumer = 'pre' AND w.stream_id = pg_temp.sid(8) ORDER BY w.stream_seq$$,
    $$VALUES (pg_temp.id(66), true), (pg_temp.id(67), false)$$,
    'pre-leased: only the first row of the stream is leased at store');
SELECT results_eq(
    $$SELECT message_id FROM whizbang.claim_work('a0000000-0000-4000-8000-00000000000a', p_max_per_stream => 1,
        p_now => '2030-01-01 00:00:02+00', p_consumer => 'pre')$$,
    $$VALUES (pg_temp.id(66))$$,
    'pre-leased: with p_max_per_stream 1, instance a''s claim hands out one row of stream 8');

-- ---------------------------------------------------------------------------------------
-- Field defaults and stored values
-- ---------------------------------------------------------------------------------------

SELECT lives_ok(
    $$SELECT whizbang.store_inbox_messages(jsonb_build_array(
        pg_temp.msg(71),
        pg_temp.msg(72, 9, '{"IsEvent": true, "Metadata": {"trace": "x"}, "Scope": {"tenant": "t1"},
                             "SentAt": "2029-12-31T23:00:00Z", "ScheduledFor": "2030-01-01T03:00:00+02:00",
                             "Unknown": [1, 2], "traceid": "not even a uuid"}'),
        pg_temp.msg(73, NULL, '{"IsEvent": null, "Metadata": null, "Scope": null, "StreamId": null,
                                "SentAt": null, "ScheduledFor": null}')),
        NULL, NULL, '2030-01-01 00:00:00+00', 16, 'fields')$$,
    'fields: minimal, full (with unknown fields) and explicit-null elements are accepted');
SELECT results_eq(
    $$SELECT message_id, handler_name, message_type, envelope, metadata, scope, stream_id, is_event, sent_at, received_at
        FROM whizbang.wh_inbox WHERE consumer = 'fields' ORDER BY message_id$$,
    $$VALUES (pg_temp.id(71), 'handler'::text, 'type'::text, '{"n": 71}'::jsonb, NULL::jsonb, NULL::jsonb, NULL::uuid,
              false, NULL::timestamptz, '2030-01-01 00:00:00+00'::timestamptz),
             (pg_temp.id(72), 'handler', 'type', '{"n": 72}', '{"trace": "x"}', '{"tenant": "t1"}', pg_temp.sid(9),
              true, '2029-12-31 23:00:00+00', '2030-01-01 00:00:00+00'),
             (pg_temp.id(73), 'handler', 'type', '{"n": 73}', NULL, NULL, NULL,
              false, NULL, '2030-01-01 00:00:00+00')$$,
    'fields: the message rows (IsEvent defaults to false, received_at is p_now)');
SELECT results_eq(
    $$SELECT w.message_id, w.stream_id, w.stream_seq, w.partition_number, w.scheduled_for, w.attempts, l.lease_token,
             l.lease_expiry, w.last_error, w.processed_at
        FROM whizbang.wh_inbox w
        LEFT JOIN whizbang.leases l ON l.source = 'inbox' AND l.consumer = w.consumer AND l.message_id = w.message_id
       WHERE w.consumer = 'fields' ORDER BY w.message_id$$,
    $$VALUES (pg_temp.id(71), NULL::uuid, NULL::bigint, whizbang.partition_of(pg_temp.id(71), 16),
              '2030-01-01 00:00:00+00'::timestamptz, 0, NULL::bigint, NULL::timestamptz, NULL::text, NULL::timestamptz),
             (pg_temp.id(72), pg_temp.sid(9), 1, whizbang.partition_of(pg_temp.sid(9), 16),
              '2030-01-01 01:00:00+00', 0, NULL, NULL, NULL, NULL),
             (pg_temp.id(73), NULL, NULL, whizbang.partition_of(pg_temp.id(73), 16),
              '2030-01-01 00:00:00+00', 0, NULL, NULL, NULL, NULL)$$,
    'fields: ScheduledFor defaults to p_now (and is parsed with its offset); partition from stream or id');
SELECT results_eq(
    $$SELECT source, message_id, stream_id, partition_number, handler_name, destination, message_type, envelope,
             metadata, scope, attempts, consumer
        FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_partition_count => 16,
                                 p_now => '2030-01-01 00:59:59+00', p_consumer => 'fields')
       ORDER BY message_id$$,
    $$VALUES ('inbox'::text, pg_temp.id(71), NULL::uuid, whizbang.partition_of(pg_temp.id(71), 16), 'handler'::text,
              NULL::text, 'type'::text, '{"n": 71}'::jsonb, NULL::jsonb, NULL::jsonb, 1, 'fields'::text),
             ('inbox', pg_temp.id(73), NULL, whizbang.partition_of(pg_temp.id(73), 16), 'handler',
              NULL, 'type', '{"n": 73}', NULL, NULL, 1, 'fields')$$,
    'fields: the claim returns the stored values; the row scheduled for 01:00 is not due yet');
SELECT results_eq(
    $$SELECT message_id, stream_id, metadata, scope FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001',
        p_now => '2030-01-01 01:00:00+00', p_consumer => 'fields')$$,
    $$VALUES (pg_temp.id(72), pg_temp.sid(9), '{"trace": "x"}'::jsonb, '{"tenant": "t1"}'::jsonb)$$,
    'fields: at ScheduledFor the row is due, with its Metadata and Scope');

SELECT * FROM finish();
ROLLBACK;
