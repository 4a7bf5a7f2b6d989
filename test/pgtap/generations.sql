-- Retention by generations (issue 23, DESIGN §3.6 "Generations"): the dedup table partitioned by
-- first_seen_at, a store making the generation of its p_now, redeliveries found in any generation
-- (counted, fingerprints compared), stores of every kind, maintenance making generations ahead and
-- dropping the ones that left the window whole (records of waiting messages moved forward first),
-- dedup_retention_days and dedup_generations changed both ways, the SQL path a trigger forces, and
-- what operators read (dedup_generations, stats).
--
-- Time: T0 is the start of the UTC day two days before now(), so that stores at T0 .. T0 + 3 days
-- lie in the window where a store makes its own generation (0.13.0, generations_window.sql); the
-- later times (T0 + 31 days on) are reached by maintenance runs, which make their generations.
-- Generations last a day (the defaults: 30 days cut into 30 generations).
BEGIN;
SELECT plan(47);

SET LOCAL TimeZone = 'UTC';

CREATE FUNCTION pg_temp.t(p_after interval) RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT (date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') - interval '2 days' + p_after
$$;
-- The date of T0 + p_days as a generation name shows it.
CREATE FUNCTION pg_temp.gday(p_days int) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT to_char(pg_temp.t(make_interval(days => p_days)) AT TIME ZONE 'UTC', 'YYYYMMDD')
$$;
CREATE FUNCTION pg_temp.gname(p_days int) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT 'wh_message_deduplication_g' || pg_temp.gday(p_days)
$$;

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('06000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.msg(p_n int) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('MessageId', pg_temp.id(p_n), 'HandlerName', 'h', 'MessageType', 't',
                              'Envelope', jsonb_build_object('n', p_n))
$$;
CREATE FUNCTION pg_temp.gens() RETURNS TABLE (generation text, starts_at timestamptz, ends_at timestamptz, records bigint)
LANGUAGE sql AS $$ SELECT generation, starts_at, ends_at, records FROM whizbang.dedup_generations $$;
CREATE FUNCTION pg_temp.where_is(p_n int, p_consumer text DEFAULT 'gen') RETURNS text
LANGUAGE sql AS $$
    SELECT tableoid::regclass::text FROM whizbang.wh_message_deduplication
     WHERE consumer = p_consumer AND message_id = pg_temp.id(p_n)
$$;
CREATE FUNCTION pg_temp.count_of(p_n int, p_consumer text DEFAULT 'gen') RETURNS int
LANGUAGE sql AS $$
    SELECT observation_count FROM whizbang.wh_message_deduplication
     WHERE consumer = p_consumer AND message_id = pg_temp.id(p_n)
$$;
CREATE FUNCTION pg_temp.dedup_run(p_now timestamptz) RETURNS bigint LANGUAGE sql AS $$
    SELECT rows_affected FROM whizbang.perform_maintenance(p_now) WHERE task_name = 'purge_old_deduplication'
$$;

-- Start from no records and no generation (other files' records are rolled back with them).
DELETE FROM whizbang.wh_message_deduplication;
DO $$
DECLARE g text;
BEGIN
    FOR g IN SELECT generation FROM whizbang.dedup_generations LOOP
        EXECUTE format('DROP TABLE whizbang.%I', g);
    END LOOP;
END $$;

-- ---------------------------------------------------------------------------------------
-- Shape
-- ---------------------------------------------------------------------------------------
SELECT is((SELECT relkind::text FROM pg_class WHERE oid = 'whizbang.wh_message_deduplication'::regclass), 'p',
          'wh_message_deduplication is partitioned');
SELECT is((SELECT pg_get_partkeydef('whizbang.wh_message_deduplication'::regclass)), 'RANGE (first_seen_at)',
          'by range of first_seen_at');
SELECT is((SELECT value FROM whizbang.stats WHERE metric = 'dedup_generations'), 0::bigint,
          'stats: no generation before the first record');

-- ---------------------------------------------------------------------------------------
-- A store makes its generation; ids are found in every generation
-- ---------------------------------------------------------------------------------------
SELECT is(whizbang.dedup_insert(pg_temp.id(1), 'gen', '\x01', NULL, pg_temp.t('0 days 10:00:00')), 'new',
          'a first delivery is new');
SELECT results_eq('SELECT generation, starts_at, ends_at, records FROM pg_temp.gens()',
    $$VALUES (pg_temp.gname(0), pg_temp.t('0 days 00:00:00'),
              pg_temp.t('1 days 00:00:00'), 1::bigint)$$,
    'the store made the generation of its p_now: a UTC day');
SELECT is(pg_temp.where_is(1), 'whizbang.' || pg_temp.gname(0), 'the record is in it');
SELECT is(whizbang.dedup_insert(pg_temp.id(2), 'gen', NULL, NULL, pg_temp.t('1 days 00:00:00')), 'new',
          'p_now at the start of the next day');
SELECT is(whizbang.dedup_insert(pg_temp.id(3), 'gen', '\x03', NULL, pg_temp.t('2 days 23:59:59.999999')), 'new',
          'p_now at the end of the third day');
SELECT is((SELECT count(*) FROM pg_temp.gens()), 3::bigint, 'three generations');
SELECT is(pg_temp.where_is(3), 'whizbang.' || pg_temp.gname(2), 'a record of the last microsecond of a day');

SELECT is(whizbang.dedup_insert(pg_temp.id(1), 'gen', '\x01', NULL, pg_temp.t('2 days 12:00:00')), 'duplicate',
          'a redelivery whose record is in the oldest generation is a duplicate');
SELECT is(pg_temp.count_of(1), 2, 'and is counted there');
SELECT is(pg_temp.where_is(1), 'whizbang.' || pg_temp.gname(0), 'the record stays in its generation');
SELECT is(whizbang.dedup_insert(pg_temp.id(1), 'gen', '\x02', NULL, pg_temp.t('2 days 12:00:00')), 'conflict',
          'another fingerprint on an old generation''s record: conflict');
SELECT is((SELECT conflict_count FROM whizbang.wh_message_deduplication WHERE consumer = 'gen' AND message_id = pg_temp.id(1)),
          1, 'the conflict is counted on that record');
SELECT is(whizbang.dedup_insert(pg_temp.id(3), 'gen', '\x03', NULL, pg_temp.t('0 days 05:00:00')), 'duplicate',
          'an id recorded in a newer generation is a duplicate for a store with an older p_now');
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.dedup_insert_many(
        ARRAY[pg_temp.id(2), pg_temp.id(4), pg_temp.id(1), pg_temp.id(4)], 'gen', NULL, NULL, pg_temp.t('2 days 12:00:00'))$$,
    $$VALUES (pg_temp.id(2), 'duplicate'), (pg_temp.id(4), 'new'), (pg_temp.id(1), 'duplicate'), (pg_temp.id(4), 'duplicate')$$,
    'dedup_insert_many across generations, in input order');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'gen'), 4::bigint,
          'one record per id, whatever the generations');

