#!/usr/bin/env python3
"""What the one rule for references costs a write (step 10): incidents created through the Table API, one after
another on one kept-alive connection, with no reference fields, with three given as sys_ids, and with three given
as names (a display value, a user name, "Name (user_name)"), against a release docketd with demo data (SQLite).

Usage: Benchmarks/reference-writes.py --binary .build/release/docketd [--writes 500] [--rounds 3]
Prints writes per second for each kind, per round, and the median of the rounds.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from docketd_process import AdminClient, start  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--writes", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-bench-")
    process, port = start(args.binary, folder)
    try:
        admin = AdminClient(port)
        call = admin.call
        user = admin.user_id

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
