#!/usr/bin/env bash
# The background scheduler (DESIGN §3.6). Four throw-away clusters:
#   1. shared_preload_libraries = 'whizbang', whizbang.maintenance_databases = 'postgres, app'
#      and whizbang.maintenance_naptime = 1s: expired dedup records, dead letters and idempotency
#      tombstones disappear from both databases without any call, while recent records, a
#      waiting message's record and its work stay; a database without the extension is left
#      alone; the worker shows in pg_stat_activity; a changed naptime is taken on reload;
#   2. naptime 1h: no round in the first 10 s, though reloads and catalog changes in another
#      database keep waking the worker; a reload to 1s starts the round at once;
#   3. whizbang preloaded, no maintenance_databases: no worker, nothing purged;
#   4. not preloaded: no worker, nothing purged.
# Expects whizbang to be installed already (./scripts/test does that). Exits non-zero on failure.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh  # wb_free_port

source test/lib/checks.sh  # check_eq, FAILED
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }

source test/lib/maintenance_rows.sh  # seed_rows, left
wait_for() {  # database expected seconds
  local got="" i
  for ((i = 0; i < $3 * 5; i++)); do
    got=$(left "$1")
    [ "$got" = "$2" ] && break
    sleep 0.2
  done
  echo "$got"
}
old_record() {  # id: one more record first seen in 2000, in postgres; its generation made by
  # maintenance then, in the same transaction (0.13.0: a store makes none that has left the window)
  q -c "BEGIN" -c "SELECT count(*) FROM whizbang.perform_maintenance('2000-01-01 00:00:00+00')" \
    -c "SELECT count(*) FROM whizbang.dedup_insert_many(ARRAY['$1'::uuid], 'old', NULL, NULL, '2000-01-01 00:00:00+00')" \
    -c "COMMIT" >/dev/null
}
workers() {  # the maintenance workers running, by database
  q -c "SELECT coalesce(string_agg(datname, ',' ORDER BY datname), '') FROM pg_stat_activity
         WHERE backend_type = 'whizbang maintenance'"
}

case "${1:-}" in
  --preloaded)
    q -c "CREATE DATABASE app" -c "CREATE DATABASE other"
    seed_rows postgres >/dev/null
    seed_rows app >/dev/null
    seed_rows other >/dev/null
    q -d other -c "DROP EXTENSION whizbang"
    check_eq "postgres: old records, dead letters and tombstones go without any call; recent and waiting stay" \
      "0 1 1 0 0 1" "$(wait_for postgres "0 1 1 0 0 1" 30)"
    check_eq "app: the same" "0 1 1 0 0 1" "$(wait_for app "0 1 1 0 0 1" 30)"
    check_eq "the workers show in pg_stat_activity, one per listed database" "app,postgres" "$(workers)"
    check_eq "the worker's deletions reach the table statistics (what autovacuum goes by)" "t" \
      "$(q -c "SELECT n_tup_del >= 1 FROM pg_stat_user_tables WHERE relid = 'whizbang.wh_dead_letters'::regclass")"
    # pg_virtualenv keeps the server log next to its configuration.
    # (a worker logs when its run has ended, a moment after its last batch committed)
    for ((i = 0; i < 50; i++)); do
      logged=$(cat "${PG_CLUSTER_CONF_ROOT:-/nonexistent}"/../log/*.log 2>/dev/null |
               grep -c 'whizbang maintenance: purge_old_deduplication 501, ' || true)
      [ "$logged" -ge 2 ] && break
      sleep 0.2
    done
    check_eq "the workers logged what they purged (one line per database)" "2" "$logged"
    # A database where the extension was dropped: the worker leaves it alone (no errors, no worker).
    q -d other -c "CREATE EXTENSION whizbang" >/dev/null
    seed_rows other >/dev/null
    sleep 2
    check_eq "other (not listed): nothing purged" "501 1 1 1 1 1" "$(left other)"
    # New old rows while running: purged at the next round.
    old_record '84000000-0000-4000-8000-000000000001'
    check_eq "postgres: a new old record goes at the next round" "0 1 1 0 0 1" "$(wait_for postgres "0 1 1 0 0 1" 10)"
    # Reload with a long naptime: a new old record now stays.
    q -c "ALTER SYSTEM SET whizbang.maintenance_naptime = '1h'" -c "SELECT pg_reload_conf()" >/dev/null
    sleep 3
    old_record '84000000-0000-4000-8000-000000000002'
    sleep 3
    check_eq "after a reload with naptime 1h, the worker sleeps (the new old record stays)" "1 1 1 0 0 1" "$(left postgres)"
    exit $FAILED
    ;;
  --long-naptime)
    # Started with naptime 1h. Its latch is set again and again meanwhile (every reload does; a
    # burst of catalog changes in another database signals it to catch up), and a wake-up is
    # not a round: the first round is one naptime after the start.
    seed_rows postgres >/dev/null
    q -c "CREATE DATABASE other"
    up() { q -c "SELECT coalesce(min(extract(epoch FROM now() - backend_start)), 0)::int FROM pg_stat_activity
                  WHERE backend_type = 'whizbang maintenance'"; }
    for ((i = 0; i < 60 && $(up) < 11; i++)); do
      q -c "SELECT pg_reload_conf()" >/dev/null
      q -d other -c "DO \$\$ BEGIN FOR i IN 1 .. 200 LOOP EXECUTE 'CREATE TABLE t' || i || ' (a int)'; END LOOP;
                     FOR i IN 1 .. 200 LOOP EXECUTE 'DROP TABLE t' || i; END LOOP; END \$\$"
      sleep 0.5
    done
    check_eq "the worker has been up 10 s or more ($i reloads and bursts of catalog changes)" "t" "$( (($(up) >= 10)) && echo t || echo f)"
    check_eq "naptime 1h: nothing purged in the first 10 s, whatever wakes the worker" "501 1 1 1 1 1" "$(left postgres)"
    q -c "ALTER SYSTEM SET whizbang.maintenance_naptime = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
    check_eq "a reload to naptime 1s applies to the wait in progress: purged within seconds" \
      "0 1 1 0 0 1" "$(wait_for postgres "0 1 1 0 0 1" 10)"
    exit $FAILED
    ;;
  --idle)
    seed_rows postgres >/dev/null
    sleep 3
    check_eq "$2: no maintenance worker" "" "$(workers)"
    check_eq "$2: nothing purged" "501 1 1 1 1 1" "$(left postgres)"
    exit $FAILED
    ;;
esac

status=0
pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off -o "shared_preload_libraries=whizbang" \
  -o "whizbang.maintenance_databases=postgres, app" -o "whizbang.maintenance_naptime=1" \
  bash "$self" --preloaded || status=1
pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off -o "shared_preload_libraries=whizbang" \
  -o "whizbang.maintenance_databases=postgres" -o "whizbang.maintenance_naptime=1h" \
  bash "$self" --long-naptime || status=1
pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off -o "shared_preload_libraries=whizbang" \
  bash "$self" --idle "preloaded without maintenance_databases" || status=1
pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off bash "$self" --idle "not preloaded" || status=1
[ $status -eq 0 ] && echo "all checks passed"
exit $status
