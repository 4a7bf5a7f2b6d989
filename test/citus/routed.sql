-- The inbox, outbox and work calls through the coordinator of a distributed install (issue 14,
-- docs/scaleout.md), run by test/citus/pgtap.sh after whizbang.distribute(4): each call is
-- split by shard and runs next to its shards; what comes back is what one server answers.
-- Messages are picked to land on different shards (and so, with 2 workers, different nodes).
SET client_min_messages = warning;
BEGIN;
SELECT plan(52);

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.sid(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('5eeeeeee-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.msg(p_n int, p_stream int DEFAULT NULL, p_extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('MessageId', pg_temp.id(p_n), 'HandlerName', 'h', 'Destination', 'd',
                              'MessageType', 't', 'Envelope', jsonb_build_object('n', p_n))
           || CASE WHEN p_stream IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('StreamId', pg_temp.sid(p_stream)) END
           || p_extra
$$;
-- The shard of a message (its stream's partition, or its own).
CREATE FUNCTION pg_temp.shard(p_key uuid) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT get_shard_id_for_distribution_column('whizbang.wh_inbox', whizbang.partition_of(p_key, 10000))
$$;

-- ---- the messages span shards
SELECT cmp_ok((SELECT count(DISTINCT pg_temp.shard(pg_temp.id(n))) FROM generate_series(1, 12) n)::int, '>=', 3,
              'messages 1..12 fall into at least 3 of the 4 shards');

-- ---- store_inbox_messages / inbox_receive
SELECT results_eq(
    $$SELECT message_id, stream_id, was_newly_created FROM whizbang.store_inbox_messages(jsonb_build_array(
        pg_temp.msg(1), pg_temp.msg(2, 1), pg_temp.msg(3, 1), pg_temp.msg(4), pg_temp.msg(1), pg_temp.msg(5, 2),
        pg_temp.msg(6)), p_consumer => 'rt', p_now => '2030-01-01 00:00:00+00')$$,
    $$VALUES (pg_temp.id(1), NULL::uuid, true), (pg_temp.id(2), pg_temp.sid(1), true), (pg_temp.id(3), pg_temp.sid(1), true),
             (pg_temp.id(4), NULL, true), (pg_temp.id(5), pg_temp.sid(2), true), (pg_temp.id(6), NULL, true)$$,
    'store: the new messages, in input order, the repeat inside the batch left out');
SELECT is_empty(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1), pg_temp.msg(2, 1)),
                                                  p_consumer => 'rt', p_now => '2030-01-01 00:00:01+00')$$,
    'store: the same messages again return nothing');
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(1), pg_temp.msg(7),
        pg_temp.msg(7), pg_temp.msg(2, 1)), 'rt', '2030-01-01 00:00:02+00')$$,
    $$VALUES (pg_temp.id(1), 'duplicate'), (pg_temp.id(7), 'new'), (pg_temp.id(7), 'duplicate'), (pg_temp.id(2), 'duplicate')$$,
    'inbox_receive: one outcome per element, in input order');
SELECT is((SELECT count(*)::int FROM whizbang.wh_inbox WHERE consumer = 'rt'), 7, 'seven messages stored');
SELECT is((SELECT count(*)::int FROM whizbang.wh_inbox i JOIN whizbang.wh_inbox w USING (message_id, consumer, partition_number)
            WHERE i.consumer = 'rt' AND i.partition_number = whizbang.partition_of(coalesce(i.stream_id, i.message_id), 10000)),
          7, 'each message and its work row share the partition of its stream (or its own)');
SELECT is((SELECT count(*)::int FROM whizbang.wh_message_deduplication d JOIN whizbang.wh_inbox i
             USING (message_id, consumer, partition_number) WHERE d.consumer = 'rt'),
          7, 'each dedup record is colocated with its message');
