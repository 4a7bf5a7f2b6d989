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
seen = {}
for m in done:
    seen[m] = seen.get(m, 0) + 1
twice = {m for m, n in seen.items() if n > 1}
lost = set(log["stored"]) - set(done) - drained - in_doubt
order_broken = 0
streams = {}
for mid, stream, seq, worker, at in sorted(log["completed"], key=lambda c: c[4]):
    if stream is None:
        continue
    if streams.get(stream, 0) >= seq:
        order_broken += 1
    streams[stream] = seq
# Two committed claims of one message while the first one's lease (30 s) lived.
last_claim = {}
two_holders = 0
for mid, _, at, _ in sorted(log.get("claimed", []), key=lambda c: c[2]):
    if mid in last_claim and at - last_claim[mid] < 30:
        two_holders += 1
    last_claim[mid] = at
completed_at = {}
for mid, _, _, _, at in log["completed"]:
    completed_at.setdefault(mid, at)
undone = sum(1 for mid, _, at, _ in log.get("claimed", []) if mid in completed_at and at > completed_at[mid])
news = {}
for mid in log.get("new", []):
    news[mid] = news.get(mid, 0) + 1
new_twice = sum(1 for n in news.values() if n > 1)
print(json.dumps({"stored": len(log["stored"]), "completed": len(done), "drained": len(drained),
                  "two_holders": two_holders, "undone": undone, "new_twice": new_twice,
                  "in_doubt": len(in_doubt), "twice": len(twice), "lost": len(lost), "order_broken": order_broken,
                  "deadlocks": log["deadlocks"], "errors": len(log["errors"]), "restarted": log["restarted"],
                  "first_errors": log["errors"][:3]}))
PY
}

run_phase() {  # label extra-args...  (PHASE_SECONDS: the load's length, else $seconds)
  local label=$1; shift
  local out="$CITUS_DIR/$label.json" drained="$CITUS_DIR/$label.drained"
  "$PY" test/citus/load.py "$dsn" "${PHASE_SECONDS:-$seconds}" 3 2 "$out" "$@" >/dev/null
  q "SELECT pg_catalog.recover_prepared_transactions()" >/dev/null
  drain >"$drained"
  local r
  r=$(verify "$label" "$out" "$drained")
  [ -n "${LOAD_KEEP:-}" ] && cp "$out" "$drained" "$LOAD_KEEP/"
  echo "$label: $r"
  get() { "$PY" -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$r" "$1"; }
  check_eq "$label: messages were stored and completed" True "$("$PY" -c "import json,sys; d=json.loads(sys.argv[1]); print(d['stored'] > 100 and d['completed'] > 50)" "$r")"
  check_eq "$label: no acknowledged message lost" 0 "$(get lost)"
  check_eq "$label: no message completed twice" 0 "$(get twice)"
  check_eq "$label: no message handed to two holders (claimed in two committed transactions)" 0 "$(get two_holders)"
  check_eq "$label: no completion undone (a completed message claimed again)" 0 "$(get undone)"
  check_eq "$label: no id reported new twice" 0 "$(get new_twice)"
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
    WHERE shardid IN (SELECT get_shard_id_for_distribution_column('whizbang.wh_inbox', p) FROM generate_series(0, 63) p)"
run_phase steady
restart="$(printf '%q ' "$CITUS_BIN/pg_ctl" -D "$CITUS_DIR/n$WORKER2_PORT" -m immediate -w stop); sleep 2; $(printf '%q ' "$CITUS_BIN/pg_ctl" -D "$CITUS_DIR/n$WORKER2_PORT" -w -l "$CITUS_DIR/n$WORKER2_PORT.log" start)"
[ "$(id -u)" -eq 0 ] && restart="runuser -u postgres -- bash -c $(printf '%q' "$restart")"
run_phase restart --restart-after $((seconds / 3)) --restart-cmd "$restart >/dev/null"

# Shard moves and rebalances under the same load (issue 22), each of which must move shards for
# real: a block_writes move and a logical move from worker 1 to 2, citus_rebalance_start (which
# moves two back), then two more block_writes moves and rebalance_table_shards (logical).
cat >"$CITUS_DIR/moves.sh" <<MOVES
set -euo pipefail
m() { psql -X -q -A -t -v ON_ERROR_STOP=1 -h '$CITUS_DIR' -p $COORD_PORT -U postgres -d postgres -c "\$1"; }
layout() { m "SELECT string_agg(p.shardid || ':' || p.nodeport, ',' ORDER BY p.shardid) FROM pg_dist_shard_placement p JOIN pg_dist_shard s USING (shardid) WHERE s.logicalrelid = 'whizbang.wh_inbox'::regclass"; }
on_w1() { m "SELECT p.shardid FROM pg_dist_shard_placement p JOIN pg_dist_shard s USING (shardid) WHERE s.logicalrelid = 'whizbang.wh_inbox'::regclass AND p.nodeport = $WORKER1_PORT ORDER BY p.shardid LIMIT 1 OFFSET \$1"; }
step() {  # label sql...: each sql alone, SHARD replaced by worker 1's first shard at that moment
  local before after sql label=\$1; shift
  before=\$(layout)
  # A move that a distributed deadlock with the load canceled (40P01) is tried again.
  for sql in "\$@"; do
    for try in 1 2 3; do m "\${sql//SHARD/\$(on_w1 0)}" >/dev/null && break; [ \$try -lt 3 ] || return 1; sleep 1; done
  done
  after=\$(layout)
  if [ "\$before" != "\$after" ]; then echo "moved: \$label"; else echo "unchanged: \$label"; fi
}
move="SELECT citus_move_shard_placement(SHARD, 'localhost', $WORKER1_PORT, 'localhost', $WORKER2_PORT"
step "block_writes move" "\$move, 'block_writes')"
step "logical move" "\$move, 'force_logical')"
step "citus_rebalance_start" "SELECT citus_rebalance_start()" "SELECT citus_rebalance_wait()"
step "two block_writes moves" "\$move, 'block_writes')" "\$move, 'block_writes')"
step "rebalance_table_shards" "SELECT rebalance_table_shards('whizbang.wh_inbox', shard_transfer_mode => 'force_logical')"
MOVES
PHASE_SECONDS=${MOVES_SECONDS:-60} run_phase moves --event-after 3 --event-cmd "bash $CITUS_DIR/moves.sh >$CITUS_DIR/moves.log 2>&1"
cat "$CITUS_DIR/moves.log"
check_eq "moves: every move and rebalance moved shards" 5 "$(grep -c '^moved: ' "$CITUS_DIR/moves.log")"
check_eq "moves: no move had to be tried again" 0 "$(grep -c 'ERROR' "$CITUS_DIR/moves.log")"

echo "$FAILED failed"
[ "$FAILED" -eq 0 ]
