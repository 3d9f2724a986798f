#!/usr/bin/env python3
"""Notifications to many devices: how soon after a commit each push service is reached, and how many deliveries a
second docketd makes, against a release docketd on loopback; then the same with one in ten endpoints hung.

    python3 Benchmarks/push.py --binary .build/release/docketd [--devices 1000] [--waves 10] [--burst 10] [--hung-every 10]

john.doe registers `--devices` Web Push subscriptions at a receiver on loopback (an asyncio HTTP/1.1 server that
answers 201 at once and notes when each message arrived, for which device; it does not decrypt). Then:
  - waves: beth.anglin assigns john an incident, and again once every device got the last one: the latency from the
    commit (the Table API's answer) to each delivery's arrival, p50/p99 over every delivery of every wave;
  - burst: `--burst` incidents at once: deliveries per second from the first commit to the last arrival.
With `--hung-every N` (default 10; 0 runs only the first case) the whole run is made again on a new docketd where
every Nth device's endpoint is another receiver on loopback that accepts connections and reads requests but never
answers: the figures are over the other devices, which must each get every message once (nothing lost, nothing
sent twice). Prints Markdown rows for docs/performance.md. Standard library only (each message is encrypted and
signed by docketd as for a real push service: RFC 8291 and VAPID).
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
    def __init__(self, hung=False):
        self.arrivals = {}  # topic -> [arrival times]
        self.received = {}  # (topic, device) -> how many times
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self.port = None
        ready = threading.Event()

        async def handle(reader, writer):
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length, topic = 0, ""
                    lines = head.split(b"\r\n")
                    device = lines[0].split(b" ")[1].decode().rsplit("/", 1)[-1]
                    for line in lines[1:]:
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
                        self.received.setdefault((topic, device), 0)
                        self.received[(topic, device)] += 1
                    if hung:
                        continue  # read, never answered: the sender waits for its timeout
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


def run(binary, devices, waves, burst, hung_every):
    """One docketd, `devices` subscriptions (every `hung_every`th at a receiver that never answers): the figures
    over the healthy devices."""
    receiver = Receiver()
    hung = Receiver(hung=True)
    healthy = [index for index in range(devices) if not (hung_every and index % hung_every == hung_every - 1)]
    answering = set(healthy)
    folder = tempfile.mkdtemp(prefix="docket-push-bench-")
    process, port = start(binary, folder, "--push-allow-insecure-endpoints")
    try:
        admin = AdminClient(port)
        john = admin.user_id("john.doe")
        as_john = AdminClient(port)
        as_john.headers["Authorization"] = "Basic " + base64.b64encode(b"john.doe:password").decode()
        started = time.time()
        for index in range(devices):
            at = receiver if index in answering else hung
            as_john.call("POST", "/api/docket/push/subscriptions", {
                "endpoint": f"http://127.0.0.1:{at.port}/push/{index}", "keys": {"p256dh": P256DH, "auth": AUTH}, "name": f"Device {index}"})
        registered = time.time() - started
        print(f"registered {devices} devices ({devices - len(healthy)} hung) in {registered:.1f} s", flush=True)
        beth = AdminClient(port)
        beth.headers["Authorization"] = "Basic " + base64.b64encode(b"beth.anglin:password").decode()
        expected = len(healthy)

        latencies = []
        topics = []
        for wave in range(waves):
            created = beth.call("POST", "/api/now/table/incident", {"short_description": f"Wave {wave}", "assigned_to": john})["result"]
            committed = time.time()
            topics.append(created["sys_id"])
            deadline = committed + 60
            while receiver.count(created["sys_id"]) < expected and time.time() < deadline:
                time.sleep(0.005)
            times = receiver.times(created["sys_id"])
            if len(times) < expected:
                sys.exit(f"wave {wave}: only {len(times)} of {expected} deliveries within 60 s")
            latencies += [t - committed for t in times]
            print(f"wave {wave}: first {min(times) - committed:.3f} s, last {max(times) - committed:.3f} s", flush=True)
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000

        ids = []
        first = time.time()
        for index in range(burst):
            ids.append(beth.call("POST", "/api/now/table/incident", {"short_description": f"Burst {index}", "assigned_to": john})["result"]["sys_id"])
        deadline = time.time() + 120
        while sum(receiver.count(i) for i in ids) < expected * burst and time.time() < deadline:
            time.sleep(0.01)
        delivered = sum(receiver.count(i) for i in ids)
        last = max(max(receiver.times(i)) for i in ids if receiver.times(i))
        rate = delivered / (last - first)
        # Nothing lost, nothing sent twice: every healthy device got every message exactly once.
        time.sleep(1)
        with receiver.lock:
            counts = dict(receiver.received)
        missing = sum(1 for t in topics + ids for d in healthy if counts.get((t, str(d)), 0) == 0)
        twice = sum(1 for n in counts.values() if n > 1)
        return {"p50": p50, "p99": p99, "rate": rate, "delivered": delivered, "seconds": last - first, "missing": missing,
                "twice": twice, "healthy": expected, "registered": registered}
    finally:
        process.terminate()
        process.wait(30)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--waves", type=int, default=10)
    parser.add_argument("--burst", type=int, default=10)
    parser.add_argument("--hung-every", type=int, default=10)
    args = parser.parse_args()
    cases = [("every endpoint answers", run(args.binary, args.devices, args.waves, args.burst, 0))]
    if args.hung_every:
        cases.append((f"one in {args.hung_every} endpoints hangs", run(args.binary, args.devices, args.waves, args.burst, args.hung_every)))
    failed = False
    print()
    print("| case | commit → push service p50 / p99 (healthy devices) | deliveries per second | lost / sent twice |")
    print("|---|---|---|---|")
    for name, figures in cases:
        print(f"| {name} ({figures['healthy']} healthy of {args.devices}) | {figures['p50']:.0f} ms / {figures['p99']:.0f} ms | "
              f"{figures['rate']:,.0f}/s ({figures['delivered']} in {figures['seconds']:.1f} s) | {figures['missing']} / {figures['twice']} |")
        failed = failed or figures["missing"] or figures["twice"]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
