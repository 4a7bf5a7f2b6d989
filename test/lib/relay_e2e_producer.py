#!/usr/bin/env python3
"""One producer session of test/scripts/relay_e2e.sh (python3-psycopg2): transactions that emit
WAL outbox messages in database A (PG* environment), until the file STOP exists.

  relay_e2e_producer.py ID STOP ROLLEDBACK

Each transaction emits 1 to 4 messages, mostly on the streams of table e2e_stream, some without
a stream. What it emits is recorded in table e2e_sent in the same transaction, so that e2e_sent
holds exactly what committed: the expected set. Per stream the message's seq comes from the
stream's counter row (e2e_stream.n), which the transaction keeps locked until it ends: the next
transaction of that stream gets the next number only after this one committed, so seq is the
stream's commit order, and a rollback gives its numbers back. About one transaction in six is
rolled back, another one in six rolls back a savepoint holding 1 or 2 of its messages and
commits the rest; the ids of messages rolled back on purpose are appended to ROLLEDBACK.
A lost connection (the server restarted) is no failure: the session connects again and goes on.
The transaction it was in is in doubt; e2e_sent says whether it committed.
Prints one JSON line of counts at the end.
"""
import json
import random
import sys
import time
import uuid

import psycopg2

producer, stop_file, rolledback_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rng = random.Random(producer)
counts = dict(committed=0, rolled_back=0, savepoints_rolled_back=0, messages=0, in_doubt=0, reconnects=0, errors=0)


def connect():
    deadline = time.time() + 120
    while True:
        try:
            return psycopg2.connect("")
        except psycopg2.OperationalError:
            # The server is restarting (stop -m immediate, then a start): try again.
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def stop_requested():
    try:
        open(stop_file).close()
        return True
    except FileNotFoundError:
        return False


def emit(cur, stream, tx, i):
    """Emits one message on stream (None: no stream) and records it; returns its id."""
    mid = str(uuid.uuid4())
    seq = None
    if stream is not None:
        cur.execute("UPDATE e2e_stream SET n = n + 1 WHERE stream_id = %s RETURNING n", (stream,))
        seq = cur.fetchone()[0]
    cur.execute("INSERT INTO e2e_sent (message_id, stream_id, seq) VALUES (%s, %s, %s)", (mid, stream, seq))
    message = {"MessageId": mid, "Destination": "billing", "MessageType": "E2E.Happened", "StreamId": stream,
               "IsEvent": True, "Envelope": {"producer": producer, "tx": tx, "i": i, "seq": seq}}
    cur.execute("SELECT emitted FROM whizbang.emit_outbox_messages(%s::jsonb)", (json.dumps([message]),))
    assert cur.fetchone()[0] is True
    return mid


conn = connect()
cur = conn.cursor()
cur.execute("SELECT stream_id::text FROM e2e_stream ORDER BY stream_id")
streams = [r[0] for r in cur.fetchall()]
conn.commit()
rolledback = open(rolledback_path, "a")
tx = 0
while not stop_requested():
    tx += 1
    plan = [None if rng.random() < 0.05 else rng.choice(streams) for _ in range(rng.randint(1, 4))]
    kind = rng.choice(["commit"] * 4 + ["rollback", "savepoint"])
    cut = rng.randint(1, len(plan)) if kind == "savepoint" else None  # the savepoint's messages: plan[cut - 1:cut + 1]
    try:
        # The counter rows in one order for every session: no deadlocks between them.
        cur.execute("SELECT 1 FROM e2e_stream WHERE stream_id = ANY(%s::uuid[]) ORDER BY stream_id FOR UPDATE",
                    ([s for s in plan if s],))
        ids, dropped = [], []
        i = 0
        while i < len(plan):
            if cut is not None and i == cut - 1:
                cur.execute("SAVEPOINT sp")
                inner = [emit(cur, s, tx, i + k) for k, s in enumerate(plan[i:i + 2])]
                cur.execute("ROLLBACK TO SAVEPOINT sp")
                dropped += inner
                i += len(inner)
                continue
            ids.append(emit(cur, plan[i], tx, i))
            i += 1
        if kind == "rollback":
            conn.rollback()
            dropped += ids
            counts["rolled_back"] += 1
        else:
            conn.commit()
            counts["committed"] += 1
            counts["messages"] += len(ids)
            counts["savepoints_rolled_back"] += kind == "savepoint"
        for mid in dropped:
            rolledback.write(mid + "\n")
        rolledback.flush()
    except (psycopg2.OperationalError, psycopg2.InterfaceError):
        counts["in_doubt"] += 1
        counts["reconnects"] += 1
        try:
            conn.close()
        except psycopg2.Error:
            pass
        conn = connect()
        cur = conn.cursor()
    except psycopg2.Error as e:
        counts["errors"] += 1
        print("producer %d: %s" % (producer, str(e).strip()), file=sys.stderr)
        conn.rollback()
    time.sleep(0.02 + rng.random() * 0.06)  # a pace the consumer (a transaction per message) keeps up with
print(json.dumps(counts))
