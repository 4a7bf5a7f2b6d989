#!/usr/bin/env bash
# End-to-end test of the transactional outbox (seed 000: "Transactional Outbox Pattern", "Outbox
# Processing Flow") with examples/outbox_relay.py. In a throw-away cluster (max_attempts 3, retry
# delays 0), with the relay's "broker + receiving service" stand-in (--transport-table: the
# receiver's whizbang inbox, consumer 'receiver', and its business effect table
# outbox_demo_effects, in the same database but on a separate connection), it checks:
#   a. the application's order and its outbox row commit together: a rolled-back transaction
#      leaves neither (the example's --produce --rollback-every, and by hand in psql); running the
#      same commands again creates only the missing orders and no second outbox row;
#      store_outbox_messages answers was_newly_created false for an id already stored (and for a
#      repeat inside one batch) and true for an id published and deleted before (no dedup table);
#   b. two relays side by side (one completing with complete_work and lease tokens, one with
#      complete_outbox_published) publish every message once and empty the outbox, keeping the
#      customers' stream order at the receiver;
#   c. a relay that dies after publishing and before completing: the message stays in wh_outbox,
#      leased, and nobody else gets it while the lease lives; after the lease expires a relay
#      publishes it AGAIN (2 deliveries, observation_count 2 at the receiver) and the receiver's
#      inbox dedup turns the two deliveries into ONE business effect;
#   d. fencing: a relay whose lease ran out and whose message another relay re-claimed gets
#      'lease_lost' from complete_work; the message has one effect;
#   e. a transport error is retried (fail_work) and dead-lettered after max_attempts, with
#      source 'outbox' and its destination, while the next message of its stream waits;
#   f. outbox_notify: no NOTIFY while it is off; with it on, one NOTIFY whizbang_outbox per
#      committing transaction that stored outbox rows, none for a rollback; a LISTENing relay
#      (poll 30 s) publishes a new order within 1 s of its commit;
#   g. at the end: exactly one effect per committed order, none for anything else, wh_outbox and
#      wh_outbox empty, the receiver's inbox work empty.
# All of it runs in a cluster of each lease store (issue 11): a plain one, and one with
# shared_preload_libraries = whizbang (leases in shared memory).
#   OUTBOX_LEASE_STORES="table" (or "shared_memory"; else WB_LEASE_STORES) one cluster only
# Expects whizbang to be installed already (./scripts/test does that). Exits non-zero on failure.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."

source scripts/lib.sh  # wb_free_port

if [ "${1:-}" != "--in-cluster" ]; then
  source test/lib/checks.sh  # in_each_lease_store
  in_each_lease_store OUTBOX_LEASE_STORES bash "$self" --in-cluster
  exit
fi

# ----------------------------------------------------------------------------------------
# Inside the cluster (PG* variables point at it)
# ----------------------------------------------------------------------------------------
source test/lib/checks.sh  # check, check_eq, FAILED, wb_python, summary
wb_python || exit 1

RELAY=examples/outbox_relay.py
TRANSPORT=(--transport-table outbox_demo_effects)
work=$(mktemp -d /tmp/whizbang-outbox-e2e.XXXXXX)
pids=()
trap 'stop_pids_and_remove "$work"' EXIT

q() { psql -qXtA -v ON_ERROR_STOP=1 -c "$1"; }
wait_for() {  # wait_for SECONDS "SQL returning true": polls every 0.1 s; returns 1 on timeout
  local deadline=$((SECONDS + $1))
  while [ "$(q "$2")" != "t" ]; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

psql -qX -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION whizbang;
INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type) VALUES
    ('max_attempts', '3', 'integer'), ('retry_base_seconds', '0', 'integer'), ('retry_max_seconds', '0', 'integer')
ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value;
SQL
check_lease_store

