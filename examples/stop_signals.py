"""SIGINT and SIGTERM for the example workers (inbox_worker.py, outbox_relay.py): a stop request
that also ends a claim waiting in the server.

A claim with p_wait sleeps inside claim_work for seconds, and Python runs a signal handler only
when the call returns. So the signals are blocked in every thread and a watcher thread takes
them with sigwait: it sets `requested` and cancels (pg_cancel_backend's client side, PQcancel)
the claim that is waiting, which then ends with QueryCanceled (57014) and holds nothing. A
cancel goes through pgbouncer too. Only calls inside waiting() are canceled: a handler's
transaction always finishes.
"""
import signal
import threading
import time
from contextlib import contextmanager

SIGNALS = {signal.SIGINT, signal.SIGTERM}


class StopSignals:
    def __init__(self, on_signal):
        self.requested = threading.Event()
        self._on_signal = on_signal  # called with the signal number (logging)
        self._lock = threading.Lock()
        self._waiting_conn = None

    def install(self):
        """Call in the main thread before starting any other thread (they inherit the mask)."""
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        threading.Thread(target=self._watch, name="stop-signals", daemon=True).start()

    @contextmanager
    def waiting(self, conn):
        """Around a waiting claim on conn: a stop request cancels it."""
        with self._lock:
            self._waiting_conn = conn
        try:
            yield
        finally:
            with self._lock:
                self._waiting_conn = None

    def _watch(self):
        while True:
            signum = signal.sigwait(SIGNALS)
            self._on_signal(signum)
            self.requested.set()
            # Again until the claim has ended: a cancel that came just before its query reached
            # the server finds the backend idle and does nothing.
            while True:
                with self._lock:
                    conn = self._waiting_conn
                    if conn is None:
                        break
                    conn.cancel()
                time.sleep(0.1)
