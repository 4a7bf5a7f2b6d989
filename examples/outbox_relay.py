#!/usr/bin/env python3
"""An outbox relay for whizbang: claim stored outbox messages, publish them, complete, retry, dead-letter.

    python3 examples/outbox_relay.py [--transport-table NAME] [--batch 10] [--lease 30] [--wait 10] [--listen]
                                     [--max-idle S]
    python3 examples/outbox_relay.py --produce N [--customers 3] [--rollback-every K] [--tag demo]

Relay mode loops:

  1. claim_work(instance, 'outbox', batch, lease, p_wait => --wait seconds) in its own short
     transaction, so the leases are visible to the other relays at once. When nothing is
     claimable the call waits in the server and returns as soon as a transaction that stored
     outbox messages commits (no client-side sleep loop, no LISTEN session: one statement, so it
     works through pgbouncer in transaction mode too), or with no rows when the wait is up;
  2. for each claimed message, in the order claim_work returned them (oldest first per stream):
     publish it to the transport, then mark it published in a new transaction. Publishing cannot
     commit with the database: a relay that dies after the transport accepted a message and before
     its completion committed leaves the message in wh_outbox, and after the lease runs out the
     message is claimed and published AGAIN. That is the outbox's contract: at-least-once delivery.
     The receiver must deduplicate (here: whizbang's inbox on the receiving side does);
  3. when publishing fails, fail_work('outbox', ...) records the error: 'retry_scheduled' (backoff
     from wh_settings) or 'dead_lettered' (max_attempts reached, or the transport refused the
     message for good: whizbang.wh_dead_letters, source 'outbox'). The rest of the message's
     stream in this batch is released, not published, so that the stream keeps its order;
  4. when a batch takes longer than half the lease, the leases of the messages not yet published
     are renewed (renew_leases) before the next publish; a message whose lease was lost is
     skipped (another relay holds it now), and so is the rest of its stream in the batch.

Two ways to mark a message published:

  --complete work       (default) complete_work('outbox', ids, lease_tokens): fenced. A relay
                        whose lease lapsed and whose message another relay re-claimed meanwhile
                        gets 'lease_lost' and changes nothing: the other relay's completion is
                        the one that counts (it publishes the message too, and the receiver's
                        dedup drops one of the two copies).
  --complete published  complete_outbox_published(ids), the seed's contract: deletes the rows
                        whoever holds them and returns how many it deleted (0 for an id already
                        completed: a no-op). No fencing: a stale relay completes a message another
                        relay is publishing at that moment, which is still at-least-once.

Without --transport-table the transport is a stand-in that only logs each message to stderr.
With --transport-table NAME it is a stand-in for "broker + receiving service": publishing a
message opens a transaction on a SEPARATE connection (--receiver-dsn; default: the same PG*
settings) and there
  - calls whizbang.inbox_receive([{MessageId, HandlerName: destination, MessageType, Envelope,
    StreamId, Metadata, Scope}], p_consumer => --receiver-consumer) — the receiver's dedup, keyed
    by the outbox message id, which is the same id at every publish of the message;
  - logs the delivery in NAME_deliveries (message id, receiver outcome, relay, attempt);
  - only when the outcome is 'new': applies the business effect, a row in NAME (order_id taken
    from the envelope), and takes the message off its own inbox work queue (complete_work
    'inbox' without a token: the inbox row was written by this very transaction, nobody else can
    hold it);
  - commits. 'duplicate' applies nothing; 'conflict' (same id, different envelope) is a
    permanent transport error: the outbox message is dead-lettered.
A receiver error (connection refused, ...) is a retryable transport error. --reject-destination D
makes the stand-in refuse messages for D (retryable), to show retries and dead letters.
--crash-after-publish makes the relay die (os._exit(1)) right after its first successful publish,
before completing it: the window the receiver's dedup exists for. --slow-publish S waits S
seconds after each publish, before completing (a slow broker acknowledgement: with a short lease,
shows 'lease_lost').

--listen (the older wake-up, before claim_work had p_wait): the relay LISTENs on channel
whizbang_outbox (own connection, so not through pgbouncer in transaction mode), claims without
waiting and, when a claim found nothing, waits for a notification for up to --wait seconds. The
extension sends one NOTIFY whizbang_outbox per committing transaction that stored outbox rows
when the setting outbox_notify is 'true'. Notifications are only a wake-up: the relay still
claims every --wait seconds, so a missed notification (or outbox_notify off) only delays
publishing.

It stops on SIGINT or SIGTERM (after the current message; the rest of the batch is released,
so another relay can take it at once; a waiting claim is canceled, see stop_signals.py) or after
--max-idle seconds in which claims found no work. At the end it prints one JSON line of counts (claimed, published, completed, ...).

Produce mode is the "application": per order, ONE transaction inserts the order into
outbox_demo_orders and stores its OrderCreated event with store_outbox_messages (destination
'orders', StreamId the customer's stream, or none with --customers 0). Order ids and message ids
derive from --tag and the order number (UUIDv5): running the same command again is a repeated
command, and, as the seed's idempotent command handler does, an order that already exists is
left alone and stores no second event. --rollback-every K rolls back every K-th order's
transaction after both writes: neither the order nor its outbox row survives. It prints one JSON
line: created, existing, rolled_back.

Connection settings come from the standard PG* environment variables (libpq defaults). The
database needs the extension (CREATE EXTENSION whizbang); the demo tables are created when
missing. The roles need the grants shown in docs/outbox.md.

Needs Python 3.8+ and psycopg2 (Debian: python3-psycopg2). See docs/outbox.md.
"""