# ----------------------------------------------------------------------------------------
# a. The application: order + outbox row in one transaction.
# ----------------------------------------------------------------------------------------
out=$("$PY" "$RELAY" --produce 10 --customers 3 --rollback-every 4 --tag t1 2>"$work/produce-t1.log")
check_eq "produce 10 orders, every 4th rolled back" '{"created": 8, "existing": 0, "rolled_back": 2}' "$out"
check "8 orders and 8 outbox rows, 8 work rows" \
  "SELECT (SELECT count(*) FROM outbox_demo_orders) = 8 AND (SELECT count(*) FROM whizbang.wh_outbox) = 8
      AND (SELECT count(*) FROM whizbang.wh_outbox) = 8"
check "the rolled-back orders (4 and 8) left neither an order nor an outbox row" \
  "SELECT NOT EXISTS (SELECT 1 FROM outbox_demo_orders WHERE seq IN (4, 8))
      AND NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox WHERE event_data->>'seq' IN ('4', '8'))"
check "each order has exactly one outbox row, with its destination, type and stream" \
  "SELECT count(*) = 8 AND bool_and(b.destination = 'orders' AND b.message_type = 'OrderCreated'
                                    AND b.stream_id = o.customer_id AND b.is_event)
     FROM outbox_demo_orders o JOIN whizbang.wh_outbox b ON b.event_data->>'order_id' = o.order_id::text"

# The same by hand: inside the transaction the row is there, after ROLLBACK it is not.
psql -qXtA -v ON_ERROR_STOP=1 >"$work/rollback.out" <<'SQL'
BEGIN;
INSERT INTO outbox_demo_orders (order_id, customer_id, seq, amount, tag)
VALUES ('aaaaaaaa-0000-4000-8000-000000000001', NULL, 1, 5, 'psql');
SELECT was_newly_created FROM whizbang.store_outbox_messages(jsonb_build_array(jsonb_build_object(
    'MessageId', 'aaaaaaaa-0000-4000-8000-0000000000e1', 'Destination', 'orders', 'MessageType', 'OrderCreated',
    'Envelope', jsonb_build_object('order_id', 'aaaaaaaa-0000-4000-8000-000000000001'))));
SELECT count(*) FROM whizbang.wh_outbox WHERE message_id = 'aaaaaaaa-0000-4000-8000-0000000000e1';
ROLLBACK;
SELECT count(*) FROM outbox_demo_orders WHERE order_id = 'aaaaaaaa-0000-4000-8000-000000000001';
SELECT count(*) FROM whizbang.wh_outbox WHERE message_id = 'aaaaaaaa-0000-4000-8000-0000000000e1';
SELECT count(*) FROM whizbang.wh_outbox WHERE message_id = 'aaaaaaaa-0000-4000-8000-0000000000e1';
SQL
check_eq "psql: stored inside the transaction (t, 1 row); after ROLLBACK no order, no outbox row, no work" \
  "t 1 0 0 0" "$(tr '\n' ' ' <"$work/rollback.out" | sed 's/ $//')"

# The same commands again (the client retries): only the two missing orders are created.
out=$("$PY" "$RELAY" --produce 10 --customers 3 --tag t1 2>>"$work/produce-t1.log")
check_eq "produce the same 10 orders again: 2 created, 8 left alone" \
  '{"created": 2, "existing": 8, "rolled_back": 0}' "$out"
check "10 orders, 10 outbox rows, one per order" \
  "SELECT (SELECT count(*) FROM outbox_demo_orders) = 10 AND (SELECT count(*) FROM whizbang.wh_outbox) = 10
      AND (SELECT count(DISTINCT event_data->>'order_id') FROM whizbang.wh_outbox) = 10"
check "the seed's troubleshooting query finds no duplicate outbox entries" \
  "SELECT NOT EXISTS (SELECT destination, message_type, event_data::TEXT, COUNT(*) FROM whizbang.wh_outbox
                       GROUP BY destination, message_type, event_data::TEXT HAVING COUNT(*) > 1)"

# store_outbox_messages of an id already stored (with a different envelope): false, not written.
first=$(q "SELECT message_id FROM whizbang.wh_outbox ORDER BY created_at, message_id LIMIT 1")
out=$(q "SELECT was_newly_created FROM whizbang.store_outbox_messages(jsonb_build_array(jsonb_build_object(
    'MessageId', '$first', 'Destination', 'elsewhere', 'MessageType', 'Other', 'Envelope', '{\"x\": 1}'::jsonb)))")
