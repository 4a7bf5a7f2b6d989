-- Retention and maintenance (DESIGN §3.6) and stats (§3.7): perform_maintenance's four tasks,
-- what no purge may remove (a waiting message's dedup record, pending work), batches, the
-- replay horizon of the inbox under both replay policies, and every stats() metric.
--
-- Time is simulated: rows are recorded at T0 = 2030-01-01 00:00:00 UTC and maintenance runs at
-- T0 + 31 days (past the default 30-day windows) unless said otherwise.
BEGIN;
SELECT plan(71);

-- Stores in the simulated time of 2030 find their generations made by maintenance then (0.13.0: a
-- store makes none further ahead than now() plus one period).
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2030-01-01 00:00:00+00'); END $$;
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2030-01-21 00:00:00+00'); END $$;

SET LOCAL TimeZone = 'UTC';

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('0d000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.sid(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('5d000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.msg(p_n int, p_extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('MessageId', pg_temp.id(p_n), 'HandlerName', 'h', 'MessageType', 't',
                              'Envelope', jsonb_build_object('n', p_n)) || p_extra
$$;
CREATE FUNCTION pg_temp.run(p_now timestamptz DEFAULT '2030-02-01 00:00:00+00', p_batch int DEFAULT 10000)
RETURNS TABLE (task_name text, rows_affected bigint, status text) LANGUAGE sql AS $$
    SELECT task_name, rows_affected, status FROM whizbang.perform_maintenance(p_now, p_batch)
$$;
CREATE FUNCTION pg_temp.metric(p_name text) RETURNS bigint
LANGUAGE sql AS $$ SELECT value FROM whizbang.stats() WHERE metric = p_name $$;

-- ---------------------------------------------------------------------------------------
-- Shape and bad input
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT task_name, rows_affected, status, duration_ms >= 0 FROM whizbang.perform_maintenance()$$,
    $$VALUES ('purge_old_deduplication', 0::bigint, 'ok', true), ('purge_expired_idempotency', 0, 'ok', true),
             ('purge_dead_letters', 0, 'ok', true), ('purge_processed', 0, 'ok', true)$$,
    'perform_maintenance: one row per task, in a fixed order, ok with nothing to do');
SELECT throws_ok($$SELECT * FROM whizbang.perform_maintenance(NULL)$$, '22004', NULL, 'NULL p_now (22004)');
SELECT throws_ok($$SELECT * FROM whizbang.perform_maintenance(now(), 0)$$, '22023', NULL, 'p_batch_size 0 (22023)');
SELECT throws_ok($$SELECT * FROM whizbang.perform_maintenance(now(), NULL)$$, '22004', NULL, 'NULL p_batch_size (22004)');

-- ---------------------------------------------------------------------------------------
-- purge_old_deduplication, and what it must keep
-- ---------------------------------------------------------------------------------------

-- Dead letters are kept 60 days here, so that only dedup retention acts in this section.
INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type) VALUES ('dead_letter_retention_days', '60', 'integer');
-- 250 plain dedup records at T0, 5 at T0 + 20 days.
SELECT is((SELECT count(*) FROM whizbang.dedup_insert_many(ARRAY(SELECT pg_temp.id(1000 + i) FROM generate_series(1, 250) i),
                                                          'plain', NULL, NULL, '2030-01-01 00:00:00+00')), 250::bigint,
          'setup: 250 old dedup records');
SELECT is((SELECT count(*) FROM whizbang.dedup_insert_many(ARRAY(SELECT pg_temp.id(2000 + i) FROM generate_series(1, 5) i),
                                                          'plain', NULL, NULL, '2030-01-21 00:00:00+00')), 5::bigint,
          'setup: 5 recent dedup records');
-- A message stored at T0 and still unprocessed (its work waits), one dead-lettered at T0.
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1), pg_temp.msg(2)),
                                                             NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'stuck')),
          2::bigint, 'setup: two inbox messages at T0');
SELECT is((SELECT outcome FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(2)], ARRAY['bad'], NULL, ARRAY[false], 'stuck',
                                                  '2030-01-01 00:00:01+00')), 'dead_lettered', 'setup: message 2 dead-lettered');

SELECT results_eq($$SELECT task_name, rows_affected, status FROM pg_temp.run('2030-01-30 23:59:59+00') WHERE task_name = 'purge_old_deduplication'$$,
                  $$VALUES ('purge_old_deduplication', 0::bigint, 'ok')$$, 'dedup: nothing is purged inside the window');
