#!/usr/bin/env bash
# whizbang through a connection pooler: pgbouncer (Debian's package) in TRANSACTION pooling mode,
# in front of a throw-away cluster, with a pool of 3 server connections for more clients than
# that. Through the pooler it runs:
#   a. examples/inbox_worker.py: 200 messages over 8 streams stored (and stored again: a
#      redelivery), a message that fails until it is dead-lettered, 4 workers side by side. Every
#      message is applied exactly once, in stream order; more clients than 3 were connected at
#      once, and the pool never had more than 3 server connections.
#   b. LISTEN/NOTIFY does NOT go through transaction pooling: a LISTEN through pgbouncer hears
#      nothing of a NOTIFY whizbang_outbox that a direct LISTEN receives, and a relay that LISTENs
#      through the pooler (--listen, 30 s wait) is not woken by a new order.
#   c. examples/outbox_relay.py in polling mode: the application's orders and outbox rows stored
#      through the pooler, two polling relays publish every one exactly once (the receiver's inbox
#      on its own pooled connection), in stream order.
#   d. pgbench, 8 clients, a mix of store_inbox_messages batches, claim_work + complete_work in one
#      transaction, and store_outbox_messages in a transaction: -M simple and -M extended succeed
#      with every call's effect in the tables; -M prepared fails with pgbench's named prepared
#      statements ("P_0"), which pgbouncer 1.18 does not track in transaction mode.
#   e. idempotency keys in lease mode (begin, complete and replay by three clients) and in
#      transaction mode, and CALL run_maintenance() (it commits inside the CALL).
# All of it runs in a cluster of each lease store (issue 11): a plain one, and one with
# shared_preload_libraries = whizbang, where leases live in shared memory and must be just as
# safe through transaction pooling (nothing is tied to a session).
#   POOLER_LEASE_STORES="table" (or "shared_memory"; else WB_LEASE_STORES) one cluster only
# Without pgbouncer (scripts/lib.sh installs it) it prints SKIP and exits 0. docs/operations.md
# "Connection poolers" explains what works and why. Expects whizbang to be installed already.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."

source scripts/lib.sh  # wb_free_port

if [ "${1:-}" != "--in-cluster" ]; then
  if ! command -v pgbouncer >/dev/null && [ ! -x /usr/sbin/pgbouncer ]; then
    echo "SKIP pgbouncer: pgbouncer is not installed (Debian: pgbouncer, in WB_PACKAGES of scripts/lib.sh)"
    exit 0
  fi
  source test/lib/checks.sh  # in_each_lease_store
  in_each_lease_store POOLER_LEASE_STORES bash "$self" --in-cluster
  exit
fi

# ----------------------------------------------------------------------------------------
# Inside the cluster (PG* variables point at it)
# ----------------------------------------------------------------------------------------
source test/lib/checks.sh  # check, check_eq, FAILED, wb_python, summary
wb_python || exit 1
PATH=$PATH:/usr/sbin  # Debian installs pgbouncer there
PGBENCH="$(dirname "$(wb_pg_config)")/pgbench"

