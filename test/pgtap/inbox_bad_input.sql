-- Bad input to the inbox and work-coordination functions (DESIGN §1.4, §3.2, §3.4): every
-- malformed call raises an ERROR with a proper SQLSTATE, naming the element index (0-based,
-- as jsonb's -> numbers them) and the field, and writes nothing. Large batches are not bad
-- input: 100,000 elements work; more than 1,000,000 are refused with 54000.
--
-- pg_temp.fails(sql, sqlstate, message LIKE pattern, description) is one test: the call raises
-- that SQLSTATE with a matching message, and it wrote no row of any whizbang table before it
-- did (pg_temp.writes() in lib/writes.sql: comparing the tables after the error could not
-- tell, since the error rolls back whatever the call wrote).
BEGIN;
SELECT plan(165);

-- Stores in the simulated time of 2030 find their generations made by maintenance then (0.13.0: a
-- store makes none further ahead than now() plus one period).
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2030-01-01 00:00:00+00'); END $$;

SET LOCAL TimeZone = 'UTC';

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.msg(p_n int, p_extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('MessageId', pg_temp.id(p_n), 'HandlerName', 'handler', 'MessageType', 'type',
                              'Envelope', jsonb_build_object('n', p_n)) || p_extra
$$;
-- An element without `p_field`.
CREATE FUNCTION pg_temp.msg_without(p_n int, p_field text) RETURNS jsonb
LANGUAGE sql AS $$ SELECT pg_temp.msg(p_n) - p_field $$;

-- pg_temp.writes(), pg_temp.attempt(sql) and pg_temp.fails(sql, state, pattern, description).
\ir lib/writes.sql

-- The check can fail: a write that an error then rolled back leaves no row, and is still seen.
-- (Its dedup generation is made first: a generation the error rolled back would take its
-- counts with it.)
DO $$ BEGIN PERFORM whizbang.dedup_insert(pg_temp.id(999), 'self_test'); END $$;
SELECT isnt((r).writes_after, (r).writes_before, 'self-test: a write the error rolled back is seen')
  FROM (SELECT pg_temp.attempt($q$DO $do$ BEGIN
            PERFORM whizbang.dedup_insert(pg_temp.id(1000), 'self_test');
            RAISE EXCEPTION 'after a write';
        END $do$ $q$) AS r) AS a;

-- What the last check saw; pg_temp.grew(...) checks how many rows each table gained since.
CREATE TEMP TABLE last_counts AS
SELECT (SELECT count(*) FROM whizbang.wh_inbox) AS inbox, (SELECT count(*) FROM whizbang.wh_inbox) AS work,
       (SELECT count(*) FROM whizbang.wh_message_deduplication) AS dedup;
CREATE FUNCTION pg_temp.grew(p_inbox bigint, p_work bigint, p_dedup bigint, p_description text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_now  record;
    v_last record;
BEGIN
    SELECT (SELECT count(*) FROM whizbang.wh_inbox) AS inbox, (SELECT count(*) FROM whizbang.wh_inbox) AS work,
           (SELECT count(*) FROM whizbang.wh_message_deduplication) AS dedup INTO v_now;
    SELECT * INTO v_last FROM last_counts;
    UPDATE last_counts SET inbox = v_now.inbox, work = v_now.work, dedup = v_now.dedup;
    RETURN is(ARRAY[v_now.inbox - v_last.inbox, v_now.work - v_last.work, v_now.dedup - v_last.dedup],
              ARRAY[p_inbox, p_work, p_dedup], p_description);
END
$$;

-- ---------------------------------------------------------------------------------------
-- store_inbox_messages / inbox_receive: NULL in every argument
-- ---------------------------------------------------------------------------------------

SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(NULL)$$,
                     '22004', '%p_messages%', 'store: NULL p_messages');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1)), p_now => NULL)$$,
                     '22004', '%p_now%', 'store: NULL p_now');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1)), p_partition_count => NULL)$$,
                     '22004', '%p_partition_count%', 'store: NULL p_partition_count');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1)), p_consumer => NULL)$$,
                     '22004', '%p_consumer%', 'store: NULL p_consumer');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1)), p_partition_count => 0)$$,
                     '22023', '%p_partition_count%', 'store: p_partition_count 0');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1)), p_now => 'infinity')$$,
                     '22023', '%p_now%', 'store: infinite p_now');
