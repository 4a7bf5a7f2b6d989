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

# A port no other cluster on this machine uses (pg_virtualenv alone would always pick 5432).
free_port() {
    local p
    for _ in $(seq 1 100); do
        p=$((20000 + RANDOM % 20000))
        if [ -z "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] && [ ! -e "/var/run/postgresql/.s.PGSQL.$p" ]; then
            echo "$p"
            return
        fi
    done
    echo 5432
}

if [ "${1:-}" = "--in-cluster" ]; then
    exec timeout -k 5 110 "$2"
fi

work=$(mktemp -d /tmp/whizbang-inbox-stress.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
pg_config=/usr/lib/postgresql/15/bin/pg_config
[ -x "$pg_config" ] || pg_config=$(command -v pg_config)
g++ -std=c++17 -O2 -Wall -pthread -I"$("$pg_config" --includedir)" \
    "$root/test/stress/inbox_stress.cpp" -o "$work/inbox_stress" -lpq
chmod 755 "$work/inbox_stress"
pg_virtualenv -t -c "-p $(free_port)" -o fsync=off -o max_connections=50 \
    bash "$self" --in-cluster "$work/inbox_stress"
