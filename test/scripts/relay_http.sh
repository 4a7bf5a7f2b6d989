#!/usr/bin/env bash
# The relay's HTTP sink (issue 32, src/relay/sink_http.cpp) against a recording web server
# (test/lib/http_sink_stub.py), through the test driver build/relay/sink_check:
#   a. every message is POSTed once, in order, over one kept-alive connection, to the URL as
#      given (its query string included), the body exactly the emitted JSON, with Content-Type
#      application/json, Idempotency-Key = MessageId and the Whizbang-Destination /
#      -Message-Type / -Stream-Id headers (no stream header for a null StreamId; values outside
#      printable ASCII percent-encoded, so a CR LF cannot start a header of its own);
#   b. 500, 429 (with Retry-After) and dropped connections are retried with the same message
#      and Idempotency-Key, and the next message goes only after the 2xx (libcurl itself resends
#      once at once when a reused connection turns out dead: the second drop, on a fresh
#      connection, is the sink's to retry);
#   c. a 400 stops the sink: a permanent error (exit 2) naming the message, and the messages
#      after it are never sent;
#   d. retries end after WHIZBANG_RELAY_HTTP_ATTEMPTS as a transient error (exit 3), and a
#      server that is not listening is a transient error too;
#   e. flush() does not return before the 2xx: while the server holds the answer back, the
#      driver has not printed "flushed"; once the answer goes, it does;
#   f. a malformed option in the environment is a permanent error before anything is sent;
#   g. user:password in the URI is sent as basic authentication and never logged;
#   h. a 200 KB body arrives whole, without "Expect: 100-continue".
# Needs no PostgreSQL. Exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../lib/checks.sh
source test/lib/checks.sh

make -s -f src/relay/sinks.mk build/relay/sink_check >/dev/null
DRIVER=$PWD/build/relay/sink_check
"$DRIVER" "http://127.0.0.1:1/" </dev/null 2>&1 | grep -q 'no sink' && { echo "FAIL sink_check was built without the HTTP sink (libcurl4-openssl-dev)"; exit 1; }

work=$(mktemp -d /tmp/whizbang-relay-http.XXXXXX)
pids=()
trap 'stop_pids_and_remove "$work"' EXIT

# start_stub NAME [stub options…]: a stub logging to $work/NAME.log; sets PORT.
start_stub() {
  local name=$1
  shift
  python3 test/lib/http_sink_stub.py --port-file "$work/$name.port" --log "$work/$name.log" "$@" &
  pids+=($!)
  for _ in $(seq 1 200); do [ -s "$work/$name.port" ] && break; sleep 0.05; done
  PORT=$(cat "$work/$name.port")
  touch "$work/$name.log"
}
# logq NAME EXPR: a Python expression over `reqs`, the list of requests NAME's stub recorded.
logq() {
  python3 - "$work/$1.log" "$2" <<'PY'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
print(eval(sys.argv[2]))
PY
}
# messages N [destination]: N messages as sink_check reads them (id, destination, type, stream,
# JSON); every second one without a stream.
messages() {
  python3 - "$@" <<'PY'
import json, sys
n = int(sys.argv[1]); dest = sys.argv[2] if len(sys.argv) > 2 else "orders"
for i in range(1, n + 1):
    mid = "0190a1b2-c3d4-7e5f-8a9b-%012d" % i
    stream = "0190a1b2-0000-7000-8000-%012d" % i if i % 2 else ""
    body = {"MessageId": mid, "Destination": dest, "MessageType": "Shop.OrderPlaced", "StreamId": stream or None,
            "IsEvent": True, "Scope": None, "Metadata": {"note": "caf\u00e9 \"quoted\""}, "Envelope": {"n": i},
            "CreatedAt": "2026-12-07T10:00:00.123456+00:00"}
    esc = dest.replace("\\", "\\\\").replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n")
    print("\t".join([mid, esc, "Shop.OrderPlaced", stream, json.dumps(body, ensure_ascii=False, separators=(",", ":"))]))
PY
}

