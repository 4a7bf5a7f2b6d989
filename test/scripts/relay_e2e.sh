#!/usr/bin/env bash
# The WAL outbox end to end (issue 32, DESIGN §3.10): emit in database A -> whizbang-relay ->
# RabbitMQ -> a consumer storing into database B's whizbang inbox, across crashes.
#   - A and B are two databases of one throw-away cluster (wal_level = logical). One cluster is
#     cheaper than two, and harsher: the immediate restart of A also cuts the consumer off from
#     B in the middle of its transactions, so the window "stored in B, not acknowledged to the
#     broker" is crossed there too. A has whizbang and create_outbox_relay(); B has whizbang.
#   - Three producer sessions (test/lib/relay_e2e_producer.py) emit in A: transactions of 1 to 4
#     messages over 10 streams (and a few without a stream), some rolled back, some with a
#     rolled-back savepoint. Table e2e_sent in A, written in the same transactions, is what
#     committed, with each stream's commit order.
#   - whizbang-relay of this tree publishes to exchange wb.e2e (amqp://…?exchange=wb.e2e),
#     bound to the durable queue e2e.billing (single active consumer) of a throw-away
#     rabbitmq-server (test/lib/rabbitmq.sh). A consumer (test/lib/relay_e2e_consumer.py) stores
#     each message with store_inbox_messages (HandlerName e2e.billing) and acknowledges it after
#     its commit; a loop here starts it again whenever it ends before the test is over.
#   - Meanwhile: kill -9 of the relay, messages committed while it is down, a new relay; kill -9
#     of the consumer (once by itself right after a commit, before its ack: a redelivery of a
#     stored message whatever the timing; once from here at any point); pg_ctl stop -m
#     immediate of the cluster and a start 3 s later: the relay and the producers connect
#     again by themselves, the consumer exits (3) and the loop starts it again.
# Checked at the end: every message that committed in A is in B's inbox once, no message rolled
# back (whole transaction or savepoint) is; per stream the order of B's stream_seq is A's commit
# order; repeats happened and were absorbed by the inbox's dedup (the consumer's own crash
# after a commit makes at least one; whether the relay also published some twice depends on the
# timing and is reported, not required); nothing is left in the queue; the relay is still the
# one started after the kill and its slot is confirmed up to the end of A's WAL.
# WB_E2E_SABOTAGE breaks one part, to show that the checks can fail:
#   nodedup   the consumer inserts into a plain table instead of the inbox (no deduplication)
#   skipslot  while the relay is down its slot is advanced to the end of the WAL, as a relay that
#             confirmed before publishing would leave it: messages are lost
# Needs whizbang installed (./scripts/test does that), rabbitmq-server, python3-pika and
# python3-psycopg2. Runs the broker as the calling user (root in CI). Exits non-zero on failure.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh  # wb_free_port, wb_pg_config

RELAY=${WB_RELAY:-$PWD/build/relay/whizbang-relay}
SABOTAGE=${WB_E2E_SABOTAGE:-}
case $SABOTAGE in ""|nodedup|skipslot) ;; *) echo "WB_E2E_SABOTAGE: nodedup or skipslot, not $SABOTAGE"; exit 2 ;; esac

if [ "${1:-}" != "--in-cluster" ]; then
  if [ ! -x "$RELAY" ]; then
    make -s build/relay/whizbang-relay PG_CONFIG="$(wb_pg_config)" >/dev/null
  fi
  exec pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off -o wal_level=logical \
    -o max_replication_slots=10 -o max_wal_senders=10 bash "$self" --in-cluster
fi

# ----------------------------------------------------------------------------------------
# Inside the cluster (PG* variables point at it)
# ----------------------------------------------------------------------------------------
source test/lib/checks.sh    # check_eq, FAILED, stop_pids_and_remove
source test/lib/rabbitmq.sh  # rabbit_prereqs, rabbit_start, rabbit_stop, amqp_admin
rabbit_prereqs || exit 1
"$PY" -c 'import psycopg2' 2>/dev/null || { echo "FAIL no python3 with psycopg2 found (Debian: python3-psycopg2)"; exit 1; }
[[ $(ldd "$RELAY") == *librabbitmq* ]] || { echo "FAIL $RELAY was built without the AMQP sink (librabbitmq-dev)"; exit 1; }

