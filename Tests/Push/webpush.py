#!/usr/bin/env python3
"""Notifications by Web Push from a live docketd, received by push endpoints this test runs on loopback and checked
with libraries Docket did not write: http-ece 1.2.1 decrypts each message (RFC 8291, aes128gcm) with the
subscription's private key, py-vapid 1.9.6 verifies its VAPID header (RFC 8292).

    python3 Tests/Push/webpush.py --binary PATH/docketd

Scenarios (demo data, docketd with --push-allow-insecure-endpoints so that it sends to 127.0.0.1):
  - john.doe registers a browser subscription; beth.anglin assigns him an incident through the Table API: his
    endpoint receives "… was assigned to you", decrypted and signed as it must be, within a second of the commit;
  - beth comments on it: he is told who commented and what; she changes its state: he is told what changed;
  - beth modifies a defect john owns through the Compass REST API (Edit, then Commit): he is told what changed;
  - john's own change reaches nobody;
  - a rule that names abel.tuter (no role) about every new incident: abel, who may not read beth's incident,
    receives nothing, while john (itil) does;
  - an endpoint that answers 410: docketd removes the subscription;
  - a stranger registers a device through the UPS registry with the public web variant's credentials and
    `alias: admin`; beth assigns the administrator an incident: his own device is told, the stranger's nothing;
  - his notifications through GET /api/docket/notifications.
Exits 0 when all hold.
"""
import argparse
import base64
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "MultiInstance"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Support"))
from checks import api, b64, check, failures, unb64  # noqa: E402
from kill_instance import start  # noqa: E402



