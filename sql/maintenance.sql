-- perform_maintenance (DESIGN §3.6): one row per task, in a fixed order, status ok; what is
-- purged and what is never purged. Everything here happens in January 2000 and maintenance
-- runs with p_now in 2000, so only this test's rows are old enough (the other tests use later
-- times, or leave nothing behind). Consumers 'maint_*', ids 2a000000-....
SET client_min_messages = warning;
\set SHOW_CONTEXT never

CREATE FUNCTION pg_temp.maintain(p_now timestamptz, p_batch_size int DEFAULT 10000)
  RETURNS TABLE(pos bigint, task_name text, rows_affected bigint, status text) LANGUAGE sql AS $$
  SELECT m.ordinality, m.task_name, m.rows_affected, m.status
    FROM whizbang.perform_maintenance(p_now, p_batch_size) WITH ORDINALITY m $$;

-- A store makes the dedup generation of its p_now only up to one period ahead of the clock, and
-- none that would already have left the window (0.13.0): the generations of this file's
-- simulated day are made first, as an application simulating another time would.
SELECT count(*) > 0 AS generations_made FROM whizbang.perform_maintenance(p_now => '2000-01-01 00:00:00Z');
-- Three dedup records of 2000-01-01 with nothing else attached.
SELECT * FROM whizbang.dedup_insert_many('{2a000000-0000-7000-8000-000000000001,2a000000-0000-7000-8000-000000000002,
                                          2a000000-0000-7000-8000-000000000003}', 'maint_dedup',
                                         p_now => '2000-01-01 00:00:00Z') ORDER BY message_id;
-- Four inbox messages of 2000-01-01: one completed, one still pending, one dead-lettered,
-- one completed in debug_mode (kept, marked processed).
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "2a000000-0000-7000-8000-0000000000c1", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": "completed"}},
  {"MessageId": "2a000000-0000-7000-8000-0000000000c2", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": "pending"}},
  {"MessageId": "2a000000-0000-7000-8000-0000000000c3", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": "dead"}},
  {"MessageId": "2a000000-0000-7000-8000-0000000000c4", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": "debug"}}
]', p_now => '2000-01-01 00:00:00Z', p_consumer => 'maint_inbox');
SELECT * FROM whizbang.complete_work('inbox', '{2a000000-0000-7000-8000-0000000000c1}', NULL, 'maint_inbox',
                                     '2000-01-01 00:00:00Z');
SELECT message_id, outcome FROM whizbang.fail_work('inbox', '{2a000000-0000-7000-8000-0000000000c3}', '{"bad"}', NULL,
                                                   '{false}', 'maint_inbox', '2000-01-01 00:00:00Z');
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('debug_mode', 'true');
SELECT * FROM whizbang.complete_work('inbox', '{2a000000-0000-7000-8000-0000000000c4}', NULL, 'maint_inbox',
                                     '2000-01-01 00:00:00Z');
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('debug_mode', 'false');
-- Idempotency keys of 2000-01-01: one completed with a result TTL of 1 day (tombstone 30
-- days), one left in progress.
SELECT outcome FROM whizbang.idempotency_begin('maint_scope', 'done', p_now => '2000-01-01 00:00:00Z');
SELECT whizbang.idempotency_complete('maint_scope', 'done',
    (SELECT token FROM whizbang.wh_idempotency_keys WHERE scope = 'maint_scope' AND idempotency_key = 'done'),
    '{"ok": true}', '1 day', '2000-01-01 00:00:00Z');
SELECT outcome FROM whizbang.idempotency_begin('maint_scope', 'running', p_now => '2000-01-01 00:00:00Z');

-- 2000-01-15: nothing is past the 30-day windows yet; the completed key's result (1 day) is
-- purged, the key stays as a tombstone and answers expired_duplicate.
SELECT * FROM pg_temp.maintain('2000-01-15 00:00:00Z') ORDER BY pos;
SELECT idempotency_key, state, result FROM whizbang.wh_idempotency_keys WHERE scope = 'maint_scope' ORDER BY idempotency_key;
SELECT outcome, result FROM whizbang.idempotency_begin('maint_scope', 'done', p_now => '2000-01-15 00:00:00Z');

-- 2000-03-01, in batches of one row: the tombstone; the dead letter; the debug_mode leftover;
-- then (the dedup purge runs last) the three plain dedup records, the completed message's
-- record and those of the dead letter and the debug_mode message, gone just before.
SELECT * FROM pg_temp.maintain('2000-03-01 00:00:00Z', 1) ORDER BY pos;
-- The pending message's record was still needed when its generation was dropped: it moved
-- forward, into the generation that stays (docs/operations.md), and never leaves while the
-- message waits.
SELECT * FROM pg_temp.maintain('2000-03-01 00:00:00Z') ORDER BY pos;
SELECT * FROM pg_temp.maintain('2000-03-01 00:00:00Z') ORDER BY pos;
SELECT consumer, message_id FROM whizbang.wh_message_deduplication WHERE consumer LIKE 'maint\_%' ORDER BY message_id;
-- The pending message is still work, and a redelivery of it is still a duplicate.
SELECT message_id, envelope FROM whizbang.claim_work('2a000000-aaaa-4000-8000-000000000001', 'inbox',
                                                      p_now => '2000-03-01 00:00:00Z', p_consumer => 'maint_inbox');
SELECT outcome FROM whizbang.inbox_receive('[{"MessageId": "2a000000-0000-7000-8000-0000000000c2", "HandlerName": "h",
                                              "MessageType": "T", "Envelope": {"n": "pending"}}]',
                                           'maint_inbox', '2000-03-01 00:00:00Z');
-- The in-progress key is never purged; the completed one is gone, tombstone and all.
SELECT idempotency_key, state FROM whizbang.wh_idempotency_keys WHERE scope = 'maint_scope' ORDER BY idempotency_key;
SELECT count(*) AS dead_letters FROM whizbang.wh_dead_letters WHERE consumer = 'maint_inbox';
SELECT count(*) AS inbox_rows FROM whizbang.wh_inbox WHERE consumer = 'maint_inbox';

-- Bad arguments.
SELECT * FROM whizbang.perform_maintenance('2000-03-01 00:00:00Z', 0);
\echo :SQLSTATE
SELECT * FROM whizbang.perform_maintenance(NULL);
\echo :SQLSTATE
SELECT * FROM whizbang.perform_maintenance('infinity');
\echo :SQLSTATE
-- run_maintenance commits after every batch, so it cannot run inside a transaction block.
BEGIN;
CALL whizbang.run_maintenance('2000-03-01 00:00:00Z');
\echo :SQLSTATE
ROLLBACK;
