-- Privileges (DESIGN §4, docs/security.md): nothing is granted to PUBLIC; the documented
-- minimal grants are enough for dedup_insert / dedup_insert_many (with and without p_sent_at,
-- including an expired answer); without table grants the write is refused with 42501 and
-- nothing is written; row-level security on the dedup table is honoured.
-- Work (issue 11): a role with the inbox worker grants of docs/inbox.md ("Grants") and one with
-- the relay grants of docs/security.md ("The outbox") store, claim (a pre-leased row handed
-- back), renew, complete, fail (retry and dead letter), release and claim again, in either
-- lease store (./scripts/test runs this file in both); whizbang.leases needs SELECT on the view,
-- EXECUTE on whizbang._leases() and SELECT on the work tables (docs/security.md "The leases
-- view"), each one missing refused with 42501.
--
-- Roles are created inside the test transaction and disappear with its ROLLBACK.
BEGIN;
SELECT plan(46);

CREATE ROLE wb_test_nobody NOLOGIN;
CREATE ROLE wb_test_app NOLOGIN;
CREATE ROLE wb_test_exec_only NOLOGIN;

GRANT USAGE ON SCHEMA whizbang TO wb_test_app, wb_test_exec_only;
GRANT EXECUTE ON FUNCTION
    whizbang.dedup_insert(uuid, text, bytea, timestamptz, timestamptz),
    whizbang.dedup_insert_many(uuid[], text, bytea[], timestamptz[], timestamptz),
    whizbang.fingerprint(jsonb, text[]),
    whizbang.event_uuid(text, text),
    whizbang.uuid_v7(timestamptz),
    whizbang.partition_of(uuid, integer),
    whizbang.version()
  TO wb_test_app, wb_test_exec_only;
GRANT SELECT, INSERT, UPDATE, DELETE ON whizbang.wh_message_deduplication TO wb_test_app;
GRANT SELECT ON whizbang.settings TO wb_test_app;

-- ---------------------------------------------------------------------------------------
-- Nothing for PUBLIC
-- ---------------------------------------------------------------------------------------

SELECT is((SELECT count(*) FROM pg_proc p
            WHERE p.pronamespace = 'whizbang'::regnamespace
              AND has_function_privilege('wb_test_nobody', p.oid, 'EXECUTE')), 0::bigint,
          'a role without grants may execute no whizbang function');
SELECT ok(NOT has_schema_privilege('wb_test_nobody', 'whizbang', 'USAGE'),
          'a role without grants has no USAGE on schema whizbang');
SELECT ok(NOT has_table_privilege('wb_test_nobody', 'whizbang.wh_message_deduplication', 'SELECT,INSERT,UPDATE,DELETE'),
          'a role without grants has no privilege on wh_message_deduplication');
SELECT ok(NOT has_table_privilege('wb_test_nobody', 'whizbang.wh_settings', 'SELECT,INSERT,UPDATE,DELETE'),
          'a role without grants has no privilege on wh_settings');
SELECT ok(NOT has_function_privilege('wb_test_app', 'whizbang._bridge_selftest(text)', 'EXECUTE'),
          '_bridge_selftest is not granted by the application grants');

SET LOCAL ROLE wb_test_nobody;
SELECT throws_ok($$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa01', 'priv')$$, '42501', NULL,
                 'a role without grants cannot call dedup_insert (42501)');
SELECT throws_ok($$SELECT whizbang.fingerprint('{}')$$, '42501', NULL,
                 'a role without grants cannot call fingerprint (42501)');
RESET ROLE;

-- ---------------------------------------------------------------------------------------
-- EXECUTE without table grants: refused, nothing written
-- ---------------------------------------------------------------------------------------

SET LOCAL ROLE wb_test_exec_only;
SELECT is(octet_length(whizbang.fingerprint('{"a":1}')), 32, 'USAGE and EXECUTE suffice for fingerprint');
SELECT is(whizbang.partition_of('00000000-0000-4000-8000-00000000aa01', 8) BETWEEN 0 AND 7, true,
          'USAGE and EXECUTE suffice for partition_of');
SELECT throws_ok($$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa01', 'priv')$$, '42501', NULL,
                 'dedup_insert of a new id without table grants raises 42501');
SELECT throws_ok($$SELECT * FROM whizbang.dedup_insert_many(ARRAY['00000000-0000-4000-8000-00000000aa02']::uuid[], 'priv')$$,
                 '42501', NULL, 'dedup_insert_many of a new id without table grants raises 42501');
RESET ROLE;
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'priv'), 0::bigint,
          'nothing was written by the refused calls');

