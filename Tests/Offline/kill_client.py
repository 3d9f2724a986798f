#!/usr/bin/env python3
"""DocketOffline's promise under SIGKILL and lost answers: what the store acknowledged reaches the server once.

    python3 Tests/Offline/kill_client.py --binary PATH/docketd --writer PATH/offline-writer [--writes 1000] \
        [--kills 200] [--drop 0.1]

Starts a release docketd with demo data (SQLite), and between it and the client a proxy that forwards every request
but, for a share (--drop) of them, drops the answer after the server answered (the write is committed; the client
sees the connection close). Then, --kills times, starts offline-writer (which creates records w-N through an
OfflineStore kept in sync with keepSynced, printing "ACK N" once each local write returned) and kills it with
SIGKILL after a random moment, until --writes writes were acknowledged. Finally it drains the store without the
proxy and checks, reading the server as admin:
  - every acknowledged write is on the server exactly once;
  - no write is there twice, and none is there that the writer never started.
Prints the counts and timings. Exits 0 when all hold.
"""

import argparse
import base64
import http.client
import http.server
import json
import os
import random
import signal
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

ADMIN = "Basic " + base64.b64encode(b"admin:admin").decode()
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization", "host", "content-length"}


def start_docketd(binary, folder, port=0, extra=()):
    """A demo docketd on `port` (0: a free one) with its data in `folder`, and `extra` arguments: its process and port.
    Started again on the same folder and port, it serves the same data."""
    out = open(os.path.join(folder, "stdout"), "w+")
    err = open(os.path.join(folder, "stderr"), "a")
    process = subprocess.Popen([binary, "--demo", "--port", str(port), "--data-dir", os.path.join(folder, "data"),
                                "--log-level", "warning", *extra], stdout=out, stderr=err)
    for _ in range(1800):  # up to 3 minutes: a loaded machine starts the demo slowly
        out.seek(0)
        line = out.read()
        if "listening on" in line:
            return process, int(line.strip().rsplit(":", 1)[1])
        if process.poll() is not None:
            break
        time.sleep(0.1)
    sys.exit("docketd did not start: " + open(os.path.join(folder, "stderr")).read())