import argparse
import json
import os
import select
import sys
import time
import uuid

import psycopg2
from psycopg2 import sql
from psycopg2.extras import Json

from stop_signals import StopSignals

DEMO_NAMESPACE = uuid.UUID("0b7c3e8e-5a2f-4d61-8f0e-2d9a4c6b1e37")  # UUIDv5 namespace of demo ids
NOTIFY_CHANNEL = "whizbang_outbox"
MAX_ERROR_CHARS = 2000

CLAIM_SQL = """
    SELECT message_id::text, stream_id::text, destination, message_type, envelope, metadata, scope,
           attempts, lease_token
      FROM whizbang.claim_work(p_instance_id => %(instance)s, p_source => 'outbox',
                               p_max_rows => %(batch)s, p_lease_seconds => %(lease)s,
                               p_max_per_stream => %(per_stream)s, p_wait => make_interval(secs => %(wait)s))
"""
COMPLETE_WORK_SQL = "SELECT outcome FROM whizbang.complete_work('outbox', ARRAY[%s]::uuid[], ARRAY[%s]::bigint[])"
COMPLETE_PUBLISHED_SQL = "SELECT whizbang.complete_outbox_published(ARRAY[%s]::uuid[])"
FAIL_SQL = """
    SELECT outcome, scheduled_for
      FROM whizbang.fail_work('outbox', ARRAY[%s]::uuid[], ARRAY[%s]::text[], ARRAY[%s]::bigint[],
                              ARRAY[%s]::boolean[])
"""
RENEW_SQL = "SELECT message_id::text, outcome FROM whizbang.renew_leases('outbox', %s::uuid[], %s::bigint[], %s)"
RELEASE_SQL = "SELECT message_id::text, outcome FROM whizbang.release_work('outbox', %s::uuid[], %s::bigint[])"
STORE_SQL = "SELECT message_id::text, was_newly_created FROM whizbang.store_outbox_messages(%s::jsonb)"
RECEIVE_SQL = "SELECT outcome FROM whizbang.inbox_receive(%s::jsonb, p_consumer => %s)"
RECEIVER_DONE_SQL = "SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[%s]::uuid[], NULL, %s)"

ORDERS_TABLE_SQL = """
    CREATE TABLE IF NOT EXISTS outbox_demo_orders (
        order_id    uuid        PRIMARY KEY,
        customer_id uuid,
        seq         integer     NOT NULL,
        amount      numeric     NOT NULL,
        tag         text        NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
    )
"""
EFFECTS_TABLE_SQL = """
    CREATE TABLE IF NOT EXISTS {effects} (
        effect_id    bigserial   PRIMARY KEY,
        message_id   uuid        NOT NULL,  -- no unique constraint: a double effect would show
        order_id     uuid,                  -- not unique either
        message_type text        NOT NULL,
        destination  text        NOT NULL,
        applied_at   timestamptz NOT NULL DEFAULT clock_timestamp()
    )
"""
DELIVERIES_TABLE_SQL = """
    CREATE TABLE IF NOT EXISTS {deliveries} (
        delivery_id  bigserial   PRIMARY KEY,
        message_id   uuid        NOT NULL,
        outcome      text        NOT NULL,  -- the receiver's inbox_receive outcome
        relay        text        NOT NULL,
        attempt      integer     NOT NULL,  -- the outbox claim's attempts
        delivered_at timestamptz NOT NULL DEFAULT clock_timestamp()
    )
"""


