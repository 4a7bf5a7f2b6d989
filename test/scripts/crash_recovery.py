#!/usr/bin/env python3
"""Client side of test/scripts/crash_recovery.sh: load, crash, restart, and the client's notes.

Producers store inbox and outbox messages (some with a StreamId); workers claim, complete and
dead-letter them. Each thread notes what PostgreSQL *acknowledged*: a store or completion
whose COMMIT returned, a claim's tokens once its COMMIT returned. A transaction whose COMMIT
raised (the server went away while it was in flight) is noted as in doubt: it may or may not
have committed. Errors before the COMMIT mean nothing was committed, so nothing is noted.

  crash_recovery.py setup       schema crash_client for the notes
  crash_recovery.py MODE [NAME] one of the modes below, its notes filed under NAME
  crash_recovery.py kill        load; kill -9 of the backend running a 50,000-message
                                store_inbox_messages; crash recovery; load again
  crash_recovery.py immediate   load; pg_ctlcluster stop -m immediate; start; load again
  crash_recovery.py drain       claims (leases treated as lapsed) and completes what is left

After the restart the notes are written to crash_client.* and the shell script checks them
against whizbang's tables. Connection settings come from the PG* environment (pg_virtualenv).
"""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid

import psycopg2

CONSUMER = "crash"          # consumer of the producers' inbox messages
BIG_CONSUMER = "big"        # consumer of the killed 50,000-message store
BIG_BATCH = 50000
STREAMS = [str(uuid.UUID(int=(0xC0 << 120) + i)) for i in range(8)]


def connect(deadline=60.0):
    """Connects, waiting while the server restarts or recovers."""
    until = time.monotonic() + deadline
    while True:
        try:
            conn = psycopg2.connect(connect_timeout=3)
            conn.autocommit = False
            return conn
        except psycopg2.OperationalError:
            if time.monotonic() > until:
                raise
            time.sleep(0.2)


class Notes:
    """What the client was told, shared by the threads of one phase."""

    def __init__(self, phase):
        self.phase = phase
        self.lock = threading.Lock()
        self.stored = []      # (source, id, acked)
        self.completed = []   # (source, id, acked)
        self.dead = []        # (source, id, acked)
        self.tokens = []      # (token, after_crash) of acknowledged claims
        self.events = {}      # name -> count
        self.completed_ids = set()  # acknowledged completions, this phase and earlier ones
        self.after_crash = False

    def event(self, name, n=1):
        with self.lock:
            self.events[name] = self.events.get(name, 0) + n

    def load_earlier(self, cur):
        cur.execute("SELECT id::text FROM crash_client.completed WHERE acked")
        self.completed_ids = {r[0] for r in cur.fetchall()}


def transaction(conn, notes, body, on_commit, on_doubt):
    """Runs body(cur) and COMMIT. Returns the connection to go on with (a new one after a failure)."""
    committing = False
    try:
        with conn.cursor() as cur:
            result = body(cur)
        committing = True
        conn.commit()
        on_commit(result)
        return conn
    except psycopg2.Error as e:
        if committing:
            on_doubt(result)
            notes.event("commit in doubt")
        if conn.closed or isinstance(e, (psycopg2.OperationalError, psycopg2.InterfaceError)):
            notes.event("connection lost")
            try:
                conn.close()
            except psycopg2.Error:
                pass
            return connect()
        conn.rollback()
        notes.event("error: " + (e.pgcode or "?"))
        return conn


def inbox_message(i, stream):
    m = {"MessageId": str(uuid.uuid4()), "HandlerName": "h", "MessageType": "t", "Envelope": {"n": i}}
    if stream:
        m["StreamId"] = stream
    return m


def producer(notes, stop, seed):
    rng = random.Random(seed)
    conn = connect()
    i = 0
    while not stop.is_set():
        source = "inbox" if i % 2 == 0 else "outbox"
        msgs = []
        for _ in range(rng.randint(1, 20)):
            i += 1
            stream = rng.choice(STREAMS) if rng.random() < 0.5 else None
            m = inbox_message(i, stream)
            if source == "outbox":
                del m["HandlerName"]
                m["Destination"] = "d"
            msgs.append(m)
        ids = [m["MessageId"] for m in msgs]

        def body(cur, source=source, msgs=msgs):
            if source == "inbox":
                cur.execute("SELECT count(*) FROM whizbang.store_inbox_messages(%s::jsonb, p_consumer => %s)",
                            (json.dumps(msgs), CONSUMER))
            else:
                cur.execute("SELECT count(*) FROM whizbang.store_outbox_messages(%s::jsonb)", (json.dumps(msgs),))
            if cur.fetchone()[0] != len(msgs):
                notes.event("store returned fewer rows than new messages")

        def note(acked, source=source, ids=ids):
            with notes.lock:
                notes.stored.extend((source, x, acked) for x in ids)

        conn = transaction(conn, notes, body, lambda _: note(True), lambda _: note(False))
    conn.close()