-- ---------------------------------------------------------------------------------------
-- The documented minimal grants work, for every outcome
-- ---------------------------------------------------------------------------------------

SET LOCAL ROLE wb_test_app;
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa01', 'priv', '\x01'::bytea), 'new',
          'with the documented grants: new');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa01', 'priv', '\x01'::bytea), 'duplicate',
          'with the documented grants: duplicate');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa01', 'priv', '\x02'::bytea,
                                '2024-06-30 00:00:00+00', '2024-06-30 12:00:00+00'), 'conflict',
          'with the documented grants: conflict, with p_sent_at (reads the settings view)');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa03', 'priv', NULL,
                                '2020-01-01 00:00:00+00', '2024-06-30 12:00:00+00'), 'expired',
          'with the documented grants: expired');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000aa01', '00000000-0000-4000-8000-00000000aa04']::uuid[], 'priv')$$,
    ARRAY['duplicate', 'new'], 'with the documented grants: dedup_insert_many');
RESET ROLE;
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'priv'), 2::bigint,
          'the application role recorded exactly its two new ids');

-- ---------------------------------------------------------------------------------------
-- Row-level security on the dedup table is honoured
-- ---------------------------------------------------------------------------------------

ALTER TABLE whizbang.wh_message_deduplication ENABLE ROW LEVEL SECURITY;
CREATE POLICY wb_test_own_consumer ON whizbang.wh_message_deduplication TO wb_test_app
    USING (consumer = 'tenant_a') WITH CHECK (consumer = 'tenant_a');
SET LOCAL ROLE wb_test_app;
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa05', 'tenant_a'), 'new',
          'row-level security: the allowed consumer records');
SELECT throws_ok($$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa05', 'tenant_b')$$, '42501', NULL,
                 'row-level security: another consumer is refused (42501)');
RESET ROLE;

-- ---------------------------------------------------------------------------------------
-- An inbox worker with the grants of docs/inbox.md, in either lease store
-- ---------------------------------------------------------------------------------------

ALTER TABLE whizbang.wh_message_deduplication DISABLE ROW LEVEL SECURITY;  -- the section above's
CREATE ROLE wb_test_worker NOLOGIN;
GRANT USAGE ON SCHEMA whizbang TO wb_test_worker;
GRANT EXECUTE ON FUNCTION
    whizbang.store_inbox_messages(jsonb, uuid, timestamptz, timestamptz, integer, text),
    whizbang.inbox_receive(jsonb, text, timestamptz, integer),
    whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text, interval),
    whizbang.complete_work(text, uuid[], bigint[], text, timestamptz),
    whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz, interval),
    whizbang.renew_leases(text, uuid[], bigint[], integer, text, timestamptz),
    whizbang.release_work(text, uuid[], bigint[], text, timestamptz),
    whizbang.partition_of(uuid, integer)
  TO wb_test_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON whizbang.wh_message_deduplication TO wb_test_worker;
GRANT SELECT, INSERT, DELETE ON whizbang.wh_inbox TO wb_test_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON whizbang.wh_inbox TO wb_test_worker;
GRANT SELECT, INSERT, UPDATE ON whizbang.wh_inbox_streams TO wb_test_worker;
GRANT SELECT, INSERT, DELETE ON whizbang.wh_inbox_preleased TO wb_test_worker;
GRANT INSERT ON whizbang.wh_dead_letters TO wb_test_worker;
GRANT USAGE ON SEQUENCE whizbang.wh_lease_token_seq TO wb_test_worker;
GRANT SELECT ON whizbang.settings TO wb_test_worker;

