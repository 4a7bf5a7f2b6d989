-- The end-to-end demo run by ./scripts/demo: a consumer receives a message, applies its
-- effect in the same transaction, and a redelivery of the same message does nothing.
\pset footer off
\echo
\echo '== CREATE EXTENSION whizbang'
CREATE EXTENSION whizbang;
SELECT whizbang.version() AS whizbang_version;

CREATE TABLE orders (order_id int PRIMARY KEY, amount numeric NOT NULL);
CREATE TABLE ledger (order_id int, amount numeric);

-- The consumer: dedup record and business effect in one transaction.
CREATE FUNCTION receive(p_message_id uuid, p_payload jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  v_outcome text := whizbang.dedup_insert(p_message_id, 'billing', whizbang.fingerprint(p_payload));
BEGIN
  IF v_outcome = 'new' THEN
    INSERT INTO ledger VALUES ((p_payload->>'order')::int, (p_payload->>'amount')::numeric);
  END IF;
  RETURN v_outcome;
END $$;

\echo
\echo '== the broker delivers message A'
SELECT receive('0190a1b2-c3d4-7e5f-8a9b-000000000001', '{"order": 1, "amount": 10.00}') AS outcome;
\echo '== the broker delivers message A again (at-least-once delivery): rejected as a duplicate'
SELECT receive('0190a1b2-c3d4-7e5f-8a9b-000000000001', '{"amount": 10.0, "order": 1}') AS outcome;
\echo '== a client reuses the id of message A with another payload: exposed as a conflict'
SELECT receive('0190a1b2-c3d4-7e5f-8a9b-000000000001', '{"order": 1, "amount": 99}') AS outcome;
\echo '== a batch with a repeat inside it'
SELECT * FROM whizbang.dedup_insert_many(ARRAY[
  '0190a1b2-c3d4-7e5f-8a9b-000000000002', '0190a1b2-c3d4-7e5f-8a9b-000000000001',
  '0190a1b2-c3d4-7e5f-8a9b-000000000002']::uuid[], 'billing');
\echo '== a delivery sent before the 30-day replay horizon cannot be deduplicated: expired'
SELECT whizbang.dedup_insert('0190a1b2-c3d4-7e5f-8a9b-000000000003', 'billing',
                             p_sent_at => now() - interval '45 days') AS outcome;

\echo
\echo '== the ledger holds exactly one effect for message A'
SELECT * FROM ledger;
\echo '== and the dedup table remembers what it saw'
SELECT message_id, observation_count, conflict_count
  FROM whizbang.wh_message_deduplication ORDER BY message_id;

\echo
\echo '== the inbox: a broker delivers two messages of one order stream, then redelivers the first'
SELECT message_id, was_newly_created FROM whizbang.store_inbox_messages('[
  {"MessageId": "0190a1b2-c3d4-7e5f-8a9b-000000000101", "HandlerName": "ledger", "MessageType": "OrderPlaced",
   "StreamId": "0190a1b2-c3d4-7e5f-8a9b-0000000000aa", "Envelope": {"order": 2, "amount": 20}},
  {"MessageId": "0190a1b2-c3d4-7e5f-8a9b-000000000102", "HandlerName": "ledger", "MessageType": "OrderPaid",
   "StreamId": "0190a1b2-c3d4-7e5f-8a9b-0000000000aa", "Envelope": {"order": 2}}]', p_consumer => 'billing');
SELECT count(*) AS stored_again FROM whizbang.store_inbox_messages('[
  {"MessageId": "0190a1b2-c3d4-7e5f-8a9b-000000000101", "HandlerName": "ledger", "MessageType": "OrderPlaced",
   "StreamId": "0190a1b2-c3d4-7e5f-8a9b-0000000000aa", "Envelope": {"order": 2, "amount": 20}}]', p_consumer => 'billing');
\echo '== a worker claims under a lease (one row of the stream at a time), applies it and completes'
SELECT message_type, attempts, lease_token
  FROM whizbang.claim_work('0190a1b2-c3d4-7e5f-8a9b-00000000ffff', 'inbox', p_max_per_stream => 1);
SELECT * FROM whizbang.complete_work('inbox', ARRAY['0190a1b2-c3d4-7e5f-8a9b-000000000101']::uuid[], p_consumer => 'billing');
\echo '== the next claim hands out the next message of the stream'
SELECT message_type, attempts, lease_token
  FROM whizbang.claim_work('0190a1b2-c3d4-7e5f-8a9b-00000000ffff', 'inbox', p_max_per_stream => 1);

\echo
\echo '== the outbox: an order and its event commit together; a rolled-back order leaves neither'
CREATE TABLE shop_orders (order_id int PRIMARY KEY, amount numeric NOT NULL);
BEGIN;
INSERT INTO shop_orders VALUES (3, 30);
SELECT message_id, was_newly_created FROM whizbang.store_outbox_messages('[
  {"MessageId": "0190a1b2-c3d4-7e5f-8a9b-000000000201", "Destination": "orders", "MessageType": "OrderCreated",
   "Envelope": {"order": 3, "amount": 30}}]');
COMMIT;
BEGIN;
INSERT INTO shop_orders VALUES (4, 40);
SELECT count(*) AS stored FROM whizbang.store_outbox_messages('[
  {"MessageId": "0190a1b2-c3d4-7e5f-8a9b-000000000202", "Destination": "orders", "MessageType": "OrderCreated",
   "Envelope": {"order": 4, "amount": 40}}]');
ROLLBACK;
SELECT (SELECT count(*) FROM shop_orders) AS orders, (SELECT count(*) FROM whizbang.wh_outbox) AS outbox_rows;
\echo '== a relay claims the event under a lease, publishes it, and completes it'
SELECT source, destination, message_type, envelope
  FROM whizbang.claim_work('0190a1b2-c3d4-7e5f-8a9b-00000000eeee', 'outbox');
SELECT whizbang.complete_outbox_published(ARRAY['0190a1b2-c3d4-7e5f-8a9b-000000000201']::uuid[]) AS published;

\echo
\echo '== maintenance, 31 days later: old dedup records go, a waiting message keeps its record'
SELECT task_name, rows_affected, status FROM whizbang.perform_maintenance(now() + interval '31 days');
SELECT message_id, consumer FROM whizbang.wh_message_deduplication ORDER BY message_id;
\echo '== what is where now'
SELECT * FROM whizbang.stats WHERE value <> 0;
-- the same per source and consumer (0.5.0)
SELECT source, consumer, pending, leased, scheduled, dead_lettered FROM whizbang.queues ORDER BY 1, 2;

\echo 'demo finished: duplicates were rejected, the stream was handed out in order, the event left with its order.'
