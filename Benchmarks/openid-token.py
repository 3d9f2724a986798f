#!/usr/bin/env python3
"""The OpenID provider's token endpoint under load, against a release docketd on loopback.

    python3 Benchmarks/openid-token.py --binary .build/release/docketd [--seconds 10] [--workers 16]

Measures, one after the other:
  - refresh: each worker refreshes its own sign-in over and over with the refresh token the last answer rotated
    to (every request a write: the used token marked, the next stored, two JWTs signed);
  - code exchange: authorization codes made beforehand through the auth endpoint with a web session (each a PKCE
    code for the DataSync showcase's public client), then exchanged as fast as the workers can.
Prints requests/s and p50/p99 latency for each, as Markdown rows for docs/performance.md. Standard library only.
"""
import argparse
import base64
import hashlib
import http.client
import os
import re
import secrets
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from docketd_process import start  # noqa: E402

TOKEN = "/realms/docket/protocol/openid-connect/token"
CLIENT = "datasync-starter-client"
REDIRECT = "http://localhost:8765/cb"


def post(connection, fields):
    connection.request("POST", TOKEN, body=urllib.parse.urlencode(fields),
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    response = connection.getresponse()
    return response.status, response.read()


def refresh_token(connection):
    status, body = post(connection, {"grant_type": "password", "client_id": CLIENT, "username": "john.doe", "password": "password"})
    assert status == 200, body
    return re.search(rb'"refresh_token":"([^"]+)"', body).group(1).decode()


def web_session(port):
    connection = http.client.HTTPConnection("127.0.0.1", port)
    connection.request("GET", "/")
    page = connection.getresponse()
    login = re.search(r"docket_login=([^;]+)", page.getheader("Set-Cookie")).group(1)
    page.read()
    connection.request("POST", "/app/login", body=urllib.parse.urlencode(
        {"csrf": login, "user_name": "john.doe", "password": "password", "next": "/app/work"}),
        headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": "docket_login=" + login})
    answer = connection.getresponse()
    answer.read()
    return re.search(r"docket_session=([^;]+)", answer.getheader("Set-Cookie")).group(1)


def codes(port, count):
    session = web_session(port)
    connection = http.client.HTTPConnection("127.0.0.1", port)
    made = []
    for _ in range(count):
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        query = urllib.parse.urlencode({"response_type": "code", "client_id": CLIENT, "redirect_uri": REDIRECT, "scope": "openid",
                                        "code_challenge": challenge, "code_challenge_method": "S256", "state": "s"})
        connection.request("GET", "/realms/docket/protocol/openid-connect/auth?" + query, headers={"Cookie": "docket_session=" + session})
        response = connection.getresponse()
        response.read()
        location = response.getheader("Location")
        made.append((urllib.parse.parse_qs(urllib.parse.urlparse(location).query)["code"][0], verifier))
    return made


def measure(port, workers, seconds, work):
    latencies, errors, lock = [], [0], threading.Lock()
    deadline = time.monotonic() + seconds

    def worker(index):
        connection = http.client.HTTPConnection("127.0.0.1", port)
        state = work.setup(connection, index)
        mine = []
        while time.monotonic() < deadline:
            started = time.monotonic()
            ok, state = work.step(connection, state)
            if ok is None:
                break
            mine.append(time.monotonic() - started)
            if not ok:
                with lock:
                    errors[0] += 1
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else 0
    return len(latencies) / elapsed, pick(0.5), pick(0.99), errors[0], len(latencies)


class Refresh:
    def setup(self, connection, index):
        return refresh_token(connection)

    def step(self, connection, token):
        status, body = post(connection, {"grant_type": "refresh_token", "client_id": CLIENT, "refresh_token": token})
        if status != 200:
            return False, refresh_token(connection)
        return True, re.search(rb'"refresh_token":"([^"]+)"', body).group(1).decode()


class Exchange:
    def __init__(self, made):
        self.made, self.lock = made, threading.Lock()

    def setup(self, connection, index):
        return None

    def step(self, connection, _):
        with self.lock:
            if not self.made:
                return None, None
            code, verifier = self.made.pop()
        status, _ = post(connection, {"grant_type": "authorization_code", "client_id": CLIENT, "code": code,
                                      "redirect_uri": REDIRECT, "code_verifier": verifier})
        return status == 200, None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/release/docketd")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--codes", type=int, default=3000)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-openid-bench-")
    process, port = start(os.path.abspath(args.binary), folder)
    try:
        refresh = measure(port, args.workers, args.seconds, Refresh())
        made = codes(port, args.codes)
        exchange = measure(port, args.workers, args.seconds, Exchange(made))
    finally:
        process.terminate()
        process.wait(10)
    print(f"\n{args.workers} workers, {args.seconds:.0f} s each (the code exchange ends early when its {args.codes} codes are spent)\n")
    print("| token request | requests/s | p50 (ms) | p99 (ms) | failed | requests |")
    print("|---|---|---|---|---|---|")
    for name, (rps, p50, p99, failed, total) in (("refresh_token (rotating)", refresh), ("authorization_code + PKCE", exchange)):
        print(f"| {name} | {rps:.0f} | {p50:.1f} | {p99:.1f} | {failed} | {total} |")


if __name__ == "__main__":
    main()