check_eq "store_outbox_messages of a stored id: was_newly_created false" "f" "$out"
check "... and the stored row is unchanged, still 10 rows" \
  "SELECT count(*) = 10 AND bool_and(destination = 'orders') FROM whizbang.wh_outbox"
out=$(psql -qXtA -v ON_ERROR_STOP=1 <<'SQL'
BEGIN;
SELECT string_agg(was_newly_created::text, ',' ORDER BY ord)
  FROM whizbang.store_outbox_messages(jsonb_build_array(
         jsonb_build_object('MessageId', 'aaaaaaaa-0000-4000-8000-0000000000e2', 'Destination', 'd', 'MessageType', 't', 'Envelope', '{}'::jsonb),
         jsonb_build_object('MessageId', 'aaaaaaaa-0000-4000-8000-0000000000e2', 'Destination', 'd', 'MessageType', 't', 'Envelope', '{}'::jsonb)))
       WITH ORDINALITY AS s(message_id, stream_id, was_newly_created, ord);
SELECT count(*) FROM whizbang.wh_outbox WHERE message_id = 'aaaaaaaa-0000-4000-8000-0000000000e2';
ROLLBACK;
SQL
)
check_eq "an id repeated inside one batch: true, then false; one row" "true,false 1" "$(echo $out)"

# ----------------------------------------------------------------------------------------
# b. Two relays side by side: complete_work with tokens, and complete_outbox_published.
# ----------------------------------------------------------------------------------------
"$PY" "$RELAY" "${TRANSPORT[@]}" --batch 3 --max-per-stream 2 --slow-publish 0.1 --wait 0.1 --max-idle 1.5 \
  >"$work/relay-a.json" 2>"$work/relay-a.log" &
pids+=($!)
"$PY" "$RELAY" "${TRANSPORT[@]}" --complete published --batch 3 --max-per-stream 2 --slow-publish 0.1 --wait 0.1 \
  --max-idle 1.5 \
  >"$work/relay-b.json" 2>"$work/relay-b.log" &
pids+=($!)
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
pids=()
check_eq "both relays exited 0" 0 "$status"
check_eq "relay summaries: each message claimed, published and completed once" \
  "claimed=10 published=10 completed=10 outcomes.new=10 outcomes.duplicate=0 lease_lost=0 not_found=0" \
  "$(summary "$work/relay-a.json,$work/relay-b.json" claimed published completed outcomes.new outcomes.duplicate lease_lost not_found)"
check "10 effects, one per order" \
  "SELECT count(*) = 10 AND count(DISTINCT order_id) = 10 FROM outbox_demo_effects e JOIN outbox_demo_orders o USING (order_id)"
check "the outbox is empty and has no work" \
  "SELECT NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox) AND NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox)"
check "the receiver saw each message once (observation_count 1) and has no inbox work left" \
  "SELECT count(*) = 10 AND bool_and(observation_count = 1) FROM whizbang.wh_message_deduplication WHERE consumer = 'receiver'
   AND NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox WHERE consumer = 'receiver')"
check "per-stream order: each customer's effects in the order its orders were committed" \
  "SELECT NOT EXISTS (SELECT 1 FROM (SELECT o.created_at, lag(o.created_at) OVER (PARTITION BY o.customer_id ORDER BY e.effect_id) AS prev
                                       FROM outbox_demo_effects e JOIN outbox_demo_orders o USING (order_id)) s
                       WHERE prev > created_at)"

# ----------------------------------------------------------------------------------------
# c. A relay crashes after publishing, before completing.
# ----------------------------------------------------------------------------------------
out=$("$PY" "$RELAY" --produce 1 --customers 1 --tag t2 2>/dev/null)
check_eq "produce one order for the crash case" '{"created": 1, "existing": 0, "rolled_back": 0}' "$out"
crash_id=$(q "SELECT message_id FROM whizbang.wh_outbox")
crash_order=$(q "SELECT event_data->>'order_id' FROM whizbang.wh_outbox")
status=0
"$PY" "$RELAY" "${TRANSPORT[@]}" --lease 4 --crash-after-publish --wait 0.1 --max-idle 2 \
  >"$work/crash.json" 2>"$work/crash.log" || status=$?