SELECT is(whizbang.dedup_insert(pg_temp.id(11), 'gen', NULL, NULL, pg_temp.t('0 days 12:00:00')), 'new',
          'an id without a fingerprint in the oldest generation');
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(11), pg_temp.msg(5)), 'gen',
                                                            pg_temp.t('2 days 13:00:00'))$$,
    $$VALUES (pg_temp.id(11), 'duplicate'), (pg_temp.id(5), 'new')$$,
    'inbox_receive: an id of the oldest generation is a duplicate');
SELECT is((SELECT outcome FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(1)), 'gen', pg_temp.t('2 days 13:00:00'))),
          'conflict', 'inbox_receive: its fingerprint compared with an old generation''s record (recorded with another)');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(2), pg_temp.msg(6)),
                                                              p_now => pg_temp.t('2 days 13:00:00'), p_consumer => 'gen')),
          1::bigint, 'store_inbox_messages: only the id no generation holds is stored');
SELECT is(pg_temp.where_is(6), 'whizbang.' || pg_temp.gname(2), 'its record is in its p_now''s generation');

-- An expired delivery (replay_policy reject) whose id no generation holds is looked up, not written.
SELECT is(whizbang.dedup_insert(pg_temp.id(7), 'gen', NULL, pg_temp.t('-61 days 00:00:00'), pg_temp.t('2 days 12:00:00')),
          'expired', 'sent before the replay horizon and not on record: expired');
SELECT is(pg_temp.where_is(7), NULL, 'and nothing is recorded for it');
SELECT is(whizbang.dedup_insert(pg_temp.id(2), 'gen', NULL, pg_temp.t('-61 days 00:00:00'), pg_temp.t('2 days 12:00:00')),
          'duplicate', 'sent before the horizon but on record in another generation: duplicate');

-- ---------------------------------------------------------------------------------------
-- The SQL path (a trigger on the table sends stores there): same answers across generations
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER gen_noop BEFORE INSERT ON whizbang.wh_message_deduplication FOR EACH ROW EXECUTE FUNCTION pg_temp.noop();
SELECT results_eq(
    $$SELECT message_id, outcome FROM whizbang.dedup_insert_many(ARRAY[pg_temp.id(1), pg_temp.id(8), pg_temp.id(8)],
                                                                'gen', NULL, NULL, pg_temp.t('1 days 12:00:00'))$$,
    $$VALUES (pg_temp.id(1), 'duplicate'), (pg_temp.id(8), 'new'), (pg_temp.id(8), 'duplicate')$$,
    'SQL path: duplicate across generations, new recorded once');
SELECT is(pg_temp.where_is(8), 'whizbang.' || pg_temp.gname(1), 'SQL path: the record is in its generation');
SELECT is(pg_temp.count_of(1), 6, 'SQL path: the old record is counted');
DROP TRIGGER gen_noop ON whizbang.wh_message_deduplication;

