#!/usr/bin/env bash
# A full shared-memory lease store (issue 11, DESIGN §3.8): in a cluster with
# shared_preload_libraries = whizbang and whizbang.max_leases = 100 (the smallest), 300 inbox
# messages are claimed 100 at a time by several instances.
#   - While leases are held, no more than 100 rows are handed out in all (whizbang.leases and
#     stats() lease_store_entries stay <= the capacity); a claim that finds the table full hands
#     out fewer rows (none), never an error, and stats() lease_store_full_claims grows.
#   - After some rows are completed, claims get rows again (no more than were freed).
#   - 4 workers then drain the rest side by side (claim 100, hold them a moment, complete in a
#     transaction of their own), the table full most of the time: every message is handed out
#     exactly once and completed by its holder, entries never above the capacity.
# A plain cluster runs the table store: lease_store() = 'table', stats() lease_store_shared_memory
# = 0, and a claim of 300 is not bounded by any capacity. Exits non-zero on failure.
#   LEASE_FULL_STORES="shared_memory" (or "table"; else WB_LEASE_STORES) one cluster only
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh      # wb_free_port
source test/lib/checks.sh  # check, check_eq, FAILED

CAPACITY=100
CONSUMER=full
MESSAGES=300

if [ "${1:-}" != --inside ]; then
  status=0
  for store in ${LEASE_FULL_STORES:-${WB_LEASE_STORES:-shared_memory table}}; do
    opts=(-o fsync=off)
    [ "$store" = table ] || opts+=(-o shared_preload_libraries=whizbang -o "whizbang.max_leases=$CAPACITY")
    echo "=== cluster for the $store lease store (${opts[*]})"
    pg_virtualenv -t -c "-p $(wb_free_port)" "${opts[@]}" bash "$self" --inside "$store" || status=1
  done
  [ $status -eq 0 ] && echo "all checks passed"
  exit $status
fi

store=$2
sql() { psql -qXAt -v ON_ERROR_STOP=1 "$@"; }
stat() { sql -c "SELECT value FROM whizbang.stats() WHERE metric = '$1'"; }
instance() { printf '%08x-0000-4000-8000-000000000000' "$1"; }

sql <<SQL
CREATE EXTENSION whizbang;
-- What every claim handed out, and what every completion answered (the checks read these).
CREATE TABLE handed (instance uuid, message_id uuid, lease_token bigint, step text, done boolean DEFAULT false);
CREATE TABLE outcomes (instance uuid, message_id uuid, outcome text);
SELECT count(*) FROM whizbang.store_inbox_messages(
    (SELECT jsonb_agg(jsonb_build_object('MessageId', whizbang.uuid_v7(), 'HandlerName', 'h',
                                         'MessageType', 't', 'Envelope', jsonb_build_object('n', i)))
       FROM generate_series(1, $MESSAGES) i), p_consumer => '$CONSUMER');
SQL

# claim INSTANCE STEP: one claim of up to 100 rows (its own transaction), recorded in handed;
# prints how many rows it handed out.
claim() {
  # Waits for the start barrier first (an advisory lock the burst holds until all are connected).
  sql -c "DO \$\$BEGIN PERFORM pg_advisory_lock_shared(11); PERFORM pg_advisory_unlock_shared(11); END\$\$" \
      -c "WITH c AS (INSERT INTO handed (instance, message_id, lease_token, step)
                     SELECT '$(instance "$1")', message_id, lease_token, '$2'
                       FROM whizbang.claim_work('$(instance "$1")', 'inbox', 100, 300, p_consumer => '$CONSUMER')
                     RETURNING 1)
          SELECT count(*) FROM c"
}
# complete INSTANCE [LIMIT]: completes (fenced, its own transaction) what INSTANCE holds, or the
# first LIMIT of it; prints how many were completed.
complete() {
  sql -c "CREATE TEMP TABLE mine AS
            SELECT message_id, lease_token FROM handed WHERE instance = '$(instance "$1")' AND NOT done
             ORDER BY message_id LIMIT ${2:-ALL}" \
      -c "BEGIN" \
      -c "INSERT INTO outcomes SELECT '$(instance "$1")', c.message_id, c.outcome
            FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM mine ORDER BY message_id),
                                        ARRAY(SELECT lease_token FROM mine ORDER BY message_id), '$CONSUMER') c" \
      -c "UPDATE handed h SET done = true FROM mine m WHERE h.message_id = m.message_id AND h.lease_token = m.lease_token" \
      -c "COMMIT" \
      -c "SELECT count(*) FROM mine"
}
held() { sql -c "SELECT count(*) FROM whizbang.leases WHERE consumer = '$CONSUMER'"; }

