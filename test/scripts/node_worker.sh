#!/usr/bin/env bash
# End-to-end test of examples/node/inbox_worker.js, the Node.js inbox worker (npm "pg"). It
# installs pg from npm into a temporary folder (from examples/node/package.json), then, in a
# throw-away cluster (max_attempts 3, retry delays 0, lease tokens above 2^53 in the table store):
#   - stores 30 messages with the example's --produce mode (a JS array sent as JSON text with
#     ::jsonb) and again (a redelivery: nothing stored); sending the JS array itself fails;
#   - adds by SQL a failing message in the middle of a stream, a message without a handler and
#     a slow message (longer than the lease), and runs two workers side by side, one keeping
#     int8 as strings and one as BigInt, until they are idle;
#   - checks one effect per message, none for the failing ones, the dead letters (3 deliveries,
#     and 1 for the message without a handler), per-stream order (the follower of the failing
#     message applied after it was dead-lettered), renewals and no lost lease;
#   - bigint tokens (table store: the shared-memory store's tokens, the clock in microseconds,
#     stay below 2^53 until the 23rd century): every token is above 2^53, so a worker that lost
#     a digit would get lease_lost; a token parsed with Number() does get lease_lost, the string
#     completes;
#   - waiting for work (claim_work p_wait, issue 12): an idle worker waiting in the server with
#     its default --wait of 10 s takes a message stored meanwhile at once, and SIGINT cancels its
#     waiting claim (pg_cancel_backend): it stops within 2 s, exit 0, with its summary;
#   - SIGINT while busy: the current message is applied, the rest released, a later run
#     applies them in order.
# All of it runs in a cluster of each lease store (issue 11): a plain one, and one with
# shared_preload_libraries = whizbang (leases in shared memory, waiting claims woken at commit).
#   NODE_LEASE_STORES="table" (or "shared_memory"; else WB_LEASE_STORES) one cluster only
# Needs node and npm (Debian: nodejs, npm; scripts/lib.sh installs them) and the npm registry.
# Without them it prints SKIP and exits 0. Expects whizbang to be installed already.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."

if [ "${1:-}" != "--in-cluster" ]; then
  source scripts/lib.sh      # wb_free_port, wb_as_root
  source test/lib/checks.sh  # in_each_lease_store
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "node or npm missing: trying the Debian packages nodejs and npm"
    { wb_as_root apt-get update -qq &&
      wb_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm; } \
      >/dev/null 2>&1 || true
  fi
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "SKIP node_worker: node or npm is missing and could not be installed (Debian: nodejs, npm)"
    exit 0
  fi
  npm_dir=$(mktemp -d /tmp/whizbang-node.XXXXXX)
  trap 'rm -rf "$npm_dir"' EXIT
  cp examples/node/package.json "$npm_dir/"
  if ! (cd "$npm_dir" && timeout 300 npm install --no-audit --no-fund --omit=dev >"$npm_dir/npm.log" 2>&1); then
    tail -n 20 "$npm_dir/npm.log"
    echo "SKIP node_worker: npm install of pg failed (is the npm registry reachable?)"
    exit 0
  fi
  echo "node $(node --version), pg $(node -p "require('$npm_dir/node_modules/pg/package.json').version")"
  # NODE_PATH lets examples/node/inbox_worker.js require('pg') from the temporary folder.
  export NODE_PATH="$npm_dir/node_modules"
  status=0
  in_each_lease_store NODE_LEASE_STORES bash "$self" --in-cluster || status=$?
  exit "$status"
fi

# ----------------------------------------------------------------------------------------
# Inside the cluster (PG* variables point at it)
# ----------------------------------------------------------------------------------------
source test/lib/checks.sh  # check, check_eq, FAILED

WORKER=examples/node/inbox_worker.js
work=$(mktemp -d /tmp/whizbang-node-worker.XXXXXX)
pids=()
trap 'stop_pids_and_remove "$work"' EXIT

