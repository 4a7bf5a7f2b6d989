#!/usr/bin/env bash
# pg_upgrade of a PostgreSQL 15 cluster holding whizbang state to the major of the build in
# WB_PG_PREFIX (./scripts/test runs it on 17 and 18; issue 21, docs/operations.md "Moving to a
# new PostgreSQL major"). The old cluster is Debian's 15 with whizbang 0.8.0 created and used:
#   dedup records (one redelivered, one with a conflict), pending inbox and outbox work, leased
#   inbox and outbox work (table lease store: the leases are row columns and travel with the
#   data), a stream mid-run (its head leased, the rest behind it), a scheduled retry, a dead
#   letter, idempotency keys claimed (in progress), completed and released, a setting and a
#   policy.
# After pg_upgrade, on the new major:
#   - every whizbang table holds exactly what it held (row by row);
#   - a redelivery is still a duplicate, the conflict still a conflict, a completed key still
#     answers its result;
#   - once the old leases have lapsed every pending message is claimable, the stream in order;
#   - every lease token handed out is larger than every token handed out before the upgrade;
#   - ALTER EXTENSION whizbang UPDATE takes 0.8.0 to the current version, which then has the
#     objects a fresh install has.
# Runs as root (the clusters as postgres) or as the user that owns the build.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh      # wb_free_port, WB_PG_MAJOR
source test/lib/checks.sh  # check, check_eq, FAILED

