-- Bad input to whizbang.dedup_insert and whizbang.dedup_insert_many (DESIGN §1.4, §3.1):
-- every malformed call raises an ERROR with the documented SQLSTATE and writes nothing.
-- Large batches are not bad input: 100,000 elements work, more than 1,000,000 are refused.
--
-- After every call, pg_temp.rows_written(n, ...) checks that the dedup table grew by exactly
-- n rows since the previous check, whatever the consumer; after an error,
-- pg_temp.wrote_nothing(...) checks that no whizbang table took any write since then, rolled
-- back or not (pg_temp.writes() in lib/writes.sql: the error rolls back what the call wrote, so
-- counting rows afterwards could not tell).
BEGIN;
SELECT plan(99);

\ir lib/writes.sql

CREATE TEMP TABLE wb_rowcount AS
SELECT count(*) AS n, pg_temp.writes() AS writes FROM whizbang.wh_message_deduplication;

CREATE FUNCTION pg_temp.rows_written(p_expected bigint, p_description text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_now    bigint;
    v_before bigint;
BEGIN
    SELECT count(*) INTO v_now FROM whizbang.wh_message_deduplication;
    SELECT n INTO v_before FROM wb_rowcount;
    UPDATE wb_rowcount SET n = v_now, writes = pg_temp.writes();
    RETURN is(v_now - v_before, p_expected, p_description);
END
$$;

CREATE FUNCTION pg_temp.wrote_nothing(p_description text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_before text;
BEGIN
    SELECT writes INTO v_before FROM wb_rowcount;
    UPDATE wb_rowcount SET n = (SELECT count(*) FROM whizbang.wh_message_deduplication), writes = pg_temp.writes();
    RETURN is(pg_temp.writes(), v_before, p_description);
END
$$;

-- ---------------------------------------------------------------------------------------
-- dedup_insert: NULL in every argument position
-- ---------------------------------------------------------------------------------------

SELECT throws_ok(
    $$SELECT whizbang.dedup_insert(NULL::uuid, 'bad_null_id')$$,
    '22004', NULL, 'dedup_insert: NULL p_message_id raises 22004');
SELECT throws_like(
    $$SELECT whizbang.dedup_insert(NULL::uuid, 'bad_null_id')$$,
    '%p_message_id%', 'dedup_insert: the NULL p_message_id error names the parameter');
SELECT pg_temp.wrote_nothing('dedup_insert: NULL p_message_id wrote nothing');

SELECT throws_ok(
    $$SELECT whizbang.dedup_insert(p_message_id => NULL)$$,
    '22004', NULL, 'dedup_insert: NULL p_message_id in named notation raises 22004');
SELECT pg_temp.wrote_nothing('dedup_insert: named NULL p_message_id wrote nothing');

SELECT throws_ok(
    $$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-000000000001', NULL)$$,
    '22004', NULL, 'dedup_insert: NULL p_consumer raises 22004');
SELECT throws_like(
    $$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-000000000001', NULL)$$,
    '%p_consumer%', 'dedup_insert: the NULL p_consumer error names the parameter');
SELECT pg_temp.wrote_nothing('dedup_insert: NULL p_consumer wrote nothing');

SELECT throws_ok(
    $$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-000000000001', 'bad_null_now', NULL, NULL, NULL)$$,
    '22004', NULL, 'dedup_insert: NULL p_now raises 22004');
SELECT throws_like(
    $$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-000000000001', 'bad_null_now', NULL, NULL, NULL)$$,
    '%p_now%', 'dedup_insert: the NULL p_now error names the parameter');
SELECT pg_temp.wrote_nothing('dedup_insert: NULL p_now wrote nothing');

-- p_fingerprint and p_sent_at are optional: NULL is not bad input.
SELECT is(
    whizbang.dedup_insert('00000000-0000-4000-8000-000000000002', 'good_null_fp', NULL),
    'new', 'dedup_insert: NULL p_fingerprint is accepted');
SELECT pg_temp.rows_written(1, 'dedup_insert: NULL p_fingerprint wrote one row');

SELECT is(
    whizbang.dedup_insert('00000000-0000-4000-8000-000000000003', 'good_null_sent', '\x01'::bytea, NULL),
    'new', 'dedup_insert: NULL p_sent_at is accepted');
SELECT pg_temp.rows_written(1, 'dedup_insert: NULL p_sent_at wrote one row');

-- ---------------------------------------------------------------------------------------
-- dedup_insert: values out of range
-- ---------------------------------------------------------------------------------------

SELECT throws_ok(
    $$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-000000000001', 'bad_inf', NULL, NULL, 'infinity')$$,
    '22023', NULL, 'dedup_insert: p_now = infinity raises 22023');
SELECT pg_temp.wrote_nothing('dedup_insert: p_now = infinity wrote nothing');

SELECT throws_ok(
    $$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-000000000001', 'bad_inf', NULL, NULL, '-infinity')$$,
    '22023', NULL, 'dedup_insert: p_now = -infinity raises 22023');
SELECT pg_temp.wrote_nothing('dedup_insert: p_now = -infinity wrote nothing');

SELECT throws_ok(
    $$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-000000000001', repeat('c', 1025))$$,
    '22023', NULL, 'dedup_insert: a 1025-byte p_consumer raises 22023');
SELECT pg_temp.wrote_nothing('dedup_insert: a 1025-byte p_consumer wrote nothing');

-- The limit is in bytes: 513 two-byte characters (U+00E9, UTF-8 c3 a9) are 1026 bytes. The
-- character is built from its bytes so the file also runs in a SQL_ASCII database.
SELECT throws_ok(
    $$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-000000000001',
        repeat(convert_from('\xc3a9', current_setting('server_encoding')), 513))$$,
    '22023', NULL, 'dedup_insert: 513 two-byte characters (1026 bytes) in p_consumer raise 22023');
SELECT pg_temp.wrote_nothing('dedup_insert: a 1026-byte multibyte p_consumer wrote nothing');

SELECT is(
    whizbang.dedup_insert('00000000-0000-4000-8000-000000000004', repeat('c', 1024)),
    'new', 'dedup_insert: a p_consumer of exactly 1024 bytes is accepted');
SELECT pg_temp.rows_written(1, 'dedup_insert: the 1024-byte consumer wrote one row');

-- ---------------------------------------------------------------------------------------
-- dedup_insert: wrong types (rejected by PostgreSQL before the function runs)
-- ---------------------------------------------------------------------------------------

SELECT throws_ok(
    $$SELECT whizbang.dedup_insert('not-a-uuid'::uuid, 'bad_type')$$,
    '22P02', NULL, 'dedup_insert: ''not-a-uuid''::uuid raises 22P02');
SELECT pg_temp.wrote_nothing('dedup_insert: a malformed uuid wrote nothing');

SELECT throws_ok(
    $$SELECT whizbang.dedup_insert(42)$$,
    '42883', NULL, 'dedup_insert: an integer p_message_id does not resolve (42883)');
SELECT throws_ok(
    $$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-000000000001'::uuid, 'bad_type', 'abc'::text)$$,
    '42883', NULL, 'dedup_insert: a text p_fingerprint does not resolve (42883)');
SELECT throws_ok(
    $$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-000000000001'::uuid, 'bad_type', NULL, 'yesterday-ish')$$,
    '22007', NULL, 'dedup_insert: a malformed p_sent_at literal raises 22007');
SELECT pg_temp.wrote_nothing('dedup_insert: wrong types wrote nothing');

-- ---------------------------------------------------------------------------------------
-- dedup_insert_many: NULLs
-- ---------------------------------------------------------------------------------------

SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(NULL::uuid[], 'bad_many')$$,
    '22004', NULL, 'dedup_insert_many: NULL p_message_ids raises 22004');
