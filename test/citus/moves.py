#!/usr/bin/env python3
"""Shard moves while whizbang calls run (test/citus/moves.sh, issue 22): the two exact
reproductions of 0.8.0's losses, as deterministic tests. Prints "ok   ..." / "FAIL ..." lines.

    moves.py DSN WORKER1_PORT WORKER2_PORT

1. A store whose batch reaches a non-anchor shard of a node, open while a block_writes move of
   that shard starts: the move waits for the store (the store locked the shard as Citus's writes
   do), and afterwards the messages are on the new placement (a redelivery is a duplicate).
2. A session whose routing predates a move: it claims after the move and gets the messages from
   the new placement (or a retryable 40001 first), and a fresh session finds them leased.
"""
import sys
import threading
import time
import uuid

import psycopg2

import checks
from checks import check, connect, one, rows

DSN, W1, W2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
COUNT = 64
checks.init(DSN)


def shard_of(p):
    return one("SELECT pg_catalog.get_shard_id_for_distribution_column('whizbang.wh_inbox', %s)", (p,))


def port_of(shard):
    return one("SELECT nodeport FROM pg_catalog.pg_dist_shard_placement WHERE shardid = %s", (shard,))


def ids_in(shard, n):
    """n message ids (no stream) whose partition (of COUNT) lives in `shard`."""
    out = []
    while len(out) < n:
        m = str(uuid.uuid4())
        if shard_of(one("SELECT whizbang.partition_of(%s::uuid, %s)", (m, COUNT))) == shard:
            out.append(m)
    return out


def batch(ids):
    import json
    return json.dumps([{"MessageId": m, "HandlerName": "h", "MessageType": "t", "Envelope": {}} for m in ids])


def receive(conn, ids, consumer):
    return rows("SELECT outcome FROM whizbang.inbox_receive(%s::jsonb, %s, now(), %s)", (batch(ids), consumer, COUNT), conn)


def move(shard, source, target, mode):
    one("SELECT pg_catalog.citus_move_shard_placement(%s, 'localhost', %s, 'localhost', %s, %s)",
        (shard, source, target, mode))


# The shards of the partitions 0..COUNT-1 on worker 1, in partition order: the node's routing
# anchor is its lowest partition of all 10,000 (citus_route.cpp routing_anchors), so any other shard
# of worker 1 that holds none of them is a non-anchor shard.
all_shards = {}
for p in range(10000):
    s = shard_of(p) if p < COUNT or p % 97 == 0 else None
    if s is not None:
        all_shards.setdefault(s, p)
on_w1 = sorted((p, s) for s, p in all_shards.items() if port_of(s) == W1)
anchor_shard = shard_of(min(p for p in range(10000) if port_of(shard_of(p)) == W1)) if on_w1 else None
candidates = [s for p, s in on_w1 if s != anchor_shard]
check("worker 1 holds a shard besides its routing anchor", len(candidates) > 0, on_w1)
if not candidates:
    sys.exit(1)

# 1. A store open across the start of a block_writes move of a non-anchor shard.
target = candidates[0]
anchor_id = ids_in(anchor_shard, 1)
moved_ids = ids_in(target, 20)
a = connect(autocommit=False)
outcomes = receive(a, anchor_id + moved_ids, "moves-a")
check("1: the store answers new for all 21 (uncommitted)", [o[0] for o in outcomes] == ["new"] * 21, outcomes)
done = threading.Event()
move_error = []


def run_move():
    try:
        c = connect()
        with c.cursor() as cur:
            cur.execute("SELECT pg_catalog.citus_move_shard_placement(%s, 'localhost', %s, 'localhost', %s, 'block_writes')",
                        (target, W1, W2))
        c.close()
    except psycopg2.Error as e:
        move_error.append(str(e))
    done.set()


t = threading.Thread(target=run_move)
t.start()
time.sleep(2.0)
check("1: the block_writes move waits for the open store", not done.is_set(), "the move finished first")
a.commit()
t.join(120)
check("1: the move finishes once the store committed", done.is_set() and not move_error, move_error)
check("1: the shard is on worker 2 now", port_of(target) == W2, port_of(target))
b = connect(autocommit=False)
again = receive(b, anchor_id + moved_ids, "moves-a")
b.commit()
check("1: every message is on record after the move (a redelivery is a duplicate)",
      [o[0] for o in again] == ["duplicate"] * 21, again)
check("1: 21 inbox rows for the consumer", one("SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'moves-a'") == 21,
      one("SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'moves-a'"))

# 2. A session whose routing predates a move. Its coordinator backend and its connections to the
# nodes have routed before (claims of the consumer, which had nothing), then a shard moves.
on_w1 = [s for s in sorted(all_shards) if port_of(s) == W1]
target = on_w1[-1]
ids = ids_in(target, 30)
stale = connect(autocommit=False)
instance = str(uuid.uuid4())


def claim(conn, consumer):
    for attempt in range(5):
        try:
            got = rows("SELECT message_id::text FROM whizbang.claim_work(%s, 'inbox', 1000, 300, NULL, %s, 1000,"
                       " now(), %s)", (instance, COUNT, consumer), conn)
            conn.commit()
            return got, attempt
        except psycopg2.Error as e:
            conn.rollback()
            if e.pgcode != "40001":
                raise
    return None, 5


first, _ = claim(stale, "moves-b")
check("2: the first claim finds nothing", first == [], first)
store = connect(autocommit=False)
receive(store, ids, "moves-b")
store.commit()
move(target, W1, W2, "block_writes")
check("2: the shard moved to worker 2", port_of(target) == W2, port_of(target))
check("2: the old placement is still on worker 1 (deferred drop)",
      one("SELECT count(*) > 0 FROM pg_catalog.pg_dist_cleanup") is True, "no pending cleanup")
got, retries = claim(stale, "moves-b")
check("2: the session whose routing predates the move claims all 30 from the new placement",
      got is not None and sorted(g[0] for g in got) == sorted(ids), f"{len(got or [])} claimed after {retries} retries")
fresh = connect(autocommit=False)
again, _ = claim(fresh, "moves-b")
check("2: a fresh session finds them leased (no second holder)", again == [], f"{len(again or [])} claimed again")
checks.finish()