def log(*parts):
    print(time.strftime("%H:%M:%S"), *parts, file=sys.stderr, flush=True)


def connect(dsn="", autocommit=False):
    conn = psycopg2.connect(dsn)  # "" = the PG* environment variables
    conn.autocommit = autocommit
    return conn


def create_table(conn, lock_name, statement):
    with conn.cursor() as cur:
        # Several processes may start at once: serialise the CREATE ... IF NOT EXISTS.
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (lock_name,))
        cur.execute(statement)
    conn.commit()


class Message:
    __slots__ = ("id", "stream_id", "destination", "message_type", "envelope", "metadata", "scope",
                 "attempts", "token")

    def __init__(self, row):
        (self.id, self.stream_id, self.destination, self.message_type, self.envelope, self.metadata,
         self.scope, self.attempts, self.token) = row


# ---------------------------------------------------------------------------------------------
# Transports. publish(msg) returns a word for the log and the counts, or raises.
# ---------------------------------------------------------------------------------------------
class TransportError(Exception):
    """Publishing failed; retrying may help (fail_work with p_retryable true)."""


class PermanentError(Exception):
    """Publishing cannot succeed: the message is dead-lettered at once (p_retryable false)."""


class LogTransport:
    """Publishes nowhere: logs each message to stderr. Replace publish() with your broker client."""
    name = "log"

    def __init__(self, args, relay_name):
        self.reject = set(args.reject_destination)

    def publish(self, msg):
        if msg.destination in self.reject:
            raise TransportError("destination %r refused by the transport" % msg.destination)
        log("publish", msg.destination, msg.message_type, msg.id, json.dumps(msg.envelope, sort_keys=True))
        return "logged"

    def close(self):
        pass


class InboxTransport:
    """Broker + receiving service: the receiver's inbox dedup and its business effect, one transaction."""
    name = "inbox"

    def __init__(self, args, relay_name):
        self.dsn = args.receiver_dsn
        self.consumer = args.receiver_consumer
        self.reject = set(args.reject_destination)
        self.relay_name = relay_name
        self.effects = sql.Identifier(args.transport_table)
        self.deliveries = sql.Identifier(args.transport_table + "_deliveries")
        self.conn = None
        conn = self.connection()
        create_table(conn, args.transport_table, sql.SQL(EFFECTS_TABLE_SQL).format(effects=self.effects))
        create_table(conn, args.transport_table, sql.SQL(DELIVERIES_TABLE_SQL).format(deliveries=self.deliveries))

    def connection(self):
        if self.conn is None or self.conn.closed:
            self.conn = connect(self.dsn)
        return self.conn

    def publish(self, msg):
        if msg.destination in self.reject:
            raise TransportError("destination %r refused by the transport" % msg.destination)
        element = {"MessageId": msg.id, "HandlerName": msg.destination, "MessageType": msg.message_type,
                   "Envelope": msg.envelope}
        if msg.stream_id is not None:
            element["StreamId"] = msg.stream_id
        if msg.metadata is not None:
            element["Metadata"] = msg.metadata
        if msg.scope is not None:
            element["Scope"] = msg.scope
        try:
            conn = self.connection()
            with conn.cursor() as cur:
                cur.execute(RECEIVE_SQL, (Json([element]), self.consumer))
                outcome = cur.fetchone()[0]
                cur.execute(sql.SQL("INSERT INTO {} (message_id, outcome, relay, attempt) VALUES (%s, %s, %s, %s)")
                            .format(self.deliveries), (msg.id, outcome, self.relay_name, msg.attempts))
                if outcome == "new":
                    cur.execute(sql.SQL("INSERT INTO {} (message_id, order_id, message_type, destination)"
                                        " VALUES (%s, %s, %s, %s)").format(self.effects),
                                (msg.id, order_id_of(msg.envelope), msg.message_type, msg.destination))
                    cur.execute(RECEIVER_DONE_SQL, (msg.id, self.consumer))
                    done = cur.fetchone()[0]
                    if done != "completed":
                        raise TransportError("receiver could not complete its inbox row: %s" % done)
            conn.commit()  # dedup record + delivery log + effect, atomically: the broker's "ack"
        except psycopg2.Error as e:
            self.drop_connection()
            raise TransportError("receiver: %s" % str(e).strip())
        except TransportError:
            self.drop_connection()
            raise
        if outcome in ("conflict", "expired"):
            raise PermanentError("receiver answered %s for message %s" % (outcome, msg.id))
        return outcome

    def drop_connection(self):
        if self.conn is not None and not self.conn.closed:
            try:
                self.conn.rollback()
            except psycopg2.Error:
                pass
            self.conn.close()
        self.conn = None

    def close(self):
        self.drop_connection()


