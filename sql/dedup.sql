-- Inbox deduplication: the seed's own case and the outcomes of DESIGN §3.1.
SET client_min_messages = warning;

-- The seed's case: the same message id twice; the second call no-ops, one record exists.
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000001');
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000001');
SELECT message_id, observation_count, conflict_count
  FROM whizbang.wh_message_deduplication WHERE consumer = '';

-- A repeated id inside one batch is 'duplicate' after its first occurrence; output keeps
-- input order.
SELECT * FROM whizbang.dedup_insert_many(ARRAY[
  '0190a1b2-0000-7000-8000-000000000003',
  '0190a1b2-0000-7000-8000-000000000002',
  '0190a1b2-0000-7000-8000-000000000003',
  '0190a1b2-0000-7000-8000-000000000001']::uuid[]);

-- A changed payload under one id is a conflict, and is counted.
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000010', 'billing',
                             whizbang.fingerprint('{"amount": 10, "currency": "EUR"}'));
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000010', 'billing',
                             whizbang.fingerprint('{"currency": "EUR", "amount": 10.0}'));
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000010', 'billing',
                             whizbang.fingerprint('{"amount": 99, "currency": "EUR"}'));
-- Inside one batch too: the second element carries another payload.
SELECT * FROM whizbang.dedup_insert_many(
  ARRAY['0190a1b2-0000-7000-8000-000000000011', '0190a1b2-0000-7000-8000-000000000011']::uuid[],
  'billing', ARRAY['\x01', '\x02']::bytea[]);
SELECT message_id, observation_count, conflict_count
  FROM whizbang.wh_message_deduplication WHERE consumer = 'billing' ORDER BY message_id;

-- Consumers are separate scopes.
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000001', 'shipping');

-- A store makes the dedup generation of its p_now only up to one period ahead of the clock, and
-- none that would already have left the window (0.13.0): the generations of this file's
-- simulated day are made first, as an application simulating another time would.
SELECT count(*) > 0 AS generations_made FROM whizbang.perform_maintenance(p_now => '2026-03-01 00:00:00Z');
-- Older than the retention window (30 days): expired, and nothing is recorded ...
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000020', 'replay',
                             p_sent_at => '2026-01-01 00:00+00', p_now => '2026-03-01 00:00+00');
SELECT count(*) AS recorded FROM whizbang.wh_message_deduplication WHERE consumer = 'replay';
-- ... but an id still on record answers duplicate, whatever its p_sent_at.
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000021', 'replay', p_now => '2026-03-01 00:00+00');
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000021', 'replay',
                             p_sent_at => '2026-01-01 00:00+00', p_now => '2026-03-01 00:00+00');
-- Within the window a message is recorded normally.
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000022', 'replay',
                             p_sent_at => '2026-02-15 00:00+00', p_now => '2026-03-01 00:00+00');
-- replay_policy = accept records old messages instead.
UPDATE whizbang.wh_settings SET setting_value = 'accept' WHERE setting_key = 'replay_policy';
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000020', 'replay',
                             p_sent_at => '2026-01-01 00:00+00', p_now => '2026-03-01 00:00+00');
DELETE FROM whizbang.wh_settings WHERE setting_key = 'replay_policy';
SELECT message_id, observation_count FROM whizbang.wh_message_deduplication
 WHERE consumer = 'replay' ORDER BY message_id;

-- A rolled-back transaction leaves the message storable again.
BEGIN;
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000030', 'tx');
ROLLBACK;
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000030', 'tx');

-- Empty batch: no rows.
SELECT count(*) FROM whizbang.dedup_insert_many('{}'::uuid[]);

-- A redelivered batch that is mostly on record (the write path then looks before it
-- inserts): 30 known ids and 10 new ones, interleaved.
SELECT count(*) FROM whizbang.dedup_insert_many(
  (SELECT array_agg(md5('known' || i)::uuid) FROM generate_series(1, 30) i), 'bulk');
SELECT outcome, count(*) FROM whizbang.dedup_insert_many(
  (SELECT array_agg(CASE WHEN i % 4 = 0 THEN md5('fresh' || i) ELSE md5('known' || (i - i / 4)) END::uuid ORDER BY i)
     FROM generate_series(1, 40) i), 'bulk')
 GROUP BY outcome ORDER BY outcome;
SELECT observation_count, count(*) FROM whizbang.wh_message_deduplication
 WHERE consumer = 'bulk' GROUP BY observation_count ORDER BY observation_count;
