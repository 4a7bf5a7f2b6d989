#!/usr/bin/env bash
# Waiting workers (claim_work's p_wait, issue 12). test/scripts/claim_wait.py runs 20 workers,
# each on its own connection, that loop on claim_work(p_wait => 2 s) and complete what they get,
# while 200 messages are stored one per transaction; then all 20 wait on the empty queue
# (p_wait => 30 s, canceled after the window) and their backends' CPU time is read from /proc
# over 10 s of that wait. Checks:
#   - every message claimed exactly once and completed: none lost, none handed out twice;
#   - shared-memory store (the preload: commits wake waiters): stats()' claim_wakeups moved by
#     no more than the 200 stores (one wake-up per committed message, no herd of 20); on the
#     empty queue all 20 count in claim_waiting, no wake-up is sent, and the 20 backends use
#     less than 1% of one core over the 10 s (a poll loop at 100 ms: about 27% — run
#     claim_wait.py --poll-ms 100 to see it);
#   - table store (no preload: the wait polls inside the call): exactly once, 50 messages;
#   - in both: a claim waiting for another consumer returns, well before its time is up, the
#     message that release_work, fail_work (a retry 1 s later) or retry_dead_letters makes
#     claimable.
#   CLAIM_WAIT_LEASE_STORES="shared_memory" (or "table"; else WB_LEASE_STORES) one cluster only
# Expects whizbang to be installed already (./scripts/test does that). Exits non-zero on failure.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."

if [ "${1:-}" != "--in-cluster" ]; then
  source scripts/lib.sh      # wb_free_port
  source test/lib/checks.sh  # in_each_lease_store
  in_each_lease_store CLAIM_WAIT_LEASE_STORES bash "$self" --in-cluster
  exit
fi

# ----------------------------------------------------------------------------------------
# Inside the cluster (PG* variables point at it)
# ----------------------------------------------------------------------------------------
source test/lib/checks.sh  # check, check_eq, check_lease_store, FAILED, wb_python, summary
wb_python || exit 1
psql -qX -v ON_ERROR_STOP=1 -c "CREATE EXTENSION whizbang" >/dev/null
check_lease_store
out=$(mktemp /tmp/whizbang-claim-wait.XXXXXX)
trap 'rm -f "$out"' EXIT

if [ "$WB_LEASE_STORE" = shared_memory ]; then
  "$PY" test/scripts/claim_wait.py --workers 20 --messages 200 --wait 2 --idle-wait 30 --idle-seconds 10 >"$out"
  stored=200
else
  "$PY" test/scripts/claim_wait.py --workers 20 --messages 50 --wait 2 --idle-seconds 0 >"$out"
  stored=50