SELECT results_eq(
    $$SELECT stream_id, last_seq::int FROM whizbang.wh_inbox_streams WHERE consumer = 'rt' ORDER BY 1$$,
    $$VALUES (pg_temp.sid(1), 2), (pg_temp.sid(2), 1)$$, 'stream counters numbered on their stream''s node');

-- ---- claim_work
CREATE TEMP TABLE c1 AS SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', 'inbox',
    p_consumer => 'rt', p_now => '2030-01-01 00:00:10+00');
SELECT results_eq($$SELECT message_id FROM c1 ORDER BY 1$$,
    $$VALUES (pg_temp.id(1)), (pg_temp.id(2)), (pg_temp.id(3)), (pg_temp.id(4)), (pg_temp.id(5)), (pg_temp.id(6)), (pg_temp.id(7))$$,
    'claim: every due row from every shard');
SELECT is((SELECT count(DISTINCT lease_token)::int FROM c1), 1, 'claim: one token for the whole claim, on every node');
SELECT ok((SELECT bool_and(c.partition_number = w.partition_number) FROM c1 c JOIN whizbang.wh_inbox w
             USING (message_id, consumer, partition_number)), 'claim: rows come with their partition');
SELECT results_eq(
    $$SELECT message_id FROM c1 WHERE stream_id = pg_temp.sid(1) ORDER BY lease_token, message_id$$,
    $$VALUES (pg_temp.id(2)), (pg_temp.id(3))$$, 'claim: a stream''s rows come in arrival order');
SELECT is_empty($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000002', 'inbox',
    p_consumer => 'rt', p_now => '2030-01-01 00:00:11+00')$$, 'claim: leased rows are not handed out again');

-- ---- complete / fail / renew / release / cancel
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.complete_work('inbox',
        ARRAY[pg_temp.id(1), pg_temp.id(99), pg_temp.id(4), pg_temp.id(2)],
        ARRAY[(SELECT lease_token FROM c1 LIMIT 1), 1, -1, (SELECT lease_token FROM c1 LIMIT 1)], 'rt',
        '2030-01-01 00:00:20+00')$$,
    $$VALUES (pg_temp.id(1), 'completed'), (pg_temp.id(99), 'not_found'), (pg_temp.id(4), 'lease_lost'),
             (pg_temp.id(2), 'completed')$$,
    'complete: outcomes in input order, each from the node of its row');
SELECT is((SELECT count(*)::int FROM whizbang.wh_inbox WHERE consumer = 'rt' AND message_id IN (pg_temp.id(1), pg_temp.id(2))),
          0, 'complete: the messages are gone');
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(4), pg_temp.id(6)], ARRAY['e4', 'e6'],
        ARRAY[(SELECT lease_token FROM c1 LIMIT 1), (SELECT lease_token FROM c1 LIMIT 1)], ARRAY[true, false], 'rt',
        '2030-01-01 00:00:21+00')$$,
    $$VALUES (pg_temp.id(4), 'retry_scheduled'), (pg_temp.id(6), 'dead_lettered')$$, 'fail: a retry and a dead letter');
SELECT results_eq(
    $$SELECT source, message_id, last_error, partition_number FROM whizbang.wh_dead_letters WHERE consumer = 'rt'$$,
    $$VALUES ('inbox', pg_temp.id(6), 'e6', whizbang.partition_of(pg_temp.id(6), 10000))$$,
    'fail: the dead letter is kept on its message''s node');