# 2^53 + 1: every lease token of the table store from here on is above Number.MAX_SAFE_INTEGER.
psql -qX -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION whizbang;
INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type) VALUES
    ('max_attempts', '3', 'integer'), ('retry_base_seconds', '0', 'integer'), ('retry_max_seconds', '0', 'integer')
ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value;
SELECT setval('whizbang.wh_lease_token_seq', 9007199254740993) \g /dev/null
SQL
check_lease_store

# 1. 30 messages over 3 streams, then the same 30 again (a redelivery of the whole batch).
out1=$(node "$WORKER" --produce 30 --streams 3 --tag n1)
out2=$(node "$WORKER" --produce 30 --streams 3 --tag n1)
check_eq "produce: 30 new messages (JSON text, ::jsonb)" "stored 30 new of 30 messages (0 duplicates)" "$out1"
check_eq "produce again: a redelivery, nothing stored" "stored 0 new of 30 messages (30 duplicates)" "$out2"

# The pitfall the example avoids: pg sends a JS array parameter as a PostgreSQL array literal.
cat >"$work/raw_array.js" <<'JS'
const pg = require('pg');
(async () => {
  const c = new pg.Client(); await c.connect();
  try {
    await c.query('SELECT count(*) FROM whizbang.store_inbox_messages($1::jsonb)',
                  [[{ MessageId: '00000000-0000-7000-8000-00000000aaaa', HandlerName: 'h', MessageType: 't', Envelope: {} }]]);
    console.log('accepted');
  } catch (e) { console.log(e.message); }
  await c.end();
})();
JS
check_eq "a JS array passed without JSON.stringify is refused" "invalid input syntax for type json" \
  "$(node "$work/raw_array.js")"

# 2. By SQL: in acct-1's stream a failing message (seq 100) and one after it (seq 101); a message
#    with no handler; a slow message (3 s, longer than the 2 s lease) in acct-2's stream, and seq 201.
psql -qXtA -v ON_ERROR_STOP=1 <<'SQL' >"$work/store.out"
SELECT stream_id AS s1 FROM whizbang.wh_inbox WHERE envelope->>'account' = 'acct-1' LIMIT 1 \gset
SELECT stream_id AS s2 FROM whizbang.wh_inbox WHERE envelope->>'account' = 'acct-2' LIMIT 1 \gset
\i test/lib/worker_trouble_batch.sql
SQL
check_eq "store_inbox_messages by SQL: 5 new" "5" "$(cat "$work/store.out")"

# 3. Two workers side by side until idle (int8 as strings / as BigInt): small batches, at most 3
#    rows of a stream per claim, a 2 s lease renewed every 2/3 s. One claims with short waits,
#    the other waits in the server until --max-idle's time is up (woken by stores, retries, releases).
node "$WORKER" --batch 4 --max-per-stream 3 --lease 2 --wait 0.1 --max-idle 2 \
  >"$work/worker-a.json" 2>"$work/worker-a.log" &
pids+=($!)
node "$WORKER" --bigint --batch 4 --max-per-stream 3 --lease 2 --max-idle 2 \
  >"$work/worker-b.json" 2>"$work/worker-b.log" &
pids+=($!)
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
pids=()
check_eq "both workers exited 0" 0 "$status"

summary=$(node - "$work/worker-a.json" "$work/worker-b.json" <<'JS' 2>&1
const fs = require('fs');
const t = {};
for (const f of process.argv.slice(2)) {
  const lines = fs.readFileSync(f, 'utf8').split('\n').filter((l) => l.trim());
  for (const [k, v] of Object.entries(JSON.parse(lines[lines.length - 1]))) if (typeof v === 'number') t[k] = (t[k] || 0) + v;
}
console.log(`completed=${t.completed} retry_scheduled=${t.retry_scheduled} dead_lettered=${t.dead_lettered} ` +
            `lease_lost=${t.lease_lost} not_found=${t.not_found} renewed>0=${t.renewed > 0}`);
JS
) || true
check_eq "worker summaries" "completed=33 retry_scheduled=2 dead_lettered=2 lease_lost=0 not_found=0 renewed>0=true" "$summary"
check_eq "the workers kept int8 as string and as BigInt" '"int8":"string" "int8":"bigint"' \
  "$(grep -ho '"int8":"[a-z]*"' "$work/worker-a.json" "$work/worker-b.json" | tr '\n' ' ' | sed 's/ $//')"
