#!/usr/bin/env python3
"""What the one rule for references costs a write (step 10): incidents created through the Table API, one after
another on one kept-alive connection, with no reference fields, with three given as sys_ids, and with three given
as names (a display value, a user name, "Name (user_name)"), against a release docketd with demo data (SQLite).

Usage: Benchmarks/reference-writes.py --binary .build/release/docketd [--writes 500] [--rounds 3]
Prints writes per second for each kind, per round, and the median of the rounds.
"""
import argparse
import base64
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def start(binary, folder):
    out = open(os.path.join(folder, "stdout"), "w+")
    process = subprocess.Popen(
        [binary, "--demo", "--port", "0", "--data-dir", os.path.join(folder, "data"), "--log-level", "warning"],
        stdout=out, stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        out.seek(0)
        text = out.read()
        if "listening on" in text:
            return process, int(text.strip().rsplit(":", 1)[1])
        time.sleep(0.1)
    sys.exit("docketd did not start")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--writes", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-bench-")
    process, port = start(args.binary, folder)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        token = base64.b64encode(b"admin:admin").decode()
        headers = {"Authorization": "Basic " + token, "Accept": "application/json", "Content-Type": "application/json"}

        def call(method, path, body=None):
            connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            response = connection.getresponse()
            data = response.read()
            if response.status >= 300:
                sys.exit(f"{method} {path} answered {response.status}: {data[:200]!r}")
            cookie = response.getheader("Set-Cookie")
            if cookie and "Cookie" not in headers:
                headers["Cookie"] = cookie.split(";", 1)[0]
                headers.pop("Authorization", None)  # later requests ride the session, as clients do
            return json.loads(data) if data else None

        def user(name):
            return call("GET", f"/api/now/table/sys_user?sysparm_query=user_name={name}&sysparm_fields=sys_id")["result"][0]["sys_id"]

        group = call("GET", "/api/now/table/sys_user_group?sysparm_query=name=Network&sysparm_fields=sys_id")["result"][0]["sys_id"]
        kinds = {
            "no references": {},
            "3 references as sys_ids": {"assigned_to": user("beth.anglin"), "caller_id": user("abel.tuter"),
                                        "assignment_group": group},
            "3 references as names": {"assigned_to": "beth.anglin", "caller_id": "Abel Tuter (abel.tuter)",
                                      "assignment_group": "Network"},
        }
        results = {kind: [] for kind in kinds}
        for round_ in range(args.rounds):
            for kind, values in kinds.items():
                start_time = time.perf_counter()
                for index in range(args.writes):
                    call("POST", "/api/now/table/incident?sysparm_fields=sys_id",
                         dict(values, short_description=f"bench {round_} {index}"))
                rate = args.writes / (time.perf_counter() - start_time)
                results[kind].append(rate)
                print(f"round {round_ + 1}: {kind}: {rate:.0f} writes/s", flush=True)
        for kind, rates in results.items():
            print(f"median: {kind}: {statistics.median(rates):.0f} writes/s")
    finally:
        process.terminate()
        process.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
