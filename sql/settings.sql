-- Settings (DESIGN §3.6): wh_settings holds what users set, validated on write and stored in
-- normal form; the view whizbang.settings shows each key's effective value and default.
-- Every change is undone at the end.
SET client_min_messages = warning;
\set SHOW_CONTEXT never

-- The keys DESIGN names, with their shipped defaults.
SELECT setting_key, value, default_value, value_type, is_default
  FROM whizbang.settings
 WHERE setting_key IN ('dedup_retention_days', 'max_attempts', 'retry_base_seconds', 'retry_max_seconds',
                       'dead_letter_retention_days', 'idempotency_in_progress_ttl_seconds',
                       'idempotency_result_ttl_seconds', 'idempotency_result_ttl_min_seconds',
                       'idempotency_result_ttl_max_seconds', 'idempotency_tombstone_days', 'replay_policy',
                       'outbox_notify', 'debug_mode')
 ORDER BY setting_key;

-- The seed's upsert works; so do a plain UPDATE and a plain INSERT of a key (an update of its
-- row when it has one: CREATE EXTENSION seeds one per key). Values are stored in normal form.
INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type, description)
VALUES ('dedup_retention_days', '60', 'integer', 'Days to retain message deduplication entries')
ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value;
UPDATE whizbang.wh_settings SET setting_value = ' +090 ' WHERE setting_key = 'dedup_retention_days';
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('outbox_notify', 'YES');
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('replay_policy', 'accept');
SELECT setting_key, setting_value, value_type FROM whizbang.wh_settings
 WHERE setting_key IN ('dedup_retention_days', 'replay_policy', 'outbox_notify') ORDER BY setting_key;
SELECT setting_key, value, is_default FROM whizbang.settings
 WHERE setting_key IN ('dedup_retention_days', 'replay_policy', 'outbox_notify') ORDER BY setting_key;
-- A store makes the dedup generation of its p_now only up to one period ahead of the clock, and
-- none that would already have left the window (0.13.0): the generations of this file's
-- simulated day are made first, as an application simulating another time would.
SELECT count(*) > 0 AS generations_made FROM whizbang.perform_maintenance(p_now => '2030-03-02 00:00:00Z');
-- A change applies from the next statement on: with a retention of 90
-- days, a message sent 60 days ago is new, not expired.
SELECT whizbang.dedup_insert('2b000000-0000-7000-8000-000000000001', 'settings_replay',
                             p_sent_at => '2030-01-01 00:00:00Z', p_now => '2030-03-02 00:00:00Z');
-- Deleting the row goes back to the default.
DELETE FROM whizbang.wh_settings WHERE setting_key = 'dedup_retention_days';
SELECT value, is_default FROM whizbang.settings WHERE setting_key = 'dedup_retention_days';
SELECT whizbang.dedup_insert('2b000000-0000-7000-8000-000000000002', 'settings_replay',
                             p_sent_at => '2029-01-01 00:00:00Z', p_now => '2030-03-02 00:00:00Z') AS accepted_old;
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('replay_policy', 'reject');
SELECT whizbang.dedup_insert('2b000000-0000-7000-8000-000000000003', 'settings_replay',
                             p_sent_at => '2029-01-01 00:00:00Z', p_now => '2030-03-02 00:00:00Z') AS rejected_old;

-- A bad write is an error and changes nothing.
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('dedup_retention_dayz', '90');
\echo :SQLSTATE
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('max_attempts', NULL);
\echo :SQLSTATE
INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type) VALUES ('max_attempts', '5', 'text');
\echo :SQLSTATE
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('max_attempts', '1.5');
\echo :SQLSTATE
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('max_attempts', '0');
\echo :SQLSTATE
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('outbox_notify', 'maybe');
\echo :SQLSTATE
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('replay_policy', 'Accept');
\echo :SQLSTATE
UPDATE whizbang.wh_settings SET setting_key = 'max_attempt' WHERE setting_key = 'outbox_notify';
\echo :SQLSTATE
SELECT setting_key, value FROM whizbang.settings
 WHERE setting_key IN ('max_attempts', 'dedup_retention_days', 'outbox_notify', 'replay_policy') ORDER BY setting_key;

UPDATE whizbang.wh_settings s SET setting_value = d.default_value
  FROM whizbang.wh_setting_defaults d WHERE d.setting_key = s.setting_key AND s.setting_value <> d.default_value;
INSERT INTO whizbang.wh_settings (setting_key, setting_value)
SELECT setting_key, default_value FROM whizbang.wh_setting_defaults WHERE setting_key = 'dedup_retention_days';
SELECT count(*) FILTER (WHERE NOT is_default) AS changed FROM whizbang.settings;
