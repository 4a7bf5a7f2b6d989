#!/usr/bin/env bash
# Upgrade test (pg_cron / Citus habit): install the oldest released version, use it, update
# step by step to the current default_version, and check that
#   - data written by the old version survives and old function signatures still work,
#   - the updated extension has exactly the objects of a fresh install of the new version.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/whizbang-upgrade.XXXXXX)
chmod 755 "$work"
cat >"$work/run.sh" <<'SH'
set -euo pipefail
psql() { command psql -X -v ON_ERROR_STOP=1 -q "$@"; }
objects() {
  # Dedup generations (0.12.0) are the records' tables, not the extension's objects: a store
  # makes them (the upgraded database's records are in a legacy one), so they are left out.
  psql -At -d "$1" <<'SQL'
CREATE TEMP VIEW generations AS
SELECT i.inhrelid AS oid FROM pg_inherits i WHERE i.inhparent = 'whizbang.wh_message_deduplication'::regclass;
SELECT pg_describe_object(classid, objid, 0) FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'whizbang')
UNION ALL
SELECT format('%s.%s %s %s %s', table_name, column_name, data_type, is_nullable, coalesce(collation_name, ''))
  FROM information_schema.columns WHERE table_schema = 'whizbang'
   AND NOT EXISTS (SELECT FROM pg_temp.generations g JOIN pg_class c ON c.oid = g.oid
                    WHERE c.relname = table_name AND c.relnamespace = 'whizbang'::regnamespace)
UNION ALL
-- proconfig: the SET clauses (search_path, DESIGN §4) must arrive with an update too.
SELECT format('%s(%s) -> %s SET %s', p.proname, pg_get_function_identity_arguments(p.oid),
              coalesce(pg_get_function_result(p.oid), 'procedure'), coalesce(array_to_string(p.proconfig, '; '), '-'))
  FROM pg_proc p WHERE p.pronamespace = 'whizbang'::regnamespace
UNION ALL
SELECT indexdef FROM pg_indexes WHERE schemaname = 'whizbang'
   AND NOT EXISTS (SELECT FROM pg_temp.generations g JOIN pg_class c ON c.oid = g.oid
                    WHERE c.relname = tablename AND c.relnamespace = 'whizbang'::regnamespace)
UNION ALL
-- Triggers are no extension members (they belong to their table): name, table, function,
-- tgtype (timing, level, events) and arguments, e.g. the work tables' _lease_row_deleted (0.6.0).
SELECT format('trigger %s on %s -> %s type %s args %s enabled %s', t.tgname, t.tgrelid::regclass,
              t.tgfoid::regprocedure, t.tgtype, encode(t.tgargs, 'escape'), t.tgenabled)
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = 'whizbang'::regnamespace AND NOT t.tgisinternal
UNION ALL
-- A view replaced by an update (whizbang.leases, 0.6.0) must read what a fresh install's does.
SELECT format('view %s: %s', c.oid::regclass, pg_get_viewdef(c.oid))
  FROM pg_class c WHERE c.relnamespace = 'whizbang'::regnamespace AND c.relkind IN ('v', 'm')
UNION ALL
-- The comments (what psql's describe commands show, DESIGN §3.7) must arrive with an update
-- too: those of every object of the extension, and of every relation and column of the schema.
SELECT format('comment on %s: %s', pg_describe_object(d.classoid, d.objoid, d.objsubid), d.description)
  FROM pg_description d
 WHERE (d.classoid = 'pg_class'::regclass
        AND d.objoid IN (SELECT oid FROM pg_class WHERE relnamespace = 'whizbang'::regnamespace)
        AND d.objoid NOT IN (SELECT oid FROM pg_temp.generations)
        AND d.objoid NOT IN (SELECT i.indexrelid FROM pg_index i JOIN pg_temp.generations g ON g.oid = i.indrelid))
    OR EXISTS (SELECT FROM pg_depend e
                WHERE e.classid = d.classoid AND e.objid = d.objoid AND e.deptype = 'e'
                  AND e.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'whizbang'))