fi
cat "$out"
field() { "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d = d[k]
print(d)' "$out" "$1"; }

check_eq "no worker failed" "[]" "$(field errors)"
check_eq "every stored message was claimed" "$stored distinct, 0 missing" "$(field distinct) distinct, $(field missing) missing"
check_eq "no message was handed out twice" "$stored claimed, 0 duplicates" "$(field claimed) claimed, $(field duplicates) duplicates"
check_eq "every claimed message was completed" "$stored" "$(field completed)"
check "nothing is left leased or pending" \
  "SELECT NOT EXISTS (SELECT FROM whizbang.leases WHERE consumer = 'claim_wait')
      AND NOT EXISTS (SELECT FROM whizbang.wh_inbox WHERE consumer = 'claim_wait' AND processed_at IS NULL)"

if [ "$WB_LEASE_STORE" = shared_memory ]; then
  wakeups=$(field wakeups)
  if [ "$wakeups" -ge 1 ] && [ "$wakeups" -le "$stored" ]; then
    echo "ok   commits woke waiters, no more wake-ups than stores ($wakeups for $stored)"
  else
    echo "FAIL wake-ups for $stored stores one at a time: expected 1..$stored, got $wakeups"; FAILED=$((FAILED + 1))
  fi
  check_eq "on the empty queue: all 20 workers wait (claim_waiting)" 20 "$(field idle.waiting)"
  check_eq "on the empty queue: no wake-up is sent" 0 "$(field idle.wakeups)"
  ticks=$(field idle.ticks) tck=$(field idle.clk_tck) seconds=$(field idle.seconds)
  # 1% of one core over the window, in clock ticks (10 at 100 Hz over 10 s).
  bound=$("$PY" -c "print(int($tck * $seconds / 100))")
  if [ "$ticks" -lt "$bound" ]; then
    echo "ok   20 idle waiting workers: $ticks clock ticks of CPU in ${seconds} s (bound $bound: 1% of one core)"
  else
    echo "FAIL 20 idle waiting workers: $ticks clock ticks of CPU in ${seconds} s, expected below $bound (1% of one core)"
    FAILED=$((FAILED + 1))
  fi
fi

# The other functions that make work claimable wake a waiting claim too (with the preload at
# their commit; without it the polling wait finds the work): a waiter for consumer cw_other is
# started on an empty queue (for it), then one of them commits; it must return that message well
# before its 10 s are up.
wake_by() {  # $1 what, $2 the message the waiter must get, $3 SQL that makes it claimable
  local t0 got ms
  t0=$(date +%s%N)
  psql -XAt -c "SELECT message_id FROM whizbang.claim_work('c1a1a1a1-0000-4000-8000-00000000000b', 'inbox',
      p_consumer => 'cw_other', p_wait => '10 s')" >"$out.w" 2>&1 &
  local waiter=$!
  for _ in $(seq 100); do
    [ "$(psql -XAt -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension'
        AND query LIKE '%cw_other%' AND pid <> pg_backend_pid()")" = 1 ] && break
    sleep 0.05
  done
  psql -qXAt -v ON_ERROR_STOP=1 -c "$3" >/dev/null
  wait "$waiter" || true
  got=$(cat "$out.w") ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if [ "$got" = "$2" ] && [ "$ms" -lt 5000 ]; then
    echo "ok   a waiting claim returns the message $1 ($ms ms)"
  else
    echo "FAIL a waiting claim returns the message $1: got '$got' after $ms ms"; FAILED=$((FAILED + 1))
  fi
}
store_other() {  # $1 message id: stored for cw_other and leased to instance ...0a
  psql -qXAt -v ON_ERROR_STOP=1 -c "SELECT whizbang.store_inbox_messages(jsonb_build_array(jsonb_build_object(
      'MessageId', '$1', 'HandlerName', 'h', 'MessageType', 't', 'Envelope', '{}'::jsonb)), p_consumer => 'cw_other')" \
      -c "SELECT whizbang.claim_work('c1a1a1a1-0000-4000-8000-00000000000a', 'inbox', p_consumer => 'cw_other')" >/dev/null
}
token_of() { psql -XAt -c "SELECT lease_token FROM whizbang.leases WHERE message_id = '$1'"; }
m1=c1a1a1a1-0000-4000-8000-000000000001 m2=c1a1a1a1-0000-4000-8000-000000000002 m3=c1a1a1a1-0000-4000-8000-000000000003
store_other $m1
wake_by "released (release_work)" $m1 \
  "SELECT whizbang.release_work('inbox', '{$m1}', '{$(token_of $m1)}', 'cw_other')"
psql -qXAt -c "UPDATE whizbang.wh_settings SET setting_value = '1' WHERE setting_key = 'retry_base_seconds'"
store_other $m2
wake_by "failed for a retry in about 1 s (fail_work)" $m2 \
  "SELECT whizbang.fail_work('inbox', '{$m2}', '{boom}', '{$(token_of $m2)}', NULL, 'cw_other')"
store_other $m3
psql -qXAt -c "SELECT whizbang.fail_work('inbox', '{$m3}', '{boom}', '{$(token_of $m3)}', '{false}', 'cw_other')" >/dev/null
wake_by "put back from the dead letters (retry_dead_letters)" $m3 \
  "SELECT whizbang.retry_dead_letters(ARRAY(SELECT dead_letter_id FROM whizbang.wh_dead_letters WHERE message_id = '$m3'))"
rm -f "$out.w"

if [ "$FAILED" -ne 0 ]; then
  echo "$FAILED check(s) failed"
  exit 1
fi
echo "all checks passed"