check_eq "the crashing relay died with status 1 after its publish" "1 1" \
  "$status $(grep -c 'crash-after-publish: exiting' "$work/crash.log" || true)"
check "the message is still in wh_outbox, leased (attempt 1), lease not yet expired" \
  "SELECT b.message_id IS NOT NULL AND l.attempts = 1 AND l.lease_token IS NOT NULL AND l.lease_expiry > now()
     FROM whizbang.wh_outbox b JOIN whizbang.leases l ON l.source = 'outbox' AND l.message_id = b.message_id
    WHERE b.message_id = '$crash_id'"
check "the receiver got it once: one delivery, one effect, observation_count 1" \
  "SELECT (SELECT count(*) FROM outbox_demo_effects_deliveries WHERE message_id = '$crash_id') = 1
      AND (SELECT count(*) FROM outbox_demo_effects WHERE order_id = '$crash_order') = 1
      AND (SELECT observation_count FROM whizbang.wh_message_deduplication
            WHERE consumer = 'receiver' AND message_id = '$crash_id') = 1"
out=$(psql -qXtA -v ON_ERROR_STOP=1 <<'SQL'
BEGIN;
SELECT count(*) FROM whizbang.claim_work(gen_random_uuid(), 'outbox');
ROLLBACK;
SQL
)
check_eq "while the dead relay's lease lives, nobody else can claim the message" "0" "$out"
if ! wait_for 15 "SELECT NOT EXISTS (SELECT FROM whizbang.leases
                                       WHERE source = 'outbox' AND message_id = '$crash_id' AND lease_expiry > now())"; then
  echo "FAIL the crashed relay's lease did not expire within 15 s"; FAILED=$((FAILED + 1))
fi
"$PY" "$RELAY" "${TRANSPORT[@]}" --wait 0.1 --max-idle 1 >"$work/recover.json" 2>"$work/recover.log"
check_eq "the next relay published it again, the receiver answered duplicate, and it completed" \
  "claimed=1 published=1 outcomes.duplicate=1 outcomes.new=0 completed=1" \
  "$(summary "$work/recover.json" claimed published outcomes.duplicate outcomes.new completed)"
check "two deliveries of the message (new at attempt 1, duplicate at attempt 2), observation_count 2" \
  "SELECT array_agg(outcome || '@' || attempt ORDER BY delivery_id) = '{new@1,duplicate@2}'
          AND (SELECT observation_count FROM whizbang.wh_message_deduplication
                WHERE consumer = 'receiver' AND message_id = '$crash_id') = 2
     FROM outbox_demo_effects_deliveries WHERE message_id = '$crash_id'"
check "... and exactly ONE business effect for that order" \
  "SELECT count(*) = 1 FROM outbox_demo_effects WHERE order_id = '$crash_order'"
check "the outbox is empty again" \
  "SELECT NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox) AND NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox)"
out=$(psql -qXtA -v ON_ERROR_STOP=1 <<SQL
BEGIN;
SELECT was_newly_created FROM whizbang.store_outbox_messages(jsonb_build_array(jsonb_build_object(
    'MessageId', '$crash_id', 'Destination', 'orders', 'MessageType', 'OrderCreated', 'Envelope', '{}'::jsonb)));
ROLLBACK;
SQL
)
check_eq "no dedup table: an id published and deleted can be stored again (was_newly_created true)" "t" "$out"

# ----------------------------------------------------------------------------------------
# d. Fencing: relay A's lease runs out while its broker is slow; relay B re-claims the message.
#    A's complete_work answers lease_lost (B holds the message now); B completes it.
# ----------------------------------------------------------------------------------------
out=$("$PY" "$RELAY" --produce 1 --customers 1 --tag t3 2>/dev/null)
fence_id=$(q "SELECT message_id FROM whizbang.wh_outbox")
fence_order=$(q "SELECT event_data->>'order_id' FROM whizbang.wh_outbox")
"$PY" "$RELAY" "${TRANSPORT[@]}" --lease 1 --slow-publish 4 --wait 0.1 --max-idle 0.5 \
  >"$work/fence-a.json" 2>"$work/fence-a.log" &
