-- whizbang.wh_settings and the view whizbang.settings (DESIGN §3.6, settings part):
-- shipped defaults, validation of every write, the seed's upsert, fallback to the default.
--
-- After every failed write, pg_temp.unchanged() checks that the whole wh_settings table is
-- exactly as it was after the last successful write (remembered in wb_snap).
BEGIN;
SELECT plan(114);

CREATE FUNCTION pg_temp.settings_state() RETURNS text
LANGUAGE sql AS $$
    SELECT coalesce(string_agg(format('%s=%s/%s/%s', setting_key, setting_value, value_type, description),
                               E'\n' ORDER BY setting_key), '')
      FROM whizbang.wh_settings
$$;
CREATE TEMP TABLE wb_snap AS SELECT pg_temp.settings_state() AS state;
CREATE FUNCTION pg_temp.unchanged(p_description text) RETURNS text
LANGUAGE sql AS $$ SELECT is(pg_temp.settings_state(), (SELECT state FROM wb_snap), p_description) $$;
CREATE FUNCTION pg_temp.value_of(p_key text) RETURNS text
LANGUAGE sql AS $$ SELECT value FROM whizbang.settings WHERE setting_key = p_key $$;

-- ---------------------------------------------------------------------------------------
-- Shipped defaults
-- ---------------------------------------------------------------------------------------

SELECT has_table('whizbang', 'wh_settings', 'wh_settings exists');
SELECT has_view('whizbang', 'settings', 'the settings view exists');
SELECT columns_are('whizbang', 'settings',
                   ARRAY['setting_key', 'value', 'default_value', 'value_type', 'is_default', 'description'],
                   'settings view columns');
SELECT col_is_pk('whizbang', 'wh_settings', 'setting_key', 'setting_key is the primary key');

SELECT results_eq(
    $$SELECT setting_key, value, default_value, value_type, is_default FROM whizbang.settings ORDER BY setting_key$$,
    $$VALUES ('dead_letter_retention_days', '30', '30', 'integer', true),
             ('debug_mode', 'false', 'false', 'boolean', true),
             ('dedup_generations', '30', '30', 'integer', true),
             ('dedup_retention_days', '30', '30', 'integer', true),
             ('idempotency_in_progress_ttl_seconds', '1800', '1800', 'integer', true),
             ('idempotency_result_ttl_max_seconds', '2592000', '2592000', 'integer', true),
             ('idempotency_result_ttl_min_seconds', '1', '1', 'integer', true),
             ('idempotency_result_ttl_seconds', '86400', '86400', 'integer', true),
             ('idempotency_tombstone_days', '30', '30', 'integer', true),
             ('max_attempts', '10', '10', 'integer', true),
             ('outbox_notify', 'false', 'false', 'boolean', true),
             ('replay_policy', 'reject', 'reject', 'text', true),
             ('retry_base_seconds', '30', '30', 'integer', true),
             ('retry_max_seconds', '300', '300', 'integer', true)$$,
    'settings view: every documented key with its documented default and type');
SELECT is((SELECT count(*) FROM whizbang.settings WHERE description IS NULL OR description = ''), 0::bigint,
          'settings view: every key has a description');
SELECT results_eq(
    $$SELECT setting_key, setting_value, value_type FROM whizbang.wh_settings ORDER BY setting_key$$,
    $$SELECT setting_key, value, value_type FROM whizbang.settings ORDER BY setting_key$$,
    'wh_settings is seeded with every default (the seed''s queries work)');

-- ---------------------------------------------------------------------------------------
-- Successful writes
-- ---------------------------------------------------------------------------------------

-- The seed's own statement (000_…): INSERT … ON CONFLICT (setting_key) DO UPDATE.
SELECT lives_ok(
    $$INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type, description)
      VALUES ('dedup_retention_days', '90', 'integer', 'Days to retain message deduplication entries')
      ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value$$,
    'the seed''s INSERT … ON CONFLICT (setting_key) DO UPDATE works');
SELECT results_eq(
    $$SELECT value, default_value, is_default FROM whizbang.settings WHERE setting_key = 'dedup_retention_days'$$,
    $$VALUES ('90', '30', false)$$,
    'settings view: dedup_retention_days is now 90, default 30, not default');
SELECT is((SELECT count(*) FROM whizbang.wh_settings), 14::bigint, 'the upsert added no row');
UPDATE wb_snap SET state = pg_temp.settings_state();

SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = '5' WHERE setting_key = 'max_attempts'$$,
                'UPDATE of a value works');
SELECT is(pg_temp.value_of('max_attempts'), '5', 'settings view: max_attempts is 5');

SELECT lives_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('retry_base_seconds', '7')$$,
                'a plain INSERT of an existing key updates it instead of failing');
