-- The C++ <-> PostgreSQL boundary (DESIGN §6) through the internal whizbang._bridge_selftest:
-- every error mode arrives as a clean SQL error with its SQLSTATE (and DETAIL / HINT), C++
-- destructors run ('ok' counts leaked tracked objects: 0), and the backend survives.
BEGIN;
SELECT plan(50);

CREATE TEMP TABLE wb_backend AS SELECT pg_backend_pid() AS pid;

-- Runs p_sql and returns {sqlstate, message, detail, hint} of the error it raises (or NULL).
-- query_canceled is caught too, which pgTAP's throws_ok does not do.
CREATE FUNCTION pg_temp.error_of(p_sql text) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    v_state   text;
    v_message text;
    v_detail  text;
    v_hint    text;
BEGIN
    EXECUTE p_sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS OR query_canceled THEN
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                            v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
    RETURN ARRAY[v_state, v_message, nullif(v_detail, ''), nullif(v_hint, '')];
END
$$;

-- Calls _bridge_selftest p_count times in the modes given, catching every error; returns how
-- many calls raised.
CREATE FUNCTION pg_temp.hammer(p_modes text[], p_count int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_errors int := 0;
BEGIN
    FOR i IN 1..p_count LOOP
        BEGIN
            PERFORM whizbang._bridge_selftest(p_modes[1 + i % array_length(p_modes, 1)]);
        EXCEPTION WHEN OTHERS THEN
            v_errors := v_errors + 1;
        END;
    END LOOP;
    RETURN v_errors;
END
$$;

SELECT has_function('whizbang', '_bridge_selftest', ARRAY['text'], '_bridge_selftest(text) exists');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok: no tracked C++ object is alive at the start');

-- ---------------------------------------------------------------------------------------
-- Each mode's error
-- ---------------------------------------------------------------------------------------

SELECT throws_ok($$SELECT whizbang._bridge_selftest('cpp_error')$$, '22023', NULL,
                 'cpp_error: a C++ SqlError arrives as 22023');
SELECT is((pg_temp.error_of($$SELECT whizbang._bridge_selftest('cpp_error')$$))[3:4], ARRAY['detail', 'hint'],
          'cpp_error: DETAIL ''detail'' and HINT ''hint'' arrive too');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after cpp_error: destructors ran');

SELECT throws_ok($$SELECT whizbang._bridge_selftest('cpp_unknown')$$, 'XX000', NULL,
                 'cpp_unknown: an unexpected C++ exception arrives as XX000');
SELECT isnt((pg_temp.error_of($$SELECT whizbang._bridge_selftest('cpp_unknown')$$))[2], NULL,
            'cpp_unknown: the error has a message');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after cpp_unknown: destructors ran');

SELECT throws_ok($$SELECT whizbang._bridge_selftest('bad_alloc')$$, '53200', NULL,
                 'bad_alloc: std::bad_alloc arrives as 53200');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after bad_alloc: destructors ran');

SELECT throws_ok($$SELECT whizbang._bridge_selftest('pg_error')$$, '22012', 'division by zero',
                 'pg_error: PostgreSQL''s own error inside the guarded call arrives unchanged (22012)');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after pg_error: destructors ran');

-- A C++ exception thrown inside a pg_call callback is caught inside PG_TRY and rethrown after
-- PG_END_TRY: PostgreSQL's error stack never points at the dead frame (else the next error
-- would jump into it and crash the backend).
SELECT is(pg_temp.error_of($$SELECT whizbang._bridge_selftest('cpp_in_pg_call')$$),
          ARRAY['22023', 'bridge self-test: C++ error inside pg_call', 'detail', 'hint'],
          'cpp_in_pg_call: a SqlError thrown inside a pg_call callback arrives whole (22023, detail, hint)');
SELECT is((pg_temp.error_of($$SELECT whizbang._bridge_selftest('cpp_in_pg_call_caught')$$))[1:2],
          ARRAY['22012', 'division by zero'],
          'cpp_in_pg_call_caught: error stacks restored after an exception left a pg_call; the next PostgreSQL error arrives normally');
SELECT throws_ok($$SELECT whizbang._bridge_selftest('nested_pg_error')$$, '22012', 'division by zero',
                 'nested_pg_error: a PostgreSQL error in a pg_call inside a pg_call arrives unchanged');
SELECT throws_ok($$SELECT 1 / 0$$, '22012', NULL, 'a plain PostgreSQL error after them is caught normally');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after the pg_call modes: destructors ran');

SELECT throws_ok($$SELECT whizbang._bridge_selftest('nope')$$, '22023', NULL, 'an unknown mode raises 22023');
SELECT throws_ok($$SELECT whizbang._bridge_selftest('')$$, '22023', NULL, 'an empty mode raises 22023');
SELECT throws_ok($$SELECT whizbang._bridge_selftest(NULL)$$, '22023', NULL, 'a NULL mode raises 22023');
SELECT throws_ok($$SELECT whizbang._bridge_selftest('OK')$$, '22023', NULL, 'modes are case-sensitive: OK raises 22023');
SELECT throws_ok($$SELECT whizbang._bridge_selftest(1)$$, '42883', NULL, 'an integer mode does not resolve (42883)');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after the unknown modes: destructors ran');