pids+=($!)
if ! wait_for 10 "SELECT EXISTS (SELECT 1 FROM outbox_demo_effects_deliveries WHERE message_id = '$fence_id')
                     AND NOT EXISTS (SELECT FROM whizbang.leases
                                      WHERE source = 'outbox' AND message_id = '$fence_id' AND lease_expiry > now())"; then
  echo "FAIL relay A did not publish, or its lease did not run out"; FAILED=$((FAILED + 1))
fi
"$PY" "$RELAY" "${TRANSPORT[@]}" --lease 30 --slow-publish 4 --wait 0.1 --max-idle 0.5 \
  >"$work/fence-b.json" 2>"$work/fence-b.log" &
pids+=($!)
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
pids=()
check_eq "both relays exited 0" 0 "$status"
check_eq "relay A: published, then complete_work answered lease_lost" "published=1 completed=0 lease_lost=1" \
  "$(summary "$work/fence-a.json" published completed lease_lost)"
check_eq "relay B: re-claimed (attempt 2), published a duplicate, completed" \
  "claimed=1 published=1 outcomes.duplicate=1 completed=1" \
  "$(summary "$work/fence-b.json" claimed published outcomes.duplicate completed)"
check "one effect for the fenced order, two deliveries, outbox empty" \
  "SELECT (SELECT count(*) FROM outbox_demo_effects WHERE order_id = '$fence_order') = 1
      AND (SELECT count(*) FROM outbox_demo_effects_deliveries WHERE message_id = '$fence_id') = 2
      AND NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox)"

# ----------------------------------------------------------------------------------------
# e. A transport error: retried, then dead-lettered; the next message of its stream waits.
#    Stream ...e5: first an audit message the transport refuses, then an order.
# ----------------------------------------------------------------------------------------
psql -qX -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
BEGIN;
INSERT INTO outbox_demo_orders (order_id, customer_id, seq, amount, tag)
VALUES ('eeeeeeee-0000-4000-8000-000000000001', 'eeeeeeee-0000-4000-8000-0000000000e5', 1, 7, 'e');
SELECT count(*) FROM whizbang.store_outbox_messages(jsonb_build_array(
  jsonb_build_object('MessageId', 'eeeeeeee-0000-4000-8000-0000000000a1', 'StreamId', 'eeeeeeee-0000-4000-8000-0000000000e5',
                     'Destination', 'nowhere', 'MessageType', 'OrderAudit', 'Envelope', '{"audit": true}'::jsonb),
  jsonb_build_object('MessageId', 'eeeeeeee-0000-4000-8000-0000000000a2', 'StreamId', 'eeeeeeee-0000-4000-8000-0000000000e5',
                     'Destination', 'orders', 'MessageType', 'OrderCreated',
                     'Envelope', '{"order_id": "eeeeeeee-0000-4000-8000-000000000001", "seq": 1}'::jsonb)));
COMMIT;
SQL
"$PY" "$RELAY" "${TRANSPORT[@]}" --reject-destination nowhere --batch 10 --wait 0.1 --max-idle 1 \
  >"$work/reject.json" 2>"$work/reject.log"
# Each retry gives the follower back with it (fail_work ends the rest of the relay's run in the
# stream, DESIGN §3.4), so the relay's own release of the follower finds nothing left to release.
check_eq "relay: 2 retries, 1 dead letter, the follower given back with each retry and then published" \
  "retry_scheduled=2 dead_lettered=1 released=0 completed=1 published=1" \
  "$(summary "$work/reject.json" retry_scheduled dead_lettered released completed published)"
