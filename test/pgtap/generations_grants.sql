-- Who may retire dedup generations (issue 30 item 10). purge_old_deduplication makes and drops
-- generations as the extension's owner (DDL the caller could not run); it drops records with
-- them, so the caller must hold what the row purge of a single table needs: DELETE on
-- whizbang.wh_message_deduplication. Checked first, for the calling role; refused with 42501 and
-- a hint naming grant_admin, nothing dropped (by the table of required privileges, at the entry).
BEGIN;
SELECT plan(5);

CREATE FUNCTION pg_temp.id(p_n int) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT ('0b000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid $$;

SELECT is(whizbang.dedup_insert(pg_temp.id(1), 'grants'), 'new', 'a record in the generation of now');

CREATE ROLE wb_gen_maint NOLOGIN;
CREATE ROLE wb_gen_no_delete NOLOGIN;
SELECT count(*) FROM whizbang.grant_admin('wb_gen_maint', ARRAY['maintenance']);
SELECT count(*) FROM whizbang.grant_admin('wb_gen_no_delete', ARRAY['maintenance']);
REVOKE DELETE ON whizbang.wh_message_deduplication FROM wb_gen_no_delete;

-- 60 days on, the generation of now has left the window.
SET LOCAL ROLE wb_gen_no_delete;
SELECT throws_ok($$SELECT * FROM whizbang.perform_maintenance(now() + interval '60 days')$$, '42501',
                 'permission denied for table wh_message_deduplication',
                 'without DELETE on the dedup table: 42501');
RESET ROLE;
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'grants'), 1::bigint,
          'and no generation was dropped for it');

SET LOCAL ROLE wb_gen_maint;
SELECT is((SELECT status FROM whizbang.perform_maintenance(now() + interval '60 days')
            WHERE task_name = 'purge_old_deduplication'), 'ok', 'grant_admin(maintenance) is enough');
RESET ROLE;
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'grants'), 0::bigint,
          'the generation was dropped');

SELECT * FROM finish();
ROLLBACK;