SELECT is(pg_temp.value_of('retry_base_seconds'), '7', 'settings view: retry_base_seconds is 7');
SELECT is((SELECT count(*) FROM whizbang.wh_settings), 14::bigint, 'the plain INSERT added no row');
SELECT isnt((SELECT value_type FROM whizbang.wh_settings WHERE setting_key = 'retry_base_seconds'), NULL,
            'value_type is filled in when the INSERT omits it');

SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = ' +42 ' WHERE setting_key = 'retry_max_seconds'$$,
                'an integer with a sign and surrounding spaces is accepted');
SELECT is(pg_temp.value_of('retry_max_seconds'), '42', 'the integer is stored normalised');

SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = 'yes' WHERE setting_key = 'outbox_notify'$$,
                'boolean ''yes'' is accepted');
SELECT is(pg_temp.value_of('outbox_notify'), 'true', 'boolean ''yes'' is stored as true');
SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = ' YES ' WHERE setting_key = 'outbox_notify'$$,
                'boolean '' YES '' (any case, surrounding spaces) is accepted');
SELECT is(pg_temp.value_of('outbox_notify'), 'true', 'boolean '' YES '' is stored as true');
SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = ' +007 ' WHERE setting_key = 'max_attempts'$$,
                'integer '' +007 '' is accepted');
SELECT is(pg_temp.value_of('max_attempts'), '7', 'integer '' +007 '' is stored as 7');
SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = '5' WHERE setting_key = 'max_attempts'$$,
                'max_attempts back to 5');
SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = 'OFF' WHERE setting_key = 'debug_mode'$$,
                'boolean ''OFF'' is accepted');
SELECT is(pg_temp.value_of('debug_mode'), 'false', 'boolean ''OFF'' is stored as false');

SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = 'accept' WHERE setting_key = 'replay_policy'$$,
                'replay_policy accept is accepted');
SELECT is(pg_temp.value_of('replay_policy'), 'accept', 'settings view: replay_policy is accept');

SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = '36500' WHERE setting_key = 'dead_letter_retention_days'$$,
                'the upper bound of dead_letter_retention_days is accepted');
SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = '0' WHERE setting_key = 'idempotency_tombstone_days'$$,
                'idempotency_tombstone_days 0 (its lower bound) is accepted');
SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = '1', value_type = 'integer'
                   WHERE setting_key = 'dedup_retention_days'$$,
                'an UPDATE naming the right value_type is accepted');
SELECT is(pg_temp.value_of('dedup_retention_days'), '1', 'dedup_retention_days is 1');
SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = '90' WHERE setting_key = 'dedup_retention_days'$$,
                'dedup_retention_days back to 90');
UPDATE wb_snap SET state = pg_temp.settings_state();

-- ---------------------------------------------------------------------------------------
-- Rejected writes: each leaves the table unchanged
-- ---------------------------------------------------------------------------------------

-- Unknown keys
SELECT throws_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('no_such_setting', '1')$$,
                 '42704', NULL, 'INSERT of an unknown key raises 42704');
SELECT is((SELECT count(*) FROM whizbang.wh_settings WHERE setting_key = 'no_such_setting'), 0::bigint,
          'the unknown key was not stored');
SELECT pg_temp.unchanged('unknown key: nothing written');
SELECT throws_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('Max_Attempts', '3')$$,
                 '42704', NULL, 'keys are case-sensitive: Max_Attempts raises 42704');
SELECT pg_temp.unchanged('wrongly cased key: nothing written');
SELECT throws_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('no_such_setting', '1')
                   ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value$$,
                 '42704', NULL, 'the seed''s upsert of an unknown key raises 42704');
SELECT pg_temp.unchanged('upsert of an unknown key: nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_key = 'no_such_setting' WHERE setting_key = 'max_attempts'$$,
                 '42704', NULL, 'renaming a row to an unknown key raises 42704');
SELECT pg_temp.unchanged('rename to an unknown key: nothing written');

-- Integers
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = 'abc' WHERE setting_key = 'max_attempts'$$,
                 '22023', NULL, 'integer setting: ''abc'' raises 22023');
SELECT pg_temp.unchanged('integer ''abc'': nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '1.5' WHERE setting_key = 'max_attempts'$$,
                 '22023', NULL, 'integer setting: ''1.5'' raises 22023');
SELECT pg_temp.unchanged('integer ''1.5'': nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '' WHERE setting_key = 'max_attempts'$$,
                 '22023', NULL, 'integer setting: '''' raises 22023');
SELECT pg_temp.unchanged('integer '''': nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '12345678901234567890' WHERE setting_key = 'max_attempts'$$,
                 '22023', NULL, 'integer setting: a 20-digit number raises 22023');
