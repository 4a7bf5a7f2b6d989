-- store_inbox_messages (DESIGN §3.2): dedup first, inbox rows only for new messages, rows
-- returned only for them; bad input is an error that writes nothing; the replay horizon;
-- pre-leased stores. Consumers 'store_*', ids 1a000000-....
-- Errors print their message and hint, then the SQLSTATE (psql's :SQLSTATE).
SET client_min_messages = warning;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
\set SHOW_CONTEXT never

-- A store makes the dedup generation of its p_now only up to one period ahead of the clock, and
-- none that would already have left the window (0.13.0): the generations of this file's
-- simulated day are made first, as an application simulating another time would.
SELECT count(*) > 0 AS generations_made FROM whizbang.perform_maintenance(p_now => '2030-01-01 00:00:00Z');
-- Three new messages: one row each, in input order, was_newly_created true.
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "1a000000-0000-7000-8000-000000000003", "HandlerName": "orders", "MessageType": "OrderPlaced",
   "Envelope": {"order": 3}, "StreamId": "1a5e0000-0000-7000-8000-000000000001"},
  {"MessageId": "1a000000-0000-7000-8000-000000000001", "HandlerName": "orders", "MessageType": "OrderPaid",
   "Envelope": {"order": 1}, "Metadata": {"trace": "t-1"}, "Scope": {"tenant": "acme"}, "IsEvent": true,
   "SentAt": "2030-01-01 00:00:00Z"},
  {"MessageId": "1a000000-0000-7000-8000-000000000002", "HandlerName": "orders", "MessageType": "OrderShipped",
   "Envelope": {"order": 2}, "ScheduledFor": "2030-01-01 01:00:00Z", "FutureField": "ignored"}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_orders');

-- What was stored: one row with the message and its work state (due at p_now or ScheduledFor).
SELECT m.message_id, m.handler_name, m.message_type, m.envelope, m.metadata, m.scope, m.is_event,
       m.sent_at = '2030-01-01 00:00:00Z' AS sent_at_kept,
       m.scheduled_for - '2030-01-01 00:00:00Z'::timestamptz AS due_after_store,
       m.stream_seq, m.partition_number = whizbang.partition_of(coalesce(m.stream_id, m.message_id), 10000) AS partition_ok
  FROM whizbang.wh_inbox m
 WHERE m.consumer = 'store_orders' ORDER BY m.message_id;

-- A redelivery returns nothing and stores nothing, whatever its envelope; a repeat inside one
-- batch is stored once. The dedup record counts every delivery.
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "1a000000-0000-7000-8000-000000000001", "HandlerName": "orders", "MessageType": "OrderPaid",
   "Envelope": {"order": "changed"}},
  {"MessageId": "1a000000-0000-7000-8000-000000000004", "HandlerName": "orders", "MessageType": "OrderPlaced",
   "Envelope": {"order": 4}},
  {"MessageId": "1a000000-0000-7000-8000-000000000004", "HandlerName": "orders", "MessageType": "OrderPlaced",
   "Envelope": {"order": 4}}
]', p_now => '2030-01-01 00:01:00Z', p_consumer => 'store_orders');
SELECT message_id, observation_count, conflict_count, fingerprint IS NULL AS no_fingerprint
  FROM whizbang.wh_message_deduplication WHERE consumer = 'store_orders' ORDER BY message_id;
SELECT count(*) AS inbox_rows FROM whizbang.wh_inbox WHERE consumer = 'store_orders';

-- Consumers are separate scopes: the same id is new for another consumer.
SELECT message_id, was_newly_created FROM whizbang.store_inbox_messages('[
  {"MessageId": "1a000000-0000-7000-8000-000000000001", "HandlerName": "audit", "MessageType": "OrderPaid",
   "Envelope": {"order": 1}}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_audit');

-- An empty batch returns no rows.
SELECT count(*) FROM whizbang.store_inbox_messages('[]', p_consumer => 'store_orders', p_now => '2030-01-01 00:00:00Z');

-- The replay horizon (dedup_retention_days 30): SentAt 40 days before p_now is expired for an
-- id not on record, so nothing is recorded or stored; 20 days before is stored.
SELECT message_id FROM whizbang.store_inbox_messages('[
  {"MessageId": "1a000000-0000-7000-8000-000000000010", "HandlerName": "h", "MessageType": "T", "Envelope": {},
   "SentAt": "2029-11-22 00:00:00Z"},
  {"MessageId": "1a000000-0000-7000-8000-000000000011", "HandlerName": "h", "MessageType": "T", "Envelope": {},
   "SentAt": "2029-12-12 00:00:00Z"}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_replay');
SELECT message_id FROM whizbang.wh_message_deduplication WHERE consumer = 'store_replay' ORDER BY message_id;

-- A rolled-back store leaves the message storable again: no "received" flag survives.
BEGIN;
SELECT message_id FROM whizbang.store_inbox_messages('[
  {"MessageId": "1a000000-0000-7000-8000-000000000020", "HandlerName": "h", "MessageType": "T", "Envelope": {}}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_tx');
ROLLBACK;
SELECT message_id, was_newly_created FROM whizbang.store_inbox_messages('[
  {"MessageId": "1a000000-0000-7000-8000-000000000020", "HandlerName": "h", "MessageType": "T", "Envelope": {}}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_tx');

-- Bad input: an error naming the element (numbered from 0) and the field; nothing of the
-- batch is written, not even its valid elements.
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "1a000000-0000-7000-8000-000000000030", "HandlerName": "h", "MessageType": "T", "Envelope": {}},
  {"MessageId": "1a000000-0000-7000-8000-000000000031", "HandlerName": "h", "Envelope": {}}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_bad');
\echo :SQLSTATE
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "1a000000-0000-7000-8000-000000000030", "HandlerName": "h", "MessageType": "T", "Envelope": {},
   "ScheduleFor": "2030-01-02 00:00:00Z"}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_bad');
\echo :SQLSTATE
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "not-a-uuid", "HandlerName": "h", "MessageType": "T", "Envelope": {}}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_bad');
\echo :SQLSTATE
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "1a000000-0000-7000-8000-000000000030", "HandlerName": "h", "MessageType": "T", "Envelope": {},
   "IsEvent": "yes"}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_bad');
