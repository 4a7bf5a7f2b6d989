#!/usr/bin/env bash
# The relay's RabbitMQ sink (issue 32, src/relay/sink_amqp.cpp) against a throw-away
# rabbitmq-server of its own (free ports, its own epmd, data, logs and cookie in a temporary
# directory; stopped on exit, also on failure), through the test driver build/relay/sink_check:
#   a. the default exchange (routing key = Destination = the queue): every message arrives once,
#      in order, its body the emitted JSON, persistent, content_type application/json,
#      message_id = MessageId, type = MessageType, app_id whizbang-relay, the commit time as
#      timestamp, header whizbang-stream-id (no headers for a null StreamId); flushes between
#      groups of messages report every message published so far; 25000 messages in one flush
#      (more than the sink keeps unconfirmed) all arrive;
#   b. ?exchange=NAME: routed through that exchange with routing key = Destination;
#   c. an unroutable message (an exchange without bindings, or no queue of that name on the
#      default exchange) comes back as basic.return: a permanent error (exit 2), not a drop;
#   d. a missing exchange, an unknown option, a wrong password and a missing vhost: permanent
#      errors before anything is published; no broker listening: a transient error;
#   e. the broker stopped (stop_app) between two flushes: a transient error (exit 3), no hang;
#      the same for a broker frozen (SIGSTOP: flush() gives up after WHIZBANG_RELAY_AMQP_TIMEOUT)
#      and for one killed (SIGKILL).
# Needs no PostgreSQL. Runs rabbitmq-server as the calling user (root in CI). Exits non-zero on
# failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../lib/checks.sh
source test/lib/checks.sh
# shellcheck source=../../scripts/lib.sh
source scripts/lib.sh

# shellcheck source=../lib/rabbitmq.sh
source test/lib/rabbitmq.sh
rabbit_prereqs || exit 1

make -s -f src/relay/sinks.mk build/relay/sink_check >/dev/null
DRIVER=$PWD/build/relay/sink_check
"$DRIVER" "amqp://127.0.0.1:1" </dev/null 2>&1 | grep -q 'no sink' && { echo "FAIL sink_check was built without the AMQP sink (librabbitmq-dev)"; exit 1; }

work=$(mktemp -d /tmp/whizbang-relay-rabbitmq.XXXXXX)
chmod 755 "$work"
pids=()
trap 'rabbit_stop; stop_pids_and_remove "$work"' EXIT
rabbit_start "$work" || exit 1
beam_pid=$RABBIT_BEAM_PID

URL=$RABBIT_URL
admin() { amqp_admin "$@"; }
admin queue orders
admin queue events
admin exchange wb.events direct
admin bind events wb.events invoices
admin exchange wb.nowhere direct

# messages FIRST LAST DESTINATION: messages as sink_check reads them; even ones without a stream.
messages() {
  "$PY" - "$@" <<'PY'
import json, sys
first, last, dest = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for i in range(first, last + 1):
    mid = "0190a1b2-c3d4-7e5f-8a9b-%012d" % i
    stream = "0190a1b2-0000-7000-8000-%012d" % i if i % 2 else ""
    body = {"MessageId": mid, "Destination": dest, "MessageType": "Shop.OrderPlaced", "StreamId": stream or None,
            "IsEvent": True, "Scope": None, "Metadata": {"note": "caf\u00e9"}, "Envelope": {"n": i},
            "CreatedAt": "2026-12-07T10:00:00.123456+00:00"}
    print("\t".join([mid, dest, "Shop.OrderPlaced", stream, json.dumps(body, ensure_ascii=False, separators=(",", ":"))]))
PY
}
# q FILE EXPR: a Python expression over `msgs` (the JSON lines of amqp_admin.py drain in FILE)
# and `sent` (the messages' lines in $work/sent).
q() {
  "$PY" - "$1" "$2" "$work/sent" <<'PY'
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
sent = [l.split("\t") for l in open(sys.argv[3], encoding="utf-8").read().splitlines() if l]
print(eval(sys.argv[2]))
PY
}

