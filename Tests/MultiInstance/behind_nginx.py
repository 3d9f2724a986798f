#!/usr/bin/env python3
"""deploy/nginx-docket.conf, as documented, in front of two docketd on one PostgreSQL database.

    python3 Tests/MultiInstance/behind_nginx.py --binary PATH/docketd --database postgres://…?schema=NEW

Runs nginx (Debian's package) with the example's server block, its upstream pointed at the two instances and
its port at a free one, and checks through it, with the standard library (and `websockets` when installed):
  - a session cookie from the first request works on every later one, whichever instance answers;
  - a Server-Sent Events stream receives a change written through nginx within seconds (nothing buffers it);
  - a GraphQL WebSocket (graphql-transport-ws) is upgraded and acknowledged, and sees a change.
"""

import argparse
import asyncio
import base64
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from kill_instance import request, sse, start  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AUTH = "Basic " + base64.b64encode(b"john.doe:password").decode()


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def nginx_config(folder, port, upstreams):
    """The documented server block, made to run here: upstream ports, listen port, paths in a folder."""
    example = open(os.path.join(ROOT, "deploy", "nginx-docket.conf")).read()
    servers = "".join("    server 127.0.0.1:%d;\n" % upstream for upstream in upstreams)
    example = re.sub(r"(upstream docket \{\n)(?:    server [^\n]*\n)+", lambda m: m.group(1) + servers, example)
    example = example.replace("listen 80;", "listen 127.0.0.1:%d;" % port)
    for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        os.makedirs(os.path.join(folder, name), exist_ok=True)
    os.chmod(folder, 0o777)
    return """
worker_processes 1;
pid %(folder)s/nginx.pid;
error_log %(folder)s/error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path %(folder)s/client_body;
    proxy_temp_path %(folder)s/proxy;
    fastcgi_temp_path %(folder)s/fastcgi;
    uwsgi_temp_path %(folder)s/uwsgi;
    scgi_temp_path %(folder)s/scgi;
%(example)s
}
""" % {"folder": folder, "example": example}


async def websocket_check(port, failures):
    try:
        import websockets
    except ImportError:
        print("skipped the WebSocket check: the Python package websockets is not installed")
        return
    uri = "ws://127.0.0.1:%d/graphql" % port
    async with websockets.connect(uri, subprotocols=["graphql-transport-ws"]) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": {"Authorization": AUTH}}))
        ack = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if ack.get("type") != "connection_ack":
            failures.append("the WebSocket through nginx answered %s instead of connection_ack" % ack)
            return
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {
            "query": "subscription { taskAdded { id title } }"}}))
        await asyncio.sleep(0.5)
        status, _ = await asyncio.to_thread(
            lambda: request_as_john(port, "POST", "/graphql", {
                "query": 'mutation { createTask(title: "through nginx", description: "d", status: OPEN) { id } }'}))
        if status != 200:
            failures.append("createTask through nginx answered %d" % status)
            return
        message = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if message.get("type") != "next" or message["payload"]["data"]["taskAdded"]["title"] != "through nginx":
            failures.append("the subscription through nginx received %s" % message)


def request_as_john(port, method, path, body):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, path, body=json.dumps(body), headers={"Authorization": AUTH, "Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--database", required=True)
    arguments = parser.parse_args()
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx):
        sys.exit("nginx is not installed (apt-get install -y nginx)")
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        for name in ("a", "b", "nginx"):
            os.makedirs(os.path.join(folder, name))
        a, port_a = start(arguments.binary, arguments.database, os.path.join(folder, "a"), demo=True)
        b, port_b = start(arguments.binary, arguments.database, os.path.join(folder, "b"), demo=False)
        port = free_port()
        config = os.path.join(folder, "nginx", "nginx.conf")
        with open(config, "w") as file:
            file.write(nginx_config(os.path.join(folder, "nginx"), port, [port_a, port_b]))
        check = subprocess.run([nginx, "-t", "-c", config], capture_output=True, text=True)
        if check.returncode != 0:
            sys.exit("nginx refused the example configuration:\n" + check.stderr)
        server = subprocess.Popen([nginx, "-c", config, "-g", "daemon off;"])
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            # A session cookie from the first answer works on every later request (nginx alternates instances).
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("GET", "/api/now/table/incident?sysparm_limit=1", headers={"Authorization": AUTH})
            response = connection.getresponse()
            response.read()
            cookie = (response.getheader("Set-Cookie") or "").split(";")[0]
            if response.status != 200 or not cookie:
                failures.append("the first request through nginx answered %d with cookie %r" % (response.status, cookie))
            for _ in range(6):
                connection.request("GET", "/api/now/table/incident?sysparm_limit=1", headers={"Cookie": cookie})
                answer = connection.getresponse()
                answer.read()
                if answer.status != 200:
                    failures.append("a request with the session cookie answered %d through nginx" % answer.status)
                    break
            connection.close()

            # An SSE stream through nginx carries a change at once.
            events = []
            ready = threading.Event()

            def on_event(event_id, kind, data):
                if kind == "ready":
                    ready.set()
                elif kind == "message":
                    events.append(json.loads(data))

            stop = threading.Event()
            reader = threading.Thread(target=sse, args=(port, "/api/docket/events?table=incident"),
                                      kwargs={"on_event": on_event, "stop": stop})
            reader.daemon = True
            reader.start()
            # The writer's first request pays for its bcrypt check; warm it up so that the timing below is the change's.
            request(port, "GET", "/api/now/table/incident?sysparm_limit=1")
            request(port, "GET", "/api/now/table/incident?sysparm_limit=1")
            # Up to 30 s: CI runs other suites beside this one, and the first request pays for the demo's first reads.
            if not ready.wait(30):
                failures.append("the SSE stream through nginx never said ready")
            else:
                written = time.time()
                status, _ = request(port, "POST", "/api/now/table/incident", {"short_description": "through nginx"})
                while not events and time.time() - written < 5:
                    time.sleep(0.02)
                if status != 201 or not events:
                    failures.append("the SSE stream through nginx did not carry the change within 5 s")
                else:
                    print("SSE through nginx: the change arrived %.0f ms after the write was sent"
                          % ((time.time() - written) * 1000))
            stop.set()

            asyncio.run(websocket_check(port, failures))
        finally:
            server.terminate()
            server.wait()
            for process in (a, b):
                process.terminate()
                process.wait()
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("ok - the documented nginx configuration serves two docketd: sessions, SSE and WebSockets pass through")


if __name__ == "__main__":
    main()