-- A monitoring role with the grants of docs/security.md "The leases view", and three that
-- each lack one of them.
CREATE ROLE wb_test_monitor NOLOGIN;
CREATE ROLE wb_test_mon_no_view NOLOGIN;
CREATE ROLE wb_test_mon_no_exec NOLOGIN;
CREATE ROLE wb_test_mon_no_table NOLOGIN;
GRANT USAGE ON SCHEMA whizbang TO wb_test_monitor, wb_test_mon_no_view, wb_test_mon_no_exec, wb_test_mon_no_table;
GRANT SELECT ON whizbang.leases TO wb_test_monitor, wb_test_mon_no_exec, wb_test_mon_no_table;
GRANT EXECUTE ON FUNCTION whizbang._leases() TO wb_test_monitor, wb_test_mon_no_view, wb_test_mon_no_table;
GRANT SELECT ON whizbang.wh_inbox, whizbang.wh_outbox TO wb_test_monitor, wb_test_mon_no_view, wb_test_mon_no_exec;

SET LOCAL ROLE wb_test_worker;
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages('[
  {"MessageId": "00000000-0000-7000-8000-00000000ab01", "HandlerName": "h", "MessageType": "t", "Envelope": {}},
  {"MessageId": "00000000-0000-7000-8000-00000000ab02", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "StreamId": "00000000-0000-7000-8000-00000000ab99"},
  {"MessageId": "00000000-0000-7000-8000-00000000ab03", "HandlerName": "h", "MessageType": "t", "Envelope": {}},
  {"MessageId": "00000000-0000-7000-8000-00000000ab04", "HandlerName": "h", "MessageType": "t", "Envelope": {}}
]', p_consumer => 'priv_w')), 4::bigint, 'worker grants: store_inbox_messages stores 4');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages('[
  {"MessageId": "00000000-0000-7000-8000-00000000ab05", "HandlerName": "h", "MessageType": "t", "Envelope": {}}
]', '00000000-0000-4000-8000-00000000abab', now() + interval '1 minute', p_consumer => 'priv_w')), 1::bigint,
          'worker grants: a pre-leased store');
CREATE TEMP TABLE priv_claim AS
SELECT message_id, lease_token, attempts
  FROM whizbang.claim_work('00000000-0000-4000-8000-00000000abab', 'inbox', 10, 60, p_consumer => 'priv_w');
SELECT is((SELECT count(*) || ' rows, attempts ' || string_agg(DISTINCT attempts::text, ',') FROM priv_claim),
          '5 rows, attempts 1', 'worker grants: claim_work hands out the 4 and the pre-leased one, attempts 1');
SELECT throws_ok($$SELECT * FROM whizbang.leases$$, '42501', NULL,
                 'worker grants: whizbang.leases is not among them (42501)');
RESET ROLE;

SET LOCAL ROLE wb_test_monitor;
CREATE TEMP TABLE priv_seen AS
SELECT message_id, instance_id, lease_token, attempts FROM whizbang.leases WHERE consumer = 'priv_w';
RESET ROLE;
SELECT results_eq(
    $$SELECT message_id, instance_id, lease_token, attempts FROM priv_seen ORDER BY message_id$$,
    $$SELECT message_id, '00000000-0000-4000-8000-00000000abab'::uuid, lease_token, attempts FROM priv_claim
       ORDER BY message_id$$,
    'leases grants (view, _leases(), work tables): whizbang.leases lists the worker''s 5 leases and tokens');
SET LOCAL ROLE wb_test_mon_no_view;
SELECT throws_ok($$SELECT * FROM whizbang.leases$$, '42501', 'permission denied for view leases',
                 'leases: without SELECT on the view, 42501');
SELECT lives_ok($$SELECT * FROM whizbang._leases()$$,
                'leases: EXECUTE on _leases() and SELECT on the work tables read the function itself');
SET LOCAL ROLE wb_test_mon_no_exec;
SELECT throws_ok($$SELECT * FROM whizbang.leases$$, '42501', 'permission denied for function _leases',
                 'leases: without EXECUTE on whizbang._leases(), 42501');
SET LOCAL ROLE wb_test_mon_no_table;
SELECT throws_ok($$SELECT * FROM whizbang.leases$$, '42501', 'permission denied for table wh_inbox',
                 'leases: without SELECT on the work tables (inbox leases held), 42501');
RESET ROLE;