SELECT results_eq(
    $$SELECT message_id FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1)), NULL, NULL,
        p_consumer => 'bad_nulls')$$,
    $$VALUES (pg_temp.id(1))$$, 'store: NULL p_instance_id and p_lease_expiry are the defaults');
SELECT pg_temp.grew(1, 1, 1, 'store: that call wrote one message');
SELECT results_eq(
    $$SELECT l.instance_id, l.lease_token FROM whizbang.wh_inbox w
        LEFT JOIN whizbang.leases l ON l.source = 'inbox' AND l.consumer = w.consumer AND l.message_id = w.message_id
       WHERE w.consumer = 'bad_nulls'$$,
    $$VALUES (NULL::uuid, NULL::bigint)$$, 'store: without an instance the row is stored unleased');
SELECT lives_ok(
    $$SELECT whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(2)), 'a0000000-0000-4000-8000-00000000000a', NULL,
        '2030-01-01 00:00:00+00', 10000, 'bad_nulls')$$,
    'store: with an instance and a NULL p_lease_expiry');
SELECT results_eq(
    $$SELECT instance_id, lease_expiry FROM whizbang.leases
       WHERE source = 'inbox' AND consumer = 'bad_nulls' AND message_id = pg_temp.id(2)$$,
    $$VALUES ('a0000000-0000-4000-8000-00000000000a'::uuid, '2030-01-01 00:05:00+00'::timestamptz)$$,
    'store: with an instance and a NULL p_lease_expiry the lease lasts the default 300 s');
SELECT pg_temp.grew(1, 1, 1, 'store: that call wrote one message');

SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive(NULL)$$,
                     '22004', '%p_messages%', 'receive: NULL p_messages');
SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(3)), NULL)$$,
                     '22004', '%p_consumer%', 'receive: NULL p_consumer');
SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(3)), 'x', NULL)$$,
                     '22004', '%p_now%', 'receive: NULL p_now');
SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(3)), 'x', now(), NULL)$$,
                     '22004', '%p_partition_count%', 'receive: NULL p_partition_count');
SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(3)), 'x', now(), -5)$$,
                     '22023', '%p_partition_count%', 'receive: negative p_partition_count');

-- ---------------------------------------------------------------------------------------
-- Not an array of objects
-- ---------------------------------------------------------------------------------------

SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages('{}')$$, '22023', '%p_messages%', 'store: an object');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(pg_temp.msg(4))$$, '22023', '%p_messages%',
                     'store: a single message object instead of an array');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages('1')$$, '22023', '%p_messages%', 'store: a number');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages('"[]"')$$, '22023', '%p_messages%', 'store: a string');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages('null')$$, '22023', '%p_messages%', 'store: JSON null');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages('true')$$, '22023', '%p_messages%', 'store: JSON true');
SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive('{"MessageId": "00000000-0000-4000-8000-000000000004"}')$$,
                     '22023', '%p_messages%', 'receive: an object');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages('[1]')$$, '22023', '%p_messages[0]%',
                     'store: a number element');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages('[null]')$$, '22023', '%p_messages[0]%',
                     'store: a null element');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages('["00000000-0000-4000-8000-000000000004"]')$$,
                     '22023', '%p_messages[0]%', 'store: a string element');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(4), jsonb_build_array(pg_temp.msg(5))))$$,
                     '22023', '%p_messages[1]%', 'store: a nested array element, named by its index');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages('[{}]')$$, '22023', '%p_messages[0].MessageId%',
                     'store: an empty object lacks MessageId');
SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive('[[]]')$$, '22023', '%p_messages[0]%',
                     'receive: an array element');

-- ---------------------------------------------------------------------------------------
-- Required fields: missing, JSON null, wrong type
-- ---------------------------------------------------------------------------------------

SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg_without(6, 'MessageId')))$$,
                     '22023', 'p_messages[0].MessageId %', 'store: MessageId missing');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg_without(6, 'HandlerName')))$$,
                     '22023', 'p_messages[0].HandlerName %', 'store: HandlerName missing');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg_without(6, 'MessageType')))$$,
                     '22023', 'p_messages[0].MessageType %', 'store: MessageType missing');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg_without(6, 'Envelope')))$$,
                     '22023', 'p_messages[0].Envelope %', 'store: Envelope missing');
SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg_without(6, 'MessageId')))$$,
                     '22023', 'p_messages[0].MessageId %', 'receive: MessageId missing');
SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg_without(6, 'HandlerName')))$$,
                     '22023', 'p_messages[0].HandlerName %', 'receive: HandlerName missing');
SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg_without(6, 'MessageType')))$$,
                     '22023', 'p_messages[0].MessageType %', 'receive: MessageType missing');
SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg_without(6, 'Envelope')))$$,
                     '22023', 'p_messages[0].Envelope %', 'receive: Envelope missing');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(6, '{"MessageId": null}')))$$,
                     '22023', 'p_messages[0].MessageId %', 'store: MessageId JSON null');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(6, '{"HandlerName": null}')))$$,
                     '22023', 'p_messages[0].HandlerName %', 'store: HandlerName JSON null');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(6, '{"MessageType": null}')))$$,
                     '22023', 'p_messages[0].MessageType %', 'store: MessageType JSON null');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(6, '{"Envelope": null}')))$$,
                     '22023', 'p_messages[0].Envelope %', 'store: Envelope JSON null');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(6, '{"messageId": "00000000-0000-4000-8000-000000000006"}') - 'MessageId'))$$,
                     '22023', 'p_messages[0] has the unknown field "messageId"',
                     'store: field names are PascalCase (messageId is not MessageId, but a near miss of it)');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(6, '{"MessageId": 6}')))$$,
                     '22023', 'p_messages[0].MessageId %', 'store: MessageId a number');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(6, '{"MessageId": {"id": "00000000-0000-4000-8000-000000000006"}}')))$$,
                     '22023', 'p_messages[0].MessageId %', 'store: MessageId an object');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(6, '{"HandlerName": 1}')))$$,
                     '22023', 'p_messages[0].HandlerName %', 'store: HandlerName a number');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(6, '{"HandlerName": ["h"]}')))$$,
                     '22023', 'p_messages[0].HandlerName %', 'store: HandlerName an array');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(6, '{"MessageType": false}')))$$,
                     '22023', 'p_messages[0].MessageType %', 'store: MessageType a boolean');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(6, '{"MessageType": {"t": 1}}')))$$,
                     '22023', 'p_messages[0].MessageType %', 'store: MessageType an object');

-- ---------------------------------------------------------------------------------------
-- Optional fields of the wrong type; bad uuids; bad timestamps
-- ---------------------------------------------------------------------------------------

SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"IsEvent": "true"}')))$$,
                     '22023', 'p_messages[0].IsEvent %', 'store: IsEvent a string');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"IsEvent": 1}')))$$,
                     '22023', 'p_messages[0].IsEvent %', 'store: IsEvent a number');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"StreamId": 42}')))$$,
                     '22023', 'p_messages[0].StreamId %', 'store: StreamId a number');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"StreamId": {}}')))$$,
                     '22023', 'p_messages[0].StreamId %', 'store: StreamId an object');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"SentAt": 1700000000}')))$$,
                     '22023', 'p_messages[0].SentAt %', 'store: SentAt a number');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"ScheduledFor": {}}')))$$,
                     '22023', 'p_messages[0].ScheduledFor %', 'store: ScheduledFor an object');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"ScheduledFor": true}')))$$,
                     '22023', 'p_messages[0].ScheduledFor %', 'store: ScheduledFor a boolean');

SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"MessageId": "not-a-uuid"}')))$$,
                     '22023', 'p_messages[0].MessageId %', 'store: MessageId not a uuid');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"MessageId": "00000000-0000-4000-8000-00000000007"}')))$$,
                     '22023', 'p_messages[0].MessageId %', 'store: MessageId with 31 digits');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"MessageId": "00000000-0000-4000-8000-0000000000070"}')))$$,
                     '22023', 'p_messages[0].MessageId %', 'store: MessageId with 33 digits');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"MessageId": "g0000000-0000-4000-8000-000000000007"}')))$$,
                     '22023', 'p_messages[0].MessageId %', 'store: MessageId with a non-hex digit');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"MessageId": ""}')))$$,
                     '22023', 'p_messages[0].MessageId %', 'store: MessageId empty');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"MessageId": "-00000000-0000-4000-8000-000000000007"}')))$$,
                     '22023', 'p_messages[0].MessageId %', 'store: MessageId with a leading hyphen');
SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(7, '{"MessageId": "not-a-uuid"}')))$$,
                     '22023', 'p_messages[0].MessageId %', 'receive: MessageId not a uuid');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"StreamId": "xyz"}')))$$,
                     '22023', 'p_messages[0].StreamId %', 'store: StreamId not a uuid');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"SentAt": "garbage"}')))$$,
                     '22023', 'p_messages[0].SentAt %', 'store: SentAt not a timestamp');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"SentAt": "2030-02-30 10:00:00+00"}')))$$,
                     '22023', 'p_messages[0].SentAt %', 'store: SentAt on 30 February');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"ScheduledFor": "2030-13-01"}')))$$,
                     '22023', 'p_messages[0].ScheduledFor %', 'store: ScheduledFor in month 13');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"ScheduledFor": ""}')))$$,
                     '22023', 'p_messages[0].ScheduledFor %', 'store: ScheduledFor empty');
SELECT pg_temp.fails($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(7, '{"ScheduledFor": "infinity"}')))$$,
                     '22023', 'p_messages[0].ScheduledFor %', 'store: ScheduledFor infinity');
SELECT pg_temp.fails($$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(7, '{"SentAt": "-infinity"}')))$$,
                     '22023', 'p_messages[0].SentAt %', 'receive: SentAt -infinity');

-- ---------------------------------------------------------------------------------------
-- A malformed element in the middle of a batch: an error naming it, nothing written
-- ---------------------------------------------------------------------------------------

SELECT lives_ok($$SELECT whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(80)), p_consumer => 'middle')$$,
                'middle: message 80 stored before');
SELECT pg_temp.grew(1, 1, 1, 'middle: one message');
SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(81), pg_temp.msg(80), pg_temp.msg(82, '{"StreamId": "5eeeeeee-0000-4000-8000-000000000001"}'),
        pg_temp.msg(83, '{"StreamId": "5eeeeeee-0000-4000-8000-00000000001"}'), pg_temp.msg(84)), p_consumer => 'middle')$$,
    '22023', 'p_messages[3].StreamId %', 'middle: store names element 3 and its field StreamId');
SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(81), pg_temp.msg(80), pg_temp.msg(82),
        pg_temp.msg(83), pg_temp.msg_without(84, 'HandlerName')), p_consumer => 'middle')$$,
    '22023', 'p_messages[4].HandlerName %', 'middle: store names the last element, 4, and HandlerName');
SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(81), pg_temp.msg(80),
        pg_temp.msg(82, '{"SentAt": "not a time"}'), pg_temp.msg(83)), 'middle')$$,
    '22023', 'p_messages[2].SentAt %', 'middle: inbox_receive names element 2 and SentAt');
SELECT pg_temp.grew(0, 0, 0, 'middle: nothing written by the three bad batches');
SELECT is((SELECT observation_count FROM whizbang.wh_message_deduplication WHERE consumer = 'middle'
            AND message_id = pg_temp.id(80)), 1, 'middle: the duplicate in the bad batches was not even counted');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox_streams WHERE consumer = 'middle'), 0::bigint,
          'middle: no stream counter was created');
SELECT results_eq(
    $$SELECT message_id FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(81), pg_temp.msg(80),
        pg_temp.msg(82), pg_temp.msg(83), pg_temp.msg(84)), p_consumer => 'middle')$$,
    $$VALUES (pg_temp.id(81)), (pg_temp.id(82)), (pg_temp.id(83)), (pg_temp.id(84))$$,
    'middle: the good elements of the bad batches are still new afterwards');
SELECT pg_temp.grew(4, 4, 4, 'middle: four messages');

-- ---------------------------------------------------------------------------------------
-- Empty batch; duplicate ids in one batch
-- ---------------------------------------------------------------------------------------

SELECT is_empty($$SELECT * FROM whizbang.store_inbox_messages('[]', p_consumer => 'empty')$$,
                'empty: store of [] returns no rows');
SELECT is_empty($$SELECT * FROM whizbang.store_inbox_messages('[]', 'a0000000-0000-4000-8000-00000000000a', p_consumer => 'empty')$$,
                'empty: pre-leased store of [] returns no rows');
SELECT is_empty($$SELECT * FROM whizbang.inbox_receive('[]', 'empty')$$, 'empty: inbox_receive of [] returns no rows');
SELECT pg_temp.grew(0, 0, 0, 'empty: nothing written');

SELECT results_eq(
    $$SELECT message_id, was_newly_created FROM whizbang.store_inbox_messages(
        jsonb_build_array(pg_temp.msg(90), pg_temp.msg(90), pg_temp.msg(90, '{"Envelope": {"other": 1}}')),
        p_consumer => 'twice')$$,
    $$VALUES (pg_temp.id(90), true)$$, 'twice: the same id three times in one batch is stored once');
