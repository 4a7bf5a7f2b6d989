#!/usr/bin/env bash
# End-to-end test of examples/inbox_worker.py, the inbox worker built on store_inbox_messages,
# claim_work, complete_work, fail_work, renew_leases and release_work. In a throw-away cluster
# (max_attempts 3, retry delays 0) it stores messages with the example's --produce mode, stores
# them all again (a redelivery), adds by SQL a redelivered single message, a message whose handler
# raises (in the middle of a stream), a message with no handler and a slow message (longer than the
# lease), runs two workers side by side until they are idle, and checks, in inbox_demo_ledger (the
# business effect) and in whizbang's tables:
#   - one effect per message, none for a redelivery, none for the failing messages;
#   - the failing message was delivered 3 times (2 retries) and dead-lettered with its error; the
#     message without a handler was dead-lettered at its first delivery;
#   - per-stream order: the effects of each stream are in the order the messages were stored, and
#     the message after the failing one was applied only after that one was dead-lettered;
#   - the slow message kept its lease (renewed, no worker lost a lease);
#   - SIGINT: an idle worker stops at once; a busy worker finishes the current message, releases
#     the rest of its batch (attempt refunded) and a later run applies them in order.
# All of it runs in a cluster of each lease store (issue 11): a plain one, and one with
# shared_preload_libraries = whizbang (leases in shared memory).
#   WORKER_LEASE_STORES="table" (or "shared_memory"; else WB_LEASE_STORES) one cluster only
# Expects whizbang to be installed already (./scripts/test does that). Exits non-zero on failure.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."

if [ "${1:-}" != "--in-cluster" ]; then
  source scripts/lib.sh      # wb_free_port
  source test/lib/checks.sh  # in_each_lease_store
  in_each_lease_store WORKER_LEASE_STORES bash "$self" --in-cluster
  exit
fi

# ----------------------------------------------------------------------------------------
# Inside the cluster (PG* variables point at it)
# ----------------------------------------------------------------------------------------
source test/lib/checks.sh  # check, check_eq, FAILED, wb_python
wb_python || exit 1

WORKER=examples/inbox_worker.py
work=$(mktemp -d /tmp/whizbang-inbox-worker.XXXXXX)
pids=()
trap 'stop_pids_and_remove "$work"' EXIT


psql -qX -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION whizbang;
INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type) VALUES
    ('max_attempts', '3', 'integer'), ('retry_base_seconds', '0', 'integer'), ('retry_max_seconds', '0', 'integer')
ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value;
SQL
check_lease_store

# 1. 40 messages over 4 streams, then the same 40 again (a redelivery of the whole batch).
out1=$("$PY" "$WORKER" --produce 40 --streams 4 --tag t1)
out2=$("$PY" "$WORKER" --produce 40 --streams 4 --tag t1)
check_eq "produce: 40 new messages" "stored 40 new of 40 messages (0 duplicates)" "$out1"
check_eq "produce again: a redelivery, nothing stored" "stored 0 new of 40 messages (40 duplicates)" "$out2"

# 2. By SQL: a single redelivery; in acct-1's stream a failing message (seq 100) and one after it
#    (seq 101); a message with no handler; a slow message (3 s, longer than the 2 s lease) in acct-2's
#    stream, followed by seq 201.
psql -qXtA -v ON_ERROR_STOP=1 <<'SQL' >"$work/store.out"
SELECT stream_id AS s1 FROM whizbang.wh_inbox WHERE envelope->>'account' = 'acct-1' LIMIT 1 \gset
SELECT stream_id AS s2 FROM whizbang.wh_inbox WHERE envelope->>'account' = 'acct-2' LIMIT 1 \gset
SELECT message_id AS redelivered FROM whizbang.wh_inbox WHERE envelope->>'account' = 'acct-3' LIMIT 1 \gset
SELECT outcome FROM whizbang.inbox_receive(jsonb_build_array(jsonb_build_object(
    'MessageId', :'redelivered', 'HandlerName', 'ledger.post', 'MessageType', 'LedgerEntryRequested',
    'Envelope', (SELECT envelope FROM whizbang.wh_inbox WHERE message_id = :'redelivered'))));
\i test/lib/worker_trouble_batch.sql
SQL
check_eq "inbox_receive of a stored id: duplicate; store_inbox_messages: 5 new" "duplicate
5" "$(cat "$work/store.out")"

# 3. Two workers side by side until idle: small batches and at most 3 rows of a stream per claim,
#    so that the streams move between the workers; a 2 s lease, renewed every 2/3 s.
for w in a b; do
  "$PY" "$WORKER" --batch 4 --max-per-stream 3 --lease 2 --wait 0.1 --max-idle 2 \
    >"$work/worker-$w.json" 2>"$work/worker-$w.log" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
