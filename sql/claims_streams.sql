-- Per-stream order (DESIGN §3.4): a stream's messages go out oldest first (arrival order:
-- element order inside a batch, commit order across calls), one lease holder per stream, a
-- message waits while an older one is leased, scheduled or pending; a lapsed stream is taken
-- over whole; a retry holds its stream back. Consumers 'stream_*', ids 1d000000-....
SET client_min_messages = warning;
\set SHOW_CONTEXT never

-- Every claim is recorded in c, so that later calls can pass its tokens back.
CREATE TEMP TABLE c (message_id uuid, lease_token bigint);
CREATE FUNCTION pg_temp.tok(p_message_id uuid, p_nth int) RETURNS bigint LANGUAGE sql
  AS $$ SELECT lease_token FROM c WHERE message_id = p_message_id ORDER BY lease_token OFFSET p_nth - 1 LIMIT 1 $$;
-- Claims print the envelope's step, the delivery and the position in the result.
CREATE FUNCTION pg_temp.claim(p_instance uuid, p_now timestamptz, p_consumer text, p_max_per_stream int DEFAULT 100,
                              p_lease_seconds int DEFAULT 60)
  RETURNS TABLE(pos bigint, step text, attempts int) LANGUAGE sql AS $$
  WITH r AS (SELECT * FROM whizbang.claim_work(p_instance, 'inbox', 100, p_lease_seconds,
                                               p_max_per_stream => p_max_per_stream, p_now => p_now,
                                               p_consumer => p_consumer) WITH ORDINALITY),
       rec AS (INSERT INTO c SELECT message_id, lease_token FROM r)
  SELECT ordinality, envelope->>'step', attempts FROM r $$;

-- A store makes the dedup generation of its p_now only up to one period ahead of the clock, and
-- none that would already have left the window (0.13.0): the generations of this file's
-- simulated day are made first, as an application simulating another time would.
SELECT count(*) > 0 AS generations_made FROM whizbang.perform_maintenance(p_now => '2030-03-01 00:00:00Z');
-- Stream A: a1, a2, a3 in element order, whose ids sort the other way round (ff…, 00…, 88…);
-- stream B: b1 due at 00:30, then b2; c1 without a stream, due at 00:00:01.
SELECT message_id, stream_id FROM whizbang.store_inbox_messages('[
  {"MessageId": "1d000000-0000-7000-8000-ffffffff00a1", "StreamId": "1d5e0000-0000-7000-8000-00000000000a",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "a1"}},
  {"MessageId": "1d000000-0000-7000-8000-0000000000b1", "StreamId": "1d5e0000-0000-7000-8000-00000000000b",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "b1"}, "ScheduledFor": "2030-03-01 00:30:00Z"},
  {"MessageId": "1d000000-0000-7000-8000-0000000000a2", "StreamId": "1d5e0000-0000-7000-8000-00000000000a",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "a2"}},
  {"MessageId": "1d000000-0000-7000-8000-0000000000b2", "StreamId": "1d5e0000-0000-7000-8000-00000000000b",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "b2"}},
  {"MessageId": "1d000000-0000-7000-8000-8888888800a3", "StreamId": "1d5e0000-0000-7000-8000-00000000000a",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "a3"}},
  {"MessageId": "1d000000-0000-7000-8000-0000000000c1",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "c1"}, "ScheduledFor": "2030-03-01 00:00:01Z"}
]', p_now => '2030-03-01 00:00:00Z', p_consumer => 'stream_o');
SELECT message_id, stream_seq FROM whizbang.wh_inbox WHERE consumer = 'stream_o' AND stream_id IS NOT NULL
 ORDER BY stream_id, stream_seq;

