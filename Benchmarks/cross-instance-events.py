#!/usr/bin/env python3
"""Cross-instance event delivery: two docketd on one PostgreSQL database, an SSE stream on B, writes through A
(and, for comparison, through B). Latency is from sending the POST to the change arriving on the stream.

    python3 Benchmarks/cross-instance-events.py --binary PATH/docketd --database 'postgres://…?schema=NEW' [--writes 200]

The first 5 writes of each kind warm up and are not counted. Prints p50/p99/max for each.
"""
import argparse
import json
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "MultiInstance"))
from kill_instance import request, sse, start  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--database", required=True)
    parser.add_argument("--writes", type=int, default=200)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        os.makedirs(folder + "/a")
        os.makedirs(folder + "/b")
        a, port_a = start(arguments.binary, arguments.database, folder + "/a", True)
        b, port_b = start(arguments.binary, arguments.database, folder + "/b", False)
        arrivals = {}
        ready = threading.Event()

        def on_event(event_id, kind, data):
            if kind == "ready":
                ready.set()
            elif kind == "message":
                arrivals[json.loads(data)["record"].get("short_description")] = time.time()

        stop = threading.Event()
        threading.Thread(target=sse, args=(port_b, "/api/docket/events?table=incident"),
                         kwargs={"on_event": on_event, "stop": stop}, daemon=True).start()
        ready.wait(10)
        results = {"through A, stream on B (cross-instance)": [], "through B, stream on B (same instance)": []}
        for index in range(arguments.writes + 5):
            for port, label in ((port_a, "through A, stream on B (cross-instance)"), (port_b, "through B, stream on B (same instance)")):
                name = "write %d on %d" % (index, port)
                sent = time.time()
                request(port, "POST", "/api/now/table/incident", {"short_description": name})
                while name not in arrivals and time.time() - sent < 5:
                    time.sleep(0.0005)
                if index >= 5:
                    results[label].append((arrivals.get(name, sent + 5) - sent) * 1000)
            time.sleep(0.01)
        for label, values in results.items():
            values.sort()
            print("| %s | %d | %.1f ms | %.1f ms | %.1f ms |" % (
                label, len(values), values[len(values) // 2], values[max(0, int(len(values) * 0.99) - 1)], values[-1]))
        stop.set()
        for process in (a, b):
            process.terminate()
            process.wait()


if __name__ == "__main__":
    main()
