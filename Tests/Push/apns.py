#!/usr/bin/env python3
"""Notifications to Apple devices from a live docketd, received by an APNs gateway this test runs on loopback:
Hypercorn serving HTTP/2 over TLS (h2, negotiated by ALPN), with a certificate of a test CA that docketd is told to
trust (--apns-url, --apns-ca-file). The gateway checks each request as Apple's does: HTTP/2, the path
/3/device/<token>, an ES256 provider token signed with the .p8 key (verified with the `cryptography` library against
the key's public half), its kid and team, the topic, the push type, and the JSON payload.

    python3 Tests/Push/apns.py --binary PATH/docketd

Scenarios: john.doe registers an APNs device token; beth.anglin assigns him an incident: the gateway receives the
alert (title, body, collapse id of the record) within a second; a provider token the gateway says expired is made
anew and the message sent again; a token the gateway says is Unregistered (410) has its subscription removed; the
SDK's hex form of a token is what arrives. Exits 0 when all hold.
"""
import argparse
import asyncio
import base64
import datetime
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
from checks import api, check, failures, unb64  # noqa: E402
from kill_instance import start  # noqa: E402

KEY_ID, TEAM_ID, TOPIC = "ABCDEFGHIJ", "TEAM123456", "com.docket.app"


def certificates(folder):
    """A test CA, and a certificate for 127.0.0.1 it signed; the .p8 provider key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Docket test APNs CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=2)).add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
              .issuer_name(ca_name).public_key(server_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=2))
              .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
              .sign(ca_key, hashes.SHA256()))
    paths = {name: os.path.join(folder, name) for name in ["ca.pem", "server.pem", "server.key", "AuthKey.p8"]}
    open(paths["ca.pem"], "wb").write(ca.public_bytes(serialization.Encoding.PEM))
    open(paths["server.pem"], "wb").write(server.public_bytes(serialization.Encoding.PEM))
    open(paths["server.key"], "wb").write(server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                                    serialization.NoEncryption()))
    provider = ec.generate_private_key(ec.SECP256R1())
    open(paths["AuthKey.p8"], "wb").write(provider.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                                  serialization.NoEncryption()))
    return paths, provider.public_key()


class Gateway:
    """An ASGI app that answers as APNs does and remembers what it received."""

    def __init__(self, public_key):
        self.public_key = public_key
        self.received = []
        self.problems = []
        self.gone = set()
        self.expire_next = False
        self.lock = threading.Lock()

    def verify(self, token):
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
        header, claims, signature = token.split(".")
        raw = unb64(signature)
        self.public_key.verify(encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")),
                               (header + "." + claims).encode(), ec.ECDSA(hashes.SHA256()))
        header, claims = json.loads(unb64(header)), json.loads(unb64(claims))
        assert header == {"alg": "ES256", "kid": KEY_ID}, f"header {header}"
        assert claims["iss"] == TEAM_ID and abs(claims["iat"] - time.time()) < 3600, f"claims {claims}"

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        token = scope["path"].rsplit("/", 1)[-1]
        status, reason = 200, None
        try:
            assert scope["http_version"] == "2", f"HTTP/{scope['http_version']}"
            assert scope["method"] == "POST" and scope["path"].startswith("/3/device/"), scope["path"]
            assert headers.get("authorization", "").startswith("bearer "), "no bearer provider token"
            self.verify(headers["authorization"][7:])
            assert headers.get("apns-topic") == TOPIC, f"topic {headers.get('apns-topic')}"
            assert headers.get("apns-push-type") == "alert", "push type"
            assert int(headers.get("apns-expiration", "0")) > time.time(), "expiration"
            assert len(body) <= 4096, "payload size"
            payload = json.loads(body)
            with self.lock:
                if self.expire_next:
                    self.expire_next = False
                    status, reason = 403, "ExpiredProviderToken"
                elif token in self.gone:
                    status, reason = 410, "Unregistered"
                self.received.append({"token": token, "payload": payload, "headers": headers, "status": status, "at": time.time()})
        except Exception as error:
            self.problems.append(repr(error))
            status, reason = 400, "BadRequest"
        response = json.dumps({"reason": reason}).encode() if reason else b""
        await send({"type": "http.response.start", "status": status, "headers": [(b"apns-id", b"00000000-0000-0000-0000-000000000001")]
                    + ([(b"content-type", b"application/json")] if response else [])})
        await send({"type": "http.response.body", "body": response})


def serve(gateway, paths):
    from hypercorn.asyncio import serve as hypercorn_serve
    from hypercorn.config import Config
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.certfile, config.keyfile = paths["server.pem"], paths["server.key"]
    config.alpn_protocols = ["h2"]
    config.loglevel = "WARNING"
    loop = asyncio.new_event_loop()

    async def never():
        await asyncio.Event().wait()

    # A shutdown trigger of its own: Hypercorn's default installs signal handlers, which only the main thread may.
    threading.Thread(target=lambda: loop.run_until_complete(hypercorn_serve(gateway, config, shutdown_trigger=never)), daemon=True).start()
    time.sleep(1.0)
    return port


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "h2==4.4.1", "hypercorn==0.18.0"],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    folder = tempfile.mkdtemp(prefix="docket-apns-")
    paths, public_key = certificates(folder)
    gateway = Gateway(public_key)
    gateway_port = serve(gateway, paths)
    os.environ.update({
        "DOCKET_APNS_KEY_FILE": paths["AuthKey.p8"], "DOCKET_APNS_KEY_ID": KEY_ID, "DOCKET_APNS_TEAM_ID": TEAM_ID,
        "DOCKET_APNS_TOPIC": TOPIC, "DOCKET_APNS_ENVIRONMENT": "sandbox", "DOCKET_APNS_URL": f"https://127.0.0.1:{gateway_port}",
        "DOCKET_APNS_CA_FILE": paths["ca.pem"],
    })
    process, port = start(args.binary, "sqlite:" + os.path.join(folder, "docket.sqlite"), folder, demo=True)
    base = f"http://127.0.0.1:{port}"

    def call(method, path, user="john.doe", body=None):
        return api(base, method, path, user, "password", body)

    def wait(predicate, seconds=10):
        deadline = time.time() + seconds
        while time.time() < deadline:
            with gateway.lock:
                found = [r for r in gateway.received if predicate(r)]
            if found:
                return found
            time.sleep(0.05)
        return []

    try:
        john = call("GET", "/api/now/table/sys_user?sysparm_query=user_name%3Djohn.doe&sysparm_fields=sys_id")[1]["result"][0]["sys_id"]
        phone = bytes(range(32)).hex()
        status, registered = call("POST", "/api/docket/push/subscriptions", body={"kind": "apns", "token": phone, "name": "iPhone"})
        check(status == 201, f"john registers his iPhone's token ({status})")
        status, created = call("POST", "/api/now/table/incident", "beth.anglin", {"short_description": "Printer on fire", "assigned_to": john})
        committed = time.time()
        incident = created["result"]
        got = wait(lambda r: r["token"] == phone and r["payload"].get("sys_id") == incident["sys_id"])
        check(len(got) == 1, f"the gateway received one request for his device ({len(got)})")
        if got:
            alert = got[0]["payload"]["aps"]["alert"]
            check(alert == {"title": incident["number"] + " was assigned to you", "body": "Printer on fire"}, f"the alert ({alert})")
            check(got[0]["headers"].get("apns-collapse-id") == incident["sys_id"], "the collapse id is the record's")
            check(got[0]["at"] - committed < 1.0, f"within a second of the commit ({(got[0]['at'] - committed) * 1000:.0f} ms)")

        with gateway.lock:
            gateway.expire_next = True
        call("PATCH", f"/api/now/table/incident/{incident['sys_id']}", "beth.anglin", {"comments": "On its way"})
        got = wait(lambda r: r["payload"].get("aps", {}).get("alert", {}).get("body") == "On its way" and r["status"] == 200)
        tries = [r for r in gateway.received if r["payload"].get("aps", {}).get("alert", {}).get("body") == "On its way"]
        check(len(got) == 1 and len(tries) == 2 and tries[0]["headers"]["authorization"] != tries[1]["headers"]["authorization"],
              f"an expired provider token is made anew and the message sent again ({[t['status'] for t in tries]})")

        old = bytes(range(32, 64)).hex()
        status, stale = call("POST", "/api/docket/push/subscriptions", body={"kind": "apns", "token": old, "name": "Old iPad"})
        gateway.gone.add(old)
        call("POST", "/api/now/table/incident", "beth.anglin", {"short_description": "Another", "assigned_to": john})
        wait(lambda r: r["token"] == old)
        remaining = None
        deadline = time.time() + 10
        while time.time() < deadline:
            remaining = [s["sys_id"] for s in call("GET", "/api/now/table/sys_push_subscription?sysparm_fields=sys_id")[1]["result"]]
            if stale["result"]["sys_id"] not in remaining:
                break
            time.sleep(0.2)
        check(remaining is not None and stale["result"]["sys_id"] not in remaining and registered["result"]["sys_id"] in remaining,
              "the token APNs called Unregistered (410) was removed; the other stays")
        check(not gateway.problems, "every request was HTTP/2 with a valid provider token, topic and payload: " + "; ".join(gateway.problems[:3]))
    finally:
        process.terminate()
        process.wait(10)
    print(f"apns: {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