SELECT pg_temp.wrote_nothing('dedup_insert_many: NULL p_message_ids wrote nothing');

SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000011', '00000000-0000-4000-8000-000000000012', NULL,
              '00000000-0000-4000-8000-000000000014']::uuid[], 'bad_many')$$,
    '22004', NULL, 'dedup_insert_many: a NULL element raises 22004');
SELECT throws_like(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000011', '00000000-0000-4000-8000-000000000012', NULL,
              '00000000-0000-4000-8000-000000000014']::uuid[], 'bad_many')$$,
    '%p\_message\_ids[3]%', 'dedup_insert_many: the error names the element p_message_ids[3] (1-based)');
SELECT pg_temp.wrote_nothing('dedup_insert_many: a NULL element in the middle wrote nothing');

SELECT throws_like(
    $$SELECT * FROM whizbang.dedup_insert_many(ARRAY[NULL]::uuid[], 'bad_many')$$,
    '%p\_message\_ids[1]%', 'dedup_insert_many: a single NULL element is named p_message_ids[1]');
SELECT pg_temp.wrote_nothing('dedup_insert_many: a single NULL element wrote nothing');

SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(ARRAY['00000000-0000-4000-8000-000000000011']::uuid[], NULL)$$,
    '22004', NULL, 'dedup_insert_many: NULL p_consumer raises 22004');
