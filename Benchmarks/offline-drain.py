#!/usr/bin/env python3
"""How fast DocketOffline drains a queue once the server is back, and how a local write is observed.

    swift build -c release --product docketd && swift build --product offline-writer
    python3 Benchmarks/offline-drain.py --binary .build/release/docketd --writer .build/debug/offline-writer [--writes 1000]

Queues --writes creates in a fresh OfflineStore while nothing listens (offline-writer --queue-only), then starts
docketd and times `offline-writer --drain` (Batch API, 50 operations a request) until all are on the server.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Offline"))
from kill_client import server_labels, start_docketd  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--writes", type=int, default=1000)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-offline-drain-")
    store = os.path.join(folder, "store.sqlite")
    started = time.monotonic()
    subprocess.run([args.writer, "http://127.0.0.1:9", store, "0", str(args.writes), "--queue-only"], check=True,
                   capture_output=True)
    queued = time.monotonic() - started
    docketd, port = start_docketd(args.binary, folder)
    try:
        started = time.monotonic()
        drained = subprocess.run([args.writer, "http://127.0.0.1:%d" % port, store, "--drain"], capture_output=True, timeout=600)
        elapsed = time.monotonic() - started
        on_server = len(server_labels(port))
    finally:
        docketd.terminate()
        docketd.wait(timeout=30)
    if b"DRAINED" not in drained.stdout or b"STUCK" in drained.stdout or on_server != args.writes:
        sys.exit("drain failed: %d on the server; %s" % (on_server, drained.stdout.decode()[-500:]))
    print("queued %d writes locally in %.2f s (%.2f ms each, process start included); drained them in %.2f s "
          "(%.0f operations/s); %d on the server" % (args.writes, queued, queued * 1000 / args.writes, elapsed,
                                                     args.writes / elapsed, on_server))
    # The first retry after the server's return: a writer kept in sync (keepSynced) with nothing listening on its
    # instance's port until docketd starts there.
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    later = tempfile.mkdtemp(prefix="docket-offline-return-")
    writer = subprocess.Popen([args.writer, "http://127.0.0.1:%d" % port, os.path.join(later, "store.sqlite"), "0", "20"],
                              stdout=subprocess.PIPE, text=True)
    while writer.stdout.readline().strip() != "ACK 19":
        pass
    time.sleep(3)  # the retries back off to their longest wait
    docketd, _ = start_docketd(args.binary, later, port=port)
    try:
        back = time.monotonic()
        while not server_labels(port):
            time.sleep(0.01)
        first = time.monotonic() - back
        writer.wait(timeout=60)
    finally:
        docketd.terminate()
        docketd.wait(timeout=30)
    print("the first queued write was on the server %.2f s after docketd was back (keepSynced retries at most every 1 s)" % first)


if __name__ == "__main__":
    main()
