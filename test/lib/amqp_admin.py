#!/usr/bin/env python3
"""RabbitMQ set-up and read-back for the relay's script tests (python3-pika).

  amqp_admin.py URL queue NAME [single-active]      a durable queue; single-active: with
                                                    x-single-active-consumer (one consumer at a
                                                    time gets messages: a replacement does not
                                                    overtake a dead one's unacknowledged ones)
  amqp_admin.py URL exchange NAME TYPE              a durable exchange
  amqp_admin.py URL bind QUEUE EXCHANGE KEY         a binding
  amqp_admin.py URL count QUEUE / purge QUEUE       how many messages QUEUE holds / empties it
  amqp_admin.py URL drain QUEUE                     every message of QUEUE, taken off it, one JSON
                                                    line each: exchange, routing_key, body and
                                                    the properties the relay's sink sets
amqp-tools' amqp-get prints bodies only; the sink's properties (message_id, type, headers, …)
are what the test checks.
"""
import json
import sys

import pika

url, command, *rest = sys.argv[1:]
connection = pika.BlockingConnection(pika.URLParameters(url))
channel = connection.channel()
if command == "queue":
    arguments = {"x-single-active-consumer": True} if rest[1:] == ["single-active"] else None
    channel.queue_declare(queue=rest[0], durable=True, arguments=arguments)
elif command == "exchange":
    channel.exchange_declare(exchange=rest[0], exchange_type=rest[1], durable=True)
elif command == "bind":
    channel.queue_bind(queue=rest[0], exchange=rest[1], routing_key=rest[2])
elif command == "count":
    print(channel.queue_declare(queue=rest[0], passive=True).method.message_count)
elif command == "purge":
    channel.queue_purge(queue=rest[0])
elif command == "drain":
    while True:
        method, props, body = channel.basic_get(queue=rest[0], auto_ack=True)
        if method is None:
            break
        print(json.dumps({
            "exchange": method.exchange, "routing_key": method.routing_key, "redelivered": method.redelivered,
            "body": body.decode("utf-8"), "content_type": props.content_type, "delivery_mode": props.delivery_mode,
            "message_id": props.message_id, "type": props.type, "app_id": props.app_id,
            "timestamp": props.timestamp, "headers": props.headers,
        }, ensure_ascii=False, default=lambda v: v.decode("utf-8") if isinstance(v, bytes) else str(v)))
else:
    sys.exit("unknown command " + command)
connection.close()
