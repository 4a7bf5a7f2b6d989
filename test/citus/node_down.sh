#!/usr/bin/env bash
# One worker down is one worker down (issue 22; the checks are test/citus/node_down.py): stores
# and claims of the other worker's partitions go on, a claim without partitions takes what the
# reachable worker has (with a NOTICE), completions of a session's claims reach their node only,
# and a call that needs the stopped worker fails with a connection error. Skips without Citus.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh
source test/lib/checks.sh
source test/citus/cluster.sh

wb_python
citus_suite_start
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION whizbang" -c "SELECT whizbang.distribute(8)" >/dev/null 2>&1
ctl="$(printf '%q ' "$CITUS_BIN/pg_ctl") -D $(printf '%q' "$CITUS_DIR/n$WORKER2_PORT") -w -t 60"
stop="$ctl -m immediate stop"
start="$ctl -l $(printf '%q' "$CITUS_DIR/n$WORKER2_PORT.log") start"
if [ "$(id -u)" -eq 0 ]; then
  stop="runuser -u postgres -- bash -c $(printf '%q' "$stop")"
  start="runuser -u postgres -- bash -c $(printf '%q' "$start")"
fi
"$PY" test/citus/node_down.py "host=$CITUS_DIR port=$COORD_PORT user=postgres dbname=postgres" \
  "$WORKER1_PORT" "$WORKER2_PORT" "$stop >/dev/null" "$start >/dev/null"