if [ "$store" = table ]; then
  check_eq "plain cluster: whizbang.lease_store() is 'table'" table "$(sql -c "SELECT whizbang.lease_store()")"
  check_eq "plain cluster: stats() lease_store_shared_memory = 0" 0 "$(stat lease_store_shared_memory)"
  check_eq "plain cluster: stats() lease_store_full_claims = 0" 0 "$(stat lease_store_full_claims)"
  got=$(sql -c "SELECT count(*) FROM whizbang.claim_work('$(instance 1)', 'inbox', $MESSAGES, p_consumer => '$CONSUMER')")
  check_eq "plain cluster: a claim of $MESSAGES hands out $MESSAGES (no capacity)" "$MESSAGES" "$got"
  check_eq "plain cluster: all $MESSAGES listed in whizbang.leases" "$MESSAGES" "$(held)"
  exit "$FAILED"
fi

check_eq "whizbang.lease_store() is 'shared_memory'" shared_memory "$(sql -c "SELECT whizbang.lease_store()")"
check_eq "stats() lease_store_shared_memory = 1" 1 "$(stat lease_store_shared_memory)"
check_eq "stats() lease_store_capacity = whizbang.max_leases" "$CAPACITY" "$(stat lease_store_capacity)"
full_before=$(stat lease_store_full_claims)

# --- several instances claim 100 at once ---------------------------------------------------
work=$(mktemp -d /tmp/whizbang-lease-full.XXXXXX)
pids=()
trap 'stop_pids_and_remove "$work"' EXIT
chmod 777 "$work"
# They start together: a session holds the barrier until all 4 wait for it.
sql -c "SELECT pg_advisory_lock(11)" -c "SELECT pg_sleep(30)" >/dev/null 2>&1 & barrier=$!
pids+=("$barrier")
for ((i = 0; i < 100; i++)); do
  [ "$(sql -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 11 AND granted")" = 1 ] && break
  sleep 0.05