SELECT results_eq($$SELECT rows_affected FROM pg_temp.run(p_batch => 7) WHERE task_name = 'purge_old_deduplication'$$,
                  $$VALUES (250::bigint)$$, 'dedup: records older than dedup_retention_days are purged (in batches of 7)');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'plain'), 5::bigint,
          'dedup: the recent records are kept');
SELECT results_eq($$SELECT consumer::text COLLATE "default", message_id FROM whizbang.wh_message_deduplication WHERE consumer = 'stuck' ORDER BY message_id$$,
                  $$VALUES ('stuck', pg_temp.id(1)), ('stuck', pg_temp.id(2))$$,
                  'no loss: the records of a waiting message and of a dead-lettered one are kept past the window');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1), pg_temp.msg(2)),
                                                             NULL, NULL, '2030-02-01 00:00:00+00', 10000, 'stuck')),
          0::bigint, 'no loss: their redeliveries are still rejected (nothing stored)');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'stuck'), 1::bigint,
          'no loss: the pending work was not touched');
SELECT is((SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(1)], NULL, 'stuck')), 'completed',
          'message 1 is processed at last');
-- Their generation was dropped whole: the two records moved forward first, into the oldest
-- generation that stays (T0 + 1 day, made ahead by the maintenance at T0), and now leave with it
-- (docs/operations.md).
SELECT results_eq($$SELECT first_seen_at FROM whizbang.wh_message_deduplication WHERE consumer = 'stuck'$$,
                  $$VALUES ('2030-01-02 00:00:00+00'::timestamptz), ('2030-01-02 00:00:00+00')$$,
                  'dedup: the kept records moved forward to the start of the oldest generation that stays');
SELECT results_eq($$SELECT rows_affected FROM pg_temp.run() WHERE task_name = 'purge_old_deduplication'$$,
                  $$VALUES (0::bigint)$$, 'dedup: once processed, its record stays with that generation');

-- ---------------------------------------------------------------------------------------
-- purge_dead_letters
-- ---------------------------------------------------------------------------------------

SELECT results_eq($$SELECT rows_affected FROM pg_temp.run('2030-01-30 00:00:00+00') WHERE task_name = 'purge_dead_letters'$$,
                  $$VALUES (0::bigint)$$, 'dead letters: kept inside dead_letter_retention_days (60)');
UPDATE whizbang.wh_settings SET setting_value = '7' WHERE setting_key = 'dead_letter_retention_days';
SELECT results_eq($$SELECT rows_affected FROM pg_temp.run('2030-01-09 00:00:00+00') WHERE task_name = 'purge_dead_letters'$$,
                  $$VALUES (1::bigint)$$, 'dead letters: purged past dead_letter_retention_days (7)');
SELECT is((SELECT count(*) FROM whizbang.wh_dead_letters), 0::bigint, 'dead letters: gone');
SELECT results_eq($$SELECT rows_affected FROM pg_temp.run('2030-02-21 00:00:00+00') WHERE task_name = 'purge_old_deduplication'$$,
                  $$VALUES (7::bigint)$$,
                  'dedup: the generation they moved to leaves the window with its 5 records, the processed message''s and the purged dead letter''s');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'stuck'), 0::bigint,
          'dedup: a purged dead letter no longer keeps its record');
DELETE FROM whizbang.wh_settings WHERE setting_key = 'dead_letter_retention_days';

-- ---------------------------------------------------------------------------------------
-- purge_expired_idempotency
-- ---------------------------------------------------------------------------------------

-- k1: a result with the default TTL (1 day); k2: a result with a 40-day TTL; k3: in progress.
SELECT is((SELECT outcome FROM whizbang.idempotency_begin('pay', 'k1', p_now => '2030-01-01 00:00:00+00')), 'claimed', 'setup: k1');
SELECT is((SELECT whizbang.idempotency_complete('pay', 'k1',
             (SELECT token FROM whizbang.wh_idempotency_keys WHERE idempotency_key = 'k1'), '{"ok": 1}',
             p_now => '2030-01-01 00:00:01+00')), 'completed', 'setup: k1 completed');
