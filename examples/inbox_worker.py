#!/usr/bin/env python3
"""An inbox worker for whizbang: claim work, apply its effect exactly once, retry, dead-letter.

    python3 examples/inbox_worker.py [--consumer NAME] [--batch 10] [--lease 30] [--wait 10] [--max-idle S]
    python3 examples/inbox_worker.py --produce N [--streams 3] [--tag demo] [--consumer NAME]

Worker mode loops:

  1. claim_work(instance, 'inbox', batch, lease, p_wait => --wait seconds) in its own short
     transaction, so the leases are visible to the other workers at once. When nothing is
     claimable the call waits in the server and returns as soon as a transaction that stored work
     for the consumer commits (no client-side sleep loop; one statement, so it works through
     pgbouncer in transaction mode too), or with no rows when the wait is up;
  2. for each claimed message, in the order claim_work returned them (oldest first per stream):
     one transaction runs the handler (the business effect: a row in inbox_demo_ledger) and
     complete_work with the message's lease token, and commits only when complete_work answers
     'completed'. Effect and completion commit together, so the effect happens exactly once:
     a crash before the commit leaves neither, and the message is claimed again after its lease;
  3. when the handler raises, the transaction is rolled back (no effect) and fail_work records the
     error in a new transaction: 'retry_scheduled' (backoff from wh_settings) or 'dead_lettered'
     (max_attempts reached, or the handler raised PermanentError). The rest of the message's
     stream in this batch is released, not processed, so that the stream keeps its order;
  4. a background thread renews the leases of the messages the worker still holds, every third
     of the lease, on its own connection, so a slow handler keeps its messages.

It stops on SIGINT or SIGTERM (after the current message; the rest of the batch is released, so
another worker can take it at once; a waiting claim is canceled, see stop_signals.py) or after
--max-idle seconds in which claims found no work.
At the end it prints one JSON line of counts (completed, retry_scheduled, dead_lettered, ...).

Produce mode stores N demo messages over --streams streams with store_inbox_messages, in one
call. Message ids are derived from --tag and the message number (UUIDv5), so running the same
command again is a redelivery of the same messages: whizbang stores none of them twice.

Demo handlers, chosen by the message's HandlerName:
    ledger.post   inserts {"account", "seq", "amount"} of the envelope into inbox_demo_ledger.
                  "sleep": seconds   makes it slow (to show lease renewal);
                  "fail": true       makes it raise (retried, then dead-lettered);
                  no "amount"        is a PermanentError (dead-lettered at once).
    any other     PermanentError: no handler for it (dead-lettered at once).

Connection settings come from the standard PG* environment variables (libpq defaults). The
database needs the extension (CREATE EXTENSION whizbang); both modes create the demo table
inbox_demo_ledger when it is missing. The role needs the grants shown in docs/inbox.md.

Needs Python 3.8+ and psycopg2 (Debian: python3-psycopg2). See docs/inbox.md.
"""

import argparse
import json
import sys
import threading
import time
import uuid

import psycopg2
from psycopg2.extras import Json

from stop_signals import StopSignals

DEMO_NAMESPACE = uuid.UUID("6f1c8a52-3d1e-4f7b-9a43-1c2e5b7d9e01")  # UUIDv5 namespace of demo ids
MAX_ERROR_CHARS = 2000

CLAIM_SQL = """
    SELECT message_id::text, stream_id::text, handler_name, message_type, envelope, attempts,
           lease_token, consumer
      FROM whizbang.claim_work(p_instance_id => %(instance)s, p_source => 'inbox',
                               p_max_rows => %(batch)s, p_lease_seconds => %(lease)s,
                               p_max_per_stream => %(per_stream)s, p_consumer => %(consumer)s,
                               p_wait => make_interval(secs => %(wait)s))
"""
COMPLETE_SQL = """
    SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[%s]::uuid[], ARRAY[%s]::bigint[], %s)
"""
FAIL_SQL = """
    SELECT outcome, scheduled_for
      FROM whizbang.fail_work('inbox', ARRAY[%s]::uuid[], ARRAY[%s]::text[], ARRAY[%s]::bigint[],
                              ARRAY[%s]::boolean[], %s)
"""
RENEW_SQL = """
    SELECT message_id::text, outcome
      FROM whizbang.renew_leases('inbox', %s::uuid[], %s::bigint[], %s, %s)
"""
RELEASE_SQL = """
    SELECT message_id::text, outcome FROM whizbang.release_work('inbox', %s::uuid[], %s::bigint[], %s)
"""
STORE_SQL = "SELECT count(*) FROM whizbang.store_inbox_messages(%s::jsonb, p_consumer => %s)"
DEMO_TABLE_SQL = """
    CREATE TABLE IF NOT EXISTS inbox_demo_ledger (
        entry_id   bigserial   PRIMARY KEY,
        message_id uuid        NOT NULL,  -- no unique constraint: the demo shows whizbang's guarantee
        stream_id  uuid,
        account    text        NOT NULL,
        seq        integer,
        amount     numeric     NOT NULL,
        worker     text        NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
    )
"""