SELECT pg_temp.grew(1, 1, 1, 'twice: one message');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.inbox_receive(
        jsonb_build_array(pg_temp.msg(91), pg_temp.msg(91), pg_temp.msg(91)), 'twice')$$,
    $$VALUES ('new'), ('duplicate'), ('duplicate')$$, 'twice: inbox_receive answers new, duplicate, duplicate');
SELECT pg_temp.grew(1, 1, 1, 'twice: one message');

-- ---------------------------------------------------------------------------------------
-- claim_work
-- ---------------------------------------------------------------------------------------

SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work(NULL)$$, '22004', '%p_instance_id%', 'claim: NULL p_instance_id');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', 'outbound')$$,
                     '22023', '%p_source%', 'claim: unknown p_source');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', '')$$,
                     '22023', '%p_source%', 'claim: empty p_source');
SELECT is_empty($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', 'outbox', p_consumer => 'twice')$$,
                'claim: p_source outbox claims no inbox rows (and p_consumer does not apply to it)');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_max_rows => 0)$$,
                     '22023', '%p_max_rows%', 'claim: p_max_rows 0');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_max_rows => -1)$$,
                     '22023', '%p_max_rows%', 'claim: negative p_max_rows');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_max_rows => NULL)$$,
                     '22004', '%p_max_rows%', 'claim: NULL p_max_rows');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_lease_seconds => 0)$$,
                     '22023', '%p_lease_seconds%', 'claim: p_lease_seconds 0');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_lease_seconds => NULL)$$,
                     '22004', '%p_lease_seconds%', 'claim: NULL p_lease_seconds');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_partition_count => 0)$$,
                     '22023', '%p_partition_count%', 'claim: p_partition_count 0');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_partition_count => NULL)$$,
                     '22004', '%p_partition_count%', 'claim: NULL p_partition_count');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_max_per_stream => 0)$$,
                     '22023', '%p_max_per_stream%', 'claim: p_max_per_stream 0');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_max_per_stream => NULL)$$,
                     '22004', '%p_max_per_stream%', 'claim: NULL p_max_per_stream');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_now => NULL)$$,
                     '22004', '%p_now%', 'claim: NULL p_now');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_partitions => ARRAY[1, NULL])$$,
                     '22004', '%p_partitions%', 'claim: a NULL in p_partitions');
SELECT is_empty($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_partitions => '{}',
                                                   p_consumer => 'middle')$$,
                'claim: an empty p_partitions matches nothing');
SELECT results_eq(
    $$SELECT count(*) FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', NULL, 100, 300, NULL, 10000, 100,
        now(), 'middle')$$,
    $$VALUES (5::bigint)$$, 'claim: NULL p_source and NULL p_partitions mean every source and partition');

-- ---------------------------------------------------------------------------------------
-- complete / fail / renew / release and retry_dead_letters
-- ---------------------------------------------------------------------------------------

-- A leased row the bad calls must leave alone.
CREATE TEMP TABLE leased AS
SELECT message_id, lease_token FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_consumer => 'twice');
SELECT is((SELECT count(*) FROM leased), 2::bigint, 'outcomes: two rows of consumer twice are leased');

SELECT pg_temp.fails($$SELECT * FROM whizbang.complete_work(NULL, ARRAY[pg_temp.id(90)], NULL, 'twice')$$,
                     '22004', '%p_source%', 'complete: NULL p_source');
SELECT pg_temp.fails($$SELECT * FROM whizbang.complete_work('outbound', ARRAY[pg_temp.id(90)], NULL, 'twice')$$,
                     '22023', '%p_source%', 'complete: unknown p_source');
SELECT results_eq($$SELECT outcome FROM whizbang.complete_work('outbox', ARRAY[pg_temp.id(90)], NULL, NULL)$$,
                  $$VALUES ('not_found')$$, 'complete: outbox ignores p_consumer (even NULL); an inbox id is not_found there');
SELECT pg_temp.fails($$SELECT * FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(90), NULL], NULL, 'twice')$$,
                     '22004', '%p_message_ids%', 'complete: a NULL message id');
SELECT pg_temp.fails($$SELECT * FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(90)], NULL, NULL)$$,
                     '22004', '%p_consumer%', 'complete: NULL p_consumer');