SELECT is((SELECT outcome FROM whizbang.idempotency_begin('pay', 'k2', p_now => '2030-01-01 00:00:00+00')), 'claimed', 'setup: k2');
SELECT is((SELECT whizbang.idempotency_complete('pay', 'k2',
             (SELECT token FROM whizbang.wh_idempotency_keys WHERE idempotency_key = 'k2'), '{"ok": 2}',
             p_result_ttl => interval '20 days', p_now => '2030-01-01 00:00:01+00')), 'completed', 'setup: k2 completed');
SELECT is((SELECT outcome FROM whizbang.idempotency_begin('pay', 'k3', p_now => '2030-01-01 00:00:00+00')), 'claimed', 'setup: k3');
SELECT results_eq($$SELECT metric, value FROM whizbang.stats WHERE metric LIKE 'idempotency%' ORDER BY metric$$,
                  $$VALUES ('idempotency_completed', 2::bigint), ('idempotency_in_progress', 1), ('idempotency_tombstones', 0)$$,
                  'stats: idempotency keys by state (now is before every expiry)');
SELECT results_eq($$SELECT rows_affected FROM pg_temp.run('2030-01-03 00:00:00+00') WHERE task_name = 'purge_expired_idempotency'$$,
                  $$VALUES (1::bigint)$$, 'idempotency: a result past its TTL becomes a tombstone');
SELECT results_eq($$SELECT idempotency_key::text COLLATE "default", result IS NULL FROM whizbang.wh_idempotency_keys ORDER BY 1$$,
                  $$VALUES ('k1', true), ('k2', false), ('k3', true)$$,
                  'idempotency: k1''s result is purged, the key kept; k2 keeps its result; k3 is untouched');
SELECT is((SELECT outcome FROM whizbang.idempotency_begin('pay', 'k1', p_now => '2030-01-03 00:00:00+00')), 'expired_duplicate',
          'idempotency: the tombstone still answers expired_duplicate');
SELECT results_eq($$SELECT rows_affected FROM pg_temp.run('2030-02-01 00:00:02+00') WHERE task_name = 'purge_expired_idempotency'$$,
                  $$VALUES (2::bigint)$$, 'idempotency: k1''s tombstone, past idempotency_tombstone_days, is deleted; k2''s result expired');
SELECT results_eq($$SELECT idempotency_key::text COLLATE "default" FROM whizbang.wh_idempotency_keys ORDER BY 1$$,
                  $$VALUES ('k2'), ('k3')$$, 'idempotency: k1 is forgotten; k2 (a tombstone now) and k3 (in progress) stay');
SELECT results_eq($$SELECT rows_affected FROM pg_temp.run('2030-03-15 00:00:00+00', 1) WHERE task_name = 'purge_expired_idempotency'$$,
                  $$VALUES (1::bigint)$$, 'idempotency: later k2''s tombstone is deleted (batch 1)');

-- ---------------------------------------------------------------------------------------
-- purge_processed (debug_mode leftovers), pre-lease entries and stream counters
-- ---------------------------------------------------------------------------------------

-- The generation of T0 again (the runs above at later times dropped it).
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2030-01-01 00:00:00+00'); END $$;
UPDATE whizbang.wh_settings SET setting_value = 'true' WHERE setting_key = 'debug_mode';
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(
              pg_temp.msg(10, jsonb_build_object('StreamId', pg_temp.sid(1))), pg_temp.msg(11, jsonb_build_object('StreamId', pg_temp.sid(1)))),
              NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'dbg')), 2::bigint, 'setup: two messages of stream 1');
SELECT is((SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(10)], NULL, 'dbg', '2030-01-01 00:00:05+00')
            WHERE outcome = 'completed'), 1::bigint, 'setup: message 10 completed in debug mode (kept, marked)');
SELECT is((SELECT count(*) FROM whizbang.store_outbox_messages(jsonb_build_array(jsonb_build_object(
              'MessageId', pg_temp.id(12), 'Destination', 'd', 'MessageType', 't', 'Envelope', '{}'::jsonb)),
              NULL, NULL, '2030-01-01 00:00:00+00') WHERE was_newly_created), 1::bigint, 'setup: an outbox message');
SELECT is((SELECT outcome FROM whizbang.complete_work('outbox', ARRAY[pg_temp.id(12)], NULL, p_now => '2030-01-01 00:00:05+00')),
          'completed', 'setup: published in debug mode (kept, marked)');
UPDATE whizbang.wh_settings SET setting_value = 'false' WHERE setting_key = 'debug_mode';
SELECT results_eq($$SELECT rows_affected FROM pg_temp.run('2030-01-30 00:00:00+00') WHERE task_name = 'purge_processed'$$,
                  $$VALUES (0::bigint)$$, 'processed: kept inside the dedup window');