check "dead letter: source outbox, destination nowhere, 3 attempts, the transport's error" \
  "SELECT count(*) = 1 AND bool_and(source = 'outbox' AND destination = 'nowhere' AND message_type = 'OrderAudit'
                                    AND attempts = 3 AND last_error LIKE 'TransportError: destination ''nowhere'' refused%')
     FROM whizbang.wh_dead_letters WHERE message_id = 'eeeeeeee-0000-4000-8000-0000000000a1'"
check "the order behind it in its stream was published only after the dead letter" \
  "SELECT e.applied_at > d.dead_lettered_at FROM outbox_demo_effects e, whizbang.wh_dead_letters d
    WHERE e.message_id = 'eeeeeeee-0000-4000-8000-0000000000a2' AND d.message_id = 'eeeeeeee-0000-4000-8000-0000000000a1'"
check "no delivery of the refused message reached the receiver" \
  "SELECT NOT EXISTS (SELECT 1 FROM outbox_demo_effects_deliveries WHERE message_id = 'eeeeeeee-0000-4000-8000-0000000000a1')"

# ----------------------------------------------------------------------------------------
# f. outbox_notify.
# ----------------------------------------------------------------------------------------
"$PY" - >"$work/notify.out" 2>&1 <<'PY'
import select, time, uuid, psycopg2
from psycopg2.extras import Json

listener = psycopg2.connect(""); listener.autocommit = True
listener.cursor().execute("LISTEN whizbang_outbox")
app = psycopg2.connect("")
stored = []

