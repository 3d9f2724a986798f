#!/usr/bin/env python3
"""Notifications survive a crash: docketd is killed (SIGKILL) while it delivers 500 notifications, started again
on the same data, and every notification reaches the push endpoint; then two docketd on one PostgreSQL database
(with --database) deliver each notification once between them.

    python3 Tests/Push/restart.py --binary PATH/docketd [--database postgres://…?schema=NEW]

What "once" means here: a delivery is recorded as sent after the push service accepted it, so a crash between the
two sends that one again. Every message carries its notification's id (a device shows one notification per id) and
the record as its Topic; the test counts such repeats and allows no more of them than were in flight at the kill.
Without a crash, and with two instances sharing the work, none may repeat. Exits 0 when all hold.
"""
import argparse
import base64
import http.server
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "MultiInstance"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Support"))
from checks import api, check, failures  # noqa: E402
from kill_instance import start  # noqa: E402

P256DH = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
AUTH = "BTBZMqHH6r4Tts7J_aSIgg"


class Receiver:
    """A push endpoint that decrypts each message (RFC 8291's example keys) to read its notification id."""

    def __init__(self, delay=0.0):
        import http_ece
        from cryptography.hazmat.primitives.asymmetric import ec
        key = ec.derive_private_key(int.from_bytes(base64.urlsafe_b64decode("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94="), "big"), ec.SECP256R1())
        auth = base64.urlsafe_b64decode(AUTH + "==")
        self.ids = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if delay:
                    time.sleep(delay)
                message = json.loads(http_ece.decrypt(body, private_key=key, auth_secret=auth, version="aes128gcm"))
                with receiver.lock:
                    receiver.ids.append(message["id"])
                self.send_response(201)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def snapshot(self):
        with self.lock:
            return list(self.ids)


def wait_for(receiver, count, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline and len(set(receiver.snapshot())) < count:
        time.sleep(0.1)
    return receiver.snapshot()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--database", help="a PostgreSQL URL with a new schema, for the two-instance part")
    parser.add_argument("--count", type=int, default=500)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "http-ece==1.2.1"],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.environ["DOCKET_PUSH_ALLOW_INSECURE_ENDPOINTS"] = "1"

    # Part one: SIGKILL in the middle of the deliveries, then a restart on the same SQLite file.
    # A slow push service (200 ms a message), so that the kill comes while deliveries are under way.
    receiver = Receiver(delay=0.2)
    folder = tempfile.mkdtemp(prefix="docket-push-restart-")
    database = "sqlite:" + os.path.join(folder, "docket.sqlite")
    process, port = start(args.binary, database, folder, demo=True)
    base = f"http://127.0.0.1:{port}"
    john = api(base, "GET", "/api/now/table/sys_user?sysparm_query=user_name%3Djohn.doe&sysparm_fields=sys_id")[1]["result"][0]["sys_id"]
    status, _ = api(base, "POST", "/api/docket/push/subscriptions",
                    body={"endpoint": f"http://127.0.0.1:{receiver.port}/push/john", "keys": {"p256dh": P256DH, "auth": AUTH}})
    check(status == 201, f"john registers a device ({status})")
    created = []
    for index in range(args.count):
        status, body = api(base, "POST", "/api/now/table/incident", "beth.anglin", body={"short_description": f"Item {index}", "assigned_to": john})
        if status == 201:
            created.append(body["result"]["sys_id"])
    check(len(created) == args.count, f"{args.count} incidents assigned to john")
    while len(receiver.snapshot()) < args.count // 3:
        time.sleep(0.01)
    before = len(receiver.snapshot())
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    check(before < args.count, f"docketd was killed in the middle of the deliveries ({before} of {args.count} delivered)")
    process, port = start(args.binary, database, folder, demo=True)
    got = wait_for(receiver, args.count, 120)
    unique = set(got)
    repeats = len(got) - len(unique)
    check(len(unique) == args.count, f"after the restart every notification was delivered ({len(unique)} of {args.count})")
    # In flight at most: 64 sends at once, and 16 answered but not yet recorded (PushDispatcher's width and recordEvery).
    check(repeats <= 80, f"repeats only of what was in flight at the kill ({repeats}; each carries its notification's id)")
    process.terminate()
    process.wait(10)

    # Part two: two instances on one PostgreSQL database; one delivers, each notification once.
    if args.database:
        receiver = Receiver()
        folder_a, folder_b = tempfile.mkdtemp(prefix="docket-push-a-"), tempfile.mkdtemp(prefix="docket-push-b-")
        first, port_a = start(args.binary, args.database, folder_a, demo=True)
        second, port_b = start(args.binary, args.database, folder_b, demo=False)
        try:
            a, b = f"http://127.0.0.1:{port_a}", f"http://127.0.0.1:{port_b}"
            status, _ = api(a, "POST", "/api/docket/push/subscriptions",
                            body={"endpoint": f"http://127.0.0.1:{receiver.port}/push/john", "keys": {"p256dh": P256DH, "auth": AUTH}})
            check(status == 201, f"john registers a device through A ({status})")
            count = 100
            for index in range(count):
                api(a if index % 2 else b, "POST", "/api/now/table/incident", "beth.anglin",
                    body={"short_description": f"Shared {index}", "assigned_to": john})
            got = wait_for(receiver, count, 60)
            time.sleep(2)
            got = receiver.snapshot()
            check(len(set(got)) == count and len(got) == count,
                  f"writes through both instances: each notification delivered once ({len(set(got))} distinct, {len(got)} in all)")
        finally:
            for process in (first, second):
                process.terminate()
                process.wait(10)
    print(f"restart: {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
