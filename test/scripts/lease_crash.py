#!/usr/bin/env python3
"""Client side of test/scripts/lease_crash.sh: leases under load, an immediate shutdown, restart.

Producers store inbox and outbox messages; workers claim and complete them; a hoarder claims
and never finishes, so leases are live when the server goes down. Every thread notes what the
server acknowledged (a COMMIT that returned) and what it was in doubt about, as
test/scripts/crash_recovery.py does (whose helpers this reuses), and besides every fencing token
a claim ever handed out, committed or not: a token a client saw must never be handed out again.

  lease_crash.py setup   schemas crash_client (crash_recovery.py's notes) and lease_client
  lease_crash.py load    load; pg_ctlcluster stop -m immediate; start; notes saved under "load"

Claims after the restart are made by lease_crash.sh in SQL. Connection settings come from the
PG* environment (pg_virtualenv).
"""
import os
import random
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from crash_recovery import CONSUMER, Notes, connect, producer, save, transaction  # noqa: E402

LOAD_SECONDS = 3.0


class LeaseNotes(Notes):
    def __init__(self, phase):
        super().__init__(phase)
        self.seen = []  # the token of every claim result row, committed or not


def worker(notes, stop, seed, hoard=False):
    """Claims 20 at a time and completes them (hoard: keeps every lease it got, unfinished)."""
    rng = random.Random(seed)
    instance = str(uuid.uuid4())
    conn = connect()
    while not stop.is_set():
        claimed = []

        def claim(cur):
            cur.execute("SELECT source, message_id::text, lease_token FROM whizbang.claim_work(%s, NULL, 20, 60)",
                        (instance,))
            claimed.extend(cur.fetchall())
            with notes.lock:  # handed out, whatever becomes of the COMMIT
                notes.seen.extend(r[2] for r in claimed)
            return claimed

        acked = []

        def claim_acked(rows):
            acked.append(True)
            with notes.lock:
                notes.tokens.extend((r[2], notes.after_crash) for r in rows)

        conn = transaction(conn, notes, claim, claim_acked, lambda _: None)
        if not acked or not claimed or hoard:
            time.sleep(0.2 if hoard else 0.02 * rng.random())
            continue
        for source in ("inbox", "outbox"):
            rows = [r for r in claimed if r[0] == source]
            if not rows or stop.is_set():  # nothing is finished after the restart
                continue

            def finish(cur, source=source, rows=rows):
                cur.execute("SELECT message_id::text, outcome FROM whizbang.complete_work(%s, %s::uuid[], %s, %s)",
                            (source, [r[1] for r in rows], [r[2] for r in rows], CONSUMER))
                return [(source, x, o) for x, o in cur.fetchall()]

            def noted(outcomes, acked):
                with notes.lock:
                    for src, x, got in outcomes:
                        if got != "completed":
                            name = "completion of a live lease not completed: " + got
                            notes.events[name] = notes.events.get(name, 0) + 1
                            continue
                        notes.completed.append((src, x, acked))
                        if acked:
                            notes.completed_ids.add(x)

            conn = transaction(conn, notes, finish, lambda o: noted(o, True),
                               lambda o, rows=rows, source=source: noted(o or [(source, r[1], "completed") for r in rows], False))
    conn.close()


def crash_and_restart(stop):
    """stop -m immediate under load. The threads are told to stop once the server is down, so
    all they note happened before the crash (the claims after it are lease_crash.sh's)."""
    cluster = [os.environ.get("PGVERSION", "15"), "regress"]
    t0 = time.monotonic()
    subprocess.run(["pg_ctlcluster"] + cluster + ["stop", "-m", "immediate"], check=True)
    stop.set()
    subprocess.run(["pg_ctlcluster"] + cluster + ["start"], check=True)
    print("  stop -m immediate and start: %.1f s" % (time.monotonic() - t0))


def main():
    what = sys.argv[1]
    if what == "setup":
        conn = connect()
        conn.autocommit = True
        subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_recovery.py"),
                        "setup"], check=True)
        conn.cursor().execute("CREATE SCHEMA lease_client;"
                              "CREATE TABLE lease_client.seen (token bigint);")
        conn.close()
        return
    assert what == "load", what
    notes = LeaseNotes("load")
    stop = threading.Event()
    threads = [threading.Thread(target=producer, args=(notes, stop, 10 + k)) for k in range(2)]
    threads += [threading.Thread(target=worker, args=(notes, stop, 20 + k)) for k in range(2)]
    threads.append(threading.Thread(target=worker, args=(notes, stop, 30, True)))
    for t in threads:
        t.start()
    time.sleep(LOAD_SECONDS)
    crash_and_restart(stop)
    for t in threads:
        t.join(60)
    save(notes)
    conn = connect()
    with conn.cursor() as cur:
        cur.execute("INSERT INTO lease_client.seen SELECT unnest(%s::bigint[])", (notes.seen,))
    conn.commit()
    conn.close()
    print("  %d claimed rows handed out (%d acknowledged)" % (len(notes.seen), len(notes.tokens)))


if __name__ == "__main__":
    main()
