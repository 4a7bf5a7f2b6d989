-- The outbox (DESIGN §3.3): store_outbox_messages, claims with p_source 'outbox', fenced
-- completion, dead letters, complete_outbox_published, debug_mode. Ids 1f000000-....
-- The outbox has no consumer, so claims here run at p_now in 1990: outbox rows stored by
-- other tests (later times) are not due then and never mix in.
SET client_min_messages = warning;
\set SHOW_CONTEXT never

CREATE TEMP TABLE c (message_id uuid, lease_token bigint);
CREATE FUNCTION pg_temp.tok(p_message_id uuid) RETURNS bigint LANGUAGE sql
  AS $$ SELECT max(lease_token) FROM c WHERE message_id = p_message_id $$;

-- One row per input, in input order: a repeat inside the batch is false and not written.
SELECT * FROM whizbang.store_outbox_messages('[
  {"MessageId": "1f000000-0000-7000-8000-000000000001", "Destination": "orders", "MessageType": "OrderCreated",
   "StreamId": "1f5e0000-0000-7000-8000-000000000001", "IsEvent": true, "Envelope": {"order": 1},
   "Metadata": {"trace": "t-1"}, "HandlerName": "ignored in the outbox"},
  {"MessageId": "1f000000-0000-7000-8000-000000000002", "Destination": "orders", "MessageType": "OrderPaid",
   "StreamId": "1f5e0000-0000-7000-8000-000000000001", "Envelope": {"order": 1, "paid": true}},
  {"MessageId": "1f000000-0000-7000-8000-000000000001", "Destination": "orders", "MessageType": "OrderCreated",
   "Envelope": {"order": 1}},
  {"MessageId": "1f000000-0000-7000-8000-000000000003", "Destination": "mail", "MessageType": "SendInvoice",
   "Envelope": {"invoice": 9}, "ScheduledFor": "1990-01-01 00:00:01Z"}
]', p_now => '1990-01-01 00:00:00Z');
-- An id still in the outbox is not written twice, whatever its envelope.
SELECT * FROM whizbang.store_outbox_messages('[
  {"MessageId": "1f000000-0000-7000-8000-000000000003", "Destination": "mail", "MessageType": "SendInvoice",
   "Envelope": {"invoice": "changed"}}
]', p_now => '1990-01-01 00:00:01Z');
SELECT o.message_id, o.destination, o.message_type, o.event_data, o.metadata, o.stream_id, o.is_event,
       o.created_at = '1990-01-01 00:00:00Z' AS created_at_p_now, o.stream_seq
  FROM whizbang.wh_outbox o
 WHERE o.message_id::text LIKE '1f000000-%' ORDER BY o.message_id;

-- A relay claims the outbox: destination set, no handler, no consumer. Heads by due time
-- (…001, then …003, due a second later), then …001's follower …002.
WITH r AS (SELECT * FROM whizbang.claim_work('1f000000-aaaa-4000-8000-000000000001', 'outbox', 10, 60,
                                             p_now => '1990-01-01 00:01:00Z') WITH ORDINALITY),
     rec AS (INSERT INTO c SELECT message_id, lease_token FROM r)
SELECT ordinality AS pos, source, message_id, destination, handler_name, message_type, envelope, metadata, attempts, consumer
  FROM r ORDER BY ordinality;

-- Fenced completion: complete_work('outbox', ids, tokens) deletes message and work row;
-- p_consumer is not read for the outbox. A token that is not current is lease_lost.
SELECT * FROM whizbang.complete_work('outbox', '{1f000000-0000-7000-8000-000000000001}',
                                     ARRAY[pg_temp.tok('1f000000-0000-7000-8000-000000000001')], 'any consumer',
                                     '1990-01-01 00:01:10Z');
SELECT * FROM whizbang.complete_work('outbox', '{1f000000-0000-7000-8000-000000000002}',
                                     ARRAY[pg_temp.tok('1f000000-0000-7000-8000-000000000002') - 1], NULL,
                                     '1990-01-01 00:01:10Z');
SELECT count(*) AS outbox_rows FROM whizbang.wh_outbox WHERE message_id = '1f000000-0000-7000-8000-000000000001';

-- A failure that cannot be retried dead-letters the message: source outbox, its destination,
-- no consumer, received_at = the message's created_at.
SELECT message_id, outcome FROM whizbang.fail_work('outbox', '{1f000000-0000-7000-8000-000000000003}',
    '{"mail relay rejected it"}', ARRAY[pg_temp.tok('1f000000-0000-7000-8000-000000000003')], '{false}', NULL,
    '1990-01-01 00:01:20Z');
