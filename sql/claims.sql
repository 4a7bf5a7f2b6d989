-- claim_work, complete_work, renew_leases, release_work (DESIGN §3.4): leases, fencing tokens,
-- attempts, the outcome words, partitions and consumers. Consumers 'claim_*', ids 1c000000-....
SET client_min_messages = warning;
SET IntervalStyle = 'postgres';
\set SHOW_CONTEXT never

-- Lease tokens come from a sequence shared by the whole database, so they are shown as their
-- number among this test's tokens (token_no 1 is its first), and a lease as its length.
-- Every claim is recorded in c.
CREATE TEMP TABLE c (message_id uuid, lease_token bigint);
CREATE FUNCTION pg_temp.token_no(p_token bigint) RETURNS bigint LANGUAGE sql
  AS $$ SELECT count(DISTINCT lease_token) + 1 FROM c WHERE lease_token < p_token $$;
-- The token of the n-th claim of a message, to pass back to the work functions.
CREATE FUNCTION pg_temp.tok(p_message_id uuid, p_nth int) RETURNS bigint LANGUAGE sql
  AS $$ SELECT lease_token FROM c WHERE message_id = p_message_id ORDER BY lease_token OFFSET p_nth - 1 LIMIT 1 $$;

-- A store makes the dedup generation of its p_now only up to one period ahead of the clock, and
-- none that would already have left the window (0.13.0): the generations of this file's
-- simulated day are made first, as an application simulating another time would.
SELECT count(*) > 0 AS generations_made FROM whizbang.perform_maintenance(p_now => '2030-02-01 00:00:00Z');
-- Three messages of consumer claim_a, due one second apart, and one of consumer claim_b.
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "1c000000-0000-7000-8000-000000000003", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": 3},
   "ScheduledFor": "2030-02-01 00:00:02Z"},
  {"MessageId": "1c000000-0000-7000-8000-000000000001", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": 1}},
  {"MessageId": "1c000000-0000-7000-8000-000000000002", "HandlerName": "h", "MessageType": "T", "Envelope": {"n": 2},
   "ScheduledFor": "2030-02-01 00:00:01Z"}
]', p_now => '2030-02-01 00:00:00Z', p_consumer => 'claim_a');
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "1c000000-0000-7000-8000-0000000000b1", "HandlerName": "h", "MessageType": "T", "Envelope": {}}
]', p_now => '2030-02-01 00:00:00Z', p_consumer => 'claim_b');

-- 00:00:10, worker A, at most 2 rows, 60 s lease: the two due earliest, in due order, under
-- one token; attempts 1 (this delivery); inbox rows have no destination.
WITH r AS (SELECT * FROM whizbang.claim_work('1c000000-aaaa-4000-8000-00000000000a', 'inbox', 2, 60,
                                             p_now => '2030-02-01 00:00:10Z', p_consumer => 'claim_a') WITH ORDINALITY),
     rec AS (INSERT INTO c SELECT message_id, lease_token FROM r)
SELECT ordinality AS pos, source, message_id, handler_name, destination, message_type, envelope, attempts, consumer,
       pg_temp.token_no(lease_token), lease_expiry - '2030-02-01 00:00:10Z' AS lease
  FROM r ORDER BY ordinality;

-- 00:00:20, worker B: the leased rows are not handed out again; it gets the third, with a
-- larger token and the default lease of 300 s.
WITH r AS (SELECT * FROM whizbang.claim_work('1c000000-bbbb-4000-8000-00000000000b', 'inbox',
                                             p_now => '2030-02-01 00:00:20Z', p_consumer => 'claim_a') WITH ORDINALITY),
     rec AS (INSERT INTO c SELECT message_id, lease_token FROM r)
SELECT ordinality AS pos, message_id, attempts, pg_temp.token_no(lease_token),
       lease_expiry - '2030-02-01 00:00:20Z' AS lease
  FROM r ORDER BY ordinality;

-- Nothing is left for a third worker; consumer claim_b's message was never offered to claim_a.
SELECT count(*) AS claimed FROM whizbang.claim_work('1c000000-cccc-4000-8000-00000000000c', 'inbox',
                                                    p_now => '2030-02-01 00:00:30Z', p_consumer => 'claim_a');
SELECT message_id, consumer FROM whizbang.claim_work('1c000000-cccc-4000-8000-00000000000c', 'inbox',
                                                     p_now => '2030-02-01 00:00:30Z', p_consumer => 'claim_b');

-- complete_work with the current token: completed (message and work row gone, dedup record
-- kept). Again: not_found. Another claim's token: lease_lost, and nothing changes.
SELECT * FROM whizbang.complete_work('inbox', '{1c000000-0000-7000-8000-000000000001}',
    ARRAY[pg_temp.tok('1c000000-0000-7000-8000-000000000001', 1)],
    'claim_a', '2030-02-01 00:00:40Z');