done
for i in 1 2 3 4; do claim "$i" burst >"$work/burst$i" 2>&1 & pids+=($!); done
for ((i = 0; i < 200; i++)); do
  waiting=$(sql -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 11 AND NOT granted")
  [ "$waiting" = 4 ] && break
  sleep 0.05
done
echo "     ($waiting of 4 claims waited at the start barrier)"
sql -c "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = 11 AND granted
          AND mode = 'ExclusiveLock'" >/dev/null
burst_failed=0
for p in "${pids[@]:1}"; do wait "$p" || burst_failed=$((burst_failed + 1)); done
wait "$barrier" 2>/dev/null || true
pids=()
check_eq "4 concurrent claims of 100: none failed" 0 "$burst_failed"
burst=$(( $(cat "$work"/burst[1-4] | paste -sd+) ))
echo "     (concurrent claims handed out $(cat "$work"/burst[1-4] | paste -sd' '))"
check "4 concurrent claims of 100 handed out no more than $CAPACITY in all" "SELECT $burst <= $CAPACITY AND $burst > 0"
# Whatever the race left free is taken by the next claim; after it the table is full.
claim 5 fill >/dev/null
check_eq "held after the concurrent claims and one more: the capacity" "$CAPACITY" "$(held)"
check_eq "stats() lease_store_entries = the capacity" "$CAPACITY" "$(stat lease_store_entries)"
check_eq "a claim of 100 on the full table hands out none (and is no error)" 0 "$(claim 6 full)"
check_eq "another instance's claim too" 0 "$(claim 7 full)"
check "stats() lease_store_full_claims grew" "SELECT $(stat lease_store_full_claims) > $full_before"
check_eq "every row handed out so far is held by its claimer (whizbang.leases)" 0 \
  "$(sql -c "SELECT count(*) FROM handed h WHERE NOT EXISTS (SELECT FROM whizbang.leases l
               WHERE l.message_id = h.message_id AND l.lease_token = h.lease_token AND l.instance_id = h.instance)")"

# --- completing some frees room: claims get rows again, no more than were freed ------------
holder=$(sql -c "SELECT instance FROM handed GROUP BY instance ORDER BY count(*) DESC LIMIT 1")
holder_no=$((16#${holder:0:8}))
freed=$(complete "$holder_no" 30)
check "30 (or all of them, if fewer) of the largest holder's rows completed" "SELECT $freed BETWEEN 1 AND 30"
check_eq "held after completing them" $((CAPACITY - freed)) "$(held)"
got=$(claim 6 after)
check_eq "a claim of 100 after the completions gets rows again, fewer: as many as were freed" "$freed" "$got"
check_eq "and the table is full again" 0 "$(claim 7 full)"
check "stats() lease_store_entries <= the capacity" "SELECT $(stat lease_store_entries) <= $CAPACITY"

# --- 4 workers drain the rest while the table is full most of the time ----------------------
# Each round: claim 100 (committed), hold the leases a moment, complete them (fenced).
worker() {
  local n=$1 got idle=0
  for ((round = 0; round < 400 && idle < 20; round++)); do
    got=$(claim "$n" drain) || return 1
    if [ "$got" -gt 0 ]; then idle=0; else idle=$((idle + 1)); fi
    sleep 0.0$((RANDOM % 5))
    complete "$n" >/dev/null || return 1
    [ "$(sql -c "SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = '$CONSUMER'")" = 0 ] && return 0
  done
  return 0
}
monitor() {  # the most entries and leases seen while the workers run
  local max=0 e
  while [ ! -e "$work/stop" ]; do
    e=$(sql -c "SELECT greatest((SELECT value FROM whizbang.stats() WHERE metric = 'lease_store_entries'),
                                (SELECT count(*) FROM whizbang.leases))")
    [ "$e" -gt "$max" ] && max=$e
    echo "$max" >"$work/max"
    sleep 0.02
  done
}
# The instances that still hold rows finish them first (they are workers 1-7's own).
for i in 1 2 3 4 5 6 7; do complete "$i" >/dev/null; done
full_before_drain=$(stat lease_store_full_claims)
monitor & monitor_pid=$!
workers=()
for i in 11 12 13 14; do worker "$i" >"$work/worker$i" 2>&1 & workers+=($!); done
pids=("${workers[@]}" "$monitor_pid")
worker_failed=0
for p in "${workers[@]}"; do wait "$p" || worker_failed=$((worker_failed + 1)); done
touch "$work/stop"; wait "$monitor_pid" || true
pids=()
check_eq "4 draining workers: no call failed" 0 "$worker_failed"
[ "$worker_failed" -eq 0 ] || cat "$work"/worker1[1-4]
check_eq "every message was handed out" "$MESSAGES" "$(sql -c "SELECT count(DISTINCT message_id) FROM handed")"
check_eq "nothing was handed out twice" 0 \
  "$(sql -c "SELECT count(*) FROM (SELECT message_id FROM handed GROUP BY message_id HAVING count(*) > 1) d")"
check_eq "every completion by the lease holder answered completed" "$MESSAGES completed" \
  "$(sql -c "SELECT count(*) || ' ' || string_agg(DISTINCT outcome, ',') FROM outcomes")"
check_eq "no work left, no lease left" "0 0" \
  "$(sql -c "SELECT (SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = '$CONSUMER') || ' '
                  || (SELECT count(*) FROM whizbang.leases)")"
check_eq "stats() lease_store_entries back to 0" 0 "$(stat lease_store_entries)"
check "the most entries/leases seen while draining: <= the capacity ($(cat "$work/max" 2>/dev/null))" \
  "SELECT $(cat "$work/max" 2>/dev/null || echo 0) BETWEEN 1 AND $CAPACITY"
echo "     (claims refused for a full table while draining: $(( $(stat lease_store_full_claims) - full_before_drain )))"
exit "$FAILED"
