-- stats() and the view whizbang.stats (DESIGN §3.7) after known actions. stats() counts the
-- whole database against now(), so this test shows how each metric moved (after − before),
-- with rows due in 2020 (pending now), leased or scheduled into 2999 (still so now).
-- Consumers 'stats_*', ids 2c000000-....
SET client_min_messages = warning;
\set SHOW_CONTEXT never

CREATE TEMP TABLE before AS SELECT metric, value FROM whizbang.stats();

-- A store makes the dedup generation of its p_now only up to one period ahead of the clock, and
-- none that would already have left the window (0.13.0): the generations of this file's
-- simulated day are made first, as an application simulating another time would.
SELECT count(*) > 0 AS generations_made FROM whizbang.perform_maintenance(p_now => '2020-01-01 00:00:00Z');
-- Inbox: five messages due in 2020, one scheduled for 2999; one dead-lettered, one leased
-- until 2999 → pending 3, leased 1, scheduled 1, dead-lettered 1.
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "2c000000-0000-7000-8000-000000000001", "HandlerName": "h", "MessageType": "T", "Envelope": {}},
  {"MessageId": "2c000000-0000-7000-8000-000000000002", "HandlerName": "h", "MessageType": "T", "Envelope": {}},
  {"MessageId": "2c000000-0000-7000-8000-000000000003", "HandlerName": "h", "MessageType": "T", "Envelope": {}},
  {"MessageId": "2c000000-0000-7000-8000-000000000004", "HandlerName": "h", "MessageType": "T", "Envelope": {}},
  {"MessageId": "2c000000-0000-7000-8000-000000000005", "HandlerName": "h", "MessageType": "T", "Envelope": {}},
  {"MessageId": "2c000000-0000-7000-8000-000000000006", "HandlerName": "h", "MessageType": "T", "Envelope": {},
   "ScheduledFor": "2999-06-01 00:00:00Z"}
]', p_now => '2020-01-01 00:00:00Z', p_consumer => 'stats_in');
SELECT message_id, outcome FROM whizbang.fail_work('inbox', '{2c000000-0000-7000-8000-000000000005}', '{"bad"}', NULL,
                                                   '{false}', 'stats_in', '2020-01-01 00:00:00Z');
SELECT count(*) AS claimed FROM whizbang.claim_work('2c000000-aaaa-4000-8000-000000000001', 'inbox', 1,
                                                    p_now => '2999-01-01 00:00:00Z', p_consumer => 'stats_in');
-- Dedup: six records above, plus one by inbox_receive; two redeliveries, one conflict.
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "2c000000-0000-7000-8000-000000000001", "HandlerName": "h", "MessageType": "T", "Envelope": {}},
  {"MessageId": "2c000000-0000-7000-8000-000000000002", "HandlerName": "h", "MessageType": "T", "Envelope": {}}
]', p_now => '2020-01-01 00:00:00Z', p_consumer => 'stats_in');
SELECT outcome FROM whizbang.inbox_receive('[
  {"MessageId": "2c000000-0000-7000-8000-000000000010", "HandlerName": "h", "MessageType": "T", "Envelope": {"v": 1}}
]', 'stats_recv', '2020-01-01 00:00:00Z');
SELECT outcome FROM whizbang.inbox_receive('[
  {"MessageId": "2c000000-0000-7000-8000-000000000010", "HandlerName": "h", "MessageType": "T", "Envelope": {"v": 2}}
]', 'stats_recv', '2020-01-01 00:00:00Z');
SELECT * FROM whizbang.complete_work('inbox', '{2c000000-0000-7000-8000-000000000010}', NULL, 'stats_recv',
                                     '2020-01-01 00:00:00Z');

