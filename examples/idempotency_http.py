#!/usr/bin/env python3
"""An HTTP payments endpoint that honours an "Idempotency-Key" header with whizbang.

    POST /payments
    Authorization: Bearer <api key>
    Idempotency-Key: <up to 255 bytes, chosen by the client, one per intended payment>
    Content-Type: application/json

    {"amount_cents": 1250, "currency": "EUR", "recipient": "acct-42"}

The handler runs in whizbang's *in-transaction mode*: idempotency_begin, the payment INSERT and
idempotency_complete (with the response body as the stored result) commit together, so either
the payment and its stored response both exist or neither does. A concurrent request with the
same key waits on the uncommitted claim and then replays the stored response.

    outcome of idempotency_begin   HTTP answer
    claimed                        perform the payment, store the response: 201 Created
    completed_duplicate            replay the stored response: 200, "Idempotent-Replayed: true"
    in_progress_duplicate          409, Retry-After: 1 (another worker holds the key)
    conflict                       422 (the key was used for a different request body)
    expired_duplicate              409 with an explanation (done before, response expired)

The idempotency scope is 'payments:<caller>', where the caller is derived on the server from the
API key. It is never taken from the request: a "tenant" field in the body is checked against
the caller and refused when it differs, so one caller cannot replay or block another's keys.

Run it:
    PGHOST=... PGDATABASE=... python3 examples/idempotency_http.py 8080
Connection settings come from the standard PG* environment variables (libpq defaults). API keys
come from PAYMENTS_API_KEYS ("key:caller,key:caller"; default "demo-alice:alice,demo-bob:bob").

The database needs the extension and this table:
    CREATE EXTENSION whizbang;
    CREATE TABLE payments (
        id              bigserial PRIMARY KEY,
        caller          text        NOT NULL,
        idempotency_key text        NOT NULL,
        amount_cents    bigint      NOT NULL CHECK (amount_cents > 0),
        currency        text        NOT NULL,
        recipient       text        NOT NULL,
        created_at      timestamptz NOT NULL DEFAULT now()
    );

Needs Python 3.8+ and psycopg2 (Debian: python3-psycopg2). See docs/idempotency.md.
"""

import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg2
import psycopg2.errors
import psycopg2.pool
from psycopg2.extras import Json

MAX_BODY_BYTES = 64 * 1024
MAX_TRANSACTION_ATTEMPTS = 3  # serialization failures are retried (only possible above READ COMMITTED)

BEGIN_SQL = """
    SELECT outcome, token, result, completed_at
      FROM whizbang.idempotency_begin(p_scope => %(scope)s, p_key => %(key)s,
                                      p_fingerprint => whizbang.fingerprint(%(body)s::jsonb),
                                      p_owner => %(owner)s)
"""
PAYMENT_SQL = """
    INSERT INTO payments (caller, idempotency_key, amount_cents, currency, recipient)
    VALUES (%s, %s, %s, %s, %s)
    RETURNING id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
"""
COMPLETE_SQL = "SELECT whizbang.idempotency_complete(%s, %s, %s, %s)"


def load_api_keys():
    spec = os.environ.get("PAYMENTS_API_KEYS", "demo-alice:alice,demo-bob:bob")
    keys = {}
    for pair in spec.split(","):
        api_key, _, caller = pair.strip().partition(":")
        if api_key and caller:
            keys[api_key] = caller
    return keys