SELECT pg_temp.wrote_nothing('dedup_insert_many: NULL p_consumer wrote nothing');

SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(ARRAY['00000000-0000-4000-8000-000000000011']::uuid[],
                                               'bad_many', NULL, NULL, NULL)$$,
    '22004', NULL, 'dedup_insert_many: NULL p_now raises 22004');
SELECT pg_temp.wrote_nothing('dedup_insert_many: NULL p_now wrote nothing');

-- Empty input is still checked.
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many('{}'::uuid[], NULL)$$,
    '22004', NULL, 'dedup_insert_many: an empty batch with NULL p_consumer still raises 22004');
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many('{}'::uuid[], 'bad_many', NULL, NULL, NULL)$$,
    '22004', NULL, 'dedup_insert_many: an empty batch with NULL p_now still raises 22004');
SELECT pg_temp.wrote_nothing('dedup_insert_many: empty batches with NULL scalars wrote nothing');

-- NULL optional arrays and NULL elements inside them are allowed.
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000021', '00000000-0000-4000-8000-000000000022']::uuid[],
        'good_nulls', ARRAY[NULL, '\x01']::bytea[], ARRAY[NULL, NULL]::timestamptz[])$$,
    ARRAY['new', 'new'],
    'dedup_insert_many: NULL elements in p_fingerprints and p_sent_at are accepted');
SELECT pg_temp.rows_written(2, 'dedup_insert_many: NULL optional elements wrote two rows');

SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000023']::uuid[], 'good_nulls', NULL, NULL)$$,
    ARRAY['new'],
    'dedup_insert_many: NULL p_fingerprints and p_sent_at arrays are accepted');
SELECT pg_temp.rows_written(1, 'dedup_insert_many: NULL optional arrays wrote one row');

-- ---------------------------------------------------------------------------------------
-- dedup_insert_many: out of range and shape
-- ---------------------------------------------------------------------------------------

SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(ARRAY['00000000-0000-4000-8000-000000000011']::uuid[],
                                               'bad_many', NULL, NULL, 'infinity')$$,
    '22023', NULL, 'dedup_insert_many: p_now = infinity raises 22023');
SELECT pg_temp.wrote_nothing('dedup_insert_many: infinite p_now wrote nothing');

SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(ARRAY['00000000-0000-4000-8000-000000000011']::uuid[],
                                               repeat('c', 1025))$$,
    '22023', NULL, 'dedup_insert_many: a 1025-byte p_consumer raises 22023');
SELECT pg_temp.wrote_nothing('dedup_insert_many: an oversized p_consumer wrote nothing');

SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY[['00000000-0000-4000-8000-000000000011', '00000000-0000-4000-8000-000000000012'],
              ['00000000-0000-4000-8000-000000000013', '00000000-0000-4000-8000-000000000014']]::uuid[],
        'bad_many')$$,
    '2202E', NULL, 'dedup_insert_many: a two-dimensional p_message_ids raises 2202E');
SELECT pg_temp.wrote_nothing('dedup_insert_many: a 2-D p_message_ids wrote nothing');

SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000011', '00000000-0000-4000-8000-000000000012']::uuid[],
        'bad_many', ARRAY[['\x01'], ['\x02']]::bytea[])$$,
    '2202E', NULL, 'dedup_insert_many: a two-dimensional p_fingerprints raises 2202E');
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000011', '00000000-0000-4000-8000-000000000012']::uuid[],
        'bad_many', NULL, ARRAY[[now()], [now()]])$$,
    '2202E', NULL, 'dedup_insert_many: a two-dimensional p_sent_at raises 2202E');
SELECT pg_temp.wrote_nothing('dedup_insert_many: 2-D optional arrays wrote nothing');

SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000011', '00000000-0000-4000-8000-000000000012']::uuid[],
        'bad_many', ARRAY['\x01']::bytea[])$$,
    '22023', NULL, 'dedup_insert_many: p_fingerprints shorter than p_message_ids raises 22023');
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000011', '00000000-0000-4000-8000-000000000012']::uuid[],
        'bad_many', ARRAY['\x01', '\x02', '\x03']::bytea[])$$,
    '22023', NULL, 'dedup_insert_many: p_fingerprints longer than p_message_ids raises 22023');
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000011', '00000000-0000-4000-8000-000000000012']::uuid[],
        'bad_many', NULL, ARRAY[now()])$$,
    '22023', NULL, 'dedup_insert_many: p_sent_at shorter than p_message_ids raises 22023');
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000011', '00000000-0000-4000-8000-000000000012']::uuid[],
        'bad_many', ARRAY['\x01', '\x02']::bytea[], ARRAY[now(), now(), now()])$$,
    '22023', NULL, 'dedup_insert_many: p_sent_at longer than p_message_ids raises 22023');
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many('{}'::uuid[], 'bad_many', ARRAY['\x01']::bytea[])$$,
    '22023', NULL, 'dedup_insert_many: an empty batch with one fingerprint raises 22023');
SELECT pg_temp.wrote_nothing('dedup_insert_many: length mismatches wrote nothing');

-- ---------------------------------------------------------------------------------------
-- dedup_insert_many: wrong types, malformed elements
-- ---------------------------------------------------------------------------------------

SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(ARRAY[1, 2]::int[])$$,
    '42883', NULL, 'dedup_insert_many: an int[] p_message_ids does not resolve (42883)');
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(ARRAY['00000000-0000-4000-8000-000000000011']::text[])$$,
    '42883', NULL, 'dedup_insert_many: a text[] p_message_ids does not resolve (42883)');
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many('00000000-0000-4000-8000-000000000011'::uuid)$$,
    '42883', NULL, 'dedup_insert_many: a scalar uuid does not resolve (42883)');
SELECT pg_temp.wrote_nothing('dedup_insert_many: wrong types wrote nothing');

-- A malformed element in the middle: the whole call fails before anything is stored.
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000031', 'not-a-uuid', '00000000-0000-4000-8000-000000000033']::uuid[],
        'mid_batch')$$,
    '22P02', NULL, 'dedup_insert_many: a malformed uuid in the middle of a batch raises 22P02');
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        '{00000000-0000-4000-8000-000000000031,zzzz,00000000-0000-4000-8000-000000000033}', 'mid_batch')$$,
    '22P02', NULL, 'dedup_insert_many: a malformed element of an array literal raises 22P02');
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000031', NULL, '00000000-0000-4000-8000-000000000033']::uuid[],
        'mid_batch')$$,
    '22004', NULL, 'dedup_insert_many: a NULL element in the middle of a batch raises 22004');
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000031', '00000000-0000-4000-8000-000000000032',
              '00000000-0000-4000-8000-000000000033']::uuid[],
        'mid_batch', NULL, ARRAY[now(), 'bogus', now()]::timestamptz[])$$,
    '22007', NULL, 'dedup_insert_many: a malformed p_sent_at element raises 22007');
