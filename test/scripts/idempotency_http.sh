#!/usr/bin/env bash
# End-to-end test of examples/idempotency_http.py, the "Idempotency-Key" payments endpoint
# built on whizbang's handler idempotency keys (in-transaction mode). In a throw-away cluster
# it creates the extension and the payments table, starts the example server on a free
# localhost port and checks, counting rows in payments (the external action):
#   - the same key twice: one payment; the second answer is a replay with an identical body;
#   - the same key with a different body: 422, no payment; the same body re-ordered: replay;
#   - 8 concurrent requests with one new key: exactly one payment, one 201, the rest replays
#     (or 409 while in progress), every replay identical to the 201 body;
#   - scopes per caller: another caller's same key is a separate payment;
#   - a key held by a lease-mode claim: 409; a key whose result expired: 409 with an
#     explanation and no payment; missing / oversized key, bad auth, foreign tenant: 4xx.
# Expects whizbang to be installed already (./scripts/test does that). Exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${1:-}" != "--in-cluster" ]; then
  exec pg_virtualenv -t -o fsync=off bash -c "bash '$PWD/test/scripts/idempotency_http.sh' --in-cluster"
fi

# ----------------------------------------------------------------------------------------
# Inside the cluster (PG* variables point at it)
# ----------------------------------------------------------------------------------------
PY=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import psycopg2' 2>/dev/null; then PY=$candidate; break; fi
done
[ -n "$PY" ] || { echo "no python3 with psycopg2 found (Debian: python3-psycopg2)"; exit 1; }

work=$(mktemp -d /tmp/whizbang-idem-http.XXXXXX)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

