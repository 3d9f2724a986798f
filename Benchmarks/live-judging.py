#!/usr/bin/env python3
"""Live updates to viewers who each see something else, against a release build on loopback.

    python3 Benchmarks/live-judging.py [--users 1000] [--writes 50] [--binary PATH]

Seeds USERS accounts without roles (`docketd users seed USERS --prefix judge. --cost 4`): the standard rules let
each of them read only the tasks they are involved in, so every one of them is a view of its own and every change
must be judged for each. Opens one SSE stream per user (following incidents), then creates WRITES incidents one
after another, each with the next user as its caller (so that exactly one stream shows it), and records the time
from sending the POST to that user's stream receiving the change, and docketd's CPU time per write. What it
measures is the judging: one statement per event for every 64 views (``LiveRegistry``) against two per view.
Prints a Markdown table."""
import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from docketd_process import start as start_docketd  # noqa: E402

spec = __import__("importlib.util").util.spec_from_file_location(
    "live_fanout", os.path.join(os.path.dirname(os.path.abspath(__file__)), "live-fanout.py"))
fanout = __import__("importlib.util").util.module_from_spec(spec)
spec.loader.exec_module(fanout)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--writes", type=int, default=50)
    parser.add_argument("--binary", help="a docketd to measure instead of this tree's release build")
    args = parser.parse_args()
    binary = args.binary
    if not binary:
        subprocess.run(["swift", "build", "-c", "release", "--product", "docketd"], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        binary = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout.strip() + "/docketd"
    admin = base64.b64encode(b"admin:admin").decode()
    width = len(str(args.users))
    names = [f"judge.{str(i + 1).zfill(width)}" for i in range(args.users)]
    with tempfile.TemporaryDirectory() as data:
        server, port = fanout.start(binary, data, args.users)
        server.terminate()
        server.wait()
        seeded = subprocess.run([binary, "users", "seed", str(args.users), "--prefix", "judge.", "--cost", "4",
                                 "--data-dir", os.path.join(data, "db")],
                                input="password\n", capture_output=True, text=True, timeout=600)
        if seeded.returncode != 0:
            raise SystemExit(seeded.stderr)
        server, port = fanout.start(binary, data, args.users)
        try:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/api/now/table/sys_user?sysparm_query=user_nameSTARTSWITHjudge."
                f"&sysparm_fields=sys_id,user_name&sysparm_limit={args.users}",
                headers={"Authorization": "Basic " + admin, "Accept": "application/json"})
            with urllib.request.urlopen(request) as response:
                ids = {row["user_name"]: row["sys_id"] for row in json.loads(response.read())["result"]}
            readers = [base64.b64encode(f"{name}:password".encode()).decode() for name in names]
            selector, sockets = fanout.open_streams(port, args.users, readers, "short_descriptionSTARTSWITHjudge-bench", "sse")
            by_index = {}
            for key in selector.get_map().values():
                by_index[key.data["index"]] = key.fileobj
            time.sleep(1)
            latencies = []
            cpu_before = None
            for index in range(-1, args.writes):
                if index == 0:
                    cpu_before = cpu_seconds(server.pid)
                user = (index + 1) % args.users
                text = f"judge-bench {index} {time.time()}"
                sent = time.perf_counter()
                writer = threading.Thread(target=fanout.post, args=(port, admin, text),
                                          kwargs={"caller_id": ids[names[user]]})
                writer.start()
                target = by_index[user]
                marker = text.encode()
                deadline = time.time() + 60
                received = False
                while not received and time.time() < deadline:
                    for key, _ in selector.select(timeout=1):
                        key.data["buffer"] += key.fileobj.recv(1 << 20)
                        if key.fileobj is target and marker in key.data["buffer"]:
                            received = True
                            if index >= 0:
                                latencies.append((time.perf_counter() - sent) * 1000)
                        key.data["buffer"] = key.data["buffer"][-4096:]
                writer.join()
                if not received:
                    raise SystemExit(f"{names[user]} never received write {index}")
            cpu = (cpu_seconds(server.pid) - cpu_before) / args.writes * 1000
            for sock in sockets:
                sock.close()
        finally:
            server.terminate()
            server.wait()
    print("| measurement | result |")
    print("|---|---|")
    print(f"| {args.users} SSE streams of {args.users} users who each see their own incidents, {args.writes} writes:"
          f" mutation to delivery | p50 {fanout.percentile(latencies, 0.5):.1f} ms,"
          f" p99 {fanout.percentile(latencies, 0.99):.1f} ms |")
    print(f"| the same: docketd CPU per write | {cpu:.1f} ms |")


if __name__ == "__main__":
    sys.exit(main())
