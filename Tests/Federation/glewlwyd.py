#!/usr/bin/env python3
"""docketd trusting a company's OpenID provider that neither Docket nor its tests wrote: Glewlwyd 2.7 from Debian
(unpacked by scripts/glewlwyd.sh), started headless by this script with a throw-away SQLite database and configured
through its own administration API.

    python3 Tests/Federation/glewlwyd.py --binary PATH/docketd --glewlwyd "$(scripts/glewlwyd.sh)"

Checks: Glewlwyd's RS256 access tokens (RFC 9068 profile, `preferred_username` added from the user's name) reach
the Table API, ServiceNow GraphQL and DataSync as the user the administrator linked them to (`docketd users link`: Glewlwyd
does not say an e-mail was verified, and before the link its john.doe is nobody here); a person Docket does not know is made on first
sight (--oidc-provision); the web UI's "Sign in with Glewlwyd" runs the authorization code flow with PKCE against
Glewlwyd (its sign-in and consent through its API, as its login page would) and ends in a Docket session; a token
that Glewlwyd issued under another issuer (a second OpenID plugin, not trusted), a token with a changed claim, one
signed by a key Glewlwyd never published, and an unsigned one are refused (401); with Glewlwyd stopped, a token of
a key already fetched still works. Exits 0 when all hold.
"""
import argparse
import base64
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "MultiInstance"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Support"))
from checks import b64, check, failures, unb64  # noqa: E402
from kill_instance import start  # noqa: E402

SCHEMA = "usr/share/dbconfig-common/data/glewlwyd/install/sqlite3"


def claims(token):
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_glewlwyd(root, folder):
    """Glewlwyd on a port of its own, with Debian's schema and its default administrator (admin / password)."""
    port = free_port()
    database = os.path.join(folder, "glewlwyd.sqlite")
    with sqlite3.connect(database) as connection:
        connection.executescript(open(os.path.join(root, SCHEMA)).read())
    modules = os.path.join(root, "usr/lib/glewlwyd")
    config = os.path.join(folder, "glewlwyd.conf")
    with open(config, "w") as out:
        out.write(f"""port={port}
external_url="http://localhost:{port}"
login_url="login.html"
api_prefix="api"
log_mode="console"
log_level="{os.environ.get("GLEWLWYD_LOG_LEVEL", "WARNING")}"
cookie_secure=0
session_expiration=3600
session_key="GLEWLWYD2_SESSION_ID"
admin_session_authentication="cookie"
profile_session_authentication="cookie"
allow_multiple_user_per_session=true
login_api_enabled=true
admin_scope="g_admin"
profile_scope="g_profile"
user_module_path="{modules}/user"
client_module_path="{modules}/client"
user_auth_scheme_module_path="{modules}/scheme"
plugin_module_path="{modules}/plugin"
use_secure_connection=0
hash_algorithm="SHA512"
database = {{
  type = "sqlite3"
  path = "{database}"
}};
""")
    log = open(os.path.join(folder, "glewlwyd.log"), "w")
    process = subprocess.Popen([os.path.join(root, "usr/bin/glewlwyd"), "--config-file", config], stdout=log, stderr=subprocess.STDOUT)
    base = f"http://localhost:{port}"
    for _ in range(300):  # up to 30 s and more: CI runs other suites beside this one
        try:
            requests.get(base + "/api/", timeout=1)
            return process, base
        except requests.ConnectionError:
            if process.poll() is not None:
                break
            time.sleep(0.1)
    sys.exit("glewlwyd did not start: " + open(os.path.join(folder, "glewlwyd.log")).read())


def configure(base, folder):
    """Two OpenID plugins (the trusted one and another issuer), two users, docketd's client."""
    admin = requests.Session()
    answer = admin.post(base + "/api/auth/", json={"username": "admin", "password": "password"})
    assert answer.status_code == 200, answer.text
    key = os.path.join(folder, "key.pem")
    subprocess.run(["openssl", "genrsa", "-out", key, "2048"], check=True, capture_output=True)
    public = subprocess.run(["openssl", "rsa", "-in", key, "-pubout"], check=True, capture_output=True, text=True).stdout
    for name in ["oidc", "other"]:
        answer = admin.post(base + "/api/mod/plugin/", json={
            "module": "oidc", "name": name, "display_name": name, "enabled": True, "parameters": {
                "iss": f"{base}/api/{name}", "jwt-type": "rsa", "jwt-key-size": "256", "key": open(key).read(), "cert": public,
                "access-token-duration": 600, "refresh-token-duration": 3600, "code-duration": 600, "refresh-token-rolling": True,
                # The password grant is "non-OpenID" to Glewlwyd: the tests use it to get tokens without a browser.
                "allow-non-oidc": True, "auth-type-code-enabled": True, "auth-type-password-enabled": True,
                "auth-type-refresh-enabled": True, "auth-type-client-enabled": False, "auth-type-token-enabled": False,
                "auth-type-id-token-enabled": True, "subject-type": "public", "name-claim": "mandatory", "email-claim": "mandatory",
                "pkce-allowed": True, "pkce-method-plain-allowed": False,
                "additional-parameters": [{"user-parameter": "username", "token-parameter": "preferred_username"}],
                "claims": [{"name": "preferred_username", "user-property": "username", "type": "string", "mandatory": True,
                            "on-demand": False, "scopes": []}],
            }})
        assert answer.status_code == 200, answer.text
    # docketd asks for "openid profile email", as relying parties do: Glewlwyd knows only openid until told.
    for scope in ["profile", "email"]:
        answer = admin.post(base + "/api/scope/", json={
            "name": scope, "display_name": scope, "description": scope, "password_required": False, "scheme": {}})
        assert answer.status_code == 200, answer.text
    for user, name in [("john.doe", "John Doe"), ("glewlwyd.person", "Glewlwyd Person")]:
        answer = admin.post(base + "/api/user/", json={
            "username": user, "name": name, "email": user + "@example.com", "password": "Glewlwyd-secret-1",
            "scope": ["openid", "profile", "email"], "enabled": True})
        assert answer.status_code == 200, answer.text
    return admin


