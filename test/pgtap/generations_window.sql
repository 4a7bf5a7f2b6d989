-- The window a store may make generations in (issue 30 item 10). Stores make the generation of
-- their p_now when it is missing, as the extension's owner, and each generation costs every new
-- id a look-up. So when no generation holds p_now: one that would have left the retention window
-- records nothing and makes nothing (the delivery is `expired`, as one sent before the replay
-- horizon; an id on record is still a duplicate or a conflict); one beyond the generations made
-- ahead (now() plus one period) is 22023 with a hint. A generation that exists (maintenance made
-- it, at its p_now) takes the record: tests simulate another time so.
--
-- Real time here (the rule is against now()): 30 days of one-day generations, the defaults.
BEGIN;
SELECT plan(18);

SET LOCAL TimeZone = 'UTC';

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('0a000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.msg(p_n int) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('MessageId', pg_temp.id(p_n), 'HandlerName', 'h', 'MessageType', 't',
                              'Envelope', jsonb_build_object('n', p_n))
$$;
CREATE FUNCTION pg_temp.generations() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM whizbang.dedup_generations $$;

-- Start from no records and no generation.
DELETE FROM whizbang.wh_message_deduplication;
DO $$
DECLARE g text;
BEGIN
    FOR g IN SELECT generation FROM whizbang.dedup_generations LOOP
        EXECUTE format('DROP TABLE whizbang.%I', g);
    END LOOP;
END $$;

-- ---------------------------------------------------------------------------------------
-- Older than the window: expired, nothing recorded, no generation made
-- ---------------------------------------------------------------------------------------
SELECT is(whizbang.dedup_insert(pg_temp.id(1), 'win', NULL, NULL, now() - interval '40 days'), 'expired',
          'dedup_insert: a p_now whose generation has left the window is expired');
SELECT is(pg_temp.generations(), 0::bigint, 'and no generation is made for it');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'win'), 0::bigint, 'nothing recorded');
SELECT is((SELECT outcome FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(2)), 'win', now() - interval '40 days')),
          'expired', 'inbox_receive: expired');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(3)),
                                                              p_now => now() - interval '40 days', p_consumer => 'win')),
          0::bigint, 'store_inbox_messages: nothing stored');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'win'), 0::bigint, 'no inbox row either');
SELECT is(pg_temp.generations(), 0::bigint, 'still no generation');

SELECT is(whizbang.dedup_insert(pg_temp.id(4), 'win', '\x04'), 'new', 'a delivery at now() is recorded');
SELECT is(whizbang.dedup_insert(pg_temp.id(4), 'win', '\x04', NULL, now() - interval '40 days'), 'duplicate',
          'an id on record is a duplicate, whatever the p_now');
SELECT is(whizbang.dedup_insert(pg_temp.id(4), 'win', '\x05', NULL, now() - interval '40 days'), 'conflict',
          'or a conflict');
SELECT is((SELECT observation_count FROM whizbang.wh_message_deduplication WHERE consumer = 'win' AND message_id = pg_temp.id(4)),
          3, 'and counted');

-- A backfill loop over past days makes no more generations than the window holds.
SELECT is((SELECT count(*) FILTER (WHERE outcome = 'new')
             FROM generate_series(1, 100) d,
                  LATERAL (SELECT whizbang.dedup_insert(pg_temp.id(100 + d), 'win', NULL, NULL,
                                                        now() - d * interval '1 day') AS outcome) o),
          30::bigint, 'a loop over 100 past days records the 30 inside the window');
SELECT cmp_ok(pg_temp.generations(), '<=', 31::bigint, 'and makes at most the window''s generations');

-- ---------------------------------------------------------------------------------------
-- Further ahead than the generations made ahead: 22023
-- ---------------------------------------------------------------------------------------
SELECT throws_ok($$SELECT whizbang.dedup_insert(pg_temp.id(5), 'win', NULL, NULL, now() + interval '3 days')$$,
                 '22023', NULL, 'a p_now beyond now() + one period is 22023');
SELECT is((SELECT count(*) FROM whizbang.dedup_generations WHERE starts_at > now() + interval '2 days'), 0::bigint,
          'and makes no generation');
SELECT is(whizbang.dedup_insert(pg_temp.id(6), 'win', NULL, NULL, now() + interval '1 day'), 'new',
          'the next period is made ahead by a store as by maintenance');
SELECT is((SELECT count(*) FROM whizbang.perform_maintenance(now() + interval '10 days')), 4::bigint,
          'maintenance at a later p_now makes the generations ahead of it');
SELECT is(whizbang.dedup_insert(pg_temp.id(7), 'win', NULL, NULL, now() + interval '10 days'), 'new',
          'a store finds them (a test simulating a later time)');

SELECT * FROM finish();
ROLLBACK;
