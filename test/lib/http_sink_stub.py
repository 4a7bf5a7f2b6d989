#!/usr/bin/env python3
"""A web server for test/scripts/relay_http.sh that stands in for an HTTP sink's endpoint.

Binds 127.0.0.1 on a free port and writes the port to --port-file. Every request is appended to
--log as one JSON line (n, method, path, lower-cased headers, body, client port, the answer it
gets) *before* it is answered, so a test can see a request that is still waiting for its answer.
--plan says how to answer the first requests, comma-separated, one entry per request:
  500 / 400 / …  that status;   429:N  429 with "Retry-After: N";   drop  close without an answer
Requests beyond the plan get 200. --hold N:FILE keeps the answer to request N back until FILE
exists (so a test decides when the acknowledgement arrives, without timing).
"""
import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--port-file", required=True)
parser.add_argument("--log", required=True)
parser.add_argument("--plan", default="")
parser.add_argument("--hold", default="")
args = parser.parse_args()

plan = [p for p in args.plan.split(",") if p]
hold_n, hold_file = (int(args.hold.split(":", 1)[0]), args.hold.split(":", 1)[1]) if args.hold else (0, "")
lock = threading.Lock()
count = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the sink should reuse one connection

    def log_message(self, *a):
        pass

    def do_POST(self):
        global count
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock:
            count += 1
            n = count
            answer = plan[n - 1] if n <= len(plan) else "200"
            with open(args.log, "a", encoding="utf-8") as f:
                f.write(json.dumps({
                    "n": n, "method": self.command, "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body.decode("utf-8"), "client_port": self.client_address[1], "answer": answer,
                }) + "\n")
        if n == hold_n:
            while not os.path.exists(hold_file):
                time.sleep(0.05)
        if answer == "drop":
            self.close_connection = True
            return
        status, _, retry_after = answer.partition(":")
        reply = json.dumps({"n": n}).encode()
        self.send_response(int(status))
        if retry_after:
            self.send_header("Retry-After", retry_after)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
tmp = args.port_file + ".tmp"
with open(tmp, "w") as f:
    f.write(str(server.server_address[1]))
os.rename(tmp, args.port_file)  # whole or absent: the test never reads half a number
server.serve_forever()
