#!/usr/bin/env python3
"""One worker down (test/citus/node_down.sh, issue 22: a node down is a node down). Prints
"ok   ..." / "FAIL ..." lines and "N failed".

    node_down.py DSN WORKER1_PORT WORKER2_PORT STOP_CMD START_CMD

With worker 2 stopped: stores and claims of worker 1's partitions go on; a claim without
partitions takes worker 1's messages and says (NOTICE) that it could not reach a node;
completions of messages a session claimed reach worker 1 only and succeed (from any session
when whizbang is preloaded: whizbang.remembered_claims); stats() counts the
unreachable node (nodes_unreachable) and leaves the key metrics NULL; a store that needs
worker 2 fails with a connection error (08006) and writes nothing. After the restart worker 2's
messages are all there.
"""
import json
import subprocess
import sys
import time
import uuid

import psycopg2

import checks
from checks import check, connect, one, rows

DSN, W1, W2, STOP, START = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
COUNT = 64
checks.init(DSN)


def port_of_partition(p):
    return rows("SELECT nodeport FROM pg_catalog.pg_dist_shard_placement WHERE shardid ="
                " pg_catalog.get_shard_id_for_distribution_column('whizbang.wh_inbox', %s)", (p,))[0][0]


on = {W1: [], W2: []}
for p in range(COUNT):
    on[port_of_partition(p)].append(p)
check("both workers hold some of the 64 partitions", on[W1] and on[W2], on)


def ids_on(port, n):
    out = []
    while len(out) < n:
        m = str(uuid.uuid4())
        if rows("SELECT whizbang.partition_of(%s::uuid, %s)", (m, COUNT))[0][0] in on[port]:
            out.append(m)
    return out


def batch(ids):
    return json.dumps([{"MessageId": m, "HandlerName": "h", "MessageType": "t", "Envelope": {}} for m in ids])


def receive(conn, ids):
    return [r[0] for r in rows("SELECT outcome FROM whizbang.inbox_receive(%s::jsonb, 'nd', now(), %s)",
                               (batch(ids), COUNT), conn)]


def claim(conn, partitions, n=1000):
    notices_before = len(conn.notices)
    got = rows("SELECT message_id::text, lease_token FROM whizbang.claim_work(%s, 'inbox', %s, 300, %s, %s, 1000,"
               " now(), 'nd')", (str(uuid.uuid4()), n, partitions, COUNT), conn)
    return got, conn.notices[notices_before:]


first1, first2 = ids_on(W1, 20), ids_on(W2, 20)
check("before: 40 messages stored on both workers", receive(checks.admin(), first1 + first2) == ["new"] * 40)
worker = connect()
held, _ = claim(worker, on[W1], 10)
check("before: a worker claims 10 of worker 1's messages", len(held) == 10, len(held))

subprocess.run(STOP, shell=True, check=True)
later1 = ids_on(W1, 10)
try:
    outcome = receive(connect(), later1)
except psycopg2.Error as e:
    outcome = str(e)
check("worker 2 down: a store of worker 1's partitions goes on", outcome == ["new"] * 10, outcome)
try:
    more, _ = claim(connect(), on[W1], 5)  # a session of its own, left open
except psycopg2.Error as e:
    more = str(e)
check("worker 2 down: a claim of worker 1's partitions goes on", isinstance(more, list) and len(more) == 5, more)
try:
    c = connect()
    anywhere, notices = claim(c, None)
except psycopg2.Error as e:
    anywhere, notices = str(e), []
check("worker 2 down: a claim without partitions takes worker 1's messages",
      isinstance(anywhere, list) and len(anywhere) == 20 + 10 - 10 - 5, anywhere if not isinstance(anywhere, list) else len(anywhere))
check("worker 2 down: and says it could not reach a node (NOTICE)",
      any("could not reach 1 of 2 nodes" in n for n in notices), notices)
try:
    done = rows("SELECT outcome FROM whizbang.complete_work('inbox', %s::uuid[], %s::bigint[], 'nd')",
                ([h[0] for h in held], [h[1] for h in held]), worker)
    done = [d[0] for d in done]
except psycopg2.Error as e:
    done = str(e)