UNION ALL
-- The initial privileges (pg_init_privs): pg_dump dumps only the grants that differ from them,
-- so an update that records a user's grant there (a function re-created and re-granted, as
-- claim_work in 0.7.0) would drop it from every later dump.
SELECT format('initial privileges of %s: %s %s', pg_describe_object(i.classoid, i.objoid, i.objsubid),
              i.privtype, i.initprivs)
  FROM pg_init_privs i
 WHERE EXISTS (SELECT FROM pg_depend e
                WHERE e.classid = i.classoid AND e.objid = i.objoid AND e.deptype = 'e'
                  AND e.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'whizbang'))
ORDER BY 1;
SQL
}
versions=$(ls sql/whizbang--*.sql | sed -nE 's#sql/whizbang--([0-9.]+)\.sql#\1#p' | sort -V | head -1)
target=$(sed -nE "s/^default_version = '(.*)'/\1/p" whizbang.control)
echo "oldest install script: $versions, target: $target"

createdb fresh
createdb upgraded
psql -d fresh -c "CREATE EXTENSION whizbang"
psql -d upgraded -c "CREATE EXTENSION whizbang VERSION '$versions'"
psql -d upgraded <<'SQL'
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-00000000aaaa', 'up', '\x01');
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-00000000aaaa', 'up', '\x01');
UPDATE whizbang.wh_settings SET setting_value = '45' WHERE setting_key = 'dedup_retention_days';
SQL
# Step through every update script on the path.
current=$versions
while [ "$current" != "$target" ]; do
  next=$(ls sql/whizbang--"$current"--*.sql | sed -nE "s#sql/whizbang--$current--([0-9.]+)\.sql#\1#p" | sort -V | head -1)
  [ -n "$next" ] || { echo "no update script from $current"; exit 1; }
  if [ "$current" = "0.3.0" ]; then
    # This library serves a database still at 0.3.0 (installed, not updated yet): the inbox
    # works as before, the default p_source claims the inbox only, and the outbox says 0A000.
    psql -v ON_ERROR_STOP=1 -At -d upgraded <<'SQL' >"$WORK/old.out"
SELECT count(*) FROM whizbang.store_inbox_messages('[{"MessageId": "0190a1b2-0000-7000-8000-00000000bbb1", "HandlerName": "h",
  "MessageType": "t", "Envelope": {}}, {"MessageId": "0190a1b2-0000-7000-8000-00000000bbb2", "HandlerName": "h",
  "MessageType": "t", "Envelope": {}}]', p_consumer => 'old');
SELECT string_agg(source, ',') FROM whizbang.claim_work('0190a1b2-0000-7000-8000-00000000cccc', p_consumer => 'old');
SELECT outcome FROM whizbang.fail_work('inbox', ARRAY['0190a1b2-0000-7000-8000-00000000bbb1'::uuid], ARRAY['x'], NULL,
  ARRAY[false], 'old');
SELECT whizbang.retry_dead_letters(ARRAY(SELECT dead_letter_id FROM whizbang.wh_dead_letters));
SQL
    got=$(tr '\n' ' ' <"$WORK/old.out")
    [ "$got" = "2 inbox,inbox dead_lettered 1 " ] || { echo "0.3.0 database served by the new library: got [$got]"; exit 1; }
    got=$(psql -At -d upgraded -v VERBOSITY=verbose \
            -c "SELECT * FROM whizbang.claim_work('0190a1b2-0000-7000-8000-00000000cccc', 'outbox')" 2>&1 || true)
    grep -q 0A000 <<<"$got" || { echo "claim_work('outbox') on a 0.3.0 database: $got"; exit 1; }
    echo "ok: the $target library serves a database at 0.3.0 (inbox as before, outbox 0A000)"
  fi
  if [ "$next" = "0.7.0" ]; then
    # 0.7.0 re-creates claim_work with a tenth argument (p_wait): the grants users gave on the
    # 9-argument one (docs/security.md) must reach the new one, with their grant options and
    # grantors, and stay the users' own (in pg_dump's output; pg_init_privs is compared below).
    psql -d upgraded <<'SQL'
