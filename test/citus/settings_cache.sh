#!/usr/bin/env bash
# The settings cache on a distributed install (issue 22; checks in test/citus/settings_cache.py):
# cached per backend on the coordinator and the nodes, dropped on every node when a change commits.
# Skips (exit 0) without Citus.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh
source test/lib/checks.sh
source test/citus/cluster.sh

wb_python
citus_suite_start
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION whizbang" -c "SELECT whizbang.distribute(8)" >/dev/null 2>&1
"$PY" test/citus/settings_cache.py "host=$CITUS_DIR port=$COORD_PORT user=postgres dbname=postgres"
