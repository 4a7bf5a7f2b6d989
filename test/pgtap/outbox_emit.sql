-- The WAL outbox's emit function (issue 32, DESIGN §3.10): emit_outbox_messages answers one row
-- per element, emits a repeated id once, takes the store_outbox_messages envelope, and refuses
-- bad input (NULLs, malformed elements, ScheduledFor, nesting too deep, bad p_now) with its
-- SQLSTATE and without writing anything; a role needs EXECUTE, which grant_worker's 'outbox'
-- capability gives. What reaches a slot (commit, rollback, savepoints, two-phase commit, the
-- exact content) is test/scripts/outbox_emit.sh's: decoding sees committed transactions only,
-- and this file runs in one that rolls back.
--
-- The emit refuses to run where no logical slot would decode the messages: the file makes one
-- before its transaction (a transaction that has written may not create a logical slot) and
-- drops it at the end. The suites' clusters run with wal_level = logical (scripts/test).
\o /dev/null
SELECT pg_catalog.pg_create_logical_replication_slot('wb_pgtap_emit', 'pgoutput');
\o
BEGIN;
SELECT plan(22);

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('0e000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.msg(p_n int, p_extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('MessageId', pg_temp.id(p_n), 'Destination', 'orders', 'MessageType', 'OrderCreated',
                              'Envelope', jsonb_build_object('n', p_n)) || p_extra
$$;

SELECT has_function('whizbang', 'emit_outbox_messages', ARRAY['jsonb', 'timestamp with time zone'],
                    'emit_outbox_messages(jsonb, timestamptz) exists');
SELECT function_returns('whizbang', 'emit_outbox_messages', ARRAY['jsonb', 'timestamp with time zone'], 'setof record',
                        'it returns a set of rows');

SELECT results_eq(
    $$SELECT message_id, stream_id, emitted FROM whizbang.emit_outbox_messages(jsonb_build_array(
          pg_temp.msg(1, jsonb_build_object('StreamId', pg_temp.id(100))), pg_temp.msg(2), pg_temp.msg(1)))$$,
    $$VALUES (pg_temp.id(1), pg_temp.id(100), true), (pg_temp.id(2), NULL::uuid, true), (pg_temp.id(1), NULL::uuid, false)$$,
    'one row per element, in input order; a repeated id is emitted once (emitted false)');
SELECT is((SELECT count(*) FROM whizbang.emit_outbox_messages('[]')), 0::bigint, 'an empty array emits nothing');
SELECT is((SELECT count(*) FILTER (WHERE emitted) FROM whizbang.emit_outbox_messages(
              (SELECT jsonb_agg(pg_temp.msg(g)) FROM generate_series(1000, 10999) g))),
          10000::bigint, 'a batch of 10,000 messages');
SELECT is((SELECT count(*) FROM whizbang.emit_outbox_messages(
              jsonb_build_array(pg_temp.msg(3, '{"IsEvent": true, "Metadata": {"a": 1}, "Scope": null, "HandlerName": "x"}')))),
          1::bigint, 'IsEvent, Metadata and a null Scope are taken; the inbox''s HandlerName is ignored');

-- bad input
SELECT throws_ok($$SELECT * FROM whizbang.emit_outbox_messages(NULL)$$, '22004', NULL, 'p_messages NULL: 22004');
SELECT throws_ok($$SELECT * FROM whizbang.emit_outbox_messages(jsonb_build_array(pg_temp.msg(4)), NULL)$$, '22004', NULL,
                 'p_now NULL: 22004');
SELECT throws_ok($$SELECT * FROM whizbang.emit_outbox_messages(jsonb_build_array(pg_temp.msg(4)), 'infinity')$$, '22023',
                 'p_now must be a finite timestamp', 'p_now infinity: 22023');
SELECT throws_ok($$SELECT * FROM whizbang.emit_outbox_messages('{"MessageId": "x"}')$$, '22023', NULL,
                 'an object instead of an array: 22023');
SELECT throws_ok($$SELECT * FROM whizbang.emit_outbox_messages('[1]')$$, '22023', NULL, 'an element that is no object: 22023');
SELECT throws_ok($$SELECT * FROM whizbang.emit_outbox_messages(jsonb_build_array(pg_temp.msg(5), pg_temp.msg(6) - 'Destination'))$$,
                 '22023', NULL, 'a missing Destination: 22023');
SELECT throws_ok($$SELECT * FROM whizbang.emit_outbox_messages(jsonb_build_array(pg_temp.msg(5) || '{"MessageId": "nope"}'))$$,
                 '22023', NULL, 'a MessageId that is no UUID: 22023');
SELECT throws_ok($$SELECT * FROM whizbang.emit_outbox_messages(jsonb_build_array(pg_temp.msg(5) || '{"Destinaton": "x"}'))$$,
                 '22023', NULL, 'a near miss of a field name: 22023');
SELECT throws_ok($$SELECT * FROM whizbang.emit_outbox_messages(jsonb_build_array(pg_temp.msg(5),
                     pg_temp.msg(6, '{"ScheduledFor": "2030-01-01T00:00:00Z"}')))$$,
                 '0A000', 'p_messages[1] has ScheduledFor: an emitted message leaves at commit',
                 'ScheduledFor: 0A000 (an emitted message cannot wait)');
SELECT throws_ok(format($$SELECT * FROM whizbang.emit_outbox_messages(jsonb_build_array(pg_temp.msg(5,
                     jsonb_build_object('Envelope', %L::jsonb))))$$, repeat('[', 10001) || repeat(']', 10001)),
                 '54000', NULL, 'an Envelope nested deeper than 10,000 levels: 54000');
SELECT throws_ok($$SELECT * FROM whizbang.emit_outbox_messages('[{"MessageId": "0e000000-0000-4000-8000-000000000007", "Destination": 1, "MessageType": "T", "Envelope": {}}]')$$,
                 '22023', NULL, 'a Destination that is no string: 22023');

-- privileges
CREATE ROLE wb_emit_none NOLOGIN;
CREATE ROLE wb_emit_app NOLOGIN;
GRANT USAGE ON SCHEMA whizbang TO wb_emit_none;
SELECT lives_ok($$SELECT whizbang.grant_worker('wb_emit_app', ARRAY['outbox'])$$, 'grant_worker(role, outbox)');
SET LOCAL ROLE wb_emit_none;
SELECT throws_ok($$SELECT * FROM whizbang.emit_outbox_messages(jsonb_build_array(pg_temp.msg(8)))$$, '42501', NULL,
                 'a role without EXECUTE: 42501');
RESET ROLE;
SET LOCAL ROLE wb_emit_app;
SELECT is((SELECT count(*) FROM whizbang.emit_outbox_messages(jsonb_build_array(pg_temp.msg(9)))), 1::bigint,
          'grant_worker''s outbox capability lets a role emit');
RESET ROLE;

SELECT is((SELECT count(*) FROM whizbang.wh_outbox), 0::bigint, 'no outbox row was written');
SELECT ok((SELECT value FROM whizbang.stats() WHERE metric = 'logical_slots') >= 1, 'stats() counts the logical slot');

SELECT * FROM finish();
ROLLBACK;
\o /dev/null
SELECT pg_catalog.pg_drop_replication_slot('wb_pgtap_emit');
\o