def worker(notes, stop, seed, p_now=None):
    rng = random.Random(seed)
    instance = str(uuid.uuid4())
    conn = connect()
    while not stop.is_set():
        claimed = []

        # Which server a claim ran on, before or after the crash, is read in the claim's own
        # transaction: crash recovery empties the unlogged crash_client.incarnation. (The time
        # of the acknowledgement cannot tell: a COMMIT that returned just before the crash may
        # be noted by its thread after it.)
        incarnation = []

        def claim(cur):
            cur.execute("SELECT source, message_id::text, lease_token, consumer FROM whizbang.claim_work("
                        "%s, NULL, 20, 60, p_now => coalesce(%s::timestamptz, now()))", (instance, p_now))
            claimed.extend(cur.fetchall())
            cur.execute("SELECT NOT EXISTS (SELECT FROM crash_client.incarnation)")
            incarnation[:] = [cur.fetchone()[0]]
            return claimed

        def claim_acked(rows):
            with notes.lock:
                after = incarnation[0]
                notes.tokens.extend((r[2], after) for r in rows)
                back = [r[1] for r in rows if r[1] in notes.completed_ids]
            if back:
                notes.event("completed message handed out again", len(back))

        acked = []
        conn = transaction(conn, notes, claim, lambda rows: (acked.append(True), claim_acked(rows)), lambda _: None)
        if not acked:
            claimed = []  # a claim whose COMMIT failed may not hold anything: nothing to finish
        if not claimed:
            if p_now is not None:
                return conn.close()  # drained
            time.sleep(0.05)
            continue
        # Claimed and acknowledged on this connection: completing with the token must work.
        for source in ("inbox", "outbox"):
            rows = [r for r in claimed if r[0] == source]
            if not rows:
                continue
            fail = [r for r in rows if rng.random() < 0.05]
            done = [r for r in rows if r not in fail]

            def finish(cur, source=source, done=done, fail=fail):
                outcomes = []
                if done:
                    cur.execute("SELECT message_id::text, outcome FROM whizbang.complete_work(%s, %s::uuid[], %s, %s)",
                                (source, [r[1] for r in done], [r[2] for r in done], CONSUMER))
                    outcomes += [(source, x, o, "completed") for x, o in cur.fetchall()]
                if fail:
                    cur.execute("SELECT message_id::text, outcome FROM whizbang.fail_work(%s, %s::uuid[], %s, %s, %s, %s)",
                                (source, [r[1] for r in fail], ["crash test"] * len(fail), [r[2] for r in fail],
                                 [False] * len(fail), CONSUMER))
                    outcomes += [(source, x, o, "dead_lettered") for x, o in cur.fetchall()]
                return outcomes

            def noted(outcomes, acked):
                with notes.lock:
                    for src, x, got, want in outcomes:
                        if got != want:
                            name = "fresh claim not %s: %s%s" % (want, got, " (after crash)" if notes.after_crash else "")
                            notes.events[name] = notes.events.get(name, 0) + 1
                        elif want == "completed":
                            if acked and x in notes.completed_ids:
                                notes.events["completed twice"] = notes.events.get("completed twice", 0) + 1
                            notes.completed.append((src, x, acked))
                            if acked:
                                notes.completed_ids.add(x)
                        else:
                            notes.dead.append((src, x, acked))

            conn = transaction(conn, notes, finish, lambda o: noted(o, True),
                               lambda o: noted(o or [(source, r[1], "completed", "completed") for r in done], False))
    conn.close()


def big_store(notes, result):
    """The 50,000-message store, in a transaction that is never committed: the kill comes first."""
    msgs = [inbox_message(i, STREAMS[i % 3] if i % 4 == 0 else None) for i in range(BIG_BATCH)]
    conn = connect()
    with conn.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        result["pid"] = cur.fetchone()[0]
        result["ready"].set()
        try:
            cur.execute("SELECT count(*) FROM whizbang.store_inbox_messages(%s::jsonb, p_consumer => %s)",
                        (json.dumps(msgs), BIG_CONSUMER))
            result["outcome"] = "returned %d rows" % cur.fetchone()[0]
        except psycopg2.Error as e:
            result["outcome"] = "error"
            result["error"] = str(e).strip().splitlines()[0]
    try:
        conn.close()
    except psycopg2.Error:
        pass


