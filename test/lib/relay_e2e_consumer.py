#!/usr/bin/env python3
"""The consumer of test/scripts/relay_e2e.sh (python3-pika, python3-psycopg2): reads the queue
the relay publishes into and stores each message into database B's whizbang inbox (PG*
environment), one transaction per message, and acknowledges it only after that transaction
committed. A crash between the commit and the ack makes the broker deliver the message again;
store_inbox_messages recognises it by its MessageId, stores nothing and returns no row for it.

  relay_e2e_consumer.py URL QUEUE STOP PIDFILE [--die-after N] [--plain]

Each delivery is logged in table e2e_delivery in the same transaction (was it new, did the broker
mark it redelivered), so the test can count the repeats that the inbox absorbed.
--die-after N: kill -9 itself after committing its Nth message, before acknowledging it: a
  redelivery of a stored message, whatever the timing of the test's other crashes.
--plain: insert into the plain table e2e_plain instead of the inbox, without deduplication: a
  broken receiver, which the test must catch.
Ends with status 0 when STOP exists and the queue has nothing for it; 3 when database B is gone
(the test's restart; the unacknowledged messages go back to the queue), 4 when the broker is.
"""
import os
import signal
import sys
import time

import pika
import psycopg2

url, queue, stop_file, pid_file = sys.argv[1:5]
options = sys.argv[5:]
die_after = int(options[options.index("--die-after") + 1]) if "--die-after" in options else None
plain = "--plain" in options
with open(pid_file, "w") as f:
    f.write("%d\n" % os.getpid())

deadline = time.time() + 120
while True:
    try:
        db = psycopg2.connect("")
        break
    except psycopg2.OperationalError:
        if time.time() > deadline:
            raise
        time.sleep(0.2)  # B is restarting
cur = db.cursor()

STORE = """SELECT count(*) = 1 FROM whizbang.store_inbox_messages(
             jsonb_build_array(%s::jsonb || '{"HandlerName": "e2e.billing"}'))"""
PLAIN = """INSERT INTO e2e_plain (message_id, stream_id)
           SELECT (m->>'MessageId')::uuid, (m->>'StreamId')::uuid FROM (SELECT %s::jsonb AS m) s
           RETURNING true"""

try:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    # Several messages on their way while one is stored; they are still taken in queue order.
    channel.basic_qos(prefetch_count=20)
except pika.exceptions.AMQPError as e:
    print("consumer: broker: %r" % e, file=sys.stderr)
    sys.exit(4)

stored = 0
try:
    for method, properties, body in channel.consume(queue, inactivity_timeout=0.5):
        if method is None:
            if os.path.exists(stop_file):
                break
            continue
        try:
            cur.execute(PLAIN if plain else STORE, (body.decode("utf-8"),))
            was_new = cur.fetchone()[0]
            cur.execute("INSERT INTO e2e_delivery (message_id, was_new, redelivered) VALUES (%s, %s, %s)",
                        (properties.message_id, was_new, method.redelivered))
            db.commit()
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as e:
            print("consumer: database: %s" % str(e).strip(), file=sys.stderr)
            sys.exit(3)
        stored += 1
        if die_after is not None and stored == die_after:
            os.kill(os.getpid(), signal.SIGKILL)
        channel.basic_ack(method.delivery_tag)
    channel.cancel()
    connection.close()
except pika.exceptions.AMQPError as e:
    print("consumer: broker: %r" % e, file=sys.stderr)
    sys.exit(4)
