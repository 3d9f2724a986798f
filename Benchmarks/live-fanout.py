#!/usr/bin/env python3
"""Live-update fan-out of docketd, against a release build on loopback: over Server-Sent Events
(/api/docket/events) or GraphQL WebSockets (Docket's subscriptions on /api/now/graphql, graphql-transport-ws).

    python3 Benchmarks/live-fanout.py [--transport ws|sse] [--subscribers 1000] [--writes 50] [--idle 10000]
                                      [--users N]

Starts a release docketd with demo data, opens SUBSCRIBERS streams or subscriptions (john.doe, following
incidents that match a query), then creates WRITES incidents one after another through the Table API (from a
second thread) and records, for every subscriber, the time from sending the POST to receiving that incident's
change: mutation-to-delivery latency, p50 and p99 over all deliveries. Then it holds IDLE subscribers open with
nothing happening and reports docketd's resident memory. Two readers measure, one after the other: the Swift
reader (Benchmarks/LiveFanoutClient, over either transport), which times each delivery by the kernel's receive
timestamp, so that its own speed is not measured; then this script's (one reading thread, non-blocking sockets, raw
bytes: a change is recognised by its sys_id), which times a delivery when it gets round to reading it, so that a
burst of a thousand deliveries at once is partly timed as its own reading. --client python runs only the second.
With --users N, the subscribers are N users seeded before docketd starts (`docketd users seed N --prefix fanout.
--role itil --cost 4`: one shared hash of a cheap cost, so that seeding and signing a thousand users in take
seconds) instead of john.doe alone. Prints a Markdown table."""
import argparse
import base64
import json
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from docketd_process import start as start_docketd  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start(binary, data, streams):
    return start_docketd(binary, data, "--live-streams-per-user", str(streams + 10), data="db", wait=30)


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def sse_request(port, auth, query):
    return (f"GET /api/docket/events?table=incident&query={query} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Basic {auth}\r\nAccept: text/event-stream\r\n\r\n").encode()


def ws_frame(text):
    """A masked client text frame."""
    payload = text.encode()
    mask = os.urandom(4)
    head = bytes([0x81])
    if len(payload) < 126:
        head += bytes([0x80 | len(payload)])
    else:
        head += bytes([0x80 | 126]) + len(payload).to_bytes(2, "big")
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def ws_request(port, auth, query):
    document = ('subscription { incident(queryConditions: "%s") { sequence change sys_id record { number { value } '
                'short_description { value } } } }' % query.replace("%3D", "="))
    return (f"GET /api/now/graphql HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n").encode() \
        + ws_frame(json.dumps({"type": "connection_init", "payload": {"Authorization": "Basic " + auth}})) \
        + ws_frame(json.dumps({"type": "subscribe", "id": "1", "payload": {"query": document}}))


def open_streams(port, count, auth, query, transport):
    """`auth`: one Basic credential, or a list that subscriber i takes the (i mod len)th of. Opens them in batches
    of 32, each batch ready before the next: a thousand first sign-ins at once would overrun docketd's bounded
    password-check queue (503 with Retry-After), which a stream that is refused is opened again after."""
    selector = selectors.DefaultSelector()
    auths = auth if isinstance(auth, list) else [auth]
    requests = [(ws_request if transport == "ws" else sse_request)(port, each, query) for each in auths]
    # SSE streams say they are ready; a socket's subscription is running once its acknowledgement came (the
    # subscribe message right behind it is then handled before anything else on that socket).
    ready_marker = b"connection_ack" if transport == "ws" else b"event: ready"
    sockets = []
    deadline = time.time() + 240

    def connect(index):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(requests[index % len(requests)])
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, {"buffer": b"", "ready": False, "index": index})
        return sock

    for batch in range(0, count, 32):
        waiting = {connect(index) for index in range(batch, min(count, batch + 32))}
        while waiting and time.time() < deadline:
            for key, _ in selector.select(timeout=1):
                if key.fileobj not in waiting:
                    continue
                chunk = key.fileobj.recv(65536)
                key.data["buffer"] += chunk
                if ready_marker in key.data["buffer"]:
                    key.data["ready"] = True
                    key.data["buffer"] = b""
                    waiting.discard(key.fileobj)
                    sockets.append(key.fileobj)
                elif not chunk or b" 503 " in key.data["buffer"].split(b"\r\n", 1)[0]:
                    # Refused for now (or closed): open it again shortly.
                    waiting.discard(key.fileobj)
                    selector.unregister(key.fileobj)
                    key.fileobj.close()
                    time.sleep(0.05)
                    waiting.add(connect(key.data["index"]))
        if waiting:
            raise SystemExit(f"only {len(sockets)} of {count} streams became ready")
    return selector, sockets