work=$(mktemp -d /tmp/whizbang-relay-e2e.XXXXXX)
chmod 777 "$work"  # the server (user postgres) writes its log here at the restart
pids=()
supervisor=""
cleanup() {
  set +e  # every step, whatever failed before (a broker left running outlives the test)
  touch "$work/stop" "$work/stop_producers"
  [ -n "$supervisor" ] && kill "$supervisor" 2>/dev/null
  [ -s "$work/consumer.pid" ] && kill -KILL "$(cat "$work/consumer.pid")" 2>/dev/null
  rabbit_stop
  stop_pids_and_remove "$work"
}
trap cleanup EXIT

A=e2e_a B=e2e_b
a() { psql -qXtA -v ON_ERROR_STOP=1 -d "$A" -c "$1"; }
b() { psql -qXtA -v ON_ERROR_STOP=1 -d "$B" -c "$1"; }
# wait_for SECONDS DB "SQL returning true": polls every 0.2 s (errors count as false: the server
# may be restarting); returns 1 on timeout. A deadline for a hang, never a measured time.
wait_for() {
  local deadline=$((SECONDS + $1))
  while [ "$(psql -qXtA -d "$2" -c "$3" 2>/dev/null || true)" != "t" ]; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.2
  done
}
sent() { a "SELECT count(*) FROM e2e_sent"; }
# Where A's WAL ends and where the relay's slot is confirmed, for the log.
positions() { a "SELECT format('WAL at %s, slot confirmed at %s', pg_current_wal_lsn(), confirmed_flush_lsn) FROM pg_replication_slots WHERE slot_name = 'whizbang_outbox'"; }
# How many deliveries B has logged (0 while B is down).
delivered() { b "SELECT count(*) FROM e2e_delivery" 2>/dev/null || echo 0; }
# progress WHAT N: waits until A has N more committed messages than now (WHAT = sent) or B N
# more deliveries (WHAT = delivered); a hang is a failure.
progress() {
  local from
  from=$($1)
  if [ "$1" = sent ]; then
    wait_for 90 "$A" "SELECT count(*) >= $((from + $2)) FROM e2e_sent"
  else
    wait_for 90 "$B" "SELECT count(*) >= $((from + $2)) FROM e2e_delivery"
  fi || { echo "FAIL no progress: $1 stayed near $from for 90 s"; FAILED=$((FAILED + 1)); }
}

echo "--- set-up: A ($A, create_outbox_relay), B ($B), the broker${SABOTAGE:+ (sabotage: $SABOTAGE)}"
psql -qXtA -c "CREATE DATABASE $A" -c "CREATE DATABASE $B"
a "CREATE EXTENSION whizbang"
a "SELECT slot_name FROM whizbang.create_outbox_relay()" >/dev/null
a "CREATE TABLE e2e_stream (stream_id uuid PRIMARY KEY, n integer NOT NULL DEFAULT 0)"
a "INSERT INTO e2e_stream (stream_id) SELECT ('e2e00000-0000-7000-8000-' || lpad(i::text, 12, '0'))::uuid FROM generate_series(1, 10) i"
a "CREATE TABLE e2e_sent (message_id uuid PRIMARY KEY, stream_id uuid, seq integer, UNIQUE (stream_id, seq))"
b "CREATE EXTENSION whizbang"
b "CREATE TABLE e2e_delivery (id bigserial PRIMARY KEY, message_id uuid NOT NULL, was_new boolean NOT NULL, redelivered boolean NOT NULL)"
b "CREATE TABLE e2e_plain (id bigserial PRIMARY KEY, message_id uuid NOT NULL, stream_id uuid)"
b "CREATE TABLE a_sent (message_id uuid, stream_id uuid, seq integer)"
b "CREATE TABLE a_rolledback (message_id uuid)"
# What B holds, whichever way the consumer stored it.
if [ "$SABOTAGE" = nodedup ]; then
  b "CREATE VIEW e2e_got AS SELECT message_id, stream_id, row_number() OVER (PARTITION BY stream_id ORDER BY id) AS stream_seq FROM e2e_plain"