echo "--- a. the default exchange"
{ messages 1 20 orders; echo; messages 21 50 orders; } >"$work/a.in"
grep -v '^$' "$work/a.in" >"$work/sent"
status=0
"$DRIVER" "$URL" <"$work/a.in" >"$work/a.out" 2>"$work/a.err" || status=$?
check_eq "a: exit status" 0 "$status"
check_eq "a: flushes" "flushed 20 flushed 50" "$(tr '\n' ' ' <"$work/a.out" | sed 's/ $//')"
admin drain orders >"$work/a.got"
check_eq "a: 50 messages" 50 "$(q "$work/a.got" 'len(msgs)')"
check_eq "a: each message once, in order" True "$(q "$work/a.got" '[m["message_id"] for m in msgs] == [s[0] for s in sent]')"
check_eq "a: bodies are the emitted JSON" True "$(q "$work/a.got" '[m["body"] for m in msgs] == [s[4] for s in sent]')"
check_eq "a: default exchange, routing key = Destination" True \
  "$(q "$work/a.got" 'all(m["exchange"] == "" and m["routing_key"] == "orders" for m in msgs)')"
check_eq "a: persistent application/json from whizbang-relay" True \
  "$(q "$work/a.got" 'all(m["delivery_mode"] == 2 and m["content_type"] == "application/json" and m["app_id"] == "whizbang-relay" for m in msgs)')"
check_eq "a: type = MessageType, timestamp = commit time" True \
  "$(q "$work/a.got" 'all(m["type"] == "Shop.OrderPlaced" and m["timestamp"] == 1800000000 for m in msgs)')"
check_eq "a: whizbang-stream-id header when there is a stream, no headers without" True \
  "$(q "$work/a.got" 'all((m["headers"] or {}) == ({"whizbang-stream-id": s[3]} if s[3] else {}) for m, s in zip(msgs, sent))')"
check_eq "a: the queue is empty now" 0 "$(admin drain orders | wc -l)"

echo "--- a2. a large transaction: 25000 messages in one flush"
messages 1 25000 orders >"$work/a2.in"
status=0
"$DRIVER" "$URL" <"$work/a2.in" >"$work/a2.out" 2>"$work/a2.err" || status=$?
check_eq "a2: exit status" 0 "$status"
check_eq "a2: one flush of 25000" "flushed 25000" "$(cat "$work/a2.out")"
check_eq "a2: 25000 messages in the queue" 25000 "$(admin count orders)"
admin purge orders

echo "--- b. through an exchange"
messages 51 60 invoices >"$work/b.in"
cp "$work/b.in" "$work/sent"
status=0
"$DRIVER" "$URL?exchange=wb.events" <"$work/b.in" >"$work/b.out" 2>"$work/b.err" || status=$?
check_eq "b: exit status" 0 "$status"
admin drain events >"$work/b.got"
check_eq "b: each message once, in order" True "$(q "$work/b.got" '[m["message_id"] for m in msgs] == [s[0] for s in sent]')"
check_eq "b: exchange wb.events, routing key = Destination" True \
  "$(q "$work/b.got" 'all(m["exchange"] == "wb.events" and m["routing_key"] == "invoices" for m in msgs)')"

echo "--- c. unroutable messages are errors"
status=0
"$DRIVER" "$URL?exchange=wb.nowhere" <"$work/b.in" >"$work/c.out" 2>"$work/c.err" || status=$?
check_eq "c: exchange without bindings: exit status 2 (permanent)" 2 "$status"
check_eq "c: exchange without bindings: the error says returned, NO_ROUTE and names the message" 1 \
  "$(grep -c 'permanent SinkError: .*returned as unroutable (basic.return 312 NO_ROUTE) from exchange "wb.nowhere".*message 0190a1b2-c3d4-7e5f-8a9b-000000000051' "$work/c.err" || true)"
check_eq "c: exchange without bindings: never flushed" "" "$(cat "$work/c.out")"
status=0
messages 1 1 no.such.queue >"$work/c2.in"
"$DRIVER" "$URL" <"$work/c2.in" >"$work/c2.out" 2>"$work/c2.err" || status=$?
check_eq "c: default exchange, no such queue: exit status 2" 2 "$status"
check_eq "c: default exchange, no such queue: NO_ROUTE" 1 "$(grep -c 'basic.return 312 NO_ROUTE' "$work/c2.err" || true)"