SELECT is(whizbang.retry_dead_letters(ARRAY(SELECT dead_letter_id FROM whizbang.wh_dead_letters WHERE consumer = 'rt')), 1,
          'retry_dead_letters: the dead letter is work again');
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.renew_leases('inbox', ARRAY[pg_temp.id(5)],
        ARRAY[(SELECT lease_token FROM c1 LIMIT 1)], 60, 'rt', '2030-01-01 00:00:22+00')$$,
    $$VALUES (pg_temp.id(5), 'renewed')$$, 'renew_leases through the coordinator');
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.release_work('inbox', ARRAY[pg_temp.id(5), pg_temp.id(3)],
        ARRAY[(SELECT lease_token FROM c1 LIMIT 1), (SELECT lease_token FROM c1 LIMIT 1)], 'rt', '2030-01-01 00:00:23+00')$$,
    $$VALUES (pg_temp.id(5), 'released'), (pg_temp.id(3), 'released')$$, 'release_work through the coordinator');
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.cancel_work('inbox', ARRAY[pg_temp.id(7)], 'rt', '2030-01-01 00:00:24+00')$$,
    $$VALUES (pg_temp.id(7), 'leased')$$, 'cancel_work: a leased row is left alone');

-- ---- queues, peek, stats, leases
SELECT results_eq(
    $$SELECT source, consumer, pending::int, leased::int, scheduled::int, dead_lettered::int
        FROM whizbang.queues('2030-01-01 00:00:30+00') WHERE consumer = 'rt'$$,
    $$VALUES ('inbox', 'rt', 3, 1, 1, 0)$$,
    'queues: released 3 and 5, the retried dead letter 6 pending; 7 leased; 4 scheduled for its retry');
SELECT results_eq(
    $$SELECT message_id FROM whizbang.peek('inbox', 'rt', 100, '2030-01-01 00:00:30+00') ORDER BY 1$$,
    $$VALUES (pg_temp.id(3)), (pg_temp.id(5)), (pg_temp.id(6))$$, 'peek: the pending rows of every shard');
SELECT is((SELECT value FROM whizbang.stats() WHERE metric = 'inbox_leased') >= 1, true, 'stats: counts every shard');
SELECT is((SELECT count(*)::int FROM whizbang.leases WHERE consumer = 'rt'), 1, 'leases: the live lease of row 7');

-- ---- the outbox
SELECT results_eq(
    $$SELECT message_id, was_newly_created FROM whizbang.store_outbox_messages(jsonb_build_array(
        pg_temp.msg(21), pg_temp.msg(22, 3), pg_temp.msg(23, 3), pg_temp.msg(21), pg_temp.msg(24)),
        p_now => '2030-01-01 00:00:00+00')$$,
    $$VALUES (pg_temp.id(21), true), (pg_temp.id(22), true), (pg_temp.id(23), true), (pg_temp.id(21), false),
             (pg_temp.id(24), true)$$,
    'store_outbox_messages: one row per element, in input order');
CREATE TEMP TABLE o1 AS SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000003', 'outbox',
    p_max_per_stream => 1, p_now => '2030-01-01 00:00:10+00');
SELECT results_eq($$SELECT message_id FROM o1 ORDER BY 1$$,
    $$VALUES (pg_temp.id(21)), (pg_temp.id(22)), (pg_temp.id(24))$$,
    'relay claim: stream 3 gives its head only (p_max_per_stream 1)');
SELECT is(whizbang.complete_outbox_published(ARRAY(SELECT message_id FROM o1) || ARRAY[NULL::uuid, pg_temp.id(21)]), 3,
          'complete_outbox_published: the count of every node');
SELECT results_eq($$SELECT message_id FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000003', 'outbox',
    p_now => '2030-01-01 00:00:11+00')$$, $$VALUES (pg_temp.id(23))$$, 'relay claim: then the next row of stream 3');

-- ---- dedup through the coordinator
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.dedup_insert_many(ARRAY[pg_temp.id(31), pg_temp.id(32), pg_temp.id(31),
        pg_temp.id(33)], 'rt-dedup', ARRAY['\x01', '\x01', '\x02', NULL]::bytea[])$$,
    $$VALUES (pg_temp.id(31), 'new'), (pg_temp.id(32), 'new'), (pg_temp.id(31), 'conflict'), (pg_temp.id(33), 'new')$$,
    'dedup_insert_many: outcomes in input order across shards');
