-- Documented dedup behaviour (DESIGN §1.1, §2, §3.1, §3.6): outcomes, counters, consumers as
-- scopes, the replay horizon and replay_policy, and rollback leaving a message retryable.
--
-- Times that matter are passed explicitly (p_now, p_sent_at), in UTC.
-- Consumers are selected with COLLATE "default" so comparisons with literals work whatever
-- collation the table's consumer column has.
BEGIN;
SELECT plan(91);

-- Stores at the simulated p_now of 2024-06-30 find their generation made by maintenance then
-- (0.13.0: a store makes none that has left the window).
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2024-06-30 00:00:00+00'); END $$;

CREATE FUNCTION pg_temp.record_of(p_consumer text, p_id uuid) RETURNS TABLE(observation_count int, conflict_count int)
LANGUAGE sql AS $$
    SELECT observation_count, conflict_count FROM whizbang.wh_message_deduplication
     WHERE consumer = p_consumer AND message_id = p_id
$$;
CREATE FUNCTION pg_temp.rows_of(p_consumer text) RETURNS bigint
LANGUAGE sql AS $$ SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = p_consumer $$;

-- ---------------------------------------------------------------------------------------
-- The seed's case: the same message twice
-- ---------------------------------------------------------------------------------------

SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000a001', 'seed', NULL, NULL, '2024-06-30 12:00:00+00'),
          'new', 'first delivery is new');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000a001', 'seed', NULL, NULL, '2024-06-30 12:05:00+00'),
          'duplicate', 'second delivery is duplicate');
SELECT is(pg_temp.rows_of('seed'), 1::bigint, 'one record for the message');
SELECT results_eq(
    $$SELECT consumer COLLATE "default", message_id, first_seen_at, observation_count, conflict_count, fingerprint
        FROM whizbang.wh_message_deduplication WHERE consumer = 'seed'$$,
    $$VALUES ('seed'::text, '00000000-0000-4000-8000-00000000a001'::uuid, '2024-06-30 12:00:00+00'::timestamptz,
              2, 0, NULL::bytea)$$,
    'the record: first_seen_at of the first delivery, two observations, no conflict, no fingerprint');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000a001', 'seed'), 'duplicate',
          'a third delivery with default arguments is duplicate too');
SELECT results_eq($$SELECT * FROM pg_temp.record_of('seed', '00000000-0000-4000-8000-00000000a001')$$,
                  $$VALUES (3, 0)$$, 'three observations');

SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000a002'), 'new',
          'the default consumer is the empty string: new');