-- ---------------------------------------------------------------------------------------
-- Maintenance: ahead, then whole generations leave the window
-- ---------------------------------------------------------------------------------------
SELECT is(pg_temp.dedup_run(pg_temp.t('2 days 12:00:00')), 0::bigint, 'nothing has left the window');
SELECT is((SELECT max(ends_at) FROM pg_temp.gens()), pg_temp.t('4 days 00:00:00'),
          'maintenance made the generation after today''s ahead of time');

-- Records whose message waits: id 5 in the inbox, id 9 (T0) dead-lettered.
SELECT is(whizbang.dedup_insert(pg_temp.id(9), 'gen', NULL, NULL, pg_temp.t('0 days 11:00:00')), 'new', 'id 9 recorded');
INSERT INTO whizbang.wh_dead_letters (source, message_id, consumer, handler_name, message_type, envelope, is_event,
                                      received_at, attempts, last_error, dead_lettered_at)
SELECT 'inbox', pg_temp.id(9), 'gen', 'h', 't', '{}', false, pg_temp.t('0 days 11:00:00'), 1, 'failed',
       pg_temp.t('31 days 00:00:00');

-- At T0 + 31 days 12:00 the horizon is T0 + 1 day 12:00: the first day left the window.
SELECT is(pg_temp.dedup_run(pg_temp.t('31 days 12:00:00')), 2::bigint,
          'the first generation is dropped: its records no message needs (ids 1 and 11) counted');
SELECT is((SELECT min(starts_at) FROM pg_temp.gens()), pg_temp.t('1 days 00:00:00'), 'the first day is gone');
SELECT is(pg_temp.where_is(9), 'whizbang.' || pg_temp.gname(1),
          'a dead-lettered message''s record moved forward to the oldest generation that stays');
SELECT is((SELECT first_seen_at FROM whizbang.wh_message_deduplication WHERE consumer = 'gen' AND message_id = pg_temp.id(9)),
          pg_temp.t('1 days 00:00:00'), 'its first_seen_at is that generation''s start');
SELECT is(whizbang.dedup_insert(pg_temp.id(9), 'gen', NULL, NULL, pg_temp.t('31 days 12:00:00')), 'duplicate',
          'its redelivery is still a duplicate');
SELECT is(whizbang.dedup_insert(pg_temp.id(1), 'gen', NULL, NULL, pg_temp.t('31 days 12:00:00')), 'new',
          'an id of the dropped generation whose message is done is new again');

-- dedup_retention_days both ways.
UPDATE whizbang.wh_settings SET setting_value = '60' WHERE setting_key = 'dedup_retention_days';
SELECT is(pg_temp.dedup_run(pg_temp.t('33 days 12:00:00')), 0::bigint, '60 days: nothing left the window');
UPDATE whizbang.wh_settings SET setting_value = '30' WHERE setting_key = 'dedup_retention_days';
SELECT is(pg_temp.dedup_run(pg_temp.t('33 days 12:00:00')), 4::bigint,
          'back to 30 days: the 2nd and 3rd days are dropped (ids 2, 3, 4, 8; the inbox messages 5 and 6 and the dead letter 9 move forward)');
SELECT is(pg_temp.where_is(5), 'whizbang.' || pg_temp.gname(3),
          'an inbox message''s record moved forward (to the oldest generation that stays, made ahead on the 3rd)');
SELECT is(pg_temp.where_is(9), 'whizbang.' || pg_temp.gname(3), 'and the dead letter''s, again');

-- dedup_generations: a finer cut makes the next generations shorter; existing ones keep their bounds.
UPDATE whizbang.wh_settings SET setting_value = '60' WHERE setting_key = 'dedup_generations';
-- That far ahead the generation is made by maintenance run then (a store makes none beyond now()
-- plus one period); it cuts the new period just as a store would.
SELECT lives_ok($$SELECT pg_temp.dedup_run(pg_temp.t('68 days 13:00:00'))$$, 'maintenance at T0 + 68 days');
SELECT is(whizbang.dedup_insert(pg_temp.id(10), 'gen', NULL, NULL, pg_temp.t('68 days 13:00:00')), 'new', 'recorded');
SELECT results_eq($$SELECT starts_at, ends_at FROM pg_temp.gens() WHERE generation LIKE '%' || pg_temp.gday(68) || '%'$$,
    $$VALUES (pg_temp.t('68 days 12:00:00'), pg_temp.t('69 days 00:00:00'))$$,
    'dedup_generations = 60: 12-hour generations');
UPDATE whizbang.wh_settings SET setting_value = '30' WHERE setting_key = 'dedup_generations';

SELECT is((SELECT value FROM whizbang.stats WHERE metric = 'dedup_generations'), (SELECT count(*) FROM pg_temp.gens()),
          'stats: dedup_generations counts them');
SELECT ok(NOT EXISTS (SELECT FROM pg_depend d JOIN pg_inherits i ON i.inhrelid = d.objid
                       WHERE i.inhparent = 'whizbang.wh_message_deduplication'::regclass AND d.deptype = 'e'),
          'generations are not members of the extension: pg_dump dumps them, records included');

SELECT * FROM finish();
ROLLBACK;
