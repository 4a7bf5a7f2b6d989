#!/usr/bin/env bash
# One table of required privileges through a coordinator (issue 30 item 11): the cases of
# test/pgtap/required_privileges.sql, unchanged, on a distributed install (a coordinator and 2
# workers, whizbang.distribute(4)). Every routed function refuses, with 42501 and before anything
# is written, a role that lacks any one privilege whizbang._required_privileges() lists for it,
# exactly as one server does, and runs for a role that holds exactly those (the nodes run the
# routed parts as the extension's owner, so only the coordinator's check stands between a role
# and the data). Before 0.13.0 the coordinator checked a list of its own, which had drifted:
# dedup_insert_many INSERT only, retry_dead_letters UPDATE only, fail_work's dead-lettering
# nothing on wh_dead_letters. Skips (exit 0) without Citus.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh
source test/lib/checks.sh
source test/citus/cluster.sh

citus_suite_start
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION whizbang" -c "CREATE EXTENSION pgtap" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -c "SELECT whizbang.distribute(4)" >/dev/null 2>&1
check "whizbang is distributed" \
  "SELECT count(*) = 10 FROM pg_dist_partition WHERE logicalrelid::text LIKE 'whizbang.%' AND partmethod = 'h'"
out=$(PGOPTIONS="-c citus.enable_repartition_joins=on" timeout 900 pg_prove test/pgtap/required_privileges.sql 2>&1) && rc=0 || rc=$?
if [ "$rc" -eq 0 ] && grep -q '^Result: PASS' <<<"$out"; then
  echo "ok   pgTAP required_privileges.sql through the coordinator ($(sed -nE 's/^Files=1, Tests=([0-9]+),.*/\1/p' <<<"$out") tests)"
else
  echo "FAIL pgTAP required_privileges.sql through the coordinator"
  grep -vE '^ok ' <<<"$out" | head -80
  FAILED=$((FAILED + 1))
fi
echo "$FAILED failed"
[ "$FAILED" -eq 0 ]