else
  b "CREATE VIEW e2e_got AS SELECT message_id, stream_id, stream_seq FROM whizbang.wh_inbox"
fi

rabbit_start "$work/rabbit" || exit 1
amqp_admin exchange wb.e2e direct
amqp_admin queue e2e.billing single-active
amqp_admin bind e2e.billing wb.e2e billing
SINK="$RABBIT_URL?exchange=wb.e2e"

# Starts the relay on A's slot; its pid in RELAY_PID, its log in $work/relay.log.
start_relay() {
  echo "=== relay started $(date -u +%T.%N)" >>"$work/relay.log"
  "$RELAY" --slot whizbang_outbox --sink "$SINK" --dbname "dbname=$A" --status-interval 1 2>>"$work/relay.log" &
  RELAY_PID=$!
  pids+=("$RELAY_PID")
}
# The consumer, started again whenever it ends before $work/stop exists. Its first run kills
# itself after its 100th commit, before the ack.
supervise_consumer() {
  local run=0 rc extra
  while :; do
    run=$((run + 1)) rc=0 extra=()
    [ $run -eq 1 ] && extra=(--die-after 100)
    [ "$SABOTAGE" = nodedup ] && extra+=(--plain)
    PGDATABASE=$B "$PY" test/lib/relay_e2e_consumer.py "$RABBIT_URL" e2e.billing "$work/stop" "$work/consumer.pid" \
      "${extra[@]}" || rc=$?
    echo "run $run: exit $rc" >>"$work/consumer.runs"
    [ -e "$work/stop" ] && break
    sleep 0.3
  done
}

echo "--- running: 3 producers, the relay, the consumer"
start_relay
first_relay=$RELAY_PID
# (Its stderr into the consumer's log: bash reports each kill -9 of a run there.)
supervise_consumer 2>>"$work/consumer.log" &
pids+=("$!")
supervisor=$!
producers=()
for p in 1 2 3; do
  PGDATABASE=$A "$PY" test/lib/relay_e2e_producer.py "$p" "$work/stop_producers" "$work/rolledback" \
    >"$work/producer$p.out" 2>"$work/producer$p.err" &
  producers+=("$!")
  pids+=("$!")
done
progress sent 300
progress delivered 150

echo "--- kill -9 of the relay, messages committed while it is down, a new relay"
kill -KILL "$RELAY_PID"; wait "$RELAY_PID" 2>/dev/null || true
echo "   killed the relay at $(sent) messages committed in A, $(delivered) deliveries in B ($(positions))"
progress sent 100
if [ "$SABOTAGE" = skipslot ]; then
  # The walsender of the killed relay may hold the slot for a moment yet.
  wait_for 30 "$A" "SELECT pg_replication_slot_advance('whizbang_outbox', pg_current_wal_flush_lsn()) IS NOT NULL" ||
    echo "(sabotage: the slot could not be advanced)"
  # Written to disk now: else the immediate restart below would bring back the slot's old
  # position, and with it the skipped messages.
  a "CHECKPOINT"
  echo "   (sabotage: advanced the slot to the end of the WAL)"
fi
start_relay
progress delivered 150

echo "--- kill -9 of the consumer"
kill -KILL "$(cat "$work/consumer.pid")" 2>/dev/null || echo "   (the consumer was between two runs)"
progress delivered 150