SELECT is((SELECT consumer COLLATE "default" FROM whizbang.wh_message_deduplication
            WHERE message_id = '00000000-0000-4000-8000-00000000a002'), '',
          'the default consumer is stored as ''''');
SELECT is((SELECT first_seen_at FROM whizbang.wh_message_deduplication
            WHERE message_id = '00000000-0000-4000-8000-00000000a002'), now(),
          'p_now defaults to now()');

-- ---------------------------------------------------------------------------------------
-- Repeats inside one batch; output order
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000b003', '00000000-0000-4000-8000-00000000b001',
              '00000000-0000-4000-8000-00000000b003', '00000000-0000-4000-8000-00000000b002']::uuid[], 'batch')$$,
    $$VALUES ('00000000-0000-4000-8000-00000000b003'::uuid, 'new'),
             ('00000000-0000-4000-8000-00000000b001'::uuid, 'new'),
             ('00000000-0000-4000-8000-00000000b003'::uuid, 'duplicate'),
             ('00000000-0000-4000-8000-00000000b002'::uuid, 'new')$$,
    'one row per input in input order; a repeated id is duplicate after its first occurrence');
SELECT is(pg_temp.rows_of('batch'), 3::bigint, 'three distinct ids, three records');
SELECT results_eq($$SELECT * FROM pg_temp.record_of('batch', '00000000-0000-4000-8000-00000000b003')$$,
                  $$VALUES (2, 0)$$, 'the repeated id was observed twice');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000b002', '00000000-0000-4000-8000-00000000b004',
              '00000000-0000-4000-8000-00000000b001']::uuid[], 'batch')$$,
    ARRAY['duplicate', 'new', 'duplicate'],
    'a second batch: ids on record are duplicate, the others new');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000b005', '00000000-0000-4000-8000-00000000b005']::uuid[], 'batch')
      UNION ALL
      SELECT whizbang.dedup_insert('00000000-0000-4000-8000-00000000b005', 'batch')$$,
    ARRAY['new', 'duplicate', 'duplicate'],
    'dedup_insert and dedup_insert_many share the same records');
SELECT results_eq($$SELECT * FROM pg_temp.record_of('batch', '00000000-0000-4000-8000-00000000b005')$$,
                  $$VALUES (3, 0)$$, 'observation_count counts batch and single deliveries together');

-- ---------------------------------------------------------------------------------------
-- Changed payload: conflict
-- ---------------------------------------------------------------------------------------

CREATE TEMP TABLE fp AS
SELECT whizbang.fingerprint('{"order": 17, "amount": 10.00, "meta": {"traceId": "t-1"}}', ARRAY['meta.traceId']) AS v1,
       whizbang.fingerprint('{"meta": {"traceId": "t-2"}, "amount": 10, "order": 17}', ARRAY['meta.traceId']) AS v1_again,
       whizbang.fingerprint('{"order": 17, "amount": 20.00, "meta": {"traceId": "t-3"}}', ARRAY['meta.traceId']) AS v2;

SELECT is((SELECT v1 = v1_again FROM fp), true, 'equal payloads (other key order, 10.00 vs 10, ignored trace id) fingerprint alike');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000c001', 'pay', (SELECT v1 FROM fp)), 'new',
          'payload v1: new');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000c001', 'pay', (SELECT v1_again FROM fp)), 'duplicate',
          'the same payload again: duplicate');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000c001', 'pay', (SELECT v2 FROM fp)), 'conflict',
          'a changed payload under the same id: conflict');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000c001', 'pay', NULL), 'duplicate',
          'a delivery without fingerprint: duplicate (nothing to compare)');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000c001', 'pay', (SELECT v2 FROM fp)), 'conflict',
          'the changed payload again: conflict again');
SELECT results_eq($$SELECT * FROM pg_temp.record_of('pay', '00000000-0000-4000-8000-00000000c001')$$,
                  $$VALUES (5, 2)$$, 'five observations, two of them conflicts');
SELECT is((SELECT fingerprint FROM whizbang.wh_message_deduplication
            WHERE consumer = 'pay' AND message_id = '00000000-0000-4000-8000-00000000c001'),
          (SELECT v1 FROM fp), 'the first fingerprint stays on record');

-- An id recorded without fingerprint keeps none: a conflict needs two non-null fingerprints.
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000c002', 'pay'), 'new', 'recorded without fingerprint');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000c002', 'pay', (SELECT v1 FROM fp)), 'duplicate',
          'a later fingerprint is not a conflict');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000c002', 'pay', (SELECT v2 FROM fp)), 'duplicate',
          'nor is another one after that: the record still has no fingerprint');
SELECT results_eq($$SELECT * FROM pg_temp.record_of('pay', '00000000-0000-4000-8000-00000000c002')$$,
                  $$VALUES (3, 0)$$, 'three observations, no conflict');

-- The same in batches, against the record and inside the batch.
SELECT results_eq(
    $$SELECT r.outcome FROM fp, whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000c001', '00000000-0000-4000-8000-00000000c003',
              '00000000-0000-4000-8000-00000000c003', '00000000-0000-4000-8000-00000000c003']::uuid[],
        'pay', ARRAY[fp.v1, fp.v1, fp.v2, fp.v1_again]) AS r$$,
    ARRAY['duplicate', 'new', 'conflict', 'duplicate'],
    'batch: same payload as on record is duplicate; a changed payload repeated in the batch is conflict');
SELECT results_eq($$SELECT * FROM pg_temp.record_of('pay', '00000000-0000-4000-8000-00000000c003')$$,
                  $$VALUES (3, 1)$$, 'batch: three observations of the new id, one conflict');
SELECT results_eq($$SELECT * FROM pg_temp.record_of('pay', '00000000-0000-4000-8000-00000000c001')$$,
                  $$VALUES (6, 2)$$, 'batch: the id on record gained one observation');

-- ---------------------------------------------------------------------------------------
-- Consumers are separate scopes
-- ---------------------------------------------------------------------------------------

SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000d001', 'billing'), 'new', 'billing: new');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000d001', 'shipping'), 'new',
          'shipping: the same id is new for another consumer');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000d001', ''), 'new',
          'the default consumer: new as well');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000d001', 'Billing'), 'new',
          'consumer names are compared exactly: Billing is not billing');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000d001', 'billing'), 'duplicate',
          'billing again: duplicate');
SELECT results_eq(
    $$SELECT consumer COLLATE "default", observation_count FROM whizbang.wh_message_deduplication
       WHERE message_id = '00000000-0000-4000-8000-00000000d001' ORDER BY consumer COLLATE "C"$$,
    $$VALUES ('', 1), ('Billing', 1), ('billing', 2), ('shipping', 1)$$,
    'one record per consumer; only billing saw the id twice');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000d001', '00000000-0000-4000-8000-00000000d002']::uuid[], 'audit')$$,
    ARRAY['new', 'new'], 'batch for a fresh consumer: all new');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000d001', 'shipping', '\x01'::bytea), 'duplicate',
          'a fingerprint in one consumer ...');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000d001', 'billing', '\x02'::bytea), 'duplicate',
          '... is not compared with another consumer''s');

-- ---------------------------------------------------------------------------------------
-- Replay horizon: p_sent_at older than now - dedup_retention_days (default 30)
-- ---------------------------------------------------------------------------------------

SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e001', 'replay', NULL,
                                '2024-05-30 12:00:00+00', '2024-06-30 12:00:00+00'),
          'expired', 'sent 31 days before now: expired');
SELECT is(pg_temp.rows_of('replay'), 0::bigint, 'expired: nothing recorded');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e001', 'replay', NULL,
                                '2024-05-30 12:00:00+00', '2024-06-30 12:00:00+00'),
          'expired', 'the same old message again: still expired (it was never recorded)');
SELECT is(pg_temp.rows_of('replay'), 0::bigint, 'still nothing recorded');

SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e002', 'replay', NULL,
                                '2024-05-31 12:00:00+00', '2024-06-30 12:00:00+00'),
          'new', 'sent exactly 30 days before now is not older than the horizon: new');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e003', 'replay', NULL,
                                '2024-05-31 11:59:59.999999+00', '2024-06-30 12:00:00+00'),
          'expired', 'sent 30 days and 1 microsecond before now: expired');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e004', 'replay', NULL,
                                '2024-07-01 00:00:00+00', '2024-06-30 12:00:00+00'),
          'new', 'sent in the future: new');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e005', 'replay', NULL,
                                '2024-06-29 12:00:00+00', '2024-06-30 12:00:00+00'),
          'new', 'sent one day ago: new');
SELECT is(pg_temp.rows_of('replay'), 3::bigint, 'only the three new messages were recorded');

SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e007', 'replay', NULL,
                                '-infinity', '2024-06-30 12:00:00+00'),
          'expired', 'p_sent_at = -infinity is older than any horizon: expired');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e008', 'replay', NULL,
                                'infinity', '2024-06-30 12:00:00+00'),
          'new', 'p_sent_at = infinity is never older than the horizon: new');
SELECT is(pg_temp.rows_of('replay'), 4::bigint, 'the -infinity delivery was not recorded, the infinity one was');

-- Expired but still on record: duplicate or conflict whatever p_sent_at says.
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e005', 'replay', NULL,
                                '2020-01-01 00:00:00+00', '2024-06-30 12:00:00+00'),
          'duplicate', 'an old p_sent_at for an id on record: duplicate');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e006', 'replay', '\x0a'::bytea), 'new',
          'record an id with a fingerprint');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e006', 'replay', '\x0b'::bytea,
                                '2020-01-01 00:00:00+00', '2024-06-30 12:00:00+00'),
          'conflict', 'an old p_sent_at with a changed payload for an id on record: conflict');
SELECT results_eq($$SELECT * FROM pg_temp.record_of('replay', '00000000-0000-4000-8000-00000000e005')$$,
                  $$VALUES (2, 0)$$, 'the old duplicate was counted');
SELECT results_eq($$SELECT * FROM pg_temp.record_of('replay', '00000000-0000-4000-8000-00000000e006')$$,
                  $$VALUES (2, 1)$$, 'the old conflict was counted');

-- The same in a batch.
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000e010', '00000000-0000-4000-8000-00000000e005',
              '00000000-0000-4000-8000-00000000e011', '00000000-0000-4000-8000-00000000e012']::uuid[],
        'replay', NULL,
        ARRAY['2024-01-01 00:00:00+00', '2024-01-01 00:00:00+00', '2024-06-30 00:00:00+00', NULL]::timestamptz[],
        '2024-06-30 12:00:00+00')$$,
    $$VALUES ('00000000-0000-4000-8000-00000000e010'::uuid, 'expired'),
             ('00000000-0000-4000-8000-00000000e005'::uuid, 'duplicate'),
             ('00000000-0000-4000-8000-00000000e011'::uuid, 'new'),
             ('00000000-0000-4000-8000-00000000e012'::uuid, 'new')$$,
    'batch: old and unknown is expired, old and on record is duplicate, recent or unknown p_sent_at is new');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication
            WHERE consumer = 'replay' AND message_id = '00000000-0000-4000-8000-00000000e010'), 0::bigint,
          'batch: the expired id was not recorded');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000e020', '00000000-0000-4000-8000-00000000e020']::uuid[],
        'replay', NULL, ARRAY['2024-06-30 00:00:00+00', '2024-01-01 00:00:00+00']::timestamptz[],
        '2024-06-30 12:00:00+00')$$,
    ARRAY['new', 'duplicate'],
    'batch: a recent delivery records the id, an old repeat after it is duplicate');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000e022', '00000000-0000-4000-8000-00000000e022',
              '00000000-0000-4000-8000-00000000e022', '00000000-0000-4000-8000-00000000e022']::uuid[],
        'replay', ARRAY[NULL, '\x01', '\x02', NULL]::bytea[],
        ARRAY['2024-01-01 00:00:00+00', '2024-06-30 00:00:00+00', '2024-01-01 00:00:00+00', NULL]::timestamptz[],
        '2024-06-30 12:00:00+00')$$,
    ARRAY['expired', 'new', 'conflict', 'duplicate'],
    'batch: an old first occurrence is expired, the first recent one records the id (new), later ones compare with it');
SELECT results_eq($$SELECT * FROM pg_temp.record_of('replay', '00000000-0000-4000-8000-00000000e022')$$,
                  $$VALUES (3, 1)$$, 'batch: the expired occurrence is not counted, the other three are');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000e021', '00000000-0000-4000-8000-00000000e021']::uuid[],
        'replay', NULL, ARRAY['2024-01-01 00:00:00+00', '2024-01-02 00:00:00+00']::timestamptz[],
        '2024-06-30 12:00:00+00')$$,
    ARRAY['expired', 'expired'],
    'batch: an old id repeated in the batch stays expired');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication
            WHERE consumer = 'replay' AND message_id = '00000000-0000-4000-8000-00000000e021'), 0::bigint,
          'batch: the repeated old id was not recorded');

-- The horizon follows dedup_retention_days.
UPDATE whizbang.wh_settings SET setting_value = '1' WHERE setting_key = 'dedup_retention_days';
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e030', 'replay', NULL,
                                '2024-06-28 12:00:00+00', '2024-06-30 12:00:00+00'),
          'expired', 'dedup_retention_days = 1: sent two days ago is expired');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e031', 'replay', NULL,
                                '2024-06-30 00:00:00+00', '2024-06-30 12:00:00+00'),
          'new', 'dedup_retention_days = 1: sent twelve hours ago is new');
DELETE FROM whizbang.wh_settings WHERE setting_key = 'dedup_retention_days';
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e030', 'replay', NULL,
                                '2024-06-28 12:00:00+00', '2024-06-30 12:00:00+00'),
          'new', 'after deleting the setting row the default 30 days applies again: new');
UPDATE whizbang.wh_settings SET setting_value = '365' WHERE setting_key = 'dedup_retention_days';
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e032', 'replay', NULL,
                                '2024-01-01 00:00:00+00', '2024-06-30 12:00:00+00'),
          'expired', 'an UPDATE finds no deleted row to change: the default 30 days still applies');
INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type, description)
VALUES ('dedup_retention_days', '365', 'integer', 'Days to retain message deduplication entries')
ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value;
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e032', 'replay', NULL,
                                '2024-01-01 00:00:00+00', '2024-06-30 12:00:00+00'),
          'new', 'dedup_retention_days = 365 (the seed''s upsert): sent six months ago is new');
DELETE FROM whizbang.wh_settings WHERE setting_key = 'dedup_retention_days';

-- replay_policy = accept records old messages normally.
UPDATE whizbang.wh_settings SET setting_value = 'accept' WHERE setting_key = 'replay_policy';
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e040', 'replay', NULL,
                                '2020-01-01 00:00:00+00', '2024-06-30 12:00:00+00'),
          'new', 'replay_policy accept: an old message is new');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e040', 'replay', NULL,
                                '2020-01-01 00:00:00+00', '2024-06-30 12:00:00+00'),
          'duplicate', 'replay_policy accept: the old message again is duplicate');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000e041', '00000000-0000-4000-8000-00000000e041']::uuid[],
        'replay', ARRAY['\x01', '\x02']::bytea[], ARRAY['2020-01-01 00:00:00+00', '2020-01-01 00:00:00+00']::timestamptz[],
        '2024-06-30 12:00:00+00')$$,
    ARRAY['new', 'conflict'], 'replay_policy accept: an old batch is recorded and compared normally');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication
            WHERE consumer = 'replay' AND message_id IN ('00000000-0000-4000-8000-00000000e040',
                                                         '00000000-0000-4000-8000-00000000e041')), 2::bigint,
          'replay_policy accept: the old messages are on record');
UPDATE whizbang.wh_settings SET setting_value = 'reject' WHERE setting_key = 'replay_policy';

-- A settings change rolled back to a savepoint is no longer in effect (whizbang caches settings).
SAVEPOINT policy_change;
UPDATE whizbang.wh_settings SET setting_value = 'accept' WHERE setting_key = 'replay_policy';
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e043', 'replay', NULL,
                                '2020-01-01 00:00:00+00', '2024-06-30 12:00:00+00'),
          'new', 'inside a savepoint that sets replay_policy accept: an old message is new');
ROLLBACK TO SAVEPOINT policy_change;
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e044', 'replay', NULL,
                                '2020-01-01 00:00:00+00', '2024-06-30 12:00:00+00'),
          'expired', 'after ROLLBACK TO SAVEPOINT the policy is reject again: an old message is expired');

SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e042', 'replay', NULL,
                                '2020-01-01 00:00:00+00', '2024-06-30 12:00:00+00'),
          'expired', 'replay_policy back to reject: an old unknown message is expired again');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000e040', 'replay', NULL,
                                '2020-01-01 00:00:00+00', '2024-06-30 12:00:00+00'),
          'duplicate', 'replay_policy reject: the message recorded under accept is duplicate');

-- ---------------------------------------------------------------------------------------
-- A rolled-back transaction leaves the message retryable (DESIGN §1.1)
-- ---------------------------------------------------------------------------------------

SAVEPOINT attempt_1;
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000f001', 'rollback'), 'new',
          'inside the attempt: new');
SELECT is(pg_temp.rows_of('rollback'), 1::bigint, 'inside the attempt: recorded');
ROLLBACK TO SAVEPOINT attempt_1;
SELECT is(pg_temp.rows_of('rollback'), 0::bigint, 'after rollback: no record survives');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000f001', 'rollback'), 'new',
          'after rollback: the same id is new again');
SELECT results_eq($$SELECT * FROM pg_temp.record_of('rollback', '00000000-0000-4000-8000-00000000f001')$$,
                  $$VALUES (1, 0)$$, 'after rollback: the retry is the first observation');

SAVEPOINT attempt_2;
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000f001', '00000000-0000-4000-8000-00000000f002',
              '00000000-0000-4000-8000-00000000f003']::uuid[], 'rollback')$$,
    ARRAY['duplicate', 'new', 'new'], 'inside a batch attempt: duplicate, new, new');
ROLLBACK TO SAVEPOINT attempt_2;
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000f001', '00000000-0000-4000-8000-00000000f002',
              '00000000-0000-4000-8000-00000000f003']::uuid[], 'rollback')$$,
    ARRAY['duplicate', 'new', 'new'], 'after the rolled-back batch: the same outcomes again');
SELECT results_eq($$SELECT * FROM pg_temp.record_of('rollback', '00000000-0000-4000-8000-00000000f001')$$,
                  $$VALUES (2, 0)$$, 'the rolled-back observation was not counted');

-- A failing business write after the dedup insert rolls the dedup record back with it.
SELECT throws_ok(
    $sql$DO $do$
      BEGIN
          PERFORM whizbang.dedup_insert('00000000-0000-4000-8000-00000000f004', 'rollback');
          RAISE EXCEPTION 'business write failed' USING ERRCODE = 'check_violation';
      END
      $do$$sql$,
    '23514', 'business write failed', 'a business write fails after the dedup insert');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000f004', 'rollback'), 'new',
          'the message of the failed attempt is new on retry');

-- A released (kept) savepoint keeps the record.
SAVEPOINT attempt_3;
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000f005', 'rollback'), 'new', 'kept attempt: new');
RELEASE SAVEPOINT attempt_3;
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000f005', 'rollback'), 'duplicate',
          'after the savepoint is released: duplicate');

-- The expired path writes nothing even transiently visible afterwards, in a savepoint too.
SAVEPOINT attempt_4;
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000f006', 'rollback', NULL,
                                '2020-01-01 00:00:00+00', '2024-06-30 12:00:00+00'), 'expired',
          'expired inside a savepoint');
ROLLBACK TO SAVEPOINT attempt_4;
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000f006', 'rollback'), 'new',
          'the expired id is new when it arrives with a recent p_sent_at');

SELECT results_eq(
    $$SELECT message_id, observation_count, conflict_count FROM whizbang.wh_message_deduplication
       WHERE consumer = 'rollback' ORDER BY message_id$$,
    $$VALUES ('00000000-0000-4000-8000-00000000f001'::uuid, 2, 0),
             ('00000000-0000-4000-8000-00000000f002'::uuid, 1, 0),
             ('00000000-0000-4000-8000-00000000f003'::uuid, 1, 0),
             ('00000000-0000-4000-8000-00000000f004'::uuid, 1, 0),
             ('00000000-0000-4000-8000-00000000f005'::uuid, 2, 0),
             ('00000000-0000-4000-8000-00000000f006'::uuid, 1, 0)$$,
    'the final records of the rollback scenarios');

SELECT * FROM finish();
ROLLBACK;
