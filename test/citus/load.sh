#!/usr/bin/env bash
# Many connections through the coordinator of a throw-away Citus cluster (a coordinator and 2
# workers, whizbang.distribute(8)), issue 14: 3 producers store overlapping inbox batches that
# span partitions on both workers (inbox_receive, redeliveries included) while 2 workers claim
# with a partition set each (p_partition_count 64) and complete (test/citus/load.py). Then:
#   - no acknowledged message is lost: after the load every one was completed (or its
#     completion was in doubt) or is still waiting and is completed by a final drain;
#   - no message is completed twice; each stream's messages were completed in stored order;
#   - no distributed deadlock (40P01) was reported to any client;
# twice: once undisturbed, once with worker 2 stopped with -m immediate and started again in
# the middle of the load (Citus recovers the prepared transactions it left; a client whose
# call failed then retries it). Skips (exit 0) without Citus.
#   LOAD_SECONDS=12
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh
source test/lib/checks.sh
source test/citus/cluster.sh

wb_python
citus_suite_start
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }
q "CREATE EXTENSION whizbang" >/dev/null
q "SELECT whizbang.distribute(8)" >/dev/null 2>&1
seconds=${LOAD_SECONDS:-12}
dsn="host=$CITUS_DIR port=$COORD_PORT user=postgres dbname=postgres"

# Claims everything left (past every lease) and completes it; prints the ids.
drain() {
  psql -X -q -A -t -v ON_ERROR_STOP=1 <<'SQL'
CREATE TEMP TABLE left_over AS
  SELECT message_id, lease_token FROM whizbang.claim_work('00000000-0000-4000-8000-0000000000dd', 'inbox', 100000, 30,
                                                          NULL, 64, 100000, now() + interval '1 hour', 'load');
SELECT message_id FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM left_over),
                                              ARRAY(SELECT lease_token FROM left_over), 'load',
                                              now() + interval '1 hour')
 WHERE outcome = 'completed';
SQL
}

verify() {  # label log drained
  "$PY" - "$2" "$3" <<'PY'
import json, sys
log = json.load(open(sys.argv[1]))
drained = set(l.strip() for l in open(sys.argv[2]) if l.strip())
done = [c[0] for c in log["completed"]]
in_doubt = set(log.get("in_doubt", []))
twice = {m for m in done if done.count(m) > 1} if len(done) < 20000 else set()
lost = set(log["stored"]) - set(done) - drained - in_doubt
order_broken = 0
streams = {}
for mid, stream, seq, worker, at in sorted(log["completed"], key=lambda c: c[4]):
    if stream is None:
        continue
    if streams.get(stream, 0) >= seq:
        order_broken += 1
    streams[stream] = seq
print(json.dumps({"stored": len(log["stored"]), "completed": len(done), "drained": len(drained),
                  "in_doubt": len(in_doubt), "twice": len(twice), "lost": len(lost), "order_broken": order_broken,
                  "deadlocks": log["deadlocks"], "errors": len(log["errors"]), "restarted": log["restarted"],
                  "first_errors": log["errors"][:3]}))
PY
}

run_phase() {  # label extra-args...
  local label=$1; shift
  local out="$CITUS_DIR/$label.json" drained="$CITUS_DIR/$label.drained"
  "$PY" test/citus/load.py "$dsn" "$seconds" 3 2 "$out" "$@" >/dev/null
  q "SELECT pg_catalog.recover_prepared_transactions()" >/dev/null
  drain >"$drained"
  local r
  r=$(verify "$label" "$out" "$drained")
  echo "$label: $r"
  get() { "$PY" -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$r" "$1"; }
  check_eq "$label: messages were stored and completed" True "$("$PY" -c "import json,sys; d=json.loads(sys.argv[1]); print(d['stored'] > 100 and d['completed'] > 50)" "$r")"
  check_eq "$label: no acknowledged message lost" 0 "$(get lost)"
  check_eq "$label: no message completed twice" 0 "$(get twice)"
  check_eq "$label: each stream completed in stored order" 0 "$(get order_broken)"
  check_eq "$label: no distributed deadlock reported" 0 "$(get deadlocks)"
  check "$label: nothing left waiting after the drain" \
    "SELECT count(*) = 0 FROM whizbang.wh_inbox WHERE consumer = 'load'"
  check "$label: no prepared transaction left on any node" \
    "SELECT (SELECT count(*) FROM pg_prepared_xacts) = 0
        AND (SELECT bool_and(result::int = 0) FROM run_command_on_workers('SELECT count(*) FROM pg_prepared_xacts'))"
  q "TRUNCATE whizbang.wh_message_deduplication" >/dev/null
}

check "the load's partitions (64) live on both workers" \
  "SELECT count(DISTINCT nodeport) = 2 FROM pg_dist_shard_placement
    WHERE shardid IN (SELECT get_shard_id_for_distribution_column('whizbang.wh_inbox_work', p) FROM generate_series(0, 63) p)"
run_phase steady
restart="$(printf '%q ' "$CITUS_BIN/pg_ctl" -D "$CITUS_DIR/n$WORKER2_PORT" -m immediate -w stop); sleep 2; $(printf '%q ' "$CITUS_BIN/pg_ctl" -D "$CITUS_DIR/n$WORKER2_PORT" -w -l "$CITUS_DIR/n$WORKER2_PORT.log" start)"
[ "$(id -u)" -eq 0 ] && restart="runuser -u postgres -- bash -c $(printf '%q' "$restart")"
run_phase restart --restart-after $((seconds / 3)) --restart-cmd "$restart >/dev/null"

echo "$FAILED failed"
[ "$FAILED" -eq 0 ]
