#!/usr/bin/env python3
"""bench/scaleout's driver: the store and the claim cycle on a single server and through a
Citus coordinator, with the same payloads, built before timing.

    scaleout.py SINGLE_DSN DISTRIBUTED_DSN SECONDS CLIENTS BATCH
Prints one JSON line per measurement.
"""
import json
import sys
import threading
import time
import uuid

import psycopg2

SINGLE, DIST, SECONDS, CLIENTS, BATCH = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])


def batches(n, streams):
    out = []
    for b in range(n):
        msgs = []
        for k in range(BATCH):
            m = {"MessageId": str(uuid.uuid4()), "HandlerName": "bench", "MessageType": "OrderPlaced",
                 "Envelope": {"order": k, "lines": [{"sku": "A-1", "qty": 2}], "note": "x" * 200}}
            if streams:
                m["StreamId"] = str(uuid.uuid5(uuid.NAMESPACE_OID, f"s{b % 50}-{k % 10}"))
            msgs.append(m)
        out.append(json.dumps(msgs))
    return out


def store(dsn, payloads, counter, stop):
    conn = psycopg2.connect(dsn)
    cur = conn.cursor()
    for p in payloads:
        if stop.is_set():
            break
        cur.execute("SELECT count(*) FROM whizbang.inbox_receive(%s::jsonb, 'bench')", (p,))
        cur.fetchone()
        conn.commit()
        counter.append(BATCH)
    conn.close()


def cycle(dsn, counter, stop):
    conn = psycopg2.connect(dsn)
    cur = conn.cursor()
    instance = str(uuid.uuid4())
    while not stop.is_set():
        cur.execute("SELECT message_id, lease_token FROM whizbang.claim_work(%s, 'inbox', %s, 300, NULL, 10000, 100,"
                    " now(), 'bench')", (instance, BATCH))
        rows = cur.fetchall()
        if rows:
            cur.execute("SELECT count(*) FROM whizbang.complete_work('inbox', %s::uuid[], %s::bigint[], 'bench')",
                        ([r[0] for r in rows], [r[1] for r in rows]))
            cur.fetchone()
        conn.commit()
        if not rows:
            break
        counter.append(len(rows))
    conn.close()


def timed(target, args_of):
    counter, stop = [], threading.Event()
    threads = [threading.Thread(target=target, args=args_of(i) + (counter, stop)) for i in range(CLIENTS)]
    start = time.time()
    for t in threads:
        t.start()
    while time.time() - start < SECONDS and any(t.is_alive() for t in threads):
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    return sum(counter) / (time.time() - start)


def reset(dsn):
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    cur = conn.cursor()
    for t in ("wh_inbox_work", "wh_inbox", "wh_inbox_streams", "wh_message_deduplication"):
        cur.execute(f"TRUNCATE whizbang.{t}")
    conn.close()


for streams in (False, True):
    for name, dsn in (("single", SINGLE), ("distributed", DIST)):
        reset(dsn)
        payloads = [batches(int(3000 / CLIENTS), streams) for _ in range(CLIENTS)]
        rate = timed(store, lambda i: (dsn, payloads[i]))
        print(json.dumps({"measure": "store", "streams": streams, "target": name, "msgs_per_s": round(rate)}))
        sys.stdout.flush()
        rate = timed(cycle, lambda i: (dsn,))
        print(json.dumps({"measure": "claim_cycle", "streams": streams, "target": name, "msgs_per_s": round(rate)}))
        sys.stdout.flush()