\echo :SQLSTATE
SELECT * FROM whizbang.store_inbox_messages('{"MessageId": "1a000000-0000-7000-8000-000000000030"}',
                                            p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_bad');
\echo :SQLSTATE
SELECT * FROM whizbang.store_inbox_messages(NULL, p_consumer => 'store_bad');
\echo :SQLSTATE
SELECT count(*) AS written FROM whizbang.wh_message_deduplication WHERE consumer = 'store_bad';

-- Pre-leased store (p_instance_id): a new message that could be handed out now (due, and
-- first of an idle stream or without a stream) is stored leased to that instance; the rest is
-- stored unleased. Another instance cannot take the pre-leased ones; the storing instance's
-- next claim hands them back first, with the token drawn at the store.
SELECT message_id FROM whizbang.store_inbox_messages('[
  {"MessageId": "1a000000-0000-7000-8000-000000000041", "StreamId": "1a5e0000-0000-7000-8000-000000000041",
   "HandlerName": "ship", "MessageType": "Ship", "Envelope": {"n": 1}}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_ship');
SELECT message_id FROM whizbang.store_inbox_messages('[
  {"MessageId": "1a000000-0000-7000-8000-000000000042", "StreamId": "1a5e0000-0000-7000-8000-000000000041",
   "HandlerName": "ship", "MessageType": "Ship", "Envelope": {"n": 2}},
  {"MessageId": "1a000000-0000-7000-8000-000000000043", "StreamId": "1a5e0000-0000-7000-8000-000000000043",
   "HandlerName": "ship", "MessageType": "Ship", "Envelope": {"n": 3}},
  {"MessageId": "1a000000-0000-7000-8000-000000000044", "StreamId": "1a5e0000-0000-7000-8000-000000000043",
   "HandlerName": "ship", "MessageType": "Ship", "Envelope": {"n": 4}},
  {"MessageId": "1a000000-0000-7000-8000-000000000045",
   "HandlerName": "ship", "MessageType": "Ship", "Envelope": {"n": 5}},
  {"MessageId": "1a000000-0000-7000-8000-000000000046",
   "HandlerName": "ship", "MessageType": "Ship", "Envelope": {"n": 6}, "ScheduledFor": "2030-01-01 01:00:00Z"}
]', p_instance_id => '1a000000-aaaa-4000-8000-000000000001', p_lease_expiry => '2030-01-01 00:05:00Z',
    p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_ship');
-- 00:01, another instance: only the busy stream's own head and its follower (…041, …042).
CREATE TEMP TABLE other_claim AS
SELECT message_id, attempts, lease_token
  FROM whizbang.claim_work('1a000000-bbbb-4000-8000-000000000002', 'inbox', p_now => '2030-01-01 00:01:00Z',
                           p_consumer => 'store_ship');
SELECT message_id, attempts FROM other_claim ORDER BY message_id;
-- 00:01, the storing instance: its pre-leased …043 and …045, with one token drawn at the store
-- (so smaller than the other instance's claim token), attempts 1, the claim's own lease.
CREATE TEMP TABLE own_claim AS
SELECT message_id, attempts, lease_token, lease_expiry
  FROM whizbang.claim_work('1a000000-aaaa-4000-8000-000000000001', 'inbox', 10, 60,
                           p_now => '2030-01-01 00:01:00Z', p_consumer => 'store_ship');
SELECT message_id, attempts,
       lease_token < (SELECT min(lease_token) FROM other_claim) AS token_from_store,
       lease_expiry - '2030-01-01 00:01:00Z'::timestamptz AS lease
  FROM own_claim ORDER BY message_id;
SELECT count(DISTINCT lease_token) AS tokens FROM own_claim;
-- Fencing holds for the pre-leased rows: their token completes them.
SELECT c.* FROM whizbang.complete_work('inbox',
    (SELECT array_agg(message_id ORDER BY message_id) FROM own_claim),
    (SELECT array_agg(lease_token ORDER BY message_id) FROM own_claim),
    'store_ship', '2030-01-01 00:01:30Z') c ORDER BY c.message_id;

-- With p_instance_id, p_lease_expiry must be later than p_now.
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "1a000000-0000-7000-8000-000000000050", "HandlerName": "h", "MessageType": "T", "Envelope": {}}
]', p_instance_id => '1a000000-aaaa-4000-8000-000000000001', p_lease_expiry => '2030-01-01 00:00:00Z',
    p_now => '2030-01-01 00:00:00Z', p_consumer => 'store_bad');
\echo :SQLSTATE