SELECT pg_temp.wrote_nothing('dedup_insert_many: malformed elements wrote nothing');
-- Nothing of the failed batches is on record: every id is still new.
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000031', '00000000-0000-4000-8000-000000000032',
              '00000000-0000-4000-8000-000000000033']::uuid[], 'mid_batch')$$,
    ARRAY['new', 'new', 'new'],
    'dedup_insert_many: after the failed batches their ids are all still new');
SELECT pg_temp.rows_written(3, 'dedup_insert_many: the corrected batch wrote three rows');

-- ---------------------------------------------------------------------------------------
-- dedup_insert_many: empty arrays
-- ---------------------------------------------------------------------------------------

SELECT is_empty(
    $$SELECT * FROM whizbang.dedup_insert_many('{}'::uuid[], 'empty')$$,
    'dedup_insert_many: an empty array returns zero rows');
SELECT is_empty(
    $$SELECT * FROM whizbang.dedup_insert_many(ARRAY[]::uuid[], 'empty', ARRAY[]::bytea[], ARRAY[]::timestamptz[])$$,
    'dedup_insert_many: empty arrays in every array argument return zero rows');
SELECT pg_temp.wrote_nothing('dedup_insert_many: empty arrays wrote nothing');

-- ---------------------------------------------------------------------------------------
-- dedup_insert_many: repeated ids inside one batch
-- ---------------------------------------------------------------------------------------

SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000042', '00000000-0000-4000-8000-000000000041',
              '00000000-0000-4000-8000-000000000042', '00000000-0000-4000-8000-000000000041',
              '00000000-0000-4000-8000-000000000042']::uuid[], 'repeat')$$,
    $$VALUES ('00000000-0000-4000-8000-000000000042'::uuid, 'new'),
             ('00000000-0000-4000-8000-000000000041'::uuid, 'new'),
             ('00000000-0000-4000-8000-000000000042'::uuid, 'duplicate'),
             ('00000000-0000-4000-8000-000000000041'::uuid, 'duplicate'),
             ('00000000-0000-4000-8000-000000000042'::uuid, 'duplicate')$$,
    'dedup_insert_many: a repeated id is new once, then duplicate, in input order');
SELECT pg_temp.rows_written(2, 'dedup_insert_many: five elements of two ids wrote two rows');
SELECT results_eq(
    $$SELECT message_id, observation_count, conflict_count FROM whizbang.wh_message_deduplication
       WHERE consumer = 'repeat' ORDER BY message_id$$,
    $$VALUES ('00000000-0000-4000-8000-000000000041'::uuid, 2, 0),
             ('00000000-0000-4000-8000-000000000042'::uuid, 3, 0)$$,
    'dedup_insert_many: repeats inside a batch count as observations');

SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000043', '00000000-0000-4000-8000-000000000043',
              '00000000-0000-4000-8000-000000000043', '00000000-0000-4000-8000-000000000043']::uuid[],
        'repeat', ARRAY['\x0a', NULL, '\x0a', '\x0b']::bytea[])$$,
    ARRAY['new', 'duplicate', 'duplicate', 'conflict'],
    'dedup_insert_many: in-batch repeats with equal / NULL / different fingerprints');
SELECT pg_temp.rows_written(1, 'dedup_insert_many: four elements of one id wrote one row');
SELECT results_eq(
    $$SELECT observation_count, conflict_count, fingerprint FROM whizbang.wh_message_deduplication
       WHERE consumer = 'repeat' AND message_id = '00000000-0000-4000-8000-000000000043'$$,
    $$VALUES (4, 1, '\x0a'::bytea)$$,
    'dedup_insert_many: the in-batch conflict is counted and the first fingerprint kept');