if [ "${WB_LEASE_STORE:-table}" = table ]; then
  check_eq "both workers completed messages whose tokens are above 2^53, digits intact" 2 \
    "$(for w in a b; do grep -cE 'completed .* token 900719925474[0-9]{4}$' "$work/worker-$w.log" | grep -v '^0$'; done | wc -l)"
fi

check "33 effects in the ledger" "SELECT count(*) = 33 FROM inbox_demo_ledger"
check "every effect belongs to a distinct message" \
  "SELECT count(DISTINCT message_id) = count(*) FROM inbox_demo_ledger"
check "no effect of the failing message or of the message without a handler" \
  "SELECT NOT EXISTS (SELECT 1 FROM inbox_demo_ledger WHERE message_id IN ('f0000000-0000-7000-8000-000000000100', 'f0000000-0000-7000-8000-000000000102'))"
check "the failing message: dead-lettered after 3 deliveries, with its error" \
  "SELECT attempts = 3 AND last_error LIKE 'Error: demo failure%attempt 3)' FROM whizbang.wh_dead_letters WHERE message_id = 'f0000000-0000-7000-8000-000000000100'"
check "the message without a handler: dead-lettered at its first delivery" \
  "SELECT attempts = 1 AND last_error LIKE 'PermanentError: no handler%' FROM whizbang.wh_dead_letters WHERE message_id = 'f0000000-0000-7000-8000-000000000102'"
check "per-stream order: in every stream, effects are in stored order" \
  "SELECT NOT EXISTS (SELECT 1 FROM (SELECT seq, lag(seq) OVER (PARTITION BY stream_id ORDER BY entry_id) AS prev
                                       FROM inbox_demo_ledger) s WHERE prev >= seq)"
check "the message after the failing one waited until it was dead-lettered" \
  "SELECT l.applied_at > d.dead_lettered_at FROM inbox_demo_ledger l, whizbang.wh_dead_letters d
    WHERE l.message_id = 'f0000000-0000-7000-8000-000000000101' AND d.message_id = 'f0000000-0000-7000-8000-000000000100'"
check "no work left; dedup records kept for all 35 messages" \
  "SELECT NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox) AND (SELECT count(*) FROM whizbang.wh_message_deduplication) = 35"

# 4. Why tokens stay strings: an odd token above 2^53 changes when it becomes a JS number
#    (table store: its tokens come from wh_lease_token_seq).
if [ "${WB_LEASE_STORE:-table}" = table ]; then
psql -qX -v ON_ERROR_STOP=1 -c "SELECT setval('whizbang.wh_lease_token_seq', 9007199254741002)" -c "
SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(jsonb_build_object(
    'MessageId', 'f0000000-0000-7000-8000-000000000500', 'HandlerName', 'ledger.post',
    'MessageType', 'LedgerEntryRequested', 'Envelope', '{}'::jsonb)))" >/dev/null
cat >"$work/number_token.js" <<'JS'
const pg = require('pg');
(async () => {
  const c = new pg.Client(); await c.connect();
  const { rows: [m] } = await c.query(
    "SELECT message_id, lease_token FROM whizbang.claim_work('00000000-0000-4000-8000-000000000005', 'inbox', 1)");
  const complete = async (token) => (await c.query(
    "SELECT outcome FROM whizbang.complete_work('inbox', $1::uuid[], $2::bigint[])", [[m.message_id], [token]])).rows[0].outcome;
  console.log(typeof m.lease_token, m.lease_token, String(Number(m.lease_token)), await complete(Number(m.lease_token)),
              await complete(m.lease_token));
  await c.end();
})();
JS
check_eq "a token above 2^53: Number() changes it (lease_lost), the string completes" \
  "string 9007199254741003 9007199254741004 lease_lost completed" "$(node "$work/number_token.js" 2>&1)"
fi