SELECT * FROM whizbang.complete_work('inbox', '{1c000000-0000-7000-8000-000000000001}',
    ARRAY[pg_temp.tok('1c000000-0000-7000-8000-000000000001', 1)],
    'claim_a', '2030-02-01 00:00:41Z');
SELECT * FROM whizbang.complete_work('inbox', '{1c000000-0000-7000-8000-000000000002}',
    ARRAY[pg_temp.tok('1c000000-0000-7000-8000-000000000003', 1)],
    'claim_a', '2030-02-01 00:00:42Z');
SELECT (SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'claim_a') AS inbox_rows,
       (SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'claim_a') AS dedup_records;
-- The wrong consumer does not find the message.
SELECT * FROM whizbang.complete_work('inbox', '{1c000000-0000-7000-8000-000000000002}',
    ARRAY[pg_temp.tok('1c000000-0000-7000-8000-000000000002', 1)],
    'claim_b', '2030-02-01 00:00:43Z');

-- A lease that lapsed still completes with its token while nobody re-claimed the row:
-- …002's 60 s lease ended at 00:01:10; at 00:02:00 worker A completes it.
SELECT * FROM whizbang.complete_work('inbox', '{1c000000-0000-7000-8000-000000000002}',
    ARRAY[pg_temp.tok('1c000000-0000-7000-8000-000000000002', 1)],
    'claim_a', '2030-02-01 00:02:00Z');

-- A lapsed lease that was re-claimed is lost. …003's lease (300 s) ends at 00:05:20; at
-- 00:06 worker C claims it: its second delivery, a new token.
WITH r AS (SELECT * FROM whizbang.claim_work('1c000000-cccc-4000-8000-00000000000c', 'inbox', 10, 60,
                                             p_now => '2030-02-01 00:06:00Z', p_consumer => 'claim_a') WITH ORDINALITY),
     rec AS (INSERT INTO c SELECT message_id, lease_token FROM r)
SELECT ordinality AS pos, message_id, attempts, pg_temp.token_no(lease_token) FROM r ORDER BY ordinality;
-- Worker B wakes up: with its old token every call answers lease_lost and changes nothing.
SELECT 'complete_work' AS call, * FROM whizbang.complete_work('inbox', '{1c000000-0000-7000-8000-000000000003}',
    ARRAY[pg_temp.tok('1c000000-0000-7000-8000-000000000003', 1)],
    'claim_a', '2030-02-01 00:06:10Z')
UNION ALL
SELECT 'fail_work', message_id, outcome FROM whizbang.fail_work('inbox', '{1c000000-0000-7000-8000-000000000003}',
    '{"timeout"}', ARRAY[pg_temp.tok('1c000000-0000-7000-8000-000000000003', 1)],
    NULL, 'claim_a', '2030-02-01 00:06:10Z')
UNION ALL
SELECT 'renew_leases', * FROM whizbang.renew_leases('inbox', '{1c000000-0000-7000-8000-000000000003}',
    ARRAY[pg_temp.tok('1c000000-0000-7000-8000-000000000003', 1)],
    60, 'claim_a', '2030-02-01 00:06:10Z')
UNION ALL
SELECT 'release_work', * FROM whizbang.release_work('inbox', '{1c000000-0000-7000-8000-000000000003}',
    ARRAY[pg_temp.tok('1c000000-0000-7000-8000-000000000003', 1)],
    'claim_a', '2030-02-01 00:06:10Z')
ORDER BY call;

-- Worker C renews its lease at 00:06:50 for 120 s (to 00:08:50): a claim at 00:08 (past the
-- original lease end 00:07:00) finds nothing.
SELECT * FROM whizbang.renew_leases('inbox', '{1c000000-0000-7000-8000-000000000003}',
    ARRAY[pg_temp.tok('1c000000-0000-7000-8000-000000000003', 2)],
    120, 'claim_a', '2030-02-01 00:06:50Z');
SELECT count(*) AS claimed FROM whizbang.claim_work('1c000000-dddd-4000-8000-00000000000d', 'inbox',
                                                    p_now => '2030-02-01 00:08:00Z', p_consumer => 'claim_a');
-- It releases the message: the lease is cleared and the delivery refunded, so the next claim
-- (at once, the message stays due) is delivery 2 again.
SELECT * FROM whizbang.release_work('inbox', '{1c000000-0000-7000-8000-000000000003}',
    ARRAY[pg_temp.tok('1c000000-0000-7000-8000-000000000003', 2)],
    'claim_a', '2030-02-01 00:08:10Z');