echo "--- pg_ctl stop -m immediate of the cluster, a start 3 s later"
datadir=$(a "SHOW data_directory")
# As the server's owner (pg_ctl refuses root), with the server's own pg_ctl (the one beside its
# postmaster, also for a major of the matrix) and the options it was started with (the
# configuration file pg_virtualenv gave it), as pg_ctl restart would take them.
as_owner=()
[ "$(id -u)" -eq 0 ] && as_owner=(runuser -u "$(stat -c %U "$datadir")" --)
pgctl=$(dirname "$(readlink -f "/proc/$(head -n 1 "$datadir/postmaster.pid")/exe")")/pg_ctl
server_opts=$(sed -E 's/^("[^"]*"|[^ ]*) //' "$datadir/postmaster.opts")
echo "   at $(sent) messages committed in A, $(delivered) deliveries in B ($(positions))"
relay_lines=$(wc -l <"$work/relay.log")
"${as_owner[@]}" "$pgctl" -D "$datadir" stop -m immediate -w >/dev/null
sleep 3
"${as_owner[@]}" "$pgctl" -D "$datadir" start -w -o "$server_opts" -l "$work/server-restart.log" >/dev/null
progress sent 300
progress delivered 300

echo "--- the producers stop; waiting until B has everything"
touch "$work/stop_producers"
for p in "${producers[@]}"; do wait "$p" || { echo "FAIL producer (pid $p) failed"; FAILED=$((FAILED + 1)); }; done
total=$(sent)
end_lsn=$(a "SELECT pg_current_wal_flush_lsn()")
# Until B has every message, or (with a broken part) until the relay confirmed the whole WAL
# and B stopped changing for 5 s.
deadline=$((SECONDS + 120)) last=-1 still=0
while [ $SECONDS -lt $deadline ]; do
  got=$(b "SELECT count(DISTINCT message_id) FROM e2e_got")
  [ "$got" -ge "$total" ] && break
  n=$(delivered)
  if [ "$n" = "$last" ] && [ "$(a "SELECT confirmed_flush_lsn >= '$end_lsn' FROM pg_replication_slots WHERE slot_name = 'whizbang_outbox'")" = t ]; then
    still=$((still + 1)); [ $still -ge 25 ] && break
  else
    still=0
  fi
  last=$n
  sleep 0.2
done
wait_for 60 "$A" "SELECT confirmed_flush_lsn >= '$end_lsn' FROM pg_replication_slots WHERE slot_name = 'whizbang_outbox'" ||
  true  # checked below
touch "$work/stop"
wait "$supervisor" || true