SELECT pg_temp.unchanged('integer overflow: nothing written');
SELECT throws_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('max_attempts', 'ten')$$,
                 '22023', NULL, 'integer setting: INSERT of ''ten'' raises 22023');
SELECT pg_temp.unchanged('INSERT of a bad integer: nothing written');

-- Integer bounds
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '0' WHERE setting_key = 'dedup_retention_days'$$,
                 '22023', NULL, 'dedup_retention_days 0 raises 22023');
SELECT pg_temp.unchanged('dedup_retention_days 0: nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '-1' WHERE setting_key = 'dedup_retention_days'$$,
                 '22023', NULL, 'dedup_retention_days -1 raises 22023');
SELECT pg_temp.unchanged('dedup_retention_days -1: nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '36501' WHERE setting_key = 'dedup_retention_days'$$,
                 '22023', NULL, 'dedup_retention_days 36501 raises 22023');
SELECT pg_temp.unchanged('dedup_retention_days 36501: nothing written');
SELECT throws_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type, description)
                   VALUES ('dedup_retention_days', '0', 'integer', 'Days to retain message deduplication entries')
                   ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value$$,
                 '22023', NULL, 'the seed''s upsert with dedup_retention_days 0 raises 22023');
SELECT pg_temp.unchanged('upsert of an out-of-range value: nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '0' WHERE setting_key = 'max_attempts'$$,
                 '22023', NULL, 'max_attempts 0 raises 22023');
SELECT pg_temp.unchanged('max_attempts 0: nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '-5' WHERE setting_key = 'retry_base_seconds'$$,
                 '22023', NULL, 'retry_base_seconds -5 raises 22023');
SELECT pg_temp.unchanged('retry_base_seconds -5: nothing written');

-- Booleans
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = 'maybe' WHERE setting_key = 'outbox_notify'$$,
                 '22023', NULL, 'boolean setting: ''maybe'' raises 22023');
SELECT pg_temp.unchanged('boolean ''maybe'': nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '' WHERE setting_key = 'debug_mode'$$,
                 '22023', NULL, 'boolean setting: '''' raises 22023');
SELECT pg_temp.unchanged('boolean '''': nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '2' WHERE setting_key = 'debug_mode'$$,
                 '22023', NULL, 'boolean setting: ''2'' raises 22023');
SELECT pg_temp.unchanged('boolean ''2'': nothing written');

-- replay_policy
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = 'ignore' WHERE setting_key = 'replay_policy'$$,
                 '22023', NULL, 'replay_policy ''ignore'' raises 22023');
SELECT pg_temp.unchanged('replay_policy ''ignore'': nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '' WHERE setting_key = 'replay_policy'$$,
                 '22023', NULL, 'replay_policy '''' raises 22023');
SELECT pg_temp.unchanged('replay_policy '''': nothing written');
SELECT throws_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('replay_policy', 'ACCEPT')$$,
                 '22023', NULL, 'replay_policy ''ACCEPT'' (not one of reject, accept) raises 22023');
SELECT pg_temp.unchanged('replay_policy ''ACCEPT'': nothing written');

-- NULL values
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = NULL WHERE setting_key = 'max_attempts'$$,
                 '23502', NULL, 'UPDATE to a NULL value raises 23502');
SELECT pg_temp.unchanged('NULL value by UPDATE: nothing written');
SELECT throws_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('max_attempts', NULL)$$,
                 '23502', NULL, 'INSERT of a NULL value raises 23502');
SELECT pg_temp.unchanged('NULL value by INSERT: nothing written');

-- Mismatched value_type
SELECT throws_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type) VALUES ('max_attempts', '5', 'text')$$,
                 '42804', NULL, 'INSERT with value_type text for an integer key raises 42804');
SELECT pg_temp.unchanged('mismatched value_type by INSERT: nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET value_type = 'boolean' WHERE setting_key = 'max_attempts'$$,
                 '42804', NULL, 'UPDATE of value_type to boolean for an integer key raises 42804');
SELECT pg_temp.unchanged('mismatched value_type by UPDATE: nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET value_type = 'integer' WHERE setting_key = 'replay_policy'$$,
                 '42804', NULL, 'UPDATE of value_type to integer for a text key raises 42804');
SELECT pg_temp.unchanged('mismatched value_type for a text key: nothing written');

-- One bad row in a multi-row write rejects the whole statement.
SELECT throws_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value)
                   VALUES ('max_attempts', '6'), ('retry_base_seconds', '8'), ('dedup_retention_days', 'x')$$,
                 '22023', NULL, 'a multi-row INSERT with one bad value raises 22023');
