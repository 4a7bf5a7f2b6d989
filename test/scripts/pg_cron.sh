#!/usr/bin/env bash
# pg_cron (Debian's postgresql-15-cron, 1.4.2 on Debian 12) runs whizbang's maintenance by the
# recipe of docs/operations.md "pg_cron", taken from the docs themselves, in throw-away clusters:
#   - the conf.d file of the recipe: pg_cron preloaded, cron.database_name = 'shop' (not the
#     postgres database), cron.host = the socket directory (pg_cron's default, localhost over
#     TCP, asks for a password the scheduler does not have: "connection failed");
#   - the recipe's job, `CALL whizbang.run_maintenance()` every minute (pg_cron 1.4 has no
#     seconds), scheduled by postgres;
#   - rows seeded with timestamps of 2000 are gone after the job's first run, which
#     cron.job_run_details reports as "succeeded", "CALL"; the recent and waiting ones stay.
# The recipe's other variant runs after it, in a second cluster:
# cron.use_background_workers = on instead of cron.host, and the job scheduled by a role with
# the docs' maintenance grants only.
#   pg_cron.sh [cron-host|background-workers]   one variant only (default: both, one after the other)
# Skips (exit 0, with a message) where pg_cron is not installed. Waits at most 75 s for the
# minute. Expects whizbang to be installed already (./scripts/test does that).
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh  # wb_free_port, wb_pg_config

if [ "${1:-}" != "--in-cluster" ]; then
  if [ ! -f "$("$(wb_pg_config)" --pkglibdir)/pg_cron.so" ]; then
    echo "skip: pg_cron is not installed (Debian: postgresql-$WB_PG_MAJOR-cron, in WB_PACKAGES of scripts/lib.sh)"
    exit 0
  fi
  modes=("$@")
  [ ${#modes[@]} -eq 0 ] && modes=(cron-host background-workers)
  logs=$(mktemp -d /tmp/whizbang-pg_cron.XXXXXX)
  trap 'rm -rf "$logs"' EXIT
  # One after the other: two throw-away clusters are both named 15/regress, and Debian's
  # pg_ctlcluster (the restart that loads pg_cron) finds a cluster by its external pid file
  # /var/run/postgresql/15-regress.pid, which two clusters at once would share.
  rc=0
  for mode in "${modes[@]}"; do
    case "$mode" in cron-host | background-workers) ;; *) echo "usage: $0 [cron-host|background-workers]"; exit 2 ;; esac
    pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off bash "$self" --in-cluster "$mode" >"$logs/$mode" 2>&1 || rc=1
    echo "===== $mode"
    cat "$logs/$mode"
  done
  exit $rc
fi
mode=$2

# ----------------------------------------------------------------------------------------
# Inside the cluster (PG* variables point at it)
# ----------------------------------------------------------------------------------------
source test/lib/checks.sh  # check, check_eq, FAILED
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
source test/lib/maintenance_rows.sh  # seed_rows, left
export PGDATABASE=shop  # check and q run there

# The recipe, read from the docs: the conf.d file, the job, the maintenance grants.
section=$(sed -n '/^### pg_cron$/,/^### /p' docs/operations.md)
recipe_conf=$(sed -n "/^sudo tee .*conf.d\/pg_cron.conf <<'EOF'$/,/^EOF$/p" <<<"$section" | sed '1d;$d')
recipe_job=$(grep -E "^SELECT cron\.schedule\('whizbang-maintenance'" <<<"$section" || true)
grants=$(sed -n '/^## Grants for maintenance and monitoring$/,/^```$/p' docs/operations.md |
           sed -n '/^```sql$/,/^```$/p' | sed '1d;$d')
check_eq "the docs hold the recipe: a conf.d file with cron.host" "t" \
  "$(grep -q "^cron.host = '/var/run/postgresql'$" <<<"$recipe_conf" && echo t || echo "f: $recipe_conf")"
check_eq "and the job, CALL whizbang.run_maintenance() every minute" "t" \
  "$(grep -qF "'* * * * *', \$\$CALL whizbang.run_maintenance()\$\$)" <<<"$recipe_job" && echo t || echo "f: $recipe_job")"

q -d postgres -c "CREATE DATABASE shop"
conf_d=$(dirname "$(q -d postgres -c "SHOW config_file")")/conf.d
socket_dir=$(q -d postgres -c "SHOW unix_socket_directories" | cut -d, -f1)  # /var/run/postgresql as root
if [ "$mode" = cron-host ]; then
  # As root (CI) the socket directory is Debian's, and the file is the docs' word for word.
  sed "s|^cron.host = .*|cron.host = '$socket_dir'|" <<<"$recipe_conf" >"$conf_d/pg_cron.conf"
else
  sed "s|^cron.host = .*|cron.use_background_workers = on|" <<<"$recipe_conf" >"$conf_d/pg_cron.conf"
fi
echo "== $conf_d/pg_cron.conf"
cat "$conf_d/pg_cron.conf"
pg_ctlcluster "$PGVERSION" regress restart
for ((i = 0; i < 50; i++)); do q -c "SELECT 1" >/dev/null 2>&1 && break; sleep 0.1; done
check_eq "the restarted server preloads pg_cron" "pg_cron" "$(q -c "SHOW shared_preload_libraries")"

q -c "CREATE EXTENSION pg_cron"
echo "pg_cron $(q -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'")" \
  "(package $(dpkg-query -W -f='${Version}' "postgresql-$PGVERSION-cron" 2>/dev/null || echo '?'))"
seed_rows shop >/dev/null
check_eq "seeded: old and recent dedup records, a waiting message, a dead letter, a key, waiting work" \
  "501 1 1 1 1 1" "$(left shop)"

if [ "$mode" = cron-host ]; then
  owner=postgres
else
  # A role with the docs' maintenance grants only, and the right to schedule.
  owner=maint
  q -c "CREATE ROLE maint LOGIN" -c "GRANT USAGE ON SCHEMA cron TO maint"
  q <<<"$grants"
fi
jobid=$(q -c "SET ROLE $owner" -c "$recipe_job")
echo "scheduled job $jobid as $owner at $(date -u +%T); waiting for the minute"

# pg_cron starts a '* * * * *' job at the next full minute: at most 60 s, plus the run.
status=""
for ((i = 0; i < 75; i++)); do
  status=$(q -c "SELECT status || ': ' || return_message FROM cron.job_run_details
                  WHERE jobid = $jobid AND status IN ('succeeded', 'failed') ORDER BY runid LIMIT 1")
  [ -n "$status" ] && break
  sleep 1
done
echo "after $i s: ${status:-no finished run}"
check_eq "cron.job_run_details: the job ran and succeeded" "succeeded: CALL" "$status"
# What one run purges (as in run_maintenance.sh: the dead letter goes first, then the old dedup
# records with its record; maintenance.h's kRunOrder).
check_eq "the old rows are gone; recent and waiting ones stay" "0 1 1 0 0 1" "$(left shop)"
check "the job ran as $owner" "SELECT username = '$owner' FROM cron.job WHERE jobid = $jobid"

if [ "$FAILED" -ne 0 ]; then
  echo "pg_cron ($mode): $FAILED check(s) failed"
  exit 1
fi
echo "pg_cron ($mode): PASS"