class Receiver:
    """Push endpoints at /push/<name>: each decrypts with its subscription's key and checks the VAPID header."""

    def __init__(self):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        self.keys = {}
        self.messages = []
        self.problems = []
        self.gone = set()
        self.lock = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                import http_ece
                from py_vapid import Vapid02
                from py_vapid import jwt as vapid_jwt
                name = self.path.rsplit("/", 1)[-1]
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                arrived = time.time()
                if name in receiver.gone:
                    self.send_response(410)
                    self.end_headers()
                    return
                try:
                    private, auth = receiver.keys[name]
                    assert self.headers.get("Content-Encoding") == "aes128gcm", "Content-Encoding"
                    assert int(self.headers.get("TTL", "-1")) >= 0, "TTL"
                    authorization = self.headers.get("Authorization", "")
                    assert Vapid02.verify(authorization), "VAPID signature"
                    parts = dict(part.split("=", 1) for part in authorization.split(" ", 1)[1].split(","))
                    claims = vapid_jwt.decode(parts["t"], parts["k"])
                    origin = "http://" + self.headers.get("Host")
                    assert claims["aud"] == origin, f"aud {claims['aud']} != {origin}"
                    assert time.time() < claims["exp"] <= time.time() + 86400, "exp"
                    assert claims["sub"].startswith(("mailto:", "https:")), "sub"
                    assert len(body) <= 4096, "size"
                    plain = http_ece.decrypt(body, private_key=private, auth_secret=auth, version="aes128gcm")
                    message = json.loads(plain)
                    message["_to"] = name
                    message["_arrived"] = arrived
                    message["_topic"] = self.headers.get("Topic")
                    with receiver.lock:
                        receiver.messages.append(message)
                        receiver.lock.notify_all()
                    self.send_response(201)
                except Exception as error:  # a message that does not decrypt or verify fails the run
                    receiver.problems.append(f"{name}: {error!r}")
                    self.send_response(400)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self._ec = ec
        self._serialization = serialization

    def subscription(self, name):
        private = self._ec.generate_private_key(self._ec.SECP256R1())
        public = private.public_key().public_bytes(self._serialization.Encoding.X962, self._serialization.PublicFormat.UncompressedPoint)
        auth = os.urandom(16)
        self.keys[name] = (private, auth)
        return {"endpoint": f"http://127.0.0.1:{self.port}/push/{name}", "keys": {"p256dh": b64(public), "auth": b64(auth)}, "name": name}

    def wait(self, predicate, seconds=10):
        deadline = time.time() + seconds
        with self.lock:
            while True:
                found = [m for m in self.messages if predicate(m)]
                if found or time.time() >= deadline:
                    return found
                self.lock.wait(max(0.01, deadline - time.time()))

    def clear(self):
        with self.lock:
            self.messages.clear()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "http-ece==1.2.1", "py-vapid==1.9.6"],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    receiver = Receiver()
    folder = tempfile.mkdtemp(prefix="docket-push-")
    os.environ["DOCKET_PUSH_ALLOW_INSECURE_ENDPOINTS"] = "1"
    os.environ["DOCKET_PUSH_CONTACT"] = "mailto:ops@example.com"
    process, port = start(args.binary, "sqlite:" + os.path.join(folder, "docket.sqlite"), folder, demo=True)
    base = f"http://127.0.0.1:{port}"

    def call(method, path, user="john.doe", password="password", body=None):
        return api(base, method, path, user, password, body)

    john_id = call("GET", "/api/now/table/sys_user?sysparm_query=user_name%3Djohn.doe&sysparm_fields=sys_id")[1]["result"][0]["sys_id"]
    abel_id = call("GET", "/api/now/table/sys_user?sysparm_query=user_name%3Dabel.tuter&sysparm_fields=sys_id")[1]["result"][0]["sys_id"]
    try:
        status, body = call("GET", "/api/docket/push/vapid")
        check(status == 200 and len(unb64(body["result"]["public_key"])) == 65, f"the VAPID public key ({status})")
        status, body = call("POST", "/api/docket/push/subscriptions", body=receiver.subscription("john"))
        check(status == 201, f"john registers his browser ({status})")
        status, _ = call("POST", "/api/docket/push/subscriptions", "abel.tuter", body=receiver.subscription("abel"))
        check(status == 201, f"abel registers his ({status})")
        status, phone = call("POST", "/api/docket/push/subscriptions", body=receiver.subscription("johnphone"))

        sent = time.time()
        status, created = call("POST", "/api/now/table/incident", "beth.anglin", body={"short_description": "Printer on fire", "assigned_to": john_id})
        committed = time.time()
        incident = created["result"]
        got = receiver.wait(lambda m: m["_to"] == "john" and m["sys_id"] == incident["sys_id"])
        check(len(got) == 1 and got[0]["title"] == incident["number"] + " was assigned to you" and got[0]["body"] == "Printer on fire",
              f"beth assigns john an incident: his browser is told ({[m.get('title') for m in got]})")
        if got:
            latency = got[0]["_arrived"] - committed
            check(latency < 1.0, f"within a second of the commit ({latency * 1000:.0f} ms after the answer, {(got[0]['_arrived'] - sent) * 1000:.0f} ms after the request)")
            check(got[0]["url"] == f"/app/item/incident/{incident['sys_id']}" and got[0]["_topic"] == incident["sys_id"],
                  "the message opens the item, and its Topic collapses messages about one record")
        check(len(receiver.wait(lambda m: m["_to"] == "johnphone" and m["sys_id"] == incident["sys_id"])) == 1, "and his phone too")

        receiver.clear()
        call("PATCH", f"/api/now/table/incident/{incident['sys_id']}", "beth.anglin", body={"comments": "Extinguisher on its way"})
        got = receiver.wait(lambda m: m["_to"] == "john")
        check(len(got) == 1 and got[0]["title"].startswith("Beth Anglin commented on") and got[0]["body"] == "Extinguisher on its way",
              f"beth comments: john is told who and what ({[m.get('title') for m in got]})")
        receiver.clear()
        call("PATCH", f"/api/now/table/incident/{incident['sys_id']}", "beth.anglin", body={"state": "2"})
        got = receiver.wait(lambda m: m["_to"] == "john")
        # A state change: the default rule "State of your item changed" (it outweighs the demo's "Your item was changed").
        check(len(got) == 1 and "State: In Progress" in got[0]["body"] and got[0]["title"].endswith(" is now In Progress"),
              f"beth changes its state: john is told what changed ({[(m.get('title'), m.get('body')) for m in got]})")

        # The Compass app's case: beth modifies a defect john owns through the Compass REST API.
        status, defect = call("POST", "/api/now/table/defect", "admin", "admin", body={"short_description": "Crash on save", "assigned_to": john_id})
        receiver.wait(lambda m: m["_to"] == "john" and m["sys_id"] == defect["result"]["sys_id"])
        time.sleep(0.5)
        receiver.clear()
        compass = "/ccmweb/rest/repos/SampleRepository/databases/SAMPL/records/defect/" + defect["result"]["number"]

        def as_beth(method, path, body):
            request = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode(), headers={
                "Authorization": "Bearer " + token, "Content-Type": "application/json", "Accept": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status

        login = urllib.request.Request(base + "/ccmweb/rest/authenticate", method="POST", headers={"Content-Type": "application/json"},
                                       data=json.dumps({"username": "beth.anglin", "password": "password", "repo": "SampleRepository", "db": "SAMPL"}).encode())
        token = json.loads(urllib.request.urlopen(login, timeout=30).read())["token"]
        edited = as_beth("PATCH", compass + "?operation=Edit&actionName=Modify", {})
        committed = as_beth("PATCH", compass + "?operation=Commit", {"fields": [{"name": "Priority", "value": "1-Resolve Immediately"}]})
        got = receiver.wait(lambda m: m["_to"] == "john" and m["sys_id"] == defect["result"]["sys_id"])
        check(edited == 200 and committed == 200 and len(got) == 1 and got[0]["title"].endswith("changed by Beth Anglin")
              and "Priority: 1-Resolve Immediately" in got[0]["body"],
              f"beth modifies john's defect through the Compass API: he is told what changed ({[(m.get('title'), m.get('body')) for m in got]})")

        receiver.clear()
        call("PATCH", f"/api/now/table/incident/{incident['sys_id']}", body={"short_description": "Printer fine"})
        time.sleep(1.5)
        own = [m["title"] for m in receiver.messages if "John Doe" in m["title"] or "Printer fine" in m["body"]]
        check(not own, f"john's own change reaches nobody ({own})")

        status, _ = call("POST", "/api/now/table/sysevent_email_action", "admin", "admin", body={
            "name": "New incidents to Abel and John", "collection": "incident", "action_insert": "true",
            "recipient_users": f"{abel_id},{john_id}", "subject": "New incident ${number}"})
        check(status == 201, f"an admin adds a rule through the Table API ({status})")
        call("POST", "/api/now/table/incident", "beth.anglin", body={"short_description": "Confidential"})
        got = receiver.wait(lambda m: m["title"].startswith("New incident"))
        time.sleep(1)
        told = sorted({m["_to"] for m in receiver.messages if m["title"].startswith("New incident")})
        check(told == ["john", "johnphone"], f"abel, who may not read beth's incident, is not told; john is ({told})")

        receiver.gone.add("johnphone")
        receiver.clear()
        call("POST", "/api/now/table/incident", "beth.anglin", body={"short_description": "Another", "assigned_to": john_id})
        receiver.wait(lambda m: m["_to"] == "john")
        deadline = time.time() + 10
        remaining = None
        while time.time() < deadline:
            remaining = [s["sys_id"] for s in call("GET", "/api/now/table/sys_push_subscription?sysparm_fields=sys_id")[1]["result"]]
            if phone["result"]["sys_id"] not in remaining:
                break
            time.sleep(0.2)
        check(remaining is not None and phone["result"]["sys_id"] not in remaining, "the endpoint that answered 410 was removed")

        status, body = call("GET", "/api/docket/notifications?sysparm_limit=100")
        titles = [n["subject"] for n in body["result"]]
        check(status == 200 and titles and titles[-1].endswith("was assigned to you")
              and len(titles) == 8, f"his notifications through the API, newest first ({titles})")
        # A stranger's day: the web variant's credentials are public (mobile-services.json), and AeroGear's
        # registration takes an alias. A device registered with them alone and alias admin is the administrator's
        # in name only: it must receive nothing of his, while his own device (registered as him) does.
        services = json.loads(urllib.request.urlopen(base + "/mobile-services.json", timeout=30).read())
        push = next(service for service in services["services"] if service["type"] == "push")["config"]["web_push"]
        stranger = receiver.subscription("stranger")
        stranger.pop("name")
        registration = urllib.request.Request(base + "/rest/registry/device", method="POST", data=json.dumps({
            "deviceToken": base64.b64encode(json.dumps(stranger).encode()).decode(), "deviceType": "web", "alias": "admin",
            "categories": []}).encode(), headers={
            "Authorization": "Basic " + base64.b64encode(f"{push['variantId']}:{push['variantSecret']}".encode()).decode(),
            "Content-Type": "application/json"})
        with urllib.request.urlopen(registration, timeout=30) as answer:
            check(answer.status == 200, f"a stranger registers a device with the public variant credentials and alias admin ({answer.status})")
        status, _ = call("POST", "/api/docket/push/subscriptions", "admin", "admin", body=receiver.subscription("admin"))
        check(status == 201, f"the administrator registers his own device, as himself ({status})")
        admin_id = call("GET", "/api/now/table/sys_user?sysparm_query=user_name%3Dadmin&sysparm_fields=sys_id")[1]["result"][0]["sys_id"]
        status, secret = call("POST", "/api/now/table/incident", "beth.anglin", body={
            "short_description": "Rotate the root credentials", "assigned_to": admin_id})
        got = receiver.wait(lambda m: m["_to"] == "admin" and m["sys_id"] == secret["result"]["sys_id"])
        check(len(got) == 1, f"the administrator's own device is told of his assignment ({len(got)})")
        time.sleep(1.5)
        leaked = [m["title"] for m in receiver.messages if m["_to"] == "stranger"]
        check(not leaked, f"the anonymous alias-admin device receives nothing of the administrator's ({leaked})")

        check(not receiver.problems, "every message decrypted with http-ece and carried a VAPID header py-vapid verifies: "
              + "; ".join(receiver.problems[:3]))
    finally:
        process.terminate()
        process.wait(10)
        receiver.server.shutdown()
    print(f"webpush: {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
