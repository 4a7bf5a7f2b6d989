-- Privileges (DESIGN §4, docs/security.md): nothing is granted to PUBLIC; the documented
-- minimal grants are enough for dedup_insert / dedup_insert_many (with and without p_sent_at,
-- including an expired answer); without table grants the write is refused with 42501 and
-- nothing is written; row-level security on the dedup table is honoured.
--
-- Roles are created inside the test transaction and disappear with its ROLLBACK.
BEGIN;
SELECT plan(20);

CREATE ROLE wb_test_nobody NOLOGIN;
CREATE ROLE wb_test_app NOLOGIN;
CREATE ROLE wb_test_exec_only NOLOGIN;

GRANT USAGE ON SCHEMA whizbang TO wb_test_app, wb_test_exec_only;
GRANT EXECUTE ON FUNCTION
    whizbang.dedup_insert(uuid, text, bytea, timestamptz, timestamptz),
    whizbang.dedup_insert_many(uuid[], text, bytea[], timestamptz[], timestamptz),
    whizbang.fingerprint(jsonb, text[]),
    whizbang.event_uuid(text, text),
    whizbang.uuid_v7(timestamptz),
    whizbang.partition_of(uuid, integer),
    whizbang.version()
  TO wb_test_app, wb_test_exec_only;
GRANT SELECT, INSERT, UPDATE, DELETE ON whizbang.wh_message_deduplication TO wb_test_app;
GRANT SELECT ON whizbang.settings TO wb_test_app;

-- ---------------------------------------------------------------------------------------
-- Nothing for PUBLIC
-- ---------------------------------------------------------------------------------------

SELECT is((SELECT count(*) FROM pg_proc p
            WHERE p.pronamespace = 'whizbang'::regnamespace
              AND has_function_privilege('wb_test_nobody', p.oid, 'EXECUTE')), 0::bigint,
          'a role without grants may execute no whizbang function');
SELECT ok(NOT has_schema_privilege('wb_test_nobody', 'whizbang', 'USAGE'),
          'a role without grants has no USAGE on schema whizbang');
SELECT ok(NOT has_table_privilege('wb_test_nobody', 'whizbang.wh_message_deduplication', 'SELECT,INSERT,UPDATE,DELETE'),
          'a role without grants has no privilege on wh_message_deduplication');
SELECT ok(NOT has_table_privilege('wb_test_nobody', 'whizbang.wh_settings', 'SELECT,INSERT,UPDATE,DELETE'),
          'a role without grants has no privilege on wh_settings');
SELECT ok(NOT has_function_privilege('wb_test_app', 'whizbang._bridge_selftest(text)', 'EXECUTE'),
          '_bridge_selftest is not granted by the application grants');

SET LOCAL ROLE wb_test_nobody;
SELECT throws_ok($$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa01', 'priv')$$, '42501', NULL,
                 'a role without grants cannot call dedup_insert (42501)');
SELECT throws_ok($$SELECT whizbang.fingerprint('{}')$$, '42501', NULL,
                 'a role without grants cannot call fingerprint (42501)');
RESET ROLE;

-- ---------------------------------------------------------------------------------------
-- EXECUTE without table grants: refused, nothing written
-- ---------------------------------------------------------------------------------------

SET LOCAL ROLE wb_test_exec_only;
SELECT is(octet_length(whizbang.fingerprint('{"a":1}')), 32, 'USAGE and EXECUTE suffice for fingerprint');
SELECT is(whizbang.partition_of('00000000-0000-4000-8000-00000000aa01', 8) BETWEEN 0 AND 7, true,
          'USAGE and EXECUTE suffice for partition_of');
SELECT throws_ok($$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa01', 'priv')$$, '42501', NULL,
                 'dedup_insert of a new id without table grants raises 42501');
SELECT throws_ok($$SELECT * FROM whizbang.dedup_insert_many(ARRAY['00000000-0000-4000-8000-00000000aa02']::uuid[], 'priv')$$,
                 '42501', NULL, 'dedup_insert_many of a new id without table grants raises 42501');
RESET ROLE;
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'priv'), 0::bigint,
          'nothing was written by the refused calls');

-- ---------------------------------------------------------------------------------------
-- The documented minimal grants work, for every outcome
-- ---------------------------------------------------------------------------------------

SET LOCAL ROLE wb_test_app;
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa01', 'priv', '\x01'::bytea), 'new',
          'with the documented grants: new');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa01', 'priv', '\x01'::bytea), 'duplicate',
          'with the documented grants: duplicate');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa01', 'priv', '\x02'::bytea,
                                '2024-06-30 00:00:00+00', '2024-06-30 12:00:00+00'), 'conflict',
          'with the documented grants: conflict, with p_sent_at (reads the settings view)');
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa03', 'priv', NULL,
                                '2020-01-01 00:00:00+00', '2024-06-30 12:00:00+00'), 'expired',
          'with the documented grants: expired');
SELECT results_eq(
    $$SELECT outcome FROM whizbang.dedup_insert_many(
        ARRAY['00000000-0000-4000-8000-00000000aa01', '00000000-0000-4000-8000-00000000aa04']::uuid[], 'priv')$$,
    ARRAY['duplicate', 'new'], 'with the documented grants: dedup_insert_many');
RESET ROLE;
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'priv'), 2::bigint,
          'the application role recorded exactly its two new ids');

-- ---------------------------------------------------------------------------------------
-- Row-level security on the dedup table is honoured
-- ---------------------------------------------------------------------------------------

ALTER TABLE whizbang.wh_message_deduplication ENABLE ROW LEVEL SECURITY;
CREATE POLICY wb_test_own_consumer ON whizbang.wh_message_deduplication TO wb_test_app
    USING (consumer = 'tenant_a') WITH CHECK (consumer = 'tenant_a');
SET LOCAL ROLE wb_test_app;
SELECT is(whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa05', 'tenant_a'), 'new',
          'row-level security: the allowed consumer records');
SELECT throws_ok($$SELECT whizbang.dedup_insert('00000000-0000-4000-8000-00000000aa05', 'tenant_b')$$, '42501', NULL,
                 'row-level security: another consumer is refused (42501)');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