SELECT results_eq($$SELECT rows_affected FROM pg_temp.run() WHERE task_name = 'purge_processed'$$,
                  $$VALUES (2::bigint)$$, 'processed: debug-mode leftovers of both sources go past the window');
SELECT results_eq(
    $$SELECT (SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'dbg'), (SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'dbg'),
             (SELECT count(*) FROM whizbang.wh_outbox), (SELECT count(*) FROM whizbang.wh_outbox)$$,
    $$VALUES (1::bigint, 1::bigint, 0::bigint, 0::bigint)$$,
    'processed: the marked rows and their messages are gone; the pending message 11 stays');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox_streams WHERE consumer = 'dbg'), 1::bigint,
          'stream counters: the counter of a stream with pending work stays');
SELECT is((SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(11)], NULL, 'dbg')), 'completed', 'message 11 completed');
SELECT lives_ok($$SELECT * FROM pg_temp.run()$$, 'maintenance runs');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox_streams WHERE consumer = 'dbg'), 0::bigint,
          'stream counters: the counter of an idle stream is purged');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(
             jsonb_build_array(pg_temp.msg(13, jsonb_build_object('StreamId', pg_temp.sid(1)))), NULL, NULL,
             '2030-02-01 00:00:00+00', 10000, 'dbg')), 1::bigint, 'a new message of stream 1');
SELECT results_eq($$SELECT stream_id, stream_seq FROM whizbang.wh_inbox WHERE consumer = 'dbg' AND message_id = pg_temp.id(13)$$,
                  $$VALUES (pg_temp.sid(1), 1::bigint)$$, 'stream counters: the stream starts again at 1');
-- A pre-lease entry whose row another instance took after the lease lapsed, and whose row then completed.
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2030-01-01 00:00:00+00'); END $$;  -- T0's generation again
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(14)),
              'c0000000-0000-4000-8000-000000000001', '2030-01-01 00:01:00+00', '2030-01-01 00:00:00+00', 10000, 'pre')),
          1::bigint, 'setup: a message stored pre-leased');
SELECT is((SELECT count(*) FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000002', 'inbox', p_now => '2030-01-01 00:02:00+00',
                                                   p_consumer => 'pre')), 1::bigint, 'setup: another instance takes it after the lease');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox_preleased), 1::bigint, 'setup: the stale pre-lease entry is still there');
SELECT lives_ok($$SELECT * FROM pg_temp.run()$$, 'maintenance runs');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox_preleased), 0::bigint, 'pre-lease: the stale entry is purged');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'pre'), 1::bigint, 'pre-lease: the work itself stays');

-- ---------------------------------------------------------------------------------------
-- Replay horizon (store_inbox_messages and inbox_receive; dedup_insert is in dedup_behaviour)
-- ---------------------------------------------------------------------------------------

DO $$ BEGIN PERFORM whizbang.perform_maintenance('2030-01-01 00:00:00+00'); END $$;  -- T0's generation again
SELECT is_empty($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(20, '{"SentAt": "2029-12-01 00:00:00+00"}')),
                                                              NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'replay')$$,
                'replay reject: a message sent before the window is not stored');
SELECT results_eq($$SELECT outcome FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(20, '{"SentAt": "2029-12-01 00:00:00+00"}')),
                                                              'replay', '2030-01-01 00:00:00+00')$$,
                  $$VALUES ('expired')$$, 'replay reject: inbox_receive says expired');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'replay'), 0::bigint,
          'replay reject: nothing recorded');
UPDATE whizbang.wh_settings SET setting_value = 'accept' WHERE setting_key = 'replay_policy';
SELECT results_eq($$SELECT was_newly_created FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(20, '{"SentAt": "2029-12-01 00:00:00+00"}')),
                                                              NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'replay')$$,
                  $$VALUES (true)$$, 'replay accept: the old message is stored normally');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'replay'), 1::bigint, 'replay accept: as work');
UPDATE whizbang.wh_settings SET setting_value = 'reject' WHERE setting_key = 'replay_policy';

-- ---------------------------------------------------------------------------------------
-- stats(): work metrics of both sources and the dedup metrics
-- ---------------------------------------------------------------------------------------

