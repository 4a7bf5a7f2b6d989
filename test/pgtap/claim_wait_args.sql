-- claim_work's p_wait (0.7.0, DESIGN §3.4, issue 12), what one session can see of it, in either
-- lease store: its bad values (22004, 22023) and the isolation levels it refuses (0A000), each
-- refused before anything is written; '0' claims and returns at once, as before 0.7.0; with
-- nothing to claim the call sleeps about p_wait and returns no rows; a claimable row is
-- returned at once; a row scheduled within the wait ends it (the claim's time is p_now plus
-- the time waited, not the clock); statement_timeout cuts a longer wait short, without error.
-- Wake-ups by another session's commit are the isolation specs' (claim_wait_*).
--
-- The times are behaviour, not speed: "sleeps" is at least 150 ms of a 200 ms wait, "at once"
-- is well under the wait asked for.
--
-- p_wait > 0 is refused under REPEATABLE READ and SERIALIZABLE, which a transaction chooses
-- before its first query: those checks run in transactions of their own, which write nothing
-- and commit (pgTAP keeps its count in temporary tables). The last transaction rolls back.
SET client_min_messages = warning;
-- A wait that never ends fails this file instead of hanging the suite.
SET statement_timeout = '60s';

BEGIN;
SELECT plan(22);

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.msg(p_n int, p_extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('MessageId', pg_temp.id(p_n), 'HandlerName', 'h', 'MessageType', 't',
                              'Envelope', jsonb_build_object('n', p_n)) || p_extra
$$;

-- pg_temp.writes(), pg_temp.attempt(sql) and pg_temp.fails(sql, state, pattern, description).
\ir lib/writes.sql

-- A claim of consumer p_consumer's inbox work at p_now with p_wait: how many rows it returned and
-- how long it took (wall clock).
CREATE FUNCTION pg_temp.timed_claim(p_consumer text, p_wait interval, p_now timestamptz DEFAULT now(),
                                    OUT claimed bigint, OUT ms numeric)
LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
BEGIN
    SELECT count(*) INTO claimed
      FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', 'inbox', p_consumer => p_consumer,
                               p_now => p_now, p_wait => p_wait);
    ms := round(extract(epoch FROM clock_timestamp() - t0) * 1000);
END
$$;
COMMIT;

-- ---------------------------------------------------------------------------------------
-- Isolation levels: p_wait > 0 only under READ COMMITTED (a snapshot held for the whole
-- transaction would never see the work it waits for)
-- ---------------------------------------------------------------------------------------
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', 'inbox',
                                                         p_consumer => 'cwa_none', p_wait => '1 second')$$,
                     '0A000', '%p_wait%READ COMMITTED%', 'REPEATABLE READ, p_wait 1 s: 0A000, nothing written');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', 'inbox',
                                                         p_consumer => 'cwa_none', p_wait => '1 microsecond')$$,
                     '0A000', '%p_wait%READ COMMITTED%', 'REPEATABLE READ, p_wait 1 µs: 0A000');
SELECT is((pg_temp.timed_claim('cwa_none', '0')).claimed, 0::bigint,
          'REPEATABLE READ, p_wait 0: claims as before 0.7.0');
COMMIT;

BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', 'inbox',
                                                         p_consumer => 'cwa_none', p_wait => '1 second')$$,
                     '0A000', '%p_wait%READ COMMITTED%', 'SERIALIZABLE, p_wait 1 s: 0A000, nothing written');
COMMIT;

-- ---------------------------------------------------------------------------------------
-- READ COMMITTED (the rest): bad values, and how long a call takes
-- ---------------------------------------------------------------------------------------
BEGIN;
SET LOCAL TimeZone = 'UTC';
-- Stores in the simulated time of 2031 find their generations made by maintenance then (0.13.0: a
-- store makes none further ahead than now() plus one period).
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2031-01-01 00:00:00+00'); END $$;
-- Consumer cwa_ready has one message due now: a refused call must not have claimed it.
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1)),
                                                               p_consumer => 'cwa_ready')),
          1::bigint, 'cwa_ready: one message stored');

SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', 'inbox',
                                                         p_consumer => 'cwa_ready', p_wait => NULL)$$,
                     '22004', '%p_wait must not be null%', 'p_wait NULL: 22004, nothing written');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', 'inbox',
                                                         p_consumer => 'cwa_ready', p_wait => '-1 second')$$,
                     '22023', '%p_wait must not be negative%', 'p_wait -1 s: 22023, nothing written');
SELECT pg_temp.fails($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', 'inbox',
                                                         p_consumer => 'cwa_ready', p_wait => '-1 microsecond')$$,
                     '22023', '%p_wait must not be negative%', 'p_wait -1 µs: 22023');
SELECT is((SELECT count(*) FROM whizbang.leases WHERE consumer = 'cwa_ready'), 0::bigint,
          'after the refused calls cwa_ready''s message is not leased');

-- Nothing to claim.
CREATE TEMP TABLE t AS SELECT * FROM pg_temp.timed_claim('cwa_none', '0');
SELECT is(claimed, 0::bigint, 'p_wait 0, nothing to claim: no rows') FROM t;
SELECT cmp_ok(ms, '<', 1000::numeric, 'p_wait 0, nothing to claim: returns at once, as before 0.7.0') FROM t;
DROP TABLE t;

CREATE TEMP TABLE t AS SELECT * FROM pg_temp.timed_claim('cwa_none', '200 ms');
SELECT is(claimed, 0::bigint, 'p_wait 200 ms, nothing to claim: no rows when the time is up') FROM t;
SELECT cmp_ok(ms, '>=', 150::numeric, 'p_wait 200 ms, nothing to claim: sleeps about that long') FROM t;
SELECT cmp_ok(ms, '<', 5000::numeric, 'p_wait 200 ms, nothing to claim: and then returns') FROM t;
DROP TABLE t;

-- Something to claim: no sleep at all.
CREATE TEMP TABLE t AS SELECT * FROM pg_temp.timed_claim('cwa_ready', '5 seconds');
SELECT is(claimed, 1::bigint, 'p_wait 5 s, a claimable row: claimed') FROM t;
SELECT cmp_ok(ms, '<', 2000::numeric, 'p_wait 5 s, a claimable row: returned at once') FROM t;
DROP TABLE t;
SELECT is((SELECT attempts FROM whizbang.leases WHERE consumer = 'cwa_ready'), 1,
          'its first delivery: the refused calls counted no attempt');

-- A row that falls due 300 ms into the wait, at a p_now far from the clock: the claim looks
-- again at p_now + the time waited, so it gets the row after about 300 ms (with the clock
-- instead it would sleep the whole wait).
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(
               jsonb_build_array(pg_temp.msg(2, '{"ScheduledFor": "2031-01-01 00:00:00.3Z"}')),
               p_now => '2031-01-01 00:00:00Z', p_consumer => 'cwa_later')),
          1::bigint, 'cwa_later: one message stored, due at 00:00:00.3');
CREATE TEMP TABLE t AS SELECT * FROM pg_temp.timed_claim('cwa_later', '4 seconds', '2031-01-01 00:00:00Z');
SELECT is(claimed, 1::bigint, 'p_wait 4 s, a row due 300 ms later: claimed within the wait') FROM t;
SELECT cmp_ok(ms, '>=', 250::numeric, 'p_wait 4 s, a row due 300 ms later: not before it fell due') FROM t;
SELECT cmp_ok(ms, '<', 3000::numeric, 'p_wait 4 s, a row due 300 ms later: soon after it fell due') FROM t;
DROP TABLE t;

-- A wait longer than statement_timeout ends before the timeout, with no error (a 57014 would be
-- caught here and reported).
SET LOCAL statement_timeout = '1s';
SELECT is((pg_temp.attempt($$SELECT * FROM pg_temp.timed_claim('cwa_none', '10 seconds')$$)).state, NULL,
          'p_wait 10 s under statement_timeout 1 s: returns before the timeout, without error');
SET LOCAL statement_timeout = '60s';

SELECT * FROM finish();
ROLLBACK;