psql -qX -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION whizbang;
CREATE TABLE payments (
    id              bigserial PRIMARY KEY,
    caller          text        NOT NULL,
    idempotency_key text        NOT NULL,
    amount_cents    bigint      NOT NULL CHECK (amount_cents > 0),
    currency        text        NOT NULL,
    recipient       text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
-- carol's results expire after 1 second (the replay-after-retention case), tombstone 1 day.
INSERT INTO whizbang.wh_idempotency_policies (scope, default_result_ttl, min_result_ttl, tombstone_ttl, description)
VALUES ('payments:carol', '1 second', '1 second', '1 day', 'test: short result retention');
SQL

port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
PAYMENTS_API_KEYS="key-alice:alice,key-bob:bob,key-carol:carol" \
  "$PY" examples/idempotency_http.py "$port" >"$work/server.log" 2>&1 &
server_pid=$!

cat >"$work/client.py" <<'PY'
import json, sys, threading, time, urllib.error, urllib.request
import psycopg2

BASE = "http://127.0.0.1:%s" % sys.argv[1]
db = psycopg2.connect("")
db.autocommit = True
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def post(key, body, api_key="key-alice", raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if api_key is not None:
        headers["Authorization"] = "Bearer " + api_key
    if key is not None:
        headers["Idempotency-Key"] = key
    req = urllib.request.Request(BASE + "/payments", data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def payments(caller, key):
    with db.cursor() as c:
        c.execute("SELECT count(*) FROM payments WHERE caller = %s AND idempotency_key = %s", (caller, key))
        return c.fetchone()[0]


# Wait for the server.
for _ in range(100):
    try:
        with urllib.request.urlopen(BASE + "/healthz", timeout=2) as r:
            if r.status == 200:
                break
    except OSError:
        time.sleep(0.1)
else:
    print("server did not start"); sys.exit(1)

pay = {"amount_cents": 1250, "currency": "EUR", "recipient": "acct-42"}

# 1. The same key twice: one payment, the second answer is a replay with an identical body.
s1, h1, b1 = post("order-1001", pay)
check(s1 == 201, "first request: 201 Created (got %s %s)" % (s1, b1[:200]))
first = json.loads(b1) if s1 == 201 else {}
check(first.get("status") == "created" and first.get("amount_cents") == 1250, "first request: the payment is in the body")
check("Idempotent-Replayed" not in h1, "first request: not marked as a replay")
s2, h2, b2 = post("order-1001", pay)
check(s2 == 200, "same key again: 200 (got %s)" % s2)
check(h2.get("Idempotent-Replayed") == "true", "same key again: Idempotent-Replayed: true")
check(b2 == b1, "same key again: the replayed body is byte-identical to the first")
check(payments("alice", "order-1001") == 1, "same key twice: exactly one payment row")

# 2. Same key, different body: 422 and no payment. Same body, other key order: replay.
s3, _, b3 = post("order-1001", dict(pay, amount_cents=99999))
check(s3 == 422, "same key, different amount: 422 (got %s %s)" % (s3, b3[:200]))
reordered = b'{ "recipient": "acct-42", "currency": "EUR", "amount_cents": 1250 }'
s4, h4, b4 = post("order-1001", None, raw=reordered)
check(s4 == 200 and b4 == b1 and h4.get("Idempotent-Replayed") == "true",
      "same body with other key order and spacing: replay (got %s)" % s4)
check(payments("alice", "order-1001") == 1, "after conflict and replay: still one payment row")

# 3. 8 concurrent requests with one new key: exactly one payment.
results = [None] * 8
barrier = threading.Barrier(8)
def worker(i):
    barrier.wait()
    results[i] = post("order-2002", dict(pay, amount_cents=500))
threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
statuses = sorted(r[0] for r in results)
print("     concurrent statuses:", statuses, flush=True)
check(all(s in (200, 201, 409) for s in statuses), "concurrent: every answer is 201, 200 or 409")
check(statuses.count(201) == 1, "concurrent: exactly one 201")
created = [r[2] for r in results if r[0] == 201]
replays = [r for r in results if r[0] == 200]
check(all(r[1].get("Idempotent-Replayed") == "true" for r in replays), "concurrent: every 200 is marked as a replay")
check(bool(created) and all(r[2] == created[0] for r in replays), "concurrent: every replay equals the 201 body")
check(payments("alice", "order-2002") == 1, "concurrent: exactly one payment row")

# 4. Scope per caller: bob's "order-1001" is his own payment.
s5, _, _ = post("order-1001", pay, api_key="key-bob")
check(s5 == 201, "another caller, same key: 201, a separate scope (got %s)" % s5)
check(payments("bob", "order-1001") == 1 and payments("alice", "order-1001") == 1, "one payment per caller")

# 5. A key held in progress by another worker (a lease-mode claim that committed): 409.
with db.cursor() as c:
    c.execute("SELECT outcome FROM whizbang.idempotency_begin('payments:alice', 'order-3003', "
              "whizbang.fingerprint(%s::jsonb), p_owner => 'batch-worker')", (json.dumps(pay),))
    check(c.fetchone()[0] == "claimed", "setup: another worker holds order-3003 in lease mode")
s6, h6, b6 = post("order-3003", pay)
check(s6 == 409 and h6.get("Retry-After") == "1", "key in progress elsewhere: 409 with Retry-After (got %s %s)" % (s6, b6[:200]))
check(payments("alice", "order-3003") == 0, "key in progress elsewhere: no payment")

# 6. Replay after retention: carol's results expire after 1 s; the key answers expired_duplicate.
s7, _, _ = post("order-4004", pay, api_key="key-carol")
check(s7 == 201, "carol: first request 201 (got %s)" % s7)
time.sleep(1.3)
s8, _, b8 = post("order-4004", pay, api_key="key-carol")
msg = json.loads(b8).get("error", "") if b8 else ""
check(s8 == 409 and "expired" in msg and "not made again" in msg,
      "after the result TTL: 409 explaining the response expired (got %s %s)" % (s8, msg))
check(payments("carol", "order-4004") == 1, "after the result TTL: still one payment")

# 7. Bad requests.
s, _, _ = post(None, pay)
check(s == 400, "no Idempotency-Key: 400 (got %s)" % s)
s, _, _ = post("", pay)
check(s == 400, "empty Idempotency-Key: 400 (got %s)" % s)
s, _, _ = post("k" * 256, pay)
check(s == 400, "256-byte Idempotency-Key: 400 (got %s)" % s)
s, _, _ = post("k" * 255, pay)
check(s == 201, "255-byte Idempotency-Key: 201 (got %s)" % s)
s, _, _ = post("order-5005", pay, api_key=None)
check(s == 401, "no API key: 401 (got %s)" % s)
s, _, _ = post("order-5005", pay, api_key="key-mallory")
check(s == 401, "unknown API key: 401 (got %s)" % s)
s, _, _ = post("order-5005", dict(pay, tenant="bob"))
check(s == 403, "body names another tenant: 403 (got %s)" % s)
s, _, _ = post("order-5005", None, raw=b"{not json")
check(s == 400, "malformed JSON: 400 (got %s)" % s)
s, _, _ = post("order-5005", dict(pay, amount_cents=-5))
check(s == 400, "negative amount: 400 (got %s)" % s)
check(payments("alice", "order-5005") == 0, "bad requests made no payment")

with db.cursor() as c:
    c.execute("SELECT count(*) FROM payments")
    total = c.fetchone()[0]
check(total == 5, "payments in total: 5 (alice 1001, 2002, the 255-byte key; bob 1001; carol 4004) - got %d" % total)

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
PY

status=0
"$PY" "$work/client.py" "$port" || status=$?
if [ "$status" -ne 0 ]; then
  echo "---- server log ----"
  cat "$work/server.log"
fi
exit "$status"