-- The same errors caught by PL/pgSQL, again and again.
SELECT is(pg_temp.hammer(ARRAY['cpp_error', 'cpp_unknown', 'bad_alloc', 'pg_error', 'nope'], 5000), 5000,
          '5,000 calls in the five error modes all raise');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after 5,000 caught errors: no leaked object');
SELECT is(pg_temp.hammer(ARRAY['ok', 'cpp_error', 'ok', 'pg_error'], 4000), 2000,
          '4,000 calls alternating ok and errors: exactly the 2,000 error calls raise');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after the mixed loop: no leaked object');

SELECT is(pg_temp.hammer(ARRAY['cpp_in_pg_call', 'cpp_in_pg_call_caught', 'nested_pg_error'], 3000), 3000,
          '3,000 calls throwing inside pg_call callbacks all raise, each caught by PL/pgSQL');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after the pg_call loop: no leaked object');
SELECT is((pg_temp.error_of($$SELECT whizbang.partition_of('00000000-0000-4000-8000-000000000001', 0)$$))[1],
          '22023', 'a whizbang error after the pg_call loop still arrives with its SQLSTATE');

-- An error after successful calls in the same statement.
SELECT throws_ok($$SELECT whizbang._bridge_selftest(m) FROM (VALUES ('ok'), ('ok'), ('pg_error'), ('ok')) v(m)$$,
                 '22012', NULL, 'an error after successful calls in one statement arrives');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after the multi-row statement');

-- ---------------------------------------------------------------------------------------
-- PostgreSQL's own errors raised inside whizbang's write path arrive with their SQLSTATE:
-- in a read-only transaction a dedup write is refused (25006) and nothing is written.
-- ---------------------------------------------------------------------------------------

SAVEPOINT read_only;
SET LOCAL transaction_read_only = on;
SELECT throws_ok($$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-0000000000b1', 'bridge_ro')$$,
                 '25006', NULL, 'dedup_insert of a new id in a read-only transaction raises 25006');
SELECT throws_ok($$SELECT * FROM whizbang.dedup_insert_many(
                     ARRAY['00000000-0000-4000-8000-0000000000b2', '00000000-0000-4000-8000-0000000000b3']::uuid[],
                     'bridge_ro')$$,
                 '25006', NULL, 'dedup_insert_many of new ids in a read-only transaction raises 25006');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'bridge_ro'), 0::bigint,
          'nothing was written in the read-only transaction');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after the read-only errors');
ROLLBACK TO SAVEPOINT read_only;
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-0000000000b1', 'bridge_ro'), 'new',
          'after the read-only savepoint the same call works and the id is new');

-- A statement timeout that fires while whizbang's C++ code runs is a clean 57014.
CREATE TEMP TABLE bridge_batch AS
SELECT array_agg(md5('bridge' || i)::uuid) AS ids FROM generate_series(1, 200000) i;
SAVEPOINT timeout;
SET LOCAL statement_timeout = '30ms';
SELECT is((pg_temp.error_of($$SELECT count(*) FROM bridge_batch b, whizbang.dedup_insert_many(b.ids, 'bridge_timeout')$$))[1],
          '57014', 'a statement timeout inside dedup_insert_many (200,000 new ids) arrives as 57014');
SET LOCAL statement_timeout = 0;
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'bridge_timeout'), 0::bigint,
          'the cancelled batch wrote nothing');
ROLLBACK TO SAVEPOINT timeout;
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after the cancelled call');

-- ---------------------------------------------------------------------------------------
-- Errors from the other SQL-callable functions are clean too, and leak nothing
-- ---------------------------------------------------------------------------------------

SELECT throws_ok($$SELECT whizbang.fingerprint('{"a":1}', ARRAY['a..b'])$$, '22023', NULL,
                 'fingerprint path error from the C++ core arrives as 22023');
SELECT throws_ok($$SELECT whizbang.uuid_v7('1960-01-01+00')$$, '22008', NULL, 'uuid_v7 range error arrives as 22008');
SELECT throws_ok($$SELECT whizbang.partition_of('00000000-0000-4000-8000-000000000001', 0)$$, '22023', NULL,
                 'partition_of error arrives as 22023');
SELECT throws_ok($$SELECT * FROM whizbang.dedup_insert_many(ARRAY[NULL]::uuid[])$$, '22004', NULL,
                 'dedup_insert_many element error arrives as 22004');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok after errors of the other functions');

-- ---------------------------------------------------------------------------------------
-- The backend survived all of it
-- ---------------------------------------------------------------------------------------

SELECT is((SELECT 1), 1, 'SELECT 1 works after every error');
SELECT is(pg_backend_pid(), (SELECT pid FROM wb_backend), 'still the same backend');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-0000000000b9', 'bridge_after'), 'new',
          'dedup_insert works after every error');
SELECT is(whizbang._bridge_selftest('ok'), 0::bigint, 'ok at the end: no leaked object');
SELECT is(whizbang.version(), (SELECT extversion FROM pg_extension WHERE extname = 'whizbang'),
          'version() works at the end');

SELECT * FROM finish();
ROLLBACK;