-- 00:00:05, worker 1, at most 2 per stream: the heads a1 and c1 by due time, then a2 (a
-- follower of a1). Not a3 (stream A gave 2), not b1 (not due), not b2 (behind b1).
SELECT * FROM pg_temp.claim('1d000000-1111-4000-8000-000000000001', '2030-03-01 00:00:05Z', 'stream_o', 2) ORDER BY pos;
-- 00:00:10, worker 2: nothing; a3 waits while a1 and a2 are leased.
SELECT * FROM pg_temp.claim('1d000000-2222-4000-8000-000000000002', '2030-03-01 00:00:10Z', 'stream_o') ORDER BY pos;
-- Worker 1 completes a1 and c1: a3 still waits behind a2.
SELECT * FROM whizbang.complete_work('inbox', '{1d000000-0000-7000-8000-ffffffff00a1,1d000000-0000-7000-8000-0000000000c1}',
    ARRAY[pg_temp.tok('1d000000-0000-7000-8000-ffffffff00a1', 1), pg_temp.tok('1d000000-0000-7000-8000-0000000000c1', 1)],
    'stream_o', '2030-03-01 00:00:20Z') ORDER BY message_id;
SELECT * FROM pg_temp.claim('1d000000-2222-4000-8000-000000000002', '2030-03-01 00:00:25Z', 'stream_o') ORDER BY pos;
-- Once a2 is completed, a3 is the head and goes to worker 2, who completes it.
SELECT * FROM whizbang.complete_work('inbox', '{1d000000-0000-7000-8000-0000000000a2}',
    ARRAY[pg_temp.tok('1d000000-0000-7000-8000-0000000000a2', 1)], 'stream_o', '2030-03-01 00:00:30Z');
SELECT * FROM pg_temp.claim('1d000000-2222-4000-8000-000000000002', '2030-03-01 00:00:35Z', 'stream_o') ORDER BY pos;
SELECT * FROM whizbang.complete_work('inbox', '{1d000000-0000-7000-8000-8888888800a3}',
    ARRAY[pg_temp.tok('1d000000-0000-7000-8000-8888888800a3', 1)], 'stream_o', '2030-03-01 00:00:40Z');
-- 00:29: b1 is not due and b2 waits behind it. 00:31: b1 and b2, in order.
SELECT * FROM pg_temp.claim('1d000000-2222-4000-8000-000000000002', '2030-03-01 00:29:00Z', 'stream_o') ORDER BY pos;
SELECT * FROM pg_temp.claim('1d000000-2222-4000-8000-000000000002', '2030-03-01 00:31:00Z', 'stream_o') ORDER BY pos;

-- Across calls, arrival order is the order of the storing transactions.
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "1d000000-0000-7000-8000-ffffffff00f1", "StreamId": "1d5e0000-0000-7000-8000-00000000000f",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "f1"}}]', p_now => '2030-03-01 00:00:00Z',
  p_consumer => 'stream_calls');
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "1d000000-0000-7000-8000-0000000000f2", "StreamId": "1d5e0000-0000-7000-8000-00000000000f",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "f2"}}]', p_now => '2030-03-01 00:00:00Z',
  p_consumer => 'stream_calls');
SELECT * FROM pg_temp.claim('1d000000-1111-4000-8000-000000000001', '2030-03-01 00:00:05Z', 'stream_calls') ORDER BY pos;

-- A lapsed stream is taken over whole. Worker 1 claims d1, d2, d3 (60 s lease) and stalls;
-- at 01:05 worker 2 takes the head d1 (one per stream).
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "1d000000-0000-7000-8000-0000000000d1", "StreamId": "1d5e0000-0000-7000-8000-00000000000d",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "d1"}},
  {"MessageId": "1d000000-0000-7000-8000-0000000000d2", "StreamId": "1d5e0000-0000-7000-8000-00000000000d",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "d2"}},
  {"MessageId": "1d000000-0000-7000-8000-0000000000d3", "StreamId": "1d5e0000-0000-7000-8000-00000000000d",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "d3"}}
]', p_now => '2030-03-01 01:00:00Z', p_consumer => 'stream_d');
SELECT * FROM pg_temp.claim('1d000000-1111-4000-8000-000000000001', '2030-03-01 01:00:00Z', 'stream_d') ORDER BY pos;
SELECT * FROM pg_temp.claim('1d000000-2222-4000-8000-000000000002', '2030-03-01 01:05:00Z', 'stream_d', 1) ORDER BY pos;
-- Worker 1 wakes up: d2 and d3 were not re-claimed, but its token is lost for the whole
-- stream, so it can never complete them ahead of d1.
SELECT * FROM whizbang.complete_work('inbox', '{1d000000-0000-7000-8000-0000000000d2,1d000000-0000-7000-8000-0000000000d3}',
    ARRAY[pg_temp.tok('1d000000-0000-7000-8000-0000000000d2', 1), pg_temp.tok('1d000000-0000-7000-8000-0000000000d3', 1)],
    'stream_d', '2030-03-01 01:05:10Z') ORDER BY message_id;