WITH r AS (SELECT * FROM whizbang.claim_work('1c000000-dddd-4000-8000-00000000000d', 'inbox',
                                             p_now => '2030-02-01 00:08:10Z', p_consumer => 'claim_a') WITH ORDINALITY),
     rec AS (INSERT INTO c SELECT message_id, lease_token FROM r)
SELECT ordinality AS pos, message_id, attempts, pg_temp.token_no(lease_token) FROM r ORDER BY ordinality;
-- A NULL token array skips the fencing check (administration): it completes whoever holds it.
SELECT * FROM whizbang.complete_work('inbox', '{1c000000-0000-7000-8000-000000000003,1c000000-0000-7000-8000-000000000099}',
                                     NULL, 'claim_a', '2030-02-01 00:08:20Z') ORDER BY message_id;
-- renew_leases and release_work of a message that is gone: not_found.
SELECT * FROM whizbang.renew_leases('inbox', '{1c000000-0000-7000-8000-000000000003}', '{1}', 60, 'claim_a',
                                    '2030-02-01 00:08:30Z');
SELECT * FROM whizbang.release_work('inbox', '{1c000000-0000-7000-8000-000000000003}', '{1}', 'claim_a',
                                    '2030-02-01 00:08:30Z');
-- Results keep the input order, one row per input id.
SELECT r.ordinality AS pos, r.message_id, r.outcome
  FROM whizbang.complete_work('inbox', '{1c000000-0000-7000-8000-0000000000b1,1c000000-0000-7000-8000-000000000009}',
                              NULL, 'claim_b', '2030-02-01 00:08:30Z') WITH ORDINALITY r
 ORDER BY r.ordinality;

-- Partitions: eligibility is partition_of(coalesce(StreamId, MessageId), p_partition_count)
-- = ANY(p_partitions). Eight messages over 4 partitions; a worker of partitions {0, 1} gets
-- exactly the messages of those partitions.
SELECT count(*) AS stored FROM whizbang.store_inbox_messages(
  (SELECT jsonb_agg(jsonb_build_object('MessageId', format('1c000000-0000-7000-8000-0000000001%s', lpad(i::text, 2, '0')),
                                       'HandlerName', 'h', 'MessageType', 'T', 'Envelope', '{}'::jsonb) ORDER BY i)
     FROM generate_series(1, 8) i),
  p_now => '2030-02-01 00:00:00Z', p_partition_count => 4, p_consumer => 'claim_parts');
SELECT message_id, partition_number,
       partition_number = whizbang.partition_of(message_id, 4) AS stored_partition_matches
  FROM whizbang.claim_work('1c000000-eeee-4000-8000-00000000000e', 'inbox', p_partitions => '{0,1}',
                           p_partition_count => 4, p_now => '2030-02-01 00:01:00Z', p_consumer => 'claim_parts')
 ORDER BY message_id;
SELECT bool_and(whizbang.partition_of(message_id, 4) IN (2, 3)) AS rest_in_other_partitions, count(*) AS rest
  FROM whizbang.claim_work('1c000000-ffff-4000-8000-00000000000f', 'inbox', p_now => '2030-02-01 00:01:00Z',
                           p_consumer => 'claim_parts');

-- Bad arguments are errors that change nothing.
SELECT * FROM whizbang.claim_work(NULL, 'inbox', p_consumer => 'claim_a');
\echo :SQLSTATE
SELECT * FROM whizbang.claim_work('1c000000-aaaa-4000-8000-00000000000a', 'inbx', p_consumer => 'claim_a');
\echo :SQLSTATE
SELECT * FROM whizbang.claim_work('1c000000-aaaa-4000-8000-00000000000a', 'inbox', 0, p_consumer => 'claim_a');
\echo :SQLSTATE
SELECT * FROM whizbang.claim_work('1c000000-aaaa-4000-8000-00000000000a', 'inbox', p_lease_seconds => 0,
                                  p_consumer => 'claim_a');
\echo :SQLSTATE
SELECT * FROM whizbang.claim_work('1c000000-aaaa-4000-8000-00000000000a', 'inbox', p_partitions => '{{0},{1}}',
                                  p_consumer => 'claim_a');
\echo :SQLSTATE
SELECT * FROM whizbang.complete_work('inbox', '{1c000000-0000-7000-8000-000000000001}', '{1,2}', 'claim_a');
\echo :SQLSTATE
SELECT * FROM whizbang.complete_work('inbox', '{NULL}', NULL, 'claim_a');
\echo :SQLSTATE
SELECT * FROM whizbang.renew_leases('inbox', '{1c000000-0000-7000-8000-000000000001}', NULL, 60, 'claim_a');
\echo :SQLSTATE
SELECT * FROM whizbang.renew_leases('inbox', '{1c000000-0000-7000-8000-000000000001}', '{1}', 0, 'claim_a');
\echo :SQLSTATE