def notifications(wait=1.0):
    """Notifications that arrive within `wait` seconds."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        select.select([listener], [], [], max(0.0, deadline - time.monotonic()))
        listener.poll()
    got = [(n.channel, n.payload) for n in listener.notifies]
    del listener.notifies[:]
    return got

def store(cur, n):
    msgs = []
    for _ in range(n):
        mid = str(uuid.uuid4())
        msgs.append({"MessageId": mid, "Destination": "probe", "MessageType": "Probe", "Envelope": {}})
    cur.execute("SELECT count(*) FROM whizbang.store_outbox_messages(%s::jsonb)", (Json(msgs),))
    return [m["MessageId"] for m in msgs]

def setting(value):
    with app.cursor() as cur:
        cur.execute("INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type) VALUES ('outbox_notify', %s, 'boolean')"
                    " ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value", (value,))
    app.commit()
    notifications(0.2)

with app.cursor() as cur:
    stored += store(cur, 2)
app.commit()
print("off_commit", len(notifications()))

setting("true")
with app.cursor() as cur:
    stored += store(cur, 3)
app.commit()
got = notifications()
print("on_commit_3_rows", len(got), ",".join(sorted(set(c for c, _ in got))))

with app.cursor() as cur:
    stored += store(cur, 1)
    stored += store(cur, 2)
app.commit()
print("on_commit_2_calls", len(notifications()))

with app.cursor() as cur:
    store(cur, 2)
app.rollback()
print("on_rollback", len(notifications()))

with app.cursor() as cur:
    cur.execute("SELECT whizbang.complete_outbox_published(%s::uuid[])", (stored,))
    first = cur.fetchone()[0]
    cur.execute("SELECT whizbang.complete_outbox_published(%s::uuid[])", (stored,))
    second = cur.fetchone()[0]
app.commit()
print("complete_outbox_published", first, second)
PY
check_eq "outbox_notify off: a committed store sends nothing" "off_commit 0" "$(sed -n 1p "$work/notify.out")"
check_eq "outbox_notify on: one NOTIFY whizbang_outbox for a transaction storing 3 rows" \
  "on_commit_3_rows 1 whizbang_outbox" "$(sed -n 2p "$work/notify.out")"
check_eq "outbox_notify on: one NOTIFY for a transaction with two store calls" "on_commit_2_calls 1" \
  "$(sed -n 3p "$work/notify.out")"
check_eq "outbox_notify on: a rolled-back store sends nothing" "on_rollback 0" "$(sed -n 4p "$work/notify.out")"
check_eq "complete_outbox_published of the 8 probes: 8, then 0 (a second completion is a no-op)" \
  "complete_outbox_published 8 0" "$(sed -n 5p "$work/notify.out")"
check "the probes are gone (and the rolled-back ones were never there)" \
  "SELECT NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox) AND NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox)"

# A LISTENing relay with a 30-second poll: only the NOTIFY can wake it within 1 s. It completes
# with complete_outbox_published (the seed's contract, no fencing).
"$PY" "$RELAY" "${TRANSPORT[@]}" --listen --wait 30 --complete published >"$work/listen.json" 2>"$work/listen.log" &
pids=($!)
for _ in $(seq 100); do grep -q "instance" "$work/listen.log" 2>/dev/null && break; sleep 0.1; done
sleep 1  # its first claim found nothing; it waits now
out=$("$PY" "$RELAY" --produce 1 --customers 1 --tag t5 2>/dev/null)
listen_order=$(q "SELECT order_id FROM outbox_demo_orders WHERE tag = 't5'")
wait_for 5 "SELECT EXISTS (SELECT 1 FROM outbox_demo_effects WHERE order_id = '$listen_order')" || true
# From the order's INSERT (before its commit) to the receiver's effect, both on the server's clock.
latency=$(q "SELECT coalesce(round(extract(epoch FROM e.applied_at - o.created_at), 2)::text, 'none')
               FROM outbox_demo_orders o LEFT JOIN outbox_demo_effects e USING (order_id) WHERE o.order_id = '$listen_order'")
kill -TERM "${pids[0]}"
status=0
wait "${pids[0]}" || status=$?
pids=()
check "the listening relay published the new order within 1 s of the commit (took ${latency}s)" \
  "SELECT '$latency' <> 'none' AND '$latency'::numeric < 1"
check_eq "the listening relay: SIGTERM stops it with exit 0" 0 "$status"
check_eq "the listening relay: woken by a notification, published 1" "woken=1 published=1 completed=1" \
  "$(summary "$work/listen.json" woken published completed)"

# ----------------------------------------------------------------------------------------
# g. Final state.
# ----------------------------------------------------------------------------------------
check "as many effects as committed orders (14)" \
  "SELECT (SELECT count(*) FROM outbox_demo_orders) = 14 AND (SELECT count(*) FROM outbox_demo_effects) = 14"
check "exactly one effect per committed order" \
  "SELECT bool_and(n = 1) FROM (SELECT count(e.effect_id) AS n FROM outbox_demo_orders o
                                  LEFT JOIN outbox_demo_effects e USING (order_id) GROUP BY o.order_id) s"
check "no effect without a committed order" \
  "SELECT NOT EXISTS (SELECT 1 FROM outbox_demo_effects e WHERE NOT EXISTS
                        (SELECT 1 FROM outbox_demo_orders o WHERE o.order_id = e.order_id))"
check "per-stream order at the receiver, over all effects" \
  "SELECT NOT EXISTS (SELECT 1 FROM (SELECT o.created_at, lag(o.created_at) OVER (PARTITION BY o.customer_id ORDER BY e.effect_id) AS prev
                                       FROM outbox_demo_effects e JOIN outbox_demo_orders o USING (order_id)) s
                       WHERE prev > created_at)"
check "wh_outbox empty, no outbox work left, one dead letter (the refused message)" \
  "SELECT NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox) AND NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox)
      AND (SELECT count(*) FROM whizbang.wh_dead_letters) = 1"
check "the receiver: no inbox work left; 'new' delivered once per message it applied" \
  "SELECT NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox WHERE consumer = 'receiver')
      AND NOT EXISTS (SELECT 1 FROM outbox_demo_effects_deliveries WHERE outcome = 'new'
                       GROUP BY message_id HAVING count(*) > 1)
      AND (SELECT count(*) FROM outbox_demo_effects_deliveries WHERE outcome = 'new') = 14"

if [ "$FAILED" -ne 0 ]; then
  for f in "$work"/*.log "$work"/*.json "$work"/*.out; do [ -e "$f" ] && { echo "---- $(basename "$f")"; cat "$f"; }; done
  echo "$FAILED check(s) failed"
  exit 1
fi
echo "all checks passed"