new_prefix=${WB_PG_PREFIX:?"WB_PG_PREFIX: the prefix of the PostgreSQL build to upgrade to"}
old_bin=/usr/lib/postgresql/$WB_PG_MAJOR/bin
new_bin=$new_prefix/bin
new_major=$("$new_bin/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
current=$(sed -n "s/^default_version = '\(.*\)'/\1/p" whizbang.control)
from_version=0.8.0

work=$(mktemp -d /tmp/whizbang-pg-upgrade.XXXXXX)
chmod 755 "$work"
if [ "$(id -u)" -eq 0 ]; then
  chown postgres:postgres "$work"
  as_server() { (cd "$work" && runuser -u postgres -- "$@"); }
  export PGUSER=postgres
else
  as_server() { (cd "$work" && "$@"); }
  export PGUSER=${USER:-$(id -un)}
fi
old_port=$(wb_free_port) new_port=$(wb_free_port)
export PGHOST=$work PGDATABASE=postgres
cleanup() {
  as_server "$old_bin/pg_ctl" -D "$work/old" -m immediate -w stop >/dev/null 2>&1 || true
  as_server "$new_bin/pg_ctl" -D "$work/new" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

cluster_conf() {
  printf "port = %s\nunix_socket_directories = '%s'\nlisten_addresses = ''\nfsync = off\nmax_prepared_transactions = 10\n" \
    "$1" "$work" | as_server tee -a "$2/postgresql.conf" >/dev/null
}
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }

echo "== PostgreSQL $WB_PG_MAJOR cluster with whizbang $from_version"
as_server "$old_bin/initdb" -D "$work/old" -U "$PGUSER" -A trust --no-sync -E UTF8 --locale=C.UTF-8 >"$work/initdb-old.log"
cluster_conf "$old_port" "$work/old"
as_server "$old_bin/pg_ctl" -D "$work/old" -l "$work/old.log" -w start >/dev/null
export PGPORT=$old_port
q -c "CREATE EXTENSION whizbang VERSION '$from_version'" -c "CREATE SCHEMA upgrade_check" >/dev/null
q >/dev/null <<'SQL'
-- dedup: one record, one redelivered, one reused with another payload
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000001', 'up', '\x01');
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000001', 'up', '\x01');
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000002', 'up', '\x02');
SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000002', 'up', '\x03');
-- settings and policies
UPDATE whizbang.wh_settings SET setting_value = '45' WHERE setting_key = 'dedup_retention_days';
INSERT INTO whizbang.wh_idempotency_policies (scope, in_progress_ttl, default_result_ttl, description)
VALUES ('payments', '2 minutes', '7 days', 'upgrade test');
-- inbox: 40 messages without a stream, one stream of 5
SELECT count(*) FROM whizbang.store_inbox_messages(
  (SELECT jsonb_agg(jsonb_build_object('MessageId', format('0190a1b2-0000-7000-8001-%s', lpad(i::text, 12, '0')),
                                        'HandlerName', 'h', 'MessageType', 'T', 'Envelope', jsonb_build_object('i', i)))
     FROM generate_series(1, 40) i), p_consumer => 'up');
SELECT count(*) FROM whizbang.store_inbox_messages(
  (SELECT jsonb_agg(jsonb_build_object('MessageId', format('0190a1b2-0000-7000-8002-%s', lpad(i::text, 12, '0')),
                                        'HandlerName', 'h', 'MessageType', 'S', 'StreamId', '0190a1b2-0000-7000-8000-0000000000aa',
                                        'Envelope', jsonb_build_object('i', i)) ORDER BY i)
     FROM generate_series(1, 5) i), p_consumer => 'up');
-- outbox: 20 messages
SELECT count(*) FROM whizbang.store_outbox_messages(
  (SELECT jsonb_agg(jsonb_build_object('MessageId', format('0190a1b2-0000-7000-8003-%s', lpad(i::text, 12, '0')),
                                        'Destination', 'd', 'MessageType', 'T', 'Envelope', jsonb_build_object('i', i)))
     FROM generate_series(1, 20) i));
-- leases: 10 inbox rows (the stream's head among them) and 5 outbox rows, 10 minutes
CREATE TABLE upgrade_check.claimed AS
SELECT source, message_id, lease_token FROM whizbang.claim_work('0190a1b2-0000-7000-8000-00000000ffff', 'inbox', 10, 600, p_max_per_stream => 1)
UNION ALL
SELECT source, message_id, lease_token FROM whizbang.claim_work('0190a1b2-0000-7000-8000-00000000ffff', 'outbox', 5, 600);
-- of those: one completed, one failed for a retry, one failed for good (a dead letter)
SELECT whizbang.complete_work('inbox', ARRAY[(SELECT message_id FROM upgrade_check.claimed
                                                WHERE source = 'inbox' AND message_id::text LIKE '%-8001-%' ORDER BY message_id LIMIT 1)], p_consumer => 'up');
SELECT whizbang.fail_work('inbox', ARRAY[(SELECT message_id FROM upgrade_check.claimed
                                            WHERE source = 'inbox' AND message_id::text LIKE '%-8001-%' ORDER BY message_id OFFSET 1 LIMIT 1)],
                          ARRAY['try again later'], p_consumer => 'up');
SELECT whizbang.fail_work('inbox', ARRAY[(SELECT message_id FROM upgrade_check.claimed
                                            WHERE source = 'inbox' AND message_id::text LIKE '%-8001-%' ORDER BY message_id OFFSET 2 LIMIT 1)],
                          ARRAY['poison'], p_retryable => ARRAY[false], p_consumer => 'up');
-- idempotency keys: in progress, completed with a result, released
SELECT whizbang.idempotency_begin('payments', 'in-progress');
SELECT whizbang.idempotency_complete('payments', 'completed', (SELECT token FROM whizbang.idempotency_begin('payments', 'completed')),
                                     '{"charged": 42}');
SELECT whizbang.idempotency_release('payments', 'released', (SELECT token FROM whizbang.idempotency_begin('payments', 'released')));
SQL
# What every whizbang table holds, one line per table (row count and a digest of the rows in a
# fixed order), and the largest lease token handed out so far. A partitioned table (the dedup
# records from 0.12.0) is read through its name, as applications read it, and its generations
# are not listed apart. With $1 set, the settings tables are read for the keys the old version
# had only: an update adds its new settings, and must keep the old ones as they were.
# With $1 set, also what the update reshapes is read as the old version had it: the tables it had
# only (upgrade_check.tables_before), the message tables' own columns, and each work table's
# columns from wherever its rows live now (0.14.0 moved them into the message rows, whose
# partition_number is the work's).
snapshot() {
  local t where src cols
  local list="SELECT relname FROM pg_class WHERE relnamespace = 'whizbang'::regnamespace
                AND relkind IN ('r', 'p') AND NOT relispartition ORDER BY relname"
  [ -n "${1:-}" ] && list="SELECT relname FROM upgrade_check.tables_before ORDER BY relname"
  for t in $(q -c "$list"); do
    where= src="whizbang.$t"
    if [ -n "${1:-}" ] && [[ $t == wh_setting* ]]; then
      where="WHERE setting_key IN (SELECT setting_key FROM upgrade_check.keys_before)"
    fi
    if [ -n "${1:-}" ] && [[ $t =~ ^wh_(inbox|outbox)(_work)?$ ]]; then
      cols=$(q -c "SELECT string_agg(quote_ident(a.name), ', ' ORDER BY a.n) FROM upgrade_check.tables_before b,
                     unnest(b.cols) WITH ORDINALITY AS a(name, n)
                    WHERE b.relname = '$t' AND (b.relname LIKE '%\_work' OR a.name <> 'partition_number')")
      [ "$(q -c "SELECT to_regclass('whizbang.$t') IS NULL")" = t ] && t=${t%_work}
      src="(SELECT $cols FROM whizbang.$t) AS"
      t=${BASH_REMATCH[0]}
    fi
    q -c "SELECT '$t ' || count(*) || ' ' || coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '-') FROM $src t $where"
  done
}
snapshot >"$work/before.txt"
max_token=$(q -c "SELECT max(lease_token) FROM upgrade_check.claimed")
check_eq "the old cluster holds: dead letters, leased inbox rows, scheduled inbox rows, leased outbox rows, keys" \
  "1 7 1 5 2" \
  "$(q -c "SELECT concat_ws(' ', (SELECT count(*) FROM whizbang.wh_dead_letters),
                  (SELECT count(*) FROM whizbang.wh_inbox_work WHERE lease_expiry > now()),
                  (SELECT count(*) FROM whizbang.wh_inbox_work WHERE scheduled_for > now()),
                  (SELECT count(*) FROM whizbang.wh_outbox_work WHERE lease_expiry > now()),
                  (SELECT count(*) FROM whizbang.wh_idempotency_keys))")"
pending=$(q -c "SELECT (SELECT count(*) FROM whizbang.wh_inbox_work) + (SELECT count(*) FROM whizbang.wh_outbox_work)")
# Debian's 15.20 keeps an attribute version in every column's attoptions ("pg_attver=N", a
# back-branch change); the pg_dump inside pg_upgrade carries it over, and a server that predates
# the change (the vendored 16.4, 17.9 and 18.6) refuses it: "unrecognized parameter pg_attver".
# Only then, and only for user relations, the option is dropped in the old cluster before the
# upgrade (docs/operations.md "Moving to a new PostgreSQL major").
if ! grep -q pg_attver "$new_bin/postgres"; then
  for db in $(q -c "SELECT datname FROM pg_database WHERE datallowconn"); do
    q -d "$db" -c "UPDATE pg_catalog.pg_attribute
                      SET attoptions = nullif(array(SELECT o FROM unnest(attoptions) o WHERE o NOT LIKE 'pg_attver=%'), '{}')
                    WHERE attrelid >= 16384 AND attoptions::text LIKE '%pg_attver=%'" >/dev/null
  done
fi
as_server "$old_bin/pg_ctl" -D "$work/old" -w stop >/dev/null

echo "== pg_upgrade $WB_PG_MAJOR -> $new_major"
initdb_opts=(-U "$PGUSER" -A trust --no-sync -E UTF8 --locale=C.UTF-8)
# 18's initdb turns data checksums on by default; pg_upgrade needs them as the old cluster has them.
# (The help is read whole first: with pipefail, grep -q closing the pipe early could fail initdb.)
initdb_help=$("$new_bin/initdb" --help)
[[ $initdb_help == *--no-data-checksums* ]] && initdb_opts+=(--no-data-checksums)
as_server "$new_bin/initdb" -D "$work/new" "${initdb_opts[@]}" >"$work/initdb-new.log"
cluster_conf "$new_port" "$work/new"
upgrade=(-b "$old_bin" -B "$new_bin" -d "$work/old" -D "$work/new" -p "$old_port" -P "$new_port" -U "$PGUSER" -s "$work")
if as_server "$new_bin/pg_upgrade" --check "${upgrade[@]}" >"$work/check.log" 2>&1 &&
   as_server "$new_bin/pg_upgrade" "${upgrade[@]}" >"$work/upgrade.log" 2>&1; then
  echo "ok   pg_upgrade $WB_PG_MAJOR -> $new_major"
else
  echo "FAIL pg_upgrade $WB_PG_MAJOR -> $new_major"; tail -n 30 "$work/check.log" "$work/upgrade.log"
  find "$work/new" -path '*pg_upgrade_output*' -name '*.log' -exec grep -h -B12 -A3 -E 'ERROR|FATAL|error:' {} + 2>/dev/null | tail -n 60 || true
  exit 1
fi
as_server "$new_bin/pg_ctl" -D "$work/new" -l "$work/new.log" -w start >/dev/null
export PGPORT=$new_port
check_eq "the new cluster runs PostgreSQL $new_major" "$new_major" "$(q -c "SELECT current_setting('server_version_num')::int / 10000")"
snapshot >"$work/after.txt"
check_eq "every whizbang table holds what it held ($(wc -l <"$work/before.txt") tables)" \
  "$(cat "$work/before.txt")" "$(cat "$work/after.txt")"
check_eq "whizbang is still $from_version" "$from_version" "$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'whizbang'")"

check "a redelivery is still a duplicate" \
  "SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000001', 'up', '\x01') = 'duplicate'"
check "a reused id with another payload is still a conflict" \
  "SELECT whizbang.dedup_insert('0190a1b2-0000-7000-8000-000000000002', 'up', '\x04') = 'conflict'"
check "a completed idempotency key still answers its result" \
  "SELECT outcome = 'completed_duplicate' AND result = '{\"charged\": 42}' FROM whizbang.idempotency_begin('payments', 'completed')"
check "the key in progress is still in progress" \
  "SELECT outcome = 'in_progress_duplicate' FROM whizbang.idempotency_begin('payments', 'in-progress')"
check "the setting and the policy survived" \
  "SELECT (SELECT value FROM whizbang.settings WHERE setting_key = 'dedup_retention_days') = '45'
      AND (SELECT in_progress_ttl FROM whizbang.idempotency_policy('payments')) = interval '2 minutes'"

echo "== ALTER EXTENSION whizbang UPDATE ($from_version -> $current)"
q -c "CREATE TABLE upgrade_check.keys_before AS SELECT setting_key FROM whizbang.wh_setting_defaults" >/dev/null
q -c "CREATE TABLE upgrade_check.tables_before AS
        SELECT c.relname, array_agg(a.attname::text ORDER BY a.attnum) AS cols
          FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
         WHERE c.relnamespace = 'whizbang'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
         GROUP BY c.relname" >/dev/null
snapshot kept >"$work/before-update.txt"
q -c "ALTER EXTENSION whizbang UPDATE" >/dev/null
check_eq "the extension updated to $current" "$current|$current" \
  "$(q -c "SELECT extversion || '|' || whizbang.version() FROM pg_extension WHERE extname = 'whizbang'")"
check_eq "the update kept every row" "$(cat "$work/before-update.txt")" "$(snapshot kept)"

echo "== claims after the old leases lapsed"
later="now() + interval '1 hour'"
check "a claim now hands out none of the rows leased before the upgrade (their leases are live)" \
  "SELECT count(*) > 0 AND count(*) FILTER (WHERE c.message_id IN (SELECT message_id FROM upgrade_check.claimed)) = 0
     FROM whizbang.claim_work('0190a1b2-0000-7000-8000-00000000eeee', NULL, 1000, 60) c"
q -c "CREATE TABLE upgrade_check.after AS
        SELECT c.source, c.message_id, c.stream_id, c.lease_token, n
          FROM whizbang.claim_work('0190a1b2-0000-7000-8000-00000000dddd', 'inbox', 1000, 60, p_now => $later,
                                   p_max_per_stream => 1000) WITH ORDINALITY AS c(source, message_id, stream_id, partition_number,
                 handler_name, destination, message_type, envelope, metadata, scope, attempts, lease_token, lease_expiry, consumer, n)
        UNION ALL
        SELECT source, message_id, stream_id, lease_token, 0
          FROM whizbang.claim_work('0190a1b2-0000-7000-8000-00000000dddd', 'outbox', 1000, 60, p_now => $later)" >/dev/null
check_eq "every pending message (leased, scheduled or not) is claimable once the leases lapsed" \
  "$pending" "$(q -c "SELECT count(*) FROM upgrade_check.after")"
check "the stream's 5 messages come in stored order" \
  "SELECT count(*) = 5 AND array_agg(message_id ORDER BY n) = array_agg(message_id ORDER BY message_id)
     FROM upgrade_check.after WHERE stream_id IS NOT NULL"
check "every token handed out after the upgrade is larger than every one before it ($max_token)" \
  "SELECT min(lease_token) > $max_token FROM upgrade_check.after"
check "completing the claimed work works" \
  "SELECT count(*) = (SELECT count(*) FROM upgrade_check.after WHERE source = 'inbox')
     FROM whizbang.complete_work('inbox', (SELECT array_agg(message_id) FROM upgrade_check.after WHERE source = 'inbox'),
                                 p_consumer => 'up')
    WHERE outcome = 'completed'"

echo "== the updated extension has the objects of a fresh install"
# Dedup generations (0.12.0) are the records' tables, not the extension's objects: a store makes
# them, and the upgraded database's records are in a legacy one, so partitions are left out.
objects() {
  q -d "$1" <<'SQL'
SELECT pg_describe_object(classid, objid, 0) FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'whizbang')
UNION ALL
SELECT format('%s.%s %s %s', table_name, column_name, data_type, is_nullable)
  FROM information_schema.columns WHERE table_schema = 'whizbang'
   AND NOT EXISTS (SELECT FROM pg_class c WHERE c.relname = table_name
                      AND c.relnamespace = 'whizbang'::regnamespace AND c.relispartition)
UNION ALL
SELECT indexdef FROM pg_indexes WHERE schemaname = 'whizbang'
   AND NOT EXISTS (SELECT FROM pg_class c WHERE c.relname = tablename
                      AND c.relnamespace = 'whizbang'::regnamespace AND c.relispartition)
ORDER BY 1
SQL
}
q -c "CREATE DATABASE fresh" >/dev/null && q -d fresh -c "CREATE EXTENSION whizbang" >/dev/null
check_eq "objects of the upgraded and updated database = a fresh install's" "$(objects fresh)" "$(objects postgres)"
as_server "$new_bin/pg_ctl" -D "$work/new" -w stop >/dev/null

[ "$FAILED" -eq 0 ] && echo "all checks passed" || echo "pg_upgrade: $FAILED check(s) failed"
exit "$FAILED"