SELECT is(whizbang.dedup_insert(pg_temp.id(32), 'rt-dedup', '\x01'), 'duplicate', 'dedup_insert: a duplicate');
SELECT is((SELECT observation_count FROM whizbang.wh_message_deduplication
            WHERE consumer = 'rt-dedup' AND message_id = pg_temp.id(32)), 2, 'dedup: the observation was counted');

-- ---- maintenance
SELECT whizbang.dedup_insert(pg_temp.id(40 + n), 'rt-old', NULL, NULL, '2020-01-01 00:00:00+00') FROM generate_series(1, 6) n;
-- Old (before p_now - 30 days) and not kept for a waiting message: every record but those of 'rt'.
CREATE TEMP TABLE purgeable AS SELECT count(*)::int AS n FROM whizbang.wh_message_deduplication
 WHERE first_seen_at < '2029-12-02'::timestamptz AND consumer <> 'rt';
SELECT results_eq(
    $$SELECT task_name, rows_affected::int, status FROM whizbang.perform_maintenance('2030-01-01 00:00:00+00')
       WHERE task_name = 'purge_old_deduplication'$$,
    $$SELECT 'purge_old_deduplication'::text, (SELECT n FROM purgeable), 'ok'::text$$,
    'perform_maintenance: every shard purges its old records, counted over all shards');
SELECT is((SELECT count(*)::int FROM whizbang.wh_message_deduplication WHERE consumer = 'rt-old'), 0,
          'maintenance: the six old records are gone');
SELECT is((SELECT count(*)::int FROM whizbang.wh_message_deduplication WHERE consumer = 'rt'), 7,
          'maintenance: records of waiting messages are kept');
-- Idempotency keys (their own colocation group: purged once per node) and dead letters.
SELECT whizbang.idempotency_complete('rt-keys-' || n, 'k' || n, t.token, '{}'::jsonb, interval '1 hour', '2020-01-01 00:00:00+00')
  FROM generate_series(1, 8) n,
       LATERAL whizbang.idempotency_begin('rt-keys-' || n, 'k' || n, p_now => '2020-01-01 00:00:00+00') t;
SELECT is((SELECT count(*)::int FROM whizbang.wh_idempotency_keys WHERE scope LIKE 'rt-keys-%'), 8, 'eight keys in eight scopes');
SELECT whizbang.fail_work('inbox', ARRAY[pg_temp.id(5)], ARRAY['old'], NULL, ARRAY[false], 'rt', '2030-01-01 00:00:40+00');
UPDATE whizbang.wh_dead_letters SET dead_lettered_at = '2020-01-01 00:00:00+00' WHERE consumer = 'rt';
SELECT results_eq(
    $$SELECT task_name, rows_affected::int FROM whizbang.perform_maintenance('2030-01-01 00:00:00+00')
       WHERE task_name IN ('purge_expired_idempotency', 'purge_dead_letters') ORDER BY 1$$,
    $$VALUES ('purge_dead_letters'::text, 1), ('purge_expired_idempotency', 16)$$,
    'perform_maintenance: every node purges its idempotency keys once (8 results, then 8 tombstones) and its dead letters');
SELECT is((SELECT count(*)::int FROM whizbang.wh_idempotency_keys WHERE scope LIKE 'rt-keys-%'), 0, 'the keys are gone');
SELECT is((SELECT count(*)::int FROM whizbang.wh_dead_letters WHERE consumer = 'rt'), 0, 'the old dead letter is gone');

-- ---- operating the queues (0.16.0): requeue / reschedule routed by id, dead letters by filter
SELECT is((SELECT count(*)::int FROM whizbang.store_inbox_messages(jsonb_build_array(
        pg_temp.msg(41), pg_temp.msg(42), pg_temp.msg(43, 4), pg_temp.msg(44)),
        p_consumer => 'op', p_now => '2030-01-01 00:00:00+00')), 4, 'operator: four messages on several shards');
