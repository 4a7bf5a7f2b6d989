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
set -euo pipefail

self=$(readlink -f "$0")
root=$(cd "$(dirname "$self")/../.." && pwd)

source "$root/scripts/lib.sh"  # wb_free_port

if [ "${1:-}" = "--in-cluster" ]; then
    # $2: the program, $3: its output file. Two runs, each in a database of its own: the
    # default mix, then short leases with workers that stall past them and go on with their
    # old tokens (takeovers of lapsed streams, DESIGN §3.4), with a smaller load.
    timeout -k 5 110 "$2" >"$3" 2>&1 || exit
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
touch "$work/out.log"
chmod 666 "$work/out.log"
status=0
pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off \
    bash "$self" --in-cluster "$work/inbox_stress" "$work/out.log" || status=$?
cat "$work/out.log"
if [ "$status" -ne 0 ]; then
    # Again at the end, after the server log pg_virtualenv prints on failure.
    echo "--- failed checks (exit status $status):"
    grep -E '^  FAIL|^    |^inbox_stress:|failed:' "$work/out.log" | head -n 25 || true
    grep -q '^inbox_stress:' "$work/out.log" || echo "inbox_stress: FAIL (no summary: the program did not finish)"
fi
exit "$status"