-- Worker 2 completes d1; worker 1's token stays lost; d2 and d3 come back after the head,
-- their earlier delivery counted.
SELECT * FROM whizbang.complete_work('inbox', '{1d000000-0000-7000-8000-0000000000d1}',
    ARRAY[pg_temp.tok('1d000000-0000-7000-8000-0000000000d1', 2)], 'stream_d', '2030-03-01 01:05:20Z');
SELECT * FROM whizbang.complete_work('inbox', '{1d000000-0000-7000-8000-0000000000d2}',
    ARRAY[pg_temp.tok('1d000000-0000-7000-8000-0000000000d2', 1)], 'stream_d', '2030-03-01 01:05:30Z');
SELECT * FROM pg_temp.claim('1d000000-2222-4000-8000-000000000002', '2030-03-01 01:05:40Z', 'stream_d') ORDER BY pos;

-- A retry holds its stream back and takes the rest of its run with it. Worker 1 claims e1,
-- e2; e1 fails (retryable): retry_scheduled, and e2 is released with it, so completing e2 with
-- that token is lease_lost.
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "1d000000-0000-7000-8000-0000000000e1", "StreamId": "1d5e0000-0000-7000-8000-00000000000e",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "e1"}},
  {"MessageId": "1d000000-0000-7000-8000-0000000000e2", "StreamId": "1d5e0000-0000-7000-8000-00000000000e",
   "HandlerName": "h", "MessageType": "T", "Envelope": {"step": "e2"}}
]', p_now => '2030-03-01 02:00:00Z', p_consumer => 'stream_e');
SELECT * FROM pg_temp.claim('1d000000-1111-4000-8000-000000000001', '2030-03-01 02:00:00Z', 'stream_e') ORDER BY pos;
SELECT message_id, outcome, scheduled_for > '2030-03-01 02:00:10Z' AS later
  FROM whizbang.fail_work('inbox', '{1d000000-0000-7000-8000-0000000000e1}', '{"broker down"}',
    ARRAY[pg_temp.tok('1d000000-0000-7000-8000-0000000000e1', 1)], NULL, 'stream_e', '2030-03-01 02:00:10Z');
SELECT * FROM whizbang.complete_work('inbox', '{1d000000-0000-7000-8000-0000000000e2}',
    ARRAY[pg_temp.tok('1d000000-0000-7000-8000-0000000000e2', 1)], 'stream_e', '2030-03-01 02:00:11Z');
-- Before the retry is due (the first backoff is at most 30 s) nothing of stream E goes out;
-- after it, e1 (delivery 2) and e2 (delivery 1 again: the release refunded it).
SELECT * FROM pg_temp.claim('1d000000-2222-4000-8000-000000000002', '2030-03-01 02:00:12Z', 'stream_e') ORDER BY pos;
SELECT * FROM pg_temp.claim('1d000000-2222-4000-8000-000000000002', '2030-03-01 02:01:00Z', 'stream_e') ORDER BY pos;
-- A dead-lettered message leaves its stream; the rest of the run stays the caller's.
SELECT message_id, outcome, scheduled_for FROM whizbang.fail_work('inbox', '{1d000000-0000-7000-8000-0000000000e1}',
    '{"bad data"}', ARRAY[pg_temp.tok('1d000000-0000-7000-8000-0000000000e1', 2)], '{false}', 'stream_e',
    '2030-03-01 02:01:10Z');
SELECT * FROM whizbang.complete_work('inbox', '{1d000000-0000-7000-8000-0000000000e2}',
    ARRAY[pg_temp.tok('1d000000-0000-7000-8000-0000000000e2', 2)], 'stream_e', '2030-03-01 02:01:20Z');
SELECT count(*) AS work_left FROM whizbang.wh_inbox WHERE consumer = 'stream_e';
