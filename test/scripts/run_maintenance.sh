#!/usr/bin/env bash
# CALL whizbang.run_maintenance() (DESIGN §3.6), in a throw-away cluster:
#   - it purges what perform_maintenance purges (twin databases, same rows, same counts per task)
#     and reports one NOTICE per task;
#   - it commits between batches: with a small batch size the CALL writes in many transactions
#     (one transaction id each), where perform_maintenance works in the caller's (a ROLLBACK
#     undoes it);
#   - a task another transaction holds is skipped, without waiting;
#   - inside a transaction block, or from a function, it refuses with 25001; from a DO block
#     outside one it runs; the caller's search_path is the same after the CALL;
#   - NULL p_now (22004) and p_batch_size 0 (22023) are refused as by perform_maintenance.
# Expects whizbang to be installed already (./scripts/test does that). Exits non-zero on failure.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh  # wb_free_port
source test/lib/checks.sh  # check, check_eq, FAILED
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
source test/lib/maintenance_rows.sh  # seed_rows, left

# "task rows status" per task, from the CALL's notices (stderr), in order.
call_report() {  # database [arguments]
  q -d "$1" -c "CALL whizbang.run_maintenance(${2:-})" 2>&1 >/dev/null |
    sed -nE 's/^NOTICE:  whizbang maintenance: ([a-z_]+) ([a-z]+), ([0-9]+) rows in ([0-9]+) batches, .*/\1 \3 \2/p'
}

if [ "${1:-}" = "--in-cluster" ]; then
  q -c "CREATE DATABASE twin" -c "CREATE DATABASE batches"

  # Same rows in two databases: one purged by the function, one by the procedure.
  seed_rows postgres >/dev/null
  seed_rows twin >/dev/null
  by_function=$(q -F ' ' -c "SELECT task_name, rows_affected, status FROM whizbang.perform_maintenance()")
  by_procedure=$(call_report twin)
  check_eq "perform_maintenance on the seeded rows" \
    "purge_old_deduplication 501 ok
purge_expired_idempotency 2 ok
purge_dead_letters 1 ok
purge_processed 0 ok" "$by_function"
  check_eq "run_maintenance reports the same per task (one NOTICE each)" "$by_function" "$by_procedure"
  check_eq "and leaves the same rows: recent and waiting records and work stay" "$(left postgres)" "$(left twin)"
  # (The dead letter is purged before the dedup records (maintenance.h's kRunOrder), so its
  # record leaves with the old ones: 500 plain old records and it.)
  check_eq "which are the expected ones" "0 1 1 0 0 1" "$(left twin)"

  # Commits between batches: every transaction that deletes gets its own transaction id. (The
  # dedup purge drops whole generations since 0.12.0, one batch: 100 expired idempotency results
  # are the rows purged in batches here.)
  seed_rows batches >/dev/null
  q -d batches -c "DO \$\$ BEGIN FOR i IN 1 .. 100 LOOP
      PERFORM whizbang.idempotency_begin('b', 'k' || i, p_now => '2000-01-01 00:00:00+00');
      PERFORM whizbang.idempotency_complete('b', 'k' || i, (SELECT token FROM whizbang.wh_idempotency_keys
          WHERE scope = 'b' AND idempotency_key = 'k' || i), '{}', p_now => '2000-01-01 00:00:00+00');
    END LOOP; END \$\$" >/dev/null
  xid() { q -d batches -c "SELECT txid_current()"; }
  before=$(xid)
  report=$(q -d batches -c "CALL whizbang.run_maintenance(p_batch_size => 20)" 2>&1 >/dev/null)
  after=$(xid)
  idem_batches=$(sed -nE 's/.*purge_expired_idempotency ok, [0-9]+ rows in ([0-9]+) batches.*/\1/p' <<<"$report")
  check_eq "batch size 20: the idempotency purge took 3 batches or more (${idem_batches:-?})" "t" \
    "$( ((${idem_batches:-0} >= 3)) && echo t || echo f)"
  check_eq "each of them committed on its own: as many transaction ids as batches, or more ($((after - before - 1)) for $idem_batches)" \
    "t" "$( ((after - before - 1 >= ${idem_batches:-1} && idem_batches >= 3)) && echo t || echo f)"
  # The function runs in the caller's transaction: a ROLLBACK undoes all of it.
  seed_rows batches >/dev/null
  q -d batches -c "SELECT count(*) FROM whizbang.dedup_insert_many(
      ARRAY(SELECT ('85000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0'))::uuid FROM generate_series(1, 500) i),
      'old', NULL, NULL, '2000-01-01 00:00:00+00')" >/dev/null
  kept=$(left batches)
  q -d batches -c "BEGIN" -c "SELECT count(*) FROM whizbang.perform_maintenance(p_batch_size => 20)" -c "ROLLBACK" >/dev/null
  check_eq "perform_maintenance with the same batch size, rolled back: nothing purged" "$kept" "$(left batches)"

  # A concurrent holder of every task: the CALL skips them all, at once.
  seed_rows postgres >/dev/null
  PGAPPNAME=holder psql -X -q -c "BEGIN" -c "SELECT count(*) FROM whizbang.perform_maintenance()" \
    -c "SELECT pg_sleep(4)" -c "COMMIT" >/dev/null &
  holder=$!
  for ((i = 0; i < 50; i++)); do
    held=$(q -c "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                  WHERE a.application_name = 'holder' AND l.locktype = 'advisory' AND l.classid = x'77687a62'::int::oid")
    [ "$held" = "4" ] && break
    sleep 0.1
  done
  started=$(date +%s%N)
  skipped=$(call_report postgres)
  took_ms=$((($(date +%s%N) - started) / 1000000))
  wait "$holder"
  check_eq "while another transaction holds every task: all four skipped" \
    "purge_old_deduplication 0 skipped