def order_id_of(envelope):
    if isinstance(envelope, dict) and envelope.get("order_id") is not None:
        try:
            return str(uuid.UUID(str(envelope["order_id"])))
        except ValueError:
            return None
    return None


# ---------------------------------------------------------------------------------------------
# Relay
# ---------------------------------------------------------------------------------------------
class Relay:
    def __init__(self, args):
        self.args = args
        self.instance = args.instance or str(uuid.uuid4())
        self.name = "relay-" + self.instance[:8]
        self.stop = StopSignals(
            lambda signum: log(self.name, "got signal %d: stopping after the current message" % signum))
        self.stopping = self.stop.requested
        self.counts = {k: 0 for k in ("claimed", "published", "completed", "lease_lost", "not_found",
                                      "retry_scheduled", "dead_lettered", "released", "renewed",
                                      "notifications", "woken")}
        self.outcomes = {}  # transport answers: new, duplicate, logged
        self.conn = connect()
        self.listen_conn = None
        self.crash_armed = args.crash_after_publish
        transport_class = InboxTransport if args.transport_table else LogTransport
        self.transport = transport_class(args, self.name)

    # -- database calls, each in its own short transaction ------------------------------------
    def claim(self, wait):
        """Claims a batch, waiting in the server up to `wait` seconds for work; [] when stopped."""
        try:
            with self.stop.waiting(self.conn), self.conn.cursor() as cur:
                if self.stopping.is_set():
                    return []
                cur.execute(CLAIM_SQL, {"instance": self.instance, "batch": self.args.batch,
                                        "lease": self.args.lease, "per_stream": self.args.max_per_stream,
                                        "wait": wait})
                rows = [Message(r) for r in cur.fetchall()]
        except psycopg2.extensions.QueryCanceledError:
            self.conn.rollback()  # a canceled claim holds nothing
            if self.stopping.is_set():
                return []
            raise
        self.conn.commit()  # the claim commits on its own: the leases are now visible to everyone
        return rows

    def complete(self, msg):
        with self.conn.cursor() as cur:
            if self.args.complete == "work":
                cur.execute(COMPLETE_WORK_SQL, (msg.id, msg.token))
                outcome = cur.fetchone()[0]
            else:
                cur.execute(COMPLETE_PUBLISHED_SQL, (msg.id,))
                outcome = "completed" if cur.fetchone()[0] == 1 else "not_found"
        self.conn.commit()
        return outcome

    def fail(self, msg, error, retryable):
        with self.conn.cursor() as cur:
            cur.execute(FAIL_SQL, (msg.id, error, msg.token, retryable))
            outcome, scheduled_for = cur.fetchone()
        self.conn.commit()
        return outcome, scheduled_for

    def renew(self, messages):
        """Renews the leases of messages; returns the ids that are no longer ours."""
        with self.conn.cursor() as cur:
            cur.execute(RENEW_SQL, ([m.id for m in messages], [m.token for m in messages], self.args.lease))
            rows = cur.fetchall()
        self.conn.commit()
        lost = set()
        for message_id, outcome in rows:
            if outcome == "renewed":
                self.counts["renewed"] += 1
            else:
                lost.add(message_id)
                self.counts[outcome] = self.counts.get(outcome, 0) + 1
                log(self.name, "renew", message_id, outcome)
        return lost

    def release(self, messages):
        if not messages:
            return
        with self.conn.cursor() as cur:
            cur.execute(RELEASE_SQL, ([m.id for m in messages], [m.token for m in messages]))
            self.counts["released"] += sum(1 for _, outcome in cur.fetchall() if outcome == "released")
        self.conn.commit()

    # -- one message ---------------------------------------------------------------------------
    def relay_one(self, msg):
        """Publishes one message and completes it; returns the outcome word."""
        try:
            answer = self.transport.publish(msg)
        except (TransportError, PermanentError) as e:
            error = ("%s: %s" % (type(e).__name__, e))[:MAX_ERROR_CHARS]
            outcome, scheduled_for = self.fail(msg, error, not isinstance(e, PermanentError))
            log(self.name, "failed", msg.id, "attempt", msg.attempts, "->", outcome,
                scheduled_for.isoformat() if scheduled_for else "", "|", error)
            return outcome
        self.counts["published"] += 1
        self.outcomes[answer] = self.outcomes.get(answer, 0) + 1
        log(self.name, "published", msg.id, "to", msg.destination, "attempt", msg.attempts, "->", answer)
        if self.crash_armed:
            # The transport has the message; wh_outbox still has it, leased to us. Die here.
            log(self.name, "--crash-after-publish: exiting before completing", msg.id)
            os._exit(1)
        if self.args.slow_publish:
            time.sleep(self.args.slow_publish)
        outcome = self.complete(msg)
        if outcome != "completed":
            # lease_lost: another relay re-claimed the message after our lease ran out; it
            # publishes it too, and its completion counts. not_found: completed meanwhile.
            log(self.name, "complete", msg.id, "->", outcome)
        return outcome

    def process_batch(self, batch):
        blocked_streams = set()  # streams whose earlier message in this batch was not completed
        renewed_at = time.monotonic()
        for i, msg in enumerate(batch):
            if self.stopping.is_set():
                self.release(batch[i:])
                return
            if msg.stream_id is not None and msg.stream_id in blocked_streams:
                # Keep the stream's order: it waits for the earlier message. After a retry the
                # server has given it back already (the release answers lease_lost); after a
                # lost lease or a stop it has not.
                self.release([msg])
                continue
            if time.monotonic() - renewed_at > self.args.lease / 2.0:
                lost = self.renew(batch[i:])
                renewed_at = time.monotonic()
                if msg.id in lost:
                    if msg.stream_id is not None:
                        blocked_streams.add(msg.stream_id)
                    continue
            outcome = self.relay_one(msg)
            self.counts[outcome] = self.counts.get(outcome, 0) + 1
            if outcome != "completed" and outcome != "dead_lettered" and msg.stream_id is not None:
                blocked_streams.add(msg.stream_id)

    # -- waiting for work -----------------------------------------------------------------------
    def drain_notifications(self):
        self.listen_conn.poll()
        n = len(self.listen_conn.notifies)
        del self.listen_conn.notifies[:]
        self.counts["notifications"] += n
        return n

    def wait_for_notification(self, seconds):
        """--listen: waits up to `seconds` for a notification, or until a stop is requested."""
        deadline = time.monotonic() + seconds
        if self.drain_notifications():
            self.counts["woken"] += 1
            return
        while not self.stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            readable, _, _ = select.select([self.listen_conn], [], [], min(left, 0.5))
            if readable and self.drain_notifications():
                self.counts["woken"] += 1
                log(self.name, "woken by NOTIFY", NOTIFY_CHANNEL)
                return

    def run(self):
        self.stop.install()
        if self.args.listen:
            # LISTEN before the first claim: a row stored after that claim also sends a
            # notification we will see.
            self.listen_conn = connect(autocommit=True)
            with self.listen_conn.cursor() as cur:
                cur.execute("LISTEN " + NOTIFY_CHANNEL)
        log(self.name, "instance", self.instance, "transport", self.transport.name,
            "complete via", self.args.complete, "listen" if self.listen_conn else "wait in claim_work")
        idle_since = time.monotonic()
        while not self.stopping.is_set():
            wait = self.args.wait
            if self.args.max_idle is not None:
                idle = time.monotonic() - idle_since
                if idle >= self.args.max_idle:
                    log(self.name, "no work for %gs: stopping" % self.args.max_idle)
                    break
                wait = min(wait, self.args.max_idle - idle)
            if self.listen_conn is not None:
                self.drain_notifications()  # the claim below covers whatever they announced
                batch = self.claim(0)
                if not batch:
                    self.wait_for_notification(wait)
                    continue
            else:
                batch = self.claim(wait)
                if not batch:
                    continue
            self.counts["claimed"] += len(batch)
            self.process_batch(batch)
            idle_since = time.monotonic()
        summary = dict(self.counts, instance=self.instance, transport=self.transport.name,
                       complete=self.args.complete, outcomes=self.outcomes)
        print(json.dumps(summary, sort_keys=True), flush=True)
        self.transport.close()
        if self.listen_conn is not None:
            self.listen_conn.close()
        self.conn.close()