CREATE TEMP TABLE op1 AS SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000004', 'inbox',
    p_now => '2030-01-01 00:00:00+00', p_consumer => 'op', p_lease_seconds => 3600);
SELECT results_eq(
    $$SELECT message_id, outcome, scheduled_for FROM whizbang.reschedule('inbox',
        ARRAY[pg_temp.id(41), pg_temp.id(42), pg_temp.id(99)], '2030-01-01 01:00:00+00', 'op', true,
        '2030-01-01 00:00:10+00')$$,
    $$VALUES (pg_temp.id(41), 'rescheduled', '2030-01-01 01:00:00+00'::timestamptz),
             (pg_temp.id(42), 'rescheduled', '2030-01-01 01:00:00+00'), (pg_temp.id(99), 'not_found', NULL)$$,
    'reschedule: outcomes in input order, each from the node of its row (leases taken over)');
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.requeue('inbox', ARRAY[pg_temp.id(43), pg_temp.id(44)], 'op',
        p_now => '2030-01-01 00:00:10+00')$$,
    $$VALUES (pg_temp.id(43), 'leased'), (pg_temp.id(44), 'leased')$$, 'requeue: live leases are leased');
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.complete_work('inbox', ARRAY[pg_temp.id(41), pg_temp.id(43)],
        ARRAY[(SELECT lease_token FROM op1 WHERE message_id = pg_temp.id(41)),
              (SELECT lease_token FROM op1 WHERE message_id = pg_temp.id(43))], 'op', '2030-01-01 00:00:11+00')$$,
    $$VALUES (pg_temp.id(41), 'lease_lost'), (pg_temp.id(43), 'completed')$$,
    'requeue: the holder of a taken-over lease is lease_lost, the other completes');
SELECT results_eq(
    $$SELECT message_id FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000005', 'inbox',
        p_now => '2030-01-01 01:00:00+00', p_consumer => 'op') ORDER BY 1$$,
    $$VALUES (pg_temp.id(41)), (pg_temp.id(42))$$, 'reschedule: the rows are handed out at p_at');
SELECT is((SELECT count(*)::int FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(44)], ARRAY['x'], NULL, ARRAY[false], 'op',
                                                        '2030-01-01 00:00:12+00') WHERE outcome = 'dead_lettered'), 1,
          'fixture: a dead letter of op');
SELECT is(whizbang.retry_dead_letters_matching(p_consumer => 'op'), 1, 'retry_dead_letters_matching: through the coordinator');
SELECT is((SELECT count(*)::int FROM whizbang.fail_work('inbox', ARRAY[pg_temp.id(44)], ARRAY['x'], NULL, ARRAY[false], 'op',
                                                        '2030-01-01 00:00:13+00') WHERE outcome = 'dead_lettered'), 1,
          'fixture: dead-lettered again');
SELECT is(whizbang.discard_dead_letters_matching(p_consumer => 'op', p_message_type => 't'), 1,
          'discard_dead_letters_matching: through the coordinator');
SELECT is((SELECT count(*)::int FROM whizbang.wh_dead_letters WHERE consumer = 'op'), 0, 'the dead letter is gone');

-- ---- a call for one partition touches one node
SELECT is((SELECT count(DISTINCT get_shard_id_for_distribution_column('whizbang.wh_inbox', p))::int
             FROM unnest(ARRAY[whizbang.partition_of(pg_temp.sid(1), 10000)]) p), 1, 'one partition: one shard');
SELECT is((SELECT count(*)::int FROM whizbang.wh_partitions), 10000, 'wh_partitions routes partitions 0..9999');
SELECT throws_ok(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(90)), p_partition_count => 20000)$$,
    '22023', NULL, 'a partition count above 10000 is refused on a distributed install');
SELECT is((SELECT count(*)::int FROM whizbang.wh_inbox WHERE message_id = pg_temp.id(90)), 0, '... and nothing is written');

SELECT * FROM finish();
ROLLBACK;