def log(*parts):
    print(time.strftime("%H:%M:%S"), *parts, file=sys.stderr, flush=True)


def connect(autocommit=False):
    conn = psycopg2.connect("")  # PG* environment variables
    conn.autocommit = autocommit
    return conn


def ensure_demo_table(conn):
    with conn.cursor() as cur:
        # Several workers may start at once: serialise the CREATE ... IF NOT EXISTS.
        cur.execute("SELECT pg_advisory_xact_lock(hashtext('inbox_demo_ledger'))")
        cur.execute(DEMO_TABLE_SQL)
    conn.commit()


# ---------------------------------------------------------------------------------------------
# Handlers: they get a cursor inside the message's transaction and apply the effect with it.
# ---------------------------------------------------------------------------------------------
class PermanentError(Exception):
    """Retrying cannot help: the message is dead-lettered at once (fail_work p_retryable false)."""


class Message:
    __slots__ = ("id", "stream_id", "handler_name", "message_type", "envelope", "attempts", "token", "consumer")

    def __init__(self, row):
        (self.id, self.stream_id, self.handler_name, self.message_type, self.envelope, self.attempts,
         self.token, self.consumer) = row


def post_to_ledger(cur, msg, worker_name):
    env = msg.envelope if isinstance(msg.envelope, dict) else {}
    if env.get("sleep"):
        time.sleep(float(env["sleep"]))  # a slow handler: the lease keeper renews its lease meanwhile
    if env.get("fail"):
        raise RuntimeError("demo failure requested by message %s (attempt %d)" % (msg.id, msg.attempts))
    if "amount" not in env or "account" not in env:
        raise PermanentError("envelope has no account or amount")
    cur.execute(
        "INSERT INTO inbox_demo_ledger (message_id, stream_id, account, seq, amount, worker)"
        " VALUES (%s, %s, %s, %s, %s, %s)",
        (msg.id, msg.stream_id, env["account"], env.get("seq"), env["amount"], worker_name))


HANDLERS = {"ledger.post": post_to_ledger}


# ---------------------------------------------------------------------------------------------
# Lease keeper: renews the leases of the messages this worker still holds.
# ---------------------------------------------------------------------------------------------
class LeaseKeeper(threading.Thread):
    def __init__(self, lease_seconds):
        super().__init__(name="lease-keeper", daemon=True)
        self.lease_seconds = lease_seconds
        self.interval = max(lease_seconds / 3.0, 0.2)
        self.held = {}  # message id -> (lease token, consumer)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.renewed = 0
        self.conn = None

    def hold(self, messages):
        with self.lock:
            for m in messages:
                self.held[m.id] = (m.token, m.consumer)

    def drop(self, message_id):
        with self.lock:
            self.held.pop(message_id, None)

    def stop(self):
        self.stopping.set()
        self.join(timeout=10)

    def run(self):
        while not self.stopping.wait(self.interval):
            with self.lock:
                held = dict(self.held)
            if not held:
                continue
            by_consumer = {}
            for message_id, (token, consumer) in held.items():
                ids, tokens = by_consumer.setdefault(consumer, ([], []))
                ids.append(message_id)
                tokens.append(token)
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = connect(autocommit=True)
                with self.conn.cursor() as cur:
                    for consumer, (ids, tokens) in by_consumer.items():
                        cur.execute(RENEW_SQL, (ids, tokens, self.lease_seconds, consumer))
                        for message_id, outcome in cur.fetchall():
                            if outcome == "renewed":
                                self.renewed += 1
                            elif message_id in self.held:
                                # lease_lost: another worker re-claimed it; not_found: it is done.
                                # The handler's complete_work will say so too and roll back.
                                log("renew", message_id, outcome)
            except psycopg2.Error as e:
                log("lease keeper:", str(e).strip())
                if self.conn is not None and not self.conn.closed:
                    self.conn.close()
                self.conn = None
        if self.conn is not None and not self.conn.closed:
            self.conn.close()