echo "--- a. headers, bodies, order, one connection"
start_stub a
messages 3 $'orders\r\nX-Evil: 1 é' >"$work/a.in"
status=0
"$DRIVER" "http://127.0.0.1:$PORT/hooks/whizbang?tenant=a&x=%20" <"$work/a.in" >"$work/a.out" 2>"$work/a.err" || status=$?
check_eq "a: exit status" 0 "$status"
check_eq "a: flush returned after the 3 messages" "flushed 3" "$(cat "$work/a.out")"
check_eq "a: 3 requests" 3 "$(logq a 'len(reqs)')"
check_eq "a: all POST to the URL with its query string" "True" \
  "$(logq a 'all(r["method"] == "POST" and r["path"] == "/hooks/whizbang?tenant=a&x=%20" for r in reqs)')"
check_eq "a: bodies are the emitted JSON, in order" "True" \
  "$(logq a "[r['body'] for r in reqs] == [l.split('\t', 4)[4] for l in open('$work/a.in', encoding='utf-8').read().splitlines()]")"
check_eq "a: Content-Type application/json" "True" "$(logq a 'all(r["headers"]["content-type"] == "application/json" for r in reqs)')"
check_eq "a: Idempotency-Key is the MessageId" "True" \
  "$(logq a 'all(r["headers"]["idempotency-key"] == __import__("json").loads(r["body"])["MessageId"] for r in reqs)')"
check_eq "a: Whizbang-Message-Type" "True" "$(logq a 'all(r["headers"]["whizbang-message-type"] == "Shop.OrderPlaced" for r in reqs)')"
check_eq "a: Whizbang-Destination percent-encoded, no injected header" "True" \
  "$(logq a 'all(r["headers"]["whizbang-destination"] == "orders%0D%0AX-Evil: 1 %C3%A9" and "x-evil" not in r["headers"] for r in reqs)')"
check_eq "a: Whizbang-Stream-Id when there is a stream, none for null" "['0190a1b2-0000-7000-8000-000000000001', None, '0190a1b2-0000-7000-8000-000000000003']" \
  "$(logq a '[r["headers"].get("whizbang-stream-id") for r in reqs]')"
check_eq "a: one kept-alive connection" 1 "$(logq a 'len({r["client_port"] for r in reqs})')"

echo "--- b. 500, 429 with Retry-After and a dropped connection are retried"
start_stub b --plan "500,429:1,drop,drop"
messages 2 >"$work/b.in"
status=0
"$DRIVER" "http://127.0.0.1:$PORT/in" <"$work/b.in" >"$work/b.out" 2>"$work/b.err" || status=$?
check_eq "b: exit status" 0 "$status"
check_eq "b: flushed" "flushed 2" "$(cat "$work/b.out")"
check_eq "b: answers seen" "['500', '429:1', 'drop', 'drop', '200', '200']" "$(logq b '[r["answer"] for r in reqs]')"
check_eq "b: the first message five times with one Idempotency-Key, then the second" \
  "$(printf '0190a1b2-c3d4-7e5f-8a9b-000000000001 %.0s' 1 2 3 4 5)0190a1b2-c3d4-7e5f-8a9b-000000000002" \
  "$(logq b '" ".join(r["headers"]["idempotency-key"] for r in reqs)')"
check_eq "b: retried bodies are identical" 1 "$(logq b 'len({r["body"] for r in reqs[:5]})')"
check_eq "b: the empty answer was retried by the sink" 1 "$(grep -c 'Server returned nothing.*next in' "$work/b.err" || true)"
check_eq "b: the 429's Retry-After was honoured" 1 "$(grep -c 'HTTP 429.*attempt 2 of 10, next in 1.0s' "$work/b.err" || true)"

echo "--- c. 400 stops with a permanent error"
start_stub c --plan "200,400"
messages 3 >"$work/c.in"
status=0
"$DRIVER" "http://127.0.0.1:$PORT/in" <"$work/c.in" >"$work/c.out" 2>"$work/c.err" || status=$?
check_eq "c: exit status 2 (permanent)" 2 "$status"
check_eq "c: the error names the refused message and the status" 1 \
  "$(grep -c 'permanent SinkError: .*message 0190a1b2-c3d4-7e5f-8a9b-000000000002 .*HTTP 400' "$work/c.err" || true)"
check_eq "c: nothing after the refused message was sent" 2 "$(logq c 'len(reqs)')"
check_eq "c: never flushed" "" "$(cat "$work/c.out")"