SELECT pg_temp.fails($$SELECT * FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(90)], NULL, 'twice', NULL)$$,
                     '22004', '%p_now%', 'complete: NULL p_now');
SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(90), pg_temp.id(91)],
        ARRAY[(SELECT min(lease_token) FROM leased)], 'twice')$$,
    '22023', '%p_lease_tokens%', 'complete: 2 ids, 1 token');
SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(90)], ARRAY[1, 2]::bigint[], 'twice')$$,
    '22023', '%p_lease_tokens%', 'complete: 1 id, 2 tokens');
SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(90)], '{}'::bigint[], 'twice')$$,
    '22023', '%p_lease_tokens%', 'complete: 1 id, an empty token array');
SELECT is_empty($$SELECT * FROM whizbang.complete_work('inbox', NULL, NULL, 'twice')$$,
                'complete: NULL p_message_ids completes nothing');
SELECT is_empty($$SELECT * FROM whizbang.complete_work('inbox', '{}', '{}', 'twice')$$,
                'complete: empty arrays complete nothing');

SELECT pg_temp.fails($$SELECT * FROM whizbang.fail_work(NULL, ARRAY[pg_temp.id(90)], ARRAY['e'], NULL, NULL, 'twice')$$,
                     '22004', '%p_source%', 'fail: NULL p_source');
SELECT pg_temp.fails($$SELECT * FROM whizbang.fail_work('x', ARRAY[pg_temp.id(90)], ARRAY['e'], NULL, NULL, 'twice')$$,
                     '22023', '%p_source%', 'fail: unknown p_source');
SELECT pg_temp.fails($$SELECT * FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(90)], ARRAY['e', 'f'], NULL, NULL, 'twice')$$,
                     '22023', '%p_errors%', 'fail: 1 id, 2 errors');
SELECT pg_temp.fails($$SELECT * FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(90), pg_temp.id(91)], ARRAY['e'], NULL, NULL, 'twice')$$,
                     '22023', '%p_errors%', 'fail: 2 ids, 1 error');
SELECT pg_temp.fails($$SELECT * FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(90)], ARRAY['e'], ARRAY[1, 2]::bigint[], NULL, 'twice')$$,
                     '22023', '%p_lease_tokens%', 'fail: 1 id, 2 tokens');
SELECT pg_temp.fails($$SELECT * FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(90)], ARRAY['e'], NULL, ARRAY[true, false], 'twice')$$,
                     '22023', '%p_retryable%', 'fail: 1 id, 2 retryable flags');
SELECT pg_temp.fails($$SELECT * FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(90)], ARRAY['e'], NULL, NULL, NULL)$$,
                     '22004', '%p_consumer%', 'fail: NULL p_consumer');
SELECT pg_temp.fails($$SELECT * FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(90)], ARRAY['e'], NULL, NULL, 'twice', NULL)$$,
                     '22004', '%p_now%', 'fail: NULL p_now');

SELECT pg_temp.fails($$SELECT * FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(90)], NULL, 60, 'twice')$$,
                     '22004', '%p_lease_tokens%', 'renew: NULL p_lease_tokens');
SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(90), pg_temp.id(91)],
        ARRAY[(SELECT min(lease_token) FROM leased)], 60, 'twice')$$,
    '22023', '%p_lease_tokens%', 'renew: 2 ids, 1 token');
SELECT pg_temp.fails($$SELECT * FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(90)], ARRAY[(SELECT min(lease_token) FROM leased)], 0, 'twice')$$,
                     '22023', '%p_lease_seconds%', 'renew: p_lease_seconds 0');
SELECT pg_temp.fails($$SELECT * FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(90)], ARRAY[(SELECT min(lease_token) FROM leased)], NULL, 'twice')$$,
                     '22004', '%p_lease_seconds%', 'renew: NULL p_lease_seconds');
SELECT results_eq($$SELECT outcome FROM whizbang.renew_leases('outbox', ARRAY[pg_temp.id(90)], ARRAY[1::bigint], 60, NULL)$$,
                  $$VALUES ('not_found')$$, 'renew: outbox ignores p_consumer; an inbox id is not_found there');
SELECT pg_temp.fails($$SELECT * FROM whizbang.renew_leases(NULL, ARRAY[pg_temp.id(90)], ARRAY[1::bigint])$$,
                     '22004', '%p_source%', 'renew: NULL p_source');

SELECT results_eq($$SELECT outcome FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(99)], NULL, NULL, NULL, 'twice')$$,
                  $$VALUES ('not_found')$$, 'fail: NULL p_errors is allowed (no error text)');
