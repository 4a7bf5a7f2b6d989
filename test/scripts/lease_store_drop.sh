#!/usr/bin/env bash
# Leases of a dropped database or extension are freed (issue 20, DESIGN §3.8), in a throw-away
# cluster with the shared-memory lease store. Two databases each claim 50 rows; stats()'
# lease_store_entries counts the whole server's table. Checked:
#   - DROP EXTENSION whizbang rolled back frees nothing (its leases still complete their rows);
#   - DROP EXTENSION whizbang committed frees that database's 50 entries, not the other's;
#   - DROP DATABASE frees the other database's entries;
#   - a database created afterwards starts with no entry of the dropped ones.
# Takes a few seconds. Ends with ok/FAIL lines; exits non-zero when a check failed.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh
source test/lib/checks.sh

q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
entries() { q -d "$1" -c "SELECT value FROM whizbang.stats() WHERE metric = 'lease_store_entries'"; }

if [ "${1:-}" = "--in-cluster" ]; then
  for db in drop_a drop_b watcher; do
    createdb "$db"
    q -d "$db" -c "CREATE EXTENSION whizbang" >/dev/null
  done
  check_eq "the cluster runs the shared-memory lease store" shared_memory \
    "$(q -d watcher -c "SELECT whizbang.lease_store()")"
  for db in drop_a drop_b; do
    q -d "$db" -c "SELECT count(*) FROM whizbang.store_inbox_messages(
                     (SELECT jsonb_agg(jsonb_build_object('MessageId', gen_random_uuid(), 'HandlerName', 'h',
                                                          'MessageType', 't', 'Envelope', '{}'::jsonb))
                        FROM generate_series(1, 50)))" >/dev/null
    q -d "$db" -c "CREATE TABLE held AS SELECT message_id, lease_token FROM whizbang.claim_work(gen_random_uuid(), 'inbox', 50, 3600)"
  done
  check_eq "100 leases are held in the server" 100 "$(entries watcher)"

  q -d drop_a -c "BEGIN; DROP EXTENSION whizbang CASCADE; ROLLBACK;" >/dev/null
  check_eq "DROP EXTENSION rolled back frees nothing" 100 "$(entries watcher)"
  check_eq "...and drop_a's leases still complete their rows" 50 \
    "$(q -d drop_a -c "SELECT count(*) FROM whizbang.complete_work('inbox',
         ARRAY(SELECT message_id FROM held ORDER BY message_id), ARRAY(SELECT lease_token FROM held ORDER BY message_id))
         WHERE outcome = 'completed'")"
  check_eq "their completion ended the 50 leases" 50 "$(entries watcher)"

  q -d drop_a -c "SELECT count(*) FROM whizbang.store_inbox_messages(
                   (SELECT jsonb_agg(jsonb_build_object('MessageId', gen_random_uuid(), 'HandlerName', 'h',
                                                        'MessageType', 't', 'Envelope', '{}'::jsonb))
                      FROM generate_series(1, 20)));
                 SELECT count(*) FROM whizbang.claim_work(gen_random_uuid(), 'inbox', 20, 3600)" >/dev/null
  check_eq "drop_a holds 20 leases again" 70 "$(entries watcher)"
  q -d drop_a -c "DROP EXTENSION whizbang CASCADE" >/dev/null
  check_eq "DROP EXTENSION whizbang freed drop_a's 20 entries, not drop_b's 50" 50 "$(entries watcher)"

  dropdb drop_b
  check_eq "DROP DATABASE freed drop_b's 50 entries" 0 "$(entries watcher)"
  createdb drop_c
  q -d drop_c -c "CREATE EXTENSION whizbang" >/dev/null
  check_eq "a new database starts with no entry" 0 "$(entries drop_c)"
  exit "$FAILED"
fi

options=(-o fsync=off -o shared_preload_libraries=whizbang)
pg_virtualenv -t -c "-p $(wb_free_port)" "${options[@]}" timeout -k 5 120 bash "$self" --in-cluster
