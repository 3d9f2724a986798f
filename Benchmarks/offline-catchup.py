#!/usr/bin/env python3
"""How fast an OfflineStore catches up after time offline: N changes from the event log, or a resync.

    swift build -c release --product docketd && swift build --product offline-writer
    python3 Benchmarks/offline-catchup.py --binary .build/release/docketd --writer .build/debug/offline-writer \
        [--changes 10000] [--resync]

The store follows incidents; meanwhile --changes incidents are created through the Batch API (100 a request); then
one sync is timed. With --resync docketd keeps at most 1,000 events for a replay: the store first reads --changes
incidents, then 2,000 more are created, and the sync finds the log no longer reaches back and reads every record it
holds again.
"""

import argparse
import base64
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Offline"))
from kill_client import ADMIN, start_docketd  # noqa: E402


def create(port, count, prefix):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body_of = lambda text: base64.b64encode(json.dumps({"short_description": text}).encode()).decode()
    for start in range(0, count, 100):
        requests = [{"id": str(i), "method": "POST", "url": "/api/now/table/incident?sysparm_fields=sys_id",
                     "headers": [{"name": "Content-Type", "value": "application/json"}], "body": body_of("%s %d" % (prefix, i))}
                    for i in range(start, min(count, start + 100))]
        connection.request("POST", "/api/now/v1/batch", body=json.dumps({"rest_requests": requests}),
                           headers={"Authorization": ADMIN, "Content-Type": "application/json", "Accept": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200 or answer.get("unserviced_requests"):
            sys.exit("creating records failed: %d" % response.status)
    connection.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--changes", type=int, default=10000)
    parser.add_argument("--resync", action="store_true")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-offline-catchup-")
    docketd, port = start_docketd(args.binary, folder, extra=["--live-replay-max-events", "1000"] if args.resync else [])
    try:
        store = os.path.join(folder, "store.sqlite")
        if args.resync:
            # The store reads --changes records first; then the log moves on past the replay limit while it is away.
            create(port, args.changes, "held")
            writer = subprocess.Popen([args.writer, "http://127.0.0.1:%d" % port, store, "--catch-up", "held"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
            if writer.stdout.readline().strip() != "READY":
                sys.exit("the writer did not start")
            create(port, 2000, "meanwhile")
        else:
            writer = subprocess.Popen([args.writer, "http://127.0.0.1:%d" % port, store, "--catch-up"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
            if writer.stdout.readline().strip() != "READY":
                sys.exit("the writer did not start")
            started = time.monotonic()
            create(port, args.changes, "offline")
            print("made %d changes on the server in %.1f s" % (args.changes, time.monotonic() - started))
        writer.stdin.write("GO\n")
        writer.stdin.flush()
        print(writer.stdout.readline().strip())
        writer.wait()
    finally:
        docketd.terminate()
        docketd.wait(timeout=30)


if __name__ == "__main__":
    main()
