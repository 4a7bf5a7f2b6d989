#!/usr/bin/env python3
"""Client side of test/scripts/claim_wait.sh: waiting workers (claim_work's p_wait, issue 12).

    claim_wait.py [--workers 20] [--messages 200] [--wait 2] [--idle-wait 10] [--idle-seconds 10]
                  [--poll-ms MS]

WORKERS threads, each on its own connection, loop: claim_work(p_wait => WAIT s) for inbox
consumer 'claim_wait', then complete_work what they got. A producer stores MESSAGES messages one
at a time (a transaction each, 0-5 ms apart). Once all are claimed, the workers' waits become
IDLE_WAIT s; when every worker sleeps in such a call on the empty queue, the CPU time of their
backends (utime + stime of /proc/<pid>/stat, in clock ticks) is summed over IDLE_SECONDS (0: no
idle phase). --poll-ms MS: the workers poll instead (p_wait 0, then sleep MS ms when they got
nothing), to compare the idle CPU of a poll loop.

Prints one JSON line: stored, claimed (result rows), distinct, duplicates (messages claimed more
than once), missing (stored, never claimed), completed (complete_work answered completed),
wakeups (stats()' claim_wakeups moved while the messages were stored and claimed; 0 without the
preload), idle: {waiting (stats()' claim_waiting at the start), ticks, clk_tck, seconds, calls
(claims that ended in the window), wakeups}. Connection settings come from the PG* environment.
"""
import argparse
import json
import os
import random
import threading
import time
import uuid

import psycopg2

CONSUMER = "claim_wait"
CLAIM_SQL = """
    SELECT message_id::text, lease_token
      FROM whizbang.claim_work(p_instance_id => %s, p_source => 'inbox', p_max_rows => 10, p_lease_seconds => 300,
                               p_consumer => %s, p_wait => make_interval(secs => %s))
"""
COMPLETE_SQL = "SELECT outcome FROM whizbang.complete_work('inbox', %s::uuid[], %s::bigint[], %s)"
STORE_SQL = """
    SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(jsonb_build_object(
      'MessageId', %s, 'HandlerName', 'h', 'MessageType', 't', 'Envelope', jsonb_build_object())), p_consumer => %s)
"""


def connect():
    conn = psycopg2.connect("")
    conn.autocommit = True  # every call its own transaction
    return conn


def stat(cur, metric):
    cur.execute("SELECT value FROM whizbang.stats() WHERE metric = %s", (metric,))
    row = cur.fetchone()
    return int(row[0]) if row else 0


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after "pid (comm)": field 3 is fields[0]
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


class Shared:
    def __init__(self, workers, wait):
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.wait = wait              # p_wait of the next claims
        self.pids = [None] * workers
        self.call_wait = [None] * workers  # p_wait of the call each worker is in (None: not in one)
        self.calls = [0] * workers    # claims that ended
        self.claims = {}              # message id -> times handed out
        self.completed = 0
        self.errors = []


def worker(shared, i, poll_ms):
    instance = str(uuid.uuid4())
    try:
        conn = connect()
        cur = conn.cursor()
        cur.execute("SELECT pg_backend_pid()")
        shared.pids[i] = cur.fetchone()[0]
        while not shared.stop.is_set():
            wait = 0 if poll_ms else shared.wait
            shared.call_wait[i] = shared.wait
            try:
                cur.execute(CLAIM_SQL, (instance, CONSUMER, wait))
                rows = cur.fetchall()
            except psycopg2.extensions.QueryCanceledError:
                if shared.stop.is_set():
                    break
                raise
            finally:
                shared.call_wait[i] = None
            shared.calls[i] += 1
            if not rows:
                if poll_ms:
                    time.sleep(poll_ms / 1000.0)
                continue
            with shared.lock:
                for message_id, _ in rows:
                    shared.claims[message_id] = shared.claims.get(message_id, 0) + 1
            cur.execute(COMPLETE_SQL, ([r[0] for r in rows], [r[1] for r in rows], CONSUMER))
            done = sum(1 for (outcome,) in cur.fetchall() if outcome == "completed")
            with shared.lock:
                shared.completed += done
        conn.close()
    except Exception as e:  # reported in the JSON line; the shell script fails on it
        shared.errors.append("worker %d: %s" % (i, str(e).strip()))


