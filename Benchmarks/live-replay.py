#!/usr/bin/env python3
"""What a live replay costs (step 11): after N incidents are written, a client resumes the event stream from
before them (`/api/docket/events?since=S&follow=false`, as `EventSource` does with Last-Event-ID) and reads to the
`end` event. Timed for a user whose reads are filtered by access rules (abel.tuter sees only incidents he is the
caller of: every event is judged by a query), with a query (john.doe's active incidents), and for the admin (no
filter to judge), against a release docketd with demo data (SQLite). Also checks that a replay longer than
`--live-replay-max-events` is answered `resync` at once.

Usage: Benchmarks/live-replay.py --binary .build/release/docketd [--events 10000] [--rounds 3]
Prints seconds and events per second for each reader, per round, and the median of the rounds.
"""
import argparse
import base64
import http.client
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from docketd_process import AdminClient, start  # noqa: E402


def basic(user, password):
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def warm(port, user, password):
    """One request, so that the user's password check (bcrypt) is cached before anything is timed."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("GET", "/api/now/table/sys_user?sysparm_limit=1&sysparm_fields=sys_id",
                       headers=dict(basic(user, password), Accept="application/json"))
    connection.getresponse().read()
    connection.close()


def replay(port, user, password, since, query=""):
    """Reads a replay to its end; (seconds, changes received, the last event's name)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    started = time.perf_counter()
    connection.request("GET", f"/api/docket/events?since={since}&follow=false{query}",
                       headers=dict(basic(user, password), Accept="text/event-stream"))
    response = connection.getresponse()
    if response.status != 200:
        sys.exit(f"replay answered {response.status}")
    changes, last = 0, None
    for raw in response:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("event: "):
            last = line[7:]
        elif line.startswith("id: ") and last is None:
            changes += 1
        elif line == "":
            if last == "end" or last == "resync":
                break
            last = None
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed, changes, last


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-bench-")
    process, port = start(args.binary, folder, "--live-replay-max-events", str(args.events + 100))
    try:
        admin = AdminClient(port)
        call = admin.call
        abel = admin.user_id("abel.tuter")
        first = replay_head(port)
        # One incident in ten is abel's: his replay reports those, and judges every one.
        for index in range(args.events):
            values = {"short_description": f"replay {index}"}
            if index % 10 == 0:
                values["caller_id"] = abel
            call("POST", "/api/now/table/incident?sysparm_fields=sys_id", values)
        readers = {
            "abel.tuter (access-filtered)": ("abel.tuter", "password", ""),
            "john.doe, table=incident&query=active=true": ("john.doe", "password", "&table=incident&query=active%3Dtrue"),
            "admin (nothing to judge)": ("admin", "admin", ""),
        }
        for user, password, _ in readers.values():
            warm(port, user, password)
        results = {name: [] for name in readers}
        for round_ in range(args.rounds):
            for name, (user, password, query) in readers.items():
                seconds, changes, last = replay(port, user, password, first, query)
                if last != "end":
                    sys.exit(f"{name}: the replay ended with {last}")
                results[name].append(seconds)
                print(f"round {round_ + 1}: {name}: {seconds:.2f} s for {args.events} events "
                      f"({args.events / seconds:,.0f} events/s, {changes} reported)")
        print()
        for name, times in results.items():
            median = statistics.median(times)
            print(f"median: {name}: {median:.2f} s ({args.events / median:,.0f} events/s)")
        process.terminate()
        process.wait(10)
        # Past the limit: resync at once.
        process, port = start(args.binary, folder, "--live-replay-max-events", str(args.events // 2))
        warm(port, "abel.tuter", "password")
        seconds, changes, last = replay(port, "abel.tuter", "password", first)
        print(f"\nwith --live-replay-max-events {args.events // 2}: '{last}' after {seconds * 1000:.0f} ms, "
              f"{changes} changes sent")
        if last != "resync" or changes:
            sys.exit("expected an immediate resync")
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


def replay_head(port):
    """The sequence a replay from now would start after (the `ready` event's id)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/api/docket/events?follow=false", headers=dict(basic("admin", "admin"), Accept="text/event-stream"))
    response = connection.getresponse()
    for raw in response:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("id: "):
            connection.close()
            return int(line[4:])
    sys.exit("no ready event")


if __name__ == "__main__":
    main()
