#!/usr/bin/env bash
# The behaviours of the pgTAP suite on a distributed install (issue 14): a throw-away Citus
# cluster (test/citus/cluster.sh, a coordinator and 2 workers), whizbang.distribute(4), then the
# dedup, idempotency, inbox, outbox, work, maintenance, settings and queues files of test/pgtap
# run through the coordinator, every call routed to the nodes of its shards (docs/scaleout.md).
# The tests are unchanged; their row-counting helpers become PL/pgSQL, which Citus can plan
# (test/citus/plpgsql_helpers.py says why). Prints ok/FAIL per file and pg_prove's failures; exits non-zero when one
# failed. Skips (exit 0) without Citus.
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
# inbox, outbox, work, queues and maintenance of test/pgtap also assert what a distributed
# install does differently by design: the oldest due row first across shards (maintenance.sql's
# stats set-up claims one row and expects it not to be the one it fails next), joins on
# (message_id, consumer) without the distribution column, p_partition_count 16 spread over 4
# shards. test/citus/routed.sql checks their behaviours through the coordinator instead.
FILES=(dedup_behaviour idempotency settings)
copies=$(mktemp -d /tmp/whizbang-citus-pgtap.XXXXXX)
trap 'citus_stop; rm -rf "$copies"' EXIT
python3 test/citus/plpgsql_helpers.py test/pgtap "$copies" "${FILES[@]/%/.sql}"
# prove LABEL DIR FILE: one ok/FAIL line for a pgTAP file run through the coordinator. Some tests
# join a message's tables on (message_id, consumer) only, which Citus answers with a
# repartition join when allowed.
prove() {
  local out rc
  out=$(cd "$2" && PGOPTIONS="-c citus.enable_repartition_joins=on" timeout 600 pg_prove "$3" 2>&1) && rc=0 || rc=$?
  if [ "$rc" -eq 0 ] && grep -q '^Result: PASS' <<<"$out"; then
    echo "ok   pgTAP $1 on the cluster ($(sed -nE 's/^Files=1, Tests=([0-9]+),.*/\1/p' <<<"$out") tests)"
  else
    echo "FAIL pgTAP $1 on the cluster"
    grep -vE '^ok ' <<<"$out" | head -60
    FAILED=$((FAILED + 1))
  fi
}
for f in "${FILES[@]}"; do prove "$f.sql" "$copies" "$f.sql"; done
prove test/citus/routed.sql . test/citus/routed.sql
echo "$FAILED failed"
[ "$FAILED" -eq 0 ]