# 5. Waiting for work: a worker with its default --wait of 10 s, its claim waiting in the server.
#    A message stored meanwhile is applied at once; SIGINT then cancels the waiting claim.
claim_waiting() {  # the worker's claim is running in the server
  [ "$(psql -qXtA -c "SELECT count(*) FROM pg_stat_activity
                       WHERE state = 'active' AND query LIKE '%whizbang.claim_work(%' AND pid <> pg_backend_pid()")" = 1 ]
}
wait_for() {  # wait_for SECONDS CMD...: until CMD succeeds; fails when the time is up
  local deadline=$(( $(date +%s%N) + $1 * 1000000000 ))
  shift
  until "$@"; do [ "$(date +%s%N)" -lt "$deadline" ] || return 1; sleep 0.05; done
}
applied() { [ "$(psql -qXtA -c "SELECT count(*) FROM inbox_demo_ledger WHERE account = 'acct-idle'")" = 1 ]; }
node "$WORKER" >"$work/idle.json" 2>"$work/idle.log" &
pids=($!)
check_eq "idle worker: its claim waits in the server" 0 "$(wait_for 10 claim_waiting; echo $?)"
stored_at=$(date +%s%N)
psql -qX -v ON_ERROR_STOP=1 -c "
SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(jsonb_build_object(
    'MessageId', 'f0000000-0000-7000-8000-000000000400', 'HandlerName', 'ledger.post',
    'MessageType', 'LedgerEntryRequested', 'Envelope', '{\"account\": \"acct-idle\", \"amount\": 1}'::jsonb)))" >/dev/null
check_eq "idle worker: a message stored while it waits is applied within 2 s" 0 "$(wait_for 2 applied; echo $?)"
applied_ms=$(( ($(date +%s%N) - stored_at) / 1000000 ))
check_eq "idle worker: its next claim waits in the server again" 0 "$(wait_for 10 claim_waiting; echo $?)"
kill -INT "${pids[0]}"
status=0 started=$(date +%s%N)
wait "${pids[0]}" || status=$?
stopped_ms=$(( ($(date +%s%N) - started) / 1000000 ))
pids=()
echo "     (store to effect: ${applied_ms} ms; SIGINT to exit: ${stopped_ms} ms)"
check_eq "idle worker: SIGINT stops it with exit 0" 0 "$status"
check_eq "idle worker: SIGINT ends its waiting claim at once (under 2 s)" 1 "$(( stopped_ms < 2000 ))"
check_eq "idle worker: it printed its summary (1 completed)" 1 "$(grep -c '"completed":1,' "$work/idle.json" || true)"
check_eq "idle worker: no error logged (the canceled claim counts as no rows)" 0 \
  "$(grep -ci 'fatal\|error\|could not' "$work/idle.log" || true)"

# 6. SIGINT while busy: three slow messages of one stream in one batch. The worker finishes the
#    message it is on, releases the rest (attempt refunded), and a second run applies them in order.
psql -qX -v ON_ERROR_STOP=1 -c "
SELECT count(*) FROM whizbang.store_inbox_messages((SELECT jsonb_agg(jsonb_build_object(
    'MessageId', 'f0000000-0000-7000-8000-00000000030' || i, 'StreamId', 'f0000000-0000-7000-8000-0000000003ff',
    'HandlerName', 'ledger.post', 'MessageType', 'LedgerEntryRequested',
    'Envelope', jsonb_build_object('account', 'acct-slow', 'seq', 300 + i, 'amount', 1, 'sleep', 0.8)) ORDER BY i)
  FROM generate_series(1, 3) i))" >/dev/null
node "$WORKER" --batch 10 --lease 30 --wait 0.2 >"$work/busy.json" 2>"$work/busy.log" &
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
node "$WORKER" --wait 0.1 --max-idle 1 >"$work/rest.json" 2>"$work/rest.log"
check "a second run applied the released messages, in order" \
  "SELECT array_agg(seq ORDER BY entry_id) = '{301,302,303}' FROM inbox_demo_ledger WHERE account = 'acct-slow'"

if [ "$FAILED" -ne 0 ]; then
  for f in "$work"/*.log "$work"/*.json; do echo "---- $(basename "$f")"; cat "$f"; done
  echo "$FAILED check(s) failed"
  exit 1
fi
echo "all checks passed"