CREATE ROLE wb_up_worker; CREATE ROLE wb_up_relay; CREATE ROLE wb_up_sub; CREATE ROLE wb_up_late;
GRANT USAGE ON SCHEMA whizbang TO wb_up_worker, wb_up_relay, wb_up_sub;
-- what an inbox claim needs besides EXECUTE (docs/inbox.md#grants; DELETE on the message and
-- work tables: a claim may dead-letter, checked when every claim starts since 0.13.0)
GRANT SELECT, DELETE ON whizbang.wh_inbox TO wb_up_worker, wb_up_relay, wb_up_sub;
GRANT SELECT ON whizbang.settings TO wb_up_worker, wb_up_relay, wb_up_sub;
GRANT SELECT, UPDATE, DELETE ON whizbang.wh_inbox_work TO wb_up_worker, wb_up_relay, wb_up_sub;
GRANT SELECT, DELETE ON whizbang.wh_inbox_preleased TO wb_up_worker, wb_up_relay, wb_up_sub;
GRANT INSERT ON whizbang.wh_dead_letters TO wb_up_worker, wb_up_relay, wb_up_sub;
GRANT USAGE ON SEQUENCE whizbang.wh_lease_token_seq TO wb_up_worker, wb_up_relay, wb_up_sub;
GRANT EXECUTE ON FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text)
  TO wb_up_worker;
GRANT EXECUTE ON FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text)
  TO wb_up_relay WITH GRANT OPTION;
SET ROLE wb_up_relay;
GRANT EXECUTE ON FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text)
  TO wb_up_sub;
RESET ROLE;
SQL
    psql -At -d upgraded -c "SELECT proacl FROM pg_proc WHERE oid = 'whizbang.claim_work'::regproc" >"$WORK/acl_before"
  fi
  if [ "$next" = "0.12.0" ]; then
    # 0.12.0 re-creates wh_message_deduplication as a partitioned table: the applications'
    # grants on the old one must reach it, and stay theirs (dumped; pg_init_privs compared below).
    psql -d upgraded <<'SQL'
GRANT SELECT, INSERT, UPDATE ON whizbang.wh_message_deduplication TO wb_up_worker;
GRANT SELECT ON whizbang.wh_message_deduplication TO wb_up_relay WITH GRANT OPTION;
SQL
  fi
  if [ "$next" = "0.16.0" ]; then
    # 0.16.0 re-creates fail_work with an eighth argument (p_retry_after): as claim_work's in
    # 0.7.0, the grants on the 7-argument one must reach it whole and stay the users' own.
    psql -d upgraded <<'SQL'
CREATE ROLE wb_up_fail; CREATE ROLE wb_up_fail_relay; CREATE ROLE wb_up_fail_sub;
GRANT USAGE ON SCHEMA whizbang TO wb_up_fail, wb_up_fail_relay, wb_up_fail_sub;
GRANT EXECUTE ON FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz) TO wb_up_fail;
GRANT EXECUTE ON FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz)
  TO wb_up_fail_relay WITH GRANT OPTION;
SET ROLE wb_up_fail_relay;
GRANT EXECUTE ON FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz) TO wb_up_fail_sub;
RESET ROLE;
SQL
    psql -At -d upgraded -c "SELECT proacl FROM pg_proc WHERE oid = 'whizbang.fail_work'::regproc" >"$WORK/fail_acl_before"
  fi
  echo "update $current -> $next"
  psql -d upgraded -c "ALTER EXTENSION whizbang UPDATE TO '$next'"
  current=$next
done

# Old data and old signatures keep working after the update.
test "$(psql -At -d upgraded -c "SELECT observation_count FROM whizbang.wh_message_deduplication WHERE consumer = 'up'")" = 2
test "$(psql -At -d upgraded -c "SELECT value FROM whizbang.settings WHERE setting_key = 'dedup_retention_days'")" = 45
test "$(psql -At -d upgraded -c "SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-00000000aaaa', 'up', '\x02')")" = conflict
test "$(psql -At -d upgraded -c "SELECT extversion FROM pg_extension WHERE extname = 'whizbang'")" = "$target"
test "$(psql -At -d upgraded -c "SELECT whizbang.version()")" = "$target"

# The grants on claim_work arrived whole (0.7.0 re-created it): the same ACL, each role can
# call it, the grant option still works, and pg_dump still dumps them as the users' grants.
acl_after=$(psql -At -d upgraded -c "SELECT proacl FROM pg_proc WHERE oid = 'whizbang.claim_work'::regproc")
[ "$acl_after" = "$(cat "$WORK/acl_before")" ] ||
  { echo "claim_work's grants: before the update $(cat "$WORK/acl_before"), after $acl_after"; exit 1; }
