-- What a rolled-back transaction leaves of leases (DESIGN §3.8), the same in both lease stores:
-- a claim's leases go with it, a takeover's victim has its lease back, an abandoned completion
-- or release leaves the lease held, and a truncate or delete of work rows that rolls back
-- leaves their leases as they were. Savepoints stand in for the aborting transactions.
BEGIN;
SELECT plan(14);

-- Stores in the simulated time of 2030 find their generations made by maintenance then (0.13.0: a
-- store makes none further ahead than now() plus one period).
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2030-01-01 00:00:00+00'); END $$;

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.inst(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('c0000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
SELECT count(*) FROM whizbang.store_inbox_messages(
    (SELECT jsonb_agg(jsonb_build_object('MessageId', pg_temp.id(n), 'HandlerName', 'h', 'MessageType', 't',
                                         'Envelope', jsonb_build_object('n', n)))
       FROM generate_series(1, 4) n),
    NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'rb');
CREATE TEMP TABLE a AS
SELECT message_id, lease_token FROM whizbang.claim_work(pg_temp.inst(1), 'inbox', 2, 60, NULL, 10000, 100,
                                                        '2030-01-01 00:00:00+00', 'rb');
CREATE FUNCTION pg_temp.held() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM whizbang.leases l JOIN a USING (message_id, lease_token) WHERE l.consumer = 'rb'
$$;
SELECT is(pg_temp.held(), 2::bigint, 'instance 1 holds two rows');

-- A claim that rolls back hands nothing out for good.
SAVEPOINT s;
SELECT is((SELECT count(*) FROM whizbang.claim_work(pg_temp.inst(2), 'inbox', 10, 60, NULL, 10000, 100,
                                                    '2030-01-01 00:00:01+00', 'rb')), 2::bigint,
          'a second claim takes the two free rows');
ROLLBACK TO s;
SELECT is((SELECT count(*) FROM whizbang.leases WHERE consumer = 'rb'), 2::bigint,
          'rolled back: only instance 1''s two leases remain');

-- A takeover that rolls back gives the old holder its lease back.
SAVEPOINT s;
SELECT is((SELECT count(*) FROM whizbang.claim_work(pg_temp.inst(3), 'inbox', 10, 60, NULL, 10000, 100,
                                                    '2030-01-01 01:00:00+00', 'rb')), 4::bigint,
          'an hour later a claim takes all four, the two lapsed ones included');
ROLLBACK TO s;
SELECT is(pg_temp.held(), 2::bigint, 'the takeover rolled back: instance 1 holds its two rows again');

-- A completion or a release that rolls back leaves the lease held.
SAVEPOINT s;
SELECT results_eq($$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM a ORDER BY 1),
                      ARRAY(SELECT lease_token FROM a ORDER BY message_id), 'rb', '2030-01-01 00:00:02+00')$$,
                  $$VALUES ('completed'), ('completed')$$, 'instance 1 completes both');
ROLLBACK TO s;
SAVEPOINT s;
SELECT results_eq($$SELECT outcome FROM whizbang.release_work('inbox', ARRAY(SELECT message_id FROM a ORDER BY 1),
                      ARRAY(SELECT lease_token FROM a ORDER BY message_id), 'rb', '2030-01-01 00:00:02+00')$$,
                  $$VALUES ('released'), ('released')$$, 'instance 1 releases both');
ROLLBACK TO s;
SELECT is(pg_temp.held(), 2::bigint, 'completion and release rolled back: both leases held');

-- Work rows deleted or truncated by hand, rolled back: their leases are as they were.
SAVEPOINT s;
DELETE FROM whizbang.wh_inbox WHERE consumer = 'rb';
ROLLBACK TO s;
SELECT is(pg_temp.held(), 2::bigint, 'a rolled-back DELETE of the work rows leaves the leases');
SAVEPOINT s;
TRUNCATE whizbang.wh_inbox CASCADE;
ROLLBACK TO s;
SELECT is(pg_temp.held(), 2::bigint, 'a rolled-back TRUNCATE of the work table leaves the leases');
SELECT is((SELECT count(*) FROM whizbang.claim_work(pg_temp.inst(2), 'inbox', 10, 60, NULL, 10000, 100,
                                                    '2030-01-01 00:00:03+00', 'rb')), 2::bigint,
          'so another instance gets only the two free rows');

-- And committed (here: not rolled back) they end the leases: a row stored again is free.
DELETE FROM whizbang.wh_inbox WHERE consumer = 'rb' AND message_id = (SELECT message_id FROM a ORDER BY 1 LIMIT 1);
SELECT is(pg_temp.held(), 1::bigint, 'a DELETE ends the deleted row''s lease');
SELECT results_eq($$SELECT outcome FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM a ORDER BY 1),
                      ARRAY(SELECT lease_token FROM a ORDER BY message_id), 'rb', '2030-01-01 00:00:04+00')$$,
                  $$VALUES ('not_found'), ('completed')$$, 'instance 1: the deleted row is not found, the other completes');
SELECT is((SELECT count(*) FROM whizbang.leases WHERE consumer = 'rb' AND instance_id = pg_temp.inst(1)), 0::bigint,
          'instance 1 holds nothing any more');

SELECT * FROM finish();
ROLLBACK;