class Proxy(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # A writer killed mid-request leaves a broken pipe: expected here.

    def __init__(self, upstream, drop):
        self.upstream = upstream
        self.drop = drop
        self.dropped = 0
        self.cut = 0
        self.forwarded = 0
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def read_body(self):
        """The request's whole body (None for none), or raises EOFError when the client went away before sending all
        of it: a writer killed between its headers and its body. Such a request is never forwarded, as no proxy
        forwards half a request; forwarding the part (an empty body is a valid create) once made the server record
        the write's Idempotency-Key for an empty record, and the whole request sent again was refused as another
        request under the same key."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            # URLSession may send a body in chunks.
            body = b""
            while True:
                line = self.rfile.readline()
                if not line.endswith(b"\n"):
                    raise EOFError
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:
                        trailer = self.rfile.readline()
                        if not trailer.endswith(b"\n"):
                            raise EOFError
                        if trailer in (b"\r\n", b"\n"):
                            return body
                chunk = self.rfile.read(size)
                if len(chunk) < size or not self.rfile.readline().endswith(b"\n"):
                    raise EOFError
                body += chunk
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return None
        body = self.rfile.read(length)
        if len(body) < length:
            raise EOFError
        return body

    def forward(self):
        try:
            body = self.read_body()
        except EOFError:
            with self.server.lock:
                self.server.cut += 1
            self.close_connection = True
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream, timeout=30)
        upstream.request(self.command, self.path, body=body, headers=headers)
        response = upstream.getresponse()
        data = response.read()
        upstream.close()
        with self.server.lock:
            self.server.forwarded += 1
            drop = self.command != "GET" and random.random() < self.server.drop
            if drop:
                self.server.dropped += 1
        if drop:
            # The server committed; the client never hears of it.
            self.close_connection = True
            return
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = forward


def server_labels(port):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    query = urllib.parse.urlencode({"sysparm_query": "short_descriptionSTARTSWITHw-", "sysparm_fields": "short_description",
                                    "sysparm_limit": "10000"})
    connection.request("GET", "/api/now/table/incident?" + query, headers={"Authorization": ADMIN, "Accept": "application/json"})
    response = connection.getresponse()
    data = json.loads(response.read())
    connection.close()
    if "result" not in data:
        sys.exit("reading the server's records answered %d: %s" % (response.status, json.dumps(data)[:300]))
    return [row["short_description"] for row in data["result"]]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--drop", type=float, default=0.1)
    args = parser.parse_args()
    random.seed(int(os.environ.get("SEED", "14")))
    folder = tempfile.mkdtemp(prefix="docket-kill-client-")
    docketd, port = start_docketd(args.binary, folder)
    proxy = Proxy(port, args.drop)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    store = os.path.join(folder, "store.sqlite")
    acked, started_up_to, kills = set(), 0, 0
    failures = []
    began = time.monotonic()
    try:
        per_run = max(1, (args.writes + args.kills - 1) // args.kills) * 2
        while kills < args.kills or len(acked) < args.writes:
            writer = subprocess.Popen([args.writer, "http://127.0.0.1:%d" % proxy.server_address[1], store, str(started_up_to),
                                       str(per_run)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(random.uniform(0.02, 0.35))
            writer.send_signal(signal.SIGKILL)
            out, err = writer.communicate()
            kills += 1
            lines = out.decode().split()
            run_acks = [int(lines[i + 1]) for i, word in enumerate(lines) if word == "ACK"]
            acked.update(run_acks)
            if writer.returncode not in (-signal.SIGKILL, 0):
                failures.append("the writer failed (%s): %s" % (writer.returncode, err.decode()[-500:]))
                break
            # A write started after the last acknowledged one may have been committed without its ACK: never reused.
            started_up_to = (max(run_acks) + 2) if run_acks else started_up_to + 1
            if kills > args.kills * 3:
                failures.append("only %d writes acknowledged after %d kills" % (len(acked), kills))
                break
        killing = time.monotonic() - began
        import sqlite3
        waiting = sqlite3.connect(store).execute("SELECT COUNT(*) FROM operation").fetchone()[0]
        drain_start = time.monotonic()
        drained = subprocess.run([args.writer, "http://127.0.0.1:%d" % port, store, "--drain"], capture_output=True, timeout=300)
        drain = time.monotonic() - drain_start
        if b"DRAINED" not in drained.stdout:
            failures.append("the queue did not drain: %s" % drained.stderr.decode()[-500:])
        stuck = [line for line in drained.stdout.decode().splitlines() if line.startswith("STUCK")]
        if stuck:
            failures.append("%d operations were not accepted: %s" % (len(stuck), stuck[:5]))
        labels = server_labels(port)
        counts = {}
        for label in labels:
            counts[label] = counts.get(label, 0) + 1
        twice = sorted(label for label, count in counts.items() if count > 1)
        missing = sorted(index for index in acked if counts.get("w-%d" % index, 0) != 1)
        never = sorted(label for label in counts if int(label[2:]) >= started_up_to + 2 * per_run)
        if twice:
            failures.append("%d writes are on the server more than once: %s" % (len(twice), twice[:10]))
        if missing:
            failures.append("%d acknowledged writes are not on the server once: %s" % (len(missing), missing[:10]))
        if never:
            failures.append("writes the writer never started are on the server: %s" % never[:10])
        print("kill_client: %d kills, %d writes acknowledged, %d on the server (%d sent but unacknowledged), in %.1f s; "
              "%d answers dropped of %d forwarded, %d requests cut short by a kill and not forwarded; drained the %d still queued "
              "in %.1f s" % (
                  kills, len(acked), len(labels), len(labels) - len(acked & {int(l[2:]) for l in counts}), killing,
                  proxy.dropped, proxy.forwarded, proxy.cut, waiting, drain))
    finally:
        proxy.shutdown()
        docketd.terminate()
        docketd.wait(timeout=30)
    if failures:
        for failure in failures:
            print("FAIL:", failure)
        print("stderr of docketd:\n" + open(os.path.join(folder, "stderr")).read()[-3000:])
        sys.exit("%d check(s) failed" % len(failures))
    print("kill_client: all checks passed")


if __name__ == "__main__":
    main()
