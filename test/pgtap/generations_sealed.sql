-- Sealed dedup generations (0.14.0, issue 31 item 3; DESIGN §3.6 "Generations"): maintenance
-- seals the generations whose span ended (a membership filter in whizbang.wh_dedup_filters, the
-- trigger wh_sealed), stores find redeliveries in them and record new ids beside them, SQL writes
-- into one are refused, a backfill into one unseals it, maintenance drops a sealed generation
-- with its filter, and who may seal and unseal.
-- Time: yesterday's and the day before's generations, made by stores (inside the window).
BEGIN;
SELECT plan(24);

SET LOCAL TimeZone = 'UTC';

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('07000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;
CREATE FUNCTION pg_temp.gen_of(p_n int) RETURNS regclass
LANGUAGE sql AS $$
    SELECT tableoid::regclass FROM whizbang.wh_message_deduplication WHERE consumer = 'seal' AND message_id = pg_temp.id(p_n)
$$;
CREATE FUNCTION pg_temp.sealed(p_gen regclass) RETURNS boolean
LANGUAGE sql AS $$ SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = p_gen AND tgname = 'wh_sealed') $$;

-- 1 and 2 yesterday, 3 the day before, 4 today.
SELECT whizbang.dedup_insert(pg_temp.id(n), 'seal', p_now => now() - interval '1 day') FROM generate_series(1, 2) n;
SELECT whizbang.dedup_insert(pg_temp.id(3), 'seal', p_now => now() - interval '2 days');
SELECT whizbang.dedup_insert(pg_temp.id(4), 'seal');

SELECT ok(NOT pg_temp.sealed(pg_temp.gen_of(1)), 'a generation is not sealed when made');
SELECT cmp_ok((SELECT count(*) FROM whizbang.perform_maintenance() WHERE task_name = 'purge_old_deduplication'), '=', 1::bigint,
              'maintenance runs the dedup task');
SELECT ok(pg_temp.sealed(pg_temp.gen_of(1)) AND pg_temp.sealed(pg_temp.gen_of(3)),
          'maintenance seals the generations whose span ended');
SELECT ok(NOT pg_temp.sealed(pg_temp.gen_of(4)), 'today''s generation stays open');
SELECT results_eq($$SELECT key_count, hash_count, bit_count = 512 * ceil(key_count * 10 / 512.0)::bigint,
                           length(bits) = bit_count / 8
                      FROM whizbang.wh_dedup_filters WHERE generation = pg_temp.gen_of(1)$$,
                  $$VALUES (2::bigint, 7, true, true)$$,
                  'the filter: its keys, 7 hashes, 10 bits per key in whole blocks');
SELECT is((SELECT tgenabled FROM pg_trigger WHERE tgrelid = pg_temp.gen_of(1) AND tgname = 'wh_sealed'), 'A'::"char",
          'the seal fires always (also under session_replication_role = replica)');
SELECT is(whizbang.seal_dedup_generations(), 0, 'sealed generations are not sealed again');

-- Stores beside sealed generations.
SELECT is(whizbang.dedup_insert(pg_temp.id(1), 'seal'), 'duplicate', 'a redelivery of an id in a sealed generation');
SELECT is((SELECT observation_count FROM whizbang.wh_message_deduplication WHERE consumer = 'seal' AND message_id = pg_temp.id(1)),
          2, 'is counted there (its UPDATE adds no key: the seal lets it through)');
SELECT is(whizbang.dedup_insert(pg_temp.id(3), 'other'), 'new', 'the consumer is part of the key');
SELECT results_eq($$SELECT outcome FROM whizbang.dedup_insert_many(ARRAY[pg_temp.id(2), pg_temp.id(3), pg_temp.id(5)], 'seal')
                     ORDER BY message_id$$,
                  $$VALUES ('duplicate'), ('duplicate'), ('new')$$,
                  'a batch: ids in two sealed generations and a new one');
SELECT is(pg_temp.gen_of(5)::text, pg_temp.gen_of(4)::text, 'the new id is recorded in today''s generation');

-- SQL writes into a sealed generation.
SELECT throws_ok($$INSERT INTO whizbang.wh_message_deduplication (consumer, message_id, first_seen_at)
                   VALUES ('seal', pg_temp.id(6), now() - interval '1 day')$$,
                 '55000', NULL, 'an INSERT through the table into a sealed generation is refused');
SELECT throws_ok(format($$INSERT INTO %s (consumer, message_id, first_seen_at) VALUES ('seal', %L, now() - interval '1 day')$$,
                        pg_temp.gen_of(1), pg_temp.id(6)),
                 '55000', NULL, 'so is one into the generation itself');
SELECT throws_ok($$UPDATE whizbang.wh_message_deduplication SET message_id = pg_temp.id(7)
                    WHERE consumer = 'seal' AND message_id = pg_temp.id(2)$$,
                 '55000', NULL, 'an UPDATE of the key in a sealed generation is refused');
SELECT throws_ok($$UPDATE whizbang.wh_message_deduplication SET first_seen_at = now() - interval '1 day'
                    WHERE consumer = 'seal' AND message_id = pg_temp.id(3)$$,
                 '55000', NULL, 'a record moved into a sealed generation by an UPDATE is refused');
SELECT throws_ok($$SELECT whizbang.unseal_dedup_generation('whizbang.wh_settings')$$, '22023', NULL,
                 'unseal_dedup_generation names a generation');

-- A backfill into a sealed generation unseals it; maintenance seals it again.
SELECT is(whizbang.dedup_insert(pg_temp.id(8), 'seal', p_now => now() - interval '1 day'), 'new',
          'a backfill into a sealed generation');
SELECT ok(NOT pg_temp.sealed(pg_temp.gen_of(8))
          AND NOT EXISTS (SELECT 1 FROM whizbang.wh_dedup_filters WHERE generation = pg_temp.gen_of(8)),
          'unseals it: trigger and filter gone');
SELECT is(whizbang.seal_dedup_generations(), 1, 'sealed again');
SELECT is(whizbang.dedup_insert(pg_temp.id(8), 'seal'), 'duplicate', 'its new filter holds the backfilled id');

-- Dropped with its filter when it leaves the window.
SELECT lives_ok($$SELECT count(*) FROM whizbang.perform_maintenance(now() + interval '29 days')$$,
                'maintenance a window later');
SELECT is((SELECT count(*) FROM whizbang.wh_dedup_filters f WHERE NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = f.generation)),
          0::bigint, 'no filter outlives its generation');

-- Who may seal and unseal: what maintenance needs (DELETE on the table).
CREATE ROLE wb_seal_nobody;
GRANT USAGE ON SCHEMA whizbang TO wb_seal_nobody;
GRANT EXECUTE ON FUNCTION whizbang.seal_dedup_generations(timestamptz) TO wb_seal_nobody;
SET LOCAL ROLE wb_seal_nobody;
SELECT throws_ok($$SELECT whizbang.seal_dedup_generations()$$, '42501', NULL,
                 'sealing needs the maintenance capability');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