def post(port, auth, text, **fields):
    """Creates an incident with `text` as its short description (and any other `fields`); returns its sys_id."""
    body = json.dumps({"short_description": text, **fields}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/now/table/incident", data=body, method="POST",
                                     headers={"Authorization": "Basic " + auth, "Content-Type": "application/json",
                                              "Accept": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())["result"]["sys_id"]


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--writes", type=int, default=50)
    parser.add_argument("--idle", type=int, default=10000)
    parser.add_argument("--transport", choices=["ws", "sse"], default="ws")
    parser.add_argument("--binary", help="a docketd to measure instead of this tree's release build")
    parser.add_argument("--reader-pause", type=int, default=2,
                        help="ms the Swift reader waits between passes (it times deliveries by the kernel's receive "
                             "timestamps, so reading in batches leaves the CPUs to docketd without changing them)")
    parser.add_argument("--users", type=int, default=0,
                        help="spread the Swift reader's subscribers over this many new users (subscriber i is user i %% "
                             "USERS), so that fewer subscriptions are alike and share a live group; 0: all john.doe")
    parser.add_argument("--client", choices=["swift", "python"], default="swift",
                        help="Benchmarks/LiveFanoutClient (default, kernel timestamps; then this script's reader too) or only this script's own")
    args = parser.parse_args()
    kind = "WebSocket subscriptions" if args.transport == "ws" else "SSE streams"
    subprocess.run(["swift", "build", "-c", "release", "--product", "docketd"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    bin_path = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
    binary = args.binary or bin_path + "/docketd"
    swift_client = args.client == "swift"
    if swift_client:
        subprocess.run(["swift", "build", "-c", "release", "--product", "live-fanout-client"], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    auth = base64.b64encode(b"john.doe:password").decode()
    admin = base64.b64encode(b"admin:admin").decode()
    rows = []
    with tempfile.TemporaryDirectory() as data:
        seeded_env = {}
        if args.users:
            # The demo data first (docketd seeds it into a new database), then the users, then the server again.
            server, port = start(binary, data, args.subscribers + args.idle)
            server.terminate()
            server.wait()
            began = time.time()
            seeded = subprocess.run([binary, "users", "seed", str(args.users), "--prefix", "fanout.", "--role", "itil",
                                     "--cost", "4", "--data-dir", os.path.join(data, "db")],
                                    input="password\n", capture_output=True, text=True, timeout=600)
            if seeded.returncode != 0:
                raise SystemExit(seeded.stderr)
            print(f"seeded {args.users} users in {time.time() - began:.1f} s", file=sys.stderr)
            seeded_env = {"LIVE_FANOUT_USER_PREFIX": "fanout."}
        server, port = start(binary, data, args.subscribers + args.idle)
        try:
            base_rss = rss_mib(server.pid)
            if swift_client:
                result = subprocess.run([bin_path + "/live-fanout-client", str(port), str(args.subscribers), str(args.writes),
                                         "1", str(args.reader_pause)],
                                        capture_output=True, text=True, timeout=900,
                                        env=dict(os.environ, LIVE_FANOUT_USERS=str(args.users), LIVE_FANOUT_TRANSPORT=args.transport,
                                                 **seeded_env))
                if result.returncode != 0:
                    raise SystemExit(result.stderr)
                p50, p99 = result.stdout.split()[1], result.stdout.split()[3]
                who = f" of {args.users} users" if args.users else ""
                rows.append((f"{args.subscribers} {kind}{who}, {args.writes} writes: mutation to delivery (Swift reader)",
                             f"p50 {p50} ms, p99 {p99} ms"))
            # The Python reader: john.doe, or with --users the seeded users, subscriber i as user i mod USERS (beside
            # the Swift reader over WebSockets, john.doe).
            python_users = args.users if (args.users and (args.transport == "sse" or not swift_client)) else 0
            readers = [base64.b64encode(f"fanout.{str(i + 1).zfill(len(str(python_users)))}:password".encode()).decode()
                       for i in range(python_users)] or auth
            selector, sockets = open_streams(port, args.subscribers, readers, "short_descriptionSTARTSWITHlive-bench",
                                             args.transport)
            time.sleep(1)
            latencies = []
            for index in range(-1, args.writes):
                # The write goes out from another thread, so that reading starts at once; its text is the marker.
                text = f"live-bench {index} {time.time()}"
                sent = time.perf_counter()
                writer = threading.Thread(target=post, args=(port, admin, text))
                writer.start()
                pending = set(sockets)
                deadline = time.time() + 30
                marker = text.encode()
                while pending and time.time() < deadline:
                    for key, _ in selector.select(timeout=1):
                        data_ = key.data
                        data_["buffer"] += key.fileobj.recv(1 << 20)
                        if marker in data_["buffer"] and key.fileobj in pending:
                            if index >= 0:  # the first write warms up
                                latencies.append((time.perf_counter() - sent) * 1000)
                            pending.discard(key.fileobj)
                            data_["buffer"] = data_["buffer"][data_["buffer"].rfind(marker):]
                writer.join()
                if pending:
                    raise SystemExit(f"{len(pending)} subscribers missed write {index}")
            who = f" of {python_users} users" if python_users else ""
            rows.append((f"{args.subscribers} {kind}{who}, {args.writes} writes: mutation to delivery (Python reader)",
                         f"p50 {percentile(latencies, 0.5):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms"))
            for sock in sockets:
                sock.close()
            selector.close()
            time.sleep(1)
            selector, sockets = open_streams(port, args.idle, auth, "active%3Dtrue", args.transport)
            time.sleep(2)
            rows.append((f"{args.idle} idle {kind}: docketd resident memory",
                         f"{rss_mib(server.pid):.0f} MiB ({base_rss:.0f} MiB before any stream)"))
            for sock in sockets:
                sock.close()
        finally:
            server.terminate()
            server.wait()
    print("| measurement | result |")
    print("|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    sys.exit(main())
