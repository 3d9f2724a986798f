#!/usr/bin/env python3
"""Two docketd on one PostgreSQL database; one is killed with SIGKILL while clients write through it.

    python3 Tests/MultiInstance/kill_instance.py --binary PATH/docketd --database postgres://…?schema=NEW

Checks, with nothing but the standard library:
  - every write instance A acknowledged (201) before it died is there, read through instance B;
  - a live stream (SSE, /api/docket/events) that followed A resumes on B with Last-Event-ID and, together with
    what it had from A, receives every event of the log after its start in order, each once (those written
    through B while it was away included): the same list the log itself holds (read through B with follow=false).
Exits 0 when all hold; prints what failed otherwise.
"""

import argparse
import base64
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

AUTH = "Basic " + base64.b64encode(b"admin:admin").decode()


def start(binary, database, folder, demo):
    out = open(os.path.join(folder, "stdout"), "w+")
    err = open(os.path.join(folder, "stderr"), "w")
    args = [binary, "--port", "0", "--data-dir", folder, "--database", database, "--log-level", "warning"]
    if demo:
        args.append("--demo")
    process = subprocess.Popen(args, stdout=out, stderr=err)
    for _ in range(1800):  # up to 3 minutes: a loaded machine starts the demo slowly
        out.seek(0)
        line = out.read()
        if "listening on" in line:
            port = int(line.strip().rsplit(":", 1)[1])
            return process, port
        if process.poll() is not None:
            break
        time.sleep(0.1)
    sys.exit("docketd did not start: " + open(os.path.join(folder, "stderr")).read())


def request(port, method, path, body=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    all_headers = {"Authorization": AUTH, "Accept": "application/json"}
    if body is not None:
        all_headers["Content-Type"] = "application/json"
    all_headers.update(headers or {})
    connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=all_headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def sse(port, path, last_event_id=None, on_event=None, stop=None):
    """Reads an SSE stream; calls on_event(id, event, data) per message; returns when it ends or breaks."""
    headers = {"Authorization": AUTH, "Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        if response.status != 200:
            raise RuntimeError("SSE answered %d: %s" % (response.status, response.read()[:200]))
        fields = {}
        while stop is None or not stop.is_set():
            line = response.fp.readline()
            if not line:
                return
            line = line.decode().rstrip("\n")
            if line == "":
                if "data" in fields or "event" in fields:
                    on_event(fields.get("id"), fields.get("event", "message"), fields.get("data", ""))
                    if fields.get("event") == "end":
                        return
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
    except (OSError, http.client.HTTPException):
        return
    finally:
        connection.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--database", required=True)
    parser.add_argument("--writers", type=int, default=4)
    arguments = parser.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        os.makedirs(os.path.join(folder, "a"))
        os.makedirs(os.path.join(folder, "b"))
        a, port_a = start(arguments.binary, arguments.database, os.path.join(folder, "a"), demo=True)
        b, port_b = start(arguments.binary, arguments.database, os.path.join(folder, "b"), demo=False)
        try:
            # A stream on A, from now.
            received = []
            start_sequence = []
            lock = threading.Lock()

            def on_event(event_id, kind, data):
                with lock:
                    if kind == "ready":
                        start_sequence.append(int(event_id))
                    elif kind == "message" and event_id is not None:
                        received.append((int(event_id), json.loads(data)["sys_id"]))

            reader_a = threading.Thread(target=sse, args=(port_a, "/api/docket/events?table=incident"), kwargs={"on_event": on_event})
            reader_a.start()
            # Up to 30 s: on a loaded machine (CI runs other suites beside this one) the first request pays for the
            # password check and the demo's first reads.
            for _ in range(600):
                if start_sequence:
                    break
                time.sleep(0.05)
            if not start_sequence:
                sys.exit("the stream on A never became ready")

            # Writers through A until it dies.
            acknowledged = []

            def writer(number):
                index = 0
                while True:
                    try:
                        status, data = request(port_a, "POST", "/api/now/table/incident",
                                               {"short_description": "writer %d, write %d" % (number, index)})
                    except (OSError, http.client.HTTPException):
                        return
                    if status == 201:
                        with lock:
                            acknowledged.append(json.loads(data)["result"]["sys_id"])
                    index += 1

            writers = [threading.Thread(target=writer, args=(n,)) for n in range(arguments.writers)]
            for thread in writers:
                thread.start()
            time.sleep(1.5)
            a.send_signal(signal.SIGKILL)
            a.wait()
            for thread in writers:
                thread.join()
            reader_a.join(timeout=10)
            with lock:
                acknowledged_ids = list(acknowledged)
                last = received[-1][0] if received else start_sequence[0]
            print("A acknowledged %d writes before SIGKILL; its stream had %d events" % (len(acknowledged_ids), len(received)))
            if len(acknowledged_ids) < 10:
                failures.append("too few writes before the kill (%d) to show anything" % len(acknowledged_ids))

            # Every acknowledged write is there, through B.
            for sys_id in acknowledged_ids:
                status, _ = request(port_b, "GET", "/api/now/table/incident/%s?sysparm_fields=sys_id" % sys_id)
                if status != 200:
                    failures.append("acknowledged write %s is missing on B (%d)" % (sys_id, status))
                    break

            # Clients carry on through B while the stream is away: it must catch up on these when it resumes.
            for index in range(10):
                status, _ = request(port_b, "POST", "/api/now/table/incident", {"short_description": "after the kill %d" % index})
                if status != 201:
                    failures.append("a write through B after the kill answered %d" % status)

            # The log itself, after the stream's start, as B reads it.
            log = []
            sse(port_b, "/api/docket/events?table=incident&follow=false&since=%d" % start_sequence[0],
                on_event=lambda i, k, d: log.append((int(i), json.loads(d)["sys_id"])) if k == "message" else None)

            # The stream resumes on B from the last event it had, and then holds everything the log holds.
            stop = threading.Event()
            resumed = threading.Thread(
                target=sse, args=(port_b, "/api/docket/events?table=incident"),
                kwargs={"last_event_id": last, "on_event": on_event, "stop": stop})
            resumed.daemon = True
            resumed.start()
            deadline = time.time() + 20
            while time.time() < deadline:
                with lock:
                    if len(received) >= len(log):
                        break
                time.sleep(0.1)
            stop.set()
            with lock:
                got = list(received)
            sequences = [sequence for sequence, _ in got]
            if sequences != sorted(set(sequences)):
                failures.append("the stream's sequences are not strictly increasing (a duplicate or a reordering)")
            if got != log:
                missing = sorted(set(log) - set(got))[:5]
                extra = sorted(set(got) - set(log))[:5]
                failures.append("the stream (%d events) differs from the log (%d): missing %s, extra %s"
                                % (len(got), len(log), missing, extra))
            logged_ids = {sys_id for _, sys_id in log}
            unlogged = [sys_id for sys_id in acknowledged_ids if sys_id not in logged_ids]
            if unlogged:
                failures.append("%d acknowledged writes have no event in the log" % len(unlogged))
            print("the log holds %d events after the stream's start; the stream, resumed on B, received %d"
                  % (len(log), len(got)))
        finally:
            for process in (a, b):
                if process.poll() is None:
                    process.terminate()
                    process.wait()
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("ok - no acknowledged write or event lost when an instance was killed; the stream resumed on another")


if __name__ == "__main__":
    main()