echo "--- checks"
psql -qXtA -d "$A" -c "\\copy e2e_sent TO '$work/a_sent.tsv'"
b "\\copy a_sent FROM '$work/a_sent.tsv'"
touch "$work/rolledback"
b "\\copy a_rolledback FROM '$work/rolledback'"
stats=$("$PY" -c '
import json, sys
t = {}
for p in sys.argv[1:]:
    for k, v in json.loads(open(p).read().splitlines()[-1]).items():
        t[k] = t.get(k, 0) + v
print(" ".join("%s=%d" % kv for kv in sorted(t.items())))' "$work"/producer?.out)
echo "   producers: $stats"
echo "   A: $total messages committed on $(a "SELECT count(DISTINCT stream_id) FROM e2e_sent") streams" \
  "(+ $(a "SELECT count(*) FROM e2e_sent WHERE stream_id IS NULL") without a stream); $(b "SELECT count(*) FROM a_rolledback") rolled back on purpose"
echo "   B: $(b "SELECT count(*) FROM e2e_got") rows; $(delivered) deliveries:" \
  "$(b "SELECT count(*) FILTER (WHERE NOT was_new) FROM e2e_delivery") repeats absorbed by the inbox" \
  "($(b "SELECT count(*) FILTER (WHERE NOT was_new AND redelivered) FROM e2e_delivery") flagged redelivered by the broker," \
  "$(b "SELECT count(*) FILTER (WHERE NOT was_new AND NOT redelivered) FROM e2e_delivery") not: publishes the relay repeated)"
echo "   consumer runs: $(tr '\n' ' ' <"$work/consumer.runs")"
echo "   the relay streamed from: $(grep -o 'streaming slot "whizbang_outbox" from [0-9A-F/]*' "$work/relay.log" | sed 's/.* from //' | tr '\n' ' ')"
check_eq "the producers had no errors but lost connections" "errors=0" "$(grep -o 'errors=[0-9]*' <<<"$stats")"
check_eq "they rolled back whole transactions and savepoints" yes \
  "$([[ $stats =~ rolled_back=[1-9] ]] && [[ $stats =~ savepoints_rolled_back=[1-9] ]] && echo yes || echo no)"
check_eq "they connected again after the restart" yes "$([[ $stats =~ reconnects=[1-9] ]] && echo yes || echo no)"
check_eq "A's seq is each stream's 1..n (the expected order is whole)" 0 \
  "$(a "SELECT count(*) FROM (SELECT seq, row_number() OVER (PARTITION BY stream_id ORDER BY seq) r FROM e2e_sent WHERE stream_id IS NOT NULL) s WHERE seq <> r")"
check_eq "every message committed in A is in B" 0 \
  "$(b "SELECT count(*) FROM a_sent WHERE message_id NOT IN (SELECT message_id FROM e2e_got)")"
check_eq "each of them once" 0 "$(b "SELECT count(*) - count(DISTINCT message_id) FROM e2e_got")"
check_eq "B has nothing else" 0 "$(b "SELECT count(*) FROM e2e_got WHERE message_id NOT IN (SELECT message_id FROM a_sent)")"
check_eq "none of the messages rolled back is in B" 0 \
  "$(b "SELECT count(*) FROM e2e_got WHERE message_id IN (SELECT message_id FROM a_rolledback)")"
check_eq "per stream, B's stream_seq order is A's commit order" 0 "$(b "
  SELECT count(*)
    FROM (SELECT message_id, stream_id, row_number() OVER (PARTITION BY stream_id ORDER BY stream_seq) r
            FROM e2e_got WHERE stream_id IS NOT NULL) g
    JOIN (SELECT message_id, stream_id, row_number() OVER (PARTITION BY stream_id ORDER BY seq) r
            FROM a_sent WHERE stream_id IS NOT NULL) s USING (message_id)
   WHERE g.r <> s.r OR g.stream_id IS DISTINCT FROM s.stream_id")"
check_eq "repeats reached B and the inbox stored none of them (at least the consumer's own crash)" yes \
  "$([ "$(b "SELECT count(*) FILTER (WHERE NOT was_new) FROM e2e_delivery")" -ge 1 ] && echo yes || echo no)"
check_eq "nothing is left in the queue" 0 "$(amqp_admin count e2e.billing)"
check_eq "the relay started after the kill still runs" yes \
  "$([ "$RELAY_PID" != "$first_relay" ] && kill -0 "$RELAY_PID" 2>/dev/null && echo yes || echo no)"
check_eq "it connected again after the server's restart" yes \
  "$(tail -n +"$((relay_lines + 1))" "$work/relay.log" | grep -q 'connecting again' && echo yes || echo no)"
check_eq "its slot is confirmed up to the end of A's WAL" t \
  "$(a "SELECT confirmed_flush_lsn >= '$end_lsn' FROM pg_replication_slots WHERE slot_name = 'whizbang_outbox'")"
kill -TERM "$RELAY_PID"; rc=0; wait "$RELAY_PID" || rc=$?
check_eq "SIGTERM stops it with exit status 0" 0 "$rc"

if [ "$FAILED" -gt 0 ]; then
  echo "relay log (end):"; tail -n 15 "$work/relay.log"
  echo "consumer log (end):"; tail -n 10 "$work/consumer.log"
  cat "$work"/producer?.err
  echo "relay_e2e: $FAILED check(s) failed"
  exit 1
fi
echo "relay_e2e: all checks passed"
