#!/usr/bin/env bash
# Multi-connection stress test of the inbox (DESIGN §3.2, §3.4): 4 producers store 20,000
# messages over 200 streams with 10% redelivered duplicates while 4 workers claim, complete
# (effect and completion in one transaction), fail at random, renew and release, and one of
# them crashes twice. Asserts that every message was completed exactly once or dead-lettered,
# that no completion happened out of stream order, and that no duplicate was processed.
# The program is test/stress/inbox_stress.cpp (libpq); it prints one final line
# "inbox_stress: PASS|FAIL ..." and exits non-zero on failure.
#   STRESS_SEED=n         repeat a run's random choices (the seed is printed)
#   STRESS_SABOTAGE=order|dup|lost|fence   misbehave on purpose: the run must FAIL
# A second run uses 1 s leases and workers that stall past them (STRESS_LEASE_SECONDS,
# STRESS_STALL_PCT), so streams are taken over from holders that then go on with old tokens.
# Both runs are made in two clusters, one per lease store (issue 11): a plain one (leases in the
# work rows) and one with shared_preload_libraries = whizbang (leases in shared memory).
#   STRESS_LEASE_STORES="table"  (or "shared_memory") one cluster only
set -euo pipefail

self=$(readlink -f "$0")
root=$(cd "$(dirname "$self")/../.." && pwd)

source "$root/scripts/lib.sh"  # wb_free_port

if [ "${1:-}" = "--in-cluster" ]; then
    # $2: the program, $3: its output file. Two runs, each in a database of its own: the
    # default mix, then short leases with workers that stall past them and go on with their
    # old tokens (takeovers of lapsed streams, DESIGN §3.4), with a smaller load.
    run=0
    timeout -k 5 110 "$2" >"$3" 2>&1 || run=$?
    echo "lease store: $(psql -qXAt -c 'SELECT whizbang.lease_store()' 2>&1)" >>"$3"
    [ "$run" -eq 0 ] || exit "$run"
    createdb stress_stall
    echo "=== run 2: 1 s leases, 1% of rows preceded by a stall past the lease" >>"$3"
    PGDATABASE=stress_stall STRESS_LEASE_SECONDS=1 STRESS_STALL_PCT=1 STRESS_MESSAGES=5000 \
        timeout -k 5 110 "$2" >>"$3" 2>&1
    exit
fi

work=$(mktemp -d /tmp/whizbang-inbox-stress.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
pg_config=/usr/lib/postgresql/15/bin/pg_config
[ -x "$pg_config" ] || pg_config=$(command -v pg_config)
g++ -std=c++17 -O2 -Wall -pthread -I"$("$pg_config" --includedir)" \
    "$root/test/stress/inbox_stress.cpp" -o "$work/inbox_stress" -lpq
chmod 755 "$work/inbox_stress"
status=0
for store in ${STRESS_LEASE_STORES:-table shared_memory}; do
    out="$work/out-$store.log"
    touch "$out"
    chmod 666 "$out"
    opts=(-o fsync=off)
    [ "$store" = table ] || opts+=(-o shared_preload_libraries=whizbang)
    echo "=== cluster for the $store lease store (${opts[*]})"
    run=0
    pg_virtualenv -t -c "-p $(wb_free_port)" "${opts[@]}" \
        bash "$self" --in-cluster "$work/inbox_stress" "$out" || run=$?
    cat "$out"
    if [ "$run" -ne 0 ]; then
        status=$run
        # Again at the end, after the server log pg_virtualenv prints on failure.
        echo "--- failed checks, lease store $store (exit status $run):"
        grep -E '^  FAIL|^    |^inbox_stress:|failed:' "$out" | head -n 25 || true
        grep -q '^inbox_stress:' "$out" || echo "inbox_stress: FAIL (no summary: the program did not finish)"
    fi
done
exit "$status"