POOL_SIZE=3
SERVER_PORT=$PGPORT
BOUNCER_PORT=$(wb_free_port)
work=$(mktemp -d /tmp/whizbang-pgbouncer.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do
    if kill -0 "$p" 2>/dev/null; then kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; fi
  done
  if [ -s "$work/pgbouncer.pid" ]; then kill "$(cat "$work/pgbouncer.pid")" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# "${POOLED[@]}" CMD...: runs CMD with the PG* variables pointing at pgbouncer instead of the
# server (env execs CMD: $! of a background "${POOLED[@]}" CMD & is CMD's own pid).
POOLED=(env PGHOST=127.0.0.1 PGPORT="$BOUNCER_PORT")
pooled() { "${POOLED[@]}" "$@"; }
q() { psql -qXtA -v ON_ERROR_STOP=1 -c "$1"; }
admin() { pooled psql -qXtA -F ' ' -d pgbouncer -c "$1"; }  # pgbouncer's admin console
dump_logs() {
  local f
  for f in "$work"/*.log "$work"/*.json "$work"/*.out; do [ -e "$f" ] && { echo "---- $(basename "$f")"; tail -n 40 "$f"; }; done
}

# ----------------------------------------------------------------------------------------
# pgbouncer: transaction pooling, 3 server connections, SCRAM for the clients and the server
# (the cluster's password, in a userlist only its user reads). It refuses to run as root: when
# we are root it runs as postgres.
# ----------------------------------------------------------------------------------------
psql -qX -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION whizbang;
INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type) VALUES
    ('max_attempts', '3', 'integer'), ('retry_base_seconds', '0', 'integer'), ('retry_max_seconds', '0', 'integer')
ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value;
SQL
check_lease_store

printf '"%s" "%s"\n' "$PGUSER" "$PGPASSWORD" >"$work/userlist.txt"
cat >"$work/pgbouncer.ini" <<INI
[databases]
$PGDATABASE = host=127.0.0.1 port=$SERVER_PORT dbname=$PGDATABASE

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $BOUNCER_PORT
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $work/userlist.txt
admin_users = $PGUSER
pool_mode = transaction
default_pool_size = $POOL_SIZE
max_db_connections = $POOL_SIZE
reserve_pool_size = 0
max_client_conn = 100
logfile = $work/pgbouncer.log
pidfile = $work/pgbouncer.pid
INI
chmod 600 "$work/userlist.txt"
if [ "$(id -u)" -eq 0 ]; then
  chown -R postgres "$work"
  runuser -u postgres -- pgbouncer -d "$work/pgbouncer.ini"
else
  pgbouncer -d "$work/pgbouncer.ini"
fi
for _ in $(seq 50); do admin "SHOW VERSION" >/dev/null 2>&1 && break; sleep 0.1; done
check_eq "pgbouncer is up, transaction pooling, pool size $POOL_SIZE" "default_pool_size=$POOL_SIZE pool_mode=transaction" \
  "$(admin "SHOW CONFIG" 2>&1 | awk '$1 == "pool_mode" || $1 == "default_pool_size" { print $1 "=" $2 }' | sort | paste -sd ' ')"
check_eq "a query through pgbouncer reaches the cluster" "t" "$(pooled psql -qXtA -c "SELECT current_setting('port') = '$SERVER_PORT'")"

# sample_pool FILE: every 0.1 s, "clients servers" of the pool (admin SHOW CLIENTS/SERVERS),
# until killed.
sample_pool() {
  while :; do
    echo "$(admin "SHOW CLIENTS" | grep -cv ' pgbouncer ' || true) $(admin "SHOW SERVERS" | grep -c . || true)"
    sleep 0.1
  done >"$1"
}

# ----------------------------------------------------------------------------------------
# a. The inbox worker example, 4 workers, through the pooler.
# ----------------------------------------------------------------------------------------
WORKER=examples/inbox_worker.py
sample_pool "$work/pool-inbox.out" &
sampler=$!
pids=("$sampler")
for w in 1 2 3 4; do
  "${POOLED[@]}" "$PY" "$WORKER" --batch 5 --max-per-stream 3 --lease 3 --wait 0.1 --max-idle 2 \
    >"$work/worker-$w.json" 2>"$work/worker-$w.log" &
  pids+=($!)
done
# The workers are polling before the work arrives, so that they all get a share of it (with the
# shared-memory lease store a single worker could drain 200 messages before the others start).
# Their claims wait 0.1 s (p_wait): a waiting claim holds its server connection while it waits,
# and 4 workers share a pool of 3 with the producer.
sleep 0.5
check_eq "inbox: produce 200 messages through pgbouncer" "stored 200 new of 200 messages (0 duplicates)" \
  "$(pooled "$PY" "$WORKER" --produce 200 --streams 8 --tag pool 2>&1)"
check_eq "inbox: produce them again (a redelivery), nothing stored" "stored 0 new of 200 messages (200 duplicates)" \
  "$(pooled "$PY" "$WORKER" --produce 200 --streams 8 --tag pool 2>&1)"
# A message that fails until it is dead-lettered, in the middle of a stream (seq 100 of acct-1).
q "SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(jsonb_build_object(
     'MessageId', 'f0000000-0000-7000-8000-000000000100',
     'StreamId', (SELECT stream_id FROM whizbang.wh_inbox WHERE envelope->>'account' = 'acct-1' LIMIT 1),
     'HandlerName', 'ledger.post', 'MessageType', 'LedgerEntryRequested',
     'Envelope', '{\"account\": \"acct-1\", \"seq\": 100, \"amount\": 0, \"fail\": true}'::jsonb)))" >/dev/null
status=0
for p in "${pids[@]:1}"; do wait "$p" || status=$?; done
kill "$sampler"; wait "$sampler" 2>/dev/null || true
pids=()
check_eq "inbox: the 4 workers exited 0" 0 "$status"
check_eq "inbox: worker summaries" "completed=200 retry_scheduled=2 dead_lettered=1 lease_lost=0 not_found=0" \
  "$(summary "$work/worker-1.json,$work/worker-2.json,$work/worker-3.json,$work/worker-4.json" \
       completed retry_scheduled dead_lettered lease_lost not_found)"
check "inbox: 200 effects, one per message" \
  "SELECT count(*) = 200 AND count(DISTINCT message_id) = 200 FROM inbox_demo_ledger"
check "inbox: the workers shared the work" "SELECT count(DISTINCT worker) >= 2 FROM inbox_demo_ledger"
check "inbox: in every stream, effects are in stored order" \
  "SELECT NOT EXISTS (SELECT 1 FROM (SELECT seq, lag(seq) OVER (PARTITION BY stream_id ORDER BY entry_id) AS prev
                                       FROM inbox_demo_ledger) s WHERE prev >= seq)"
check "inbox: the failing message dead-lettered after 3 deliveries; no work left" \
  "SELECT (SELECT attempts FROM whizbang.wh_dead_letters WHERE message_id = 'f0000000-0000-7000-8000-000000000100') = 3
      AND NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox)"
read -r max_clients max_servers < <(awk '$1 > c { c = $1 } $2 > s { s = $2 } END { print c + 0, s + 0 }' "$work/pool-inbox.out")
check_eq "inbox: $max_clients clients at once on at most $POOL_SIZE server connections" "yes" \
  "$([ "$max_servers" -le "$POOL_SIZE" ] && [ "$max_clients" -gt "$POOL_SIZE" ] && echo yes || echo "servers=$max_servers clients=$max_clients")"

# ----------------------------------------------------------------------------------------
# b. LISTEN through transaction pooling hears nothing. With outbox_notify on, a store through the
#    pooler sends NOTIFY whizbang_outbox at commit: a direct LISTEN receives it, a LISTEN through
#    pgbouncer does not (its LISTEN ran on a server connection that went back to the pool when
#    the statement ended; that connection may serve anyone next, and nobody reads its queue).
# ----------------------------------------------------------------------------------------
q "INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type) VALUES ('outbox_notify', 'true', 'boolean')
   ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value" >/dev/null
"$PY" - "$BOUNCER_PORT" >"$work/listen.out" 2>&1 <<'PY'
import select, sys, time, uuid, psycopg2
from psycopg2.extras import Json

def listener(dsn):
    conn = psycopg2.connect(dsn); conn.autocommit = True
    conn.cursor().execute("LISTEN whizbang_outbox")
    return conn

direct = listener("")
pooled = listener("host=127.0.0.1 port=%s" % sys.argv[1])
app = psycopg2.connect("host=127.0.0.1 port=%s" % sys.argv[1])
with app.cursor() as cur:
    cur.execute("SELECT count(*) FROM whizbang.store_outbox_messages(%s::jsonb)",
                (Json([{"MessageId": str(uuid.uuid4()), "Destination": "probe", "MessageType": "Probe", "Envelope": {}}]),))
app.commit()
deadline = time.monotonic() + 2
while time.monotonic() < deadline:
    select.select([direct, pooled], [], [], max(0.0, deadline - time.monotonic()))
    direct.poll(); pooled.poll()
print("direct", len(direct.notifies), "pooled", len(pooled.notifies))
# The pooled listener runs a statement now: its server connection may or may not be the one that
# LISTENed; what it gets is chance. Shown, not checked.
pooled.cursor().execute("SELECT 1")
pooled.poll()
print("pooled_after_a_statement", len(pooled.notifies))
app.cursor().execute("SELECT whizbang.complete_outbox_published(array_agg(message_id)) FROM whizbang.wh_outbox")
app.commit()
PY
check_eq "LISTEN: a direct LISTEN receives the NOTIFY of a store through the pooler; a LISTEN through the pooler does not" \
  "direct 1 pooled 0" "$(head -n 1 "$work/listen.out")"
echo "info LISTEN through the pooler, notifications seen after one more statement (chance): $(sed -n 's/^pooled_after_a_statement //p' "$work/listen.out")"

# A relay that LISTENs through the pooler, with a 30 s poll, is not woken by a new order.
RELAY=examples/outbox_relay.py
TRANSPORT=(--transport-table outbox_demo_effects)
"${POOLED[@]}" "$PY" "$RELAY" "${TRANSPORT[@]}" --listen --wait 30 >"$work/relay-listen.json" 2>"$work/relay-listen.log" &
pids=($!)
for _ in $(seq 100); do grep -q "instance" "$work/relay-listen.log" 2>/dev/null && break; sleep 0.1; done
sleep 0.5  # its first claim found nothing; it waits now
pooled "$PY" "$RELAY" --produce 1 --customers 1 --tag listen >/dev/null 2>&1
sleep 2
kill -TERM "${pids[0]}"
status=0
wait "${pids[0]}" || status=$?
pids=()
check_eq "LISTEN: a relay listening through the pooler was not woken, published nothing in 2 s" \
  "status=0 notifications=0 woken=0 published=0" \
  "status=$status $(summary "$work/relay-listen.json" notifications woken published)"
check "LISTEN: the order's outbox message waits in wh_outbox" "SELECT count(*) = 1 FROM whizbang.wh_outbox"

# ----------------------------------------------------------------------------------------
# c. The outbox relay example, polling, through the pooler: 30 more orders over 3 customers,
#    two relays side by side; the receiver's inbox (--transport-table) is reached through the
#    pooler too.
# ----------------------------------------------------------------------------------------
check_eq "outbox: 30 orders and their outbox rows through pgbouncer" '{"created": 30, "existing": 0, "rolled_back": 0}' \
  "$(pooled "$PY" "$RELAY" --produce 30 --customers 3 --tag pool 2>&1)"
for r in 1 2; do
  "${POOLED[@]}" "$PY" "$RELAY" "${TRANSPORT[@]}" --batch 4 --max-per-stream 2 --wait 0.1 --max-idle 2 \
    >"$work/relay-$r.json" 2>"$work/relay-$r.log" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
pids=()
check_eq "outbox: the 2 polling relays exited 0" 0 "$status"
check_eq "outbox: relay summaries (31 orders)" "published=31 completed=31 lease_lost=0 retry_scheduled=0 dead_lettered=0" \
  "$(summary "$work/relay-1.json,$work/relay-2.json" published completed lease_lost retry_scheduled dead_lettered)"
check "outbox: one effect per order at the receiver, outbox empty" \
  "SELECT (SELECT count(*) FROM outbox_demo_orders) = 31
      AND (SELECT count(*) = 31 AND count(DISTINCT order_id) = 31 FROM outbox_demo_effects)
      AND NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox) AND NOT EXISTS (SELECT 1 FROM whizbang.wh_outbox)"
check "outbox: per-customer order at the receiver" \
  "SELECT NOT EXISTS (SELECT 1 FROM (SELECT o.seq, lag(o.seq) OVER (PARTITION BY o.customer_id ORDER BY e.effect_id) AS prev
                                       FROM outbox_demo_effects e JOIN outbox_demo_orders o USING (order_id)
                                      WHERE o.tag = 'pool') s
                       WHERE prev >= seq)"

# ----------------------------------------------------------------------------------------
# d. pgbench through the pooler, 8 clients on 3 server connections, three scripts:
#    - a batch of 10 inbox messages (random ids, 8 streams) in one store_inbox_messages call;
#    - claim_work and complete_work of what it claimed, in ONE transaction (the client's
#      instance id comes from its client_id; the claimed rows are read back from whizbang.leases
#      by that instance, as in either lease store);
#      a completion that is not 'completed' raises (division by zero) and fails the run;
#    - a transaction storing 5 outbox messages.
#    Every variable is an integer, so the same scripts run with -M simple (substituted) and
#    -M extended / prepared (bound parameters).
# ----------------------------------------------------------------------------------------
cat >"$work/store_inbox.sql" <<'SQL'
\set stream random(1, 8)
SELECT count(*) FROM whizbang.store_inbox_messages((
  SELECT jsonb_agg(jsonb_build_object(
           'MessageId', gen_random_uuid(),
           'StreamId', ('00000000-0000-4000-8000-' || lpad(:stream::text, 12, '0'))::uuid,
           'HandlerName', 'bench.handle', 'MessageType', 'BenchMessage', 'Envelope', jsonb_build_object('i', i)))
    FROM generate_series(1, 10) i), p_consumer => 'bench');
SQL
cat >"$work/claim_complete.sql" <<'SQL'
BEGIN;
SELECT count(*) AS claimed
  FROM whizbang.claim_work(('00000000-0000-4000-8000-' || lpad(:client_id::text, 12, '0'))::uuid, 'inbox',
                           p_max_rows => 10, p_lease_seconds => 30, p_consumer => 'bench') \gset
SELECT 1 / (count(*) FILTER (WHERE outcome OPERATOR(pg_catalog.<>) 'completed') = 0)::int AS all_completed
  FROM whizbang.complete_work('inbox',
         ARRAY(SELECT message_id FROM whizbang.leases
                WHERE source = 'inbox' AND consumer = 'bench'
                  AND instance_id = ('00000000-0000-4000-8000-' || lpad(:client_id::text, 12, '0'))::uuid
                ORDER BY message_id),
         ARRAY(SELECT lease_token FROM whizbang.leases
                WHERE source = 'inbox' AND consumer = 'bench'
                  AND instance_id = ('00000000-0000-4000-8000-' || lpad(:client_id::text, 12, '0'))::uuid
                ORDER BY message_id),
         p_consumer => 'bench');
END;
SQL
cat >"$work/store_outbox.sql" <<'SQL'
BEGIN;
SELECT count(*) FROM whizbang.store_outbox_messages((
  SELECT jsonb_agg(jsonb_build_object('MessageId', gen_random_uuid(), 'Destination', 'bench',
                                      'MessageType', 'BenchEvent', 'Envelope', jsonb_build_object('i', i)))
    FROM generate_series(1, 5) i));
END;
SQL
BENCH_CLIENTS=8
BENCH_TX=25  # per client
# bench MODE: runs the mix through the pooler; "ok" when every call's effect is in the tables.
bench() {
  local mode=$1 before_inbox before_outbox rc=0 n_inbox n_outbox
  before_inbox=$(q "SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'bench'")
  before_outbox=$(q "SELECT count(*) FROM whizbang.wh_outbox")
  # One thread per client: pgbench -M prepared prepares with a blocking call, and a thread
  # blocked waiting for a server connection cannot finish the transactions its other clients
  # hold open on all of them (with -j 2 the run hung until its timeout).
  pooled timeout 30 "$PGBENCH" -n -M "$mode" -c "$BENCH_CLIENTS" -j "$BENCH_CLIENTS" -t "$BENCH_TX" \
    -f "$work/store_inbox.sql" -f "$work/claim_complete.sql" -f "$work/store_outbox.sql" \
    >"$work/pgbench-$mode.log" 2>&1 || rc=$?
  # Transactions per script, from pgbench's per-script report.
  n_inbox=$(awk '/^SQL script [0-9]+: .*store_inbox.sql/ { s = 1; next } s && /transactions/ { print $2; exit }' "$work/pgbench-$mode.log")
  n_outbox=$(awk '/^SQL script [0-9]+: .*store_outbox.sql/ { s = 1; next } s && /transactions/ { print $2; exit }' "$work/pgbench-$mode.log")
  echo "rc=$rc"
  echo "processed=$(sed -nE 's/^number of transactions actually processed: ([0-9]+\/[0-9]+).*/\1/p' "$work/pgbench-$mode.log")"
  echo "failed=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$work/pgbench-$mode.log")"
  echo "inbox_stored=$(q "SELECT count(*) - $before_inbox = 10 * ${n_inbox:-0} FROM whizbang.wh_message_deduplication WHERE consumer = 'bench'")"
  echo "outbox_stored=$(q "SELECT count(*) - $before_outbox = 5 * ${n_outbox:-0} FROM whizbang.wh_outbox")"
  echo "none_left_leased=$(q "SELECT NOT EXISTS (SELECT 1 FROM whizbang.leases WHERE source = 'inbox')")"
}
total=$((BENCH_CLIENTS * BENCH_TX))
for mode in simple extended; do
  check_eq "pgbench -M $mode: $total transactions through the pooler, none failed, every effect in the tables" \
    "rc=0 processed=$total/$total failed=0 inbox_stored=t outbox_stored=t none_left_leased=t" \
    "$(bench "$mode" | paste -sd ' ')"