def wait_until(predicate, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, default=20)
    p.add_argument("--messages", type=int, default=200)
    p.add_argument("--wait", type=float, default=2.0, help="p_wait (s) while messages are stored")
    p.add_argument("--idle-wait", type=float, default=10.0, help="p_wait (s) on the empty queue")
    p.add_argument("--idle-seconds", type=float, default=10.0, help="CPU measured over this long (0: none)")
    p.add_argument("--poll-ms", type=float, default=0, help="poll every MS ms instead of waiting (comparison)")
    args = p.parse_args()

    monitor = connect().cursor()
    shared = Shared(args.workers, args.wait)
    threads = [threading.Thread(target=worker, args=(shared, i, args.poll_ms), daemon=True)
               for i in range(args.workers)]
    for t in threads:
        t.start()
    wait_until(lambda: all(shared.pids) or shared.errors, 10)

    # Stores, one message per transaction.
    wakeups_before = stat(monitor, "claim_wakeups")
    producer = connect().cursor()
    rng = random.Random(12)
    ids = [str(uuid.uuid4()) for _ in range(args.messages)]
    for message_id in ids:
        producer.execute(STORE_SQL, (message_id, CONSUMER))
        time.sleep(rng.uniform(0, 0.005))
    wait_until(lambda: len(shared.claims) >= len(ids) or shared.errors, 30)
    wakeups = stat(monitor, "claim_wakeups") - wakeups_before

    # The empty queue: every worker in a call with the idle wait, then their backends' CPU.
    idle = {}
    if args.idle_seconds > 0:
        shared.wait = args.idle_wait
        pids = [pid for pid in shared.pids if pid]

        def all_sleeping():
            if not all(w == args.idle_wait for w in shared.call_wait):
                return False
            monitor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)"
                            " AND wait_event_type = 'Extension' AND wait_event = 'Extension'", (pids,))
            return monitor.fetchone()[0] == len(pids)
        wait_until(lambda: all_sleeping() or shared.errors, args.wait + 10)
        calls0, wakeups0 = sum(shared.calls), stat(monitor, "claim_wakeups")
        idle["waiting"] = stat(monitor, "claim_waiting")
        ticks0 = sum(cpu_ticks(pid) for pid in pids)
        time.sleep(args.idle_seconds)
        idle["ticks"] = sum(cpu_ticks(pid) for pid in pids) - ticks0
        idle["calls"] = sum(shared.calls) - calls0
        idle["wakeups"] = stat(monitor, "claim_wakeups") - wakeups0
        idle["clk_tck"] = os.sysconf("SC_CLK_TCK")
        idle["seconds"] = args.idle_seconds
        idle["backends"] = len(pids)

    # Stop: the waits of the workers still running are canceled (again, for one that was between
    # two calls when its cancel came).
    shared.stop.set()
    end = time.monotonic() + 15
    while any(t.is_alive() for t in threads) and time.monotonic() < end:
        for i, t in enumerate(threads):
            if t.is_alive() and shared.call_wait[i] is not None:
                monitor.execute("SELECT pg_cancel_backend(%s)", (shared.pids[i],))
        time.sleep(0.1)

    counts = shared.claims
    print(json.dumps({
        "stored": len(ids),
        "claimed": sum(counts.values()),
        "distinct": len(counts),
        "duplicates": sum(1 for n in counts.values() if n > 1),
        "missing": sum(1 for m in ids if m not in counts),
        "completed": shared.completed,
        "wakeups": wakeups,
        "idle": idle,
        "errors": shared.errors,
    }, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