echo "--- d. retries end as a transient error"
start_stub d --plan "503,503,503,503"
messages 1 >"$work/d.in"
status=0
WHIZBANG_RELAY_HTTP_ATTEMPTS=2 "$DRIVER" "http://127.0.0.1:$PORT/in" <"$work/d.in" >"$work/d.out" 2>"$work/d.err" || status=$?
check_eq "d: exit status 3 (transient)" 3 "$status"
check_eq "d: exactly WHIZBANG_RELAY_HTTP_ATTEMPTS requests" 2 "$(logq d 'len(reqs)')"
check_eq "d: the error says why" 1 "$(grep -c 'transient SinkError: .*HTTP 503.*after 2 attempt' "$work/d.err" || true)"
closed_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
status=0
WHIZBANG_RELAY_HTTP_ATTEMPTS=2 "$DRIVER" "http://127.0.0.1:$closed_port/in" <"$work/d.in" >/dev/null 2>"$work/d2.err" || status=$?
check_eq "d: nobody listening: exit status 3 (transient)" 3 "$status"
check_eq "d: nobody listening: the error says so" 1 "$(grep -ci 'transient SinkError: .*connect' "$work/d2.err" || true)"

echo "--- e. flush() waits for the 2xx"
start_stub e --hold "1:$work/e.gate"
messages 1 >"$work/e.in"
"$DRIVER" "http://127.0.0.1:$PORT/in" <"$work/e.in" >"$work/e.out" 2>"$work/e.err" &
driver=$!
pids+=("$driver")
for _ in $(seq 1 400); do [ "$(logq e 'len(reqs)')" = 1 ] && break; sleep 0.05; done
check_eq "e: the server has the request" 1 "$(logq e 'len(reqs)')"
# The answer is held back: whatever the driver did so far, it cannot have flushed.
check_eq "e: no flush while the answer is held back" "" "$(cat "$work/e.out")"
check_eq "e: the driver is still waiting" yes "$(kill -0 "$driver" 2>/dev/null && echo yes || echo no)"
touch "$work/e.gate"
status=0
wait "$driver" || status=$?
check_eq "e: exit status after the answer" 0 "$status"
check_eq "e: flushed once answered" "flushed 1" "$(cat "$work/e.out")"

echo "--- f. a malformed option"
status=0
WHIZBANG_RELAY_HTTP_TIMEOUT=soon "$DRIVER" "http://127.0.0.1:$PORT/in" <"$work/e.in" >/dev/null 2>"$work/f.err" || status=$?
check_eq "f: exit status 2 (permanent)" 2 "$status"
check_eq "f: the error names the variable" 1 "$(grep -c 'WHIZBANG_RELAY_HTTP_TIMEOUT="soon"' "$work/f.err" || true)"
check_eq "f: nothing was sent" 1 "$(logq e 'len(reqs)')"

echo "--- g. credentials in the URI"
start_stub g --plan "503"
status=0
"$DRIVER" "http://relay:s3cret@127.0.0.1:$PORT/in" <"$work/e.in" >/dev/null 2>"$work/g.err" || status=$?
check_eq "g: exit status" 0 "$status"
check_eq "g: sent as basic authentication" "Basic $(printf 'relay:s3cret' | base64)" "$(logq g 'reqs[-1]["headers"].get("authorization")')"
check_eq "g: the retry's log line hides the password" "1 0" \
  "$(grep -c 'relay:\*\*\*@' "$work/g.err" || true) $(grep -c 's3cret' "$work/g.err" || true)"

echo "--- h. a large body"
start_stub h
python3 -c '
import json
big = json.dumps({"MessageId": "0190a1b2-c3d4-7e5f-8a9b-00000000000b", "Envelope": {"blob": "x" * 200000}}, separators=(",", ":"))
print("\t".join(["0190a1b2-c3d4-7e5f-8a9b-00000000000b", "orders", "Big", "", big]))' >"$work/h.in"
status=0
"$DRIVER" "http://127.0.0.1:$PORT/in" <"$work/h.in" >/dev/null 2>"$work/h.err" || status=$?
check_eq "h: exit status" 0 "$status"
check_eq "h: the body arrived whole" True "$(logq h "reqs[0]['body'] == open('$work/h.in').read().rstrip('\n').split('\t', 4)[4]")"
check_eq "h: no Expect: 100-continue" None "$(logq h 'reqs[0]["headers"].get("expect")')"

if [ "$FAILED" -ne 0 ]; then
  echo "relay_http: $FAILED check(s) failed; driver stderr:"
  tail -n 5 "$work"/*.err
  exit 1
fi
echo "relay_http: all checks passed"