SELECT is_empty($$SELECT * FROM whizbang.fail_work('inbox', NULL, NULL, NULL, NULL, 'twice')$$,
                'fail: NULL p_message_ids fails nothing');
SELECT pg_temp.fails($$SELECT * FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(90)], ARRAY[1::bigint], 60, NULL)$$,
                     '22004', '%p_consumer%', 'renew: NULL p_consumer');
SELECT pg_temp.fails($$SELECT * FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(90)], ARRAY[1::bigint], 60, 'twice', NULL)$$,
                     '22004', '%p_now%', 'renew: NULL p_now');
SELECT is_empty($$SELECT * FROM whizbang.renew_leases('inbox', NULL, '{}', 60, 'twice')$$,
                'renew: NULL p_message_ids renews nothing');
SELECT pg_temp.fails($$SELECT * FROM whizbang.release_work(NULL, ARRAY[pg_temp.id(90)], ARRAY[1::bigint], 'twice')$$,
                     '22004', '%p_source%', 'release: NULL p_source');
SELECT results_eq($$SELECT outcome FROM whizbang.release_work('outbox', ARRAY[pg_temp.id(90)], ARRAY[1::bigint], NULL)$$,
                  $$VALUES ('not_found')$$, 'release: outbox ignores p_consumer; an inbox id is not_found there');
SELECT pg_temp.fails($$SELECT * FROM whizbang.release_work('inbox', ARRAY[pg_temp.id(90)], ARRAY[1::bigint], 'twice', NULL)$$,
                     '22004', '%p_now%', 'release: NULL p_now');
SELECT is_empty($$SELECT * FROM whizbang.release_work('inbox', NULL, '{}', 'twice')$$,
                'release: NULL p_message_ids releases nothing');
SELECT pg_temp.fails($$SELECT * FROM whizbang.release_work('inbox', ARRAY[pg_temp.id(90)], NULL, 'twice')$$,
                     '22004', '%p_lease_tokens%', 'release: NULL p_lease_tokens');
SELECT pg_temp.fails($$SELECT * FROM whizbang.release_work('inbox', ARRAY[pg_temp.id(90)], ARRAY[1, 2]::bigint[], 'twice')$$,
                     '22023', '%p_lease_tokens%', 'release: 1 id, 2 tokens');
SELECT pg_temp.fails($$SELECT * FROM whizbang.release_work('inbound', ARRAY[pg_temp.id(90)], ARRAY[1::bigint], 'twice')$$,
                     '22023', '%p_source%', 'release: unknown p_source');
SELECT pg_temp.fails($$SELECT * FROM whizbang.release_work('inbox', ARRAY[pg_temp.id(90)], ARRAY[1::bigint], NULL)$$,
                     '22004', '%p_consumer%', 'release: NULL p_consumer');

SELECT is(whizbang.retry_dead_letters(NULL), 0, 'retry_dead_letters: NULL retries nothing');
SELECT is(whizbang.retry_dead_letters('{}'), 0, 'retry_dead_letters: an empty array retries nothing');
SELECT pg_temp.fails($$SELECT whizbang.retry_dead_letters(ARRAY[1, NULL]::bigint[])$$,
                     '22004', '%p_dead_letter_ids%', 'retry_dead_letters: a NULL id');

SELECT results_eq(
    $$SELECT l.message_id, l.lease_token, l.attempts FROM whizbang.leases l JOIN leased USING (message_id)
       WHERE l.source = 'inbox' AND l.consumer = 'twice' ORDER BY 1$$,
    $$SELECT message_id, lease_token, 1 FROM leased ORDER BY 1$$,
    'outcomes: after all the bad calls both rows are leased as before');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM leased ORDER BY 1),
        ARRAY(SELECT lease_token FROM leased ORDER BY message_id), 'twice')$$,
    $$VALUES ('completed'), ('completed')$$, 'outcomes: and their tokens still complete them');
SELECT pg_temp.grew(-2, -2, 0, 'outcomes: completion removed both messages and kept their dedup records');

-- ---------------------------------------------------------------------------------------
-- Times past the end of the timestamptz range (294276-12-31 23:59:59.999999 UTC): a lease or a
-- retry time that cannot be represented is an error (22008), not a stored out-of-range value
-- (which no query could print back and no dump could restore)
-- ---------------------------------------------------------------------------------------