def kill_big_store(notes, control):
    """Starts the big store and kill -9s its backend once it has run for a while."""
    result = {"ready": threading.Event()}
    t = threading.Thread(target=big_store, args=(notes, result))
    t.start()
    result["ready"].wait(30)
    active_for = 0.0
    until = time.monotonic() + 30
    while time.monotonic() < until:
        control.execute("SELECT state, extract(epoch FROM clock_timestamp() - query_start) FROM pg_stat_activity "
                        "WHERE pid = %s AND query LIKE '%%store_inbox_messages%%'", (result["pid"],))
        row = control.fetchone()
        if row and row[0] == "active" and row[1] >= 0.3:
            active_for = float(row[1])
            break
        time.sleep(0.02)
    control.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (result["pid"],))
    row = control.fetchone()
    running = bool(row and row[0] == "active")
    with notes.lock:
        notes.after_crash = True
    os.kill(result["pid"], signal.SIGKILL)
    t.join(60)
    notes.event("big store running at the kill", 1 if running else 0)
    notes.event("big store raised an error", 1 if result.get("outcome") == "error" else 0)
    print("  big store: running for %.2f s when killed; the call: %s (%s)"
          % (active_for, result.get("outcome"), result.get("error", "")))


def immediate_stop():
    cluster = [os.environ.get("PGVERSION", "15"), "regress"]
    t0 = time.monotonic()
    subprocess.run(["pg_ctlcluster"] + cluster + ["stop", "-m", "immediate"], check=True)
    subprocess.run(["pg_ctlcluster"] + cluster + ["start"], check=True)
    print("  stop -m immediate and start: %.1f s" % (time.monotonic() - t0))


def save(notes):
    conn = connect()
    with conn.cursor() as cur:
        for table, rows in (("stored", notes.stored), ("completed", notes.completed), ("dead", notes.dead)):
            cur.execute("INSERT INTO crash_client.%s (phase, source, id, acked) SELECT %%s, s, i, a "
                        "FROM unnest(%%s::text[], %%s::uuid[], %%s::boolean[]) AS u(s, i, a)" % table,
                        (notes.phase, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]))
        cur.execute("INSERT INTO crash_client.tokens (phase, token, after_crash) SELECT %s, t, a "
                    "FROM unnest(%s::bigint[], %s::boolean[]) AS u(t, a)",
                    (notes.phase, [t[0] for t in notes.tokens], [t[1] for t in notes.tokens]))
        cur.execute("INSERT INTO crash_client.events (phase, name, n) SELECT %s, n, c "
                    "FROM unnest(%s::text[], %s::bigint[]) AS u(n, c)",
                    (notes.phase, list(notes.events), list(notes.events.values())))
    conn.commit()
    conn.close()
    acked = sum(1 for r in notes.stored if r[2])
    print("  %s: %d stores acknowledged (%d in doubt), %d completions (%d in doubt), %d dead letters, %d claimed rows"
          % (notes.phase, acked, len(notes.stored) - acked, sum(1 for r in notes.completed if r[2]),
             sum(1 for r in notes.completed if not r[2]), len(notes.dead), len(notes.tokens)))
    print("  events: " + ", ".join("%s %d" % kv for kv in sorted(notes.events.items())))


def run_load(notes, crash, before=3.0, after=3.0):
    stop = threading.Event()
    threads = [threading.Thread(target=producer, args=(notes, stop, 10 + k)) for k in range(2)]
    threads += [threading.Thread(target=worker, args=(notes, stop, 20 + k)) for k in range(2)]
    for t in threads:
        t.start()
    time.sleep(before)
    t0 = time.monotonic()
    crash()
    with notes.lock:
        notes.after_crash = True
    # Wait for the server to accept connections again, then let the load run on.
    connect().close()
    print("  server back after %.1f s" % (time.monotonic() - t0))
    time.sleep(after)
    stop.set()
    for t in threads:
        t.join(60)


def main():
    phase = sys.argv[1]
    label = sys.argv[2] if len(sys.argv) > 2 else phase  # the phase's name in crash_client.*
    conn = connect()
    conn.autocommit = True
    cur = conn.cursor()
    if phase == "setup":
        cur.execute("""
            CREATE SCHEMA crash_client;
            CREATE TABLE crash_client.stored (phase text, source text, id uuid, acked boolean);
            CREATE TABLE crash_client.completed (phase text, source text, id uuid, acked boolean);
            CREATE TABLE crash_client.dead (phase text, source text, id uuid, acked boolean);
            CREATE TABLE crash_client.tokens (phase text, token bigint, after_crash boolean);
            CREATE TABLE crash_client.events (phase text, name text, n bigint);
            CREATE UNLOGGED TABLE crash_client.incarnation (before_crash boolean);""")
        return
    notes = Notes(label)
    notes.load_earlier(cur)
    if phase in ("kill", "immediate"):
        cur.execute("INSERT INTO crash_client.incarnation VALUES (true)")  # gone after the crash
    if phase == "kill":
        run_load(notes, lambda: kill_big_store(notes, cur))
    elif phase == "immediate":
        conn.close()
        run_load(notes, immediate_stop)
    elif phase == "drain":
        conn.close()
        with notes.lock:
            notes.after_crash = True
        # Leases taken before the crashes are still live: claim as if an hour had passed.
        later = time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime(time.time() + 3600))
        threads = [threading.Thread(target=worker, args=(notes, threading.Event(), 30 + k, later)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    save(notes)


if __name__ == "__main__":
    main()
