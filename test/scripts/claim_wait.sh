#!/usr/bin/env bash
# Waiting workers (claim_work's p_wait, issue 12). test/scripts/claim_wait.py runs 20 workers,
# each on its own connection, that loop on claim_work(p_wait => 2 s) and complete what they get,
# while 200 messages are stored one per transaction; then all 20 wait on the empty queue
# (p_wait => 10 s) and their backends' CPU time is read from /proc over 10 s. Checks:
#   - every message claimed exactly once and completed: none lost, none handed out twice;
#   - shared-memory store (the preload: commits wake waiters): stats()' claim_wakeups moved by
#     no more than the 200 stores (one wake-up per committed message, no herd of 20); on the
#     empty queue all 20 count in claim_waiting, no wake-up is sent, and the 20 backends use
#     less than 1% of one core over the 10 s (a poll loop at 100 ms: about 27% — run
#     claim_wait.py --poll-ms 100 to see it);
#   - table store (no preload: the wait polls inside the call): exactly once, 50 messages.
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
  "$PY" test/scripts/claim_wait.py --workers 20 --messages 200 --wait 2 --idle-wait 10 --idle-seconds 10 >"$out"
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
      AND NOT EXISTS (SELECT FROM whizbang.wh_inbox_work WHERE consumer = 'claim_wait' AND processed_at IS NULL)"

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

if [ "$FAILED" -ne 0 ]; then
  echo "$FAILED check(s) failed"
  exit 1
fi
echo "all checks passed"