def encode(obj):
    """One serialization for first answers and replays, so a replay is byte-identical."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("utf-8")


class HttpError(Exception):
    def __init__(self, status, message, headers=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def validate_payment(body, caller):
    if not isinstance(body, dict):
        raise HttpError(400, "the body must be a JSON object")
    tenant = body.get("tenant")
    if tenant is not None and tenant != caller:
        # The scope comes from the credential; a client-supplied tenant is only checked.
        raise HttpError(403, "tenant does not match the authenticated caller")
    amount = body.get("amount_cents")
    currency = body.get("currency")
    recipient = body.get("recipient")
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        raise HttpError(400, "amount_cents must be a positive integer")
    if not isinstance(currency, str) or not re.fullmatch(r"[A-Z]{3}", currency):
        raise HttpError(400, "currency must be a three-letter ISO 4217 code")
    if not isinstance(recipient, str) or not recipient:
        raise HttpError(400, "recipient must be a non-empty string")
    return amount, currency, recipient


class PaymentsApp:
    def __init__(self, pool, api_keys):
        self.pool = pool
        self.api_keys = api_keys

    def authenticate(self, headers):
        auth = headers.get("Authorization", "")
        scheme, _, credential = auth.partition(" ")
        caller = self.api_keys.get(credential.strip()) if scheme.lower() == "bearer" else None
        if caller is None:
            raise HttpError(401, "unknown or missing API key", {"WWW-Authenticate": "Bearer"})
        return caller

    def create_payment(self, headers, raw_body):
        """Returns (status, extra headers, body bytes)."""
        caller = self.authenticate(headers)
        key = headers.get("Idempotency-Key")
        if key is None or key == "":
            raise HttpError(400, "an Idempotency-Key header is required")
        if len(key.encode("utf-8")) > 255:
            raise HttpError(400, "Idempotency-Key is longer than 255 bytes")
        try:
            text = raw_body.decode("utf-8")
            body = json.loads(text)
        except ValueError:  # UnicodeDecodeError is a ValueError too
            raise HttpError(400, "the body is not valid UTF-8 JSON")
        amount, currency, recipient = validate_payment(body, caller)
        scope = "payments:" + caller

        for attempt in range(1, MAX_TRANSACTION_ATTEMPTS + 1):
            conn = self.pool.getconn()
            try:
                return self._in_transaction(conn, caller, scope, key, text, amount, currency, recipient)
            except psycopg2.errors.SerializationFailure:
                conn.rollback()
                if attempt == MAX_TRANSACTION_ATTEMPTS:
                    raise HttpError(503, "too much contention on this Idempotency-Key; retry", {"Retry-After": "1"})
            except (psycopg2.errors.InvalidParameterValue, psycopg2.errors.NullValueNotAllowed) as e:
                conn.rollback()
                raise HttpError(400, e.diag.message_primary or "invalid request")
            except BaseException:
                conn.rollback()
                raise
            finally:
                self.pool.putconn(conn)

    def _in_transaction(self, conn, caller, scope, key, body_text, amount, currency, recipient):
        """In-transaction mode: begin, the payment and complete commit together."""
        owner = "http:%d:%d" % (os.getpid(), threading.get_ident())
        with conn.cursor() as cur:
            cur.execute(BEGIN_SQL, {"scope": scope, "key": key, "body": body_text, "owner": owner})
            outcome, token, result, completed_at = cur.fetchone()

            if outcome == "claimed":
                cur.execute(PAYMENT_SQL, (caller, key, amount, currency, recipient))
                payment_id, created_at = cur.fetchone()
                response = {
                    "payment_id": payment_id,
                    "status": "created",
                    "amount_cents": amount,
                    "currency": currency,
                    "recipient": recipient,
                    "created_at": created_at,
                }
                cur.execute(COMPLETE_SQL, (scope, key, token, Json(response)))
                if cur.fetchone()[0] != "completed":
                    # Cannot happen in one transaction; if it did, the payment must not stay.
                    conn.rollback()
                    raise HttpError(500, "could not record the idempotency result")
                conn.commit()
                return 201, {"Location": "/payments/%d" % payment_id}, encode(response)

            conn.rollback()  # nothing was written; end the transaction before answering
            if outcome == "completed_duplicate":
                return 200, {"Idempotent-Replayed": "true"}, encode(result)
            if outcome == "in_progress_duplicate":
                raise HttpError(409, "a request with this Idempotency-Key is still being processed; retry later",
                                {"Retry-After": "1"})
            if outcome == "conflict":
                raise HttpError(422, "this Idempotency-Key was already used with a different request body")
            if outcome == "expired_duplicate":
                raise HttpError(409, "this Idempotency-Key was already used for a payment completed at %s; its "
                                     "stored response has expired and cannot be replayed. The payment was not "
                                     "made again. Use a new key only for a new payment."
                                % completed_at.isoformat())
            raise HttpError(500, "unexpected idempotency outcome %r" % outcome)


class Handler(BaseHTTPRequestHandler):
    app = None  # set in main()
    protocol_version = "HTTP/1.1"

    def _send(self, status, headers, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/healthz":
            self._send(200, {}, encode({"ok": True}))
        else:
            self._send(404, {}, encode({"error": "not found"}))

    def do_POST(self):
        try:
            if self.path != "/payments":
                raise HttpError(404, "not found")
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_BODY_BYTES:
                raise HttpError(400 if length <= 0 else 413, "a JSON body of at most %d bytes is required" % MAX_BODY_BYTES)
            raw_body = self.rfile.read(length)
            status, headers, body = self.app.create_payment(self.headers, raw_body)
            self._send(status, headers, body)
        except HttpError as e:
            self._send(e.status, e.headers, encode({"error": e.message}))
        except Exception as e:  # never leak a traceback to the client
            self.log_error("internal error: %r", e)
            self._send(500, {}, encode({"error": "internal error"}))


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8080
    # "" = libpq defaults: PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, ...
    pool = psycopg2.pool.ThreadedConnectionPool(1, 32, "")
    Handler.app = PaymentsApp(pool, load_api_keys())
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("payments API listening on http://127.0.0.1:%d" % port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        pool.closeall()


if __name__ == "__main__":
    main()