purge_expired_idempotency 0 skipped
purge_dead_letters 0 skipped
purge_processed 0 skipped" "$skipped"
  check_eq "without waiting for it (${took_ms} ms)" "t" "$( ((took_ms < 3000)) && echo t || echo f)"

  # Where it may not commit.
  err() { psql -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose "$@" 2>&1 | sed -nE 's/^ERROR:  ([0-9A-Z]{5}): .*/\1/p'; }
  check_eq "inside BEGIN ... COMMIT: 25001" "25001" "$(err -c "BEGIN" -c "CALL whizbang.run_maintenance()")"
  check_eq "from a function: 25001" "25001" "$(err -c "CREATE FUNCTION public.calls_it() RETURNS void LANGUAGE plpgsql
      AS \$\$ BEGIN CALL whizbang.run_maintenance(); END \$\$" -c "SELECT public.calls_it()")"
  message=$(psql -X -q -c "BEGIN" -c "CALL whizbang.run_maintenance()" 2>&1 || true)
  check_eq "the error says why and what to do instead" "t" \
    "$(grep -q 'cannot run inside a transaction block' <<<"$message" && grep -q 'HINT: .*perform_maintenance' <<<"$message" && echo t || echo f)"
  check_eq "from a DO block outside a transaction block: runs" "4" \
    "$(psql -X -q -c "DO \$\$ BEGIN CALL whizbang.run_maintenance(); END \$\$" 2>&1 | grep -c 'NOTICE:  whizbang maintenance: .* ok,')"
  check_eq "the caller's search_path is the same after the CALL" "public, whizbang" \
    "$(q -c "SET search_path = public, whizbang" -c "CALL whizbang.run_maintenance()" -c "SHOW search_path" 2>/dev/null)"
  check_eq "NULL p_now: 22004" "22004" "$(err -c "CALL whizbang.run_maintenance(NULL)")"
  check_eq "p_batch_size 0: 22023" "22023" "$(err -c "CALL whizbang.run_maintenance(now(), 0)")"
  exit $FAILED
fi

pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off bash "$self" --in-cluster && echo "all checks passed"
