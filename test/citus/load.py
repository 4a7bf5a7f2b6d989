#!/usr/bin/env python3
"""Producers and workers through a Citus coordinator (test/citus/load.sh).

Producers store inbox batches with inbox_receive, each producer owning its streams and
re-sending part of every earlier batch (overlapping batches: redeliveries), and storing copies
of other producers' messages that span partitions on both workers. Workers claim with their own
set of partitions (p_partition_count 64, worker i takes the partitions p with p % W == i) and
complete what they claimed. Every acknowledged store and completion is written to a JSON log.

    load.py DSN SECONDS PRODUCERS WORKERS OUT.json [--event-after S --event-cmd CMD]

--event-after S runs CMD (a shell command) S seconds in: a node restart, or shard moves and
rebalances (--restart-after / --restart-cmd are the old names). Besides stores and completions
the log keeps every committed claim (a message claimed in two committed transactions was handed
to two holders: each completes what it claims, in the claim's transaction, under a 30 s lease)
and every committed 'new' outcome (an id reported new twice was stored twice).
"""
import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid

import psycopg2

DSN, SECONDS, PRODUCERS, WORKERS, OUT = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
RESTART_AFTER = None
RESTART_CMD = None
for after, cmd in (("--restart-after", "--restart-cmd"), ("--event-after", "--event-cmd")):
    if after in sys.argv:
        RESTART_AFTER = float(sys.argv[sys.argv.index(after) + 1])
        RESTART_CMD = sys.argv[sys.argv.index(cmd) + 1]
COUNT = 64
STREAMS_PER_PRODUCER = 4
stop = threading.Event()
lock = threading.Lock()
log = {"stored": {}, "completed": [], "errors": [], "deadlocks": 0, "restarted": False, "claimed": [], "new": []}


def connect():
    while not stop.is_set():
        try:
            c = psycopg2.connect(DSN)
            c.autocommit = False
            return c
        except psycopg2.Error:
            time.sleep(0.2)
    return None


def recover(conn):
    """After a failed call: the connection rolled back, or a new one."""
    time.sleep(0.05)
    try:
        conn.rollback()
        return conn
    except psycopg2.Error:
        return connect()


def note_error(e):
    with lock:
        if getattr(e, "pgcode", None) == "40P01":
            log["deadlocks"] += 1
        log["errors"].append(str(e).splitlines()[0][:200])


def producer(n):
    conn = connect()
    seq = {s: 0 for s in range(STREAMS_PER_PRODUCER)}
    sent = []
    while not stop.is_set():
        batch = []
        for _ in range(random.randint(3, 8)):
            s = random.randrange(STREAMS_PER_PRODUCER)
            seq[s] += 1
            stream = str(uuid.uuid5(uuid.NAMESPACE_OID, f"p{n}-s{s}"))
            m = {"MessageId": str(uuid.uuid4()), "HandlerName": "h", "MessageType": "t",
                 "StreamId": stream, "Envelope": {"producer": n, "stream": stream, "seq": seq[s]}}
            batch.append(m)
        # Overlap: redeliver earlier messages of this producer (in their original order, so a
        # stream's messages never arrive out of order) and unstreamed copies spread everywhere.
        redeliver = [m for m in sent[-20:] if random.random() < 0.3]
        extra = [{"MessageId": str(uuid.uuid4()), "HandlerName": "h", "MessageType": "t",
                  "Envelope": {"producer": n, "stream": None, "seq": 0}} for _ in range(random.randint(1, 4))]
        body = redeliver + batch + extra
        # Until it is acknowledged: a later batch must not overtake it in its streams.
        while not stop.is_set():
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT message_id::text, outcome FROM whizbang.inbox_receive(%s::jsonb, 'load', now(), %s)",
                                (json.dumps(body), COUNT))
                    outcomes = cur.fetchall()
                conn.commit()
            except psycopg2.Error as e:
                note_error(e)
                conn = recover(conn)
                continue
            with lock:
                for m in body:
                    log["stored"][m["MessageId"]] = m["Envelope"]
                log["new"].extend(mid for mid, outcome in outcomes if outcome == "new")
            sent.extend(batch)
            break


def worker(i):
    conn = connect()
    mine = [p for p in range(COUNT) if p % WORKERS == i]
    instance = str(uuid.uuid4())
    while not stop.is_set():
        claimed, outcomes, committing = [], {}, False
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT message_id::text, lease_token, envelope FROM whizbang.claim_work(%s, 'inbox', 20, 30,"
                            " %s, %s, 100, now(), 'load', '200 ms')", (instance, mine, COUNT))
                claimed = cur.fetchall()
                if claimed:
                    cur.execute("SELECT message_id::text, outcome FROM whizbang.complete_work('inbox', %s::uuid[],"
                                " %s::bigint[], 'load')", ([c[0] for c in claimed], [c[1] for c in claimed]))
                    outcomes = dict(cur.fetchall())
            committing = True
            conn.commit()
        except psycopg2.Error as e:
            note_error(e)
            if committing:  # the commit's fate is unknown: these completions are in doubt
                with lock:
                    log.setdefault("in_doubt", []).extend(m for m, o in outcomes.items() if o == "completed")
            conn = recover(conn)
            continue
        with lock:
            now = time.time()
            log["claimed"].extend([mid, i, now, outcomes.get(mid)] for mid, _, _ in claimed)
            for mid, _, env in claimed:
                if outcomes.get(mid) == "completed":
                    log["completed"].append([mid, env.get("stream"), env.get("seq"), i, time.time()])


threads = [threading.Thread(target=producer, args=(n,)) for n in range(PRODUCERS)]
threads += [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
for t in threads:
    t.start()
start = time.time()
try:
    if RESTART_AFTER is not None:
        time.sleep(RESTART_AFTER)
        log["restarted"] = subprocess.run(RESTART_CMD, shell=True).returncode == 0
    time.sleep(max(0, SECONDS - (time.time() - start)))
finally:
    stop.set()
for t in threads:
    t.join()
with open(OUT, "w") as f:
    json.dump(log, f)
print(json.dumps({"stored": len(log["stored"]), "completed": len(log["completed"]), "errors": len(log["errors"]),
                  "deadlocks": log["deadlocks"]}))
