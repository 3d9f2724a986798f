#!/usr/bin/env python3
"""`docketd backup` while docketd serves writes, then `docketd restore` into a new folder, with a release build.

    python3 Tests/Operations/backup_restore.py --binary PATH/docketd

Checks:
  - `docketd backup --data-dir D --to F` taken while 8 clients create 200 incidents succeeds, prints the event-log
    sequence it holds, and F passes `PRAGMA integrity_check`;
  - F holds exactly the incidents whose insert event is at or before that sequence (read from the live database
    afterwards), every one of them acknowledged to a client;
  - a second backup to F without --force is refused (exit 1, F unchanged); `restore --force` into the folder the
    running docketd serves is refused (exit 1, saying to stop it first), and a write acknowledged afterwards is in
    the database once the server stopped; `restore` over a database that holds data is refused without --force;
  - `docketd restore --from F --data-dir NEW` then `docketd --data-dir NEW` serves exactly those incidents, and a new
    write continues the event log after the backup's sequence.
Exits 0 when all hold.
"""

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "MultiInstance"))
from kill_instance import request as call, start as start_docketd  # noqa: E402


def start(binary, folder):
    return start_docketd(binary, "sqlite:" + os.path.join(folder, "docket.sqlite"), folder, demo=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="docket-backup-")
    data, restored = os.path.join(root, "data"), os.path.join(root, "restored")
    backup = os.path.join(root, "docket-backup.sqlite")
    problems = []
    os.makedirs(data)
    process, port = start(args.binary, data)
    acknowledged, lock = set(), threading.Lock()
    acknowledged_after = None

    def writer(start_index):
        for index in range(start_index, 200, 8):
            status, body = call(port, "POST", "/api/now/table/incident", {"short_description": f"backup e2e {index}"})
            if status == 201:
                with lock:
                    acknowledged.add(json.loads(body)["result"]["sys_id"])
            else:
                problems.append(f"write {index}: {status}")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    try:
        for thread in threads:
            thread.start()
        while True:
            with lock:
                if len(acknowledged) >= 40:
                    break
            time.sleep(0.01)
        result = subprocess.run([args.binary, "backup", "--data-dir", data, "--to", backup], capture_output=True, text=True)
        for thread in threads:
            thread.join()
        if result.returncode != 0:
            sys.exit(f"backup failed: {result.stdout}{result.stderr}")
        print(result.stdout.strip())
        sequence = int(re.search(r"event log up to sequence (\d+)", result.stdout).group(1))
        again = subprocess.run([args.binary, "backup", "--data-dir", data, "--to", backup], capture_output=True, text=True)
        if again.returncode != 1 or "--force" not in again.stderr:
            problems.append(f"a second backup without --force: exit {again.returncode}: {again.stderr.strip()}")
        # A restore under the running server is refused, --force or not: the server keeps its database and what it
        # acknowledges after the attempt survives its restart.
        live = subprocess.run([args.binary, "restore", "--from", backup, "--data-dir", data, "--force"], capture_output=True, text=True)
        if live.returncode != 1 or "Stop it first" not in live.stderr:
            problems.append(f"restore --force under a running docketd: exit {live.returncode}: {live.stdout.strip()} {live.stderr.strip()}")
        status, body = call(port, "POST", "/api/now/table/incident", {"short_description": "after the refused restore"})
        if status != 201:
            problems.append(f"a write after the refused restore: {status}")
        else:
            acknowledged_after = json.loads(body)["result"]["sys_id"]
    finally:
        process.terminate()
        process.wait(timeout=30)

    kept = sqlite3.connect(os.path.join(data, "docket.sqlite"))
    if not kept.execute("SELECT 1 FROM task WHERE sys_id = ?", (acknowledged_after,)).fetchone():
        problems.append("the write acknowledged after the refused restore is not in the database after the server stopped")
    kept.close()
    check = sqlite3.connect(backup)
    if check.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
        problems.append("the backup fails PRAGMA integrity_check")
    in_backup = {row[0] for row in check.execute("SELECT sys_id FROM task WHERE short_description LIKE 'backup e2e %'")}
    check.close()
    live = sqlite3.connect(os.path.join(data, "docket.sqlite"))
    up_to = {row[0] for row in live.execute(
        "SELECT record_id FROM docket_event_log WHERE table_name = 'incident' AND operation = 'insert' AND seq <= ?", (sequence,))}
    live.close()
    if len(acknowledged) != 200:
        problems.append(f"{len(acknowledged)} of 200 writes acknowledged")
    if in_backup != (up_to & acknowledged):
        problems.append(f"the backup holds {len(in_backup)} incidents; the log up to {sequence} names {len(up_to & acknowledged)}")
    if not in_backup or len(in_backup) == 200:
        problems.append(f"the backup was not taken during the writes ({len(in_backup)} of 200 in it)")

    refused = subprocess.run([args.binary, "restore", "--from", backup, "--data-dir", data], capture_output=True, text=True)
    if refused.returncode != 1 or "already holds a database" not in refused.stderr:
        problems.append(f"restore over a database with data: exit {refused.returncode}: {refused.stderr.strip()}")
    result = subprocess.run([args.binary, "restore", "--from", backup, "--data-dir", restored], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"restore failed: {result.stdout}{result.stderr}")
    print(result.stdout.strip())
    process, port = start(args.binary, restored)
    try:
        status, body = call(port, "GET", "/api/now/table/incident?sysparm_query=short_descriptionSTARTSWITHbackup%20e2e"
                                          "&sysparm_fields=sys_id&sysparm_limit=500")
        served = {record["sys_id"] for record in json.loads(body)["result"]}
        if served != in_backup:
            problems.append(f"the restored docketd serves {len(served)} incidents, the backup holds {len(in_backup)}")
        status, _ = call(port, "POST", "/api/now/table/incident", {"short_description": "after the restore"})
        if status != 201:
            problems.append(f"a write after the restore: {status}")
    finally:
        process.terminate()
        process.wait(timeout=30)
    after = sqlite3.connect(os.path.join(restored, "docket.sqlite"))
    head = after.execute("SELECT MAX(seq) FROM docket_event_log").fetchone()[0]
    after.close()
    if head <= sequence:
        problems.append(f"the restored log did not go on after {sequence} (head {head})")

    print(f"backup at sequence {sequence}: {len(in_backup)} of 200 concurrent writes in it; restored and served")
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        sys.exit(1)
    print("backup and restore: all checks passed")


if __name__ == "__main__":
    main()