done
# -M prepared: pgbench prepares named statements (P_0, P_1, ...) once per client connection.
# pgbouncer 1.18 in transaction mode sends each transaction to whichever server connection is
# free, so a client finds its statement missing, or another client's P_0 already there.
prepared=$(bench prepared | paste -sd ' ')
prepared_error=$(grep -oE 'prepared statement "P_[0-9]+" (already exists|does not exist)' "$work/pgbench-prepared.log" | sort -u | paste -sd ',' || true)
check_eq "pgbench -M prepared through transaction pooling fails with a prepared-statement error" "failed: yes" \
  "failed: $([ "${prepared%% *}" != "rc=0" ] && [ -n "$prepared_error" ] && echo yes || echo "no ($prepared, error: ${prepared_error:-none})")"
echo "info pgbench -M prepared: ${prepared%% *}, $(grep -c 'aborted in command' "$work/pgbench-prepared.log" || true) of $BENCH_CLIENTS clients aborted; errors: $(sed -E 's/P_[0-9]+/P_n/g' <<<"$prepared_error" | tr ',' '\n' | sort -u | paste -sd ',')"

# ----------------------------------------------------------------------------------------
# e. Idempotency keys in both modes, and maintenance called by the application, through the
#    pooler: each psql below is a client of its own, so nothing can come from a session.
# ----------------------------------------------------------------------------------------
# Lease mode: the claim commits on its own; the completion comes later, from another client.
token=$(pooled psql -qXtA -v ON_ERROR_STOP=1 -c "SELECT token FROM whizbang.idempotency_begin('pool:test', 'lease-1')" 2>&1)
check_eq "idempotency, lease mode: claimed by one client, completed by another, replayed to a third" \
  "completed completed_duplicate {\"n\": 1}" \
  "$(pooled psql -qXtA -v ON_ERROR_STOP=1 -c "SELECT whizbang.idempotency_complete('pool:test', 'lease-1', ${token:-0}, '{\"n\": 1}')" 2>&1) $(
     pooled psql -qXtA -F ' ' -v ON_ERROR_STOP=1 -c "SELECT outcome, result FROM whizbang.idempotency_begin('pool:test', 'lease-1')" 2>&1)"
# Transaction mode: claim, effect and completion in one transaction of one client.
check_eq "idempotency, transaction mode: claim and completion in one transaction through the pooler" "completed" \
  "$(pooled psql -qXtA -v ON_ERROR_STOP=1 2>&1 <<'SQL'
BEGIN;
SELECT token FROM whizbang.idempotency_begin('pool:test', 'tx-1') \gset
SELECT whizbang.idempotency_complete('pool:test', 'tx-1', :token, '{"n": 2}');
COMMIT;
SQL
)"
check_eq "maintenance from the application: CALL run_maintenance() through the pooler" "ok" \
  "$(pooled psql -qXtA -v ON_ERROR_STOP=1 -c "CALL whizbang.run_maintenance()" >/dev/null 2>"$work/maintenance.out" && echo ok || cat "$work/maintenance.out")"

if [ "$FAILED" -ne 0 ]; then
  dump_logs
  echo "$FAILED check(s) failed"
  exit 1
fi
echo "all checks passed"