# ---------------------------------------------------------------------------------------------
# Worker
# ---------------------------------------------------------------------------------------------
class Worker:
    def __init__(self, args):
        self.args = args
        self.instance = args.instance or str(uuid.uuid4())
        self.name = "worker-" + self.instance[:8]
        self.stop = StopSignals(
            lambda signum: log(self.name, "got signal %d: stopping after the current message" % signum))
        self.stopping = self.stop.requested
        self.counts = {k: 0 for k in ("claimed", "completed", "retry_scheduled", "dead_lettered",
                                      "lease_lost", "not_found", "released")}
        self.conn = connect()
        self.keeper = LeaseKeeper(args.lease)

    def claim(self, wait):
        """Claims a batch, waiting in the server up to `wait` seconds for work; [] when stopped."""
        try:
            with self.stop.waiting(self.conn), self.conn.cursor() as cur:
                if self.stopping.is_set():
                    return []
                cur.execute(CLAIM_SQL, {"instance": self.instance, "batch": self.args.batch,
                                        "lease": self.args.lease, "per_stream": self.args.max_per_stream,
                                        "consumer": self.args.consumer, "wait": wait})
                rows = [Message(r) for r in cur.fetchall()]
        except psycopg2.extensions.QueryCanceledError:
            self.conn.rollback()  # a canceled claim holds nothing
            if self.stopping.is_set():
                return []
            raise
        self.conn.commit()  # the claim commits on its own: the leases are now visible to everyone
        return rows

    def handle(self, msg):
        """Runs the handler and complete_work in one transaction; returns the outcome word."""
        handler = HANDLERS.get(msg.handler_name)
        try:
            with self.conn.cursor() as cur:
                if handler is None:
                    raise PermanentError("no handler for HandlerName %r" % msg.handler_name)
                handler(cur, msg, self.name)
                cur.execute(COMPLETE_SQL, (msg.id, msg.token, msg.consumer))
                outcome = cur.fetchone()[0]
            if outcome == "completed":
                self.conn.commit()  # effect + completion, atomically
            else:
                # lease_lost: another worker re-claimed the message after our lease ran out and
                # will apply it; not_found: it was completed or dead-lettered meanwhile. Either
                # way our effect must not commit.
                self.conn.rollback()
            return outcome
        except Exception as e:  # the handler (or the database) failed
            if self.conn.closed:
                raise  # connection lost: let the process die; the lease will expire
            self.conn.rollback()  # no effect
            error = ("%s: %s" % (type(e).__name__, e))[:MAX_ERROR_CHARS]
            retryable = not isinstance(e, PermanentError)
            with self.conn.cursor() as cur:
                cur.execute(FAIL_SQL, (msg.id, error, msg.token, retryable, msg.consumer))
                outcome, scheduled_for = cur.fetchone()
            self.conn.commit()
            log(self.name, "failed", msg.id, "attempt", msg.attempts, "->", outcome,
                scheduled_for.isoformat() if scheduled_for else "", "|", error)
            return outcome

    def release(self, messages):
        by_consumer = {}
        for m in messages:
            ids, tokens = by_consumer.setdefault(m.consumer, ([], []))
            ids.append(m.id)
            tokens.append(m.token)
        with self.conn.cursor() as cur:
            for consumer, (ids, tokens) in by_consumer.items():
                cur.execute(RELEASE_SQL, (ids, tokens, consumer))
                self.counts["released"] += sum(1 for _, outcome in cur.fetchall() if outcome == "released")
        self.conn.commit()
        for m in messages:
            self.keeper.drop(m.id)

    def process_batch(self, batch):
        blocked_streams = set()  # streams whose earlier message in this batch did not complete
        for i, msg in enumerate(batch):
            if self.stopping.is_set():
                self.release(batch[i:])
                return
            if msg.stream_id is not None and msg.stream_id in blocked_streams:
                # Keep the stream's order: it waits for the retry. fail_work has given it back
                # already (this release then answers lease_lost); a lost lease or a stop has not.
                self.release([msg])
                continue
            outcome = self.handle(msg)
            self.keeper.drop(msg.id)
            self.counts[outcome] = self.counts.get(outcome, 0) + 1
            if outcome == "completed":
                log(self.name, "completed", msg.id, "attempt", msg.attempts)
            elif outcome != "dead_lettered" and msg.stream_id is not None:
                blocked_streams.add(msg.stream_id)

    def run(self):
        ensure_demo_table(self.conn)
        self.stop.install()  # before the keeper thread starts
        self.keeper.start()
        log(self.name, "instance", self.instance, "consumer %r" % self.args.consumer)
        idle_since = time.monotonic()
        try:
            while not self.stopping.is_set():
                wait = self.args.wait
                if self.args.max_idle is not None:
                    idle = time.monotonic() - idle_since
                    if idle >= self.args.max_idle:
                        log(self.name, "no work for %gs: stopping" % self.args.max_idle)
                        break
                    wait = min(wait, self.args.max_idle - idle)
                batch = self.claim(wait)
                if not batch:
                    continue
                self.counts["claimed"] += len(batch)
                self.keeper.hold(batch)
                self.process_batch(batch)
                idle_since = time.monotonic()
        finally:
            self.keeper.stop()
        summary = dict(self.counts, renewed=self.keeper.renewed, instance=self.instance)
        print(json.dumps(summary, sort_keys=True), flush=True)
        self.conn.close()