echo "--- d. configuration errors"
# expect_permanent NAME URI PATTERN: exit status 2 with PATTERN in the error.
expect_permanent() {
  local status=0
  messages 1 1 orders >"$work/one.in"
  "$DRIVER" "$2" <"$work/one.in" >/dev/null 2>"$work/d-$1.err" || status=$?
  check_eq "d: $1: exit status 2" 2 "$status"
  check_eq "d: $1: the error says why" 1 "$(grep -c "permanent SinkError: .*$3" "$work/d-$1.err" || true)"
  check_eq "d: $1: the password is not shown" 0 "$(grep -c 'guest:guest\|:wrong@' "$work/d-$1.err" || true)"
}
expect_permanent "missing exchange" "$URL?exchange=no.such.exchange" "404 NOT_FOUND"
expect_permanent "unknown option" "$URL?exchnage=wb.events" 'unknown option "exchnage"'
expect_permanent "wrong password" "amqp://guest:wrong@127.0.0.1:$RABBITMQ_NODE_PORT/%2F" "403 ACCESS_REFUSED"
expect_permanent "missing vhost" "amqp://guest:guest@127.0.0.1:$RABBITMQ_NODE_PORT/no-such-vhost" "530 NOT_ALLOWED"
check_eq "d: nothing was published meanwhile" 0 "$(admin drain orders | wc -l)"
closed_port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
status=0
"$DRIVER" "amqp://guest:guest@127.0.0.1:$closed_port" <"$work/one.in" >/dev/null 2>"$work/d-refused.err" || status=$?
check_eq "d: no broker listening: exit status 3 (transient)" 3 "$status"
check_eq "d: no broker listening: the error says so" 1 "$(grep -c 'transient SinkError: .*cannot connect' "$work/d-refused.err" || true)"

# run_until_flushed NAME: starts the driver on a FIFO, sends messages 1..5 and an empty line and
# waits for "flushed 5"; the caller then breaks the broker and calls finish_run NAME.
run_until_flushed() {
  mkfifo "$work/$1.fifo"
  "$DRIVER" "$URL" <"$work/$1.fifo" >"$work/$1.out" 2>"$work/$1.err" &
  driver=$!
  pids+=("$driver")
  exec 7>"$work/$1.fifo"
  { messages 1 5 orders; echo; } >&7
  for _ in $(seq 1 600); do grep -q 'flushed 5' "$work/$1.out" && break; sleep 0.1; done
  check_eq "e: $1: the first flush returned" "flushed 5" "$(cat "$work/$1.out")"
}
# finish_run NAME: sends messages 6..10 and ends the input; the driver must end on its own.
finish_run() {
  messages 6 10 orders >&7 2>/dev/null || true  # the driver may be gone already
  exec 7>&-
  local status=0
  for _ in $(seq 1 900); do kill -0 "$driver" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$driver" 2>/dev/null; then
    echo "FAIL e: $1: the driver still runs 90 s after the broker went away (a hang)"
    FAILED=$((FAILED + 1))
    kill "$driver"
  fi
  wait "$driver" || status=$?
  check_eq "e: $1: exit status 3 (transient)" 3 "$status"
  check_eq "e: $1: a transient SinkError" 1 "$(grep -c 'transient SinkError' "$work/$1.err" || true)"
}

echo "--- e. the broker goes away mid-run"
admin drain orders >/dev/null
run_until_flushed stop_app
"$RABBIT_BIN/rabbitmqctl" stop_app >"$work/log/stop_app.out" 2>&1
finish_run stop_app
"$RABBIT_BIN/rabbitmqctl" start_app >"$work/log/start_app.out" 2>&1
check_eq "e: stop_app: the confirmed messages are in the queue" 5 "$(admin drain orders | wc -l)"
# A broker that stops answering without closing anything (a network partition, a frozen host):
# the publishes go into the socket's buffer, and flush() gives up after
# WHIZBANG_RELAY_AMQP_TIMEOUT instead of waiting for confirms for ever.
WHIZBANG_RELAY_AMQP_TIMEOUT=3 run_until_flushed frozen
kill -STOP "$beam_pid"
finish_run frozen
kill -CONT "$beam_pid"
check_eq "e: frozen: flush() gave up waiting for the confirms" 1 "$(grep -c 'did not confirm 5 message(s) within 3s' "$work/frozen.err" || true)"
run_until_flushed kill
kill -KILL "$beam_pid"
finish_run kill

echo "(the errors of e: $(cat "$work/stop_app.err" "$work/frozen.err" "$work/kill.err" | tr '\n' ' '))"
if [ "$FAILED" -ne 0 ]; then
  echo "relay_rabbitmq: $FAILED check(s) failed; driver stderr:"
  tail -n 3 "$work"/*.err
  exit 1
fi
echo "relay_rabbitmq: all checks passed"
