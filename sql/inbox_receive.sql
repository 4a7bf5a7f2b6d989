-- inbox_receive (DESIGN §3.2): one row per input element, in input order, with the dedup
-- outcome new | duplicate | conflict (the Envelope's fingerprint differs) | expired (SentAt
-- before the replay horizon); only new messages become work. Consumers 'recv_*', ids 1b000000-....
SET client_min_messages = warning;
\set SHOW_CONTEXT never

-- A store makes the dedup generation of its p_now only up to one period ahead of the clock, and
-- none that would already have left the window (0.13.0): the generations of this file's
-- simulated day are made first, as an application simulating another time would.
SELECT count(*) > 0 AS generations_made FROM whizbang.perform_maintenance(p_now => '2030-01-01 00:00:00Z');
-- First deliveries, and a repeat inside the batch: duplicate after its first occurrence.
SELECT * FROM whizbang.inbox_receive('[
  {"MessageId": "1b000000-0000-7000-8000-000000000002", "HandlerName": "pay", "MessageType": "Charge",
   "Envelope": {"amount": 10.50, "currency": "EUR"}, "StreamId": "1b5e0000-0000-7000-8000-000000000001"},
  {"MessageId": "1b000000-0000-7000-8000-000000000001", "HandlerName": "pay", "MessageType": "Charge",
   "Envelope": {"amount": 7, "currency": "EUR"}},
  {"MessageId": "1b000000-0000-7000-8000-000000000002", "HandlerName": "pay", "MessageType": "Charge",
   "Envelope": {"amount": 10.50, "currency": "EUR"}, "StreamId": "1b5e0000-0000-7000-8000-000000000001"}
]', 'recv_pay', '2030-01-01 00:00:00Z');

-- Redeliveries: the same envelope in another spelling (key order, 10.5 for 10.50) is a
-- duplicate; a changed envelope under a known id is a conflict; neither is stored again.
-- A repeat of an id that conflicts inside the batch conflicts too.
SELECT * FROM whizbang.inbox_receive('[
  {"MessageId": "1b000000-0000-7000-8000-000000000002", "HandlerName": "pay", "MessageType": "Charge",
   "Envelope": {"currency": "EUR", "amount": 10.5}},
  {"MessageId": "1b000000-0000-7000-8000-000000000001", "HandlerName": "pay", "MessageType": "Charge",
   "Envelope": {"amount": 700, "currency": "EUR"}},
  {"MessageId": "1b000000-0000-7000-8000-000000000003", "HandlerName": "pay", "MessageType": "Charge",
   "Envelope": {"amount": 1}},
  {"MessageId": "1b000000-0000-7000-8000-000000000003", "HandlerName": "pay", "MessageType": "Charge",
   "Envelope": {"amount": 2}}
]', 'recv_pay', '2030-01-01 00:01:00Z');

-- The dedup records count every delivery and every conflict; the inbox holds the three
-- first deliveries with their first envelopes.
SELECT message_id, observation_count, conflict_count,
       fingerprint = whizbang.fingerprint('{"amount": 10.5, "currency": "EUR"}') AS fingerprint_of_first
  FROM whizbang.wh_message_deduplication WHERE consumer = 'recv_pay' ORDER BY message_id;
SELECT message_id, envelope FROM whizbang.wh_inbox WHERE consumer = 'recv_pay' ORDER BY message_id;

-- The replay horizon (dedup_retention_days 30, replay_policy reject): an unknown id sent 31
-- days before p_now is expired and not recorded; a known id is a duplicate whatever its SentAt.
SELECT * FROM whizbang.inbox_receive('[
  {"MessageId": "1b000000-0000-7000-8000-000000000010", "HandlerName": "h", "MessageType": "T", "Envelope": {},
   "SentAt": "2029-12-01 00:00:00Z"},
  {"MessageId": "1b000000-0000-7000-8000-000000000002", "HandlerName": "pay", "MessageType": "Charge",
   "Envelope": {"amount": 10.5, "currency": "EUR"}, "SentAt": "2029-12-01 00:00:00Z"},
  {"MessageId": "1b000000-0000-7000-8000-000000000011", "HandlerName": "h", "MessageType": "T", "Envelope": {},
   "SentAt": "2029-12-31 00:00:00Z"}
]', 'recv_pay', '2030-01-01 00:00:00Z');
SELECT count(*) AS recorded_expired FROM whizbang.wh_message_deduplication
 WHERE consumer = 'recv_pay' AND message_id = '1b000000-0000-7000-8000-000000000010';