pids=()
check_eq "both workers exited 0" 0 "$status"

summary=$("$PY" - "$work/worker-a.json" "$work/worker-b.json" <<'PY'
import json, sys
total = {}
for path in sys.argv[1:]:
    lines = [l for l in open(path) if l.strip()]
    for k, v in json.loads(lines[-1]).items():
        if isinstance(v, int):
            total[k] = total.get(k, 0) + v
print("completed=%(completed)d retry_scheduled=%(retry_scheduled)d dead_lettered=%(dead_lettered)d "
      "lease_lost=%(lease_lost)d not_found=%(not_found)d renewed>0=%(r)s" % dict(total, r=total["renewed"] > 0))
PY
) || summary="(no summary: $?)"
check_eq "worker summaries" "completed=43 retry_scheduled=2 dead_lettered=2 lease_lost=0 not_found=0 renewed>0=True" "$summary"

# One effect per message: 40 produced + seq 101 + the slow one and seq 201.
check "43 effects in the ledger" "SELECT count(*) = 43 FROM inbox_demo_ledger"
check "every effect belongs to a distinct message" \
  "SELECT count(DISTINCT message_id) = count(*) FROM inbox_demo_ledger"
check "each produced message has exactly one effect" \
  "SELECT count(*) = 40 FROM (SELECT message_id FROM inbox_demo_ledger WHERE seq < 100 GROUP BY message_id HAVING count(*) = 1) s"
check "no effect of the failing message or of the message without a handler" \
  "SELECT NOT EXISTS (SELECT 1 FROM inbox_demo_ledger WHERE message_id IN ('f0000000-0000-7000-8000-000000000100', 'f0000000-0000-7000-8000-000000000102'))"
check "the failing message: dead-lettered after 3 deliveries, with its error" \
  "SELECT attempts = 3 AND last_error LIKE 'RuntimeError: demo failure%attempt 3)' FROM whizbang.wh_dead_letters WHERE message_id = 'f0000000-0000-7000-8000-000000000100'"
check "the message without a handler: dead-lettered at its first delivery" \
  "SELECT attempts = 1 AND last_error LIKE 'PermanentError: no handler%' FROM whizbang.wh_dead_letters WHERE message_id = 'f0000000-0000-7000-8000-000000000102'"
check "two dead letters in all" "SELECT count(*) = 2 FROM whizbang.wh_dead_letters"
check "per-stream order: in every stream, effects are in stored order" \
  "SELECT NOT EXISTS (SELECT 1 FROM (SELECT seq, lag(seq) OVER (PARTITION BY stream_id ORDER BY entry_id) AS prev
                                       FROM inbox_demo_ledger) s WHERE prev >= seq)"
check "the message after the failing one waited until it was dead-lettered" \
  "SELECT l.applied_at > d.dead_lettered_at FROM inbox_demo_ledger l, whizbang.wh_dead_letters d
    WHERE l.message_id = 'f0000000-0000-7000-8000-000000000101' AND d.message_id = 'f0000000-0000-7000-8000-000000000100'"
check "the slow message was applied once, by a worker that kept its lease" \
  "SELECT count(*) = 1 FROM inbox_demo_ledger WHERE message_id = 'f0000000-0000-7000-8000-000000000200'"
check "no work left; dedup records kept for all 45 messages" \
  "SELECT NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox) AND NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox)
      AND (SELECT count(*) FROM whizbang.wh_message_deduplication) = 45"

# 4. A failure inside one claimed run of a stream: the worker must not apply the next message of
#    that stream while the failed one waits for its retry. One worker, one stream, one claim.
psql -qX -v ON_ERROR_STOP=1 -c "
SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(
  jsonb_build_object('MessageId', 'f0000000-0000-7000-8000-000000000401', 'StreamId', 'f0000000-0000-7000-8000-0000000004ff',
                     'HandlerName', 'ledger.post', 'MessageType', 'LedgerEntryRequested',
                     'Envelope', '{\"account\": \"acct-run\", \"seq\": 401, \"amount\": 1, \"fail\": true}'::jsonb),
  jsonb_build_object('MessageId', 'f0000000-0000-7000-8000-000000000402', 'StreamId', 'f0000000-0000-7000-8000-0000000004ff',
                     'HandlerName', 'ledger.post', 'MessageType', 'LedgerEntryRequested',
                     'Envelope', '{\"account\": \"acct-run\", \"seq\": 402, \"amount\": 1}'::jsonb)))" >/dev/null