SELECT source, consumer, message_id, destination, handler_name, message_type, envelope, attempts, last_error,
       received_at = '1990-01-01 00:00:00Z' AS received_at_created_at,
       dead_lettered_at = '1990-01-01 00:01:20Z' AS dead_lettered_at_p_now
  FROM whizbang.wh_dead_letters WHERE message_id = '1f000000-0000-7000-8000-000000000003';
-- retry_dead_letters puts it back into the outbox as fresh work, due at the transaction's start.
-- (Not leased, so the work row's attempts reads the same in either lease store: 0.)
BEGIN;
SELECT whizbang.retry_dead_letters(ARRAY(SELECT dead_letter_id FROM whizbang.wh_dead_letters
                                          WHERE message_id = '1f000000-0000-7000-8000-000000000003'));
SELECT o.message_id, o.event_data, o.attempts, o.scheduled_for = now() AS due_now, o.created_at = now() AS created_now
  FROM whizbang.wh_outbox o
 WHERE o.message_id = '1f000000-0000-7000-8000-000000000003';
COMMIT;

-- complete_outbox_published: the seed's unfenced "published" call. Counts what left the
-- outbox; unknown ids, NULL elements and a second mention are no-ops; again: 0.
SELECT whizbang.complete_outbox_published(ARRAY['1f000000-0000-7000-8000-000000000002',
                                                '1f000000-0000-7000-8000-000000000003',
                                                '1f000000-0000-7000-8000-000000000003',
                                                '1f000000-0000-7000-8000-000000000099', NULL]::uuid[]);
SELECT whizbang.complete_outbox_published(ARRAY['1f000000-0000-7000-8000-000000000002']::uuid[]);
SELECT whizbang.complete_outbox_published(NULL) AS null_ids, whizbang.complete_outbox_published('{}') AS no_ids;
SELECT count(*) AS left_in_outbox FROM whizbang.wh_outbox WHERE message_id::text LIKE '1f000000-%';
-- Once completed, nothing remembers the id: storing it again stores it again.
SELECT * FROM whizbang.store_outbox_messages('[
  {"MessageId": "1f000000-0000-7000-8000-000000000002", "Destination": "orders", "MessageType": "OrderPaid",
   "Envelope": {"order": 1, "paid": true}}
]', p_now => '1990-01-01 00:02:00Z');

-- Debug mode keeps a published message, marked processed: never handed out again, and its id
-- still answers false.
SELECT whizbang.complete_outbox_published('{1f000000-0000-7000-8000-000000000002}', p_debug_mode => true);
SELECT message_id, processed_at IS NOT NULL AS processed FROM whizbang.wh_outbox
 WHERE message_id = '1f000000-0000-7000-8000-000000000002';
SELECT count(*) AS claimed FROM whizbang.claim_work('1f000000-aaaa-4000-8000-000000000001', 'outbox',
                                                    p_now => '1990-01-01 00:03:00Z');
SELECT message_id, was_newly_created FROM whizbang.store_outbox_messages('[
  {"MessageId": "1f000000-0000-7000-8000-000000000002", "Destination": "orders", "MessageType": "OrderPaid",
   "Envelope": {}}
]', p_now => '1990-01-01 00:03:00Z');

-- Bad input is an error and writes nothing.
SELECT * FROM whizbang.store_outbox_messages('[
  {"MessageId": "1f000000-0000-7000-8000-000000000010", "Destination": "orders", "MessageType": "T", "Envelope": {}},
  {"MessageId": "1f000000-0000-7000-8000-000000000011", "MessageType": "T", "Envelope": {}}
]', p_now => '1990-01-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.store_outbox_messages('[
  {"MessageId": "1f000000-0000-7000-8000-000000000010", "Destinaton": "orders", "Destination": "orders",
   "MessageType": "T", "Envelope": {}}
]', p_now => '1990-01-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.store_outbox_messages('[
  {"MessageId": "1f000000-0000-7000-8000-000000000010", "Destination": "orders", "MessageType": "T", "Envelope": {},
   "ScheduledFor": "soon"}
]', p_now => '1990-01-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.store_outbox_messages('[1]', p_now => '1990-01-01 00:00:00Z');
\echo :SQLSTATE
SELECT * FROM whizbang.store_outbox_messages('[]', p_now => NULL);
\echo :SQLSTATE
SELECT whizbang.complete_outbox_published('{{1f000000-0000-7000-8000-000000000010}}');
\echo :SQLSTATE
SELECT count(*) AS written FROM whizbang.wh_outbox WHERE message_id = '1f000000-0000-7000-8000-000000000010';
