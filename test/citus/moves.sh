#!/usr/bin/env bash
# Shard moves while whizbang calls run, on a throw-away Citus cluster (issue 22; test/citus/moves.py
# has the checks): a store open across the start of a block_writes move of a non-anchor shard, and
# a session whose routing predates a move. Skips (exit 0) without Citus.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh
source test/lib/checks.sh
source test/citus/cluster.sh

wb_python
citus_suite_start
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION whizbang" -c "SELECT whizbang.distribute(8)" >/dev/null 2>&1
"$PY" test/citus/moves.py "host=$CITUS_DIR port=$COORD_PORT user=postgres dbname=postgres" "$WORKER1_PORT" "$WORKER2_PORT"