SELECT pg_temp.unchanged('multi-row INSERT with one bad value: nothing written');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '0'
                    WHERE setting_key IN ('idempotency_tombstone_days', 'max_attempts')$$,
                 '22023', NULL, 'an UPDATE of two rows where one value is out of range raises 22023');
SELECT pg_temp.unchanged('UPDATE of two rows with one bad value: nothing written');

SELECT results_eq(
    $$SELECT setting_key, value FROM whizbang.settings WHERE NOT is_default ORDER BY setting_key$$,
    $$VALUES ('dead_letter_retention_days', '36500'), ('dedup_retention_days', '90'),
             ('idempotency_tombstone_days', '0'), ('max_attempts', '5'), ('outbox_notify', 'true'),
             ('replay_policy', 'accept'), ('retry_base_seconds', '7'), ('retry_max_seconds', '42')$$,
    'settings view: after all the rejected writes, exactly the accepted changes are in effect');

-- Documented consequences of "an INSERT of an existing key updates it" (docs/settings.md).
SELECT is_empty($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('retry_base_seconds', '9')
                  RETURNING setting_key$$,
                'INSERT … RETURNING of an existing key returns no row ...');
SELECT is(pg_temp.value_of('retry_base_seconds'), '9', '... but the value was changed');
SELECT lives_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('retry_base_seconds', '11')
                  ON CONFLICT DO NOTHING$$,
                'INSERT … ON CONFLICT DO NOTHING of an existing key works');
SELECT is(pg_temp.value_of('retry_base_seconds'), '11', 'ON CONFLICT DO NOTHING still overwrites the value (documented)');
SELECT lives_ok($$UPDATE whizbang.wh_settings SET setting_value = '7' WHERE setting_key = 'retry_base_seconds'$$,
                'retry_base_seconds back to 7');
UPDATE wb_snap SET state = pg_temp.settings_state();
SELECT throws_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('retry_base_seconds', 'x')
                   ON CONFLICT DO NOTHING$$,
                 '22023', NULL, 'ON CONFLICT DO NOTHING does not skip validation (22023)');
SELECT pg_temp.unchanged('ON CONFLICT DO NOTHING with a bad value: nothing written');

-- ---------------------------------------------------------------------------------------
-- DELETE falls back to the default; the seed's upsert re-creates the row
-- ---------------------------------------------------------------------------------------

SELECT lives_ok($$DELETE FROM whizbang.wh_settings WHERE setting_key = 'dedup_retention_days'$$,
                'DELETE of a setting row works');
SELECT results_eq(
    $$SELECT value, default_value, is_default FROM whizbang.settings WHERE setting_key = 'dedup_retention_days'$$,
    $$VALUES ('30', '30', true)$$,
    'settings view: a deleted row falls back to its default');
SELECT is((SELECT count(*) FROM whizbang.settings), 14::bigint, 'settings view: still one row per key');
SELECT is((SELECT count(*) FROM whizbang.wh_settings), 13::bigint, 'wh_settings: one row fewer');

SELECT lives_ok(
    $$INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type, description)
      VALUES ('dedup_retention_days', '45', 'integer', 'Days to retain message deduplication entries')
      ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value$$,
    'the seed''s upsert of a deleted key inserts it again');
SELECT results_eq(
    $$SELECT setting_value, value_type FROM whizbang.wh_settings WHERE setting_key = 'dedup_retention_days'$$,
    $$VALUES ('45', 'integer')$$,
    'the re-inserted row holds the new value and the right type');
SELECT is(pg_temp.value_of('dedup_retention_days'), '45', 'settings view: dedup_retention_days is 45');

SELECT lives_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('dedup_retention_days', '30')$$,
                'setting a key back to its default value works');
SELECT is((SELECT is_default FROM whizbang.settings WHERE setting_key = 'dedup_retention_days'), true,
          'settings view: a row holding the default value is_default');

SELECT lives_ok($$DELETE FROM whizbang.wh_settings$$, 'deleting every row works');
SELECT is((SELECT count(*) FROM whizbang.settings WHERE is_default AND value = default_value), 14::bigint,
          'settings view: with no rows every key shows its default');
UPDATE wb_snap SET state = pg_temp.settings_state();
SELECT throws_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('max_attempts', '0')$$,
                 '22023', NULL, 'INSERT of an out-of-range value for an absent key raises 22023');
SELECT pg_temp.unchanged('out-of-range INSERT for an absent key: nothing written');
SELECT lives_ok($$INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('max_attempts', '3')$$,
                'INSERT of an absent key works');
SELECT results_eq(
    $$SELECT setting_key, setting_value, value_type, description IS NOT NULL FROM whizbang.wh_settings$$,
    $$VALUES ('max_attempts', '3', 'integer', true)$$,
    'the inserted row got its type and the default description');

SELECT * FROM finish();
ROLLBACK;