-- replay_policy accept records and stores the old message instead (reset afterwards).
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('replay_policy', 'accept');
SELECT * FROM whizbang.inbox_receive('[
  {"MessageId": "1b000000-0000-7000-8000-000000000010", "HandlerName": "h", "MessageType": "T", "Envelope": {},
   "SentAt": "2029-12-01 00:00:00Z"}
]', 'recv_pay', '2030-01-01 00:00:00Z');
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('replay_policy', 'reject');

-- Consumers are separate scopes: the same id and envelope is new for another consumer.
SELECT * FROM whizbang.inbox_receive('[
  {"MessageId": "1b000000-0000-7000-8000-000000000001", "HandlerName": "audit", "MessageType": "Charge",
   "Envelope": {"amount": 7, "currency": "EUR"}}
]', 'recv_audit', '2030-01-01 00:00:00Z');

-- store_inbox_messages records no fingerprint, and a record without one never conflicts:
-- inbox_receive of a changed envelope under an id first stored so is a duplicate.
SELECT message_id FROM whizbang.store_inbox_messages('[
  {"MessageId": "1b000000-0000-7000-8000-000000000020", "HandlerName": "h", "MessageType": "T", "Envelope": {"v": 1}}
]', p_now => '2030-01-01 00:00:00Z', p_consumer => 'recv_mixed');
SELECT * FROM whizbang.inbox_receive('[
  {"MessageId": "1b000000-0000-7000-8000-000000000020", "HandlerName": "h", "MessageType": "T", "Envelope": {"v": 2}}
]', 'recv_mixed', '2030-01-01 00:00:00Z');

-- The received messages are work: a claim of the consumer hands out exactly the new ones.
SELECT message_id, handler_name, message_type, envelope, attempts
  FROM whizbang.claim_work('1b000000-aaaa-4000-8000-000000000001', 'inbox', p_now => '2030-01-01 00:02:00Z',
                           p_consumer => 'recv_pay')
 ORDER BY message_id;

-- Bad input writes nothing: the valid first element is not recorded either.
SELECT * FROM whizbang.inbox_receive('[
  {"MessageId": "1b000000-0000-7000-8000-000000000030", "HandlerName": "h", "MessageType": "T", "Envelope": {}},
  {"MessageId": "1b000000-0000-7000-8000-000000000031", "HandlerName": "h", "MessageType": "T", "Envelope": null}
]', 'recv_bad', '2030-01-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.inbox_receive('[
  {"messageId": "1b000000-0000-7000-8000-000000000030", "HandlerName": "h", "MessageType": "T", "Envelope": {}}
]', 'recv_bad', '2030-01-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.inbox_receive('[
  {"MessageId": "1b000000-0000-7000-8000-000000000030", "HandlerName": "", "MessageType": "T", "Envelope": {}}
]', 'recv_bad', '2030-01-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.inbox_receive('[
  {"MessageId": "1b000000-0000-7000-8000-000000000030", "HandlerName": "h", "MessageType": "T", "Envelope": {},
   "SentAt": "yesterday-ish"}
]', 'recv_bad', '2030-01-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.inbox_receive('[]', NULL, '2030-01-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.inbox_receive('[]', repeat('c', 1025), '2030-01-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.inbox_receive('[]', 'recv_bad', 'infinity');
\echo :SQLSTATE
SELECT count(*) AS written FROM whizbang.wh_message_deduplication WHERE consumer = 'recv_bad';
