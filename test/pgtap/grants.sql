-- One call grants a capability (0.11.0, docs/security.md, docs/reference.md "grant_worker,
-- grant_admin"), and whizbang.check() on a single server. A role granted one capability with
-- grant_worker runs that capability's calls and is refused the others' (42501); bad arguments
-- are refused with their SQLSTATE and grant nothing; a role that is not allowed to grant cannot
-- use them; check() answers its single-server items and reports a routing privilege.
--
-- Roles are created inside the test transaction and disappear with its ROLLBACK.
BEGIN;
SELECT plan(24);

CREATE ROLE wb_g_inbox NOLOGIN;
CREATE ROLE wb_g_relay NOLOGIN;
CREATE ROLE wb_g_idem NOLOGIN;
CREATE ROLE wb_g_ops NOLOGIN;
CREATE ROLE wb_g_none NOLOGIN;

-- ---- bad arguments: an error, and nothing granted
SELECT throws_ok($$SELECT whizbang.grant_worker(NULL)$$, '22004', NULL, 'grant_worker: a NULL role is 22004');
SELECT throws_ok($$SELECT whizbang.grant_worker('wb_g_none', NULL)$$, '22004', NULL, 'grant_worker: NULL capabilities are 22004');
SELECT throws_ok($$SELECT whizbang.grant_worker('wb_g_none', ARRAY[]::text[])$$, '22004', NULL,
                 'grant_worker: no capability is 22004');
SELECT throws_ok($$SELECT whizbang.grant_worker('wb_g_none', ARRAY['inbox', 'bogus'])$$, '22023',
                 'unknown capability bogus', 'grant_worker: an unknown capability is 22023, named');
SELECT throws_ok($$SELECT whizbang.grant_worker('wb_g_none', ARRAY['inbox', NULL])$$, '22023', NULL,
                 'grant_worker: a NULL capability is 22023');
SELECT throws_ok($$SELECT whizbang.grant_admin('wb_g_none', ARRAY['inbox'])$$, '22023', NULL,
                 'grant_admin: a worker capability is not an admin one (22023)');
SELECT throws_ok($$SELECT whizbang.grant_worker('no_such_role_here')$$, '42704', NULL,
                 'grant_worker: an unknown role is 42704');
SELECT ok(NOT has_schema_privilege('wb_g_none', 'whizbang', 'USAGE')
          AND NOT has_function_privilege('wb_g_none', 'whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text, interval)', 'EXECUTE'),
          'after the refused calls the role holds nothing');

-- ---- the grants, returned
SELECT cmp_ok((SELECT count(*) FROM whizbang.grant_worker('wb_g_inbox', ARRAY['inbox'])), '>=', 16::bigint,
              'grant_worker(inbox) returns the statements it ran');
SELECT is((SELECT count(*) FROM whizbang.grant_worker('wb_g_inbox', ARRAY['inbox'])),
          (SELECT count(*) FROM whizbang.grant_worker('wb_g_inbox', ARRAY['inbox'])),
          'granting twice is harmless');
SELECT ok((SELECT count(*) FROM whizbang.grant_worker('wb_g_relay', ARRAY['relay'])) > 0, 'grant_worker(relay)');
SELECT ok((SELECT count(*) FROM whizbang.grant_worker('wb_g_idem', ARRAY['idempotency'])) > 0, 'grant_worker(idempotency)');
SELECT ok((SELECT count(*) FROM whizbang.grant_admin('wb_g_ops')) > 0, 'grant_admin: every operator capability');
SELECT ok(has_table_privilege('wb_g_ops', 'whizbang.wh_settings', 'UPDATE')
          AND has_function_privilege('wb_g_ops', 'whizbang.stats()', 'EXECUTE')
          AND has_function_privilege('wb_g_ops', 'whizbang.check()', 'EXECUTE'),
          'grant_admin: settings, stats and check');
SELECT ok(NOT has_table_privilege('wb_g_inbox', 'whizbang.wh_outbox', 'INSERT')
          AND NOT has_table_privilege('wb_g_relay', 'whizbang.wh_inbox', 'INSERT')
          AND NOT has_table_privilege('wb_g_inbox', 'whizbang.wh_partitions', 'DELETE'),
          'no capability grants another one''s tables, or the routing rows');

-- ---- each role runs its calls, and not the others'
SET ROLE wb_g_inbox;
SELECT is((SELECT count(*) FROM whizbang.inbox_receive('[{"MessageId": "0c0c0c0c-0000-4000-8000-000000000001",
    "HandlerName": "h", "MessageType": "t", "Envelope": {}}]'::jsonb, 'g') WHERE outcome = 'new'), 1::bigint,
    'inbox: inbox_receive stores');
SELECT is((SELECT count(*) FROM whizbang.complete_work('inbox',
              ARRAY(SELECT message_id FROM whizbang.claim_work('0c0c0c0c-0000-4000-8000-0000000000aa', 'inbox', p_consumer => 'g')),
              NULL, 'g') WHERE outcome = 'completed'), 1::bigint,
          'inbox: claims and completes');
SELECT throws_ok($$SELECT whizbang.store_outbox_messages('[]'::jsonb)$$, '42501', NULL, 'inbox: may not store outbox messages');
RESET ROLE;
SET ROLE wb_g_relay;
SELECT throws_ok($$SELECT whizbang.inbox_receive('[]'::jsonb)$$, '42501', NULL, 'relay: may not receive inbox messages');
SELECT is((SELECT count(*) FROM whizbang.claim_work('0c0c0c0c-0000-4000-8000-0000000000ab', 'outbox')), 0::bigint,
          'relay: claims the outbox');
RESET ROLE;
SET ROLE wb_g_idem;
SELECT is((SELECT outcome FROM whizbang.idempotency_begin('g', 'k')), 'claimed', 'idempotency: begins a key');
RESET ROLE;

-- ---- only a role that may grant can use them
SET ROLE wb_g_none;
SELECT throws_ok($$SELECT whizbang.grant_worker('wb_g_none')$$, '42501', NULL, 'a role without grants may not call grant_worker');
RESET ROLE;

-- ---- check() on a single server
SELECT results_eq($$SELECT item, ok FROM whizbang.check()$$,
                  $$VALUES ('distributed', true), ('routing privileges', true)$$,
                  'check(): a single server, nobody holds routing privileges');
GRANT DELETE ON whizbang.wh_partitions TO wb_g_inbox;
SELECT ok((SELECT NOT ok AND detail LIKE '%wb_g_inbox on wh_partitions: DELETE%' FROM whizbang.check()
            WHERE item = 'routing privileges'), 'check(): a role with DELETE on wh_partitions is reported');

SELECT * FROM finish();
ROLLBACK;
