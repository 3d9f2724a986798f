#!/usr/bin/env python3
"""Notifications to many devices: how soon after a commit each push service is reached, and how many deliveries a
second docketd makes, against a release docketd on loopback.

    python3 Benchmarks/push.py --binary .build/release/docketd [--devices 1000] [--waves 10] [--burst 10]

john.doe registers `--devices` Web Push subscriptions, all at one receiver on loopback (an asyncio HTTP/1.1 server
that answers 201 at once and notes when each message arrived; it does not decrypt). Then:
  - waves: beth.anglin assigns john an incident, and again once every device got the last one: the latency from the
    commit (the Table API's answer) to each delivery's arrival, p50/p99 over every delivery of every wave;
  - burst: `--burst` incidents at once: deliveries per second from the first commit to the last arrival.
Prints Markdown rows for docs/performance.md. Standard library only (each message is encrypted and signed by
docketd as for a real push service: RFC 8291 and VAPID).
"""
import argparse
import asyncio
import base64
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from docketd_process import AdminClient, start  # noqa: E402

# A fixed subscription key pair (RFC 8291's example): the receiver does not decrypt, docketd encrypts all the same.
P256DH = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
AUTH = "BTBZMqHH6r4Tts7J_aSIgg"


class Receiver:
    def __init__(self):
        self.arrivals = {}  # topic -> [arrival times]
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self.port = None
        ready = threading.Event()

        async def handle(reader, writer):
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length, topic = 0, ""
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        name = name.strip().lower()
                        if name == b"content-length":
                            length = int(value)
                        elif name == b"topic":
                            topic = value.strip().decode()
                    await reader.readexactly(length)
                    arrived = time.time()
                    with self.lock:
                        self.arrivals.setdefault(topic, []).append(arrived)
                    writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()

        async def serve():
            server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            await server.serve_forever()

        threading.Thread(target=lambda: self.loop.run_until_complete(serve()), daemon=True).start()
        ready.wait(10)

    def count(self, topic):
        with self.lock:
            return len(self.arrivals.get(topic, []))

    def times(self, topic):
        with self.lock:
            return list(self.arrivals.get(topic, []))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--waves", type=int, default=10)
    parser.add_argument("--burst", type=int, default=10)
    args = parser.parse_args()
    receiver = Receiver()
    folder = tempfile.mkdtemp(prefix="docket-push-bench-")
    process, port = start(args.binary, folder, "--push-allow-insecure-endpoints")
    try:
        admin = AdminClient(port)
        john = admin.user_id("john.doe")
        as_john = AdminClient(port)
        as_john.headers["Authorization"] = "Basic " + base64.b64encode(b"john.doe:password").decode()
        started = time.time()
        for index in range(args.devices):
            as_john.call("POST", "/api/docket/push/subscriptions", {
                "endpoint": f"http://127.0.0.1:{receiver.port}/push/{index}", "keys": {"p256dh": P256DH, "auth": AUTH}, "name": f"Device {index}"})
        print(f"registered {args.devices} devices in {time.time() - started:.1f} s", flush=True)
        beth = AdminClient(port)
        beth.headers["Authorization"] = "Basic " + base64.b64encode(b"beth.anglin:password").decode()

        latencies = []
        for wave in range(args.waves):
            created = beth.call("POST", "/api/now/table/incident", {"short_description": f"Wave {wave}", "assigned_to": john})["result"]
            committed = time.time()
            deadline = committed + 60
            while receiver.count(created["sys_id"]) < args.devices and time.time() < deadline:
                time.sleep(0.005)
            times = receiver.times(created["sys_id"])
            if len(times) < args.devices:
                sys.exit(f"wave {wave}: only {len(times)} of {args.devices} deliveries within 60 s")
            latencies += [t - committed for t in times]
            print(f"wave {wave}: first {min(times) - committed:.3f} s, last {max(times) - committed:.3f} s", flush=True)
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000

        ids = []
        first = time.time()
        for index in range(args.burst):
            ids.append(beth.call("POST", "/api/now/table/incident", {"short_description": f"Burst {index}", "assigned_to": john})["result"]["sys_id"])
        deadline = time.time() + 120
        while sum(receiver.count(i) for i in ids) < args.devices * args.burst and time.time() < deadline:
            time.sleep(0.01)
        delivered = sum(receiver.count(i) for i in ids)
        last = max(max(receiver.times(i)) for i in ids if receiver.times(i))
        rate = delivered / (last - first)
        print()
        print("| measure | figure |")
        print("|---|---|")
        print(f"| commit → push service, {args.devices} devices, {args.waves} waves: p50 / p99 | {p50:.0f} ms / {p99:.0f} ms |")
        print(f"| deliveries per second, {args.burst} notifications × {args.devices} devices at once | {rate:,.0f}/s ({delivered} in {last - first:.1f} s) |")
    finally:
        process.terminate()
        process.wait(30)


if __name__ == "__main__":
    main()
