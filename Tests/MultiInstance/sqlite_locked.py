#!/usr/bin/env python3
"""docketd's SQLite file locked by another process (a sqlite3 shell holding a write transaction).

    python3 Tests/MultiInstance/sqlite_locked.py --binary PATH/docketd

Checks, with nothing but the standard library:
  - while another process holds the file's write lock, writes are answered 503 with Retry-After within 5 s (three
    at once, so that two wait behind the first, and not a busy timeout each), a later one at once, and reads still
    work (WAL);
  - once it lets go, the next write is 201 and the refused writes left nothing.
Exits 0 when all hold.
"""

import argparse
import base64
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kill_instance import start  # noqa: E402
from postgres_outage import check, failures  # noqa: E402

AUTH = "Basic " + base64.b64encode(b"admin:admin").decode()


def request(port, method, path, body=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": AUTH, "Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    started = time.monotonic()
    connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = connection.getresponse()
    response.read()
    result = (response.status, response.getheader("Retry-After"), response.getheader("X-Total-Count"), time.monotonic() - started)
    connection.close()
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-locked-")
    process, port = start(args.binary, "sqlite:" + os.path.join(folder, "docket.sqlite"), folder, demo=True)
    holder = None
    try:
        _, _, before, _ = request(port, "GET", "/api/now/table/incident?sysparm_limit=1")
        # Another process takes the write lock and keeps it until told to let go.
        holder = subprocess.Popen(
            [sys.executable, "-c", (
                "import sqlite3, sys\n"
                "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                "db.execute('BEGIN IMMEDIATE')\n"
                "print('locked', flush=True)\n"
                "sys.stdin.readline()\n"
                "db.execute('ROLLBACK')\n"
            ), os.path.join(folder, "docket.sqlite")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        check(holder.stdout.readline().strip() == "locked", "the other process could not lock the file")
        results = []

        def write(index):
            results.append(request(port, "POST", "/api/now/table/incident", {"short_description": "while locked %d" % index}))

        writers = [threading.Thread(target=write, args=(index,)) for index in range(3)]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
        for status, retry_after, _, elapsed in results:
            check(status == 503, "a write while locked answered %d, not 503" % status)
            check(retry_after is not None, "a 503 without Retry-After")
            check(elapsed <= 5.0, "a write while locked took %.1f s" % elapsed)
        print("while locked: writes answered %s in %s s" % (
            [r[0] for r in results], ", ".join("%.2f" % r[3] for r in results)))
        # The first write waits the busy timeout; the ones queued behind it do not wait it again each.
        times = [r[3] for r in results]
        check(max(times) - min(times) <= 1.0, "writes queued behind the first waited %.1f s more than it" % (max(times) - min(times)))
        # Known to be held, the lock is not waited for long again.
        status, retry_after, _, elapsed = request(port, "POST", "/api/now/table/incident", {"short_description": "still locked"})
        check(status == 503 and retry_after is not None, "a write while still locked answered %d" % status)
        check(elapsed <= 1.0, "a write while still locked took %.1f s" % elapsed)
        print("still locked: a write answered %d in %.2f s" % (status, elapsed))
        status, _, _, elapsed = request(port, "GET", "/api/now/table/incident?sysparm_limit=1")
        check(status == 200, "a read while locked answered %d" % status)
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=10)
        holder = None
        status, _, _, _ = request(port, "POST", "/api/now/table/incident", {"short_description": "after the lock"})
        check(status == 201, "the write after the lock answered %d" % status)
        _, _, after, _ = request(port, "GET", "/api/now/table/incident?sysparm_limit=1")
        check(int(after) == int(before) + 1, "incidents: %s before, %s after (one write after the lock)" % (before, after))
    finally:
        if holder:
            holder.kill()
        process.terminate()
        process.wait(timeout=30)
    if failures:
        sys.exit("%d check(s) failed" % len(failures))
    print("sqlite_locked: all checks passed")


if __name__ == "__main__":
    main()
