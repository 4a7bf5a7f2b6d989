#!/usr/bin/env python3
"""The settings cache on a distributed install (test/citus/settings_cache.sh, issue 22): a
session's backends (the coordinator's and, through Citus's connections, the nodes') keep the
settings they read, and a change committed by another session reaches them at once: a fail_work
after max_attempts went down to 1 dead-letters. Prints "ok   ..." / "FAIL ..." and "N failed".

    settings_cache.py DSN
"""
import json
import sys
import uuid

import checks
from checks import check, connect, rows, run

checks.init(sys.argv[1])
COUNT = 64


def store(conn, n, consumer):
    ids = [str(uuid.uuid4()) for _ in range(n)]
    body = json.dumps([{"MessageId": m, "HandlerName": "h", "MessageType": "t", "Envelope": {}} for m in ids])
    rows("SELECT outcome FROM whizbang.inbox_receive(%s::jsonb, %s, now(), %s)", (body, consumer, COUNT), conn)
    return ids


def fail(conn, consumer):
    claimed = rows("SELECT message_id::text, lease_token FROM whizbang.claim_work(%s, 'inbox', 1, 30, NULL, %s, 100,"
                   " now(), %s)", (str(uuid.uuid4()), COUNT, consumer), conn)
    if len(claimed) != 1:
        return f"claimed {len(claimed)}"
    return rows("SELECT outcome FROM whizbang.fail_work('inbox', %s::uuid[], ARRAY['boom'], %s::bigint[], NULL, %s)",
                ([claimed[0][0]], [claimed[0][1]], consumer), conn)[0][0]


worker = connect()
other = connect()
store(other, 3, "sc")
check("max_attempts 10: a failure is retried (this session's backends now hold the settings)",
      fail(worker, "sc") == "retry_scheduled")
check("and again", fail(worker, "sc") == "retry_scheduled")
run("UPDATE whizbang.wh_settings SET setting_value = '1' WHERE setting_key = 'max_attempts'", None, other)
got = fail(worker, "sc")
check("another session set max_attempts to 1: this session's next failure is dead-lettered at once",
      got == "dead_lettered", got)
run("UPDATE whizbang.wh_settings SET setting_value = '10' WHERE setting_key = 'max_attempts'", None, other)
store(other, 1, "sc2")
got = fail(worker, "sc2")
check("set back to 10: retried again", got == "retry_scheduled", got)
checks.finish()
