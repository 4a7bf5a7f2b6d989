-- queues, peek and cancel_work (issue 13 item 7) with fixed times and ids. Consumers 'queues_*'
-- (the outbox is left out: other tests leave outbox rows behind), ids 3e000000-....
SET client_min_messages = warning;
\set SHOW_CONTEXT never

-- A store makes the dedup generation of its p_now only up to one period ahead of the clock, and
-- none that would already have left the window (0.13.0): the generations of this file's
-- simulated day are made first, as an application simulating another time would.
SELECT count(*) > 0 AS generations_made FROM whizbang.perform_maintenance(p_now => '2030-01-01 00:00:00Z');
-- queues_a at 2030-01-01 00:00: 1 (no stream); stream 5e...01: 2 due at 00:05 (a retry, say),
-- 3 behind it; 4 due in an hour; 5 pre-leased until 01:00. queues_b: 6, dead-lettered.
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "3e000000-0000-7000-8000-000000000001", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": 1}},
  {"MessageId": "3e000000-0000-7000-8000-000000000002", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": 2},
   "StreamId": "5e000000-0000-7000-8000-000000000001", "ScheduledFor": "2030-01-01 00:05:00Z"},
  {"MessageId": "3e000000-0000-7000-8000-000000000003", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": 3},
   "StreamId": "5e000000-0000-7000-8000-000000000001"},
  {"MessageId": "3e000000-0000-7000-8000-000000000004", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": 4},
   "ScheduledFor": "2030-01-01 01:00:00Z"}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'queues_a');
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "3e000000-0000-7000-8000-000000000005", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": 5}}
]', '3e000000-aaaa-4000-8000-000000000001', '2030-01-01 01:00:00Z', '2030-01-01 00:00:00Z', p_consumer => 'queues_a');
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "3e000000-0000-7000-8000-000000000006", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": 6}}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'queues_b');
SELECT outcome FROM whizbang.fail_work('inbox', '{3e000000-0000-7000-8000-000000000006}', '{poison}', NULL, '{false}',
                                       'queues_b', '2030-01-01 00:00:00Z');

-- Counts at 00:10: 1, 2 and 3 pending (3 waits behind 2 but is due), 4 scheduled, 5 leased.
SELECT * FROM whizbang.queues('2030-01-01 00:10:00Z') WHERE consumer LIKE 'queues\_%';

-- Claim order, nothing leased: 1 first, then 2, then 3 behind it although 3 was due first.
SELECT message_id, stream_id, envelope, attempts, consumer, scheduled_for, lease_expiry
  FROM whizbang.peek('inbox', 'queues_a', 10, '2030-01-01 00:10:00Z');
SELECT message_id FROM whizbang.peek('inbox', 'queues_a', 1, '2030-01-01 00:10:00Z');
-- Leases read from whizbang.leases (either lease store; DESIGN §3.8): only 5, pre-leased.
SELECT count(*) AS leased FROM whizbang.leases WHERE source = 'inbox' AND consumer = 'queues_a';

-- Cancel: 2 (the stream's head), 5 (leased), an unknown id, 2 again, 4 (scheduled).
SELECT * FROM whizbang.cancel_work('inbox', '{3e000000-0000-7000-8000-000000000002,3e000000-0000-7000-8000-000000000005,
    3e000000-0000-7000-8000-0000000000ff,3e000000-0000-7000-8000-000000000002,3e000000-0000-7000-8000-000000000004}',
    'queues_a', '2030-01-01 00:10:00Z');
-- 3 is the stream's head now; the dedup record of 2 stays, so a redelivery is a duplicate.
SELECT message_id FROM whizbang.peek('inbox', 'queues_a', 10, '2030-01-01 00:10:00Z');
SELECT outcome FROM whizbang.inbox_receive('[
  {"MessageId": "3e000000-0000-7000-8000-000000000002", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": 2}}
]', 'queues_a', '2030-01-01 00:11:00Z');
SELECT * FROM whizbang.queues('2030-01-01 00:10:00Z') WHERE consumer LIKE 'queues\_%';
-- After its lease (01:00) the pre-leased message can be cancelled.
SELECT * FROM whizbang.cancel_work('inbox', '{3e000000-0000-7000-8000-000000000005}', 'queues_a', '2030-01-01 01:00:00Z');

-- Bad input.
SELECT * FROM whizbang.peek('queue');
SELECT * FROM whizbang.peek(p_limit => 0);
SELECT * FROM whizbang.cancel_work(NULL, '{3e000000-0000-7000-8000-000000000001}');
SELECT * FROM whizbang.cancel_work('inbox', '{NULL}', 'queues_a');

-- Clean up what the other tests must not see.
SELECT count(*) FROM whizbang.cancel_work('inbox', '{3e000000-0000-7000-8000-000000000001,3e000000-0000-7000-8000-000000000003}',
                                          'queues_a', '2030-01-01 00:10:00Z');
DELETE FROM whizbang.wh_dead_letters WHERE consumer = 'queues_b';