"$PY" "$WORKER" --batch 10 --wait 0.1 --max-idle 1 >"$work/run.json" 2>"$work/run.log"
check "failure inside a claimed run: the next message waited for the failed one's last attempt" \
  "SELECT l.applied_at > d.dead_lettered_at AND d.attempts = 3 FROM inbox_demo_ledger l, whizbang.wh_dead_letters d
    WHERE l.message_id = 'f0000000-0000-7000-8000-000000000402' AND d.message_id = 'f0000000-0000-7000-8000-000000000401'"
# Each retry gave the follower back with it (fail_work ends the rest of the worker's run in the
# stream, DESIGN §3.4), so the worker's own release of it found nothing to release.
check_eq "failure inside a claimed run: the follower was given back with each retry, not applied early" 1 \
  "$(grep -c '"released": 0' "$work/run.json" || true)"

# 5. A redelivery of an applied message after processing: still a duplicate, no new work.
out3=$("$PY" "$WORKER" --produce 40 --streams 4 --tag t1)
check_eq "produce again after processing: nothing stored" "stored 0 new of 40 messages (40 duplicates)" "$out3"

# 6. SIGINT while idle: the worker, waiting in claim_work (its default p_wait of 10 s), stops at
#    once with its summary: the waiting claim is canceled.
"$PY" "$WORKER" >"$work/idle.json" 2>"$work/idle.log" &
pids=($!)
sleep 1
kill -INT "${pids[0]}"
status=0 started=$(date +%s%N)
wait "${pids[0]}" || status=$?
pids=()
check_eq "idle worker: SIGINT stops it with exit 0" 0 "$status"
check_eq "idle worker: SIGINT ends its waiting claim at once (under 2 s)" 1 "$(( ($(date +%s%N) - started) < 2000000000 ))"
check_eq "idle worker: it printed its summary" 1 "$(grep -c '"completed": 0' "$work/idle.json" || true)"

# 7. SIGINT while busy: three slow messages of one stream in one batch. The worker finishes the
#    message it is on, releases the rest (attempt refunded), and a second run applies them in order.
psql -qX -v ON_ERROR_STOP=1 -c "
SELECT count(*) FROM whizbang.store_inbox_messages((SELECT jsonb_agg(jsonb_build_object(
    'MessageId', 'f0000000-0000-7000-8000-00000000030' || i, 'StreamId', 'f0000000-0000-7000-8000-0000000003ff',
    'HandlerName', 'ledger.post', 'MessageType', 'LedgerEntryRequested',
    'Envelope', jsonb_build_object('account', 'acct-slow', 'seq', 300 + i, 'amount', 1, 'sleep', 0.8)) ORDER BY i)
  FROM generate_series(1, 3) i))" >/dev/null
"$PY" "$WORKER" --batch 10 --lease 30 --wait 0.2 >"$work/busy.json" 2>"$work/busy.log" &
pids=($!)
for _ in $(seq 50); do grep -q "instance" "$work/busy.log" 2>/dev/null && break; sleep 0.1; done
sleep 0.4   # inside the first message's handler
kill -INT "${pids[0]}"
status=0
wait "${pids[0]}" || status=$?
pids=()
check_eq "busy worker: SIGINT stops it with exit 0" 0 "$status"
check "busy worker: it applied the message it was on, and only that one" \
  "SELECT count(*) = 1 AND min(seq) = 301 FROM inbox_demo_ledger WHERE account = 'acct-slow'"
check "busy worker: the rest of its batch is released, attempt refunded" \
  "SELECT count(*) = 2 AND bool_and(l.message_id IS NULL AND w.attempts = 0)
     FROM whizbang.wh_inbox w
     LEFT JOIN whizbang.leases l ON l.source = 'inbox' AND l.consumer = w.consumer AND l.message_id = w.message_id
    WHERE w.stream_id = 'f0000000-0000-7000-8000-0000000003ff'"
"$PY" "$WORKER" --wait 0.1 --max-idle 1 >"$work/rest.json" 2>"$work/rest.log"
check "a second run applied the released messages, in order" \
  "SELECT array_agg(seq ORDER BY entry_id) = '{301,302,303}' FROM inbox_demo_ledger WHERE account = 'acct-slow'"

if [ "$FAILED" -ne 0 ]; then
  for f in "$work"/*.log "$work"/*.json; do echo "---- $(basename "$f")"; cat "$f"; done
  echo "$FAILED check(s) failed"
  exit 1
fi
echo "all checks passed"
