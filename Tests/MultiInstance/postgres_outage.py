#!/usr/bin/env python3
"""PostgreSQL stopped under a running docketd, then started again.

    python3 Tests/MultiInstance/postgres_outage.py --binary PATH/docketd --database postgres://…?schema=NEW \
        [--cluster scripts/postgres-cluster.sh]

The cluster is the one scripts/postgres-cluster.sh started: it is paused (pg_ctl stop) and resumed. Checks, with
nothing but the standard library:
  - during the outage, every request (Table API with a bearer token, a session cookie and Basic; a write; a
    token request; Compass; /health; the web UI is checked in-process, OutageTests) is answered 503 with Retry-After within 5 s: never 401, 500 or a
    hang; a live stream (SSE) ends instead of going silent, a GraphQL subscription's socket closes with 1011;
  - once the database is back, the same bearer token, refresh token and session cookie work again within 5 s,
    with no restart; the writes refused during the outage left nothing; the stream resumes with Last-Event-ID
    and receives what was written after it left, nothing missed; a new GraphQL subscription receives a new task.
Prints the timings (first 503, recovery after the database returned). Exits 0 when all hold.
"""

import argparse
import asyncio
import base64
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kill_instance import start  # noqa: E402  (one way to start docketd for these scripts)

BASIC = "Basic " + base64.b64encode(b"admin:admin").decode()
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def request(port, method, path, headers=None, body=None, timeout=30):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    all_headers = {"Accept": "application/json"}
    all_headers.update(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
        all_headers.setdefault("Content-Type", "application/json")
    started = time.monotonic()
    connection.request(method, path, body=body, headers=all_headers)
    response = connection.getresponse()
    data = response.read()
    elapsed = time.monotonic() - started
    result = (response.status, dict((k.lower(), v) for k, v in response.getheaders()), data, elapsed)
    connection.close()
    return result


def total(port, auth):
    status, headers, _, _ = request(port, "GET", "/api/now/table/incident?sysparm_limit=1", {"Authorization": auth})
    return int(headers.get("x-total-count", "-1")) if status == 200 else None


class Subscription(threading.Thread):
    """A graphql-transport-ws subscription to DataSync's taskAdded (with the `websockets` package, when installed):
    keeps what it receives and the close code the server ends it with."""

    def __init__(self, port, auth):
        super().__init__(daemon=True)
        self.port, self.auth = port, auth
        self.received, self.close_code = [], None
        self.subscribed, self.closed = threading.Event(), threading.Event()

    def run(self):
        asyncio.run(self.follow())

    async def follow(self):
        import websockets
        try:
            async with websockets.connect("ws://127.0.0.1:%d/graphql" % self.port, subprotocols=["graphql-transport-ws"]) as ws:
                await ws.send(json.dumps({"type": "connection_init", "payload": {"Authorization": self.auth}}))
                ack = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if ack.get("type") != "connection_ack":
                    self.received.append(ack)
                    return
                await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": "subscription { taskAdded { id title } }"}}))
                self.subscribed.set()
                try:
                    while True:
                        self.received.append(json.loads(await asyncio.wait_for(ws.recv(), 120)))
                except websockets.ConnectionClosed as closed:
                    self.close_code = closed.code
        finally:
            self.closed.set()


def has_websockets():
    try:
        import websockets  # noqa: F401
        return True
    except ImportError:
        print("skipped the GraphQL subscription checks: the Python package websockets is not installed")
        return False


class Stream(threading.Thread):
    """An SSE follower of /api/docket/events: keeps ids and events; ends when the server ends the stream."""

    def __init__(self, port, auth, last_event_id=None):
        super().__init__(daemon=True)
        self.port, self.auth, self.last_event_id = port, auth, last_event_id
        self.events = []
        self.ended = threading.Event()
        self.ready = threading.Event()

    def run(self):
        headers = {"Authorization": self.auth, "Accept": "text/event-stream"}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = str(self.last_event_id)
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            connection.request("GET", "/api/docket/events?table=incident", headers=headers)
            response = connection.getresponse()
            if response.status != 200:
                self.events.append((None, "refused", str(response.status)))
                return
            fields = {}
            while True:
                line = response.readline()
                if not line:
                    return
                line = line.decode().rstrip("\n")
                if line == "":
                    if "event" in fields or "data" in fields:
                        event = (fields.get("id"), fields.get("event", "message"), fields.get("data", ""))
                        self.events.append(event)
                        if event[1] == "ready":
                            self.ready.set()
                    fields = {}
                elif not line.startswith(":") and ":" in line:
                    name, value = line.split(":", 1)
                    fields[name] = value[1:] if value.startswith(" ") else value
        except Exception as error:  # a broken connection ends the stream too
            self.events.append((None, "broken", str(error)))
        finally:
            self.ended.set()
            connection.close()

    def last_id(self):
        ids = [int(i) for i, kind, _ in self.events if i is not None and kind in ("message", "change", "ready")]
        return max(ids) if ids else None


def notifier_lease(database):
    """lease_until of the notifier's row, read with psql from the schema the database URL names."""
    parts = urllib.parse.urlsplit(database)
    options = dict(urllib.parse.parse_qsl(parts.query))
    schema = options.get("schema", "public")
    # Only what libpq knows goes to psql (docketd's own options would make it refuse the URL), and the password
    # through its environment, not its command line.
    netloc = parts.hostname or ""
    if parts.username:
        netloc = urllib.parse.quote(parts.username) + "@" + netloc
    if parts.port:
        netloc += ":%d" % parts.port
    query = urllib.parse.urlencode({k: v for k, v in options.items() if k in ("sslmode", "host")})
    url = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    environment = dict(os.environ, PGPASSWORD=urllib.parse.unquote(parts.password or ""))
    try:
        result = subprocess.run(
            ["psql", url, "-Atc", "SELECT lease_until FROM \"%s\".docket_worker WHERE name = 'notifier'" % schema.replace('"', '""')],
            capture_output=True, text=True, timeout=30, env=environment,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return "unreadable: %s" % error
    return result.stdout.strip() if result.returncode == 0 else "unreadable: " + result.stderr.strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--database", required=True)
    parser.add_argument("--cluster", default=os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "postgres-cluster.sh"))
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-outage-")
    process, port = start(args.binary, args.database, folder, demo=True)
    paused = False
    try:
        # Credentials of every kind while the database answers.
        form = urllib.parse.urlencode({
            "grant_type": "password", "client_id": "docket-demo", "client_secret": "docket-demo-secret",
            "username": "admin", "password": "admin",
        })
        status, _, data, _ = request(port, "POST", "/oauth_token.do", {"Content-Type": "application/x-www-form-urlencoded"}, form)
        check(status == 200, "password grant answered %d" % status)
        grant = json.loads(data)
        bearer = "Bearer " + grant["access_token"]
        status, headers, _, _ = request(port, "GET", "/api/now/table/incident?sysparm_limit=1", {"Authorization": BASIC})
        cookie = headers.get("set-cookie", "").split(";")[0]
        check(cookie.startswith("JSESSIONID="), "no session cookie from a Basic request")
        status, _, data, _ = request(
            port, "POST", "/ccmweb/rest/authenticate", {"Content-Type": "application/json"},
            {"username": "john.doe", "password": "password", "repo": "SampleRepository", "db": "SAMPL"},
        )
        compass = "Bearer " + json.loads(data)["token"]
        before = total(port, bearer)
        stream = Stream(port, bearer)
        stream.start()
        check(stream.ready.wait(20), "the live stream did not start")
        subscription = Subscription(port, bearer) if has_websockets() else None
        if subscription:
            subscription.start()
            check(subscription.subscribed.wait(20), "the GraphQL subscription did not start")
        status, _, _, _ = request(port, "POST", "/api/now/table/incident", {"Authorization": bearer}, {"short_description": "before the outage"})
        check(status == 201, "write before the outage answered %d" % status)
        time.sleep(1)

        subprocess.run(["bash", args.cluster, "pause"], check=True)
        paused = True
        outage_started = time.monotonic()
        checks = [
            ("Table API, bearer", "GET", "/api/now/table/incident?sysparm_limit=1", {"Authorization": bearer}, None),
            ("Table API, cookie", "GET", "/api/now/table/incident?sysparm_limit=1", {"Cookie": cookie}, None),
            ("Table API, Basic", "GET", "/api/now/table/incident?sysparm_limit=1", {"Authorization": BASIC}, None),
            ("a write", "POST", "/api/now/table/incident", {"Authorization": bearer}, {"short_description": "during the outage"}),
            ("refresh grant", "POST", "/oauth_token.do", {"Content-Type": "application/x-www-form-urlencoded"}, urllib.parse.urlencode({
                "grant_type": "refresh_token", "client_id": "docket-demo", "client_secret": "docket-demo-secret",
                "refresh_token": grant["refresh_token"]})),
            ("Compass", "GET", "/ccmweb/rest/repos/SampleRepository/databases/SAMPL/records/defect/SAMPL00000001", {"Authorization": compass}, None),
            ("health", "GET", "/health", {}, None),
        ]
        slowest = 0.0
        for name, method, path, headers, body in checks:
            try:
                status, answer, _, elapsed = request(port, method, path, headers, body, timeout=15)
            except Exception as error:
                check(False, "%s during the outage: %s" % (name, error))
                continue
            slowest = max(slowest, elapsed)
            check(status == 503, "%s during the outage answered %d, not 503" % (name, status))
            check("retry-after" in answer, "%s during the outage has no Retry-After" % name)
            check(elapsed <= 5.0, "%s during the outage took %.1f s" % (name, elapsed))
            print("  %-18s %d in %.2f s" % (name, status, elapsed))
        print("outage: every answer within %.2f s (first request %.2f s after the database stopped)" % (slowest, slowest))
        ended = stream.ended.wait(40)
        check(ended, "the live stream did not end during the outage")
        last = stream.last_id()
        print("live stream ended: %s (last id %s, last event %s)" % (ended, last, stream.events[-1][1] if stream.events else None))
        if subscription:
            check(subscription.closed.wait(40), "the GraphQL subscription was not closed during the outage")
            check(subscription.close_code == 1011, "the GraphQL socket closed with %s, not 1011" % subscription.close_code)
            print("GraphQL subscription closed with %s" % subscription.close_code)

        subprocess.run(["bash", args.cluster, "resume"], check=True)
        paused = False
        back = time.monotonic()
        recovered = None
        while time.monotonic() - back < 30:
            try:
                status, _, _, _ = request(port, "GET", "/api/now/table/incident?sysparm_limit=1", {"Authorization": bearer}, timeout=10)
            except Exception:
                status = None
            if status == 200:
                recovered = time.monotonic() - back
                break
            check(status in (503, None), "after the database returned, a request answered %s" % status)
            time.sleep(0.1)
        check(recovered is not None and recovered <= 5.0, "the bearer token worked again only after %s s" % recovered)
        print("recovery: the same bearer token works %.2f s after the database is back" % (recovered or -1))
        status, _, _, _ = request(port, "GET", "/api/now/table/incident?sysparm_limit=1", {"Cookie": cookie})
        check(status == 200, "the session cookie answered %d after the outage" % status)
        status, _, data, _ = request(port, "POST", "/oauth_token.do", {"Content-Type": "application/x-www-form-urlencoded"}, urllib.parse.urlencode({
            "grant_type": "refresh_token", "client_id": "docket-demo", "client_secret": "docket-demo-secret",
            "refresh_token": grant["refresh_token"]}))
        check(status == 200, "the refresh token answered %d after the outage" % status)
        after = total(port, bearer)
        check(after == before + 1, "incidents: %s before, %s after (one write before the outage, none during)" % (before, after))
        # The stream resumes from its last id: what was written since reaches it.
        resumed = Stream(port, bearer, last_event_id=last)
        resumed.start()
        check(resumed.ready.wait(20), "the live stream did not resume")
        status, _, data, _ = request(port, "POST", "/api/now/table/incident", {"Authorization": bearer}, {"short_description": "after the outage"})
        check(status == 201, "write after the outage answered %d" % status)
        created = json.loads(data)["result"]["sys_id"] if status == 201 else None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(created and created in d for _, _, d in resumed.events):
            time.sleep(0.1)
        check(any(created and created in d for _, _, d in resumed.events), "the resumed stream did not receive the write after the outage")
        check(not any("during the outage" in d for _, _, d in stream.events + resumed.events), "a refused write reached a stream")
        if subscription:
            # Reconnected after the outage, a subscription receives what is added.
            again = Subscription(port, bearer)
            again.start()
            check(again.subscribed.wait(20), "the GraphQL subscription did not start again after the outage")
            time.sleep(0.5)
            status, _, _, _ = request(port, "POST", "/graphql", {"Authorization": bearer}, {
                "query": 'mutation { createTask(title: "after the outage", description: "d", status: OPEN) { id } }'})
            check(status == 200, "createTask after the outage answered %d" % status)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not again.received:
                time.sleep(0.1)
            titles = [m.get("payload", {}).get("data", {}).get("taskAdded", {}).get("title") for m in again.received]
            check("after the outage" in titles, "the GraphQL subscription after the outage received %s" % again.received)
    finally:
        if paused:
            subprocess.run(["bash", args.cluster, "resume"])
        stopping = time.monotonic()
        process.terminate()
        try:
            process.wait(timeout=30)
            print("docketd stopped %.2f s after SIGTERM (exit status %s)" % (time.monotonic() - stopping, process.returncode))
            check(process.returncode == 0, "docketd exited with status %s after SIGTERM" % process.returncode)
        except subprocess.TimeoutExpired:
            check(False, "docketd did not stop within 30 s of SIGTERM")
            process.kill()
            process.wait()
    # A stop after an outage is as orderly as any: the notifier gives its lease up (another instance takes over at
    # once, not after the lease lapses), which it can only do while the database is still open to it.
    lease = notifier_lease(args.database)
    print("the notifier's lease after the stop: %s" % lease)
    check(lease == "0", "the notifier's lease was not given up at the stop (lease_until %s)" % lease)
    if failures:
        print("stderr of docketd:\n" + open(os.path.join(folder, "stderr")).read()[-3000:])
        sys.exit("%d check(s) failed" % len(failures))
    print("postgres_outage: all checks passed")


if __name__ == "__main__":
    main()