def token(base, plugin="oidc", user="john.doe"):
    answer = requests.post(f"{base}/api/{plugin}/token", auth=("docket", "docket-secret"), data={
        "grant_type": "password", "username": user, "password": "Glewlwyd-secret-1", "scope": "openid"})
    assert answer.status_code == 200, answer.text
    return answer.json()["access_token"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--glewlwyd", default="/", help="the folder Glewlwyd's package is unpacked in (scripts/glewlwyd.sh)")
    args = parser.parse_args()
    if not os.access(os.path.join(args.glewlwyd, "usr/bin/glewlwyd"), os.X_OK) or not os.path.exists(os.path.join(args.glewlwyd, SCHEMA)):
        sys.exit(f"glewlwyd: not found under {args.glewlwyd} (run scripts/glewlwyd.sh)")
    folder = tempfile.mkdtemp(prefix="docket-glewlwyd-")
    glewlwyd, provider = start_glewlwyd(args.glewlwyd, folder)
    process = None
    try:
        admin = configure(provider, folder)
        issuer = provider + "/api/oidc"
        os.environ["DOCKET_TEST_GLEWLWYD_SECRET"] = "docket-secret"
        os.environ["DOCKET_OIDC_TRUST"] = issuer + ",client=docket,secret-env=DOCKET_TEST_GLEWLWYD_SECRET,name=Glewlwyd"
        os.environ["DOCKET_OIDC_PROVISION"] = "1"
        process, port = start(args.binary, "sqlite:" + os.path.join(folder, "docket.sqlite"), folder, demo=True)
        base = f"http://127.0.0.1:{port}"
        answer = admin.post(provider + "/api/client/", json={
            "client_id": "docket", "name": "Docket", "client_secret": "docket-secret", "confidential": True, "enabled": True,
            "redirect_uri": [base + "/app/sso/callback"], "authorization_type": ["code", "password", "refresh_token"],
            "token_endpoint_auth_method": ["client_secret_basic", "client_secret_post"], "scope": ["openid", "profile", "email"]})
        assert answer.status_code == 200, answer.text
        print(f"Glewlwyd {provider} trusted by docketd {base}", flush=True)

        def api(bearer, path="/api/now/table/incident?sysparm_limit=1", method="GET", body=None):
            return requests.request(method, base + path, json=body, headers={"Authorization": "Bearer " + bearer, "Accept": "application/json"})

        access = token(provider)
        check(claims(access).get("iss") == issuer and claims(access).get("preferred_username") == "john.doe",
              "Glewlwyd issues an RS256 access token naming john.doe")
        # Glewlwyd does not say the e-mail was verified, so docketd links nobody by itself: the administrator links
        # Glewlwyd's john.doe (its subject) to Docket's, as docs/configuration.md says.
        unlinked = api(access)
        check(unlinked.status_code == 401, f"before the administrator links it, Glewlwyd's john.doe is nobody here ({unlinked.status_code})")
        linked = subprocess.run([args.binary, "users", "link", "john.doe", "--issuer", issuer, "--subject", claims(access)["sub"],
                                 "--database", "sqlite:" + os.path.join(folder, "docket.sqlite")], capture_output=True, text=True)
        check(linked.returncode == 0 and "Linked" in linked.stdout, f"docketd users link: {linked.stdout}{linked.stderr}")
        answer = api(access, "/api/now/table/incident", "POST", {"short_description": "from Glewlwyd"})
        check(answer.status_code == 201 and answer.json()["result"]["sys_created_by"] == "john.doe",
              f"Glewlwyd's token creates an incident as john.doe ({answer.status_code})")
        answer = api(access, "/api/now/graphql", "POST", {"query": "{ GlideRecord_Query { incident { _rowCount } } }"})
        check(answer.status_code == 200 and "errors" not in answer.json(), f"ServiceNow GraphQL with the token ({answer.status_code})")
        answer = api(access, "/graphql", "POST", {"query": "{ allTasks { id } }"})
        check(answer.status_code == 200 and "errors" not in answer.json(), f"DataSync GraphQL with the token ({answer.status_code})")
        answer = api(token(provider, user="glewlwyd.person"), "/api/now/table/sys_user?sysparm_query=user_name%3Dglewlwyd.person"
                     "&sysparm_fields=user_name")
        check(answer.status_code == 200, f"a person unknown to Docket is made on first sight ({answer.status_code})")
        answer = requests.get(base + "/api/now/table/sys_user?sysparm_query=user_name%3Dglewlwyd.person&sysparm_fields=user_name",
                              auth=("admin", "admin"), headers={"Accept": "application/json"})
        check(answer.json()["result"] == [{"user_name": "glewlwyd.person"}], "the new user exists once")

        # "Sign in with Glewlwyd": docketd sends the browser to Glewlwyd's authorization endpoint. Glewlwyd's own
        # login page would sign the person in and record their consent through its API: the test does the same.
        browser = requests.Session()
        check("Sign in with Glewlwyd" in browser.get(base + "/").text, "the sign-in page offers Glewlwyd")
        to_provider = browser.get(base + "/app/sso/0?next=/app/work", allow_redirects=False)
        authorization = to_provider.headers.get("Location", "")
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(authorization).query))
        check(authorization.startswith(issuer + "/auth") and query.get("code_challenge_method") == "S256" and "nonce" in query,
              "docketd sends the browser to Glewlwyd with PKCE (S256) and a nonce")
        login = browser.get(authorization, allow_redirects=False).headers.get("Location", "")
        check(login.startswith(provider + "/login.html?"), "Glewlwyd sends the browser on to its login page")
        signed_in = browser.post(provider + "/api/auth/", json={"username": "john.doe", "password": "Glewlwyd-secret-1"})
        consent = browser.put(provider + "/api/auth/grant/docket", json={"scope": "openid profile email"})
        check(signed_in.status_code == 200 and consent.status_code == 200,
              f"signed in at Glewlwyd and allowed docketd ({signed_in.status_code}, {consent.status_code})")
        # The login page then returns to the authorization endpoint with g_continue, as Glewlwyd's page does.
        resume = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(login).query)).get("callback_url", authorization)
        back = browser.get(resume + "&g_continue", allow_redirects=False)
        callback = back.headers.get("Location", "")
        check(back.status_code == 302 and callback.startswith(base + "/app/sso/callback?") and "code=" in callback,
              f"Glewlwyd sends the browser back to docketd with a code ({back.status_code})")
        landed = browser.get(callback)
        check(landed.status_code == 200 and "Signed in" in landed.text and "docket_session" in browser.cookies,
              f"docketd exchanges the code, checks Glewlwyd's ID token and signs John in ({landed.status_code})")
        work = browser.get(base + "/app/work")
        check(work.status_code == 200 and "John Doe" in work.text, f"My work as John Doe after signing in with Glewlwyd ({work.status_code})")
        replay = requests.Session().get(callback)
        check(replay.status_code == 400 and "docket_session" not in replay.cookies,
              f"the same callback in another browser is refused ({replay.status_code})")

        # What must be refused.
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding, rsa
        foreign = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        header, payload, _ = access.split(".")
        signed = (header + "." + payload).encode()
        tampered_payload = b64(json.dumps(dict(claims(access), preferred_username="admin")).encode())
        refusals = {
            "Glewlwyd issued under an issuer docketd does not trust": token(provider, plugin="other"),
            "with a changed claim (preferred_username admin)": header + "." + tampered_payload + "." + access.split(".")[2],
            "signed by a key Glewlwyd never published": header + "." + payload + "." + b64(
                foreign.sign(signed, padding.PKCS1v15(), hashes.SHA256())),
            "unsigned (alg none)": b64(json.dumps({"alg": "none", "typ": "at+jwt"}).encode()) + "." + payload + ".",
        }
        for what, refused in refusals.items():
            answer = api(refused)
            check(answer.status_code == 401, f"a token {what} is refused ({answer.status_code})")

        # Glewlwyd stops: the key docketd already holds still verifies its tokens.
        glewlwyd.terminate()
        glewlwyd.wait(10)
        answer = api(access)
        check(answer.status_code == 200, f"with Glewlwyd stopped, its token of a known key still works ({answer.status_code})")
    finally:
        if process is not None:
            process.terminate()
            process.wait(10)
        if glewlwyd.poll() is None:
            glewlwyd.kill()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"glewlwyd: {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