-- Outbox: two due, one stored pre-leased until 2999, one scheduled for 2999, one
-- dead-lettered → pending 2, leased 1, scheduled 1, dead-lettered 1.
SELECT count(*) AS stored FROM whizbang.store_outbox_messages('[
  {"MessageId": "2c000000-0000-7000-8000-000000000021", "Destination": "d", "MessageType": "T", "Envelope": {}},
  {"MessageId": "2c000000-0000-7000-8000-000000000022", "Destination": "d", "MessageType": "T", "Envelope": {}},
  {"MessageId": "2c000000-0000-7000-8000-000000000023", "Destination": "d", "MessageType": "T", "Envelope": {},
   "ScheduledFor": "2999-06-01 00:00:00Z"},
  {"MessageId": "2c000000-0000-7000-8000-000000000024", "Destination": "d", "MessageType": "T", "Envelope": {}}
]', p_now => '2020-01-01 00:00:00Z');
SELECT message_id, outcome FROM whizbang.fail_work('outbox', '{2c000000-0000-7000-8000-000000000024}', '{"bad"}', NULL,
                                                   '{false}', NULL, '2020-01-01 00:00:00Z');
SELECT count(*) AS stored FROM whizbang.store_outbox_messages('[
  {"MessageId": "2c000000-0000-7000-8000-000000000025", "Destination": "d", "MessageType": "T", "Envelope": {}}
]', p_instance_id => '2c000000-aaaa-4000-8000-000000000001', p_lease_expiry => '2999-01-01 00:00:00Z',
    p_now => '2020-01-01 00:00:00Z');

-- Idempotency: one key in progress, one completed in 2999 (its result kept a day), one whose
-- result expired in 2020 (a tombstone, purged or not).
SELECT outcome FROM whizbang.idempotency_begin('stats_scope', 'running', p_now => '2999-01-01 00:00:00Z');
SELECT outcome FROM whizbang.idempotency_begin('stats_scope', 'done', p_now => '2999-01-01 00:00:00Z');
SELECT whizbang.idempotency_complete('stats_scope', 'done',
    (SELECT token FROM whizbang.wh_idempotency_keys WHERE scope = 'stats_scope' AND idempotency_key = 'done'),
    p_now => '2999-01-01 00:00:00Z');
SELECT outcome FROM whizbang.idempotency_begin('stats_scope', 'expired', p_now => '2020-01-01 00:00:00Z');
SELECT whizbang.idempotency_complete('stats_scope', 'expired',
    (SELECT token FROM whizbang.wh_idempotency_keys WHERE scope = 'stats_scope' AND idempotency_key = 'expired'),
    p_result_ttl => '1 day', p_now => '2020-01-01 00:00:00Z');

-- How each count moved (before: the function; after: the view).
SELECT a.metric, a.value - coalesce(b.value, 0) AS change
  FROM whizbang.stats a LEFT JOIN before b USING (metric)
 WHERE a.metric IN ('inbox_pending', 'inbox_leased', 'inbox_scheduled', 'inbox_dead_lettered',
                    'outbox_pending', 'outbox_leased', 'outbox_scheduled', 'outbox_dead_lettered',
                    'dedup_rows', 'dedup_duplicates_observed', 'dedup_conflicts_observed',
                    'idempotency_in_progress', 'idempotency_completed', 'idempotency_tombstones')
 ORDER BY a.metric;
-- The oldest pending message is at least as old as ours (due 2020-01-01).
SELECT metric, value >= extract(epoch FROM now() - '2020-01-01 00:00:00Z'::timestamptz) - 1 AS covers_ours
  FROM whizbang.stats() WHERE metric IN ('inbox_oldest_pending_seconds', 'outbox_oldest_pending_seconds')
 ORDER BY metric;
-- Every metric DESIGN names is there, once.
SELECT count(DISTINCT metric) AS named_metrics
  FROM whizbang.stats()
 WHERE metric IN ('inbox_pending', 'inbox_leased', 'inbox_scheduled', 'inbox_dead_lettered', 'inbox_oldest_pending_seconds',
                  'outbox_pending', 'outbox_leased', 'outbox_scheduled', 'outbox_dead_lettered',
                  'outbox_oldest_pending_seconds', 'dedup_rows', 'dedup_duplicates_observed',
                  'dedup_conflicts_observed', 'idempotency_in_progress', 'idempotency_completed',
                  'idempotency_tombstones');
-- stats() only reads: it works in a read-only transaction.
BEGIN READ ONLY;
SELECT count(*) > 0 AS readable FROM whizbang.stats;
COMMIT;