# ---------------------------------------------------------------------------------------------
# Produce mode
# ---------------------------------------------------------------------------------------------
def demo_messages(count, streams, tag):
    messages = []
    for i in range(count):
        k = i % streams
        messages.append({
            "MessageId": str(uuid.uuid5(DEMO_NAMESPACE, "%s/message/%d" % (tag, i))),
            "StreamId": str(uuid.uuid5(DEMO_NAMESPACE, "%s/stream/%d" % (tag, k))),
            "HandlerName": "ledger.post",
            "MessageType": "LedgerEntryRequested",
            "Envelope": {"account": "acct-%d" % k, "seq": i // streams, "amount": i + 1},
        })
    return messages


def produce(args):
    conn = connect()
    ensure_demo_table(conn)
    messages = demo_messages(args.produce, args.streams, args.tag)
    with conn.cursor() as cur:
        cur.execute(STORE_SQL, (Json(messages), args.consumer))
        new = cur.fetchone()[0]
    conn.commit()
    conn.close()
    print("stored %d new of %d messages (%d duplicates)" % (new, len(messages), len(messages) - new), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--consumer", default="", help="whizbang consumer (dedup scope); default ''")
    p.add_argument("--instance", help="worker instance id (uuid); default: a new random one")
    p.add_argument("--batch", type=int, default=10, help="messages per claim (p_max_rows)")
    p.add_argument("--lease", type=int, default=30, help="lease seconds (p_lease_seconds)")
    p.add_argument("--max-per-stream", type=int, default=100, help="p_max_per_stream")
    p.add_argument("--wait", "--poll", dest="wait", type=float, default=10.0,
                   help="seconds a claim waits in the server for work (claim_work p_wait; --poll: its old name)")
    p.add_argument("--max-idle", type=float, default=None, help="stop after this many seconds without work")
    p.add_argument("--produce", type=int, metavar="N", help="store N demo messages, then exit")
    p.add_argument("--streams", type=int, default=3, help="produce: number of streams")
    p.add_argument("--tag", default="demo", help="produce: message ids derive from it (same tag = redelivery)")
    args = p.parse_args()
    if args.produce is not None:
        if args.produce < 0 or args.streams < 1:
            p.error("--produce must be >= 0 and --streams >= 1")
        produce(args)
    else:
        if args.batch < 1 or args.lease < 1 or args.max_per_stream < 1 or args.wait < 0:
            p.error("--batch, --lease and --max-per-stream must be at least 1, --wait at least 0")
        Worker(args).run()


if __name__ == "__main__":
    main()