# ---------------------------------------------------------------------------------------------
# Produce mode: the application
# ---------------------------------------------------------------------------------------------
def produce(args):
    conn = connect()
    create_table(conn, "outbox_demo_orders", ORDERS_TABLE_SQL)
    counts = {"created": 0, "existing": 0, "rolled_back": 0}
    for n in range(1, args.produce + 1):
        order_id = uuid.uuid5(DEMO_NAMESPACE, "%s/order/%d" % (args.tag, n))
        customer_id = (uuid.uuid5(DEMO_NAMESPACE, "%s/customer/%d" % (args.tag, n % args.customers))
                       if args.customers > 0 else None)
        amount = 10 * n
        with conn.cursor() as cur:
            # The idempotent command handler of the seed: an order that exists already is left
            # alone, and no second event is stored for it.
            cur.execute("INSERT INTO outbox_demo_orders (order_id, customer_id, seq, amount, tag)"
                        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (order_id) DO NOTHING RETURNING order_id",
                        (str(order_id), customer_id and str(customer_id), n, amount, args.tag))
            if cur.fetchone() is None:
                conn.commit()
                counts["existing"] += 1
                continue
            event = {
                "MessageId": str(uuid.uuid5(DEMO_NAMESPACE, "OrderCreated/%s" % order_id)),
                "Destination": "orders",
                "MessageType": "OrderCreated",
                "Envelope": {"order_id": str(order_id), "customer_id": customer_id and str(customer_id),
                             "seq": n, "amount": amount},
                "IsEvent": True,
            }
            if customer_id is not None:
                event["StreamId"] = str(customer_id)
            # Same transaction as the order: both commit, or neither does.
            cur.execute(STORE_SQL, (Json([event]),))
            message_id, was_new = cur.fetchone()
            if not was_new:
                log("produce: outbox message %s was already stored (an application bug?)" % message_id)
        if args.rollback_every and n % args.rollback_every == 0:
            conn.rollback()  # the application fails after both writes: neither survives
            counts["rolled_back"] += 1
        else:
            conn.commit()
            counts["created"] += 1
    conn.close()
    print(json.dumps(counts, sort_keys=True), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--instance", help="relay instance id (uuid); default: a new random one")
    p.add_argument("--batch", type=int, default=10, help="messages per claim (p_max_rows)")
    p.add_argument("--lease", type=int, default=30, help="lease seconds (p_lease_seconds)")
    p.add_argument("--max-per-stream", type=int, default=100, help="p_max_per_stream")
    p.add_argument("--wait", "--poll", dest="wait", type=float, default=10.0,
                   help="seconds a claim waits in the server for work (claim_work p_wait), or with --listen "
                        "for a notification (--poll: its old name)")
    p.add_argument("--max-idle", type=float, default=None, help="stop after this many seconds without work")
    p.add_argument("--listen", action="store_true", help="LISTEN whizbang_outbox: wake up on a NOTIFY")
    p.add_argument("--complete", choices=("work", "published"), default="work",
                   help="complete_work with lease tokens (fenced; default) or complete_outbox_published")
    p.add_argument("--transport-table", metavar="NAME",
                   help="publish into the receiving service's inbox; its effect table is NAME")
    p.add_argument("--receiver-dsn", default="", help="libpq connection string of the receiver (default: PG*)")
    p.add_argument("--receiver-consumer", default="receiver", help="the receiver's inbox consumer")
    p.add_argument("--reject-destination", action="append", default=[], metavar="D",
                   help="the transport refuses messages for D (retryable error); repeatable")
    p.add_argument("--crash-after-publish", action="store_true",
                   help="exit(1) right after the first publish, before completing it")
    p.add_argument("--slow-publish", type=float, default=0.0, metavar="S",
                   help="wait S seconds after each publish before completing it")
    p.add_argument("--produce", type=int, metavar="N", help="application mode: create N orders, then exit")
    p.add_argument("--customers", type=int, default=3, help="produce: customer streams (0: no StreamId)")
    p.add_argument("--rollback-every", type=int, default=0, metavar="K",
                   help="produce: roll back every K-th order's transaction")
    p.add_argument("--tag", default="demo", help="produce: ids derive from it (same tag = same commands)")
    args = p.parse_args()
    if args.produce is not None:
        if args.produce < 0 or args.customers < 0 or args.rollback_every < 0:
            p.error("--produce, --customers and --rollback-every must be >= 0")
        produce(args)
    else:
        if args.batch < 1 or args.lease < 1 or args.max_per_stream < 1 or args.wait < 0:
            p.error("--batch, --lease and --max-per-stream must be at least 1, --wait at least 0")
        Relay(args).run()


if __name__ == "__main__":
    main()