DELETE FROM whizbang.wh_inbox; DELETE FROM whizbang.wh_inbox; DELETE FROM whizbang.wh_message_deduplication;
DELETE FROM whizbang.wh_outbox; DELETE FROM whizbang.wh_outbox; DELETE FROM whizbang.wh_dead_letters;
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(30), pg_temp.msg(31), pg_temp.msg(32),
              pg_temp.msg(33, jsonb_build_object('ScheduledFor', now() + interval '1 hour')), pg_temp.msg(34)),
              NULL, NULL, now() - interval '90 seconds', 10000, 's')), 5::bigint, 'setup: five inbox messages, one scheduled');
SELECT is((SELECT count(*) FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000003', 'inbox', 1, p_consumer => 's')), 1::bigint,
          'setup: one leased');
SELECT is((SELECT outcome FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(34)], ARRAY['x'], NULL, ARRAY[false], 's')),
          'dead_lettered', 'setup: one dead-lettered');
SELECT is((SELECT count(*) FROM whizbang.dedup_insert_many(ARRAY[pg_temp.id(30), pg_temp.id(30), pg_temp.id(31)], 's',
                                                          ARRAY['\x01', '\x01', '\x02']::bytea[])), 3::bigint,
          'setup: redeliveries: two duplicates (one inside the batch) ... ');
SELECT is(whizbang.dedup_insert(pg_temp.id(40), 's', '\x01'), 'new', 'setup: a dedup record with a fingerprint ...');
SELECT is(whizbang.dedup_insert(pg_temp.id(40), 's', '\x02'), 'conflict', '... and a conflicting redelivery');
SELECT results_eq(
    $$SELECT metric, value FROM whizbang.stats WHERE (metric LIKE 'inbox%' OR metric LIKE 'dedup%')
        AND metric NOT LIKE 'dedup%generation%' ORDER BY metric$$,
    $$VALUES ('dedup_conflicts_observed', 1::bigint), ('dedup_duplicates_observed', 3), ('dedup_rows', 6),
             ('inbox_dead_lettered', 1), ('inbox_leased', 1), ('inbox_oldest_pending_seconds', 90), ('inbox_pending', 2),
             ('inbox_scheduled', 1)$$,
    'stats: inbox pending / leased / scheduled / dead-lettered, the oldest pending age, dedup rows and observations');

SELECT is((SELECT count(*) FROM whizbang.store_outbox_messages(jsonb_build_array(
              jsonb_build_object('MessageId', pg_temp.id(61), 'Destination', 'd', 'MessageType', 't', 'Envelope', '{}'::jsonb),
              jsonb_build_object('MessageId', pg_temp.id(62), 'Destination', 'd', 'MessageType', 't', 'Envelope', '{}'::jsonb),
              jsonb_build_object('MessageId', pg_temp.id(63), 'Destination', 'd', 'MessageType', 't', 'Envelope', '{}'::jsonb,
                                 'ScheduledFor', now() + interval '1 hour')),
              NULL, NULL, now() - interval '60 seconds')), 3::bigint, 'setup: three outbox messages, one scheduled');
SELECT is((SELECT count(*) FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000004', 'outbox', 1)), 1::bigint,
          'setup: one leased');
SELECT results_eq(
    $$SELECT metric, value FROM whizbang.stats WHERE metric LIKE 'outbox%' ORDER BY metric$$,
    $$VALUES ('outbox_dead_lettered', 0::bigint), ('outbox_leased', 1), ('outbox_oldest_pending_seconds', 60),
             ('outbox_pending', 1), ('outbox_scheduled', 1)$$,
    'stats: the outbox''s pending / leased / scheduled / dead-lettered and the oldest pending age');
SELECT is((SELECT count(*) FROM whizbang.stats), (SELECT count(*) FROM whizbang.stats()),
          'stats: the view and the function agree');

-- run_maintenance's part on a node of a distributed install: refused elsewhere, nothing purged.
SELECT throws_ok($$SELECT * FROM whizbang._maintenance_batch('2100-01-01 00:00:00+00', 10, NULL)$$, '0A000',
                 'whizbang._maintenance_batch() is run_maintenance''s part on a node of a distributed install',
                 '_maintenance_batch outside a routed call: 0A000');
SELECT ok(NOT has_function_privilege('public', 'whizbang._maintenance_batch(timestamptz, integer, bigint[])', 'EXECUTE'),
          '_maintenance_batch: not executable by PUBLIC');

SELECT * FROM finish();
ROLLBACK;