for role in wb_up_worker wb_up_relay wb_up_sub; do
  got=$(psql -At -d upgraded -c "SET ROLE $role" \
          -c "SELECT count(*) FROM whizbang.claim_work('0190a1b2-0000-7000-8000-00000000dddd', 'inbox', p_consumer => 'nobody', p_wait => '0')")
  [ "$got" = 0 ] || { echo "$role calling the new claim_work: $got"; exit 1; }
done
psql -d upgraded -c "SET ROLE wb_up_relay" -c "GRANT EXECUTE ON FUNCTION whizbang.claim_work(uuid, text, integer, integer,
  integer[], integer, integer, timestamptz, text, interval) TO wb_up_late"
dumped=$(pg_dump --schema-only -d upgraded | grep -c '^GRANT ALL ON FUNCTION whizbang\.claim_work(.*p_wait interval) TO wb_up_')
[ "$dumped" = 4 ] || { echo "pg_dump dumps $dumped of the 4 grants on claim_work"; exit 1; }
echo "ok: claim_work's grants survive the update to 0.7.0 ($acl_after) and are dumped"

# The grants on the dedup records arrived (0.12.0 re-created the table) and are dumped.
dedup_acl=$(psql -At -d upgraded -c "SELECT array_to_string(array(SELECT a.grantee::regrole || ' ' || a.privilege_type
    || CASE WHEN a.is_grantable THEN '*' ELSE '' END FROM pg_class c, aclexplode(c.relacl) a
    WHERE c.oid = 'whizbang.wh_message_deduplication'::regclass AND a.grantee <> c.relowner ORDER BY 1), ', ')")
[ "$dedup_acl" = "wb_up_relay SELECT*, wb_up_worker INSERT, wb_up_worker SELECT, wb_up_worker UPDATE" ] ||
  { echo "the grants on wh_message_deduplication after the update to 0.12.0: $dedup_acl"; exit 1; }
dumped=$(pg_dump --schema-only -d upgraded | grep -c '^GRANT .* ON TABLE whizbang\.wh_message_deduplication TO wb_up_' || true)
[ "$dumped" = 2 ] || { echo "pg_dump dumps $dumped of the 2 grants on wh_message_deduplication"; exit 1; }
echo "ok: the grants on wh_message_deduplication survive the update to 0.12.0 ($dedup_acl) and are dumped"

if [ -f "$WORK/fail_acl_before" ]; then
  fail_acl=$(psql -At -d upgraded -c "SELECT proacl FROM pg_proc WHERE oid = 'whizbang.fail_work'::regproc")
  [ "$fail_acl" = "$(cat "$WORK/fail_acl_before")" ] ||
    { echo "fail_work's grants: before the update $(cat "$WORK/fail_acl_before"), after $fail_acl"; exit 1; }
  args=$(psql -At -d upgraded -c "SELECT pg_get_function_identity_arguments('whizbang.fail_work'::regproc)")
  [[ "$args" == *"p_retry_after interval" ]] || { echo "fail_work after the update: ($args)"; exit 1; }
  dumped=$(pg_dump --schema-only -d upgraded | grep -c '^GRANT ALL ON FUNCTION whizbang\.fail_work(.*p_retry_after interval) TO wb_up_fail' || true)
  [ "$dumped" = 3 ] || { echo "pg_dump dumps $dumped of the 3 grants on fail_work"; exit 1; }
  echo "ok: fail_work's grants survive the update to 0.16.0 ($fail_acl) and are dumped"
fi

objects fresh >"$WORK/fresh.txt"
objects upgraded >"$WORK/upgraded.txt"
if ! diff -u "$WORK/fresh.txt" "$WORK/upgraded.txt"; then
  echo "the updated extension differs from a fresh install"; exit 1
fi
echo "ok: $(wc -l <"$WORK/fresh.txt") objects identical after updating $versions -> $target," \
     "$(grep -c '^comment on ' "$WORK/fresh.txt") of them comments, $(grep -c '^trigger ' "$WORK/fresh.txt") triggers," \
     "$(grep -c '^view ' "$WORK/fresh.txt") views"
SH
source scripts/lib.sh  # wb_free_port
WORK="$work" pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off bash "$work/run.sh"
rm -rf "$work"