-- ---------------------------------------------------------------------------------------
-- dedup_insert_many: large batches
-- ---------------------------------------------------------------------------------------

CREATE TEMP TABLE big_input AS
SELECT array_agg(md5(i::text)::uuid ORDER BY i) AS ids FROM generate_series(1, 100000) AS i;

CREATE TEMP TABLE big_output AS
SELECT r.n, r.message_id, r.outcome
  FROM big_input b, whizbang.dedup_insert_many(b.ids, 'big') WITH ORDINALITY AS r(message_id, outcome, n);

SELECT is((SELECT count(*) FROM big_output), 100000::bigint,
          'dedup_insert_many: 100,000 elements return 100,000 rows');
SELECT is((SELECT count(*) FROM big_output WHERE outcome = 'new'), 100000::bigint,
          'dedup_insert_many: 100,000 distinct ids are all new');
SELECT is(
    (SELECT count(*) FROM big_output o
       JOIN (SELECT i.id, i.n FROM big_input b, unnest(b.ids) WITH ORDINALITY AS i(id, n)) AS x
         ON x.n = o.n AND x.id = o.message_id),
    100000::bigint, 'dedup_insert_many: 100,000 rows come back in input order');
SELECT pg_temp.rows_written(100000, 'dedup_insert_many: 100,000 elements wrote 100,000 rows');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'big'), 100000::bigint,
          'dedup_insert_many: the 100,000 rows belong to the consumer');

SELECT is(
    (SELECT count(*) FROM big_input b, whizbang.dedup_insert_many(b.ids, 'big') AS r WHERE r.outcome = 'duplicate'),
    100000::bigint, 'dedup_insert_many: the same 100,000 ids again are all duplicates');
SELECT pg_temp.rows_written(0, 'dedup_insert_many: the repeated 100,000 wrote no new rows');

-- The limit is 1,000,000 elements per call: one more is refused with 54000.
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        array_fill('00000000-0000-4000-8000-000000000051'::uuid, ARRAY[1000001]), 'too_big')$$,
    '54000', NULL, 'dedup_insert_many: 1,000,001 elements raise 54000');
SELECT throws_like(
    $$SELECT * FROM whizbang.dedup_insert_many(
        array_fill('00000000-0000-4000-8000-000000000051'::uuid, ARRAY[1000001]), 'too_big')$$,
    '%p\_message\_ids%', 'dedup_insert_many: the limit error names p_message_ids');
SELECT pg_temp.wrote_nothing('dedup_insert_many: 1,000,001 elements wrote nothing');
SELECT throws_ok(
    $$SELECT * FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-000000000051']::uuid[], 'too_big', NULL,
        array_fill(now(), ARRAY[1000001]))$$,
    '54000', NULL, 'dedup_insert_many: a 1,000,001-element p_sent_at is refused with 54000 too');
SELECT pg_temp.wrote_nothing('dedup_insert_many: the oversized p_sent_at wrote nothing');

-- Exactly at the limit works (one id repeated, so only one row is written).
SELECT results_eq(
    $$SELECT outcome, count(*) FROM whizbang.dedup_insert_many(
        array_fill('00000000-0000-4000-8000-000000000052'::uuid, ARRAY[1000000]), 'at_limit')
       GROUP BY outcome ORDER BY outcome$$,
    $$VALUES ('duplicate', 999999::bigint), ('new', 1::bigint)$$,
    'dedup_insert_many: exactly 1,000,000 elements are accepted');
SELECT pg_temp.rows_written(1, 'dedup_insert_many: 1,000,000 copies of one id wrote one row');
SELECT is(
    (SELECT observation_count FROM whizbang.wh_message_deduplication WHERE consumer = 'at_limit'),
    1000000, 'dedup_insert_many: all 1,000,000 copies were observed');

SELECT * FROM finish();
ROLLBACK;
