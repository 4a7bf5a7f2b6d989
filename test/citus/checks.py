"""Shared by the Python checks of test/citus (moves.py, node_down.py): "ok   ..." / "FAIL ..."
lines, connections to the coordinator, one-statement queries, and the closing "N failed"."""
import sys

import psycopg2

failed = 0
_dsn = None
_admin = None


def init(dsn):
    global _dsn
    _dsn = dsn


def check(label, ok, got=""):
    global failed
    print(("ok   " if ok else "FAIL ") + label + ("" if ok else f" (got: {got})"))
    if not ok:
        failed += 1


def connect(autocommit=True):
    c = psycopg2.connect(_dsn)
    c.autocommit = autocommit
    return c


def admin(fresh=False):
    """The shared autocommit connection (a new one with fresh=True, after a restart)."""
    global _admin
    if _admin is None or fresh:
        _admin = connect()
    return _admin


def rows(sql, args=None, conn=None):
    with (conn or admin()).cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def run(sql, args=None, conn=None):
    """A statement without rows (UPDATE, ...)."""
    with (conn or admin()).cursor() as cur:
        cur.execute(sql, args)


def one(sql, args=None, conn=None):
    return rows(sql, args, conn)[0][0]


def finish():
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)
