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
set -euo pipefail

self=$(readlink -f "$0")
root=$(cd "$(dirname "$self")/../.." && pwd)

source "$root/scripts/lib.sh"  # wb_free_port

if [ "${1:-}" = "--in-cluster" ]; then
    # $2: the program, $3: its output file
    timeout -k 5 110 "$2" >"$3" 2>&1
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