SET LOCAL ROLE wb_test_worker;
CREATE FUNCTION pg_temp.priv_tok(p_n integer) RETURNS bigint LANGUAGE sql
  AS $$ SELECT lease_token FROM priv_claim WHERE message_id = ('00000000-0000-7000-8000-00000000ab0' || p_n)::uuid $$;
SELECT results_eq(
    $$SELECT outcome FROM whizbang.renew_leases('inbox', '{00000000-0000-7000-8000-00000000ab01}',
                                               ARRAY[pg_temp.priv_tok(1)], 120, 'priv_w')$$,
    $$VALUES ('renewed')$$, 'worker grants: renew_leases');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('inbox', '{00000000-0000-7000-8000-00000000ab01,00000000-0000-7000-8000-00000000ab05}',
                                                ARRAY[pg_temp.priv_tok(1), pg_temp.priv_tok(5)], 'priv_w')$$,
    $$VALUES ('completed'), ('completed')$$, 'worker grants: complete_work (one of them pre-leased)');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('inbox', '{00000000-0000-7000-8000-00000000ab02}', '{boom}',
                                            ARRAY[pg_temp.priv_tok(2)], '{true}', 'priv_w')$$,
    $$VALUES ('retry_scheduled')$$, 'worker grants: fail_work, retry');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('inbox', '{00000000-0000-7000-8000-00000000ab03}', '{poison}',
                                            ARRAY[pg_temp.priv_tok(3)], '{false}', 'priv_w')$$,
    $$VALUES ('dead_lettered')$$, 'worker grants: fail_work, dead letter');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.release_work('inbox', '{00000000-0000-7000-8000-00000000ab04}',
                                               ARRAY[pg_temp.priv_tok(4)], 'priv_w')$$,
    $$VALUES ('released')$$, 'worker grants: release_work');
-- Again, after the retry's backoff: the failed message (its second delivery) and the released
-- one (its first again: a release gives the delivery back).
SELECT results_eq(
    $$SELECT message_id, attempts FROM whizbang.claim_work('00000000-0000-4000-8000-00000000abac', 'inbox', 10, 60,
                                                         p_now => now() + interval '1 hour', p_consumer => 'priv_w')
       ORDER BY message_id$$,
    $$VALUES ('00000000-0000-7000-8000-00000000ab02'::uuid, 2), ('00000000-0000-7000-8000-00000000ab04'::uuid, 1)$$,
    'worker grants: a later claim hands out the retried (attempts 2) and the released (attempts 1) message');
RESET ROLE;
SET LOCAL ROLE wb_test_monitor;
SELECT results_eq(
    $$SELECT message_id, instance_id, attempts FROM whizbang.leases WHERE consumer = 'priv_w' ORDER BY message_id$$,
    $$VALUES ('00000000-0000-7000-8000-00000000ab02'::uuid, '00000000-0000-4000-8000-00000000abac'::uuid, 2),
             ('00000000-0000-7000-8000-00000000ab04'::uuid, '00000000-0000-4000-8000-00000000abac'::uuid, 1)$$,
    'leases grants: whizbang.leases lists the second claim''s leases only');
RESET ROLE;
SELECT is((SELECT count(*) FROM whizbang.wh_dead_letters WHERE consumer = 'priv_w'), 1::bigint,
          'the worker''s dead letter was written');

-- ---------------------------------------------------------------------------------------
-- An outbox relay with the grants of docs/security.md, in either lease store
-- ---------------------------------------------------------------------------------------

CREATE ROLE wb_test_relay NOLOGIN;
GRANT USAGE ON SCHEMA whizbang TO wb_test_relay;
GRANT EXECUTE ON FUNCTION
    whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text, interval),
    whizbang.complete_work(text, uuid[], bigint[], text, timestamptz),
    whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz, interval),
    whizbang.renew_leases(text, uuid[], bigint[], integer, text, timestamptz),
    whizbang.release_work(text, uuid[], bigint[], text, timestamptz),
    whizbang.complete_outbox_published(uuid[], boolean),
    whizbang.partition_of(uuid, integer)
  TO wb_test_relay;