check("worker 2 down: the worker completes the 10 it claimed (worker 1 only)", done == ["completed"] * 10, done)
# Another session than the claim's (a pool, a pooler): with the library preloaded the server
# remembers the claim's partitions for every session (whizbang.remembered_claims); without it
# only the claiming session does, and the other's call goes to every node.
shared_memory = one("SELECT current_setting('whizbang.remembered_claims', true) IS NOT NULL")
try:
    other = rows("SELECT outcome FROM whizbang.complete_work('inbox', %s::uuid[], %s::bigint[], 'nd')",
                 ([m[0] for m in more], [m[1] for m in more]), connect())
    other = [o[0] for o in other]
except psycopg2.Error as e:
    other = e.pgcode
if shared_memory:
    check("worker 2 down: another session completes the 5 a session claimed (remembered by the server)",
          other == ["completed"] * 5, other)
else:
    check("worker 2 down, not preloaded: another session's completion needs every node (08006)",
          other == "08006", other)
try:
    metrics = dict(rows("SELECT metric, value FROM whizbang.stats()", None, connect()))
except psycopg2.Error as e:
    metrics = {"error": str(e)}
check("worker 2 down: stats() answers and counts the unreachable node (nodes_unreachable = 1)",
      metrics.get("nodes_unreachable") == 1 and metrics.get("dedup_rows", 0) is None, metrics)
try:
    receive(connect(), ids_on(W2, 1))
    code = None
except psycopg2.Error as e:
    code = e.pgcode
check("worker 2 down: a store that needs worker 2 fails with a connection error (08006)", code == "08006", code)

subprocess.run(START, shell=True, check=True)
# A connection cached before the restart fails once (Citus drops it then): a new session, retried.
for attempt in range(10):
    try:
        rows("SELECT pg_catalog.recover_prepared_transactions()", None, checks.admin(fresh=True))
        break
    except psycopg2.Error:
        time.sleep(0.5)
again = receive(checks.admin(), first1 + first2 + later1)
check("after the restart: every acknowledged message is on record", again == ["duplicate"] * 50, again)
left = rows("SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'nd'")[0][0]
metrics = dict(rows("SELECT metric, value FROM whizbang.stats()"))
check("after the restart: stats() reaches every node (nodes_unreachable = 0)",
      metrics.get("nodes_unreachable") == 0 and metrics.get("dedup_rows") is not None, metrics)
completed = 10 + (5 if shared_memory else 0)
check(f"after the restart: {50 - completed} messages wait (50 stored, {completed} completed)", left == 50 - completed, left)
# One message id delivered to two consumers lands in two partitions (its stream's for one of
# them), here on the two workers: a completion from another session than the claims' reaches the
# consumer's own row (the server's memory of claims tells consumers apart).
x, stream2 = ids_on(W1, 1)[0], ids_on(W2, 1)[0]
for consumer, extra in (("ca", {}), ("cb", {"StreamId": stream2})):
    rows("SELECT count(*) FROM whizbang.inbox_receive(%s::jsonb, %s, now(), %s)",
         (json.dumps([dict({"MessageId": x, "HandlerName": "h", "MessageType": "t", "Envelope": {}}, **extra)]),
          consumer, COUNT))
held_a = rows("SELECT message_id::text, lease_token FROM whizbang.claim_work(%s, 'inbox', 10, 300, %s, %s, 1000, now(), 'ca')",
              (str(uuid.uuid4()), on[W1], COUNT), connect())
held_b = rows("SELECT message_id::text, lease_token FROM whizbang.claim_work(%s, 'inbox', 10, 300, %s, %s, 1000, now(), 'cb')",
              (str(uuid.uuid4()), on[W2], COUNT), connect())
check("one id, two consumers: each consumer's claim takes its own row (one on each worker)",
      [h[0] for h in held_a] == [x] and [h[0] for h in held_b] == [x], (held_a, held_b))
try:
    done_a = [r[0] for r in rows("SELECT outcome FROM whizbang.complete_work('inbox', %s::uuid[], %s::bigint[], 'ca')",
                                 ([x], [held_a[0][1]] if held_a else [0]), connect())]
except psycopg2.Error as e:
    done_a = str(e)
check("one id, two consumers: another session completes consumer ca's row (not consumer cb's)", done_a == ["completed"],
      done_a)
checks.finish()