-- The generation of that time made by maintenance then (0.13.0: a store makes none further ahead
-- than now() plus one period); the counts start again after what it purged.
DO $$ BEGIN PERFORM whizbang.perform_maintenance('294276-12-31 23:00:00+00'); END $$;
UPDATE last_counts SET inbox = (SELECT count(*) FROM whizbang.wh_inbox), work = (SELECT count(*) FROM whizbang.wh_inbox),
                       dedup = (SELECT count(*) FROM whizbang.wh_message_deduplication);
SELECT lives_ok(
    $$SELECT whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(95)), NULL, NULL, '294276-12-31 23:00:00+00',
                                          10000, 'range_end')$$,
    'range end: a message stored an hour before the end of time');
SELECT pg_temp.grew(1, 1, 1, 'range end: one message');
SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(96)), 'a0000000-0000-4000-8000-00000000000a',
                                                 NULL, '294276-12-31 23:59:00+00', 10000, 'range_end')$$,
    '22008', NULL, 'range end: pre-leased store whose default lease (p_now + 300 s) ends after the end of time');
SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_lease_seconds => 7200,
                                       p_now => '294276-12-31 23:00:00+00', p_consumer => 'range_end')$$,
    '22008', NULL, 'range end: a claim whose lease would end after the end of time');
CREATE TEMP TABLE range_end_claim AS
SELECT message_id, lease_token FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_lease_seconds => 60,
                                                        p_now => '294276-12-31 23:00:00+00', p_consumer => 'range_end');
SELECT is((SELECT count(*) FROM range_end_claim), 1::bigint, 'range end: a claim with a representable lease works');
SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.renew_leases('inbox', ARRAY(SELECT message_id FROM range_end_claim),
        ARRAY(SELECT lease_token FROM range_end_claim), 7200, 'range_end', '294276-12-31 23:00:30+00')$$,
    '22008', NULL, 'range end: a renewal past the end of time');
SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.fail_work('inbox', ARRAY(SELECT message_id FROM range_end_claim), ARRAY['e'],
        ARRAY(SELECT lease_token FROM range_end_claim), NULL, 'range_end', '294276-12-31 23:59:59+00')$$,
    '22008', NULL, 'range end: a retry (>= 22.5 s later) past the end of time');

-- ---------------------------------------------------------------------------------------
-- Large batches: 100,000 elements work; more than 1,000,000 are refused
-- ---------------------------------------------------------------------------------------

SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.store_inbox_messages(('[' || repeat('{},', 1000000) || '{}]')::jsonb)$$,
    '54000', '%1000001%', 'big: 1,000,001 elements are refused with 54000 before any element is looked at');
SELECT pg_temp.fails(
    $$SELECT * FROM whizbang.inbox_receive(('[' || repeat('0,', 1000000) || '0]')::jsonb)$$,
    '54000', '%1000001%', 'big: inbox_receive refuses 1,000,001 elements too');

CREATE TEMP TABLE big AS
SELECT jsonb_agg(jsonb_build_object(
           'MessageId', ('b1000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
           'HandlerName', 'h', 'MessageType', 't', 'Envelope', jsonb_build_object('n', g),
           'StreamId', ('5eeeeeee-0000-4000-8000-' || lpad(to_hex(g % 100), 12, '0'))::uuid) ORDER BY g) AS batch
  FROM generate_series(1, 100000) g;
SELECT is((SELECT count(*) FROM big, whizbang.store_inbox_messages(big.batch, p_consumer => 'big')), 100000::bigint,
          'big: a 100,000-element batch returns 100,000 new rows');
SELECT pg_temp.grew(100000, 100000, 100000, 'big: 100,000 messages written');
SELECT results_eq(
    $$SELECT count(*), min(stream_seq), max(stream_seq) FROM whizbang.wh_inbox WHERE consumer = 'big'
       GROUP BY stream_id ORDER BY stream_id LIMIT 1$$,
    $$VALUES (1000::bigint, 1::bigint, 1000::bigint)$$, 'big: each of the 100 streams is numbered 1..1000');
SELECT is((SELECT count(*) FILTER (WHERE outcome = 'duplicate') FROM big, whizbang.inbox_receive(big.batch, 'big')),
          100000::bigint, 'big: redelivering all of them answers 100,000 duplicates');
SELECT pg_temp.grew(0, 0, 0, 'big: nothing more written');
DROP TABLE big;

SELECT * FROM finish();
ROLLBACK;