GRANT SELECT, DELETE ON whizbang.wh_outbox TO wb_test_relay;
GRANT SELECT, UPDATE, DELETE ON whizbang.wh_outbox TO wb_test_relay;
GRANT SELECT, DELETE ON whizbang.wh_outbox_preleased TO wb_test_relay;
GRANT INSERT ON whizbang.wh_dead_letters TO wb_test_relay;
GRANT USAGE ON SEQUENCE whizbang.wh_lease_token_seq TO wb_test_relay;
GRANT SELECT ON whizbang.settings TO wb_test_relay;

-- Stored in 1980 (p_now), claimed then: outbox rows of other tests are not due yet.
SELECT is((SELECT count(*) FROM whizbang.store_outbox_messages('[
  {"MessageId": "00000000-0000-7000-8000-00000000ac01", "Destination": "d", "MessageType": "t", "Envelope": {}},
  {"MessageId": "00000000-0000-7000-8000-00000000ac02", "Destination": "d", "MessageType": "t", "Envelope": {}},
  {"MessageId": "00000000-0000-7000-8000-00000000ac03", "Destination": "d", "MessageType": "t", "Envelope": {}},
  {"MessageId": "00000000-0000-7000-8000-00000000ac04", "Destination": "d", "MessageType": "t", "Envelope": {}}
]', p_now => '1980-01-01 00:00:00+00') WHERE was_newly_created), 4::bigint, 'outbox: 4 stored for the relay');
SET LOCAL ROLE wb_test_relay;
CREATE TEMP TABLE priv_relay AS
SELECT message_id, lease_token, attempts
  FROM whizbang.claim_work('00000000-0000-4000-8000-00000000acac', 'outbox', 10, 60, p_now => '1980-01-01 00:01:00+00');
SELECT is((SELECT count(*) || ' rows, attempts ' || string_agg(DISTINCT attempts::text, ',') FROM priv_relay),
          '4 rows, attempts 1', 'relay grants: claim_work(''outbox'') hands out the 4');
CREATE FUNCTION pg_temp.relay_tok(p_n integer) RETURNS bigint LANGUAGE sql
  AS $$ SELECT lease_token FROM priv_relay WHERE message_id = ('00000000-0000-7000-8000-00000000ac0' || p_n)::uuid $$;
SELECT results_eq(
    $$SELECT outcome FROM whizbang.renew_leases('outbox', '{00000000-0000-7000-8000-00000000ac01}',
                                               ARRAY[pg_temp.relay_tok(1)], 120, NULL, '1980-01-01 00:01:10+00')$$,
    $$VALUES ('renewed')$$, 'relay grants: renew_leases');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.complete_work('outbox', '{00000000-0000-7000-8000-00000000ac01}',
                                                ARRAY[pg_temp.relay_tok(1)], NULL, '1980-01-01 00:01:20+00')$$,
    $$VALUES ('completed')$$, 'relay grants: complete_work');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('outbox', '{00000000-0000-7000-8000-00000000ac02}', '{broker down}',
                                            ARRAY[pg_temp.relay_tok(2)], '{true}', NULL, '1980-01-01 00:01:20+00')$$,
    $$VALUES ('retry_scheduled')$$, 'relay grants: fail_work, retry');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.fail_work('outbox', '{00000000-0000-7000-8000-00000000ac03}', '{rejected}',
                                            ARRAY[pg_temp.relay_tok(3)], '{false}', NULL, '1980-01-01 00:01:20+00')$$,
    $$VALUES ('dead_lettered')$$, 'relay grants: fail_work, dead letter');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.release_work('outbox', '{00000000-0000-7000-8000-00000000ac04}',
                                               ARRAY[pg_temp.relay_tok(4)], NULL, '1980-01-01 00:01:20+00')$$,
    $$VALUES ('released')$$, 'relay grants: release_work');
SELECT is(whizbang.complete_outbox_published('{00000000-0000-7000-8000-00000000ac04}')::bigint, 1::bigint,
          'relay grants: complete_outbox_published of the released message');
SELECT results_eq(
    $$SELECT message_id, attempts FROM whizbang.claim_work('00000000-0000-4000-8000-00000000acad', 'outbox', 10, 60,
                                                         p_now => '1980-01-01 02:00:00+00')$$,
    $$VALUES ('00000000-0000-7000-8000-00000000ac02'::uuid, 2)$$,
    'relay grants: a later claim hands out the retried message, attempts 2');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
